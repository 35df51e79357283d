//! The engine: runs functions, persists and resolves questions, resumes runs, and tells the
//! channels what to show.
//!
//! Follow-up runs hold nothing while a person thinks: an ask persists the question, the turn
//! ends, and the claim that resolves the question marks the run `running` again; the engine
//! then replays the function from the start with its journal. Blocking runs await the outcome
//! in memory, which is why their questions are cancelled when askgate restarts.
//!
//! The files: `runner` (starting and replaying runs, one turn at a time), `turns` (the turns
//! part: parked runs, the resumes the claim hands the runner, the turns executing),
//! `context` (what a function asks through), `function` (the [`Function`] trait and the
//! registry), `claim` (resolving a question once, and what follows), `quorum` (approvals that
//! need several people), `nudge` (reminders and escalation), `port` (the [`Channel`] trait
//! adapters implement), `retry` (their backoff), `delivery` (the outbox part: attached
//! channels and their lanes, and the cards they show again), `recent` (a map of the latest
//! entries), `waiters` (where a waiting caller gets its answer), `router`
//! (what an inbound message means), `access` (who may start and answer), `external`
//! (questions from agents, and the waits for their outcomes), `forms` (a form filled a field
//! at a time), `records` (what the engine lets others read of the store),
//! `event` (the events part: the live stream and the kept log), `instances` (sharing a store
//! with other instances; the leases part), `revocations` (what a revoked credential held
//! open ends), `settings`, `metrics`, the `sweeper` (timeouts) and the `pruner` (retention).

/// A service is a handle on its parts behind one `Arc` (`struct Runner(Arc<RunnerParts>)`): a
/// clone is one count, the parts' fields read through it, and a service whose parts are all
/// given is built from them by name (`Router::from(RouterParts { .. })`).
macro_rules! parts {
    ($service:ident, $parts:ident) => {
        impl From<$parts> for $service {
            fn from(parts: $parts) -> Self {
                Self(std::sync::Arc::new(parts))
            }
        }

        impl std::ops::Deref for $service {
            type Target = $parts;

            fn deref(&self) -> &$parts {
                &self.0
            }
        }
    };
}
use parts;

mod access;
mod board;
pub mod callbacks;
mod claim;
mod context;
mod delivery;
mod event;
mod external;
mod forms;
mod function;
mod instances;
mod listeners;
pub mod metrics;
mod nudge;
pub mod people;
mod port;
mod pruner;
mod quorum;
mod recent;
mod records;
pub mod retry;
mod revocations;
mod router;
mod runner;
mod settings;
mod speech;
mod sweeper;
mod tasks;
mod turns;
mod typed;
mod waiters;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub(crate) use access::policy_key;
pub use access::{Access, AnswerersError, AnswerersPolicy, ChannelPolicy, Policies, Refusal, Speech};
pub use callbacks::{CallbackSpec, Callbacks, Courier, Sent};
pub use claim::{Claims, Resolver};
pub use context::{Answer, Approval, AskError, Context};
pub use delivery::{Delivery, NotServed};
pub use event::{Event, Logged, Subscription};
use external::AsksParts;
pub use external::{Asks, ExternalAskError, OutcomeWatch};
pub use forms::{Filling, FormStep, Forms};
pub use function::{Entry, Function, FunctionError, Functions};
pub use instances::{Held, Leases};
pub use listeners::Heard;
pub use people::People;
pub use port::{Channel, ChannelError, ChannelState};
pub use records::{CardRefusal, Found, Records};
pub use retry::Retry;
pub use revocations::Hold;
use router::RouterParts;
pub use router::{FormFilled, Inbound, Response, Router, Said};
pub use runner::{RunRequest, Runner, StartError};
pub use settings::Settings;
pub use tasks::Tasks;

use crate::clock::Clock;
use crate::question::Timeout;
use crate::store::{Store, StoreError, StoreExt};
use delivery::Outbound;

/// How many events a subscriber may fall behind before it is dropped (and reconnects).
pub const EVENTS_BUFFERED: usize = 1024;
/// How many recent events are kept for clients that reconnect.
const EVENTS_KEPT: usize = 4096;
/// How many follow-up runs that ended their turn here are kept in memory to resume without a
/// read.
const PARKED: usize = 4096;

