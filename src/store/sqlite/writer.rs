//! The one writer: every write of the store goes through one connection, and the writes that
//! arrive while a transaction runs are committed together in the next one (group commit).
//!
//! The writer owns its connection on a thread of its own: it locks the SQLite handle out of
//! sqlx once and steps statements it prepared once ([`super::raw`]), binding every value as
//! a parameter. A batch costs one hand-off to this thread and one back per caller, however
//! many writes it holds. Through sqlx's driver every statement is a round trip to its worker
//! thread, and a batch sent as one script is parsed again each time: measured, parsing took
//! half of the writer's time, and the writer was what limited many conversations at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use sqlx::Connection;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use super::question_from_row;
use super::raw::{self, Db, Statement};
use crate::question::{Conversation, Question};
use crate::run::{Run, RunStatus};
use crate::store::{Delivery, Pruned, Resolution, StoreError, WriteStats};

/// What the writer has done, counted as it goes (read by `/metrics`).
#[derive(Default)]
pub(super) struct Counters {
    batches: AtomicU64,
    writes: AtomicU64,
    failed: AtomicU64,
    busy_micros: AtomicU64,
    /// Why the last batch failed as a whole, until one commits again.
    failing: std::sync::Mutex<Option<String>>,
}

impl Counters {
    pub(super) fn stats(&self) -> WriteStats {
        WriteStats {
            failing: self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
            batches: self.batches.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            busy_seconds: self.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    /// Records whether the database took the last batch.
    fn database(&self, failure: Option<&StoreError>) {
        let mut failing = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match failure {
            Some(e) => {
                if failing.is_none() {
                    tracing::error!(error = %e, "the database refuses writes");
                }
                *failing = Some(e.to_string());
            }
            None => {
                if failing.take().is_some() {
                    tracing::info!("the database takes writes again");
                }
            }
        }
    }

    fn count(&self, results: &[Result<Done, StoreError>], took: std::time::Duration) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(results.len() as u64, Ordering::Relaxed);
        self.failed.fetch_add(results.iter().filter(|r| r.is_err()).count() as u64, Ordering::Relaxed);
        self.busy_micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The most writes that share one transaction.
const MAX_BATCH: usize = 256;

/// One write.
pub(super) enum Op {
    SaveRun(Box<Run>),
    /// Ends a run (status, result, time) without reading it first.
    FinishRun {
        id: String,
        status: RunStatus,
        result: String,
        at: i64,
    },
    /// Inserts or updates the run, then inserts its new question.
    Ask(Box<(Run, Question)>),
    Resolve(Box<Resolution>),
    Delivery(Delivery),
    RevokeGrant(String, i64),
    Seen(String, i64),
    Says(String, u32),
    /// Deletes old ended runs (with their questions and cards) and old inbound keys.
    Prune {
        ended_before: Option<i64>,
        seen_before: i64,
        limit: u32,
    },
    /// Ends the writer after the writes queued before it.
    Close,
}

/// What a write reports back.
pub(super) enum Done {
    Unit,
    /// Whether the write changed a row (a first sighting, a revoked grant).
    Flag(bool),
    /// The claimed question, or none when it was not pending.
    Claimed(Option<Box<Question>>),
    Pruned(Pruned),
}

pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// Starts the writer thread on `conn`. Returns once its statements are prepared (or failed
/// to prepare, which is an error of opening the store).
pub(super) async fn start(
    conn: SqliteConnection,
    queue: mpsc::UnboundedReceiver<Job>,
    counters: Arc<Counters>,
) -> Result<std::thread::JoinHandle<()>, StoreError> {
    let (ready_tx, ready) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("askgate-writer".into())
        .spawn(move || write_thread(conn, queue, ready_tx, &counters))
        .map_err(StoreError::WriterThread)?;
    ready.await.map_err(|_| StoreError::Closed)??;
    Ok(thread)
}

fn write_thread(
    mut conn: SqliteConnection,
    mut queue: mpsc::UnboundedReceiver<Job>,
    ready: oneshot::Sender<Result<(), StoreError>>,
    counters: &Counters,
) {
    let closing = match futures_executor::block_on(conn.lock_handle()) {
        Ok(mut locked) => {
            let db = Db::new(&mut locked);
            match Statements::prepare(&db) {
                Ok(mut statements) => {
                    let _ = ready.send(Ok(()));
                    serve(&mut statements, &mut queue, counters)
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    None
                }
            }
        }
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            None
        }
    };
    queue.close();
    // Writes queued after the close (or after a failed start) are refused, not lost silently.
    while let Ok(job) = queue.try_recv() {
        let _ = job.reply.send(Err(StoreError::Closed));
    }
    if let Err(e) = futures_executor::block_on(conn.close()) {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
    if let Some(job) = closing {
        let _ = job.reply.send(Ok(Done::Unit));
    }
}

/// Commits batches until the queue ends or a [`Op::Close`] arrives; returns that job.
fn serve(
    statements: &mut Statements<'_, '_>,
    queue: &mut mpsc::UnboundedReceiver<Job>,
    counters: &Counters,
) -> Option<Job> {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let closing = batch.iter().position(|j| matches!(j.op, Op::Close)).map(|at| {
            let job = batch.remove(at);
            // Writes queued after the close are refused.
            for late in batch.drain(at..) {
                let _ = late.reply.send(Err(StoreError::Closed));
            }
            job
        });
        if !batch.is_empty() {
            let started = std::time::Instant::now();
            let (results, refused) = statements.commit_batch(&batch);
            counters.count(&results, started.elapsed());
            counters.database(refused.as_ref());
            for (job, result) in batch.drain(..).zip(results) {
                // A caller that stopped waiting no longer needs the answer; the write stands.
                let _ = job.reply.send(result);
            }
        }
        if closing.is_some() {
            return closing;
        }
    }
    None
}

/// Every statement the writer runs, prepared once.
struct Statements<'d, 'h> {
    begin: Statement<'d, 'h>,
    commit: Statement<'d, 'h>,
    rollback: Statement<'d, 'h>,
    upsert_run: Statement<'d, 'h>,
    finish_run: Statement<'d, 'h>,
    insert_question: Statement<'d, 'h>,
    claim: Statement<'d, 'h>,
    insert_grant: Statement<'d, 'h>,
    delivery: Statement<'d, 'h>,
    revoke_grant: Statement<'d, 'h>,
    seen: Statement<'d, 'h>,
    says: Statement<'d, 'h>,
    prune_deliveries: Statement<'d, 'h>,
    prune_questions: Statement<'d, 'h>,
    prune_runs: Statement<'d, 'h>,
    prune_inbound: Statement<'d, 'h>,
}

impl<'d, 'h> Statements<'d, 'h> {
    fn prepare(db: &'d Db<'h>) -> Result<Self, StoreError> {
        Ok(Self {
            begin: db.prepare("BEGIN IMMEDIATE")?,
            commit: db.prepare("COMMIT")?,
            rollback: db.prepare("ROLLBACK")?,
            upsert_run: db.prepare(concat!(
                "INSERT INTO runs (",
                run_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
                 ON CONFLICT (id) DO UPDATE SET status = excluded.status, says = MAX(runs.says, excluded.says), \
                 result = excluded.result, updated_at = excluded.updated_at"
            ))?,
            finish_run: db.prepare("UPDATE runs SET status = ?1, result = ?2, updated_at = ?3 WHERE id = ?4")?,
            insert_question: db.prepare(concat!(
                "INSERT INTO questions (",
                question_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
            ))?,
            // The schema's trigger moves a follow-up run back to `running` with the claim.
            claim: db.prepare(concat!(
                "UPDATE questions SET status = ?1, outcome = ?2, answered_by = ?3, answered_via = ?4, \
                 resolved_at = ?5, answered_name = ?7 WHERE id = ?6 AND status = 'pending' RETURNING ",
                question_columns!()
            ))?,
            insert_grant: db.prepare(
                "INSERT INTO grants (id, conversation, action, granted_by, question_id, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?,
            delivery: db.prepare(
                "INSERT OR IGNORE INTO deliveries (question_id, surface, chat, message, role, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, CAST(unixepoch('subsec') * 1000 AS INTEGER))",
            )?,
            revoke_grant: db.prepare("UPDATE grants SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL")?,
            seen: db.prepare("INSERT OR IGNORE INTO inbound (key, created_at) VALUES (?1, ?2)")?,
            says: db.prepare("UPDATE runs SET says = MAX(says, ?1) WHERE id = ?2")?,
            // The same oldest ended runs in each statement: nothing in between changes `runs`.
            prune_deliveries: db.prepare(concat!(
                "DELETE FROM deliveries WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                ended_runs!(),
                "))"
            ))?,
            prune_questions: db.prepare(concat!("DELETE FROM questions WHERE run_id IN (", ended_runs!(), ")"))?,
            prune_runs: db.prepare(concat!("DELETE FROM runs WHERE id IN (", ended_runs!(), ")"))?,
            prune_inbound: db.prepare(
                "DELETE FROM inbound WHERE key IN \
                 (SELECT key FROM inbound WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
            )?,
        })
    }

    /// Applies a batch in one transaction. A write that fails by its own fault (a broken
    /// constraint) fails only its caller: the transaction is rolled back and the others are
    /// committed without it. When the database fails (locked past the busy timeout, disk full,
    /// read-only), every write of the batch gets the error at once rather than each waiting
    /// for it in turn.
    /// Also returns the database's failure, when it refused the batch as a whole.
    fn commit_batch(&mut self, batch: &[Job]) -> (Vec<Result<Done, StoreError>>, Option<StoreError>) {
        let mut results: Vec<Option<Result<Done, StoreError>>> = batch.iter().map(|_| None).collect();
        let mut todo: Vec<usize> = (0..batch.len()).collect();
        let mut refused = None;
        while !todo.is_empty() {
            match self.transaction(batch, &todo) {
                Ok(done) => {
                    for (&i, done) in todo.iter().zip(done) {
                        results[i] = Some(Ok(done));
                    }
                    break;
                }
                Err(Failure::Write(at, e)) => {
                    results[todo.remove(at)] = Some(Err(e));
                }
                Err(Failure::Database(e)) => {
                    for &i in &todo {
                        results[i] = Some(Err(copy(&e)));
                    }
                    refused = Some(e);
                    break;
                }
            }
        }
        let results = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Corrupt("a write got no result".into()))))
            .collect();
        (results, refused)
    }

