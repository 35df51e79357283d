//! The store's writes as commands: each is a type that names its reply ([`Command::Reply`]),
//! and travels to a backend as a [`Write`], the command beside the slot its reply goes back
//! in ([`Call`]). A backend answers a call only with a value of that command's reply type: one
//! that answers a [`FinishRun`] with nothing, or a [`Resolve`] with a count, does not compile.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::{CallbackTry, Claim, Delivery, Login, Orphans, Pruned, Resolution, StoreError};
use crate::question::form::Draft;
use crate::question::{Approver, Conversation, Question, QuestionId, RunId};
use crate::run::{Run, RunStatus};

/// A write, and what it answers.
pub trait Command: Send + Sized + 'static {
    /// What the write answers once it committed.
    type Reply: Send + 'static;
    /// The command in its envelope, answered on `reply`.
    fn call(self, reply: oneshot::Sender<Result<Self::Reply, StoreError>>) -> Write;
}

/// A command on its way to be applied, and where its reply goes.
pub struct Call<C: Command> {
    /// The command.
    pub command: C,
    reply: Reply<C::Reply>,
}

impl<C: Command> Call<C> {
    /// Applies the command with `apply` and answers at once (a store whose writes commit one
    /// by one); returns whether it was applied.
    pub fn answer(self, apply: impl FnOnce(C) -> Result<C::Reply, StoreError>) -> bool {
        let Self { command, reply } = self;
        let result = apply(command);
        let applied = result.is_ok();
        reply.send(result);
        applied
    }

    /// As [`Call::answer`], with a write that awaits its database.
    pub async fn answer_async<F>(self, apply: impl FnOnce(C) -> F)
    where
        F: Future<Output = Result<C::Reply, StoreError>>,
    {
        let Self { command, reply } = self;
        reply.send(apply(command).await);
    }

    /// Keeps what the command gave in a transaction still open: the caller hears it once
    /// that transaction committed ([`Write::finish`]).
    pub fn set(&mut self, value: C::Reply) {
        self.reply.value = Some(value);
    }
}

/// The way back to the caller, and the reply kept until its transaction committed.
struct Reply<T> {
    value: Option<T>,
    to: oneshot::Sender<Result<T, StoreError>>,
}

impl<T> Reply<T> {
    fn send(self, result: Result<T, StoreError>) {
        // A caller that stopped waiting no longer needs the answer; the write stands.
        let _ = self.to.send(result);
    }

    /// Answers the kept value, or the failure of its transaction.
    fn finish(mut self, failure: Option<StoreError>) {
        let result = match (failure, self.value.take()) {
            (Some(e), _) => Err(e),
            (None, Some(value)) => Ok(value),
            // A write is answered without failure only after it was applied in the
            // transaction that committed, which set its reply.
            (None, None) => Err(StoreError::Database("a write was answered before it was applied".into())),
        };
        self.send(result);
    }
}

