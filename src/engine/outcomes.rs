//! Callers waiting for a question's outcome (an API long-poll, an MCP call held open,
//! `get_outcome`): each watches its own question and is woken by that question's resolution
//! only, here or — through the store's change feed, which publishes it as an event — on
//! another instance. Every waiter used to filter every event on the gateway-wide stream, so
//! the CPU one answer cost grew with the number of callers waiting on other questions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::question::{Question, QuestionId};

/// The watchers of each question's outcome.
#[derive(Default)]
pub(super) struct Outcomes {
    watching: Mutex<HashMap<QuestionId, Vec<oneshot::Sender<Arc<Question>>>>>,
}

/// One caller's watch of a question: resolves with the resolved question. Dropping it (the
/// caller timed out or went away) forgets it.
pub(super) struct Watch<'a> {
    outcomes: &'a Outcomes,
    id: QuestionId,
    pub(super) resolved: oneshot::Receiver<Arc<Question>>,
}

impl Outcomes {
    /// Watches `id` from now on: a resolution published after this call reaches the watch.
    pub(super) fn watch(&self, id: QuestionId) -> Watch<'_> {
        let (tell, resolved) = oneshot::channel();
        self.lock().entry(id).or_default().push(tell);
        Watch { outcomes: self, id, resolved }
    }

    /// Hands `question`, just resolved, to whoever watches it; the others are not disturbed.
    pub(super) fn resolved(&self, question: &Arc<Question>) {
        let Some(watchers) = self.lock().remove(&question.id) else { return };
        for watcher in watchers {
            // A watcher that went away meanwhile needs nothing.
            let _ = watcher.send(question.clone());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QuestionId, Vec<oneshot::Sender<Arc<Question>>>>> {
        // Each change is one insert or removal: a panic elsewhere leaves the map whole.
        self.watching.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn watched(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        // Closed first, so that this watch's sender counts among the closed ones.
        self.resolved.close();
        let mut watching = self.outcomes.lock();
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
        let outcomes = Outcomes::default();
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
