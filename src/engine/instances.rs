//! Several askgate instances on one shared store (PostgreSQL). Each runs the runs it started
//! or resumed and holds its own blocking asks; the store says which instance owns what. Two
//! tasks keep the instances in step:
//!
//! - [`adopt`] asks the store every few seconds for what an instance that died left (its
//!   heartbeat lapsed): its follow-up runs are replayed here, its blocking asks cancelled. The
//!   store hands each run to one survivor.
//! - [`follow`] hears what the other instances ask and resolve as they commit: the event
//!   streams here carry it, a blocking ask held here wakes with the outcome, a run parked here
//!   is forgotten (the instance whose claim won resumes it), and the sweeper learns of a new
//!   deadline.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::{Engine, Event, lock};
use crate::question::{Mode, Outcome, QuestionId};
use crate::store::{Change, Lease};

/// How often the store is asked for what dead instances left.
const ADOPT_EVERY: Duration = Duration::from_secs(3);

/// Takes over what instances that died left, every [`ADOPT_EVERY`], until the engine stops.
pub(super) async fn adopt(engine: Engine) {
    let stop = engine.stopping();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ADOPT_EVERY) => {}
        }
        if let Err(e) = engine.adopt_orphans().await {
            tracing::error!(error = %e, "could not take over what a stopped instance left");
        }
    }
}

/// Applies the other instances' asks and resolutions here, until the engine stops.
pub(super) async fn follow(engine: Engine, mut changes: UnboundedReceiver<Change>) {
    let stop = engine.stopping();
    loop {
        let change = tokio::select! {
            () = stop.cancelled() => return,
            change = changes.recv() => match change {
                Some(change) => change,
                None => return,
            },
        };
        let ids = match change {
            Change::Asked(id) | Change::Resolved(id) => vec![id],
            // What waits here may have been resolved meanwhile: look at each again.
            Change::Missed => lock(&engine.inner.waiters).keys().copied().collect(),
        };
        for id in ids {
            let change = if change == Change::Missed { Change::Resolved(id) } else { change };
            if let Err(e) = engine.heard(change, id).await {
                tracing::warn!(question = %id, error = %e, "could not read a question another instance changed");
            }
        }
    }
}

/// A lease this instance holds (see [`Engine::lease`]); released when dropped.
pub struct Held {
    lease: Lease,
    name: String,
    held: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl Held {
    /// Completes when the lease is lost: stop using the connection it guards.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        lock(&self.held).remove(&self.name);
    }
}

impl Engine {
    /// Waits until this instance holds the lease `name` (a platform connection that admits one
    /// consumer at a time), or the engine stops (none). Alone on its store, askgate holds every
    /// lease at once; instances sharing one take turns, the next taking over when the holder
    /// stops or dies. A store that fails is tried again every few seconds.
    pub async fn lease(&self, name: &str) -> Option<Held> {
        let stop = self.stopping();
        let mut said = false;
        loop {
            match self.inner.store.lease(name, &stop).await {
                Ok(Some(lease)) => {
                    if self.inner.store.shared() {
                        tracing::info!(lease = name, "this instance holds the lease");
                    }
                    lock(&self.inner.leases).insert(name.to_owned());
                    return Some(Held { lease, name: name.to_owned(), held: self.inner.leases.clone() });
                }
                Ok(None) => return None,
                Err(e) => {
                    if !said {
                        tracing::warn!(lease = name, error = %e, "could not ask for a lease; trying again");
                        said = true;
                    }
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            }
        }
    }

    /// The leases this instance holds now.
    pub fn leases(&self) -> Vec<String> {
        lock(&self.inner.leases).iter().cloned().collect()
    }

    async fn heard(&self, change: Change, id: QuestionId) -> Result<(), crate::store::StoreError> {
        let Some(question) = self.inner.store.question(id).await? else { return Ok(()) };
        let question = Arc::new(question);
        match change {
            Change::Asked(_) => {
                if let Some(at) = question.expires_at
                    && at < self.inner.sweeper_next.load(std::sync::atomic::Ordering::Relaxed)
                {
                    self.inner.sweeper_wake.notify_one();
                }
                self.emit(Event::Asked(question));
            }
            Change::Resolved(_) | Change::Missed if question.is_pending() => {}
            Change::Resolved(_) | Change::Missed => {
                lock(&self.inner.parked).remove(&id);
                if question.mode == Mode::Blocking
                    && let Some(waiter) = self.take_waiter(id)
                {
                    let outcome = question.outcome.clone().unwrap_or(Outcome::Cancelled { reason: "unknown".into() });
                    let _ = waiter.send(outcome);
                }
                self.emit(Event::Resolved(question));
            }
        }
        Ok(())
    }
}
