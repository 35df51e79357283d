//! The PostgreSQL store's writes that do more than one thing: a run and its question, the claim
//! with what it carries, and pruning. Each but pruning is one statement (data-modifying `WITH`
//! clauses), so one round trip, committed with the writes beside it (see `batch`).

use super::PostgresStore;
use super::batch::PgQuery;
use std::sync::LazyLock;

use sqlx::Row;

use crate::question::Outcome;
use crate::run::Run;
use crate::store::command::{
    AddCallback, AddLogin, Ask, CallbackTried, Prune, RemoveLogin, Resolve, TakeCallback, UseLink, Vote,
};
use crate::store::named::{Named, row_names, row_params};
use crate::store::reads::Dialect;
use crate::store::rows::{
    Bind, Columns, approvals_json, claimed_from_row, corrupt, question_binds, question_from_row, run_binds, to_json,
};
use crate::store::{Claim, Login, LoginFind, Pruned, RunWritten, StoreError};
use crate::store::{logins, outbox};

/// The claim-once write, in one statement with what a won claim carries: its run's change
/// (only a waiting run's; see `Resolution::run_after`), the inbound update, the grant, and the
/// announcement (when other instances listen); the question's row comes back only when the
/// claim won, with whether the run was written (`run_written`). `{pending}` is which pending
/// question it closes (see [`claim_sql`]).
const CLAIM: &str = concat!(
    "WITH c AS (UPDATE questions SET status = :status, outcome = :outcome, answered_by = :by, \
     answered_via = :via, resolved_at = :at, answered_name = :name, approvals = COALESCE(:approvals, approvals) \
     WHERE {pending} RETURNING run_id, ",
    claim_returns!(),
    "), r AS (UPDATE runs SET status = :run_status, result = COALESCE(:run_result, result), updated_at = :at, \
     owner = CASE WHEN :run_status = 'running' THEN current_setting('askgate.instance', true) ELSE owner END \
     WHERE :run_status::text IS NOT NULL AND id = (SELECT run_id FROM c) AND status = 'waiting' RETURNING id), \
     i AS (INSERT INTO inbound (key, created_at) SELECT :update, :at FROM c WHERE :update::text IS NOT NULL \
     ON CONFLICT DO NOTHING), \
     g AS (INSERT INTO grants (",
    grant_columns!(),
    ") SELECT :g_id, :g_conversation, :g_action, :g_granted_by, :g_question_id, :g_created_at::bigint, \
     :g_expires_at::bigint, :g_granted_name, :g_pattern::bigint, :g_grantee FROM c WHERE :g_id::text IS NOT NULL) \
     SELECT c.*, EXISTS (SELECT 1 FROM r) AS run_written, \
     CASE WHEN :announcing::boolean THEN pg_notify('askgate', :announcement) END AS notified FROM c"
);

/// The claim's statement: a person's claim waits for a racing one to commit, so that it loses
/// with the winner's outcome; an expiry skips a question another instance is claiming now (that
/// one ends it either way, and no sweeper waits on another's locks).
fn claim_sql(expiry: bool) -> &'static Named {
    static WAITING: LazyLock<Named> =
        LazyLock::new(|| Named::new(Dialect::Postgres, &CLAIM.replace("{pending}", "id = :id AND status = 'pending'")));
    static SKIPPING: LazyLock<Named> = LazyLock::new(|| {
        let pending = "id = (SELECT id FROM questions WHERE id = :id AND status = 'pending' FOR UPDATE SKIP LOCKED)";
        Named::new(Dialect::Postgres, &CLAIM.replace("{pending}", pending))
    });
    if expiry { &SKIPPING } else { &WAITING }
}

/// A run and its new question, and the announcement of it, in one statement: the run's
/// values as `:r_<column>`, the question's as `:q_<column>`.
fn ask_sql() -> &'static Named {
    static ASK: LazyLock<Named> = LazyLock::new(|| {
        let sql = format!(
            concat!(
                "WITH {inbound}, r AS ({run} RETURNING id), q AS (INSERT INTO questions (",
                question_columns!(),
                ") SELECT {question} FROM r RETURNING seq) \
                 SELECT q.seq AS place, CASE WHEN :announcing::boolean THEN pg_notify('askgate', :announcement) END \
                 AS notified FROM q"
            ),
            inbound = INBOUND_KEY,
            run = upsert_run(),
            question = row_params("q_", question_columns!()),
        );
        Named::new(Dialect::Postgres, &sql)
    });
    &ASK
}