/// How long turns still running at shutdown may take to finish before they are dropped (and
/// replayed at the next start).
const TURN_GRACE: Duration = Duration::from_secs(3);
/// How long queued deliveries may take to go out at shutdown.
const DELIVERY_GRACE: Duration = Duration::from_secs(2);
/// How long the tasks still running after that (a callback being sent, say) may take to end
/// before the store closes.
const TASKS_GRACE: Duration = Duration::from_secs(3);

/// Why a blocking ask and its run end `cancelled` when the askgate that held the wait stopped
/// without ending it (killed, crashed, its host gone): found at the next start on SQLite, or
/// by another instance on PostgreSQL. A stop that ends them itself says `shutdown`.
pub const INSTANCE_LOST: &str = "instance_lost";

/// The gateway's core. Cheap to clone; all clones share one engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// The engine's state: what it was given, and its parts, each with its own state and lock
/// behind methods of its own (no part reaches into another's fields):
///
/// - `outbox` ([`delivery`]): the attached channels, their lanes and how each stands;
/// - `events` ([`event`]): the live event stream and the recent events kept for reconnects;
/// - `waiters` ([`waiters`]): the callers and blocking asks waiting on a question;
/// - `turns` ([`turns`]): parked follow-up runs, the resumes the claim hands the runner, and
///   the turns executing per conversation;
/// - `sweeper` ([`sweeper`]): when the one sweeper looks next, and when it last swept;
/// - `leases` ([`instances`]): the platform leases this instance holds;
/// - `metrics` ([`metrics`]): the counters `/metrics` shows.
struct Inner {
    store: Arc<dyn Store>,
    /// The reads others make of the store ([`records`]).
    records: Records,
    /// Who may start and answer, what cards speak, who listens ([`access`]).
    policies: Policies,
    /// The callbacks in the store's outbox and their senders ([`callbacks`]).
    callbacks: Callbacks,
    /// People's credentials and what they hold open ([`people`], [`revocations`]).
    people: People,
    functions: Arc<Functions>,
    settings: Settings,
    clock: Clock,
    /// The outbox's lanes and what a new question wakes ([`delivery`]).
    delivery: Delivery,
    /// Resolving questions once, and quorum votes ([`claim`], [`quorum`]).
    claims: Claims,
    /// Reminders and escalations ([`nudge`]).
    nudges: nudge::Nudges,
    /// Agents' questions and the waits for their outcomes ([`external`]).
    asks: Asks,
    /// Forms filled a field at a time ([`forms`]).
    forms: Forms,
    events: Arc<event::Events>,
    waiters: Arc<waiters::Waiters>,
    /// Where events go ([`event`]): the log, the other instances, the waiters, the observers.
    bus: event::Bus,
    turns: Arc<turns::Turns>,
    sweeper: Arc<sweeper::Sweeper>,
    leases: Leases,
    metrics: Arc<metrics::Metrics>,
    /// Every long-lived task ([`tasks`]).
    tasks: Tasks,
    /// Starting runs and running their turns, on a tracker of its own ([`runner`]).
    runner: Runner,
    /// What a person's message means, and doing it ([`router`]).
    router: Router,
    /// Fires when shutdown begins: no new runs, inbound loops stop, long waits end.
    stop: CancellationToken,
}

