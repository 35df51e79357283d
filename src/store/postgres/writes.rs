//! The PostgreSQL store's writes that do more than one thing: a run and its question, the claim
//! with what it carries, and pruning. Each but pruning is one statement (data-modifying `WITH`
//! clauses), so one round trip, committed with the writes beside it (see `batch`).

use super::PostgresStore;
use super::batch::PgQuery;
use crate::question::{Approver, Outcome, Question, QuestionId};
use crate::run::{Run, RunStatus};
use crate::store::rows::{
    Bind, approvals_json, claimed_from_row, question_binds, question_from_row, run_binds, to_json,
};
use crate::store::{Claim, Login, LoginFind, Pruned, Resolution, RunAfter, StoreError, Write, Written};

/// Inserts or updates the run bound as `$1`…`$12` (in `run_columns!()` order), recording this
/// instance as its owner.
macro_rules! upsert_run {
    () => {
        concat!(
            "INSERT INTO runs (",
            run_columns!(),
            ", owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, current_setting('askgate.instance', true)) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, says = GREATEST(runs.says, excluded.says), \
             result = excluded.result, updated_at = excluded.updated_at, owner = excluded.owner"
        )
    };
}

/// What a won claim `c` carries: its run's change (`$22` the status, `$23` the result; see
/// `Resolution::run_after`), the inbound update `$9`, the grant `$10`…`$15` (and `$17`…`$19`,
/// `$21`), and the announcement `$8` (when `$16`: other instances listen); the question's row
/// comes back only when the claim won.
macro_rules! claim_tail {
    () => {
        "r AS (UPDATE runs SET status = $22, result = COALESCE($23, result), updated_at = $5, \
         owner = CASE WHEN $22 = 'running' THEN current_setting('askgate.instance', true) ELSE owner END \
         WHERE $22::text IS NOT NULL AND id = (SELECT run_id FROM c) AND status = 'waiting'), \
         i AS (INSERT INTO inbound (key, created_at) SELECT $9, $5 FROM c WHERE $9::text IS NOT NULL \
         ON CONFLICT DO NOTHING), \
         g AS (INSERT INTO grants (id, conversation, action, granted_by, question_id, created_at, expires_at, \
         granted_name, pattern, grantee) SELECT $10, $11, $12, $13, $14, $15::bigint, $17::bigint, $18, $19::bigint, \
         $21 FROM c \
         WHERE $10::text IS NOT NULL) \
         SELECT c.*, CASE WHEN $16::boolean THEN pg_notify('askgate', $8) END AS notified FROM c"
    };
}

/// Records the inbound update `$13` that brought the run bound as `$1`…`$12`, if any.
macro_rules! inbound_key {
    () => {
        "i AS (INSERT INTO inbound (key, created_at) SELECT $13, $11 WHERE $13::text IS NOT NULL ON CONFLICT DO NOTHING)"
    };
}

