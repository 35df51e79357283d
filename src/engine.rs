//! The engine: runs functions, persists and resolves questions, resumes runs, and tells the
//! channels what to show.
//!
//! Follow-up runs hold nothing while a person thinks: an ask persists the question, the turn
//! ends, and the claim that resolves the question marks the run `running` again; the engine
//! then replays the function from the start with its journal. Blocking runs await the outcome
//! in memory, which is why their questions are cancelled when askgate restarts.

mod access;
mod context;
mod event;
pub mod metrics;
mod pruner;
mod router;
mod sweeper;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use access::{Access, AnswerersError, AnswerersPolicy, ChannelPolicy, Refusal};
pub use context::{Answer, Approval, AskError, Context};
pub use event::Event;
pub use router::{Inbound, Response};

use crate::channel::{Channel, ChannelState};
use crate::clock::Clock;
use crate::function::{FunctionError, Functions};
use crate::question::{
    Answerers, Ask, Choice, Conversation, Kind, Mode, Outcome, Question, QuestionId, Receipt, RunId, Status, Surface,
    Timeout, UserRef,
};
use crate::run::{Run, RunStatus};
use crate::store::{Claim, Delivery, Grant, Resolution, Store, StoreError};

/// The engine's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The timeout of asks that do not set one.
    pub default_timeout: Duration,
    /// Rules per channel name, or per `channel:chat` for a named webhook endpoint.
    pub channels: HashMap<String, ChannelPolicy>,
    /// How long ended runs, their questions and cards are kept; none: forever.
    pub retention: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(30 * 60),
            channels: HashMap::new(),
            retention: Some(Duration::from_secs(30 * 86_400)),
        }
    }
}

