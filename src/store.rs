//! Persistence behind one trait, so that a PostgreSQL implementation can follow SQLite's.
//!
//! The rules every implementation keeps: a question is written before it is rendered; a
//! resolve is one conditional write that succeeds for exactly one caller; a follow-up run's
//! status moves to `waiting` with the insert of its pending question, and back to `running`
//! with the claim that resolves it. A run is first written when it first asks or ends.

// The columns both backends store, in the order their inserts bind them.
macro_rules! question_columns {
    () => {
        "id, conversation, run_id, step, mode, kind, prompt, detail, options, multi, allow_custom, \
         default_json, answerers, fingerprint, created_at, expires_at, status, outcome, answered_by, \
         answered_via, answered_name, resolved_at, quorum, approvals, nudges, nudge_at, escalated_to"
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

pub mod copy;
mod error;
mod postgres;
mod rows;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;

use crate::question::{
    Approver, Conversation, Kind, Mode, Outcome, Question, QuestionId, RunId, Status, Surface, text_enum,
};
use crate::run::{Run, RunStatus};

pub use error::StoreError;
pub use postgres::{InstanceRow, PostgresStore, instances, is_postgres_url, redact};
pub use sqlite::{SqliteStore, Synchronous};

text_enum!(
    /// What a recorded message of a question is for.
    DeliveryRole {
        /// The card: the question with its buttons. Retraction edits it to show the outcome.
        Card = "card",
        /// A message that asks for the next message (Telegram's "Other…" and "Reject with
        /// note…"). Retraction removes it: the card alone shows the outcome.
        Prompt = "prompt",
    }
);

text_enum!(
    /// What a run did, as the event streams name it (see [`Change::Run`]).
    RunEvent {
        /// It started.
        Started = "run.started",
        /// It replays after an answer.
        Resumed = "run.resumed",
        /// It ended its turn on a question.
        Waiting = "run.waiting",
        /// It finished.
        Finished = "run.finished",
        /// It failed.
        Failed = "run.failed",
        /// It was cancelled.
        Cancelled = "run.cancelled",
    }
);

/// One message sent for a question, recorded so that it can be retracted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Delivery {
    /// The question it shows.
    pub question: QuestionId,
    /// The surface that rendered it.
    pub surface: Surface,
    /// The chat it was sent to, in the surface's terms.
    pub chat: String,
    /// The message id, in the surface's terms.
    pub message: String,
    /// A card, or a prompt for the next message.
    pub role: DeliveryRole,
    /// The conversation a card was shown in: its question's, or the one it was escalated
    /// to. Absent for prompts and for cards recorded before askgate kept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
}

impl Delivery {
    /// A card of `question` on `surface`, sent to `chat` as `message`.
    pub fn card(question: QuestionId, surface: Surface, chat: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            question,
            surface,
            chat: chat.into(),
            message: message.into(),
            role: DeliveryRole::Card,
            conversation: None,
        }
    }

    /// A prompt for the next message, sent for `question`.
    pub fn prompt(question: QuestionId, surface: Surface, chat: impl Into<String>, message: impl Into<String>) -> Self {
        Self { role: DeliveryRole::Prompt, ..Self::card(question, surface, chat, message) }
    }
}

/// A standing allow-always decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Grant {
    /// The grant's id.
    pub id: String,
    /// The conversation it applies to.
    pub conversation: Conversation,
    /// The action it allows, exactly as the approval named it; for a rule, the pattern of
    /// the actions it allows.
    pub action: String,
    /// A rule: `action` is a pattern of shell words (see [`crate::question::rule::fits`]).
    pub pattern: bool,
    /// Whom it lets through: `function:<name>` (that function's approvals), the agent that
    /// asked (`mcp:<client>`, `agent:<name>`, `api:operator`), or `gate:<upstream>` (a gated
    /// MCP upstream's calls). It answers only its grantee's later approvals.
    pub grantee: String,
    /// Who allowed it: a stable id (`telegram:42`).
    pub granted_by: String,
    /// How people know who allowed it (`@alice`), when the surface said.
    pub granted_name: Option<String>,
    /// The question on which it was given.
    pub question: QuestionId,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds; none: never (`gateway.grant_ttl`).
    pub expires_at: Option<i64>,
}

impl Grant {
    /// The first eight characters of its id, as `/grants` shows them and `/revoke` takes them.
    pub fn short_id(&self) -> &str {
        self.id.get(..crate::question::SHORT_ID_LEN).unwrap_or(&self.id)
    }

    /// Who set it, as people know them: the name when the surface gave one, else the id.
    pub fn setter(&self) -> &str {
        self.granted_name.as_deref().unwrap_or(&self.granted_by)
    }

