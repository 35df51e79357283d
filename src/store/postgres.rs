//! The PostgreSQL store: a pool of connections; each write is one statement, committed with the
//! writes that arrive beside it (group commit, see `batch`). The schema
//! (migrations/postgres) keeps the rules SQLite's does: closed statuses and unique inbound keys;
//! the claim's statement changes its run too (see `writes`).
//!
//! The claim is one conditional `UPDATE … WHERE status = 'pending'`: under PostgreSQL's row locks
//! a second claimer waits for the first to commit, sees the row no longer pending, and loses, so
//! exactly one claim wins however many connections (or askgate instances) race.
//!
//! Several instances share the database (see `instances`). Each is a row of `instances` with a
//! heartbeat renewed every 3 s and an advisory lock held on a connection of its own; each run
//! records the instance that runs it (`runs.owner`). One whose heartbeat lapsed for 10 s, or for
//! 5 s with its lock free (its process died), is dead: the first survivor to ask takes its running runs
//! over (one conditional `UPDATE`, so one survivor each) and cancels its blocking questions. An
//! ask and a winning claim also `NOTIFY askgate` in their transaction; every other instance
//! `LISTEN`s and hears of it as it commits (its waiters wake, its event streams carry it).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Row};

mod batch;
mod connect;
mod instances;
pub(super) use instances::LOCK_SPACE;
mod writes;

use instances::{CHANNEL, background, hold_lock, instance_id, sign_on};
pub use instances::{InstanceRow, instances};

use super::command::{Deliver, FinishRun, Nudge, Remember, RevokeGrant, SaveRun, Says, Seen, SetDraft, TakeOrphans};
use super::reads::{self, Dialect, Reads, Select};
use super::rows::{Columns, delivery_from_row, page, page_after};
use super::{
    Callback, CardFind, Change, Delivery, Find, Grant, GrantFind, Login, LoginFind, QuestionFilter, Resume, RunEvent,
    Shared, Store, StoreError, Undelivered, Unshown, Write,
};
use crate::question::form::Draft;
use crate::question::{Conversation, Kind, Question, QuestionId, RunId, Status};
use crate::run::Run;

/// PostgreSQL through sqlx.
pub struct PostgresStore {
    pool: PgPool,
    /// How to connect (leases take connections of their own).
    options: PgConnectOptions,
    /// This instance's id: `<host>:<pid>:<random>`.
    instance: String,
    /// Whether other instances live: only then are asks and claims announced (a `NOTIFY`
    /// serializes commits across the database, so a lone instance does without).
    peers: Arc<AtomicBool>,
    /// The heartbeat and the listener, stopped at close.
    tasks: tokio_util::task::AbortOnDropHandle<()>,
    /// The writes, committed in groups (see `batch`).
    writes: batch::Writes,
    changes: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Change>>>,
}

/// Whether `url` names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:5432/name`) and applies the
    /// migrations. Several askgate instances may share one database.
    ///
    /// # Errors
    /// When the URL does not parse, the server cannot be reached, or a migration fails.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| {
            StoreError::Database(format!("`{}` is not a PostgreSQL URL: {e}", redact(url)))
        })?;
        let options = options.application_name("askgate").disable_statement_logging();
        let (host, instance) = instance_id();
        let named = instance.clone();
        connect::first_connection(&options).await?;
        let pool = PgPoolOptions::new()
            .min_connections(1)
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            // Every write of a run records which instance wrote it (see the migrations).
            .after_connect(move |connection, _| {
                let named = named.clone();
                Box::pin(async move {
                    sqlx::query("SELECT set_config('askgate.instance', $1, false)")
                        .bind(named)
                        .execute(connection)
                        .await
                        .map(|_| ())
                })
            })
            .connect_with(options.clone())
            .await?;
        super::migrations::postgres().run(&pool).await?;
        let (lock, lock_key) = sign_on(&pool, &options, &instance, &host).await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        // The others announce their asks and claims from now on (they stay quiet while alone).
        sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(format!("{instance} hello")).execute(&pool).await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // Until the first heartbeat says otherwise, assume others listen (and say hello below).
        let peers = Arc::new(AtomicBool::new(true));
        let heartbeat = background(pool.clone(), instance.clone(), listener, tx, peers.clone(), lock_key);
        let holder = hold_lock(options.clone(), lock, lock_key);
        let tasks = tokio::spawn(async move {
            futures_util::future::join(heartbeat, holder).await;
        });
        let writes = batch::Writes::start(&pool);
        tracing::info!(instance = %instance, "PostgreSQL store open; several askgate instances may share it");
        Ok(Self {
            pool,
            options,
            instance,
            peers,
            tasks: tokio_util::task::AbortOnDropHandle::new(tasks),
            writes,
            changes: Mutex::new(Some(rx)),
        })
    }

    /// Whether this instance knows of others (and so announces its asks and claims to them):
    /// set when another says anything, cleared when every other's heartbeat lapsed.
    pub fn hears_others(&self) -> bool {
        self.peers.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn announcing(&self) -> bool {
        self.hears_others()
    }

    /// What `NOTIFY askgate` says of a question: `<instance> asked|resolved <id>`.
    fn announcement(&self, what: &str, question: QuestionId) -> String {
        format!("{} {what} {question}", self.instance)
    }

    /// `<instance> run.<event> <the run as JSON>`, or its id in place of the JSON when that
    /// would not fit in a notification (under 8,000 bytes).
    fn run_announcement(&self, event: RunEvent, run: &Run) -> String {
        let said = serde_json::to_string(run).map(|json| format!("{} {event} {json}", self.instance));
        match said {
            Ok(said) if said.len() < 7_900 => said,
            _ => format!("{} {event} {}", self.instance, run.id),
        }
    }
}

