//! Point reads (a question by its id, the reads of every answer and long-poll) on the calling
//! thread, through connections askgate opens itself ([`raw::Reader`]), not through sqlx.
//!
//! Through sqlx, every read is a round trip to the connection's own thread: a wake of that
//! thread, a wake back, and the row copied between them, several times what SQLite spends on
//! finding one row by its key in pages it has cached (microseconds). So a point read runs
//! where it is asked, on a runtime thread, which it holds for that long (longer for a page not in
//! the operating system's cache, or while a checkpoint is restarting the log, which SQLite waits
//! out itself); a read that may return many rows stays on the sqlx readers. A read here does not
//! wait for a lock: one that finds the database busy (rare under WAL) goes to the sqlx readers,
//! which wait.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::raw::{self, Param, Reader};
use crate::store::StoreError;
use crate::store::reads::Select;

/// At most this many connections for point reads: one per runtime thread reading at the same
/// moment (a read holds its connection without awaiting, so never more than the runtime's
/// threads); a read that finds none free goes to the sqlx readers.
const READERS: usize = 4;

/// After a connection could not be opened, how long point reads go to the sqlx readers before
/// one is tried again (the open failing again each read would cost every read that).
const RETRY: Duration = Duration::from_secs(5);

/// The connections for point reads, opened as reads need them.
pub(super) struct PointReads {
    /// The database file; none for an in-memory database, which only sqlx's connections share.
    file: Option<PathBuf>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The connections no read holds.
    idle: Vec<Reader>,
    /// How many are open, idle or reading.
    open: usize,
    /// Set by [`PointReads::close`]: every read goes to the sqlx readers from then on.
    closed: bool,
    /// Until when reads go to the sqlx readers, after a connection could not be opened.
    not_before: Option<Instant>,
}

impl PointReads {
    pub(super) fn new(file: Option<PathBuf>) -> Self {
        Self { file, state: Mutex::default() }
    }

