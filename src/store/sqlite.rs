//! The SQLite store: one writer connection that commits concurrent writes together, and a
//! small pool of reader connections (WAL lets them read while the writer writes).
//!
//! Group commit is what makes many conversations cheap: a commit costs far more than a
//! statement, so every write that arrives while one transaction runs joins the next one.
//! Callers are answered only after their transaction committed.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{Claim, Delivery, Grant, Resolution, Store, StoreError};
use crate::question::{Conversation, Question, QuestionId, RunId, UserRef};
use crate::run::Run;

/// How hard SQLite syncs to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// WAL with `synchronous=NORMAL`: a crash of askgate loses nothing; a power loss may lose
    /// the last commits.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit survives a power loss, at the cost of an fsync each.
    Full,
}

/// The most writes that share one transaction.
const MAX_BATCH: usize = 512;

macro_rules! question_columns {
    () => {
        "id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom, \
         default_json, answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, \
         answered_via"
    };
}

macro_rules! run_columns {
    () => {
        "id, function, conversation, initiator, input, mode, status, says, result, created_at, updated_at"
    };
}

/// SQLite through sqlx.
pub struct SqliteStore {
    readers: SqlitePool,
    writes: mpsc::UnboundedSender<Job>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

enum Op {
    SaveRun(Run),
    Ask(Box<(Run, Question)>),
    Resolve(Resolution),
    Delivery(Delivery),
    RevokeGrant(String, i64),
    Seen(String, i64),
    Says(RunId, u32),
    /// Ends the writer after the writes queued before it.
    Close,
}

enum Done {
    Unit,
    Flag(bool),
    Claimed(Option<Box<Question>>),
}

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://askgate.db`, or a path),
    /// applies the migrations, and starts the writer.
    ///
    /// # Errors
    /// When the file cannot be opened or created, or a migration fails.
    pub async fn open(url: &str, sync: Synchronous) -> Result<Self, StoreError> {
        let options = if url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(url)?
        } else {
            SqliteConnectOptions::new().filename(Path::new(url))
        };
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match sync {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
            })
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .disable_statement_logging();
        let mut writer = options.connect().await?;
        sqlx::migrate!("./migrations").run(&mut writer).await?;
        let readers = SqlitePoolOptions::new()
            .min_connections(1)
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await?;
        let (writes, queue) = mpsc::unbounded_channel();
        let handle = tokio::spawn(write_loop(writer, queue));
        Ok(Self { readers, writes, writer: Mutex::new(Some(handle)) })
    }

    async fn write(&self, op: Op) -> Result<Done, StoreError> {
        let (reply, done) = oneshot::channel();
        self.writes.send(Job { op, reply }).map_err(|_| StoreError::Closed)?;
        done.await.map_err(|_| StoreError::Closed)?
    }
}

async fn write_loop(mut conn: SqliteConnection, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut closing = None;
    while closing.is_none() && queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if let Some(at) = batch.iter().position(|j| matches!(j.op, Op::Close)) {
            closing = Some(batch.remove(at));
            batch.truncate(at.min(batch.len()));
        }
        let results = commit_batch(&mut conn, &batch).await;
        for (job, result) in batch.drain(..).zip(results) {
            // A caller that stopped waiting no longer needs the answer; the write stands.
            let _ = job.reply.send(result);
        }
    }
    queue.close();
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
    if let Some(job) = closing {
        let _ = job.reply.send(Ok(Done::Unit));
    }
}

/// Applies a batch in one transaction. If any write fails, the transaction is rolled back and
/// each write is retried in a transaction of its own, so one bad write fails only its caller.
async fn commit_batch(conn: &mut SqliteConnection, batch: &[Job]) -> Vec<Result<Done, StoreError>> {
    if batch.len() > 1
        && let Ok(results) = try_batch(conn, batch).await
    {
        return results.into_iter().map(Ok).collect();
    }
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        results.push(try_batch(conn, std::slice::from_ref(job)).await.map(|mut r| r.remove(0)));
    }
    results
}

async fn try_batch(conn: &mut SqliteConnection, batch: &[Job]) -> Result<Vec<Done>, StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        results.push(apply(&mut tx, &job.op).await?);
    }
    tx.commit().await?;
    Ok(results)
}