    /// One transaction over the writes of `batch` at `todo`.
    fn transaction(&mut self, batch: &[Job], todo: &[usize]) -> Result<Vec<Done>, Failure> {
        self.begin.execute(&[]).map_err(Failure::Database)?;
        let mut done = Vec::with_capacity(todo.len());
        let mut failure = None;
        for (at, &i) in todo.iter().enumerate() {
            match self.apply(&batch[i].op) {
                Ok(d) => done.push(d),
                Err(e) if blames_the_write(&e) => {
                    failure = Some(Failure::Write(at, e));
                    break;
                }
                Err(e) => {
                    failure = Some(Failure::Database(e));
                    break;
                }
            }
        }
        let failure = match failure {
            None => match self.commit.execute(&[]) {
                Ok(_) => return Ok(done),
                Err(e) => Failure::Database(e),
            },
            Some(f) => f,
        };
        // A failed statement or commit leaves the transaction open; end it first.
        if let Err(rollback) = self.rollback.execute(&[]) {
            tracing::debug!(error = %rollback, "rollback after a failed batch");
        }
        Err(failure)
    }

    fn apply(&mut self, op: &Op) -> Result<Done, StoreError> {
        match op {
            Op::SaveRun(run) => {
                self.upsert_run(run)?;
                Ok(Done::Unit)
            }
            Op::FinishRun { id, status, result, at } => {
                let changed = self.finish_run.execute(&[
                    status.as_str().into(),
                    result.as_str().into(),
                    (*at).into(),
                    id.as_str().into(),
                ])?;
                Ok(Done::Flag(changed == 1))
            }
            Op::Ask(ask) => {
                let (run, question) = &**ask;
                self.upsert_run(run)?;
                self.insert_question(question)?;
                Ok(Done::Unit)
            }
            Op::Resolve(r) => {
                let outcome = json(&r.outcome)?;
                let id = r.id.to_string();
                let rows = self.claim.query(&[
                    r.outcome.status().as_str().into(),
                    outcome.as_str().into(),
                    r.by.as_deref().into(),
                    r.via.as_str().into(),
                    r.at.into(),
                    id.as_str().into(),
                    r.name.as_deref().into(),
                ])?;
                let Some(row) = rows.iter().next() else { return Ok(Done::Claimed(None)) };
                let claimed = question_from_row(&row)?;
                drop(rows);
                if let Some(update) = &r.update {
                    self.seen.execute(&[update.as_str().into(), r.at.into()])?;
                }
                if let Some(g) = &r.grant {
                    let question = g.question.to_string();
                    self.insert_grant.execute(&[
                        g.id.as_str().into(),
                        g.conversation.as_str().into(),
                        g.action.as_str().into(),
                        g.granted_by.as_str().into(),
                        question.as_str().into(),
                        g.created_at.into(),
                    ])?;
                }
                Ok(Done::Claimed(Some(Box::new(claimed))))
            }
            Op::Delivery(d) => {
                let question = d.question.to_string();
                self.delivery.execute(&[
                    question.as_str().into(),
                    d.surface.as_str().into(),
                    d.chat.as_str().into(),
                    d.message.as_str().into(),
                    d.role.as_str().into(),
                ])?;
                Ok(Done::Unit)
            }
            Op::RevokeGrant(id, at) => {
                Ok(Done::Flag(self.revoke_grant.execute(&[(*at).into(), id.as_str().into()])? == 1))
            }
            Op::Seen(key, at) => Ok(Done::Flag(self.seen.execute(&[key.as_str().into(), (*at).into()])? == 1)),
            Op::Says(run, says) => {
                self.says.execute(&[i64::from(*says).into(), run.as_str().into()])?;
                Ok(Done::Unit)
            }
            Op::Prune { ended_before, seen_before, limit } => {
                let limit = i64::from(*limit);
                let mut pruned = Pruned::default();
                if let Some(before) = *ended_before {
                    let params = [before.into(), limit.into()];
                    self.prune_deliveries.execute(&params)?;
                    self.prune_questions.execute(&params)?;
                    pruned.runs = self.prune_runs.execute(&params)?;
                }
                pruned.inbound = self.prune_inbound.execute(&[(*seen_before).into(), limit.into()])?;
                Ok(Done::Pruned(pruned))
            }
            Op::Close => Ok(Done::Unit),
        }
    }