    /// The rows of `select` (askgate's own statement), each decoded, read on this thread; `None`
    /// when it must be read through sqlx instead: no connection is free or can be opened, the
    /// read failed in SQLite (busy, or anything else: the connection is closed, and sqlx's
    /// readers, which wait for locks, say what is wrong), or the point reads are closed.
    ///
    /// A row that cannot be decoded returns its error: it would not decode through sqlx either.
    pub(super) fn read<T>(
        &self,
        select: &Select<'_>,
        decode: impl Fn(&raw::Row<'_>) -> Result<T, StoreError>,
    ) -> Option<Result<Vec<T>, StoreError>> {
        let mut lent = Lent { reader: Some(self.take()?), reads: self };
        let reader = lent.reader.as_mut()?;
        let params: Vec<Param<'_>> = select.binds.iter().map(Param::from).collect();
        let rows = match reader.query(select.sql, &params) {
            Ok(rows) => rows,
            Err(e) => {
                if !matches!(e, StoreError::Busy(_)) {
                    tracing::debug!(error = %e, "a point read failed; the readers read it");
                }
                lent.reader = None;
                return None;
            }
        };
        Some(rows.iter().map(|row| decode(&row)).collect())
    }

    fn take(&self) -> Option<Reader> {
        let file = self.file.as_deref()?;
        let mut state = self.lock();
        if state.closed || state.not_before.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        if let Some(reader) = state.idle.pop() {
            return Some(reader);
        }
        if state.open >= READERS {
            return None;
        }
        match Reader::open(file) {
            Ok(reader) => {
                state.open += 1;
                state.not_before = None;
                Some(reader)
            }
            Err(e) => {
                let retry = RETRY.as_secs();
                tracing::warn!(error = %e, "point reads could not open the database; the readers read for {retry} s");
                state.not_before = Some(Instant::now() + RETRY);
                None
            }
        }
    }

    /// Closes every connection; later reads go to the sqlx readers (which refuse them once closed).
    pub(super) fn close(&self) {
        let idle = {
            let mut state = self.lock();
            state.closed = true;
            state.open -= state.idle.len();
            std::mem::take(&mut state.idle)
        };
        drop(idle);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection lent to one read: given back when the read ends (also by a panic), unless the
/// read failed in SQLite or the point reads closed meanwhile; then it is closed.
struct Lent<'p> {
    reader: Option<Reader>,
    reads: &'p PointReads,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let mut state = self.reads.lock();
        match self.reader.take() {
            Some(reader) if !state.closed => state.idle.push(reader),
            closing => {
                state.open -= 1;
                drop(state);
                drop(closing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::Columns;

    fn select(sql: &'static str) -> Select<'static> {
        Select { sql, binds: vec![] }
    }

    async fn database(dir: &tempfile::TempDir) -> (PathBuf, sqlx::SqliteConnection) {
        use sqlx::{ConnectOptions, Executor};
        let file = dir.path().join("p.db");
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&file)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let mut writer = options.connect().await.unwrap();
        writer.execute("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (7)").await.unwrap();
        (file, writer)
    }

    fn n(reads: &PointReads) -> Option<Result<Vec<i64>, StoreError>> {
        reads.read(&select("SELECT n FROM t"), |row| row.req_int("n"))
    }

    #[tokio::test]
    async fn a_point_read_reads_on_its_own_connection_and_keeps_it() {
        let dir = tempfile::TempDir::new().unwrap();
        let (file, _writer) = database(&dir).await;
        let reads = PointReads::new(Some(file));
        assert_eq!(n(&reads).unwrap().unwrap(), [7]);
        assert_eq!(n(&reads).unwrap().unwrap(), [7]);
        let state = reads.lock();
        assert_eq!((state.open, state.idle.len()), (1, 1), "one connection, kept for the next read");
    }

    #[tokio::test]
    async fn a_read_that_finds_the_database_locked_goes_to_the_readers() {
        use sqlx::Executor;
        let dir = tempfile::TempDir::new().unwrap();
        let (file, mut writer) = database(&dir).await;
        let reads = PointReads::new(Some(file));
        // An exclusive lock under WAL keeps every other connection from reading.
        writer.execute("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE").await.unwrap();
        assert!(n(&reads).is_none(), "not waited for, not failed: read elsewhere");
        writer.execute("COMMIT; PRAGMA locking_mode = NORMAL; SELECT 1 FROM t").await.unwrap();
        assert_eq!(n(&reads).unwrap().unwrap(), [7], "read here again once the lock is gone");
    }

    #[tokio::test]
    async fn after_the_close_every_read_goes_to_the_readers() {
        let dir = tempfile::TempDir::new().unwrap();
        let (file, _writer) = database(&dir).await;
        let reads = PointReads::new(Some(file));
        assert!(n(&reads).is_some());
        reads.close();
        assert!(n(&reads).is_none());
        assert_eq!(reads.lock().open, 0, "every connection closed");
    }

    #[tokio::test]
    async fn a_read_that_fails_in_sqlite_goes_to_the_readers_and_closes_its_connection() {
        let dir = tempfile::TempDir::new().unwrap();
        let (file, _writer) = database(&dir).await;
        let reads = PointReads::new(Some(file));
        assert!(reads.read(&select("SELECT n FROM missing"), |row| row.req_int("n")).is_none());
        assert_eq!(reads.lock().open, 0);
        assert_eq!(n(&reads).unwrap().unwrap(), [7], "the next read opens another");
    }

    #[tokio::test]
    async fn a_database_that_cannot_be_opened_is_read_through_the_readers_until_tried_again() {
        let dir = tempfile::TempDir::new().unwrap();
        let reads = PointReads::new(Some(dir.path().join("missing.db")));
        assert!(n(&reads).is_none());
        assert!(reads.lock().not_before.is_some(), "not tried again at every read");
        assert_eq!(reads.lock().open, 0);
    }

    #[tokio::test]
    async fn an_in_memory_database_is_read_through_the_readers() {
        assert!(n(&PointReads::new(None)).is_none());
    }
}