async fn apply(conn: &mut SqliteConnection, op: &Op) -> Result<Done, StoreError> {
    match op {
        Op::SaveRun(run) => {
            upsert_run(conn, run).await?;
            Ok(Done::Unit)
        }
        Op::Ask(ask) => {
            let (run, question) = &**ask;
            upsert_run(conn, run).await?;
            insert_question(conn, question).await?;
            Ok(Done::Unit)
        }
        Op::Resolve(r) => {
            let outcome = json(&r.outcome)?;
            let row = sqlx::query(concat!(
                "UPDATE questions SET status = ?, outcome = ?, answered_by = ?, answered_via = ?, resolved_at = ? \
                 WHERE id = ? AND status = 'pending' RETURNING ",
                question_columns!()
            ))
            .bind(r.outcome.status().as_str())
            .bind(outcome)
            .bind(r.by.as_deref())
            .bind(r.via.as_str())
            .bind(r.at)
            .bind(r.id.to_string())
            .fetch_optional(&mut *conn)
            .await?;
            let Some(row) = row else { return Ok(Done::Claimed(None)) };
            let question = question_from_row(&row)?;
            // The claim that will resume a follow-up run marks it running in the same
            // transaction, so a crash between the claim and the replay is resumed at start-up.
            sqlx::query(
                "UPDATE runs SET status = 'running', updated_at = ? \
                 WHERE id = ? AND mode = 'follow_up' AND status = 'waiting'",
            )
            .bind(r.at)
            .bind(question.run.to_string())
            .execute(&mut *conn)
            .await?;
            if let Some(g) = &r.grant {
                sqlx::query(
                    "INSERT INTO grants (id, conversation, action, granted_by, question_id, created_at) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(&g.id)
                .bind(g.conversation.as_str())
                .bind(&g.action)
                .bind(&g.granted_by)
                .bind(g.question.to_string())
                .bind(g.created_at)
                .execute(&mut *conn)
                .await?;
            }
            Ok(Done::Claimed(Some(Box::new(question))))
        }
        Op::Delivery(d) => {
            sqlx::query(
                "INSERT OR IGNORE INTO deliveries (question_id, surface, chat, message, created_at) \
                 VALUES (?, ?, ?, ?, strftime('%s','now') * 1000)",
            )
            .bind(d.question.to_string())
            .bind(&d.surface)
            .bind(&d.chat)
            .bind(&d.message)
            .execute(&mut *conn)
            .await?;
            Ok(Done::Unit)
        }
        Op::RevokeGrant(id, at) => {
            let done = sqlx::query("UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(at)
                .bind(id)
                .execute(&mut *conn)
                .await?;
            Ok(Done::Flag(done.rows_affected() == 1))
        }
        Op::Seen(key, at) => {
            let done = sqlx::query("INSERT OR IGNORE INTO inbound (key, created_at) VALUES (?, ?)")
                .bind(key)
                .bind(at)
                .execute(&mut *conn)
                .await?;
            Ok(Done::Flag(done.rows_affected() == 1))
        }
        Op::Close => Ok(Done::Unit),
        Op::Says(run, says) => {
            sqlx::query("UPDATE runs SET says = MAX(says, ?) WHERE id = ?")
                .bind(says)
                .bind(run.to_string())
                .execute(&mut *conn)
                .await?;
            Ok(Done::Unit)
        }
    }
}

async fn upsert_run(conn: &mut SqliteConnection, run: &Run) -> Result<(), StoreError> {
    sqlx::query(concat!(
        "INSERT INTO runs (",
        run_columns!(),
        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, says = MAX(runs.says, excluded.says), \
         result = excluded.result, updated_at = excluded.updated_at"
    ))
    .bind(run.id.to_string())
    .bind(&run.function)
    .bind(run.conversation.as_ref().map(Conversation::as_str))
    .bind(run.initiator.as_str())
    .bind(&run.input)
    .bind(run.mode.as_str())
    .bind(run.status.as_str())
    .bind(run.says)
    .bind(run.result.as_deref())
    .bind(run.created_at)
    .bind(run.updated_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn insert_question(conn: &mut SqliteConnection, q: &Question) -> Result<(), StoreError> {
    sqlx::query(concat!(
        "INSERT INTO questions (",
        question_columns!(),
        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))
    .bind(q.id.to_string())
    .bind(q.conversation.as_ref().map(Conversation::as_str))
    .bind(q.run.to_string())
    .bind(q.step)
    .bind(q.mode.as_str())
    .bind(q.kind.as_str())
    .bind(&q.prompt)
    .bind(q.detail.as_deref())
    .bind(json(&q.options)?)
    .bind(q.multi)
    .bind(q.allow_custom)
    .bind(q.default.as_ref().map(Value::to_string))
    .bind(json(&q.answerers)?)
    .bind(&q.fingerprint)
    .bind(q.created_at)
    .bind(q.expires_at)
    .bind(q.status.as_str())
    .bind(q.outcome.as_ref().map(json).transpose()?)
    .bind(q.answered_by.as_deref())
    .bind(q.answered_via.map(|v| v.as_str()))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {detail}"))
}

fn parse_col<T: FromStr>(row: &SqliteRow, col: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.try_get(col)?;
    text.parse().map_err(|e| corrupt(col, e))
}

fn parse_opt<T: FromStr>(row: &SqliteRow, col: &str) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| t.parse().map_err(|e| corrupt(col, e))).transpose()
}

fn json_col<T: serde::de::DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(col, e))).transpose()
}