impl Engine {
    /// An engine over `store`. Attach channels, then call [`Engine::start`].
    pub fn new(store: Arc<dyn Store>, functions: Functions, settings: Settings, clock: Clock) -> Self {
        let (stop, tasks) = (CancellationToken::new(), Tasks::default());
        let functions = Arc::new(functions);
        let events = Arc::new(event::Events::new(EVENTS_BUFFERED, EVENTS_KEPT));
        let callbacks = Callbacks::new(store.clone(), clock.clone(), tasks.clone(), stop.clone(), events.clone());
        let waiters = Arc::new(waiters::Waiters::default());
        let bus = event::Bus::new(store.clone(), events.clone(), waiters.clone());
        let policies = Policies::new(settings.channels.clone(), functions.clone(), store.clone(), clock.clone());
        let (sweeper, metrics) = (Arc::new(sweeper::Sweeper::default()), Arc::new(metrics::Metrics::default()));
        let outbox = delivery::Outbox::new(store.clone(), stop.clone(), tasks.clone());
        let delivery =
            Delivery::new(outbox, store.clone(), bus.clone(), policies.clone(), sweeper.clone(), metrics.clone());
        let turns = turns::Turns::new(PARKED);
        let claims = Claims::new(
            store.clone(),
            clock.clone(),
            &settings,
            bus.clone(),
            metrics.clone(),
            delivery.clone(),
            turns.clone(),
            waiters.clone(),
        );
        let nudges = nudge::Nudges::new(
            store.clone(),
            clock.clone(),
            settings.remind_before,
            policies.clone(),
            delivery.clone(),
        );
        let asks = Asks::from(AsksParts {
            store: store.clone(),
            clock: clock.clone(),
            default_timeout: settings.default_timeout,
            policies: policies.clone(),
            delivery: delivery.clone(),
            claims: claims.clone(),
            nudges: nudges.clone(),
            callbacks: callbacks.clone(),
            bus: bus.clone(),
            waiters: waiters.clone(),
            stop: stop.clone(),
        });
        let forms = Forms::new(store.clone(), clock.clone(), claims.clone());
        let runner = Runner::new(
            store.clone(),
            clock.clone(),
            functions.clone(),
            &settings,
            policies.clone(),
            callbacks.clone(),
            delivery.clone(),
            claims.clone(),
            nudges.clone(),
            turns.clone(),
            waiters.clone(),
            bus.clone(),
            metrics.clone(),
            tasks.clone(),
            stop.clone(),
        );
        let people = People::new(store.clone(), clock.clone(), settings.page_url.as_deref(), policies.clone());
        let records = Records::new(store.clone(), clock.clone());
        let router = Router::from(RouterParts {
            store: store.clone(),
            clock: clock.clone(),
            functions: functions.clone(),
            policies: policies.clone(),
            people: people.clone(),
            records: records.clone(),
            claims: claims.clone(),
            forms: forms.clone(),
            runner: runner.clone(),
        });
        Self {
            inner: Arc::new(Inner {
                router,
                runner,
                delivery,
                nudges,
                claims,
                asks,
                forms,
                records,
                people,
                policies,
                callbacks,
                leases: Leases::new(store.clone(), stop.clone()),
                store,
                functions,
                settings,
                clock,
                events,
                waiters,
                bus,
                turns,
                sweeper,
                metrics,
                tasks,
                stop,
            }),
        }
    }

    /// Recovers from the last stop and starts the timeout sweeper and the pruner: blocking
    /// runs and questions whose waiter is gone are cancelled ([`INSTANCE_LOST`]), follow-up runs that were
    /// mid-turn are replayed, questions that expired meanwhile are expired, and cards that
    /// never got through are shown again.
    ///
    /// # Errors
    /// When the store cannot be read.
    pub async fn start(&self) -> Result<(), StoreError> {
        self.runner().take_resumes();
        self.runner().adopt_orphans().await?;
        if self.inner.store.shared() {
            // Other instances share the store: take over what one that dies leaves, and hear
            // what the others ask and resolve.
            self.runner().spawn(instances::adopt(self.runner().clone()));
            if let Some(changes) = self.inner.store.changes() {
                let follower = instances::Follower {
                    store: self.inner.store.clone(),
                    sweeper: self.inner.sweeper.clone(),
                    bus: self.inner.bus.clone(),
                    turns: self.inner.turns.clone(),
                    waiters: self.inner.waiters.clone(),
                    people: self.inner.people.clone(),
                    stop: self.inner.stop.clone(),
                };
                self.runner().spawn(follower.run(changes));
            }
        }
        let inner = &self.inner;
        self.runner().spawn(
            sweeper::Sweep {
                part: inner.sweeper.clone(),
                claims: inner.claims.clone(),
                nudges: inner.nudges.clone(),
                store: inner.store.clone(),
                clock: inner.clock.clone(),
                stop: inner.stop.clone(),
            }
            .run(),
        );
        self.runner().spawn(
            pruner::Pruner {
                store: inner.store.clone(),
                clock: inner.clock.clone(),
                retention: inner.settings.retention,
                stop: inner.stop.clone(),
            }
            .run(),
        );
        let (engine, started) = (self.clone(), self.inner.clock.now_ms());
        self.runner().spawn(async move { engine.delivery().redeliver_undelivered(started).await });
        Ok(())
    }

    /// Stops in an order that cannot hang: see [`Engine::begin_shutdown`] and
    /// [`Engine::finish_shutdown`].
    pub async fn shutdown(&self) {
        self.begin_shutdown().await;
        self.finish_shutdown().await;
    }

