//! The readers: read-only sqlx connections (each with a thread of its own, where SQLite runs),
//! each lent to one read at a time.
//!
//! Not sqlx's pool: a connection it takes back is first tested by a round trip to the
//! connection's thread (a ping), in a task spawned for it, so every read cost two round trips
//! and a task. A read here takes an idle connection (or waits for one), and gives it back when it
//! ends, also when it is dropped half-way: the connection's thread ends the statement it was
//! running (its rows have nowhere to go) before it takes the next, and a read leaves no
//! transaction open, so the connection is as good as before.

use std::sync::{Mutex, PoisonError};

use sqlx::sqlite::{SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{ConnectOptions, Connection, Sqlite};
use tokio::sync::Semaphore;

use crate::store::StoreError;

/// At most this many reads run at once (a connection each).
const CONNECTIONS: u32 = 3;
/// How long a read waits for a connection before it is refused as busy (as sqlx's pool did).
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Read-only connections, lent one read at a time.
pub(super) struct Readers {
    /// How a connection is opened: the second and third when reads need them, and one in place
    /// of a connection whose thread crashed.
    options: SqliteConnectOptions,
    /// The connections no read holds.
    idle: Mutex<Vec<SqliteConnection>>,
    /// One permit per connection; closed once the readers are.
    free: Semaphore,
}

impl Readers {
    /// Opens the first connection (the others as reads need them).
    ///
    /// # Errors
    /// When the database cannot be opened for reading.
    pub(super) async fn open(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        let first = options.connect().await?;
        Ok(Self { options, idle: Mutex::new(vec![first]), free: Semaphore::new(CONNECTIONS as usize) })
    }

    /// Every row `query` returns, read on a connection of its own.
    ///
    /// # Errors
    /// When the readers are closed, every connection stayed busy for [`WAIT`], a connection
    /// cannot be opened, or the read fails.
    pub(super) async fn fetch_all(
        &self,
        query: sqlx::query::Query<'_, Sqlite, SqliteArguments>,
    ) -> Result<Vec<SqliteRow>, StoreError> {
        let waited = tokio::time::timeout(WAIT, self.free.acquire()).await;
        let _permit = waited
            .map_err(|_| StoreError::Busy(format!("every reader was busy for {} s", WAIT.as_secs())))?
            .map_err(|_| StoreError::Closed)?;
        let mut lent = Lent { connection: self.take(), readers: self };
        let connection = match &mut lent.connection {
            Some(connection) => connection,
            None => lent.connection.insert(self.options.connect().await?),
        };
        let rows = query.fetch_all(connection).await;
        if matches!(rows, Err(sqlx::Error::WorkerCrashed)) {
            // Its thread is gone: the next read opens another.
            lent.connection = None;
        }
        Ok(rows?)
    }

    fn take(&self) -> Option<SqliteConnection> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    /// Waits for the reads running, closes every connection, and refuses later reads.
    pub(super) async fn close(&self) {
        if let Ok(all) = self.free.acquire_many(CONNECTIONS).await {
            all.forget();
        }
        self.free.close();
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        for connection in idle {
            if let Err(e) = connection.close().await {
                tracing::debug!(error = %e, "a reader did not close cleanly");
            }
        }
    }
}

/// A connection lent to one read: given back when the read ends or is dropped.
struct Lent<'r> {
    connection: Option<SqliteConnection>,
    readers: &'r Readers,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.readers.idle.lock().unwrap_or_else(PoisonError::into_inner).push(connection);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn readers(dir: &tempfile::TempDir) -> Readers {
        let options = SqliteConnectOptions::new().filename(dir.path().join("r.db")).create_if_missing(true);
        options.connect().await.unwrap().close().await.unwrap();
        Readers::open(options.read_only(true)).await.unwrap()
    }

    fn one() -> sqlx::query::Query<'static, Sqlite, SqliteArguments> {
        sqlx::query("SELECT 1 AS one")
    }

    #[tokio::test]
    async fn a_read_dropped_half_way_gives_its_connection_back() {
        let dir = tempfile::TempDir::new().unwrap();
        let readers = readers(&dir).await;
        // More rows than a moment can read: the read is dropped while its statement runs.
        let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c";
        for _ in 0..CONNECTIONS + 1 {
            let cut = tokio::time::timeout(Duration::from_millis(20), readers.fetch_all(sqlx::query(endless))).await;
            assert!(cut.is_err(), "the read was cut");
        }
        assert_eq!(readers.idle.lock().unwrap().len(), 1, "one connection, given back each time");
        // Twice as many reads as connections, at once: each connection was given back and works.
        let reads = (0..2 * CONNECTIONS).map(|_| readers.fetch_all(one()));
        for rows in futures_util::future::join_all(reads).await {
            assert_eq!(rows.unwrap().len(), 1);
        }
        let idle = readers.idle.lock().unwrap().len();
        assert!(idle <= CONNECTIONS as usize, "at most {CONNECTIONS} connections, not {idle}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_finds_every_connection_busy_for_the_wait_is_refused_as_busy() {
        let dir = tempfile::TempDir::new().unwrap();
        let readers = readers(&dir).await;
        let held = readers.free.acquire_many(CONNECTIONS).await.unwrap();
        let refused = readers.fetch_all(one()).await;
        assert!(matches!(&refused, Err(StoreError::Busy(m)) if m.contains("30 s")), "{refused:?}");
        drop(held);
        assert_eq!(readers.fetch_all(one()).await.unwrap().len(), 1, "served once one is free");
    }

    #[tokio::test]
    async fn a_read_after_the_close_is_refused() {
        let dir = tempfile::TempDir::new().unwrap();
        let readers = readers(&dir).await;
        assert_eq!(readers.fetch_all(one()).await.unwrap().len(), 1);
        readers.close().await;
        assert!(matches!(readers.fetch_all(one()).await, Err(StoreError::Closed)));
        assert!(readers.idle.lock().unwrap().is_empty(), "every connection was closed");
    }
}