    /// Whether it allows `action`: the same action, or for a rule one its pattern fits as shell
    /// words (a chained or redirected command never fits).
    pub fn covers(&self, action: &str) -> bool {
        if self.pattern { crate::question::rule::fits(&self.action, action) } else { self.action == action }
    }
}

/// The grant that allows `action` among a conversation's candidates: an exact one first,
/// then the oldest rule that fits.
fn covering(mut candidates: Vec<Grant>, action: &str) -> Option<Grant> {
    candidates.sort_by_key(|g| (g.pattern, g.created_at));
    candidates.into_iter().find(|g| g.covers(action))
}

/// Which questions a page holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuestionFilter {
    /// Only this conversation's.
    pub conversation: Option<Conversation>,
    /// Only those in this status (pending ones are listed oldest first, others newest first).
    pub status: Option<Status>,
    /// Only those of this kind (`approval`: the audit of gated calls).
    pub kind: Option<Kind>,
}

/// A request to close a question.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    /// The question as the claimer saw it (pending). The claim answers with the row as stored.
    pub question: Question,
    /// How it ends.
    pub outcome: Outcome,
    /// Who resolved it: a stable id.
    pub by: Option<String>,
    /// How people know them (`@alice`), when the surface said.
    pub name: Option<String>,
    /// Where.
    pub via: Surface,
    /// When, unix milliseconds.
    pub at: i64,
    /// A grant to store in the same transaction (allow always).
    pub grant: Option<Grant>,
    /// The inbound update that carries this resolution, recorded as applied in the same
    /// transaction (see [`Store::first_seen`]).
    pub update: Option<String>,
    /// The approvals that complete a quorum approval, recorded with the claim; none leaves
    /// the recorded ones as they are.
    pub approvals: Option<Vec<Approver>>,
}

/// What a won claim does to its question's run, in the same commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunAfter {
    /// A follow-up run goes from `waiting` to `running`: its function is replayed with the
    /// answer.
    Resume,
    /// An agent's run ends `finished` with its question's outcome as its result: nothing
    /// else follows an agent's question.
    Finish(String),
}

impl Resolution {
    /// What a win does to the question's run (a blocking run goes on in memory: nothing).
    pub fn run_after(&self) -> Option<RunAfter> {
        match self.question.mode {
            Mode::FollowUp => Some(RunAfter::Resume),
            Mode::External => Some(RunAfter::Finish(self.resolved().outcome_line())),
            Mode::Blocking => None,
        }
    }

    /// The claimer's snapshot with this resolution applied (the stores answer with the row).
    pub fn resolved(&self) -> Question {
        Question {
            status: self.outcome.status(),
            outcome: Some(self.outcome.clone()),
            answered_by: self.by.clone(),
            answered_name: self.name.clone(),
            answered_via: Some(self.via),
            resolved_at: Some(self.at),
            approvals: self.approvals.clone().unwrap_or_else(|| self.question.approvals.clone()),
            ..self.question.clone()
        }
    }
}

/// Counts of the store's writes since it opened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteStats {
    /// Why the last batch failed as a whole (disk full, read-only, locked), until a batch
    /// commits again; none while writes succeed.
    pub failing: Option<String>,
    /// Batches of writes, each committed in one transaction (plus one more for each write
    /// that failed by its own fault and was taken out).
    pub batches: u64,
    /// Writes; divided by `batches`, how many writes share a commit.
    pub writes: u64,
    /// Writes that failed.
    pub failed: u64,
    /// Time spent in transactions, in seconds: its rate is how busy the writer is.
    pub busy_seconds: f64,
}

/// What one [`Store::prune`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Ended runs (with their questions and cards).
    pub runs: u64,
    /// Inbound update keys.
    pub inbound: u64,
}

/// A pending question one of whose cards was never recorded (see [`Store::undelivered`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Undelivered {
    /// The question, as stored.
    pub question: Question,
    /// No card in its own conversation.
    pub own: bool,
    /// No card in the conversation it was escalated to.
    pub escalation: bool,
}

/// A follow-up run ready to be replayed: the run, now `running`, with its journal.
#[derive(Clone, Debug, PartialEq)]
pub struct Resume {
    /// The run.
    pub run: Run,
    /// Its questions ordered by step.
    pub journal: Vec<Question>,
}

/// What askgates that are gone left behind (see [`Store::orphans`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Orphans {
    /// Pending questions of blocking runs: nobody waits for them any more.
    pub blocking: Vec<Question>,
    /// Runs in status `running`, now this askgate's to replay (follow-up) or end (blocking).
    pub runs: Vec<Run>,
}

/// A held lease (see [`Store::lease`]): released when dropped.
pub struct Lease {
    lost: tokio_util::sync::CancellationToken,
    _held: Option<tokio_util::task::AbortOnDropHandle<()>>,
}

impl Lease {
    /// The lease of an askgate that holds its store alone: never lost.
    pub fn sole() -> Self {
        Self { lost: tokio_util::sync::CancellationToken::new(), _held: None }
    }

