//! Where a waiting caller gets its answer, in one place:
//!
//! - callers waiting for a question's outcome (an API long-poll, an MCP call held open,
//!   `get_outcome`) each watch their own question
//!   ([`Waiters::watch`]) and are woken by that question's resolution only, here or, through
//!   the store's change feed, on another instance
//!   ([`Asks::wait_outcome`](super::Asks::wait_outcome));
//! - a blocking ask of a function run in this process (a blocking `POST /api/runs`, a
//!   program in hold mode) is held here with its question
//!   ([`Waiters::hold`]) until the resolution hands it the outcome, or shutdown cancels it.
//!
//! Both are woken from one call, [`Waiters::resolved`], which the engine makes for every
//! resolution it publishes. Every waiter used to filter every event on the gateway-wide
//! stream, so the CPU one answer cost grew with the number of callers waiting on others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::lock;
use crate::question::{Mode, Outcome, Question, QuestionId};

type Watchers = HashMap<QuestionId, Vec<oneshot::Sender<Arc<Question>>>>;

/// The callers waiting on questions: their own locks, nothing else reaches into them.
#[derive(Default)]
pub(super) struct Waiters {
    watching: Mutex<Watchers>,
    /// Blocking asks awaited in this process, with the question each waits on.
    held: Mutex<HashMap<QuestionId, (Question, oneshot::Sender<Outcome>)>>,
}

/// One caller's watch of a question: resolves with the resolved question. Dropping it (the
/// caller timed out or went away) forgets it.
pub(super) struct Watch<'a> {
    waiters: &'a Waiters,
    id: QuestionId,
    pub(super) resolved: oneshot::Receiver<Arc<Question>>,
}

impl Watch<'_> {
    /// The question watched.
    pub(super) fn id(&self) -> QuestionId {
        self.id
    }
}

impl Waiters {
    /// Watches `id` from now on: a resolution published after this call reaches the watch.
    pub(super) fn watch(&self, id: QuestionId) -> Watch<'_> {
        let (tell, resolved) = oneshot::channel();
        lock(&self.watching).entry(id).or_default().push(tell);
        Watch { waiters: self, id, resolved }
    }

    /// Holds a blocking ask of `question` until its outcome.
    pub(super) fn hold(&self, question: &Question, waiter: oneshot::Sender<Outcome>) {
        lock(&self.held).insert(question.id, (question.clone(), waiter));
    }

    /// Lets go of the blocking ask of `id` (its caller went away); whether one was held.
    pub(super) fn release(&self, id: QuestionId) -> bool {
        lock(&self.held).remove(&id).is_some()
    }

    /// The questions blocking asks here wait on.
    pub(super) fn held(&self) -> Vec<QuestionId> {
        lock(&self.held).keys().copied().collect()
    }

    /// Takes every blocking ask held here (at shutdown), with its question.
    pub(super) fn take_held(&self) -> Vec<(Question, oneshot::Sender<Outcome>)> {
        lock(&self.held).drain().map(|(_, held)| held).collect()
    }

    /// Hands `question`, just resolved, to whoever watches it and to the blocking ask that
    /// waits on it; nobody else is disturbed.
    pub(super) fn resolved(&self, question: &Arc<Question>) {
        if question.mode == Mode::Blocking
            && let Some((_, waiter)) = lock(&self.held).remove(&question.id)
        {
            let outcome = question.outcome.clone().unwrap_or(Outcome::Cancelled { reason: "unknown".to_owned() });
            let _ = waiter.send(outcome);
        }
        let Some(watchers) = lock(&self.watching).remove(&question.id) else { return };
        for watcher in watchers {
            // A watcher that went away meanwhile needs nothing.
            let _ = watcher.send(question.clone());
        }
    }

    #[cfg(test)]
    fn watched(&self) -> usize {
        lock(&self.watching).values().map(Vec::len).sum()
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        // Closed first, so that this watch's sender counts among the closed ones.
        self.resolved.close();
        let mut watching = lock(&self.waiters.watching);
        if let Some(watchers) = watching.get_mut(&self.id) {
            watchers.retain(|w| !w.is_closed());
            if watchers.is_empty() {
                watching.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Ask, test_question};

    #[tokio::test]
    async fn a_resolution_wakes_its_own_watchers_only_and_a_dropped_watch_is_forgotten() {
        let outcomes = Waiters::default();
        let (mine, other) = (Arc::new(test_question(Ask::question("a"))), Arc::new(test_question(Ask::question("b"))));
        let mut first = outcomes.watch(mine.id);
        let mut second = outcomes.watch(mine.id);
        let mut elsewhere = outcomes.watch(other.id);
        let gone = outcomes.watch(other.id);
        drop(gone);
        assert_eq!(outcomes.watched(), 3, "a dropped watch is forgotten");
        outcomes.resolved(&mine);
        assert_eq!((&mut first.resolved).await.unwrap().id, mine.id);
        assert_eq!((&mut second.resolved).await.unwrap().id, mine.id);
        assert!(elsewhere.resolved.try_recv().is_err(), "another question's watcher is not woken");
        drop(elsewhere);
        drop((first, second));
        assert_eq!(outcomes.watched(), 0);
    }
}
