//! The one writer: every write of the store goes through one connection, and the writes that
//! arrive while a transaction runs are committed together in the next one (group commit).
//!
//! A batch is sent to SQLite as one SQL script (`BEGIN IMMEDIATE; …; COMMIT;`), so that it
//! costs one round trip to the connection's thread however many writes it holds: with
//! sqlx's SQLite driver each round trip is two thread hand-offs, which cost more than the
//! statements themselves. Values are rendered as SQL literals by [`Script`], which quotes
//! every text value (or hex-encodes it when it holds a NUL), so no input can change a
//! statement's shape. Writes that need an answer (a claim, a first sighting) use `RETURNING`
//! with the write's position in the batch, and the writer hands each caller its rows.

use std::fmt::Write as _;

use serde_json::Value;
use sqlx::sqlite::SqliteConnection;
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::sync::{mpsc, oneshot};

use super::question_from_row;
use crate::question::{Conversation, Question};
use crate::run::Run;
use crate::store::{Delivery, Resolution, StoreError};

/// The most writes that share one transaction.
const MAX_BATCH: usize = 256;

/// One write.
pub(super) enum Op {
    SaveRun(Box<Run>),
    /// Inserts or updates the run, then inserts its new question.
    Ask(Box<(Run, Question)>),
    Resolve(Box<Resolution>),
    Delivery(Delivery),
    RevokeGrant(String, i64),
    Seen(String, i64),
    Says(String, u32),
    /// Ends the writer after the writes queued before it.
    Close,
}

impl Op {
    /// Whether the write is a single statement (so atomic without a transaction).
    fn is_one_statement(&self) -> bool {
        match self {
            Self::Ask(_) => false,
            Self::Resolve(r) => r.grant.is_none(),
            _ => true,
        }
    }
}

/// What a write reports back.
pub(super) enum Done {
    Unit,
    /// Whether the write changed a row (a first sighting, a revoked grant).
    Flag(bool),
    /// The claimed question, or none when it was not pending.
    Claimed(Option<Box<Question>>),
}

pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<Done, StoreError>>,
}

pub(super) async fn write_loop(mut conn: SqliteConnection, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut closing = None;
    while closing.is_none() && queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if let Some(at) = batch.iter().position(|j| matches!(j.op, Op::Close)) {
            closing = Some(batch.remove(at));
            batch.truncate(at);
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

/// Applies a batch in one transaction. If it fails, each write is retried in a transaction
/// of its own, so that one bad write fails only its caller.
async fn commit_batch(conn: &mut SqliteConnection, batch: &[Job]) -> Vec<Result<Done, StoreError>> {
    match run_script(conn, batch).await {
        Ok(results) => results.into_iter().map(Ok).collect(),
        Err(e) if batch.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut results = Vec::with_capacity(batch.len());
            for job in batch {
                results.push(run_script(conn, std::slice::from_ref(job)).await.map(|mut r| r.remove(0)));
            }
            results
        }
    }
}

async fn run_script(conn: &mut SqliteConnection, batch: &[Job]) -> Result<Vec<Done>, StoreError> {
    // A lone one-statement write is atomic by itself: without BEGIN and COMMIT the driver
    // hands back one result instead of three.
    let alone = matches!(batch, [job] if job.op.is_one_statement());
    let mut script = Script::default();
    if !alone {
        script.sql.push_str("BEGIN IMMEDIATE;\n");
    }
    for (i, job) in batch.iter().enumerate() {
        script.op(i, &job.op)?;
    }
    if !alone {
        script.sql.push_str("COMMIT;");
    }
    let rows = match sqlx::raw_sql(AssertSqlSafe(script.sql)).fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(e) => {
            // A failed statement leaves the transaction open; end it before anything else.
            if let Err(rollback) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
                tracing::debug!(error = %rollback, "rollback after a failed batch");
            }
            return Err(e.into());
        }
    };
    let mut results: Vec<Done> = batch
        .iter()
        .map(|job| match job.op {
            Op::Resolve(_) => Done::Claimed(None),
            Op::RevokeGrant(..) | Op::Seen(..) => Done::Flag(false),
            _ => Done::Unit,
        })
        .collect();
    for row in &rows {
        let job: i64 = row.try_get("job")?;
        match usize::try_from(job).ok().and_then(|j| results.get_mut(j)) {
            Some(Done::Claimed(claimed)) => *claimed = Some(Box::new(question_from_row(row)?)),
            Some(Done::Flag(flag)) => *flag = true,
            _ => return Err(StoreError::Corrupt(format!("a batch returned an unexpected row for write {job}"))),
        }
    }
    Ok(results)
}

