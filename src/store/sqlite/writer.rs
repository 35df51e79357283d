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

use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Row as _};
use tokio::sync::{mpsc, oneshot};

use super::backlog::Backlog;
use super::raw::Db;
use super::statements::Statements;
use crate::store::{StoreError, Write, WriteStats};

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
            // The writer's waits are counted by the backlog (see `SqliteStore::write_stats`).
            held_seconds: 0.0,
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

    /// How many batches the writer has tried so far.
    pub(super) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
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

/// A write waiting for its transaction: the command, whose reply is kept once applied in the
/// open transaction and sent once that transaction committed.
pub(crate) struct Queued {
    pub(super) write: Write,
    /// Why it failed, if it did.
    pub(super) failure: Option<StoreError>,
}

impl Queued {
    pub(crate) fn new(write: Write) -> Self {
        Self { write, failure: None }
    }

    /// Answers the caller: the reply kept, or the failure.
    fn answer(self, failure: Option<StoreError>) {
        self.write.finish(failure.or(self.failure));
    }
}

/// What the writer thread is asked.
pub(super) enum Job {
    Write(Queued),
    /// Ends the writer after the writes queued before it; answered once the connection closed.
    Close(oneshot::Sender<()>),
}

/// Starts the writer thread on `conn`. Returns once its statements are prepared (or failed
/// to prepare, which is an error of opening the store).
pub(super) async fn start(
    conn: SqliteConnection,
    queue: mpsc::UnboundedReceiver<Job>,
    counters: Arc<Counters>,
    backlog: Arc<Backlog>,
) -> Result<std::thread::JoinHandle<()>, StoreError> {
    let (ready_tx, ready) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("askgate-writer".into())
        .spawn(move || write_thread(conn, queue, ready_tx, &counters, &backlog))
        .map_err(StoreError::WriterThread)?;
    ready.await.map_err(|_| StoreError::Closed)??;
    Ok(thread)
}

fn write_thread(
    mut conn: SqliteConnection,
    mut queue: mpsc::UnboundedReceiver<Job>,
    ready: oneshot::Sender<Result<(), StoreError>>,
    counters: &Counters,
    backlog: &Backlog,
) {
    let closing = match futures_executor::block_on(conn.lock_handle()) {
        Ok(mut locked) => {
            if let Err(e) = super::raw::keep_wal_files(&mut locked) {
                tracing::warn!(error = %e, "the WAL files may be deleted at the stop");
            }
            let db = Db::new(&mut locked);
            match Statements::prepare(&db) {
                Ok(mut statements) => {
                    let _ = ready.send(Ok(()));
                    serve(&mut statements, &mut queue, counters, backlog)
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
    if closing.is_some() {
        // A clean stop leaves the WAL empty: everything in it is copied into the database and
        // the file cut to zero bytes (readers that are still open keep this connection from
        // being the last, which would do it itself).
        let trimmed = futures_executor::block_on(sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut conn));
        match trimmed.and_then(|row| row.try_get::<i64, _>(0)) {
            Ok(0) => {}
            Ok(_) => tracing::warn!("readers kept the WAL from being emptied at the stop; the next start will"),
            Err(e) => tracing::warn!(error = %e, "the WAL could not be emptied at the stop; the next start will"),
        }
    }
    if let Err(e) = futures_executor::block_on(conn.close()) {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
    if let Some(closed) = closing {
        let _ = closed.send(());
    }
}

pub(super) fn refuse(job: Job) {
    match job {
        Job::Write(queued) => queued.answer(Some(StoreError::Closed)),
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
    backlog: &Backlog,
) -> Option<oneshot::Sender<()>> {
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        let mut closing = None;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Write(queued) => batch.push(queued),
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
            for queued in batch.drain(..) {
                queued.answer(None);
            }
            backlog.wait_if_behind();
        }
        if closing.is_some() {
            return closing;
        }
    }
    None
}