    /// The first half of a stop: no new runs; inbound loops, long-polls and event streams
    /// end; blocking asks end as `cancelled(shutdown)`, so that whoever waits on one (an API
    /// caller, a program in hold mode) gets its answer before anything else waits on them.
    pub async fn begin_shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.claims.cancel_blocking().await;
    }

    /// The second half: turns in flight get a short grace to finish, then are dropped (a
    /// follow-up run is replayed at the next start); queued deliveries get a short grace; the
    /// store is closed. Follow-up questions stay pending and resume after the next start.
    pub async fn finish_shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.runner.finish_turns(TURN_GRACE).await;
        if !self.inner.delivery.close(DELIVERY_GRACE).await {
            tracing::warn!("some messages were not delivered before the stop");
        }
        // The rest end on the stop, each finishing what it holds: a callback being sent is
        // recorded as sent or not before the store closes.
        if !self.inner.tasks.drain(TASKS_GRACE).await {
            tracing::warn!(
                tasks = self.inner.tasks.len(),
                "tasks still running after {}s are stopped; a callback they were sending is sent again later",
                TASKS_GRACE.as_secs()
            );
        }
        self.inner.store.close().await;
    }

    /// A token that fires when shutdown begins; inbound loops stop on it.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    /// Subscribes to question and run events. A subscriber that falls more than
    /// [`EVENTS_BUFFERED`] events behind misses some; it can reload the pending questions from
    /// the store.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Logged>> {
        self.inner.events.subscribe()
    }

    /// Subscribes, and says where the subscription starts: the events after `last_id` (a
    /// client's `Last-Event-ID`) when they are all still kept, and the id of the latest event
    /// before the subscription. Nothing is missed or seen twice between the two.
    pub fn subscribe_since(&self, last_id: Option<&str>) -> Subscription {
        self.inner.events.subscribe_since(last_id)
    }

    /// The id a client sends back to resume after event `seq`.
    pub fn event_id(&self, seq: u64) -> String {
        self.inner.events.id(seq)
    }

    /// The registered functions.
    pub fn functions(&self) -> &Functions {
        &self.inner.functions
    }

    /// The engine's counters.
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.inner.metrics
    }

    /// Showing questions and sending messages: the attached channels and their lanes.
    pub fn delivery(&self) -> &Delivery {
        &self.inner.delivery
    }

    /// Resolving questions once: people's attempts, askgate's own closes, quorum votes.
    pub fn claims(&self) -> &Claims {
        &self.inner.claims
    }

    /// Agents' questions: asking, cancelling, and waiting for their outcomes.
    pub fn asks(&self) -> &Asks {
        &self.inner.asks
    }

    /// Forms filled a field at a time: each step, and the drafts so far.
    pub fn forms(&self) -> &Forms {
        &self.inner.forms
    }

    /// What the engine lets others read of the store.
    pub fn records(&self) -> &Records {
        &self.inner.records
    }

    /// Who may start and answer, what cards speak, who listens.
    pub fn policies(&self) -> &Policies {
        &self.inner.policies
    }

    /// People's credentials, and what requests hold open with them.
    pub fn people(&self) -> &People {
        &self.inner.people
    }

    /// Starting runs, and waiting on the turns they run.
    pub fn runner(&self) -> &Runner {
        &self.inner.runner
    }

    /// The tracker every long-lived task of this askgate is spawned through.
    pub fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    /// The platform leases: taking one, and those held now.
    pub fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    /// The callbacks in the store's outbox, and the senders of their rows.
    pub fn callbacks(&self) -> &Callbacks {
        &self.inner.callbacks
    }

    /// Returns once a sweep that began at clock time `at` (unix ms) or later has expired,
    /// reminded and escalated everything due by then (its messages are handed to the lanes:
    /// [`Delivery::outbound_idle`] waits for them), or when the engine stops.
    pub async fn swept(&self, at: i64) {
        self.inner.sweeper.swept(at, &self.inner.stop).await;
    }

    /// The router: what a person's message means ([`Router::handle`]).
    pub fn router(&self) -> &Router {
        &self.inner.router
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }
}

/// `now` plus `duration`, in unix milliseconds.
pub(super) fn after(now: i64, duration: Duration) -> i64 {
    now.saturating_add(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

/// When an ask made at `now` with `timeout` expires: `default` unless it says otherwise.
pub(super) fn deadline(default: Duration, timeout: Timeout, now: i64) -> Option<i64> {
    match timeout {
        Timeout::Default => Some(after(now, default)),
        Timeout::Seconds(s) => Some(after(now, Duration::from_secs(s))),
        Timeout::Never => None,
    }
}

/// Locks a mutex that only guards plain maps: a panic while holding it cannot leave the map
/// half-updated, so a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