/// A SQL script under construction, with values rendered as literals.
#[derive(Default)]
struct Script {
    sql: String,
}

impl Script {
    fn raw(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// A text literal: quoted with `'` doubled; hex-encoded when it holds a NUL, which would
    /// otherwise end the statement early.
    fn text(&mut self, s: &str) -> &mut Self {
        if s.contains('\0') {
            self.sql.push_str("CAST(X'");
            for b in s.bytes() {
                let _ = write!(self.sql, "{b:02x}");
            }
            self.sql.push_str("' AS TEXT)");
        } else {
            self.sql.push('\'');
            for c in s.chars() {
                if c == '\'' {
                    self.sql.push('\'');
                }
                self.sql.push(c);
            }
            self.sql.push('\'');
        }
        self
    }

    fn opt_text(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.text(s),
            None => self.raw("NULL"),
        }
    }

    fn int(&mut self, i: i64) -> &mut Self {
        let _ = write!(self.sql, "{i}");
        self
    }

    fn opt_int(&mut self, i: Option<i64>) -> &mut Self {
        match i {
            Some(i) => self.int(i),
            None => self.raw("NULL"),
        }
    }

    fn json<T: serde::Serialize>(&mut self, value: &T) -> Result<&mut Self, StoreError> {
        let text = serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(self.text(&text))
    }

    fn sep(&mut self) -> &mut Self {
        self.raw(", ")
    }

