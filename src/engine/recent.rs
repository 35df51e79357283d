//! A map of the most recent entries by question: the outbox's cards shown and closed, the
//! turns part's parked runs. Beyond its size the oldest are forgotten (the store has them).

use std::collections::{HashMap, VecDeque};

use crate::question::QuestionId;

/// A map that forgets its oldest entries beyond a fixed size.
pub(super) struct Recent<V> {
    order: VecDeque<QuestionId>,
    entries: HashMap<QuestionId, V>,
    cap: usize,
}

impl<V> Recent<V> {
    pub(super) fn new(cap: usize) -> Self {
        Self { order: VecDeque::with_capacity(cap), entries: HashMap::with_capacity(cap), cap }
    }

    pub(super) fn insert(&mut self, id: QuestionId, value: V) {
        if self.entries.insert(id, value).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
    }

    /// Takes an entry out; its slot in the order is dropped lazily when it comes up.
    pub(super) fn remove(&mut self, id: &QuestionId) -> Option<V> {
        self.entries.remove(id)
    }

    pub(super) fn get(&self, id: &QuestionId) -> Option<&V> {
        self.entries.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &QuestionId) -> Option<&mut V> {
        self.entries.get_mut(id)
    }
}
