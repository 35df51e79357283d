//! The SQLite store: one writer connection that commits concurrent writes together, and a few
//! reader connections, each lent to one read at a time (WAL lets them read while the writer
//! writes).
//!
//! Group commit is what makes many conversations cheap: a commit costs far more than a
//! statement, so every write that arrives while one transaction runs joins the next one.
//! Callers are answered only after their transaction committed.

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::reads::{self, Dialect, Reads, Select};
use super::{
    Callback, CardFind, Delivery, Find, Grant, GrantFind, Login, LoginFind, QuestionFilter, Resume, Store, StoreError,
    Undelivered, Unshown, Write, WriteStats,
};
use crate::question::form::Draft;
use crate::question::{Conversation, Kind, Question, QuestionId, RunId, Status};

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

mod backlog;
mod checkpoint;
mod file;
#[cfg(test)]
mod plans;
mod point;
// The one module allowed to call into C: SQLite's prepared statements on sqlx's handle and on
// the point reads' own connections.
#[allow(unsafe_code)]
mod raw;
mod readers;
mod rows;
mod statements;
mod writer;

use super::rows::{Bind, delivery_from_row, page, page_after, question_from_row};
use file::{create_owner_only, database_file, lock_database, log_path, parse_url};
use writer::Job;

/// A page of pending questions in every conversation, oldest first (`?2` the last rowid of the
/// page before; `?3` the limit; `?5` a kind; `?1` and `?4` are bound and unused).
const PENDING: &str = concat!(
    "SELECT rowid AS page_key, ",
    question_columns!(),
    " FROM questions WHERE status = 'pending' \
     AND (?2 IS NULL OR rowid > ?2) AND (?5 IS NULL OR kind = ?5) ORDER BY rowid LIMIT ?3"
);

/// [`PENDING`] in one conversation (`?1`), on the index of its pending questions, which keeps
/// the order asked: without it SQLite reads every pending question to find a conversation's.
const PENDING_IN: &str = concat!(
    "SELECT rowid AS page_key, ",
    question_columns!(),
    " FROM questions INDEXED BY questions_pending_conversation WHERE status = 'pending' AND conversation = ?1 \
     AND (?2 IS NULL OR rowid > ?2) AND (?5 IS NULL OR kind = ?5) ORDER BY rowid LIMIT ?3"
);

/// SQLite through sqlx.
pub struct SqliteStore {
    /// The lock on `<database>.lock`, held until [`Store::close`] (or drop).
    exclusive: std::sync::Mutex<Option<File>>,
    /// Reads of one row by its key, on the calling thread.
    point: point::PointReads,
    readers: readers::Readers,
    writes: mpsc::UnboundedSender<Job>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    counters: Arc<writer::Counters>,
    /// The task that checkpoints and trims the WAL beside the writer.
    checkpoints: checkpoint::Checkpointer,
    /// What holds the writer back while a checkpoint falls behind.
    backlog: Arc<backlog::Backlog>,
}

