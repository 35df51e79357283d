//! Persistence behind a trait that fits on a page: [`Store`] takes writes as commands (each a
//! type that names its reply, [`Command`], carried as a [`Write`]) and answers reads through
//! filter values ([`Find`], [`CardFind`], [`GrantFind`]); what only a
//! store several askgates share can do (leases, instance ids, the change feed) is a trait of
//! its own, [`Shared`]. [`StoreExt`] gives each command and filter a typed method of its own,
//! which is what the rest of askgate calls. Three stores implement it: [`SqliteStore`],
//! [`PostgresStore`] and [`MemoryStore`]; one conformance suite runs on all three.
//!
//! The rules every implementation keeps: a question is written before it is rendered; a
//! resolve is one conditional write that succeeds for exactly one caller and changes its run
//! in the same commit ([`Resolution::run_after`]); a follow-up run's status moves to `waiting`
//! with the insert of its pending question. A run is first written when it first asks or ends.

// The columns both backends store, in the order their inserts bind them.
macro_rules! question_columns {
    () => {
        "id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom, \
         default_json, answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, \
         answered_via, answered_name, resolved_at, quorum, approvals, nudges, nudge_at, escalated_to, asked_by, \
         descriptions, form, locale, time_zone"
    };
}

/// The columns a won claim returns: those other writes may change while a question waits
/// (its next reminder, where it was escalated, the approvals counted so far). Everything
/// else stays as the question was asked until the claim, which the claimer knows.
macro_rules! claim_returns {
    () => {
        "nudge_at, escalated_to, approvals"
    };
}

macro_rules! grant_columns {
    () => {
        "id, conversation, action, granted_by, question_id, created_at, expires_at, granted_name, pattern, grantee"
    };
}

macro_rules! run_columns {
    () => {
        "id, function, conversation, initiator, input, mode, status, says, result, created_at, updated_at, answerers"
    };
}

/// The oldest ended runs before `$1`, at most `$2` of them, whose callbacks are settled: what
/// pruning deletes, the same runs in each of its statements (nothing between them changes
/// `runs`). Both backends read `$1` as the first parameter.
macro_rules! ended_runs {
    () => {
        "SELECT id FROM runs WHERE status IN ('finished', 'failed', 'cancelled') AND updated_at < $1 \
         AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.run_id = runs.id AND c.delivered_at IS NULL \
         AND c.gave_up_at IS NULL) ORDER BY updated_at, id LIMIT $2"
    };
}

/// Whether a pending question `q` has no card recorded in the conversation its column
/// `$place` names (`conversation`, or `escalated_to`), as 1 or 0 in a column both backends read
/// as an integer. A card recorded before cards kept their conversation (NULL) counts as shown
/// in either.
macro_rules! card_missing_in {
    ($place:literal) => {
        concat!(
            "CAST(CASE WHEN q.",
            $place,
            " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM deliveries d \
             WHERE d.question_id = q.id AND d.role = 'card' \
             AND (d.conversation IS NULL OR d.conversation = q.",
            $place,
            ")) THEN 1 ELSE 0 END AS BIGINT)"
        )
    };
}

/// The columns and joins of a run read with its journal: the run's columns (prefixed `r_`)
/// on every row, its questions' columns where there are any.
macro_rules! run_and_journal {
    () => {
        "r.id AS r_id, r.function AS r_function, r.conversation AS r_conversation, \
         r.initiator AS r_initiator, r.input AS r_input, r.mode AS r_mode, r.status AS r_status, \
         r.says AS r_says, r.result AS r_result, r.created_at AS r_created_at, \
         r.updated_at AS r_updated_at, r.answerers AS r_answerers, q.* FROM runs r LEFT JOIN questions q ON q.run_id = r.id"
    };
}

pub mod command;
pub mod copy;
mod drafts;
mod error;

mod logins;
mod memory;
mod migrations;
mod named;
mod notes;
mod outbox;
mod postgres;
mod reads;
mod records;
mod rows;
mod sqlite;
mod typed;

use async_trait::async_trait;

use crate::question::{Conversation, Question, QuestionId, RunId, Surface};
use crate::run::Run;

pub use error::StoreError;
pub use logins::{Login, LoginFind, Powers};

pub use command::{Command, Write};
pub use memory::{MEMORY_URL, MemoryStore, is_memory_url};
pub use postgres::{InstanceRow, PostgresStore, instances, is_postgres_url, redact};
use records::covering;
pub use records::{
    Callback, CallbackTry, Change, Claim, Delivery, DeliveryRole, Grant, Lease, Note, Orphans, Pruned, QuestionFilter,
    Resolution, Resume, RunAfter, RunEvent, RunWritten, Undelivered, WriteStats,
};
pub use sqlite::{SqliteStore, Synchronous};
pub use typed::StoreExt;

/// Which questions to read. Lists of pending questions are oldest first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Find<'a> {
    /// One question.
    Id(QuestionId),
    /// Those whose id starts with `prefix` (lower-case hex and hyphens), in a conversation or
    /// escalated to it (none: in any), newest first.
    Prefix { conversation: Option<&'a Conversation>, prefix: &'a str, limit: u32 },
    /// Pending ones, of a conversation (its own and those escalated to it) or of all.
    Pending { conversation: Option<&'a Conversation>, limit: u32 },
    /// A run's questions by step: its journal, and at most one pending.
    Journal(RunId),
    /// Pending ones whose deadline is at or before `now`.
    Due { now: i64, limit: u32 },
    /// Pending ones whose next reminder or escalation is at or before `now`.
    Nudges { now: i64, limit: u32 },
}