/// Binds `binds` in order, after those bound before.
pub(super) fn bind_all(query: PgQuery, binds: &[Bind<'_>]) -> PgQuery {
    binds.iter().fold(query, |query, bind| match bind {
        Bind::Int(i) => query.bind(*i),
        Bind::Text(s) => query.bind(s.as_deref()),
    })
}

/// Binds a run as `$1`…`$12` (in `run_columns!()` order) and its inbound update as `$13`.
fn bind_run(query: PgQuery, run: &Run) -> Result<PgQuery, StoreError> {
    Ok(bind_all(query, &run_binds(run)?).bind(run.update.as_deref()))
}

/// The oldest ended runs before `$1`, at most `$2` of them.
macro_rules! ended_runs_pg {
    () => {
        "SELECT id FROM runs WHERE status IN ('finished', 'failed', 'cancelled') AND updated_at < $1 \
         AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.run_id = runs.id AND c.delivered_at IS NULL \
         AND c.gave_up_at IS NULL) ORDER BY updated_at, id LIMIT $2"
    };
}

impl PostgresStore {
    /// Saves a run in one statement (with the inbound update that started it, if any).
    pub(super) async fn upsert_run(&self, run: &Run) -> Result<(), StoreError> {
        let upsert = bind_run(sqlx::query(concat!("WITH ", inbound_key!(), " ", upsert_run!())), run)?;
        self.writes.execute(upsert).await?;
        Ok(())
    }

    /// A run and its new question, and the announcement of it, in one statement: one round trip
    /// and one commit, shared with the writes beside it (see `batch`).
    pub(super) async fn ask_once(&self, run: &Run, q: &Question) -> Result<(), StoreError> {
        let ask = sqlx::query(concat!(
            "WITH ",
            inbound_key!(),
            ", r AS (",
            upsert_run!(),
            " RETURNING id), q AS (INSERT INTO questions (",
            question_columns!(),
            ") SELECT $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, \
             $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45 FROM r RETURNING id) \
             SELECT CASE WHEN $47::boolean THEN pg_notify('askgate', $46) END FROM q"
        ));
        // The run as `$1`…`$13`, the question as `$14`…`$45` in `question_columns!()` order.
        let ask = bind_all(bind_run(ask, run)?, &question_binds(q)?)
            .bind(self.announcement("asked", q.id))
            .bind(self.announcing());
        self.writes.execute(ask).await?;
        Ok(())
    }

    /// The claim-once write (see [`crate::store::StoreExt::resolve`]), in one statement with what
    /// it carries (the run's change, the inbound update, the grant) and its announcement: each
    /// of those only when the claim won.
    pub(super) async fn claim(&self, r: Resolution) -> Result<Claim, StoreError> {
        let id = r.question.id.to_string();
        // A person's claim waits for a racing one to commit, so that it loses with the winner's outcome; an
        // expiry skips a question another instance is claiming now (that one ends it either way,
        // and no sweeper waits on another's locks).
        let sql = if matches!(r.outcome, Outcome::Expired { .. }) {
            concat!(
                "WITH c AS (UPDATE questions SET status = $1, outcome = $2, answered_by = $3, answered_via = $4, \
                 resolved_at = $5, answered_name = $7, approvals = COALESCE($20, approvals) WHERE id = \
                 (SELECT id FROM questions WHERE id = $6 AND status = 'pending' FOR UPDATE SKIP LOCKED) RETURNING run_id, ",
                claim_returns!(),
                "), ",
                claim_tail!()
            )
        } else {
            concat!(
                "WITH c AS (UPDATE questions SET status = $1, outcome = $2, answered_by = $3, answered_via = $4, \
                 resolved_at = $5, answered_name = $7, approvals = COALESCE($20, approvals) WHERE id = $6 \
                 AND status = 'pending' RETURNING run_id, ",
                claim_returns!(),
                "), ",
                claim_tail!()
            )
        };
        let grant = r.grant.as_ref();
        // One statement: the run's result is written from the claimer's copy with the outcome
        // applied (the approvals a quorum claim brings are its own).
        let (run_status, run_result) = match r.run_after(&r.resolved()) {
            Some(RunAfter::Resume) => (Some(RunStatus::Running.as_str()), None),
            Some(RunAfter::Finish(result)) => (Some(RunStatus::Finished.as_str()), Some(result)),
            None => (None, None),
        };
        let claim = sqlx::query(sql)
            .bind(r.outcome.status().as_str())
            .bind(to_json(&r.outcome)?)
            .bind(r.by.as_deref())
            .bind(r.via.as_str())
            .bind(r.at)
            .bind(&id)
            .bind(r.name.as_deref())
            .bind(self.announcement("resolved", r.question.id))
            .bind(r.update.as_deref())
            .bind(grant.map(|g| g.id.as_str()))
            .bind(grant.map(|g| g.conversation.as_str()))
            .bind(grant.map(|g| g.action.as_str()))
            .bind(grant.map(|g| g.granted_by.as_str()))
            .bind(grant.map(|g| g.question.to_string()))
            .bind(grant.map(|g| g.created_at))
            .bind(self.announcing())
            .bind(grant.and_then(|g| g.expires_at))
            .bind(grant.and_then(|g| g.granted_name.as_deref()))
            .bind(grant.map(|g| i64::from(g.pattern)))
            .bind(r.approvals.as_deref().map(approvals_json).transpose()?.flatten())
            .bind(grant.map(|g| g.grantee.as_str()))
            .bind(run_status)
            .bind(run_result);
        // A won claim answers with the row as stored.
        if let Some(row) = self.writes.fetch_optional(claim).await? {
            return Ok(Claim::Won(claimed_from_row(&r, &row)?));
        }
        let row = sqlx::query(concat!("SELECT ", question_columns!(), " FROM questions WHERE id = $1"))
            .bind(&id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => Claim::Lost(question_from_row(&row)?),
            None => Claim::Missing,
        })
    }

    /// See [`crate::store::StoreExt::vote`]: one conditional update, announced when it counts.
    pub(super) async fn count_vote(
        &self,
        question: QuestionId,
        seen: &[Approver],
        approvals: &[Approver],
        update: Option<&str>,
    ) -> Result<bool, StoreError> {
        let vote = sqlx::query(
            "WITH v AS (UPDATE questions SET approvals = $2 WHERE id = $1 AND status = 'pending' \
             AND approvals IS NOT DISTINCT FROM $3 RETURNING id), \
             i AS (INSERT INTO inbound (key, created_at) SELECT $4, $5 FROM v WHERE $4::text IS NOT NULL \
             ON CONFLICT DO NOTHING) \
             SELECT CASE WHEN $7::boolean THEN pg_notify('askgate', $6) END FROM v",
        )
        .bind(question.to_string())
        .bind(approvals_json(approvals)?)
        .bind(approvals_json(seen)?)
        .bind(update)
        .bind(approvals.last().map_or(0, |a| a.at))
        .bind(self.announcement("counted", question))
        .bind(self.announcing());
        Ok(self.writes.execute(vote).await? == 1)
    }

    /// See [`crate::store::StoreExt::prune`].
    pub(super) async fn prune_old(
        &self,
        ended_before: Option<i64>,
        seen_before: i64,
        limit: u32,
    ) -> Result<Pruned, StoreError> {
        let limit = i64::from(limit);
        let mut pruned = Pruned::default();
        let mut tx = self.pool.begin().await?;
        if let Some(before) = ended_before {
            // The same oldest ended runs in each statement: an ended run does not change.
            for sql in [
                concat!(
                    "DELETE FROM deliveries WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                    ended_runs_pg!(),
                    "))"
                ),
                concat!(
                    "DELETE FROM form_drafts WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                    ended_runs_pg!(),
                    "))"
                ),
                concat!("DELETE FROM questions WHERE run_id IN (", ended_runs_pg!(), ")"),
            ] {
                sqlx::query(sql).bind(before).bind(limit).execute(&mut *tx).await?;
            }
            let runs = sqlx::query(concat!("DELETE FROM runs WHERE id IN (", ended_runs_pg!(), ")"))
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

    /// The people's credentials' writes (see [`crate::store::logins`]).
    pub(super) async fn logins_write(&self, write: Write) -> Result<Written, StoreError> {
        use crate::store::logins;
        Ok(match write {
            Write::AddLogin(l) => {
                let insert = sqlx::query(logins::INSERT)
                    .bind(l.name)
                    .bind(l.person.as_str().to_owned())
                    .bind(l.digest)
                    .bind(l.may.to_string())
                    .bind(l.created_at)
                    .bind(l.expires_at)
                    .bind(i64::from(l.link));
                Written::Changed(self.writes.execute(insert).await? == 1)
            }
            // Every other instance hears it in the same statement, whether or not it knows of
            // peers (revocations are rare, and one must reach what another holds open).
            Write::RemoveLogin { name } => {
                let said = format!("{} revoked {name}", self.instance);
                let remove = sqlx::query(logins::REMOVE_NOTIFYING).bind(name).bind(said);
                Written::Changed(self.writes.fetch_optional(remove).await?.is_some())
            }
            Write::UseLink { digest, now, name, session, until } => {
                let used = sqlx::query(logins::USE_LINK).bind(name).bind(session).bind(until).bind(digest).bind(now);
                let row = self.writes.fetch_optional(used).await?;
                Written::Login(row.as_ref().map(logins::from_row).transpose()?.map(Box::new))
            }
            // Only the credentials' writes come here (see `PostgresStore::write`).
            other => return Err(StoreError::Database(format!("not a credential's write: {other:?}"))),
        })
    }

    /// The credentials `find` selects.
    pub(super) async fn find_logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        use crate::store::logins;
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

    /// The callbacks' outbox writes (see [`crate::store::outbox`]).
    pub(super) async fn outbox(&self, write: Write) -> Result<Written, StoreError> {
        use crate::store::outbox;
        Ok(match write {
            Write::Callback(c) => {
                let insert = sqlx::query(outbox::INSERT)
                    .bind(c.id)
                    .bind(c.run.to_string())
                    .bind(c.question.map(|q| q.to_string()))
                    .bind(c.url)
                    .bind(outbox::headers_json(&c.headers)?)
                    .bind(c.secret)
                    .bind(c.created_at);
                self.writes.execute(insert).await?;
                Written::Done
            }
            Write::TakeCallback { id, now, until } => {
                let take = sqlx::query(outbox::TAKE).bind(until).bind(id).bind(now);
                Written::Changed(self.writes.execute(take).await? == 1)
            }
            Write::CallbackTried { id, at, lease, tried } => {
                let (delivered, gave_up, next, error) = outbox::tried_binds(&tried, at);
                let error = error.map(str::to_owned);
                let tried = sqlx::query(outbox::TRIED)
                    .bind(delivered)
                    .bind(gave_up)
                    .bind(next)
                    .bind(error)
                    .bind(id)
                    .bind(lease);
                Written::Changed(self.writes.execute(tried).await? == 1)
            }
            // Only the outbox's writes come here (see `PostgresStore::write`).
            _ => Written::Done,
        })
    }
}