    fn upsert_run(&mut self, run: &Run) -> Result<(), StoreError> {
        if let Some(update) = &run.update {
            self.seen.execute(&[update.as_str().into(), run.updated_at.into()])?;
        }
        let id = run.id.to_string();
        let answerers = run.answerers.as_ref().map(json).transpose()?;
        self.upsert_run.execute(&[
            id.as_str().into(),
            run.function.as_str().into(),
            run.conversation.as_ref().map(Conversation::as_str).into(),
            run.initiator.as_str().into(),
            run.input.as_str().into(),
            run.mode.as_str().into(),
            run.status.as_str().into(),
            i64::from(run.says).into(),
            run.result.as_deref().into(),
            run.created_at.into(),
            run.updated_at.into(),
            answerers.as_deref().into(),
        ])?;
        Ok(())
    }

    fn insert_question(&mut self, q: &Question) -> Result<(), StoreError> {
        let (id, run) = (q.id.to_string(), q.run.to_string());
        let options = json(&q.options)?;
        let default = q.default.as_ref().map(Value::to_string);
        let answerers = json(&q.answerers)?;
        let outcome = q.outcome.as_ref().map(json).transpose()?;
        self.insert_question.execute(&[
            id.as_str().into(),
            q.conversation.as_ref().map(Conversation::as_str).into(),
            run.as_str().into(),
            i64::from(q.step).into(),
            q.mode.as_str().into(),
            q.kind.as_str().into(),
            q.prompt.as_str().into(),
            q.detail.as_deref().into(),
            options.as_str().into(),
            i64::from(q.multi).into(),
            i64::from(q.allow_custom).into(),
            default.as_deref().into(),
            answerers.as_str().into(),
            q.fingerprint.as_str().into(),
            q.created_at.into(),
            q.expires_at.into(),
            q.status.as_str().into(),
            outcome.as_deref().into(),
            q.answered_by.as_deref().into(),
            q.answered_via.map(|v| v.as_str()).into(),
            q.answered_name.as_deref().into(),
        ])?;
        Ok(())
    }
}

/// Why a transaction failed.
enum Failure {
    /// The write at this position of the transaction broke a rule of the schema.
    Write(usize, StoreError),
    /// The database could not take the transaction.
    Database(StoreError),
}

/// Whether an error is the write's own fault (its values), not the database's.
fn blames_the_write(e: &StoreError) -> bool {
    match e {
        StoreError::Sqlite { code, .. } => raw::blames_the_statement(*code),
        StoreError::Corrupt(_) => true,
        _ => false,
    }
}

/// The same error again, for each caller of a failed batch.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Sqlite { code, message } => StoreError::Sqlite { code: *code, message: message.clone() },
        other => StoreError::Corrupt(other.to_string()),
    }
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}