/// Which recorded messages to read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CardFind<'a> {
    /// Those of these questions, oldest first.
    Of(&'a [QuestionId]),
    /// The one at this place (a card or a prompt), if any.
    At { surface: Surface, chat: &'a str, message: &'a str },
}

/// Which grants to read: only live ones (neither revoked nor expired at `now`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GrantFind<'a> {
    /// Of a conversation (none: of all), oldest first.
    Live { conversation: Option<&'a Conversation>, now: i64 },
    /// The one that lets `grantee`'s `action` through in `conversation`: an exact grant, else
    /// the oldest rule whose pattern fits.
    For { conversation: &'a Conversation, grantee: &'a str, action: &'a str, now: i64 },
}

/// Which pending questions without a card to read ([`Store::undelivered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unshown<'a> {
    /// Those after this place in the order questions were asked (0: from the first).
    pub after: i64,
    /// Those asked before this time.
    pub before: i64,
    /// Only those whose own conversation is of this channel (`telegram` names `telegram:…`);
    /// none: of every channel. On a store several askgates share, never those whose run
    /// another askgate owns while it lives: the askgate that asked a question shows its cards.
    pub channel: Option<&'a str>,
    /// At most this many.
    pub limit: u32,
}

/// The persistence askgate needs.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies one write, alone or beside others (group commit), and answers its caller once
    /// it committed (see [`Command`]).
    async fn write(&self, write: Write);
    /// The questions `find` selects.
    async fn questions(&self, find: Find<'_>) -> Result<Vec<Question>, StoreError>;
    /// A page of questions: pending ones oldest first, others newest first, after `cursor`
    /// (the store's own opaque text, from the previous page), at most `limit`; and the next
    /// page's cursor (none at the end). [`StoreError::BadCursor`] for a cursor it did not give.
    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError>;
    /// Pending questions without a recorded card in their conversation or in the one they
    /// were escalated to, in the order they were asked, each with its place in that order:
    /// those `find` selects.
    async fn undelivered(&self, find: Unshown<'_>) -> Result<Vec<Undelivered>, StoreError>;
    /// How many questions are pending.
    async fn pending_count(&self) -> Result<u64, StoreError>;
    /// One question, with the id of whoever started its run as stored (none when the run is
    /// gone): who asked it, read with it.
    async fn question_with_asker(&self, id: QuestionId) -> Result<Option<(Question, Option<String>)>, StoreError>;
    /// The earliest pending deadline, reminder or escalation.
    async fn next_deadline(&self) -> Result<Option<i64>, StoreError>;
    /// One run, with its journal when `journal` (read together: what a replay needs).
    async fn run_record(&self, id: RunId, journal: bool) -> Result<Option<Resume>, StoreError>;
    /// The recorded messages (cards and prompts) `find` selects.
    async fn cards(&self, find: CardFind<'_>) -> Result<Vec<Delivery>, StoreError>;
    /// Callbacks whose URL starts with `to`, whose run has ended, neither delivered nor given
    /// up, whose pause is over and which nobody holds at `now`; oldest first, at most `limit`.
    async fn due_callbacks(&self, now: i64, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError>;
    /// Whether a callback whose URL starts with `to` is neither delivered nor given up.
    async fn callbacks_open(&self, to: &str) -> Result<bool, StoreError>;
    /// The grants `find` selects.
    async fn find_grants(&self, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError>;
    /// The people's credentials `find` selects.
    async fn logins(&self, find: LoginFind<'_>) -> Result<Vec<Login>, StoreError>;
    /// Whether an inbound update key was recorded.
    async fn seen(&self, key: &str) -> Result<bool, StoreError>;
    /// What `person` has filled in so far of the form `question`.
    async fn draft(
        &self,
        question: QuestionId,
        person: &str,
    ) -> Result<Option<crate::question::form::Draft>, StoreError>;
    /// A platform's note under `key` ([`Remember`](command::Remember)), if it kept one.
    async fn note(&self, key: &str) -> Result<Option<Note>, StoreError>;
    /// What the writes have cost so far, for `/metrics`.
    fn write_stats(&self) -> WriteStats {
        WriteStats::default()
    }
    /// What only a store several askgates share does; none for a store one askgate holds.
    fn sharing(&self) -> Option<&dyn Shared> {
        None
    }
    /// Finishes pending writes and closes the database.
    async fn close(&self);
}

/// What a store several askgates share does besides ([`Store::sharing`]).
#[async_trait]
pub trait Shared: Send + Sync {
    /// This askgate's id among those sharing the store.
    fn instance(&self) -> &str;
    /// Waits until this askgate holds the lease `name` (a platform connection that admits one
    /// consumer: Telegram long polling, a Discord gateway session), or `stop`; one instance
    /// holds it at a time, until it drops the lease or dies.
    async fn lease(&self, name: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<Lease>, StoreError>;
    /// Tells the other askgates that `run` did what `event` names; returns at once.
    fn announce_run(&self, event: RunEvent, run: &Run);
    /// What the other askgates ask, resolve and run, as they commit; taken once.
    fn changes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Change>>;
}
