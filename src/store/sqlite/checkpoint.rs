//! Keeping the write-ahead log small. Every commit is appended to `<database>-wal`; a
//! checkpoint copies it into the database, and the next commit after a complete one starts the
//! file again from its beginning. The file itself shrinks only when told to: left alone it
//! keeps the largest size it ever reached, and under a steady load, with readers always in it,
//! it never starts again and grows for as long as the load lasts (316 MB beside an 8.6 MB
//! database after a load run, before this task trimmed it).
//!
//! So, once a second on a connection of its own:
//! - while the writer commits, a passive checkpoint (it never waits for the writer or a reader,
//!   and none waits for it: a commit that checkpointed itself held every conversation's next
//!   step for tens of milliseconds), and, when the log holds more than [`WAL_LIMIT`], a
//!   restarting one, which waits up to [`WAIT`] for the readers to leave the log so that the
//!   next commit starts it again and cuts the file back to [`WAL_LIMIT`] (`journal_size_limit`);
//! - once the writer is idle, a truncating checkpoint: the file is cut to zero bytes.
//!
//! A checkpoint that falls far behind holds the writer back ([`super::backlog`]).
//!
//! At a clean stop the writer truncates it too ([`super::writer`]).

use std::sync::Arc;
use std::time::Duration;

use sqlx::Row as _;
use sqlx::sqlite::SqliteConnection;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::backlog::Backlog;
use super::writer::Counters;

/// How large the log may stay once started again (`PRAGMA journal_size_limit`), and how much
/// it may hold under load before a checkpoint waits for the readers to leave it: under load the
/// file stays within this and a second or two of writes. Measured with 3,000 questions asked
/// and answered by 16 clients (a debug build, 16 s): at most 47 MB, 23 MB when the load ended
/// and nothing a second later; before, 177 MB, and growing for as long as the load lasted.
pub(super) const WAL_LIMIT: u64 = 16 * 1024 * 1024;

/// How often the log is checkpointed.
const EVERY: Duration = Duration::from_millis(1000);

/// How long a restarting or truncating checkpoint waits for the writer's lock and for readers
/// to leave the log, before it gives up until the next tick. Meanwhile it holds the writer's
/// lock, so this is also the longest it delays a commit.
pub(super) const WAIT: Duration = Duration::from_millis(200);

/// The task that checkpoints the log beside the writer (aborted if the store is dropped
/// without being closed).
pub(super) struct Checkpointer {
    stop: CancellationToken,
    task: std::sync::Mutex<Option<AbortOnDropHandle<()>>>,
}

impl Checkpointer {
    /// Starts checkpointing on `connection` (opened with a busy timeout of [`WAIT`]); `counters`
    /// say whether the writer committed since the last tick; `backlog` tells the writer when a
    /// checkpoint runs.
    pub(super) fn start(connection: SqliteConnection, counters: Arc<Counters>, backlog: Arc<Backlog>) -> Self {
        let stop = CancellationToken::new();
        let task = AbortOnDropHandle::new(tokio::spawn(run(connection, counters, backlog, stop.clone())));
        Self { stop, task: std::sync::Mutex::new(Some(task)) }
    }

    /// Ends the task; returns once its connection is closed.
    pub(super) async fn stop(&self) {
        self.stop.cancel();
        let Some(task) = self.task.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() else {
            return;
        };
        if let Err(e) = task.await {
            tracing::warn!(error = %e, "the WAL checkpointer ended abnormally");
        }
    }
}

/// How far a checkpoint goes.
#[derive(Clone, Copy)]
enum Mode {
    /// Copies what it can without waiting for anyone.
    Passive,
    /// Copies everything, then waits for the readers to leave the log so that the next commit
    /// starts it again (and cuts the file back to [`WAL_LIMIT`]).
    Restart,
    /// As `Restart`, and cuts the file to zero bytes.
    Truncate,
}

/// What one checkpoint reported.
struct Checkpoint {
    /// Whether a restarting or truncating one could not wait long enough and stopped short.
    blocked: bool,
    /// The frames in the log.
    frames: i64,
}

async fn checkpoint(
    connection: &mut SqliteConnection,
    mode: Mode,
    backlog: &Backlog,
) -> Result<Checkpoint, sqlx::Error> {
    let sql = match mode {
        Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
        Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    let _running = backlog.checkpoint();
    let row = sqlx::query(sql).fetch_one(&mut *connection).await?;
    Ok(Checkpoint { blocked: row.try_get::<i64, _>(0)? != 0, frames: row.try_get(1)? })
}

async fn run(
    mut connection: SqliteConnection,
    counters: Arc<Counters>,
    backlog: Arc<Backlog>,
    stop: CancellationToken,
) {
    let page: i64 = match sqlx::query_scalar("PRAGMA page_size").fetch_one(&mut connection).await {
        Ok(page) => page,
        Err(e) => {
            tracing::debug!(error = %e, "the page size could not be read; SQLite's default is assumed");
            4096
        }
    };
    // A frame is a page and its 24-byte header.
    let limit = i64::try_from(WAL_LIMIT).unwrap_or(i64::MAX) / (page + 24);
    let mut seen = counters.batches();
    // Whether the log was cut to nothing since the writer last committed.
    let mut trimmed = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(EVERY) => {}
        }
        let batches = counters.batches();
        let idle = batches == seen;
        seen = batches;
        if idle && trimmed {
            continue;
        }
        trimmed = false;
        let result = if idle {
            checkpoint(&mut connection, Mode::Truncate, &backlog).await.map(|c| trimmed = !c.blocked)
        } else {
            match checkpoint(&mut connection, Mode::Passive, &backlog).await {
                Ok(c) if c.frames > limit => checkpoint(&mut connection, Mode::Restart, &backlog).await.map(drop),
                other => other.map(drop),
            }
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "a checkpoint of the WAL did not run; the next one will");
        }
    }
    if let Err(e) = sqlx::Connection::close(connection).await {
        tracing::debug!(error = %e, "closing the checkpointer's connection failed");
    }
}