/// How many WAL pages the writer lets pile up before it checkpoints them itself: only when the
/// checkpoints beside it fall this far behind (SQLite's default is 1,000).
const WRITER_CHECKPOINTS_AFTER: &str = "100000";

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://askgate.db`, or a path),
    /// applies the migrations, and starts the writer.
    ///
    /// Only one store at a time may have a database file open: the first holds an advisory
    /// lock on `<database>.lock` (which names its process) until it is closed.
    ///
    /// # Errors
    /// When another store holds the database, the file cannot be opened or created, or a
    /// migration fails.
    pub async fn open(url: &str, sync: Synchronous) -> Result<Self, StoreError> {
        raw::turn_off_memory_statistics();
        let options = parse_url(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match sync {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
            })
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // The WAL is cut back to this size whenever it starts again (see `checkpoint`).
            .pragma("journal_size_limit", checkpoint::WAL_LIMIT.to_string())
            .disable_statement_logging();
        let exclusive = database_file(&options).map(lock_database).transpose()?;
        if let Some(file) = database_file(&options) {
            create_owner_only(file)?;
        }
        // The WAL is checkpointed into the database beside the writer (see `checkpoint`): the
        // copying was a sixth of the writer's time, in the commits that happened to carry it.
        // The writer does it itself only if those fall far behind.
        let mut writer = options.clone().pragma("wal_autocheckpoint", WRITER_CHECKPOINTS_AFTER).connect().await?;
        super::migrations::sqlite().run(&mut writer).await?;
        let mut checkpointer = options.clone().busy_timeout(checkpoint::WAIT).connect().await?;
        raw::keep_wal_files(&mut checkpointer.lock_handle().await?)?;
        // The file as SQLite opened it, a link followed (its log is beside it); it exists once the
        // writer opened it. An in-memory database has none.
        let file = database_file(&options).and_then(|f| std::fs::canonicalize(f).ok());
        let backlog = Arc::new(backlog::Backlog::new(file.as_deref().map(log_path)));
        let point = point::PointReads::new(file);
        let readers = readers::Readers::open(options.read_only(true)).await?;
        let (writes, queue) = mpsc::unbounded_channel();
        let counters = Arc::new(writer::Counters::default());
        let thread = writer::start(writer, queue, counters.clone(), backlog.clone()).await?;
        Ok(Self {
            exclusive: std::sync::Mutex::new(exclusive),
            point,
            readers,
            writes,
            writer: Mutex::new(Some(thread)),
            counters: counters.clone(),
            checkpoints: checkpoint::Checkpointer::start(checkpointer, counters, backlog.clone()),
            backlog,
        })
    }

    /// Every row a read of askgate's own (a table name and columns it chose, not a person's text)
    /// returns, through the readers: for copying a database.
    pub(super) async fn read_all(&self, sql: &str) -> Result<Vec<sqlx::sqlite::SqliteRow>, StoreError> {
        self.readers.fetch_all(sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn write(&self, write: Write) {
        if let Err(refused) = self.writes.send(Job::Write(writer::Queued::new(write))) {
            writer::refuse(refused.0);
        }
    }

    async fn questions(&self, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
        if let Find::Id(_) = find {
            let select = reads::question_select(&find, Dialect::Sqlite);
            if let Some(read) = self.point.read(&select, |row| question_from_row(row)) {
                return read;
            }
        }
        reads::questions(self, find).await
    }

    async fn run_record(&self, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError> {
        reads::run(self, id, journal).await
    }

    async fn find_grants(&self, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
        reads::grants(self, find).await
    }

    async fn due_callbacks(&self, now: i64, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError> {
        reads::due_callbacks(self, now, to, limit).await
    }

    async fn callbacks_open(&self, to: &str) -> Result<bool, StoreError> {
        reads::callbacks_open(self, to).await
    }

    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        // SQLite's rowid grows with every insert: a cursor is the last rowid of a page, and
        // keyset paging on it needs no index beyond the table itself (and, for pending
        // questions, the partial index that lists them).
        let after = page_after(cursor)?;
        let limit = limit.max(1);
        let pending = filter.status == Some(Status::Pending);
        let sql = match (pending, &filter.conversation) {
            (true, Some(_)) => PENDING_IN,
            (true, None) => PENDING,
            (false, _) => concat!(
                "SELECT rowid AS page_key, ",
                question_columns!(),
                " FROM questions WHERE (?1 IS NULL OR conversation = ?1) AND (?4 IS NULL OR status = ?4) \
                 AND (?2 IS NULL OR rowid < ?2) AND (?5 IS NULL OR kind = ?5) ORDER BY rowid DESC LIMIT ?3"
            ),
        };
        let query = sqlx::query(sql)
            .bind(filter.conversation.as_ref().map(Conversation::as_str))
            .bind(after)
            .bind(limit)
            .bind(filter.status.map(Status::as_str))
            .bind(filter.kind.map(Kind::as_str));
        let rows = self.readers.fetch_all(query).await?;
        page(&rows, limit)
    }

    async fn cards(&self, find: CardFind<'_>) -> Result<Vec<Delivery>, StoreError> {
        let ids = match find {
            CardFind::Of(ids) => ids,
            CardFind::At { surface, chat, message } => return reads::card_at(self, surface, chat, message).await,
        };
        let ids = serde_json::to_string(&ids).map_err(|e| StoreError::Decode(e.to_string()))?;
        let query = sqlx::query(
            "SELECT question_id, surface, chat, message, role, conversation FROM deliveries \
             WHERE question_id IN (SELECT value FROM json_each(?)) ORDER BY created_at",
        );
        let rows = self.readers.fetch_all(query.bind(ids)).await?;
        rows.iter().map(delivery_from_row).collect()
    }

    async fn question_with_asker(&self, id: QuestionId) -> Result<Option<(Question, Option<String>)>, StoreError> {
        if let Some(read) = self.point.read(&reads::asker_select(id), |row| reads::with_asker(row)) {
            return read.map(|mut found| found.pop());
        }
        reads::question_with_asker(self, id).await
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        reads::pending_count(self).await
    }

    async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        reads::next_deadline(self).await
    }

    async fn undelivered(&self, find: Unshown<'_>) -> Result<Vec<Undelivered>, StoreError> {
        reads::undelivered(self, find).await
    }

    async fn logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        let rows = match find {
            LoginFind::Secret { digest, now } => {
                self.readers.fetch_all(sqlx::query(super::logins::BY_SECRET).bind(digest).bind(now)).await?
            }
            LoginFind::Link { digest, now } => {
                self.readers.fetch_all(sqlx::query(super::logins::BY_LINK).bind(digest).bind(now)).await?
            }
            LoginFind::All { now } => self.readers.fetch_all(sqlx::query(super::logins::ALL).bind(now)).await?,
        };
        rows.iter().map(super::logins::from_row).collect()
    }

    async fn seen(&self, key: &str) -> Result<bool, StoreError> {
        reads::seen(self, key).await
    }

    async fn draft(&self, question: QuestionId, person: &str) -> Result<Option<Draft>, StoreError> {
        reads::draft(self, question, person).await
    }

    async fn note(&self, key: &str) -> Result<Option<super::Note>, StoreError> {
        reads::note(self, key).await
    }

    fn write_stats(&self) -> WriteStats {
        WriteStats { held_seconds: self.backlog.held_seconds(), ..self.counters.stats() }
    }

    async fn close(&self) {
        let Some(writer) = self.writer.lock().await.take() else { return };
        // Reads from here on go through the readers, until they close too.
        self.point.close();
        // The writes queued before the close are committed without waiting for a checkpoint.
        self.backlog.release();
        self.checkpoints.stop().await;
        // The writer commits everything queued before this job, truncates the WAL, then ends.
        let (closed, done) = oneshot::channel();
        if self.writes.send(Job::Close(closed)).is_ok() {
            let _ = done.await;
        }
        // The thread has answered the close, so it is ending; join it off the runtime.
        if let Ok(Err(_)) = tokio::task::spawn_blocking(move || writer.join()).await {
            tracing::warn!("the store writer ended abnormally");
        }
        self.readers.close().await;
        // Another askgate may open the database now.
        drop(self.exclusive.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
    }
}

#[async_trait]
impl Reads for SqliteStore {
    type Row = sqlx::sqlite::SqliteRow;
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn rows(&self, select: Select<'_>) -> Result<Vec<Self::Row>, StoreError> {
        let query = select.binds.iter().fold(sqlx::query(select.sql), |query, bind| match bind {
            Bind::Int(i) => query.bind(*i),
            Bind::Text(s) => query.bind(s.as_deref()),
        });
        self.readers.fetch_all(query).await
    }
}
