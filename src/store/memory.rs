//! The memory store: the SQL stores' tables and rules kept in the process, for trying askgate
//! out (`gateway.database = "memory:"`), for tests, and for programs that embed it and keep
//! nothing. Nothing survives the process; a question's claim is as exact as in SQL: every
//! write is applied whole under one lock, and checks its condition there.
//!
//! The data lives apart from the store that reads it: [`MemoryStore::reopen`] opens another
//! store on the same data, as a restart opens a database file again, and closing a store
//! closes only that store.

mod outbox;
mod reads;
mod tables;
mod writes;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use async_trait::async_trait;

use super::{
    Callback, CardFind, Delivery, Find, Grant, GrantFind, Login, LoginFind, QuestionFilter, Resume, Store, StoreError,
    Undelivered, Unshown, Write, WriteStats,
};
use crate::question::{Question, QuestionId, RunId};
use tables::Tables;

/// What `gateway.database` says for the memory store.
pub const MEMORY_URL: &str = "memory:";

/// Whether `url` names the memory store (`memory:`).
pub fn is_memory_url(url: &str) -> bool {
    url == MEMORY_URL
}

/// Runs, questions, cards, grants and inbound keys in memory, with the SQL stores' behaviour.
/// It is held by one askgate (it shares nothing: [`Store::sharing`] is none).
pub struct MemoryStore {
    data: Arc<Mutex<Tables>>,
    /// Set by [`Store::close`] while it holds the data's lock, and read under that lock by
    /// every write: a write is either applied before the close or refused after it.
    closed: AtomicBool,
    stats: Mutex<WriteStats>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store on data of its own, empty.
    pub fn new() -> Self {
        Self::on(Arc::default())
    }

    /// Another store on this one's data, as a restart opens a database again: it reads
    /// everything written through this one (closed or not), and what it writes this one reads.
    pub fn reopen(&self) -> Self {
        Self::on(self.data.clone())
    }

    fn on(data: Arc<Mutex<Tables>>) -> Self {
        Self { data, closed: AtomicBool::new(false), stats: Mutex::default() }
    }

    /// The tables, locked. A write checks all its rules before it changes anything, and
    /// nothing after those checks panics, so a panic under the lock (in a read, or a write's
    /// checks) leaves the tables whole: a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tables, unless this store was closed.
    fn open(&self) -> Result<MutexGuard<'_, Tables>, StoreError> {
        let tables = self.lock();
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(tables)
    }

    fn count(&self, applied: bool, started: Instant) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        // Each write is its own commit.
        stats.batches += 1;
        stats.writes += 1;
        stats.failed += u64::from(!applied);
        stats.busy_seconds += started.elapsed().as_secs_f64();
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn write(&self, write: Write) {
        let started = Instant::now();
        let applied = match self.open() {
            Ok(mut tables) => tables.apply(write),
            Err(closed) => return write.refuse(closed),
        };
        self.count(applied, started);
    }

    async fn questions(&self, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
        Ok(self.open()?.find(find))
    }

    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        self.open()?.page(filter, cursor, limit)
    }

    async fn undelivered(&self, find: Unshown<'_>) -> Result<Vec<Undelivered>, StoreError> {
        Ok(self.open()?.undelivered(find))
    }

    async fn question_with_asker(&self, id: QuestionId) -> Result<Option<(Question, Option<String>)>, StoreError> {
        Ok(self.open()?.question_with_asker(id))
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        Ok(self.open()?.pending.by_seq.len() as u64)
    }

    async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.open()?.next_deadline())
    }

    async fn run_record(&self, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError> {
        Ok(self.open()?.run_record(id, journal))
    }

    async fn cards(&self, find: CardFind<'_>) -> Result<Vec<Delivery>, StoreError> {
        let tables = self.open()?;
        Ok(match find {
            CardFind::Of(questions) => tables.cards_of(questions),
            CardFind::At { surface, chat, message } => tables.card_at(surface, chat, message).into_iter().collect(),
        })
    }

    async fn find_grants(&self, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
        Ok(self.open()?.grants(find))
    }

    async fn due_callbacks(&self, now: i64, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError> {
        Ok(self.open()?.due_callbacks(now, to, limit as usize))
    }

    async fn callbacks_open(&self, to: &str) -> Result<bool, StoreError> {
        Ok(self.open()?.callbacks_open(to))
    }

    async fn seen(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.open()?.inbound.contains_key(key))
    }

    async fn draft(
        &self,
        question: QuestionId,
        person: &str,
    ) -> Result<Option<crate::question::form::Draft>, StoreError> {
        Ok(self.open()?.drafts.get(&(question, person.to_owned())).cloned())
    }

    async fn note(&self, key: &str) -> Result<Option<crate::store::Note>, StoreError> {
        Ok(self.open()?.notes.get(key).cloned())
    }

    async fn logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        let tables = self.open()?;
        let live = |l: &&Login, now: i64| l.expires_at.is_none_or(|at| at > now);
        Ok(match find {
            LoginFind::Secret { digest, now } => {
                tables.logins.values().filter(|l| !l.link && l.digest == digest && live(l, now)).cloned().collect()
            }
            LoginFind::Link { digest, now } => {
                tables.logins.values().filter(|l| l.link && l.digest == digest && live(l, now)).cloned().collect()
            }
            LoginFind::All { now } => tables.logins.values().filter(|l| live(l, now)).cloned().collect(),
        })
    }

    fn write_stats(&self) -> WriteStats {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Closes this store; the data stays for [`MemoryStore::reopen`]'s stores.
    async fn close(&self) {
        let _tables = self.lock();
        self.closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreExt;

    #[tokio::test]
    async fn closing_a_store_closes_only_it_and_its_data_stays() {
        let first = MemoryStore::new();
        let second = first.reopen();
        assert!(first.first_seen("k1", 1).await.unwrap());
        first.close().await;
        first.close().await;
        assert!(matches!(first.first_seen("k2", 2).await, Err(StoreError::Closed)));
        assert!(matches!(first.seen("k1").await, Err(StoreError::Closed)));
        assert!(second.seen("k1").await.unwrap(), "written before the close");
        assert!(second.first_seen("k2", 2).await.unwrap(), "the other store still writes");
        assert!(first.reopen().seen("k2").await.unwrap());
        assert_eq!((second.write_stats().writes, first.write_stats().writes), (1, 1), "each counts its own");
    }
}
