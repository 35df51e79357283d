//! The writer waits for a checkpoint that fell behind.
//!
//! The checkpoint beside the writer ([`super::checkpoint`]) copies the log into the database
//! every second, in a fifth of a second under a heavy load; but one can take far longer (one
//! took 59.7 s while half a million questions were asked, most likely its sync to disk waiting for
//! what was written meanwhile). While it runs it holds SQLite's checkpoint lock, the writer's own
//! automatic checkpoint does not wait for it, and nothing else bounds the log: it grew by 100 MB
//! a second, to 6 GB. So once the log passes [`LOG_BOUND`] while a checkpoint runs, the writer
//! waits for that checkpoint (at most [`HOLD`] per commit) before it takes the next batch: the
//! writes wait in memory as they would behind a slow disk, and the log stays near the bound.
//! Below the bound, or with no checkpoint running, the writer never waits. A read that stays open
//! for long (a backup, say) still keeps the log from starting again, as before: the writer then
//! waits for each checkpoint while the file is over the bound (milliseconds for the passive one,
//! which has nothing to copy, at most 200 ms for the restarting one, which holds the writer's
//! lock anyway), until the read ends and the log starts again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How large the log may grow while a checkpoint runs before the writer waits for it: above
/// what a second of the heaviest load measured writes (about 140 MB), so that the writer waits
/// only for a checkpoint that fell behind.
pub(super) const LOG_BOUND: u64 = 256 * 1024 * 1024;

/// The longest the writer waits for one checkpoint before it commits the next batch anyway
/// (and, should the checkpoint still run, waits again after it).
const HOLD: Duration = Duration::from_secs(10);

/// Whether a checkpoint runs, and the log's file, for the writer to look at after each commit.
pub(super) struct Backlog {
    /// `<database>-wal`: its length is how far the log reached since it last started again
    /// (it is cut back to `journal_size_limit` then). None for an in-memory database.
    log: Option<PathBuf>,
    bound: u64,
    hold: Duration,
    running: Mutex<bool>,
    ended: Condvar,
    /// Set at the store's close: the writer waits no more, so the writes queued before the
    /// close are committed at once.
    released: AtomicBool,
    /// Whether the log's length could not be read, said once.
    unreadable: AtomicBool,
    /// How long the writer waited in all, in microseconds (for `/metrics`).
    held_micros: AtomicU64,
}

impl Backlog {
    pub(super) fn new(log: Option<PathBuf>) -> Self {
        Self {
            log,
            bound: LOG_BOUND,
            hold: HOLD,
            running: Mutex::new(false),
            ended: Condvar::new(),
            released: AtomicBool::new(false),
            unreadable: AtomicBool::new(false),
            held_micros: AtomicU64::new(0),
        }
    }

    /// How long the writer waited in all, in seconds.
    pub(super) fn held_seconds(&self) -> f64 {
        self.held_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Marks a checkpoint running until the returned guard drops.
    pub(super) fn checkpoint(&self) -> Running<'_> {
        *self.lock() = true;
        Running(self)
    }

    /// Called by the writer after each commit: while the log is over its bound and a
    /// checkpoint runs, waits for the checkpoint to end, at most [`HOLD`]; counts the wait, and
    /// logs one of a second or more. Returns how long it waited.
    pub(super) fn wait_if_behind(&self) -> Duration {
        let Some(log) = &self.log else { return Duration::ZERO };
        if !*self.lock() || self.released.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        match std::fs::metadata(log) {
            Ok(file) if file.len() > self.bound => {}
            Ok(_) => return Duration::ZERO,
            Err(e) => {
                if !self.unreadable.swap(true, Ordering::Relaxed) {
                    let log = log.display();
                    tracing::warn!(error = %e, %log, "the WAL's size cannot be read; writes never wait for a slow checkpoint");
                }
                return Duration::ZERO;
            }
        }
        let started = Instant::now();
        let running = self.lock();
        let _ended = self
            .ended
            .wait_timeout_while(running, self.hold, |running| *running && !self.released.load(Ordering::Acquire));
        let waited = started.elapsed();
        self.held_micros.fetch_add(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        if waited >= Duration::from_secs(1) {
            let (waited_ms, bound) = (waited.as_millis(), self.bound / (1024 * 1024));
            tracing::warn!(waited_ms, "writes waited for a slow checkpoint of the WAL (the log passed {bound} MiB)");
        }
        waited
    }

    /// From now on the writer waits no more (the store is closing).
    pub(super) fn release(&self) {
        self.released.store(true, Ordering::Release);
        let _running = self.lock();
        self.ended.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A checkpoint running: ended when dropped (also when its future is).
pub(super) struct Running<'b>(&'b Backlog);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.lock() = false;
        self.0.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backlog whose log file holds `len` bytes, with a bound of 1,000 bytes.
    fn backlog(dir: &tempfile::TempDir, len: u64, hold: Duration) -> Backlog {
        let log = dir.path().join("db-wal");
        std::fs::File::create(&log).unwrap().set_len(len).unwrap();
        Backlog { bound: 1_000, hold, ..Backlog::new(Some(log)) }
    }

    #[test]
    fn the_writer_waits_only_for_a_running_checkpoint_while_the_log_is_over_its_bound() {
        let dir = tempfile::TempDir::new().unwrap();
        let over = backlog(&dir, 2_000, Duration::from_millis(50));
        assert_eq!(over.wait_if_behind(), Duration::ZERO, "no checkpoint runs: nothing to wait for");
        let running = over.checkpoint();
        let waited = over.wait_if_behind();
        assert!(waited >= Duration::from_millis(50), "it waits, at most its hold");
        assert!(over.held_seconds() >= waited.as_secs_f64() - 1e-6, "the wait is counted: {}", over.held_seconds());
        drop(running);
        assert_eq!(over.wait_if_behind(), Duration::ZERO, "the checkpoint ended");

        let under = backlog(&tempfile::TempDir::new().unwrap(), 500, Duration::from_millis(50));
        let _running = under.checkpoint();
        assert_eq!(under.wait_if_behind(), Duration::ZERO, "under the bound the writer never waits");
    }

    #[test]
    fn the_writer_goes_on_when_the_checkpoint_ends() {
        let dir = tempfile::TempDir::new().unwrap();
        let hold = Duration::from_secs(300);
        let over = backlog(&dir, 2_000, hold);
        std::thread::scope(|scope| {
            let running = over.checkpoint();
            scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                drop(running);
            });
            assert!(over.wait_if_behind() < hold, "woken by the checkpoint's end, not its hold");
        });
    }

    #[test]
    fn at_the_close_the_writer_waits_no_more() {
        let dir = tempfile::TempDir::new().unwrap();
        let hold = Duration::from_secs(300);
        let over = backlog(&dir, 2_000, hold);
        let _running = over.checkpoint();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                over.release();
            });
            assert!(over.wait_if_behind() < hold, "released at the close, not at its hold");
        });
        assert_eq!(over.wait_if_behind(), Duration::ZERO);
    }
}
