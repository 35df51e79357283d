//! The memory store's callbacks, as the SQL stores' `callbacks` table keeps them.

use super::tables::Tables;
use crate::run::RunStatus;
use crate::store::{Callback, CallbackTry, StoreError};

/// A callback as kept, with what its attempts left.
pub(super) struct Outboxed {
    callback: Callback,
    next_at: Option<i64>,
    leased_until: Option<i64>,
    settled: bool,
}

impl Tables {
    /// Adds a callback; its id is its key, as in the SQL stores.
    pub(super) fn add_callback(&mut self, callback: Callback) -> Result<(), StoreError> {
        if self.callbacks.iter().any(|k| k.callback.id == callback.id) {
            return Err(StoreError::Constraint(format!("callback {} is stored already", callback.id)));
        }
        self.callbacks.push(Outboxed { callback, next_at: None, leased_until: None, settled: false });
        Ok(())
    }

    /// See [`crate::store::Write::TakeCallback`].
    pub(super) fn take_callback(&mut self, id: &str, now: i64, until: i64) -> bool {
        let Some(kept) = self.callbacks.iter_mut().find(|k| k.callback.id == id) else { return false };
        if kept.settled || kept.leased_until.is_some_and(|t| t > now) || kept.next_at.is_some_and(|t| t > now) {
            return false;
        }
        kept.leased_until = Some(until);
        kept.callback.attempts += 1;
        true
    }

    /// See [`crate::store::Write::CallbackTried`].
    pub(super) fn callback_tried(&mut self, id: &str, lease: i64, tried: &CallbackTry) -> bool {
        let Some(kept) = self.callbacks.iter_mut().find(|k| k.callback.id == id) else { return false };
        if kept.settled || kept.leased_until != Some(lease) {
            return false;
        }
        kept.leased_until = None;
        match tried {
            CallbackTry::Delivered | CallbackTry::GaveUp { .. } => kept.settled = true,
            CallbackTry::Retry { next_at, .. } => kept.next_at = Some(*next_at),
        }
        true
    }

    /// See [`crate::store::Store::due_callbacks`].
    pub(super) fn due_callbacks(&self, now: i64, to: &str, limit: usize) -> Vec<Callback> {
        let ended = |k: &Outboxed| {
            let run = self.runs.get(&k.callback.run)?;
            let done = matches!(run.status, RunStatus::Finished | RunStatus::Failed | RunStatus::Cancelled);
            done.then_some(run.updated_at)
        };
        let mut due: Vec<Callback> = self
            .callbacks
            .iter()
            .filter(|k| !k.settled && k.next_at.is_none_or(|t| t <= now) && k.leased_until.is_none_or(|t| t <= now))
            .filter(|k| k.callback.url.starts_with(to))
            .filter_map(|k| ended(k).map(|at| Callback { ended_at: Some(at), ..k.callback.clone() }))
            .collect();
        due.sort_by_key(|c| c.created_at);
        due.truncate(limit);
        due
    }

    /// See [`crate::store::Store::callbacks_open`].
    pub(super) fn callbacks_open(&self, to: &str) -> bool {
        self.callbacks.iter().any(|k| !k.settled && k.callback.url.starts_with(to))
    }

    /// Whether `run` has a callback neither delivered nor given up (the run is kept for it).
    pub(super) fn awaits_callback(&self, run: crate::question::RunId) -> bool {
        self.callbacks.iter().any(|k| k.callback.run == run && !k.settled)
    }

    /// Deletes callbacks written before `before` that are settled or whose run is not kept.
    pub(super) fn prune_callbacks(&mut self, before: i64) {
        let runs = &self.runs;
        self.callbacks.retain(|k| k.callback.created_at >= before || !k.settled && runs.contains_key(&k.callback.run));
    }
}