/// A value bound by name to a PostgreSQL statement.
#[derive(Clone, Debug)]
enum Value<'a> {
    Bind(Bind<'a>),
    Bool(bool),
}

impl<'a, T: Into<Bind<'a>>> From<T> for Value<'a> {
    fn from(value: T) -> Self {
        Self::Bind(value.into())
    }
}

/// `statement` with `values` bound by name.
fn bind_named(statement: &'static Named, values: &[(&str, Value<'_>)]) -> Result<PgQuery, StoreError> {
    Ok(statement.order(values)?.into_iter().fold(sqlx::query(statement.sql()), |query, value| match value {
        Value::Bind(Bind::Int(i)) => query.bind(*i),
        Value::Bind(Bind::Text(s)) => query.bind(s.as_deref()),
        Value::Bool(b) => query.bind(*b),
    }))
}

/// Binds `binds` in order, after those bound before.
pub(super) fn bind_all(query: PgQuery, binds: &[Bind<'_>]) -> PgQuery {
    binds.iter().fold(query, |query, bind| match bind {
        Bind::Int(i) => query.bind(*i),
        Bind::Text(s) => query.bind(s.as_deref()),
    })
}

/// Records the inbound update that brought the run, if any: a clause of a statement that
/// saves a run.
const INBOUND_KEY: &str = "i AS (INSERT INTO inbound (key, created_at) SELECT :update, :r_updated_at \
     WHERE :update::text IS NOT NULL ON CONFLICT DO NOTHING)";

/// Inserts or updates the run (its values as `:r_<column>`), recording this instance as its
/// owner.
fn upsert_run() -> String {
    format!(
        concat!(
            "INSERT INTO runs (",
            run_columns!(),
            ", owner) VALUES ({}, current_setting('askgate.instance', true)) ON CONFLICT (id) DO UPDATE \
             SET status = excluded.status, says = GREATEST(runs.says, excluded.says), result = excluded.result, \
             updated_at = excluded.updated_at, owner = excluded.owner"
        ),
        row_params("r_", run_columns!())
    )
}

/// A run's values by name, and the inbound update that brought it.
fn run_values(run: &Run) -> Result<Vec<(&'static str, Value<'_>)>, StoreError> {
    static RUN: LazyLock<Vec<String>> = LazyLock::new(|| row_names("r_", run_columns!()));
    let mut values = Vec::with_capacity(RUN.len() + 1 + QUESTION.len() + 2);
    values.push(("update", run.update.as_deref().into()));
    values.extend(RUN.iter().map(String::as_str).zip(run_binds(run)?.map(Value::Bind)));
    Ok(values)
}

/// The names of a question's values (`:q_<column>`).
static QUESTION: LazyLock<Vec<String>> = LazyLock::new(|| row_names("q_", question_columns!()));

impl PostgresStore {
    /// Saves a run in one statement (with the inbound update that started it, if any).
    pub(super) async fn upsert_run(&self, run: &Run) -> Result<(), StoreError> {
        static SAVE: LazyLock<Named> =
            LazyLock::new(|| Named::new(Dialect::Postgres, &format!("WITH {INBOUND_KEY} {}", upsert_run())));
        self.writes.execute(bind_named(&SAVE, &run_values(run)?)?).await?;
        Ok(())
    }

    /// A run and its new question, and the announcement of it, in one statement: one round trip
    /// and one commit, shared with the writes beside it (see `batch`).
    pub(super) async fn ask_once(&self, Ask { run, question }: Ask) -> Result<i64, StoreError> {
        let mut values = run_values(&run)?;
        values.extend(QUESTION.iter().map(String::as_str).zip(question_binds(&question)?.map(Value::Bind)));
        values.push(("announcing", Value::Bool(self.announcing())));
        values.push(("announcement", self.announcement("asked", question.id).into()));
        let row = self.writes.fetch_optional(bind_named(ask_sql(), &values)?).await?;
        row.map_or_else(|| Err(corrupt("place", "missing")), |row| row.req_int("place"))
    }

    /// The claim-once write (see [`crate::store::StoreExt::resolve`]), in one statement with what
    /// it carries (the run's change, the inbound update, the grant) and its announcement: each
    /// of those only when the claim won.
    pub(super) async fn claim(&self, Resolve(r): Resolve) -> Result<Box<Claim>, StoreError> {
        let id = r.question.id.to_string();
        let grant = r.grant.as_ref();
        // The run's result is written from the claimer's copy with the outcome applied (the
        // approvals a quorum claim brings are its own).
        let change = r.run_after(&r.resolved()).map(|after| RunWritten::new(after, r.at));
        let (run_status, run_result) = match &change {
            Some(change) => (Some(change.status.as_str()), change.result.as_deref()),
            None => (None, None),
        };
        let statement = claim_sql(matches!(r.outcome, Outcome::Expired { .. }));
        let claim = bind_named(
            statement,
            &[
                ("status", r.outcome.status().as_str().into()),
                ("outcome", to_json(&r.outcome)?.into()),
                ("by", r.by.as_deref().into()),
                ("via", r.via.as_str().into()),
                ("at", r.at.into()),
                ("name", r.name.as_deref().into()),
                ("approvals", r.approvals.as_deref().map(approvals_json).transpose()?.flatten().into()),
                ("id", id.as_str().into()),
                ("run_status", run_status.into()),
                ("run_result", run_result.into()),
                ("update", r.update.as_deref().into()),
                ("g_id", grant.map(|g| g.id.as_str()).into()),
                ("g_conversation", grant.map(|g| g.conversation.as_str()).into()),
                ("g_action", grant.map(|g| g.action.as_str()).into()),
                ("g_granted_by", grant.map(|g| g.granted_by.as_str()).into()),
                ("g_question_id", grant.map(|g| g.question.to_string()).into()),
                ("g_created_at", grant.map(|g| g.created_at).into()),
                ("g_expires_at", grant.and_then(|g| g.expires_at).into()),
                ("g_granted_name", grant.and_then(|g| g.granted_name.as_deref()).into()),
                ("g_pattern", grant.map(|g| i64::from(g.pattern)).into()),
                ("g_grantee", grant.map(|g| g.grantee.as_str()).into()),
                ("announcing", Value::Bool(self.announcing())),
                ("announcement", self.announcement("resolved", r.question.id).into()),
            ],
        )?;
        // A won claim answers with the row as stored.
        if let Some(row) = self.writes.fetch_optional(claim).await? {
            let written = if row.try_get::<bool, _>("run_written")? { change } else { None };
            return Ok(Box::new(Claim::Won(claimed_from_row(&r, &row)?, written)));
        }
        let row = sqlx::query(concat!("SELECT ", question_columns!(), " FROM questions WHERE id = $1"))
            .bind(&id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(Box::new(match row {
            Some(row) => Claim::Lost(question_from_row(&row)?),
            None => Claim::Missing,
        }))
    }

    /// See [`crate::store::StoreExt::vote`]: one conditional update, announced when it counts.
    pub(super) async fn count_vote(
        &self,
        Vote { question, seen, approvals, update }: Vote,
    ) -> Result<bool, StoreError> {
        let vote = sqlx::query(
            "WITH v AS (UPDATE questions SET approvals = $2 WHERE id = $1 AND status = 'pending' \
             AND approvals IS NOT DISTINCT FROM $3 RETURNING id), \
             i AS (INSERT INTO inbound (key, created_at) SELECT $4, $5 FROM v WHERE $4::text IS NOT NULL \
             ON CONFLICT DO NOTHING) \
             SELECT CASE WHEN $7::boolean THEN pg_notify('askgate', $6) END FROM v",
        )
        .bind(question.to_string())
        .bind(approvals_json(&approvals)?)
        .bind(approvals_json(&seen)?)
        .bind(update)
        .bind(approvals.last().map_or(0, |a| a.at))
        .bind(self.announcement("counted", question))
        .bind(self.announcing());
        Ok(self.writes.execute(vote).await? == 1)
    }

    /// See [`crate::store::StoreExt::prune`].
    pub(super) async fn prune_old(
        &self,
        Prune { ended_before, seen_before, limit }: Prune,
    ) -> Result<Pruned, StoreError> {
        let limit = i64::from(limit);
        let mut pruned = Pruned::default();
        let mut tx = self.pool.begin().await?;
        if let Some(before) = ended_before {
            // The same oldest ended runs in each statement: an ended run does not change.
            for sql in [
                concat!(
                    "DELETE FROM deliveries WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                    ended_runs!(),
                    "))"
                ),
                concat!(
                    "DELETE FROM form_drafts WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                    ended_runs!(),
                    "))"
                ),
                concat!("DELETE FROM questions WHERE run_id IN (", ended_runs!(), ")"),
            ] {
                sqlx::query(sql).bind(before).bind(limit).execute(&mut *tx).await?;
            }
            let runs = sqlx::query(concat!("DELETE FROM runs WHERE id IN (", ended_runs!(), ")"))
                .bind(before)
                .bind(limit)
                .execute(&mut *tx)
                .await?;
            pruned.runs = runs.rows_affected();
            sqlx::query(crate::store::outbox::PRUNE).bind(before).bind(limit).execute(&mut *tx).await?;
        }
        let inbound = sqlx::query(
            "DELETE FROM inbound WHERE key IN (SELECT key FROM inbound WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
        )
        .bind(seen_before)
        .bind(limit)
        .execute(&mut *tx)
        .await?;
        pruned.inbound = inbound.rows_affected();
        sqlx::query(crate::store::logins::PRUNE).bind(seen_before).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(pruned)
    }

    /// See [`AddLogin`].
    pub(super) async fn add_login(&self, AddLogin(l): AddLogin) -> Result<bool, StoreError> {
        let insert = sqlx::query(logins::INSERT)
            .bind(l.name)
            .bind(l.person.as_str().to_owned())
            .bind(l.digest)
            .bind(l.may.to_string())
            .bind(l.created_at)
            .bind(l.expires_at)
            .bind(i64::from(l.link));
        Ok(self.writes.execute(insert).await? == 1)
    }

    /// See [`RemoveLogin`]. Every other instance hears it in the same statement, whether or not
    /// it knows of peers (revocations are rare, and one must reach what another holds open).
    pub(super) async fn remove_login(&self, RemoveLogin { name }: RemoveLogin) -> Result<bool, StoreError> {
        let said = format!("{} revoked {name}", self.instance);
        let remove = sqlx::query(logins::REMOVE_NOTIFYING).bind(name).bind(said);
        Ok(self.writes.fetch_optional(remove).await?.is_some())
    }

    /// See [`UseLink`].
    pub(super) async fn use_link(&self, link: UseLink) -> Result<Option<Box<Login>>, StoreError> {
        let UseLink { digest, now, name, session, until } = link;
        let used = sqlx::query(logins::USE_LINK).bind(name).bind(session).bind(until).bind(digest).bind(now);
        Ok(self.writes.fetch_optional(used).await?.as_ref().map(logins::from_row).transpose()?.map(Box::new))
    }

    /// The credentials `find` selects.
    pub(super) async fn find_logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        let rows = match find {
            LoginFind::Secret { digest, now } => {
                sqlx::query(logins::BY_SECRET).bind(digest).bind(now).fetch_all(&self.pool).await?
            }
            LoginFind::Link { digest, now } => {
                sqlx::query(logins::BY_LINK).bind(digest).bind(now).fetch_all(&self.pool).await?
            }
            LoginFind::All { now } => sqlx::query(logins::ALL).bind(now).fetch_all(&self.pool).await?,
        };
        rows.iter().map(logins::from_row).collect()
    }

    /// See [`AddCallback`].
    pub(super) async fn add_callback(&self, AddCallback(c): AddCallback) -> Result<(), StoreError> {
        let insert = sqlx::query(outbox::INSERT)
            .bind(c.id)
            .bind(c.run.to_string())
            .bind(c.question.map(|q| q.to_string()))
            .bind(c.url)
            .bind(outbox::headers_json(&c.headers)?)
            .bind(c.secret)
            .bind(c.created_at);
        self.writes.execute(insert).await?;
        Ok(())
    }

    /// See [`TakeCallback`].
    pub(super) async fn take_callback(
        &self,
        TakeCallback { id, now, until }: TakeCallback,
    ) -> Result<bool, StoreError> {
        let take = sqlx::query(outbox::TAKE).bind(until).bind(id).bind(now);
        Ok(self.writes.execute(take).await? == 1)
    }

    /// See [`CallbackTried`].
    pub(super) async fn callback_tried(&self, tried: CallbackTried) -> Result<bool, StoreError> {
        let CallbackTried { id, at, lease, tried } = tried;
        let (delivered, gave_up, next, error) = outbox::tried_binds(&tried, at);
        let error = error.map(str::to_owned);
        let tried =
            sqlx::query(outbox::TRIED).bind(delivered).bind(gave_up).bind(next).bind(error).bind(id).bind(lease);
        Ok(self.writes.execute(tried).await? == 1)
    }
}
