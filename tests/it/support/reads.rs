//! A store that counts how often each question is read by id, and the callbacks' outbox is
//! read, around another store: what a test checks when a behaviour must not read again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use askgate::question::{Question, QuestionId, RunId};
use askgate::store::{
    Callback, CardFind, Delivery, Find, Grant, GrantFind, Login, LoginFind, QuestionFilter, Resume, Shared, Store,
    StoreError, Undelivered, Unshown, Write, WriteStats,
};
use async_trait::async_trait;

/// `inner`, with a count of the reads of each question by id ([`Find::Id`]), of the due
/// callbacks and of whether any is open.
pub struct Counting {
    inner: Arc<dyn Store>,
    reads: Mutex<HashMap<QuestionId, usize>>,
    due_reads: AtomicUsize,
    open_reads: AtomicUsize,
}

impl Counting {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self { inner, reads: Mutex::default(), due_reads: AtomicUsize::new(0), open_reads: AtomicUsize::new(0) }
    }

    /// How often the due callbacks were read, and whether any is open.
    pub fn outbox_reads(&self) -> (usize, usize) {
        (self.due_reads.load(Ordering::SeqCst), self.open_reads.load(Ordering::SeqCst))
    }

    /// How often `id` was read by id so far.
    pub fn reads_of(&self, id: QuestionId) -> usize {
        self.reads.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
}

#[async_trait]
impl Store for Counting {
    async fn write(&self, write: Write) {
        self.inner.write(write).await;
    }

    async fn questions(&self, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
        if let Find::Id(id) = find {
            *self.reads.lock().unwrap().entry(id).or_default() += 1;
        }
        self.inner.questions(find).await
    }

    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        self.inner.questions_page(filter, cursor, limit).await
    }

    async fn undelivered(&self, find: Unshown<'_>) -> Result<Vec<Undelivered>, StoreError> {
        self.inner.undelivered(find).await
    }

    async fn question_with_asker(&self, id: QuestionId) -> Result<Option<(Question, Option<String>)>, StoreError> {
        self.inner.question_with_asker(id).await
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        self.inner.pending_count().await
    }

    async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        self.inner.next_deadline().await
    }

    async fn run_record(&self, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError> {
        self.inner.run_record(id, journal).await
    }

    async fn cards(&self, find: CardFind<'_>) -> Result<Vec<Delivery>, StoreError> {
        self.inner.cards(find).await
    }

    async fn due_callbacks(&self, now: i64, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError> {
        self.due_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.due_callbacks(now, to, limit).await
    }

    async fn callbacks_open(&self, to: &str) -> Result<bool, StoreError> {
        self.open_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.callbacks_open(to).await
    }

    async fn find_grants(&self, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
        self.inner.find_grants(find).await
    }

    async fn logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError> {
        self.inner.logins(find).await
    }

    async fn seen(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.seen(key).await
    }

    async fn draft(
        &self,
        question: QuestionId,
        person: &str,
    ) -> Result<Option<askgate::question::form::Draft>, StoreError> {
        self.inner.draft(question, person).await
    }

    async fn note(&self, key: &str) -> Result<Option<askgate::store::Note>, StoreError> {
        self.inner.note(key).await
    }

    fn write_stats(&self) -> WriteStats {
        self.inner.write_stats()
    }

    fn sharing(&self) -> Option<&dyn Shared> {
        self.inner.sharing()
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