/// Declares the commands: each type with its reply, and the [`Write`] that carries any of them.
macro_rules! commands {
    ($($(#[$doc:meta])* $name:ident -> $reply:ty;)*) => {
        /// A command in its envelope: what a backend applies.
        pub enum Write {
            $($(#[$doc])* $name(Call<$name>),)*
        }

        $(impl Command for $name {
            type Reply = $reply;
            fn call(self, reply: oneshot::Sender<Result<$reply, StoreError>>) -> Write {
                Write::$name(Call { command: self, reply: Reply { value: None, to: reply } })
            }
        })*

        impl Write {
            /// Answers the caller once the transaction that applied it ended: the reply kept
            /// ([`Call::set`]), or `failure`.
            pub fn finish(self, failure: Option<StoreError>) {
                match self {
                    $(Self::$name(call) => call.reply.finish(failure),)*
                }
            }

            /// Answers the caller with `failure`, unapplied.
            pub fn refuse(self, failure: StoreError) {
                self.finish(Some(failure));
            }
        }
    };
}

commands! {
    /// Inserts or updates a run.
    SaveRun -> ();
    /// Sets a stored run's status and result without reading it: false when there is no such run.
    FinishRun -> bool;
    /// Saves the run (inserting it on its first ask) and inserts its new question; answers
    /// with the question's place in the order asked (see [`Undelivered::place`](crate::store::Undelivered::place)).
    Ask -> i64;
    /// The claim-once write: closes the question if it is still pending, with the grant, the
    /// update and the run's change ([`Resolution::run_after`]).
    Resolve -> Box<Claim>;
    /// Records one more approval of a pending quorum approval: false when another changed it
    /// first (read it again).
    Vote -> bool;
    /// Moves a pending question's next reminder or escalation: false when another moved it.
    Nudge -> bool;
    /// Records a rendered card.
    Deliver -> ();
    /// Revokes a live grant: false when there is no live grant with that id.
    RevokeGrant -> bool;
    /// Records an inbound update key: false when it was seen before.
    Seen -> bool;
    /// Records how many `say` messages a run has delivered.
    Says -> ();
    /// Adds a callback to the outbox.
    AddCallback -> ();
    /// Takes a due callback: false when it was delivered, given up, or taken by another.
    TakeCallback -> bool;
    /// Records what came of an attempt at a callback: false when its lease had run out.
    CallbackTried -> bool;
    /// Adds a person's credential: false when its name or its secret is taken.
    AddLogin -> bool;
    /// Deletes a credential: false when there is none.
    RemoveLogin -> bool;
    /// Turns an unused sign-in link into a session: none when there is no such live link.
    UseLink -> Option<Box<Login>>;
    /// Sets or forgets what a person has filled in so far of a form.
    SetDraft -> ();
    /// Keeps a platform's note under its key, replacing the one before.
    Remember -> ();
    /// Deletes what ended long enough ago.
    Prune -> Pruned;
    /// Takes what askgates that are gone left.
    TakeOrphans -> Orphans;
}

/// Inserts or updates a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SaveRun(pub Box<Run>);

/// Sets a stored run's status and result without reading it.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishRun {
    /// The run.
    pub id: RunId,
    /// Its new status.
    pub status: RunStatus,
    /// Its result.
    pub result: String,
    /// When, in unix milliseconds.
    pub at: i64,
}

/// Saves the run (inserting it on its first ask) and inserts its new question.
#[derive(Clone, Debug, PartialEq)]
pub struct Ask {
    /// The run, as it is now.
    pub run: Box<Run>,
    /// Its new question.
    pub question: Arc<Question>,
}

/// The claim-once write (see [`Resolution`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Resolve(pub Box<Resolution>);

/// Records one more approval of a pending quorum approval: `approvals` replaces `seen` only if
/// exactly `seen` is recorded (racing approvals each count once), with the update.
#[derive(Clone, Debug, PartialEq)]
pub struct Vote {
    /// The question.
    pub question: QuestionId,
    /// The approvals the voter read.
    pub seen: Vec<Approver>,
    /// Those with the new one.
    pub approvals: Vec<Approver>,
    /// The inbound update key that brought the vote.
    pub update: Option<String>,
}

/// Moves a pending question's next reminder or escalation from `seen` to `next` (and records
/// where it was escalated to), only if it is still pending at `seen`: whoever moves it sends
/// what was due.
#[derive(Clone, Debug, PartialEq)]
pub struct Nudge {
    /// The question.
    pub question: QuestionId,
    /// The reminder time read.
    pub seen: i64,
    /// The next one (none: no more).
    pub next: Option<i64>,
    /// Where it was escalated to now.
    pub escalated_to: Option<Conversation>,
}

/// Records a rendered card.
#[derive(Clone, Debug, PartialEq)]
pub struct Deliver(pub Delivery);

/// Revokes a live grant.
#[derive(Clone, Debug, PartialEq)]
pub struct RevokeGrant {
    /// The grant.
    pub id: String,
    /// When, in unix milliseconds.
    pub at: i64,
}

/// Records an inbound update key.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    /// The key.
    pub key: String,
    /// When, in unix milliseconds.
    pub at: i64,
}

/// Records how many `say` messages a run has delivered (the count never goes back).
#[derive(Clone, Debug, PartialEq)]
pub struct Says {
    /// The run.
    pub run: RunId,
    /// How many.
    pub says: u32,
}

/// Adds a callback to the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct AddCallback(pub Box<super::Callback>);

/// Takes a due callback until `until` (another taker waits until then), counting one more
/// attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeCallback {
    /// The callback.
    pub id: String,
    /// Now, in unix milliseconds.
    pub now: i64,
    /// Until when it is held.
    pub until: i64,
}

/// Records what came of the attempt that took the callback until `lease`, and lets go of it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbackTried {
    /// The callback.
    pub id: String,
    /// When, in unix milliseconds.
    pub at: i64,
    /// The `until` of the take this attempt holds.
    pub lease: i64,
    /// What came of it.
    pub tried: CallbackTry,
}

/// Adds a person's credential.
#[derive(Clone, Debug, PartialEq)]
pub struct AddLogin(pub Box<Login>);

/// Deletes a credential.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoveLogin {
    /// Its name.
    pub name: String,
}

/// Turns the unused sign-in link whose secret has `digest`, live at `now`, into the session
/// `name` whose secret has `session`, until `until`.
#[derive(Clone, Debug, PartialEq)]
pub struct UseLink {
    /// The digest of the link's secret.
    pub digest: String,
    /// Now, in unix milliseconds.
    pub now: i64,
    /// The session's name.
    pub name: String,
    /// The digest of the session's secret.
    pub session: String,
    /// When the session ends.
    pub until: i64,
}

/// Sets what `person` has filled in so far of the form `question` (none: forgets it).
#[derive(Clone, Debug, PartialEq)]
pub struct SetDraft {
    /// The question.
    pub question: QuestionId,
    /// Who fills it in.
    pub person: String,
    /// What they filled in (none: forget it).
    pub draft: Option<Draft>,
    /// When, in unix milliseconds.
    pub at: i64,
}

/// Keeps `value` under `key`: a small value a chat platform needs across restarts (where it
/// last heard from a person, how to reach a conversation), namespaced by the platform's name
/// (`whatsapp:window:+15551234567`).
#[derive(Clone, Debug, PartialEq)]
pub struct Remember {
    /// The key, the platform's name first.
    pub key: String,
    /// The value.
    pub value: String,
    /// When, in unix milliseconds.
    pub at: i64,
}

/// Deletes up to `limit` runs that ended before `ended_before` (with their questions and
/// cards) and inbound keys recorded before `seen_before`, and credentials expired before it;
/// waiting and running runs stay.
#[derive(Clone, Debug, PartialEq)]
pub struct Prune {
    /// Runs that ended before this (none: keep them).
    pub ended_before: Option<i64>,
    /// Inbound keys and credentials older than this.
    pub seen_before: i64,
    /// The most of each.
    pub limit: u32,
}

/// Takes what askgates that are gone left: pending questions of blocking runs and runs in
/// status `running`. A store one askgate holds returns all of them (asked once at start); a
/// shared one what instances whose heartbeat lapsed left, each to exactly one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeOrphans;
