//! Group commit for the PostgreSQL store's writes: the writes that arrive while a transaction
//! runs are committed together in the next one. Many conversations then share one commit: one
//! WAL flush, and one turn at the lock PostgreSQL takes to order notifying commits, where each
//! write was its own transaction. A write that arrives alone runs alone (no `BEGIN`/`COMMIT`
//! round trips), so one conversation pays nothing for it.
//!
//! Each write is one statement (see `writes`) that answers with how many rows it touched, or
//! with the row it returned.
//! When a write of a batch fails, the batch is rolled back and each of its writes runs again
//! alone, so a write's failure (a refused value, a deadlock with another instance's batch) is
//! its own and never another's. When the commit itself fails, whether it took effect is not
//! known, so every write of the batch hears that failure, as a statement alone would.

use std::sync::Arc;

use sqlx::postgres::{PgArguments, PgPool, PgRow, Postgres};
use sqlx::{Execute, SqlStr};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::store::StoreError;

/// How many writers commit at once, each on a connection of the pool while it commits
/// (measured with 64 conversations: 1 writer ~940 cycles/s, 2 ~1,175, 4 ~1,320, 6 ~1,290,
/// 8 ~1,200).
const WRITERS: usize = 4;
/// The most writes in one transaction.
const MAX_BATCH: usize = 64;
/// How long writes nobody waits for (announcements) wait for another write to share their
/// commit, when they alone are queued: a notifying commit is the costly kind.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// A statement with its arguments bound.
pub(super) type PgQuery = sqlx::query::Query<'static, Postgres, PgArguments>;

/// What a write answers.
enum Answer {
    /// How many rows it touched (or returned, for a `SELECT` at its end).
    Touched(u64),
    /// The row it returned, if any.
    Row(Option<PgRow>),
}

/// A write waiting for its transaction, and where its result goes.
struct Write {
    sql: SqlStr,
    args: PgArguments,
    /// Whether it answers with its row rather than a count.
    fetch: bool,
    done: oneshot::Sender<Result<Answer, StoreError>>,
    /// Whether someone waits for it.
    awaited: bool,
}

impl Write {
    /// Runs the write on `executor`.
    async fn run<'e, E: sqlx::PgExecutor<'e>>(&self, executor: E) -> Result<Answer, sqlx::Error> {
        let query = sqlx::query_with(self.sql.clone(), self.args.clone());
        Ok(match self.fetch {
            true => Answer::Row(query.fetch_optional(executor).await?),
            false => Answer::Touched(query.execute(executor).await?.rows_affected()),
        })
    }
}

/// Hands a write's result to whoever waits for it; logs a failure nobody waits for.
fn reply(done: oneshot::Sender<Result<Answer, StoreError>>, result: Result<Answer, StoreError>) {
    if let Err(Err(e)) = done.send(result) {
        tracing::debug!(error = %e, "a write nobody waited for failed");
    }
}

/// The queue of writes; the writers end when the store (its only holder) is dropped.
pub(super) struct Writes {
    queue: mpsc::UnboundedSender<Write>,
}

impl Writes {
    /// Starts the writers on `pool`; they stop once the returned `Writes` is dropped and the
    /// writes queued before have been committed.
    pub(super) fn start(pool: &PgPool) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WRITERS {
            tokio::spawn(writer(pool.clone(), rx.clone()));
        }
        Self { queue }
    }

    /// Runs `query` in the next transaction and returns the rows it touched (or returned).
    pub(super) async fn execute(&self, query: PgQuery) -> Result<u64, StoreError> {
        match self.queue(query, false, true)?.await.map_err(|_| StoreError::Closed)?? {
            Answer::Touched(rows) => Ok(rows),
            Answer::Row(row) => Ok(u64::from(row.is_some())),
        }
    }

    /// Runs `query` in the next transaction and returns the row it returned, if any.
    pub(super) async fn fetch_optional(&self, query: PgQuery) -> Result<Option<PgRow>, StoreError> {
        match self.queue(query, true, true)?.await.map_err(|_| StoreError::Closed)?? {
            Answer::Row(row) => Ok(row),
            Answer::Touched(_) => unreachable!("a fetching write answers with its row"),
        }
    }

    /// Runs `query` in a coming transaction without waiting for it (a failure is logged).
    pub(super) fn send(&self, query: PgQuery) {
        if let Err(e) = self.queue(query, false, false) {
            tracing::debug!(error = %e, "a write was not queued");
        }
    }

    fn queue(
        &self,
        mut query: PgQuery,
        fetch: bool,
        awaited: bool,
    ) -> Result<oneshot::Receiver<Result<Answer, StoreError>>, StoreError> {
        let args = query
            .take_arguments()
            .map_err(|e| StoreError::Decode(format!("a value could not be encoded: {e}")))?
            .unwrap_or_default();
        let (done, result) = oneshot::channel();
        self.queue.send(Write { sql: query.sql(), args, fetch, done, awaited }).map_err(|_| StoreError::Closed)?;
        Ok(result)
    }
}

/// Takes the waiting writes (at most [`MAX_BATCH`]) and commits them, until the queue ends.
async fn writer(pool: PgPool, queue: Arc<Mutex<mpsc::UnboundedReceiver<Write>>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            let mut queue = queue.lock().await;
            if queue.recv_many(&mut batch, MAX_BATCH).await == 0 {
                return;
            }
            let room = MAX_BATCH - batch.len();
            if room > 0 && batch.iter().all(|w| !w.awaited) {
                let _ = tokio::time::timeout(LINGER, queue.recv_many(&mut batch, room)).await;
            }
        }
        commit(&pool, &mut batch).await;
    }
}

/// Commits `batch` in one transaction, or each write alone when it holds one or the
/// transaction failed; every write hears its own result.
async fn commit(pool: &PgPool, batch: &mut Vec<Write>) {
    if batch.len() > 1 {
        match together(pool, batch).await {
            Ok(answers) => {
                for (write, answer) in batch.drain(..).zip(answers) {
                    reply(write.done, Ok(answer));
                }
                return;
            }
            Err(Failed::Commit(e)) => {
                let e = StoreError::from(e);
                for write in batch.drain(..) {
                    reply(write.done, Err(e.again()));
                }
                return;
            }
            Err(Failed::Write(e)) => {
                tracing::debug!(error = %e, writes = batch.len(), "a batch failed; its writes run alone");
            }
        }
    }
    for write in batch.drain(..) {
        let result = write.run(pool).await;
        reply(write.done, result.map_err(StoreError::from));
    }
}

/// Why a batch did not commit.
enum Failed {
    /// Before the commit: nothing took effect.
    Write(sqlx::Error),
    /// The commit: whether it took effect is not known.
    Commit(sqlx::Error),
}

/// The writes of `batch` in one transaction: what each answered, once all committed.
async fn together(pool: &PgPool, batch: &[Write]) -> Result<Vec<Answer>, Failed> {
    let mut tx = pool.begin().await.map_err(Failed::Write)?;
    let mut answers = Vec::with_capacity(batch.len());
    for write in batch {
        answers.push(write.run(&mut *tx).await.map_err(Failed::Write)?);
    }
    tx.commit().await.map_err(Failed::Commit)?;
    Ok(answers)
}
