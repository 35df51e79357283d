//! How the SQL stores answer [`Store`](super::Store)'s filters: one query of their own per
//! filter ([`Reads`]), and the one dispatch from a filter to its query, written once here.

use async_trait::async_trait;

use super::{Find, Grant, GrantFind, Resume, StoreError};
use crate::question::{Conversation, Question, QuestionId, RunId};
use crate::run::Run;

/// One query per filter, each in its backend's dialect.
#[async_trait]
pub(super) trait Reads: Send + Sync {
    async fn find_id(&self, id: QuestionId) -> Result<Option<Question>, StoreError>;
    async fn find_prefix(
        &self,
        conversation: Option<&Conversation>,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<Question>, StoreError>;
    async fn find_pending(&self, conversation: Option<&Conversation>, limit: u32) -> Result<Vec<Question>, StoreError>;
    async fn find_journal(&self, run: RunId) -> Result<Vec<Question>, StoreError>;
    async fn find_due(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError>;
    async fn find_nudges(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError>;
    async fn read_run(&self, id: RunId) -> Result<Option<Run>, StoreError>;
    async fn read_journaled(&self, id: RunId) -> Result<Option<Resume>, StoreError>;
    async fn grant_for(
        &self,
        conversation: &Conversation,
        grantee: &str,
        action: &str,
        now: i64,
    ) -> Result<Option<Grant>, StoreError>;
    async fn live_grants(&self, conversation: Option<&Conversation>, now: i64) -> Result<Vec<Grant>, StoreError>;
}

/// [`Store::questions`](super::Store::questions) through a backend's queries.
pub(super) async fn questions<R: Reads + ?Sized>(r: &R, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
    match find {
        Find::Id(id) => Ok(r.find_id(id).await?.into_iter().collect()),
        Find::Prefix { conversation, prefix, limit } => r.find_prefix(conversation, prefix, limit).await,
        Find::Pending { conversation, limit } => r.find_pending(conversation, limit).await,
        Find::Journal(run) => r.find_journal(run).await,
        Find::Due { now, limit } => r.find_due(now, limit).await,
        Find::Nudges { now, limit } => r.find_nudges(now, limit).await,
    }
}

/// [`Store::run_record`](super::Store::run_record) through a backend's queries.
pub(super) async fn run<R: Reads + ?Sized>(r: &R, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError> {
    match journal {
        true => r.read_journaled(id).await,
        false => Ok(r.read_run(id).await?.map(|run| Resume { run, journal: Vec::new() })),
    }
}

/// [`Store::find_grants`](super::Store::find_grants) through a backend's queries.
pub(super) async fn grants<R: Reads + ?Sized>(r: &R, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
    match find {
        GrantFind::Live { conversation, now } => r.live_grants(conversation, now).await,
        GrantFind::For { conversation, grantee, action, now } => {
            Ok(r.grant_for(conversation, grantee, action, now).await?.into_iter().collect())
        }
    }
}