/// Why an external ask was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExternalAskError {
    /// The ask is malformed.
    #[error(transparent)]
    Invalid(#[from] crate::question::InvalidAsk),
    /// askgate is shutting down.
    #[error("askgate is shutting down")]
    ShuttingDown,
    /// No enabled channel serves the conversation.
    #[error(transparent)]
    NotServed(#[from] NotServed),
    /// Nobody was named to answer, and the channel names nobody.
    #[error(transparent)]
    Answerers(#[from] AnswerersError),
    /// The store failed.
    #[error("storage failed")]
    Store(#[from] StoreError),
}

/// A conversation that no enabled channel serves.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no enabled channel serves `{conversation}`; the channels here are {}", if channels.is_empty() { "none".to_owned() } else { channels.join(", ") })]
pub struct NotServed {
    /// The conversation.
    pub conversation: Conversation,
    /// The enabled channels (webhook endpoints as `webhook:<name>`).
    pub channels: Vec<String>,
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No function has that name.
    #[error("no function named `{0}`")]
    UnknownFunction(String),
    /// The user may not start this run here; the refusal says which key would allow them.
    #[error(transparent)]
    NotAllowed(#[from] Refusal),
    /// No enabled channel serves the conversation.
    #[error(transparent)]
    NotServed(#[from] NotServed),
    /// askgate is shutting down.
    #[error("askgate is shutting down")]
    ShuttingDown,
}

/// What a run starts with.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The function's name.
    pub function: String,
    /// Where it runs; none for a headless run (every ask is `cancelled(no_human)`).
    pub conversation: Option<Conversation>,
    /// Who starts it.
    pub user: UserRef,
    /// What the function is given.
    pub input: String,
    /// Who may answer its questions; none: the channel's rule.
    pub answerers: Option<Answerers>,
}

impl RunRequest {
    /// A run of `function` started by `user` in `conversation`, with no input.
    pub fn new(function: impl Into<String>, conversation: Option<Conversation>, user: UserRef) -> Self {
        Self { function: function.into(), conversation, user, input: String::new(), answerers: None }
    }

    /// Sets what the function is given.
    #[must_use]
    pub fn input(mut self, input: impl Into<String>) -> Self {
        self.input = input.into();
        self
    }

    /// Sets who may answer its questions.
    #[must_use]
    pub fn answerers(mut self, answerers: Answerers) -> Self {
        self.answerers = Some(answerers);
        self
    }
}

/// Who is resolving a question.
#[derive(Clone, Debug)]
pub struct Resolver {
    /// The person (or `api:<name>` for the API token).
    pub user: UserRef,
    /// How people know them (`@alice`), when the surface said; shown with the outcome.
    pub name: Option<String>,
    /// Where the attempt came from.
    pub via: Surface,
    /// The operator credential: may answer any question.
    pub operator: bool,
}

impl Resolver {
    /// Whether this resolver may answer `question`: one of its answerers, or the operator.
    pub fn may_answer(&self, question: &Question) -> bool {
        self.operator || question.answerers.admits(&self.user)
    }
}

/// Things the channel workers deliver, in order per channel.
enum Outbound {
    Card(Question),
    Retract(Question),
    Text(Conversation, String),
    /// A message an adapter sent for a question by itself (a prompt for the next message),
    /// to be retracted with the question's cards.
    Record(Question, Delivery),
}

/// The gateway's core. Cheap to clone; all clones share one engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    functions: Functions,
    settings: Settings,
    clock: Clock,
    /// Each attached channel with its delivery lanes.
    channels: Mutex<HashMap<&'static str, Attached>>,
    events: broadcast::Sender<Event>,
    waiters: Mutex<HashMap<QuestionId, oneshot::Sender<Outcome>>>,
    runs: TaskTracker,
    workers: TaskTracker,
    stop: CancellationToken,
    sweeper_wake: Notify,
    metrics: metrics::Metrics,
    /// Follow-up runs that ended their turn here, by the question they wait on: resuming one
    /// of these needs no read (after a restart, or once forgotten, the store has it all).
    parked: Mutex<Recent<(Run, Vec<Question>)>>,
    /// How each attached channel's connection stands.
    channel_states: Mutex<std::collections::BTreeMap<&'static str, ChannelState>>,
    /// How many turns are executing per conversation (not counting ones waiting on a person).
    busy: Mutex<HashMap<Conversation, usize>>,
    settled: Notify,
}

/// An attached channel and the lanes its deliveries go over.
struct Attached {
    channel: Arc<dyn Channel>,
    lanes: Vec<mpsc::UnboundedSender<Outbound>>,
}

/// Counts a turn as executing in its conversation while it lives.
struct Busy {
    engine: Engine,
    conversation: Option<Conversation>,
}

impl Busy {
    fn new(engine: &Engine, conversation: Option<&Conversation>) -> Self {
        engine.enter(conversation);
        Self { engine: engine.clone(), conversation: conversation.cloned() }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.engine.leave(self.conversation.as_ref());
    }
}

/// Marks an executing turn as waiting on a person while it lives.
pub(crate) struct Waiting {
    engine: Engine,
    conversation: Option<Conversation>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // Executing again: the turn's own guard counts this back down when it ends.
        self.engine.enter(self.conversation.as_ref());
    }
}

impl Engine {
    /// An engine over `store`. Attach channels, then call [`Engine::start`].
    pub fn new(store: Arc<dyn Store>, functions: Functions, settings: Settings, clock: Clock) -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            inner: Arc::new(Inner {
                store,
                functions,
                settings,
                clock,
                channels: Mutex::new(HashMap::new()),
                events,
                waiters: Mutex::new(HashMap::new()),
                runs: TaskTracker::new(),
                workers: TaskTracker::new(),
                stop: CancellationToken::new(),
                sweeper_wake: Notify::new(),
                metrics: metrics::Metrics::default(),
                parked: Mutex::new(Recent::new(4096)),
                channel_states: Mutex::default(),
                busy: Mutex::new(HashMap::new()),
                settled: Notify::new(),
            }),
        }
    }

    /// Attaches a channel's outbound half: cards, retractions and text for conversations of
    /// `channel.name()` go to it, in order.
    pub fn attach(&self, channel: Arc<dyn Channel>) {
        let lanes = (0..LANES)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                self.inner.workers.spawn(lane(self.inner.store.clone(), channel.clone(), rx));
                tx
            })
            .collect();
        lock(&self.inner.channels).insert(channel.name(), Attached { channel: channel.clone(), lanes });
        lock(&self.inner.channel_states).insert(channel.name(), ChannelState::Connecting);
    }

    /// Checks that an attached channel serves `conversation`.
    ///
    /// # Errors
    /// [`NotServed`] naming the channels that are enabled.
    pub fn check_served(&self, conversation: &Conversation) -> Result<(), NotServed> {
        let channels = lock(&self.inner.channels);
        if channels.get(conversation.channel()).is_some_and(|a| a.channel.serves(conversation)) {
            return Ok(());
        }
        let mut names: Vec<String> = channels.values().flat_map(|a| a.channel.served()).collect();
        names.sort();
        Err(NotServed { conversation: conversation.clone(), channels: names })
    }

    /// Records how an attached channel's connection stands (adapters report it).
    pub fn set_channel_state(&self, channel: &'static str, state: ChannelState) {
        let mut states = lock(&self.inner.channel_states);
        if states.get(channel) != Some(&state) {
            match &state {
                ChannelState::Down(why) => tracing::warn!(channel, "{channel} is down: {why}"),
                other => tracing::debug!(channel, "{channel} is {other}"),
            }
        }
        states.insert(channel, state);
    }

    /// Every attached channel with how its connection stands, by name.
    pub fn channel_states(&self) -> Vec<(&'static str, ChannelState)> {
        lock(&self.inner.channel_states).iter().map(|(name, state)| (*name, state.clone())).collect()
    }

    /// Recovers from the last stop and starts the timeout sweeper and the pruner: blocking
    /// questions whose waiter is gone are cancelled (`restart`), follow-up runs that were
    /// mid-turn are replayed, and questions that expired meanwhile are expired.
    ///
    /// # Errors
    /// When the store cannot be read.
    pub async fn start(&self) -> Result<(), StoreError> {
        let store = &self.inner.store;
        for id in store.pending_blocking().await? {
            self.close(id, Outcome::Cancelled { reason: "restart".to_owned() }).await?;
        }
        for mut run in store.running_runs().await? {
            match run.mode {
                Mode::FollowUp => {
                    tracing::info!(run = %run.id, function = %run.function, "resuming a run interrupted mid-turn");
                    self.resume(run.id, run.conversation.as_ref(), None);
                }
                Mode::Blocking => {
                    run.status = RunStatus::Failed;
                    run.result = Some("interrupted by a restart of askgate".to_owned());
                    run.updated_at = self.now_ms();
                    store.save_run(&run).await?;
                }
                Mode::External => {}
            }
        }
        self.inner.runs.spawn(sweeper::run(self.clone()));
        self.inner.runs.spawn(pruner::run(self.clone()));
        Ok(())
    }

    /// Stops: no new runs; blocking asks end as `cancelled(shutdown)`; in-flight turns finish;
    /// queued messages are delivered; the store is closed. Follow-up questions stay pending
    /// and resume after the next start.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        let waiting: Vec<_> = lock(&self.inner.waiters).drain().collect();
        for (id, waiter) in waiting {
            let outcome = Outcome::Cancelled { reason: "shutdown".to_owned() };
            if let Err(e) = self.close(id, outcome.clone()).await {
                tracing::warn!(question = %id, error = %e, "could not record a shutdown cancellation");
            }
            let _ = waiter.send(outcome);
        }
        self.inner.runs.close();
        self.inner.runs.wait().await;
        lock(&self.inner.channels).clear();
        self.inner.workers.close();
        self.inner.workers.wait().await;
        self.inner.store.close().await;
    }

    /// A token that fires when shutdown begins; inbound loops stop on it.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    /// Subscribes to question and run events. A subscriber that falls more than 1024 events
    /// behind misses some; it can reload the pending questions from the store.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The registered functions.
    pub fn functions(&self) -> &Functions {
        &self.inner.functions
    }

    /// The engine's counters.
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.inner.metrics
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    fn deadline(&self, timeout: Timeout, now: i64) -> Option<i64> {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        match timeout {
            Timeout::Default => Some(now.saturating_add(ms(self.inner.settings.default_timeout))),
            Timeout::Seconds(s) => Some(now.saturating_add(ms(Duration::from_secs(s)))),
            Timeout::Never => None,
        }
    }

    fn default_answerers(&self, run: &Run) -> Answerers {
        if let Some(answerers) = &run.answerers {
            return answerers.clone();
        }
        let policy = run.conversation.as_ref().map(|c| self.policy(c)).unwrap_or_default();
        match policy.answerers {
            AnswerersPolicy::Initiator => Answerers::Initiator { user: run.initiator.clone() },
            AnswerersPolicy::Conversation => Answerers::Conversation,
        }
    }

    /// Starts a run. Channel-initiated runs use [`Mode::FollowUp`]; the call returns once the
    /// run's first turn is under way.
    ///
    /// # Errors
    /// Unknown function, a user not allowed to start it there, or shutdown.
    pub async fn start_run(&self, request: RunRequest, mode: Mode) -> Result<RunId, StartError> {
        let run = self.new_run(request, mode)?;
        let id = run.id;
        let engine = self.clone();
        let busy = Busy::new(self, run.conversation.as_ref());
        self.inner.runs.spawn(async move {
            engine.invoke(run, Vec::new()).await;
            drop(busy);
        });
        Ok(id)
    }

    /// Waits (at most `limit`) until no turn of a run is executing in `conversation`: every
    /// run there has asked, finished, or waits on a person. The console uses it so that piped
    /// input is read as a person would type it, after the question it answers was asked.
    pub async fn settled(&self, conversation: &Conversation, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.inner.settled.notified();
            if !lock(&self.inner.busy).contains_key(conversation) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    fn enter(&self, conversation: Option<&Conversation>) {
        if let Some(c) = conversation {
            *lock(&self.inner.busy).entry(c.clone()).or_default() += 1;
        }
    }

    fn leave(&self, conversation: Option<&Conversation>) {
        let Some(c) = conversation else { return };
        let mut busy = lock(&self.inner.busy);
        if let Some(n) = busy.get_mut(c) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.remove(c);
            }
        }
        drop(busy);
        self.inner.settled.notify_waiters();
    }

    /// Marks the calling turn as waiting on a person until the guard is dropped.
    pub(crate) fn waiting_on_a_person(&self, conversation: Option<&Conversation>) -> Waiting {
        self.leave(conversation);
        Waiting { engine: self.clone(), conversation: conversation.cloned() }
    }

    /// Runs a function to its end in blocking mode and returns the finished run record.
    ///
    /// # Errors
    /// As [`Engine::start_run`].
    pub async fn run_to_end(&self, request: RunRequest) -> Result<Run, StartError> {
        let run = self.new_run(request, Mode::Blocking)?;
        let engine = self.clone();
        let busy = Busy::new(self, run.conversation.as_ref());
        let handle = self.inner.runs.spawn(async move {
            let run = engine.invoke(run, Vec::new()).await;
            drop(busy);
            run
        });
        handle.await.map_err(|_| StartError::ShuttingDown)
    }

    /// Checks that the run may start.
    fn new_run(&self, request: RunRequest, mode: Mode) -> Result<Run, StartError> {
        let RunRequest { function, conversation, user, input, answerers } = request;
        if self.inner.stop.is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        if self.inner.functions.get(&function).is_none() {
            return Err(StartError::UnknownFunction(function));
        }
        if let Some(c) = &conversation {
            self.check_served(c)?;
        }
        self.may_start(&function, conversation.as_ref(), &user)?;
        let now = self.now_ms();
        let run = Run {
            id: RunId::new(),
            function,
            conversation,
            initiator: user,
            answerers,
            input,
            mode,
            status: RunStatus::Running,
            says: 0,
            result: None,
            created_at: now,
            updated_at: now,
        };
        // The run is first written when it first asks or ends: a run that does neither before
        // a crash was mid-flight, and nothing about it was promised to anyone.
        self.emit(Event::RunStarted(run.clone()));
        Ok(run)
    }

    /// Replays a follow-up run whose question was resolved (or that a stop interrupted).
    fn resume(&self, run_id: RunId, conversation: Option<&Conversation>, resolved: Option<std::time::Instant>) {
        let engine = self.clone();
        let busy = Busy::new(self, conversation);
        self.inner.runs.spawn(async move {
            let _busy = busy;
            match engine.inner.store.run_with_journal(run_id).await {
                Ok(Some(resume)) if resume.run.status == RunStatus::Running => {
                    if let Some(at) = resolved {
                        engine.inner.metrics.resumed_after(at.elapsed());
                    }
                    engine.emit(Event::RunResumed(resume.run.clone()));
                    engine.invoke(resume.run, resume.journal).await;
                }
                Ok(Some(resume)) => {
                    tracing::debug!(run = %resume.run.id, status = %resume.run.status, "not resuming");
                }
                Ok(None) => tracing::warn!(run = %run_id, "a resolved question's run is missing"),
                Err(e) => tracing::error!(run = %run_id, error = %e, "could not load a run to resume it"),
            }
        });
    }

    /// One turn of a run: replay the journal, run the function until it returns or asks
    /// something new, and record where it stands.
    async fn invoke(&self, run: Run, journal: Vec<Question>) -> Run {
        let id = run.id;
        let final_run = match self.invoke_inner(run, journal).await {
            Ok(run) => run,
            Err((mut run, e)) => {
                tracing::error!(run = %id, error = %e, "a run could not be recorded");
                run.status = RunStatus::Failed;
                run.result = Some(format!("internal error: {e}"));
                run
            }
        };
        self.emit(Event::Run(final_run.clone()));
        final_run
    }

    async fn invoke_inner(&self, run: Run, journal: Vec<Question>) -> Result<Run, (Run, StoreError)> {
        let Some(entry) = self.inner.functions.get(&run.function).cloned() else {
            let message = format!("no function named `{}` (removed from the config?)", run.function);
            self.notify(&run, format!("⚠️ {message}"));
            return self.end_run(run, RunStatus::Failed, message).await;
        };
        let mut ctx = Context::new(self.clone(), run.clone(), journal);
        let result = entry.function.call(&mut ctx, &run.input).await;
        let (run, journal) = ctx.into_parts();
        match result {
            Ok(reply) => {
                if let Some(c) = &run.conversation
                    && !reply.trim().is_empty()
                {
                    self.send_text(c, reply.clone());
                }
                self.end_run(run, RunStatus::Finished, reply).await
            }
            Err(FunctionError::Ask(AskError::Pending { question })) => {
                if run.mode == Mode::FollowUp {
                    lock(&self.inner.parked).insert(question, (run.clone(), journal));
                }
                Ok(run)
            }
            Err(FunctionError::Ask(AskError::Cancelled { reason })) => {
                self.notify(&run, format!("⛔ {} cancelled ({reason}).", run.function));
                self.end_run(run, RunStatus::Cancelled, reason).await
            }
            Err(FunctionError::Hidden { public, detail }) => {
                tracing::warn!(run = %run.id, function = %run.function, error = %detail, "run failed");
                self.notify(&run, format!("⚠️ {} failed: {public}", run.function));
                self.end_run(run, RunStatus::Failed, detail).await
            }
            Err(e) => {
                let message = format!("{e:#}");
                tracing::warn!(run = %run.id, function = %run.function, error = %message, "run failed");
                self.notify(&run, format!("⚠️ {} failed: {message}", run.function));
                self.end_run(run, RunStatus::Failed, message).await
            }
        }
    }

    async fn end_run(&self, mut run: Run, status: RunStatus, result: String) -> Result<Run, (Run, StoreError)> {
        run.status = status;
        run.result = Some(result);
        run.updated_at = self.now_ms();
        match self.inner.store.save_run(&run).await {
            Ok(()) => Ok(run),
            Err(e) => Err((run, e)),
        }
    }

    fn notify(&self, run: &Run, text: String) {
        if let Some(c) = &run.conversation {
            self.send_text(c, text);
        }
    }

    fn emit(&self, event: Event) {
        // No subscribers is fine: events are for observers.
        let _ = self.inner.events.send(event);
    }

    /// Queues a delivery on the lane of its conversation, so that each conversation's
    /// deliveries keep their order and a conversation that the platform paces holds up only
    /// its own lane.
    fn outbound(&self, conversation: &Conversation, message: Outbound) {
        let channels = lock(&self.inner.channels);
        match channels.get(conversation.channel()).map(|a| &a.lanes) {
            Some(lanes) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(conversation, &mut hasher);
                let lane = usize::try_from(std::hash::Hasher::finish(&hasher) % LANES as u64).unwrap_or(0);
                if lanes[lane].send(message).is_err() {
                    tracing::warn!(%conversation, "the channel stopped; a message was not delivered");
                }
            }
            None => tracing::debug!(%conversation, "no channel attached for this conversation"),
        }
    }

    /// Records a message an adapter sent for `question` outside its card (a prompt for the
    /// next message), so that it is retracted with the cards; one recorded after the question
    /// was resolved is retracted at once.
    pub fn record_delivery(&self, question: &Question, delivery: Delivery) {
        if let Some(c) = &question.conversation {
            self.outbound(c, Outbound::Record(question.clone(), delivery));
        }
    }

    /// Sends plain text to a conversation through its channel.
    pub fn send_text(&self, conversation: &Conversation, text: String) {
        self.outbound(conversation, Outbound::Text(conversation.clone(), text));
    }

    /// A question was persisted: render it and tell observers.
    fn announce(&self, question: &Question) {
        if let Some(c) = &question.conversation {
            self.outbound(c, Outbound::Card(question.clone()));
        }
        if question.expires_at.is_some() {
            self.inner.sweeper_wake.notify_one();
        }
        self.inner.metrics.asked();
        self.emit(Event::Asked(question.clone()));
    }

    fn take_waiter(&self, id: QuestionId) -> Option<oneshot::Sender<Outcome>> {
        lock(&self.inner.waiters).remove(&id)
    }

    fn add_waiter(&self, id: QuestionId, waiter: oneshot::Sender<Outcome>) {
        lock(&self.inner.waiters).insert(id, waiter);
    }

    /// Resolves a question on behalf of askgate itself (timeouts, cancellations).
    async fn close(&self, id: QuestionId, outcome: Outcome) -> Result<Claim, StoreError> {
        self.claim(Resolution {
            id,
            outcome,
            by: None,
            name: None,
            via: Surface::Gateway,
            at: self.now_ms(),
            grant: None,
        })
        .await
    }

    /// The claim-once write, and everything that follows a win: retraction, events, and
    /// resuming the run.
    async fn claim(&self, resolution: Resolution) -> Result<Claim, StoreError> {
        let claim = self.inner.store.resolve(&resolution).await?;
        if let Claim::Won(question) = &claim {
            self.after_resolution(question);
        }
        Ok(claim)
    }

    fn after_resolution(&self, question: &Question) {
        if let Some(c) = &question.conversation {
            self.outbound(c, Outbound::Retract(question.clone()));
        }
        self.emit(Event::Resolved(question.clone()));
        self.inner.metrics.resolved(question.status, question.answered_via);
        let outcome = question.outcome.clone().unwrap_or(Outcome::Cancelled { reason: "unknown".to_owned() });
        match question.mode {
            Mode::Blocking => {
                if let Some(waiter) = self.take_waiter(question.id) {
                    let _ = waiter.send(outcome);
                }
            }
            Mode::FollowUp => {
                let resolved = std::time::Instant::now();
                match lock(&self.inner.parked).remove(&question.id) {
                    Some((mut run, mut journal)) if journal.last().is_some_and(|q| q.id == question.id) => {
                        // The claim moved the stored run to `running`; this copy follows it.
                        if let Some(last) = journal.last_mut() {
                            *last = question.clone();
                        }
                        run.status = RunStatus::Running;
                        run.updated_at = self.now_ms();
                        let engine = self.clone();
                        let busy = Busy::new(self, run.conversation.as_ref());
                        self.inner.runs.spawn(async move {
                            engine.inner.metrics.resumed_after(resolved.elapsed());
                            engine.emit(Event::RunResumed(run.clone()));
                            engine.invoke(run, journal).await;
                            drop(busy);
                        });
                    }
                    _ => self.resume(question.run, question.conversation.as_ref(), Some(resolved)),
                }
            }
            Mode::External => {
                // The agent learns the outcome by polling; its run record ends here.
                let engine = self.clone();
                let (run_id, summary) = (question.run, question.outcome_line());
                self.inner.runs.spawn(async move {
                    let finished =
                        engine.inner.store.finish_run(run_id, RunStatus::Finished, &summary, engine.now_ms());
                    if let Err(e) = finished.await {
                        tracing::error!(run = %run_id, error = %e, "could not close an external run");
                    }
                });
            }
        }
    }

    /// Resolves `question` with a choice typed or tapped by `resolver`: checks who is asking,
    /// whether it is still open, and whether the choice fits; then claims it.
    ///
    /// # Errors
    /// Only when the store fails; every refusal is a [`Receipt`].
    pub async fn resolve(&self, question: &Question, choice: &str, resolver: &Resolver) -> Result<Receipt, StoreError> {
        // Who is asking comes first: a non-answerer learns nothing about what would fit.
        if !resolver.may_answer(question) {
            return Ok(Receipt::NotAuthorized { id: question.id });
        }
        let choice = match question.parse_choice(choice) {
            Ok(c) => Some(c),
            Err(_) if !question.is_pending() => None,
            Err(e) => return Ok(Receipt::InvalidChoice { id: question.id, hint: e.hint }),
        };
        self.claim_choice(question, choice, resolver).await
    }

    /// As [`Engine::resolve`] with an already parsed choice (`None`: the attempt is compared
    /// with nothing, for a stale tap whose payload no longer parses).
    ///
    /// # Errors
    /// Only when the store fails.
    pub async fn resolve_choice(
        &self,
        question: &Question,
        choice: Option<Choice>,
        resolver: &Resolver,
    ) -> Result<Receipt, StoreError> {
        if !resolver.may_answer(question) {
            return Ok(Receipt::NotAuthorized { id: question.id });
        }
        self.claim_choice(question, choice, resolver).await
    }

    /// The claim of an authorized resolver's choice.
    async fn claim_choice(
        &self,
        question: &Question,
        choice: Option<Choice>,
        resolver: &Resolver,
    ) -> Result<Receipt, StoreError> {
        let Some(choice) = choice else {
            return Ok(self.lost_receipt(question, None));
        };
        let outcome = choice.into_outcome();
        let grant = match (&outcome, &question.conversation) {
            (Outcome::Answered { value }, Some(c)) if question.kind == Kind::Approval && value == "always" => {
                Some(Grant {
                    id: uuid::Uuid::new_v4().to_string(),
                    conversation: c.clone(),
                    action: question.prompt.clone(),
                    granted_by: resolver.user.to_string(),
                    question: question.id,
                    created_at: self.now_ms(),
                })
            }
            _ => None,
        };
        let resolution = Resolution {
            id: question.id,
            outcome: outcome.clone(),
            by: Some(resolver.user.to_string()),
            name: resolver.name.clone(),
            via: resolver.via,
            at: self.now_ms(),
            grant,
        };
        Ok(match self.claim(resolution).await? {
            Claim::Won(q) => Receipt::Resolved { id: q.id, outcome },
            Claim::Lost(q) => self.lost_receipt(&q, Some(&outcome)),
            Claim::Missing => Receipt::Unknown { reason: format!("no question {}", question.id.short()) },
        })
    }

    fn lost_receipt(&self, current: &Question, attempt: Option<&Outcome>) -> Receipt {
        match (&current.outcome, current.status) {
            (_, Status::Expired) => Receipt::Expired { id: current.id },
            (Some(o), _) if Some(o) == attempt => {
                Receipt::AlreadyResolvedSame { id: current.id, by: current.answerer().map(str::to_owned) }
            }
            (Some(o), _) => Receipt::AlreadyResolvedConflict {
                id: current.id,
                outcome: o.clone(),
                by: current.answerer().map(str::to_owned),
            },
            (None, _) => Receipt::AlreadyResolvedConflict {
                id: current.id,
                outcome: Outcome::Cancelled { reason: "unknown".to_owned() },
                by: None,
            },
        }
    }

    /// Asks a question on behalf of an external agent (the HTTP API): persisted and rendered in
    /// `conversation` like any other. Who may answer is the users the ask names, else the
    /// channel's `allowed_users` when that names people (see [`Engine::api_answerers`]). The
    /// agent learns the outcome with [`Engine::wait_outcome`].
    ///
    /// # Errors
    /// A malformed ask, a conversation no channel serves, no answerers; shutdown; the store.
    pub async fn ask_external(
        &self,
        conversation: Conversation,
        mut ask: Ask,
        asker: UserRef,
    ) -> Result<Question, ExternalAskError> {
        if self.inner.stop.is_cancelled() {
            return Err(ExternalAskError::ShuttingDown);
        }
        self.check_served(&conversation)?;
        let answerers = match ask.answerers.take() {
            Some(Answerers::Users { users }) => self.api_answerers(&conversation, Some(users))?,
            Some(other) => other,
            None => self.api_answerers(&conversation, None)?,
        };
        let ask = ask.answerers(answerers).validate()?;
        let now = self.now_ms();
        let run = Run {
            id: RunId::new(),
            function: "api".to_owned(),
            conversation: Some(conversation),
            initiator: asker,
            answerers: None,
            input: String::new(),
            mode: Mode::External,
            status: RunStatus::Waiting,
            says: 0,
            result: None,
            created_at: now,
            updated_at: now,
        };
        let expires_at = self.deadline(ask.timeout, now);
        let question = ask.pending(&run, 0, Answerers::Conversation, now, expires_at);
        self.inner.store.ask(&run, &question).await?;
        self.emit(Event::RunStarted(run));
        self.announce(&question);
        Ok(question)
    }

    /// The question as it stands once it is resolved, or after `wait` if it is still pending.
    /// `None` when there is no such question.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn wait_outcome(&self, id: QuestionId, wait: Duration) -> Result<Option<Question>, StoreError> {
        // Subscribe before looking, so that a resolution between the two is not missed.
        let mut events = self.subscribe();
        let Some(question) = self.inner.store.question(id).await? else { return Ok(None) };
        if !question.is_pending() || wait.is_zero() {
            return Ok(Some(question));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(Event::Resolved(q))) if q.id == id => return Ok(Some(q)),
                Ok(Ok(_)) => {}
                // Fell behind or closed: look at the store instead.
                Ok(Err(_)) | Err(_) => return self.inner.store.question(id).await,
            }
        }
    }

    /// Cancels the waiting runs of a conversation that `user` may answer for: their pending
    /// questions end as `cancelled`, the runs see it and end. Returns how many were cancelled.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn cancel_conversation(&self, conversation: &Conversation, user: &UserRef) -> Result<usize, StoreError> {
        let mut cancelled = 0;
        for question in self.inner.store.pending(Some(conversation)).await? {
            if !question.answerers.admits(user) {
                continue;
            }
            let outcome = Outcome::Cancelled { reason: format!("cancelled by {user}") };
            let resolution = Resolution {
                id: question.id,
                outcome,
                by: Some(user.to_string()),
                name: None,
                via: Surface::Gateway,
                at: self.now_ms(),
                grant: None,
            };
            if matches!(self.claim(resolution).await?, Claim::Won(..)) {
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }

    /// Expires every question whose deadline has passed, applying its default.
    async fn expire_due(&self) -> Result<(), StoreError> {
        loop {
            let due = self.inner.store.due(self.now_ms(), 256).await?;
            if due.is_empty() {
                return Ok(());
            }
            for question in due {
                self.close(question.id, Outcome::Expired { value: question.default }).await?;
            }
        }
    }
}