    /// A lease kept by `keeper` (which cancels `lost` when it can no longer vouch for it).
    pub(crate) fn kept(lost: tokio_util::sync::CancellationToken, keeper: tokio::task::JoinHandle<()>) -> Self {
        Self { lost, _held: Some(tokio_util::task::AbortOnDropHandle::new(keeper)) }
    }

    /// Completes when the lease is lost (its database connection failed): the holder stops
    /// using the platform connection and asks for the lease again.
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }
}

/// What another askgate sharing the store did to a question or a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// It asked the question (and renders it).
    Asked(QuestionId),
    /// It resolved the question (and retracts its cards, and resumes its run).
    Resolved(QuestionId),
    /// It counted an approval of a quorum approval (and shows the count on its cards).
    Counted(QuestionId),
    /// Its run did this.
    Run {
        /// What the run did.
        event: RunEvent,
        /// Which run.
        id: RunId,
        /// The run as the other askgate saw it then; none when too big to announce (read it).
        snapshot: Option<Box<Run>>,
    },
    /// The store stopped hearing the others for a while (its listening connection dropped):
    /// changes may have been missed, and what waits here should be looked at again.
    Missed,
}

/// What a resolve attempt found.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// This attempt closed the question; the row as stored.
    Won(Question),
    /// It was already closed; the snapshot as it stands.
    Lost(Question),
    /// No such question.
    Missing,
}