fn question_from_row(row: &SqliteRow) -> Result<Question, StoreError> {
    let conversation: Option<String> = row.try_get("conversation")?;
    Ok(Question {
        id: parse_col(row, "id")?,
        conversation: conversation
            .map(|c| Conversation::parse(&c).map_err(|e| corrupt("conversation", e)))
            .transpose()?,
        run: parse_col(row, "run_id")?,
        step: row.try_get("step")?,
        mode: parse_col(row, "mode")?,
        kind: parse_col(row, "kind")?,
        prompt: row.try_get("prompt")?,
        detail: row.try_get("detail")?,
        options: json_col(row, "options")?.unwrap_or_default(),
        multi: row.try_get("multi")?,
        allow_custom: row.try_get("allow_custom")?,
        default: json_col(row, "default_json")?,
        answerers: json_col(row, "answerers")?.ok_or_else(|| corrupt("answerers", "missing"))?,
        fingerprint: row.try_get("fingerprint")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        status: parse_col(row, "status")?,
        outcome: json_col(row, "outcome")?,
        answered_by: row.try_get("answered_by")?,
        answered_via: parse_opt(row, "answered_via")?,
    })
}

fn run_from_row(row: &SqliteRow) -> Result<Run, StoreError> {
    let conversation: Option<String> = row.try_get("conversation")?;
    let initiator: String = row.try_get("initiator")?;
    Ok(Run {
        id: parse_col(row, "id")?,
        function: row.try_get("function")?,
        conversation: conversation
            .map(|c| Conversation::parse(&c).map_err(|e| corrupt("conversation", e)))
            .transpose()?,
        initiator: UserRef::parse(&initiator).map_err(|e| corrupt("initiator", e))?,
        input: row.try_get("input")?,
        mode: parse_col(row, "mode")?,
        status: parse_col(row, "status")?,
        says: row.try_get("says")?,
        result: row.try_get("result")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn grant_from_row(row: &SqliteRow) -> Result<Grant, StoreError> {
    let conversation: String = row.try_get("conversation")?;
    Ok(Grant {
        id: row.try_get("id")?,
        conversation: Conversation::parse(&conversation).map_err(|e| corrupt("conversation", e))?,
        action: row.try_get("action")?,
        granted_by: row.try_get("granted_by")?,
        question: parse_col(row, "question_id")?,
        created_at: row.try_get("created_at")?,
    })
}

fn questions(rows: &[SqliteRow]) -> Result<Vec<Question>, StoreError> {
    rows.iter().map(question_from_row).collect()
}

#[async_trait]
impl Store for SqliteStore {
    async fn save_run(&self, run: &Run) -> Result<(), StoreError> {
        self.write(Op::SaveRun(run.clone())).await.map(|_| ())
    }

    async fn run(&self, id: RunId) -> Result<Option<Run>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", run_columns!(), " FROM runs WHERE id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn open_runs(&self, conversation: Option<&Conversation>) -> Result<Vec<Run>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE status IN ('running', 'waiting') AND (?1 IS NULL OR conversation = ?1) \
             ORDER BY created_at"
        ))
        .bind(conversation.map(Conversation::as_str))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn ask(&self, run: &Run, question: &Question) -> Result<(), StoreError> {
        self.write(Op::Ask(Box::new((run.clone(), question.clone())))).await.map(|_| ())
    }

    async fn question(&self, id: QuestionId) -> Result<Option<Question>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", question_columns!(), " FROM questions WHERE id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(question_from_row).transpose()
    }

    async fn questions_by_prefix(
        &self,
        conversation: &Conversation,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<Question>, StoreError> {
        // The prefix is checked to be hex and hyphens by the caller; the range scan on the
        // primary key makes it an index lookup rather than a LIKE over the table.
        let upper = format!("{prefix}\u{10ffff}");
        let rows = sqlx::query(concat!(
            "SELECT ",
            question_columns!(),
            " FROM questions WHERE id >= ? AND id < ? AND conversation = ? ORDER BY created_at DESC LIMIT ?"
        ))
        .bind(prefix)
        .bind(upper)
        .bind(conversation.as_str())
        .bind(limit)
        .fetch_all(&self.readers)
        .await?;
        questions(&rows)
    }

    async fn pending(&self, conversation: Option<&Conversation>) -> Result<Vec<Question>, StoreError> {
        let rows = match conversation {
            Some(c) => {
                sqlx::query(concat!(
                    "SELECT ",
                    question_columns!(),
                    " FROM questions WHERE status = 'pending' AND conversation = ? ORDER BY created_at"
                ))
                .bind(c.as_str())
                .fetch_all(&self.readers)
                .await?
            }
            None => {
                sqlx::query(concat!(
                    "SELECT ",
                    question_columns!(),
                    " FROM questions WHERE status = 'pending' ORDER BY created_at"
                ))
                .fetch_all(&self.readers)
                .await?
            }
        };
        questions(&rows)
    }

    async fn journal(&self, run: RunId) -> Result<Vec<Question>, StoreError> {
        let rows =
            sqlx::query(concat!("SELECT ", question_columns!(), " FROM questions WHERE run_id = ? ORDER BY step"))
                .bind(run.to_string())
                .fetch_all(&self.readers)
                .await?;
        questions(&rows)
    }

    async fn resolve(&self, resolution: &Resolution) -> Result<Claim, StoreError> {
        match self.write(Op::Resolve(resolution.clone())).await? {
            Done::Claimed(Some(q)) => Ok(Claim::Won(*q)),
            _ => Ok(match self.question(resolution.id).await? {
                Some(q) => Claim::Lost(q),
                None => Claim::Missing,
            }),
        }
    }

    async fn due(&self, now: i64, limit: u32) -> Result<Vec<QuestionId>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM questions WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ? \
             ORDER BY expires_at LIMIT ?",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(|r| parse_col(r, "id")).collect()
    }

    async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(expires_at) AS next FROM questions WHERE status = 'pending' AND expires_at IS NOT NULL",
        )
        .fetch_one(&self.readers)
        .await?;
        Ok(row.try_get("next")?)
    }

    async fn pending_blocking(&self) -> Result<Vec<QuestionId>, StoreError> {
        let rows = sqlx::query("SELECT id FROM questions WHERE status = 'pending' AND mode = 'blocking'")
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(|r| parse_col(r, "id")).collect()
    }

    async fn add_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        self.write(Op::Delivery(delivery.clone())).await.map(|_| ())
    }

    async fn deliveries(&self, question: QuestionId) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT question_id, surface, chat, message FROM deliveries WHERE question_id = ? ORDER BY created_at",
        )
        .bind(question.to_string())
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Delivery {
                    question: parse_col(r, "question_id")?,
                    surface: r.try_get("surface")?,
                    chat: r.try_get("chat")?,
                    message: r.try_get("message")?,
                })
            })
            .collect()
    }

    async fn find_grant(&self, conversation: &Conversation, action: &str) -> Result<Option<Grant>, StoreError> {
        let row = sqlx::query(
            "SELECT id, conversation, action, granted_by, question_id, created_at FROM grants \
             WHERE conversation = ? AND action = ? AND revoked_at IS NULL ORDER BY created_at LIMIT 1",
        )
        .bind(conversation.as_str())
        .bind(action)
        .fetch_optional(&self.readers)
        .await?;
        row.as_ref().map(grant_from_row).transpose()
    }

    async fn grants(&self, conversation: Option<&Conversation>) -> Result<Vec<Grant>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, conversation, action, granted_by, question_id, created_at FROM grants \
             WHERE revoked_at IS NULL AND (?1 IS NULL OR conversation = ?1) ORDER BY created_at",
        )
        .bind(conversation.map(Conversation::as_str))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(grant_from_row).collect()
    }

    async fn revoke_grant(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        match self.write(Op::RevokeGrant(id.to_owned(), at)).await? {
            Done::Flag(f) => Ok(f),
            _ => Err(StoreError::Corrupt("revoke returned no flag".into())),
        }
    }

    async fn first_seen(&self, key: &str, at: i64) -> Result<bool, StoreError> {
        match self.write(Op::Seen(key.to_owned(), at)).await? {
            Done::Flag(f) => Ok(f),
            _ => Err(StoreError::Corrupt("inbound mark returned no flag".into())),
        }
    }

    async fn set_says(&self, run: RunId, says: u32) -> Result<(), StoreError> {
        self.write(Op::Says(run, says)).await.map(|_| ())
    }

    async fn close(&self) {
        let Some(writer) = self.writer.lock().await.take() else { return };
        // The writer commits everything queued before this job, then ends.
        let _ = self.write(Op::Close).await;
        if let Err(e) = writer.await {
            tracing::warn!(error = %e, "the store writer ended abnormally");
        }
        self.readers.close().await;
    }
}