/// The URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl Columns for PgRow {
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }

    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(col)?)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn write(&self, write: Write) {
        match write {
            Write::SaveRun(call) => call.answer_async(|SaveRun(run)| async move { self.upsert_run(&run).await }).await,
            Write::FinishRun(call) => call.answer_async(|finish| self.end_run(finish)).await,
            Write::Ask(call) => call.answer_async(|ask| self.ask_once(ask)).await,
            Write::Resolve(call) => call.answer_async(|resolve| self.claim(resolve)).await,
            Write::Vote(call) => call.answer_async(|vote| self.count_vote(vote)).await,
            Write::Nudge(call) => call.answer_async(|nudge| self.move_nudge(nudge)).await,
            Write::Deliver(call) => call.answer_async(|Deliver(d)| async move { self.record_delivery(&d).await }).await,
            Write::RevokeGrant(call) => call.answer_async(|revoke| self.revoke(revoke)).await,
            Write::Seen(call) => call.answer_async(|seen| self.record_seen(seen)).await,
            Write::Says(call) => call.answer_async(|says| self.record_says(says)).await,
            Write::AddCallback(call) => call.answer_async(|callback| self.add_callback(callback)).await,
            Write::TakeCallback(call) => call.answer_async(|take| self.take_callback(take)).await,
            Write::CallbackTried(call) => call.answer_async(|tried| self.callback_tried(tried)).await,
            Write::AddLogin(call) => call.answer_async(|login| self.add_login(login)).await,
            Write::RemoveLogin(call) => call.answer_async(|remove| self.remove_login(remove)).await,
            Write::UseLink(call) => call.answer_async(|link| self.use_link(link)).await,
            Write::SetDraft(call) => call.answer_async(|draft| self.set_draft(draft)).await,
            Write::Remember(call) => call.answer_async(|note| self.remember(note)).await,
            Write::Prune(call) => call.answer_async(|prune| self.prune_old(prune)).await,
            Write::TakeOrphans(call) => call.answer_async(|TakeOrphans| self.take_orphans()).await,
        }
    }

    fn sharing(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    async fn questions(&self, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
        reads::questions(self, find).await
    }

    async fn run_record(&self, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError> {
        reads::run(self, id, journal).await
    }

    async fn find_grants(&self, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
        reads::grants(self, find).await
    }

    async fn due_callbacks(&self, now: i64, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError> {
        reads::due_callbacks(self, now, to, limit).await
    }

    async fn callbacks_open(&self, to: &str) -> Result<bool, StoreError> {
        reads::callbacks_open(self, to).await
    }

    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        // `seq` grows with every insert: a cursor is the last `seq` of a page.
        let after = page_after(cursor)?;
        let limit = limit.max(1);
        let sql = if filter.status == Some(Status::Pending) {
            concat!(
                "SELECT seq AS page_key, ",
                question_columns!(),
                " FROM questions WHERE status = 'pending' AND ($1::text IS NULL OR conversation = $1) \
                 AND ($2::bigint IS NULL OR seq > $2) AND ($5::text IS NULL OR kind = $5) ORDER BY seq LIMIT $3"
            )
        } else {
            concat!(
                "SELECT seq AS page_key, ",
                question_columns!(),
                " FROM questions WHERE ($1::text IS NULL OR conversation = $1) AND ($4::text IS NULL OR status = $4) \
                 AND ($2::bigint IS NULL OR seq < $2) AND ($5::text IS NULL OR kind = $5) ORDER BY seq DESC LIMIT $3"
            )
        };
        let rows = sqlx::query(sql)
            .bind(filter.conversation.as_ref().map(Conversation::as_str))
            .bind(after)
            .bind(i64::from(limit))
            .bind(filter.status.map(Status::as_str))
            .bind(filter.kind.map(Kind::as_str))
            .fetch_all(&self.pool)
            .await?;
        page(&rows, limit)
    }

    async fn cards(&self, find: CardFind<'_>) -> Result<Vec<Delivery>, StoreError> {
        let ids = match find {
            CardFind::Of(ids) => ids,
            CardFind::At { surface, chat, message } => return reads::card_at(self, surface, chat, message).await,
        };
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let rows = sqlx::query(
            "SELECT question_id, surface, chat, message, role, conversation FROM deliveries \
             WHERE question_id = ANY($1) ORDER BY created_at",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    async fn question_with_asker(&self, id: QuestionId) -> Result<Option<(Question, Option<String>)>, StoreError> {
        reads::question_with_asker(self, id).await
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        reads::pending_count(self).await
    }

    async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        reads::next_deadline(self).await
    }

    async fn undelivered(&self, find: Unshown<'_>) -> Result<Vec<Undelivered>, StoreError> {
        reads::undelivered(self, find).await
    }

    async fn logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        self.find_logins(find).await
    }

    async fn seen(&self, key: &str) -> Result<bool, StoreError> {
        reads::seen(self, key).await
    }

    async fn draft(&self, question: QuestionId, person: &str) -> Result<Option<Draft>, StoreError> {
        reads::draft(self, question, person).await
    }

    async fn note(&self, key: &str) -> Result<Option<super::Note>, StoreError> {
        reads::note(self, key).await
    }

    async fn close(&self) {
        self.tasks.abort();
        // Gone at once: the others take its running runs over without waiting for the lapse.
        let left = sqlx::query("DELETE FROM instances WHERE id = $1").bind(&self.instance).execute(&self.pool).await;
        if let Err(e) = left {
            tracing::warn!(error = %e, "could not sign this instance off; the others wait for its heartbeat to lapse");
        }
        self.pool.close().await;
    }
}

#[async_trait]
impl Reads for PostgresStore {
    type Row = PgRow;
    const DIALECT: Dialect = Dialect::Postgres;

    async fn rows(&self, select: Select<'_>) -> Result<Vec<Self::Row>, StoreError> {
        Ok(writes::bind_all(sqlx::query(select.sql), &select.binds).fetch_all(&self.pool).await?)
    }
}

/// The writes [`Store::write`] hands on, each one statement.
impl PostgresStore {
    async fn end_run(&self, FinishRun { id, status, result, at }: FinishRun) -> Result<bool, StoreError> {
        let finish = sqlx::query("UPDATE runs SET status = $1, result = $2, updated_at = $3 WHERE id = $4")
            .bind(status.as_str())
            .bind(result)
            .bind(at)
            .bind(id.to_string());
        Ok(self.writes.execute(finish).await? == 1)
    }

    async fn move_nudge(&self, Nudge { question, seen, next, escalated_to }: Nudge) -> Result<bool, StoreError> {
        let moved = sqlx::query(
            "UPDATE questions SET nudge_at = $1, escalated_to = COALESCE($2, escalated_to) \
             WHERE id = $3 AND status = 'pending' AND nudge_at = $4",
        )
        .bind(next)
        .bind(escalated_to.as_ref().map(Conversation::as_str))
        .bind(question.to_string())
        .bind(seen);
        Ok(self.writes.execute(moved).await? == 1)
    }

    async fn record_delivery(&self, d: &Delivery) -> Result<(), StoreError> {
        let add = sqlx::query(
            "INSERT INTO deliveries (question_id, surface, chat, message, role, conversation, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint) \
             ON CONFLICT DO NOTHING",
        )
        .bind(d.question.to_string())
        .bind(d.surface.as_str())
        .bind(&d.chat)
        .bind(&d.message)
        .bind(d.role.as_str())
        .bind(d.conversation.as_ref().map(Conversation::as_str));
        self.writes.execute(add).await?;
        Ok(())
    }

    async fn revoke(&self, RevokeGrant { id, at }: RevokeGrant) -> Result<bool, StoreError> {
        let revoke = sqlx::query(
            "UPDATE grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > $1)",
        )
        .bind(at)
        .bind(id);
        Ok(self.writes.execute(revoke).await? == 1)
    }

    async fn record_seen(&self, Seen { key, at }: Seen) -> Result<bool, StoreError> {
        let first = sqlx::query("INSERT INTO inbound (key, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(key)
            .bind(at);
        Ok(self.writes.execute(first).await? == 1)
    }

    async fn set_draft(&self, SetDraft { question, person, draft, at }: SetDraft) -> Result<(), StoreError> {
        let question = question.to_string();
        let write = match draft {
            Some(draft) => {
                sqlx::query(super::drafts::SET).bind(question).bind(person).bind(super::rows::to_json(&draft)?).bind(at)
            }
            None => sqlx::query(super::drafts::CLEAR).bind(question).bind(person),
        };
        self.writes.execute(write).await?;
        Ok(())
    }

    async fn remember(&self, Remember { key, value, at }: Remember) -> Result<(), StoreError> {
        self.writes.execute(sqlx::query(super::notes::SET).bind(key).bind(value).bind(at)).await?;
        Ok(())
    }

    async fn record_says(&self, Says { run, says }: Says) -> Result<(), StoreError> {
        let says = sqlx::query("UPDATE runs SET says = GREATEST(says, $1) WHERE id = $2")
            .bind(i64::from(says))
            .bind(run.to_string());
        self.writes.execute(says).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_url_in_a_message_hides_its_password() {
        assert_eq!(redact("postgres://ask:s3cret@db:5432/askgate"), "postgres://ask:***@db:5432/askgate");
        assert_eq!(redact("postgres://postgres@127.0.0.1/x"), "postgres://postgres@127.0.0.1/x");
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
    }
}