/// The persistence askgate needs.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Inserts or updates a run.
    async fn save_run(&self, run: &Run) -> Result<(), StoreError>;
    /// Sets a stored run's status and result, without reading it first;
    /// false when there is no such run.
    async fn finish_run(&self, id: RunId, status: RunStatus, result: &str, at: i64) -> Result<bool, StoreError>;
    /// One run.
    async fn run(&self, id: RunId) -> Result<Option<Run>, StoreError>;
    /// One run with its questions ordered by step, read together: what a replay needs.
    async fn run_with_journal(&self, id: RunId) -> Result<Option<Resume>, StoreError>;
    /// What askgates that are gone left behind, from now on this one's: pending questions of
    /// blocking runs (their waiters are gone) and runs in status `running` (a stop or a crash
    /// interrupted their turn). A store one askgate holds at a time (SQLite) returns all of them,
    /// asked once at start-up; a shared store (PostgreSQL) returns what instances whose
    /// heartbeat lapsed left, each run to exactly one of the instances that ask.
    async fn orphans(&self) -> Result<Orphans, StoreError>;
    /// Whether several askgates may share this store at once (then [`Store::orphans`] is asked
    /// every few seconds, and [`Store::changes`] carries what the others do).
    fn shared(&self) -> bool {
        false
    }
    /// Waits until this askgate holds the lease `name` (a platform connection that admits one
    /// consumer at a time: Telegram long polling, a Discord gateway session), or `stop`. A store
    /// one askgate holds grants it at once; a shared store to one instance at a time, until the
    /// lease is dropped or the instance dies.
    async fn lease(&self, name: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<Lease>, StoreError> {
        let _ = name;
        Ok((!stop.is_cancelled()).then(Lease::sole))
    }
    /// This askgate's id among those sharing the store (none for a store one askgate holds).
    fn instance(&self) -> Option<&str> {
        None
    }
    /// Tells the other askgates sharing this store (if any listen) that `run` did what `event`
    /// names: their event streams carry it too. Returns at once; a store that one askgate holds
    /// has nobody to tell.
    fn announce_run(&self, event: RunEvent, run: &Run) {
        let _ = (event, run);
    }
    /// Questions other askgates sharing this store asked or resolved, and what their runs did,
    /// as they commit; taken once (none for a store that one askgate holds).
    fn changes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Change>> {
        None
    }
    /// Saves the run (inserting it on its first ask) and inserts its new question, in one
    /// transaction.
    async fn ask(&self, run: &Run, question: &Arc<Question>) -> Result<(), StoreError>;
    /// One question.
    async fn question(&self, id: QuestionId) -> Result<Option<Question>, StoreError>;
    /// Questions whose id starts with `prefix` (lower-case hex and hyphens), in a conversation
    /// or escalated to it (none: in any), at most `limit`.
    async fn questions_by_prefix(
        &self,
        conversation: Option<&Conversation>,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<Question>, StoreError>;
    /// A page of questions: pending ones oldest first, others newest first, optionally of one
    /// conversation and one status, after `cursor` (from the previous page), at most `limit`.
    /// Returns the page and the cursor of the next one (none at the end). The cursor is the
    /// store's own opaque text.
    ///
    /// # Errors
    /// [`StoreError::BadCursor`] for a cursor this store did not give.
    async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError>;
    /// The recorded cards of several questions, in one read.
    async fn deliveries_of(&self, questions: &[QuestionId]) -> Result<Vec<Delivery>, StoreError>;
    /// How many questions are pending.
    async fn pending_count(&self) -> Result<u64, StoreError>;
    /// What the store's writes have cost so far, for `/metrics`; zeros when it keeps no count.
    fn write_stats(&self) -> WriteStats {
        WriteStats::default()
    }
    /// Pending questions, oldest first, at most `limit`, optionally of one conversation (its
    /// own and those escalated to it).
    async fn pending(&self, conversation: Option<&Conversation>, limit: u32) -> Result<Vec<Question>, StoreError>;
    /// A run's questions ordered by step: its journal (resolved ones) and at most one pending.
    async fn journal(&self, run: RunId) -> Result<Vec<Question>, StoreError>;
    /// Closes a question if it is still pending: the claim-once write. In the same commit it
    /// records the grant and the update, and changes the run as [`Resolution::run_after`]
    /// says; it answers with the question as stored.
    async fn resolve(&self, resolution: Resolution) -> Result<Claim, StoreError>;
    /// Records one more approval of a pending quorum approval: `approvals` replaces `seen`
    /// only if the question is still pending with exactly `seen` recorded (so that racing
    /// approvals are each counted once), with the inbound update in the same write. False
    /// when the question changed first: read it again.
    async fn vote(
        &self,
        question: QuestionId,
        seen: &[Approver],
        approvals: &[Approver],
        update: Option<&str>,
    ) -> Result<bool, StoreError>;
    /// Pending questions whose deadline is at or before `now`, at most `limit`.
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError>;
    /// The earliest time the sweeper has work: a pending question's deadline or its next
    /// reminder or escalation.
    async fn next_deadline(&self) -> Result<Option<i64>, StoreError>;
    /// Pending questions whose next reminder or escalation is at or before `now`, at most
    /// `limit`.
    async fn due_nudges(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError>;
    /// Moves a pending question's next reminder or escalation from `seen` to `next` (and
    /// records where it was escalated to), only if it is still pending at `seen`: whoever
    /// moves it sends what was due, so each reminder and escalation happens once whichever
    /// instances sweep. False when it ended or another sweeper moved it first.
    async fn advance_nudge(
        &self,
        question: QuestionId,
        seen: i64,
        next: Option<i64>,
        escalated_to: Option<&Conversation>,
    ) -> Result<bool, StoreError>;
    /// Pending questions in a conversation, asked before `before`, that have no recorded card
    /// in their conversation or in the one they were escalated to (and which), ordered by id,
    /// after `after`, at most `limit`: cards whose delivery did not get through before a stop.
    async fn undelivered(
        &self,
        before: i64,
        after: Option<QuestionId>,
        limit: u32,
    ) -> Result<Vec<Undelivered>, StoreError>;
    /// Records a rendered card.
    async fn add_delivery(&self, delivery: &Delivery) -> Result<(), StoreError>;
    /// A question's rendered cards.
    async fn deliveries(&self, question: QuestionId) -> Result<Vec<Delivery>, StoreError>;
    /// The question a rendered card shows, found by where the card is.
    async fn question_for_card(
        &self,
        surface: Surface,
        chat: &str,
        message: &str,
    ) -> Result<Option<QuestionId>, StoreError>;
    /// The live grant for `grantee` that allows this action in this conversation at `now`: an
    /// exact one, else the oldest rule whose pattern fits.
    async fn find_grant(
        &self,
        conversation: &Conversation,
        grantee: &str,
        action: &str,
        now: i64,
    ) -> Result<Option<Grant>, StoreError>;
    /// Live grants at `now` (neither revoked nor expired), optionally of one conversation,
    /// oldest first.
    async fn grants(&self, conversation: Option<&Conversation>, now: i64) -> Result<Vec<Grant>, StoreError>;
    /// Revokes a grant; false when there was no live grant with that id.
    async fn revoke_grant(&self, id: &str, at: i64) -> Result<bool, StoreError>;
    /// Records an inbound update key; false when it was seen before.
    async fn first_seen(&self, key: &str, at: i64) -> Result<bool, StoreError>;
    /// Whether an inbound update key was recorded.
    async fn seen(&self, key: &str) -> Result<bool, StoreError>;
    /// Records how many `say` messages a run has delivered.
    async fn set_says(&self, run: RunId, says: u32) -> Result<(), StoreError>;
    /// Deletes up to `limit` runs that ended before `ended_before`, with their questions and
    /// cards, and inbound keys recorded before `seen_before`. Runs still waiting or running
    /// are never touched. Returns how many runs and keys went.
    async fn prune(&self, ended_before: Option<i64>, seen_before: i64, limit: u32) -> Result<Pruned, StoreError>;
    /// Finishes pending writes and closes the database.
    async fn close(&self);
}
