//! The turns part: what the claim and the runner share about follow-up runs, so that the claim
//! never names the runner. The claim hands each resolved follow-up question here as a
//! [`Resume`] (with the run and its journal when they were parked here); the runner, which
//! registers itself as the taker at start, replays the run at once, in the claimer's task (a
//! queue read by one loop would cost a task switch per resume). It also counts the turns
//! executing per conversation, which the console waits on.
//!
//! A resume counts its run's conversation as busy from the moment the claim hands it over, so
//! that nobody sees a conversation settled between an answer and the turn it starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::lock;
use super::recent::Recent;
use crate::question::{Conversation, Question, QuestionId, RunId};
use crate::run::Run;

/// Follow-up runs that ended their turn here, by the question they wait on (resuming one of
/// these needs no read; after a restart, or once forgotten, the store has it all); the resumes
/// handed over and not yet taken; and how many turns execute per conversation (not counting
/// ones waiting on a person).
pub(super) struct Turns {
    parked: Mutex<Recent<(Run, Vec<Arc<Question>>)>>,
    busy: Mutex<HashMap<Conversation, usize>>,
    settled: Notify,
    /// Where resumes go.
    taker: Mutex<Taker>,
}

/// What takes the resumes handed over.
enum Taker {
    /// Nobody yet: they wait here for the runner.
    Waiting(Vec<Resume>),
    /// The runner.
    Runner(Arc<dyn Fn(Resume) + Send + Sync>),
    /// Nobody any more: the stop closed the hand-over.
    Closed,
}

/// A follow-up run to replay: its question was resolved, or a stop interrupted its turn.
pub(super) struct Resume {
    /// Which run.
    pub(super) run: RunId,
    /// When its question was resolved; none for a run a stop interrupted.
    pub(super) resolved: Option<Instant>,
    /// The run, `running` again, and its journal, when they were parked here: no read.
    pub(super) parked: Option<(Run, Vec<Arc<Question>>)>,
    /// Counts the run's conversation as busy until its turn ends.
    pub(super) busy: Busy,
}

impl Turns {
    pub(super) fn new(parked: usize) -> Arc<Self> {
        Arc::new(Self {
            parked: Mutex::new(Recent::new(parked)),
            busy: Mutex::default(),
            settled: Notify::new(),
            taker: Mutex::new(Taker::Waiting(Vec::new())),
        })
    }

    /// Keeps a follow-up run that waits on `question`, with its journal.
    pub(super) fn park(&self, question: QuestionId, run: Run, journal: Vec<Arc<Question>>) {
        lock(&self.parked).insert(question, (run, journal));
    }

    /// Takes the run parked on `question`, if it is still here.
    pub(super) fn unpark(&self, question: QuestionId) -> Option<(Run, Vec<Arc<Question>>)> {
        lock(&self.parked).remove(&question)
    }

    /// Hands the runner `run` to replay (in `conversation`), with the run and its journal when
    /// they were parked. After the stop closed the hand-over, the run is replayed at the next
    /// start (it is `running` in the store).
    pub(super) fn resume(
        self: &Arc<Self>,
        run: RunId,
        conversation: Option<&Conversation>,
        resolved: Option<Instant>,
        parked: Option<(Run, Vec<Arc<Question>>)>,
    ) {
        let resume = Resume { run, resolved, parked, busy: self.busy(conversation) };
        // Called outside the lock: the taker spawns the turn.
        let taker = match &mut *lock(&self.taker) {
            Taker::Waiting(waiting) => {
                waiting.push(resume);
                return;
            }
            Taker::Runner(taker) => taker.clone(),
            Taker::Closed => {
                tracing::debug!(%run, "not resuming after the stop; the run goes on at the next start");
                return;
            }
        };
        taker(resume);
    }

    /// From now on `taker` takes the resumes, beginning with those handed over before; once
    /// closed, nothing does.
    pub(super) fn take_resumes(&self, taker: Arc<dyn Fn(Resume) + Send + Sync>) {
        let waiting = {
            let mut current = lock(&self.taker);
            match std::mem::replace(&mut *current, Taker::Runner(taker.clone())) {
                Taker::Waiting(waiting) => waiting,
                Taker::Closed => {
                    *current = Taker::Closed;
                    Vec::new()
                }
                Taker::Runner(_) => Vec::new(),
            }
        };
        for resume in waiting {
            taker(resume);
        }
    }

    /// Takes no more resumes: those handed over later go on at the next start.
    pub(super) fn close(&self) {
        *lock(&self.taker) = Taker::Closed;
    }

    /// Counts a turn as executing in `conversation` while the guard lives.
    pub(super) fn busy(self: &Arc<Self>, conversation: Option<&Conversation>) -> Busy {
        self.enter(conversation);
        Busy { turns: self.clone(), conversation: conversation.cloned() }
    }

    /// Marks an executing turn as waiting on a person while the guard lives.
    pub(super) fn waiting(self: &Arc<Self>, conversation: Option<&Conversation>) -> Waiting {
        self.leave(conversation);
        Waiting { turns: self.clone(), conversation: conversation.cloned() }
    }

    fn enter(&self, conversation: Option<&Conversation>) {
        if let Some(c) = conversation {
            *lock(&self.busy).entry(c.clone()).or_default() += 1;
        }
    }

    fn leave(&self, conversation: Option<&Conversation>) {
        let Some(conversation) = conversation else { return };
        let mut busy = lock(&self.busy);
        if let Some(n) = busy.get_mut(conversation) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.remove(conversation);
            }
        }
        drop(busy);
        self.settled.notify_waiters();
    }

    /// Waits (at most `limit`) until no turn executes in `conversation`.
    pub(super) async fn settled(&self, conversation: &Conversation, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.settled.notified();
            if !lock(&self.busy).contains_key(conversation) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }
}

/// Counts a turn as executing in its conversation while it lives.
pub(super) struct Busy {
    turns: Arc<Turns>,
    conversation: Option<Conversation>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.turns.leave(self.conversation.as_ref());
    }
}

/// Marks an executing turn as waiting on a person while it lives.
pub(crate) struct Waiting {
    turns: Arc<Turns>,
    conversation: Option<Conversation>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // Executing again: the turn's own guard counts this back down when it ends.
        self.turns.enter(self.conversation.as_ref());
    }
}
