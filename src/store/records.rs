//! What the store keeps and answers, besides questions and runs: cards, grants, the requests
//! that close a question and what they find, and the store's own reports.

use serde::Serialize;

use crate::question::{
    Approver, Conversation, Kind, Mode, Outcome, Question, QuestionId, RunId, Status, Surface, text_enum,
};
use crate::run::{Run, RunStatus};

text_enum!(
    /// What a recorded message of a question is for.
    DeliveryRole {
        /// The card: the question with its buttons. Retraction edits it to show the outcome.
        Card = "card",
        /// A message that asks for the person's own answer or the edited action in the next
        /// message (Telegram's "Other…", "Edit…"). Retraction removes it: the card alone shows
        /// the outcome.
        Prompt = "prompt",
        /// A message that asks for the reason of a rejection or a decline in the next message
        /// (Telegram's "Reject with note…"). Retraction removes it, as a prompt's.
        Note = "note",
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

    /// A prompt for the reason of a rejection or a decline (see [`DeliveryRole::Note`]).
    pub fn note(question: QuestionId, surface: Surface, chat: impl Into<String>, message: impl Into<String>) -> Self {
        Self { role: DeliveryRole::Note, ..Self::card(question, surface, chat, message) }
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
pub(super) fn covering(mut candidates: Vec<Grant>, action: &str) -> Option<Grant> {
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
    /// transaction (see [`StoreExt::first_seen`](crate::store::StoreExt::first_seen)).
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

/// What a won claim wrote to its question's run, in the same commit: a copy of the run (a
/// cache's) follows the store with [`RunWritten::apply`] instead of repeating its rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWritten {
    /// The run's new status.
    pub status: RunStatus,
    /// Its new result; none leaves it as it was.
    pub result: Option<String>,
    /// When, unix milliseconds (the resolution's time).
    pub updated_at: i64,
}

impl RunWritten {
    /// What `after` writes to a waiting run at `at`.
    pub fn new(after: RunAfter, at: i64) -> Self {
        let (status, result) = match after {
            RunAfter::Resume => (RunStatus::Running, None),
            RunAfter::Finish(result) => (RunStatus::Finished, Some(result)),
        };
        Self { status, result, updated_at: at }
    }

    /// Brings a copy of the run to what was written.
    pub fn apply(&self, run: &mut Run) {
        run.status = self.status;
        if let Some(result) = &self.result {
            run.result = Some(result.clone());
        }
        run.updated_at = self.updated_at;
    }
}

impl Resolution {
    /// What a win does to the question's run (a blocking run goes on in memory: nothing).
    /// `resolved` is the question as the claim stores it, whose outcome an agent's run keeps.
    pub fn run_after(&self, resolved: &Question) -> Option<RunAfter> {
        match self.question.mode {
            Mode::FollowUp => Some(RunAfter::Resume),
            Mode::External => Some(RunAfter::Finish(resolved.outcome_line_in(crate::question::Locale::En))),
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
    /// Time the writer waited for a checkpoint of SQLite's log that fell behind, in seconds
    /// (none on other stores): writes wait in memory meanwhile.
    pub held_seconds: f64,
}

/// What one [`StoreExt::prune`](crate::store::StoreExt::prune) deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Ended runs (with their questions and cards).
    pub runs: u64,
    /// Inbound update keys.
    pub inbound: u64,
}

/// Where an agent's question or run posts its outcome once it is known: a row of the outbox
/// (see `agent::callbacks`), written before the run it belongs to. Its `Debug` shows neither
/// the secret nor the headers' values.
#[derive(Clone, PartialEq)]
pub struct Callback {
    /// Its id, sent as the `Idempotency-Key` of every attempt.
    pub id: String,
    /// The run whose end makes it due (an agent's question has a run of its own).
    pub run: RunId,
    /// The question whose outcome is sent; none: the run is sent.
    pub question: Option<QuestionId>,
    /// Where to POST.
    pub url: String,
    /// The caller's own headers, sent with every attempt.
    pub headers: Vec<(String, String)>,
    /// The caller's own signing secret; none: the configured one.
    pub secret: Option<String>,
    /// When it was written (unix ms).
    pub created_at: i64,
    /// Attempts made so far.
    pub attempts: u32,
    /// When its run ended (unix ms), as a due callback is read; none when written.
    pub ended_at: Option<i64>,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Callback")
            .field("id", &self.id)
            .field("run", &self.run)
            .field("question", &self.question)
            .field("headers", &headers)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("created_at", &self.created_at)
            .field("attempts", &self.attempts)
            .field("ended_at", &self.ended_at)
            .finish_non_exhaustive()
    }
}

/// What came of one attempt to send a [`Callback`].
#[derive(Clone, Debug, PartialEq)]
pub enum CallbackTry {
    /// The receiver answered 2xx: it is never sent again.
    Delivered,
    /// It failed, and is tried again at `next_at` (unix ms).
    Retry {
        /// When.
        next_at: i64,
        /// Why it failed.
        error: String,
    },
    /// It failed too long after the outcome: it is not tried again.
    GaveUp {
        /// Why the last attempt failed.
        error: String,
    },
}

/// A pending question one of whose cards was never recorded (see [`Store::undelivered`](crate::store::Store::undelivered)).
#[derive(Clone, Debug, PartialEq)]
pub struct Undelivered {
    /// The question, as stored.
    pub question: Question,
    /// Its place in the order questions were asked.
    pub place: i64,
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

/// What askgates that are gone left behind (see [`Store::orphans`](crate::store::Store::orphans)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Orphans {
    /// Pending questions of blocking runs: nobody waits for them any more.
    pub blocking: Vec<Question>,
    /// Runs in status `running`, now this askgate's to replay (follow-up) or end (blocking).
    pub runs: Vec<Run>,
}

/// A platform's note, read back (see [`Store::note`](crate::store::Store::note)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// What the platform kept.
    pub value: String,
    /// When it was last written, in unix milliseconds.
    pub at: i64,
}

/// A held lease (see [`Shared::lease`](crate::store::Shared::lease)): released when dropped.
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

/// What another askgate sharing the store did to a question, a run or a credential.
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
    /// It revoked the person's credential of this name: what holds it open here ends.
    Revoked(String),
    /// The store stopped hearing the others for a while (its listening connection dropped):
    /// changes may have been missed, and what waits here should be looked at again.
    Missed,
}

/// What a resolve attempt found.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// This attempt closed the question; the row as stored, and what the claim wrote to its
    /// run (none when it wrote nothing: a blocking run, or one no longer waiting).
    Won(Question, Option<RunWritten>),
    /// It was already closed; the snapshot as it stands.
    Lost(Question),
    /// No such question.
    Missing,
}