    fn op(&mut self, job: usize, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::SaveRun(run) => self.upsert_run(run),
            Op::Ask(ask) => {
                let (run, question) = &**ask;
                self.upsert_run(run);
                self.insert_question(question)?;
            }
            Op::Resolve(r) => {
                self.raw("UPDATE questions SET status = ")
                    .text(r.outcome.status().as_str())
                    .raw(", outcome = ")
                    .json(&r.outcome)?
                    .raw(", answered_by = ")
                    .opt_text(r.by.as_deref())
                    .raw(", answered_via = ")
                    .text(r.via.as_str())
                    .raw(", resolved_at = ")
                    .int(r.at)
                    .raw(" WHERE id = ")
                    .text(&r.id.to_string())
                    .raw(" AND status = 'pending' RETURNING ")
                    .int(job as i64)
                    .raw(concat!(" AS job, ", question_columns!(), ";\n"));
                // The schema's trigger moves a follow-up run back to `running` with the claim.
                if let Some(g) = &r.grant {
                    // changes() is the claim's: 1 when this attempt won.
                    self.raw(
                        "INSERT INTO grants (id, conversation, action, granted_by, question_id, created_at) SELECT ",
                    )
                    .text(&g.id)
                    .sep()
                    .text(g.conversation.as_str())
                    .sep()
                    .text(&g.action)
                    .sep()
                    .text(&g.granted_by)
                    .sep()
                    .text(&g.question.to_string())
                    .sep()
                    .int(g.created_at)
                    .raw(" WHERE changes() = 1;\n");
                }
            }
            Op::Delivery(d) => {
                self.raw("INSERT OR IGNORE INTO deliveries (question_id, surface, chat, message, created_at) VALUES (")
                    .text(&d.question.to_string())
                    .sep()
                    .text(&d.surface)
                    .sep()
                    .text(&d.chat)
                    .sep()
                    .text(&d.message)
                    .raw(", CAST(unixepoch('subsec') * 1000 AS INTEGER));\n");
            }
            Op::RevokeGrant(id, at) => {
                self.raw("UPDATE grants SET revoked_at = ")
                    .int(*at)
                    .raw(" WHERE id = ")
                    .text(id)
                    .raw(" AND revoked_at IS NULL RETURNING ")
                    .int(job as i64)
                    .raw(" AS job;\n");
            }
            Op::Seen(key, at) => {
                self.raw("INSERT OR IGNORE INTO inbound (key, created_at) VALUES (")
                    .text(key)
                    .sep()
                    .int(*at)
                    .raw(") RETURNING ")
                    .int(job as i64)
                    .raw(" AS job;\n");
            }
            Op::Says(run, says) => {
                self.raw("UPDATE runs SET says = MAX(says, ")
                    .int(i64::from(*says))
                    .raw(") WHERE id = ")
                    .text(run)
                    .raw(";\n");
            }
            Op::Close => {}
        }
        Ok(())
    }

    fn upsert_run(&mut self, run: &Run) {
        self.raw(concat!("INSERT INTO runs (", run_columns!(), ") VALUES ("))
            .text(&run.id.to_string())
            .sep()
            .text(&run.function)
            .sep()
            .opt_text(run.conversation.as_ref().map(Conversation::as_str))
            .sep()
            .text(run.initiator.as_str())
            .sep()
            .text(&run.input)
            .sep()
            .text(run.mode.as_str())
            .sep()
            .text(run.status.as_str())
            .sep()
            .int(i64::from(run.says))
            .sep()
            .opt_text(run.result.as_deref())
            .sep()
            .int(run.created_at)
            .sep()
            .int(run.updated_at)
            .raw(
                ") ON CONFLICT (id) DO UPDATE SET status = excluded.status, says = MAX(runs.says, excluded.says), \
                 result = excluded.result, updated_at = excluded.updated_at;\n",
            );
    }

    fn insert_question(&mut self, q: &Question) -> Result<(), StoreError> {
        self.raw(concat!("INSERT INTO questions (", question_columns!(), ") VALUES ("))
            .text(&q.id.to_string())
            .sep()
            .opt_text(q.conversation.as_ref().map(Conversation::as_str))
            .sep()
            .text(&q.run.to_string())
            .sep()
            .int(i64::from(q.step))
            .sep()
            .text(q.mode.as_str())
            .sep()
            .text(q.kind.as_str())
            .sep()
            .text(&q.prompt)
            .sep()
            .opt_text(q.detail.as_deref())
            .sep()
            .json(&q.options)?
            .sep()
            .int(i64::from(q.multi))
            .sep()
            .int(i64::from(q.allow_custom))
            .sep()
            .opt_text(q.default.as_ref().map(Value::to_string).as_deref())
            .sep()
            .json(&q.answerers)?
            .sep()
            .text(&q.fingerprint)
            .sep()
            .int(q.created_at)
            .sep()
            .opt_int(q.expires_at)
            .sep()
            .text(q.status.as_str())
            .sep();
        match &q.outcome {
            Some(o) => self.json(o)?,
            None => self.raw("NULL"),
        };
        self.sep().opt_text(q.answered_by.as_deref()).sep().opt_text(q.answered_via.map(|v| v.as_str())).raw(");\n");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_literals_cannot_break_out_of_their_quotes() {
        let mut s = Script::default();
        s.text("it's'); DROP TABLE runs; --");
        assert_eq!(s.sql, "'it''s''); DROP TABLE runs; --'");
    }

    #[test]
    fn text_with_a_nul_is_hex_encoded() {
        let mut s = Script::default();
        s.text("a\0'");
        assert_eq!(s.sql, "CAST(X'610027' AS TEXT)");
    }
}
