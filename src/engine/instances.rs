//! Several askgate instances on one shared store (PostgreSQL). Each runs the runs it started
//! or resumed and holds its own blocking asks; the store says which instance owns what. Two
//! tasks keep the instances in step:
//!
//! - [`adopt`] asks the store every second for what an instance that died left (its
//!   heartbeat lapsed, or its connection ended): its follow-up runs are replayed here, its
//!   blocking asks cancelled. The store hands each run to one survivor.
//! - [`follow`] hears what the other instances ask and resolve as they commit, and what their
//!   runs do: the event streams here carry it, a blocking ask held here wakes with the outcome,
//!   a run parked here is forgotten (the instance whose claim won resumes it), and the sweeper
//!   learns of a new deadline. A credential another revoked ends what it holds open here.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::event::Bus;
use super::sweeper::Sweeper;
use super::turns::Turns;
use super::waiters::Waiters;
use super::{Event, People, Runner, lock};
use crate::question::{QuestionId, RunId};
use crate::run::Run;
use crate::store::{Change, Lease, RunEvent, Store, StoreError, StoreExt};

/// How often the store is asked for what dead instances left: often, since a death is seen
/// within seconds (a run waits for the next ask on top of that), and cheap (one indexed
/// `UPDATE` of the running runs that usually changes nothing).
const ADOPT_EVERY: Duration = Duration::from_secs(1);

/// Takes over what instances that died left, every [`ADOPT_EVERY`], until the engine stops.
pub(super) async fn adopt(runner: Runner) {
    let stop = runner.stop.clone();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ADOPT_EVERY) => {}
        }
        if let Err(e) = runner.adopt_orphans().await {
            tracing::error!(error = %e, "could not take over what a stopped instance left");
        }
    }
}

/// What the follower works with: the store it reads what changed from, and the parts here
/// that hear of it (the sweeper, the bus, the turns, the waiters, the people).
pub(super) struct Follower {
    pub(super) store: Arc<dyn Store>,
    pub(super) sweeper: Arc<Sweeper>,
    pub(super) bus: Bus,
    pub(super) turns: Arc<Turns>,
    pub(super) waiters: Arc<Waiters>,
    pub(super) people: People,
    pub(super) stop: CancellationToken,
}

impl Follower {
    /// Hears what the other instances change, one change at a time, until the stop.
    pub(super) async fn run(self, mut changes: UnboundedReceiver<Change>) {
        loop {
            let change = tokio::select! {
                () = self.stop.cancelled() => return,
                change = changes.recv() => match change {
                    Some(change) => change,
                    None => return,
                },
            };
            let read = match &change {
                Change::Asked(id) => self.heard_asked(*id).await,
                Change::Resolved(id) => self.heard_resolved(*id).await,
                Change::Counted(id) => self.heard_counted(*id).await,
                Change::Run { event, id, snapshot } => self.heard_run(*event, *id, snapshot.as_deref()).await,
                Change::Revoked(name) => {
                    self.people.revoked(name);
                    Ok(())
                }
                // What waits here may have been resolved meanwhile, and what is held open here
                // revoked: look at each again.
                Change::Missed => {
                    let waiting = self.waiters.held();
                    let mut read = self.people.recheck_holds().await;
                    for id in waiting {
                        read = read.and(self.heard_resolved(id).await);
                    }
                    read
                }
            };
            if let Err(e) = read {
                tracing::warn!(?change, error = %e, "could not read what another instance changed");
            }
        }
    }

    /// Another instance asked `id`: the event streams here carry it, and the sweeper learns
    /// its deadline.
    async fn heard_asked(&self, id: QuestionId) -> Result<(), StoreError> {
        let Some(question) = self.store.question(id).await? else { return Ok(()) };
        self.sweeper.wake_for(&question);
        self.bus.publish(Event::Asked(Arc::new(question)));
        Ok(())
    }

    /// Another instance counted an approval of `id` (and shows it on the cards): the event
    /// streams here carry it.
    async fn heard_counted(&self, id: QuestionId) -> Result<(), StoreError> {
        let Some(question) = self.store.question(id).await? else { return Ok(()) };
        if question.is_pending() {
            self.bus.publish(Event::Counted(Arc::new(question)));
        }
        Ok(())
    }

    /// Another instance's run did `event`: the event streams here carry it.
    async fn heard_run(&self, event: RunEvent, id: RunId, snapshot: Option<&Run>) -> Result<(), StoreError> {
        let run = match snapshot {
            Some(run) => run.clone(),
            None => match self.store.run(id).await? {
                Some(run) => run,
                None => return Ok(()),
            },
        };
        self.bus.publish(Event::heard_of_run(event, run));
        Ok(())
    }

    /// Another instance resolved `id` (or may have): a blocking ask held here wakes, a run
    /// parked here is forgotten (the winner resumes it), the event streams here carry it.
    async fn heard_resolved(&self, id: QuestionId) -> Result<(), StoreError> {
        let Some(question) = self.store.question(id).await? else { return Ok(()) };
        if question.is_pending() {
            return Ok(());
        }
        self.turns.unpark(id);
        self.bus.publish(Event::Resolved(Arc::new(question)));
        Ok(())
    }
}

/// A lease this instance holds (see [`Leases::lease`]); released when dropped.
pub struct Held {
    lease: Lease,
    name: String,
    held: Names,
}

/// The leases service: takes the store's leases (a platform connection that admits one
/// consumer at a time) and knows those this instance holds now (`telegram:polling`), for
/// `/healthz`. Holds the store, the engine's stop and the names held.
#[derive(Clone)]
pub struct Leases(Arc<LeasesParts>);

/// The parts of [`Leases`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct LeasesParts {
    store: Arc<dyn Store>,
    stop: CancellationToken,
    held: Names,
}

super::parts!(Leases, LeasesParts);

/// The names of the leases held now.
#[derive(Clone, Default)]
struct Names(Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>);

impl Names {
    fn insert(&self, name: &str) {
        lock(&self.0).insert(name.to_owned());
    }

    fn remove(&self, name: &str) {
        lock(&self.0).remove(name);
    }

    fn names(&self) -> Vec<String> {
        lock(&self.0).iter().cloned().collect()
    }
}

impl Held {
    /// Completes when the lease is lost: stop using the connection it guards.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held.remove(&self.name);
    }
}

impl Leases {
    pub(super) fn new(store: Arc<dyn Store>, stop: CancellationToken) -> Self {
        Self(Arc::new(LeasesParts { store, stop, held: Names::default() }))
    }

    /// Waits until this instance holds the lease `name` (a platform connection that admits one
    /// consumer at a time), or the engine stops (none). Alone on its store, askgate holds every
    /// lease at once; instances sharing one take turns, the next taking over when the holder
    /// stops or dies. A store that fails is tried again every few seconds.
    pub async fn lease(&self, name: &str) -> Option<Held> {
        let stop = &self.stop;
        let mut said = false;
        loop {
            match self.store.lease(name, stop).await {
                Ok(Some(lease)) => {
                    if self.store.shared() {
                        tracing::info!(lease = name, "this instance holds the lease");
                    }
                    self.held.insert(name);
                    return Some(Held { lease, name: name.to_owned(), held: self.held.clone() });
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
    pub fn names(&self) -> Vec<String> {
        self.held.names()
    }
}