/// How many lanes a channel's deliveries are spread over.
const LANES: usize = 16;

/// One lane: deliveries in the order they were queued.
async fn lane(store: Arc<dyn Store>, channel: Arc<dyn Channel>, mut queue: mpsc::UnboundedReceiver<Outbound>) {
    // Cards shown lately, so that a retraction rarely reads them back from the store.
    let mut shown: Recent<Vec<Delivery>> = Recent::new(512);
    // Questions resolved lately: a card whose question was resolved before it went out (a
    // resolution racing the announcement) is not shown at all, and a message recorded late is
    // retracted at once.
    let mut closed: Recent<Question> = Recent::new(128);
    while let Some(message) = queue.recv().await {
        match message {
            Outbound::Card(question) => {
                if closed.remove(&question.id).is_some() {
                    continue;
                }
                let cards = match channel.show_question(&question).await {
                    Ok(cards) => cards,
                    Err(e) => {
                        tracing::warn!(question = %question.id, channel = channel.name(), error = %e, "could not show a question");
                        continue;
                    }
                };
                for card in &cards {
                    if let Err(e) = store.add_delivery(card).await {
                        tracing::error!(question = %question.id, error = %e, "could not record a card");
                    }
                }
                shown.insert(question.id, cards);
            }
            Outbound::Retract(question) => {
                let cards = match shown.remove(&question.id) {
                    Some(cards) => cards,
                    None => match store.deliveries(question.id).await {
                        Ok(cards) => cards.into_iter().filter(|d| d.surface == channel.name()).collect(),
                        Err(e) => {
                            tracing::error!(question = %question.id, error = %e, "could not load cards to retract");
                            continue;
                        }
                    },
                };
                if cards.is_empty() {
                    closed.insert(question.id, question.clone());
                }
                retract(&*channel, &question, cards).await;
            }
            Outbound::Text(conversation, text) => {
                if let Err(e) = channel.send_text(&conversation, &text).await {
                    tracing::warn!(%conversation, error = %e, "could not send a message");
                }
            }
            Outbound::Record(question, delivery) => {
                if let Err(e) = store.add_delivery(&delivery).await {
                    tracing::error!(question = %question.id, error = %e, "could not record a message");
                }
                if let Some(resolved) = closed.get(&question.id) {
                    retract(&*channel, resolved, vec![delivery]).await;
                } else if let Some(cards) = shown.get_mut(&question.id) {
                    cards.push(delivery);
                }
                // Otherwise the cards are not cached here: a retraction reads them all back.
            }
        }
    }
}

/// A map that forgets its oldest entries beyond a fixed size.
struct Recent<V> {
    order: VecDeque<QuestionId>,
    entries: HashMap<QuestionId, V>,
    cap: usize,
}

impl<V> Recent<V> {
    fn new(cap: usize) -> Self {
        Self { order: VecDeque::with_capacity(cap), entries: HashMap::with_capacity(cap), cap }
    }

    fn insert(&mut self, id: QuestionId, value: V) {
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
    fn remove(&mut self, id: &QuestionId) -> Option<V> {
        self.entries.remove(id)
    }

    fn get(&self, id: &QuestionId) -> Option<&V> {
        self.entries.get(id)
    }

    fn get_mut(&mut self, id: &QuestionId) -> Option<&mut V> {
        self.entries.get_mut(id)
    }
}

async fn retract(channel: &dyn Channel, question: &Question, cards: Vec<Delivery>) {
    if let Err(e) = channel.retract(question, &cards).await {
        tracing::warn!(question = %question.id, channel = channel.name(), error = %e, "could not retract a card");
    }
}

/// Locks a mutex that only guards plain maps: a panic while holding it cannot leave the map
/// half-updated, so a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
