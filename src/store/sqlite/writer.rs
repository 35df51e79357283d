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

use sqlx::Connection;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use super::raw::Db;
use super::statements::{Queued, Statements};
use crate::question::{Approver, Conversation, Question, QuestionId, RunId};
use crate::run::{Run, RunStatus};
use crate::store::{Claim, Delivery, Pruned, Resolution, StoreError, WriteStats};

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

    fn count(&self, writes: usize, failed: usize, took: std::time::Duration) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(writes as u64, Ordering::Relaxed);
        self.failed.fetch_add(failed as u64, Ordering::Relaxed);
        self.busy_micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The most writes that share one transaction.
const MAX_BATCH: usize = 256;

/// Where a write's result goes, once its transaction committed.
type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write's reply and, once applied in the open transaction, its result (boxed, so that
/// every write has the size of the smallest: a box of `()` allocates nothing).
pub(super) struct Pending<T> {
    reply: Reply<T>,
    value: Option<Box<T>>,
}

impl<T> Pending<T> {
    pub(super) fn new(reply: Reply<T>) -> Self {
        Self { reply, value: None }
    }

    /// Records what the write gave in the open transaction.
    pub(super) fn set(&mut self, value: T) {
        self.value = Some(Box::new(value));
    }

    /// Answers the caller: the value applied, or `failure`.
    fn answer(self, failure: Option<StoreError>) {
        let result = match (failure, self.value) {
            (Some(e), _) => Err(e),
            (None, Some(value)) => Ok(*value),
            // A write is answered without failure only after it was applied in the
            // transaction that committed, which set its value.
            (None, None) => Err(StoreError::Database("a write was answered before it was applied".into())),
        };
        // A caller that stopped waiting no longer needs the answer; the write stands.
        let _ = self.reply.send(result);
    }
}

/// One write, with its typed reply.
pub(super) enum Write {
    /// Inserts or updates a run.
    SaveRun {
        run: Box<Run>,
        done: Pending<()>,
    },
    /// Ends a run (status, result, time) without reading it first; whether it existed.
    FinishRun {
        id: RunId,
        status: RunStatus,
        result: String,
        at: i64,
        done: Pending<bool>,
    },
    /// Inserts or updates the run, then inserts its new question.
    Ask {
        run: Box<Run>,
        question: Arc<Question>,
        done: Pending<()>,
    },
    /// The claim-once write.
    Resolve {
        resolution: Box<Resolution>,
        done: Pending<Claim>,
    },
    /// Whether one more approval of a quorum approval was counted.
    Vote {
        question: QuestionId,
        seen: Vec<Approver>,
        approvals: Vec<Approver>,
        update: Option<String>,
        done: Pending<bool>,
    },
    /// Whether a question's next reminder or escalation was moved.
    Nudge {
        question: QuestionId,
        seen: i64,
        next: Option<i64>,
        escalated_to: Option<Conversation>,
        done: Pending<bool>,
    },
    Delivery {
        delivery: Delivery,
        done: Pending<()>,
    },
    /// Whether a live grant was revoked.
    RevokeGrant {
        id: String,
        at: i64,
        done: Pending<bool>,
    },
    /// Whether the key was new.
    Seen {
        key: String,
        at: i64,
        done: Pending<bool>,
    },
    Says {
        run: RunId,
        says: u32,
        done: Pending<()>,
    },
    /// Deletes old ended runs (with their questions and cards) and old inbound keys.
    Prune {
        ended_before: Option<i64>,
        seen_before: i64,
        limit: u32,
        done: Pending<Pruned>,
    },
}

impl Write {
    /// Answers the caller: its result if its transaction committed, else `failure`.
    fn answer(self, failure: Option<StoreError>) {
        match self {
            Self::SaveRun { done, .. }
            | Self::Ask { done, .. }
            | Self::Delivery { done, .. }
            | Self::Says { done, .. } => done.answer(failure),
            Self::FinishRun { done, .. }
            | Self::RevokeGrant { done, .. }
            | Self::Seen { done, .. }
            | Self::Vote { done, .. }
            | Self::Nudge { done, .. } => {
                done.answer(failure);
            }
            Self::Resolve { done, .. } => done.answer(failure),
            Self::Prune { done, .. } => done.answer(failure),
        }
    }
}

/// What the writer thread is asked.
pub(super) enum Job {
    Write(Write),
    /// Ends the writer after the writes queued before it; answered once the connection closed.
    Close(oneshot::Sender<()>),
}

macro_rules! job {
    ($variant:ident { $($field:ident: $value:expr),* $(,)? }) => {{
        let (reply, answer) = oneshot::channel();
        let done = $crate::store::sqlite::writer::Pending::new(reply);
        let write = $crate::store::sqlite::writer::Write::$variant { $($field: $value,)* done };
        ($crate::store::sqlite::writer::Job::Write(write), answer)
    }};
}
pub(super) use job;

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
        refuse(job);
    }
    if let Err(e) = futures_executor::block_on(conn.close()) {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
    if let Some(closed) = closing {
        let _ = closed.send(());
    }
}

fn refuse(job: Job) {
    match job {
        Job::Write(write) => write.answer(Some(StoreError::Closed)),
        Job::Close(closed) => {
            let _ = closed.send(());
        }
    }
}

/// Commits batches until the queue ends or a close arrives; returns the close's reply.
fn serve(
    statements: &mut Statements<'_, '_>,
    queue: &mut mpsc::UnboundedReceiver<Job>,
    counters: &Counters,
) -> Option<oneshot::Sender<()>> {
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        let mut closing = None;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Write(write) => batch.push(Queued { write, failure: None }),
                Job::Close(reply) => {
                    closing = Some(reply);
                    break;
                }
            }
            if batch.len() < MAX_BATCH {
                next = queue.try_recv().ok();
            }
        }
        if closing.is_some() {
            // Writes queued after the close are refused.
            while let Ok(late) = queue.try_recv() {
                refuse(late);
            }
        }
        if !batch.is_empty() {
            let started = std::time::Instant::now();
            let refused = statements.commit_batch(&mut batch);
            let failed = batch.iter().filter(|w| w.failure.is_some()).count();
            counters.count(batch.len(), failed, started.elapsed());
            counters.database(refused.as_ref());
            for write in batch.drain(..) {
                write.write.answer(write.failure);
            }
        }
        if closing.is_some() {
            return closing;
        }
    }
    None
}
