//! The runner: starts runs, replays follow-up runs from their journal, runs each turn of a
//! function, and records where the run stands when the turn ends.
//!
//! A turn is one invocation of the function. Follow-up runs end their turn on a new question;
//! the claim that resolves it marks the run `running` again and hands it over (see `turns`),
//! and the runner's resume loop replays it. Every
//! turn runs on the engine's task tracker, counted as executing in its conversation, and can be
//! dropped when shutdown's grace is over (the run is then replayed at the next start).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::event::Bus;
use super::metrics::Metrics;
use super::nudge::Nudges;
use super::turns::{Busy, Resume, Turns, Waiting};
use super::waiters::Waiters;
use super::{Callbacks, Claims, Delivery, Event, Functions, NotServed, Policies, Refusal, Tasks};
use crate::clock::Clock;
use crate::engine::access::AnswerersPolicy;
use crate::engine::context::{AskError, Context};
use crate::engine::function::FunctionError;
use crate::question::{Answerers, Conversation, Mode, Outcome, Question, RunId, Status, Timeout, UserRef};
use crate::run::{Run, RunStatus};
use crate::store::{Store, StoreError, StoreExt};
use crate::wording::replies;

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
    /// The inbound update that starts it, recorded as applied with the run's first write.
    pub update: Option<String>,
}

impl RunRequest {
    /// A run of `function` started by `user` in `conversation`, with no input.
    pub fn new(function: impl Into<String>, conversation: Option<Conversation>, user: UserRef) -> Self {
        Self { function: function.into(), conversation, user, input: String::new(), answerers: None, update: None }
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
    /// The run could not be stored, so it was not started.
    #[error("the run could not be stored")]
    Store(#[from] StoreError),
    /// The run's task ended without a result (it was dropped at shutdown).
    #[error("the run ended abnormally: {0}")]
    Aborted(String),
}

/// The runner, the service that runs functions: it starts runs, runs each turn on its own
/// tracker, replays follow-up runs handed over by the claim, and records how each turn ends.
/// It is over the store, the clock, the functions, the default timeout, the services a turn
/// asks through (policies, callbacks, delivery, claims, nudges), the turns, the waiters, the
/// bus, the counters, the engine's task tracker and stop, and its own tracker of turns and the
/// token that drops them.
#[derive(Clone)]
pub struct Runner(Arc<RunnerParts>);

/// The parts of [`Runner`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct RunnerParts {
    // A function's context (`context`) asks through these too.
    pub(super) store: Arc<dyn Store>,
    clock: Clock,
    functions: Arc<Functions>,
    /// How long an ask waits when it names no timeout.
    default_timeout: Duration,
    pub(super) policies: Policies,
    callbacks: Callbacks,
    pub(super) delivery: Delivery,
    pub(super) claims: Claims,
    pub(super) nudges: Nudges,
    turns: Arc<Turns>,
    pub(super) waiters: Arc<Waiters>,
    bus: Bus,
    metrics: Arc<Metrics>,
    /// Every long-lived task of this askgate; the turns run on it too.
    tasks: Tasks,
    /// Of those, runs' turns and the engine's own loops (sweeper, pruner, adoption): waited
    /// for first at shutdown.
    runs: TaskTracker,
    /// Fires when shutdown begins: no new runs.
    pub(super) stop: CancellationToken,
    /// Fires when shutdown's grace for running turns is over: they are dropped.
    abort: CancellationToken,
}

super::parts!(Runner, RunnerParts);

impl Runner {
    /// A runner over the engine's parts and lower services, with a tracker of turns and a
    /// token that drops them of its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        store: Arc<dyn Store>,
        clock: Clock,
        functions: Arc<Functions>,
        settings: &super::Settings,
        policies: Policies,
        callbacks: Callbacks,
        delivery: Delivery,
        claims: Claims,
        nudges: Nudges,
        turns: Arc<Turns>,
        waiters: Arc<Waiters>,
        bus: Bus,
        metrics: Arc<Metrics>,
        tasks: Tasks,
        stop: CancellationToken,
    ) -> Self {
        Self(Arc::new(RunnerParts {
            store,
            clock,
            functions,
            default_timeout: settings.default_timeout,
            policies,
            callbacks,
            delivery,
            claims,
            nudges,
            turns,
            waiters,
            bus,
            metrics,
            tasks,
            runs: TaskTracker::new(),
            stop,
            abort: CancellationToken::new(),
        }))
    }

    /// Takes over what an askgate that is gone left: its blocking questions are cancelled and
    /// its blocking runs end `cancelled` ([`super::INSTANCE_LOST`]: nobody waits for them any more),
    /// its follow-up runs that were mid-turn are replayed.
    pub(super) async fn adopt_orphans(&self) -> Result<(), StoreError> {
        let orphans = self.store.orphans().await?;
        for question in orphans.blocking {
            self.claims.close(&question, Outcome::Cancelled { reason: super::INSTANCE_LOST.to_owned() }).await?;
        }
        for mut run in orphans.runs {
            match run.mode {
                Mode::FollowUp => {
                    tracing::info!(run = %run.id, function = %run.function, "resuming a run interrupted mid-turn");
                    self.turns.resume(run.id, run.conversation.as_ref(), None, None);
                }
                // As a stop ends one (`cancelled(shutdown)`), with what happened instead.
                Mode::Blocking => {
                    tracing::info!(run = %run.id, function = %run.function, "cancelling a blocking run whose askgate is gone");
                    run.status = RunStatus::Cancelled;
                    run.result = Some(super::INSTANCE_LOST.to_owned());
                    run.updated_at = self.now_ms();
                    self.store.save_run(&run).await?;
                    if let Some(c) = &run.conversation {
                        let l = self.policies.presentation_for(&run).locale;
                        self.delivery.send_text(
                            c,
                            crate::wording::replies::run_cancelled(&run.function, super::INSTANCE_LOST, l),
                        );
                    }
                }
                Mode::External => {}
            }
        }
        Ok(())
    }

    /// Now, in unix milliseconds, by the engine's clock.
    pub(super) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// When an ask made at `now` with `timeout` expires.
    pub(super) fn deadline(&self, timeout: Timeout, now: i64) -> Option<i64> {
        super::deadline(self.default_timeout, timeout, now)
    }

    /// Spawns a run's turn or one of the engine's own loops: tracked, and counted among the
    /// runs that shutdown waits for first.
    #[track_caller]
    pub(super) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(self.runs.track_future(task))
    }

    /// Lets the turns in flight finish within `grace`, then drops those still running (a
    /// follow-up run is replayed at the next start). Resumes handed over until now are
    /// replayed in the grace; later ones at the next start.
    pub(super) async fn finish_turns(&self, grace: Duration) {
        self.runs.close();
        self.turns.close();
        if tokio::time::timeout(grace, self.runs.wait()).await.is_err() {
            tracing::warn!("turns still running after {}s are stopped; they resume at the next start", grace.as_secs());
            self.abort.cancel();
            self.runs.wait().await;
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
        self.spawn_turn(run, Vec::new());
        Ok(id)
    }

    /// As [`Runner::start_run`], but the run is stored before its first turn starts, so that
    /// an id handed out (by the API's 202) is always found, also after a crash; with a
    /// callback that reports the run once it ends (written before the run, in the outbox).
    ///
    /// # Errors
    /// As [`Runner::start_run`], and the store's failure to write the run.
    pub async fn start_stored_run(
        &self,
        request: RunRequest,
        mode: Mode,
        callback: Option<super::CallbackSpec>,
    ) -> Result<RunId, StartError> {
        let run = self.new_run(request, mode)?;
        if let Some(callback) = callback {
            self.callbacks.add_callback(callback, run.id, None).await?;
        }
        self.store.save_run(&run).await?;
        let id = run.id;
        self.spawn_turn(run, Vec::new());
        Ok(id)
    }

    /// Runs a function to its end in blocking mode and returns the finished run record.
    ///
    /// # Errors
    /// As [`Runner::start_run`].
    pub async fn run_to_end(&self, request: RunRequest) -> Result<Run, StartError> {
        let run = self.new_run(request, Mode::Blocking)?;
        match self.spawn_turn(run, Vec::new()).await {
            Ok(Some(run)) => Ok(run),
            Ok(None) => Err(StartError::Aborted("interrupted by a shutdown of askgate".to_owned())),
            Err(e) => Err(StartError::Aborted(e.to_string())),
        }
    }

    /// Waits (at most `limit`) until no turn of a run is executing in `conversation`: every
    /// run there has asked, finished, or waits on a person. The console uses it so that piped
    /// input is read as a person would type it, after the question it answers was asked.
    pub async fn settled(&self, conversation: &Conversation, limit: Duration) {
        self.turns.settled(conversation, limit).await;
    }

    /// Marks the calling turn as waiting on a person until the guard is dropped.
    pub(crate) fn waiting_on_a_person(&self, conversation: Option<&Conversation>) -> Waiting {
        self.turns.waiting(conversation)
    }

    /// Checks that the run may start.
    fn new_run(&self, request: RunRequest, mode: Mode) -> Result<Run, StartError> {
        let RunRequest { function, conversation, user, input, answerers, update } = request;
        if self.stop.is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        if self.functions.get(&function).is_none() {
            return Err(StartError::UnknownFunction(function));
        }
        if let Some(c) = &conversation {
            self.delivery.check_served(c)?;
        }
        self.policies.may_start(&function, conversation.as_ref(), &user)?;
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
            update,
        };
        // A run started from a chat is first written when it first asks or ends: one that does
        // neither before a crash was mid-flight, and nothing about it was promised to anyone.
        self.bus.emit(Event::RunStarted(Arc::new(run.clone())));
        Ok(run)
    }

    /// Who answers the questions of `run` when an ask names nobody: the list it was started
    /// with, else its channel's rule.
    pub(super) fn default_answerers(&self, run: &Run) -> Answerers {
        if let Some(answerers) = &run.answerers {
            return answerers.clone();
        }
        let policy = run.conversation.as_ref().map(|c| self.policies.policy(c)).unwrap_or_default();
        match policy.answerers {
            AnswerersPolicy::Initiator => Answerers::Initiator { user: run.initiator.clone() },
            AnswerersPolicy::Conversation => Answerers::Conversation,
        }
    }

    /// Replays a follow-up run handed over by the claim (or by the start, for one a stop
    /// interrupted): with the run and journal parked here, at once; else read from the store
    /// first, and only while the run is `running`.
    /// Takes the resumes the claim hands the turns part over from now on (and those it handed
    /// over before), replaying each at once. The turns part holds the runner weakly: the
    /// runner holds it.
    pub(super) fn take_resumes(&self) {
        let runner = Arc::downgrade(&self.0);
        self.turns.take_resumes(Arc::new(move |resume| {
            if let Some(parts) = runner.upgrade() {
                Runner(parts).resume(resume);
            }
        }));
    }

    fn resume(&self, Resume { run, resolved, parked, busy }: Resume) {
        if let Some((run, journal)) = parked {
            return self.replay(run, journal, resolved, busy);
        }
        let runner = self.clone();
        self.spawn(async move {
            match runner.store.run_with_journal(run).await {
                Ok(Some(resume)) if resume.run.status == RunStatus::Running => {
                    let journal = resume.journal.into_iter().map(Arc::new).collect();
                    runner.replay(resume.run, journal, resolved, busy);
                }
                Ok(Some(resume)) => {
                    tracing::debug!(run = %resume.run.id, status = %resume.run.status, "not resuming");
                }
                Ok(None) => tracing::warn!(run = %run, "a resolved question's run is missing"),
                Err(e) => tracing::error!(run = %run, error = %e, "could not load a run to resume it"),
            }
        });
    }

    fn replay(&self, run: Run, journal: Vec<Arc<Question>>, resolved: Option<Instant>, busy: Busy) {
        if let Some(at) = resolved {
            self.metrics.resumed_after(at.elapsed());
        }
        self.bus.emit(Event::RunResumed(Arc::new(run.clone())));
        self.spawn_turn_counted(run, journal, busy);
    }

    /// Runs one turn of `run` on the runner's tracker; the run as the turn left it, or none
    /// when shutdown dropped the turn.
    fn spawn_turn(&self, run: Run, journal: Vec<Arc<Question>>) -> JoinHandle<Option<Run>> {
        let busy = self.turns.busy(run.conversation.as_ref());
        self.spawn_turn_counted(run, journal, busy)
    }

    /// Runs one turn, counted as executing in its conversation while `busy` lives. A turn
    /// still running when shutdown's grace is over is dropped — a program it runs is killed —
    /// and its run is kept `running`, so the next start replays it.
    fn spawn_turn_counted(&self, run: Run, journal: Vec<Arc<Question>>, busy: Busy) -> JoinHandle<Option<Run>> {
        let runner = self.clone();
        self.spawn(async move {
            let _busy = busy;
            let (id, mode) = (run.id, run.mode);
            tokio::select! {
                run = runner.invoke(run, journal) => Some(run),
                () = runner.abort.cancelled() => {
                    runner.interrupted(id, mode).await;
                    None
                }
            }
        })
    }

    /// Records a run whose turn was dropped at shutdown: a blocking one has lost its caller and
    /// fails. A follow-up run is left as stored: `running` (its answer came) is replayed at the
    /// next start, `waiting` (it asked in this turn) waits for its answer. (A run started from
    /// a chat that never asked or ended was never stored; like a crash, that loses nothing
    /// promised.)
    async fn interrupted(&self, id: RunId, mode: Mode) {
        let result = match mode {
            Mode::FollowUp => {
                tracing::warn!(run = %id, "a turn was still running at shutdown; the run goes on at the next start");
                return;
            }
            Mode::Blocking | Mode::External => "interrupted by a shutdown of askgate",
        };
        if let Err(e) = self.store.finish_run(id, RunStatus::Failed, result, self.now_ms()).await {
            tracing::error!(run = %id, error = %e, "could not record a run interrupted by shutdown");
        }
    }

    /// One turn of a run: replay the journal, run the function until it returns or asks
    /// something new, and record where it stands.
    async fn invoke(&self, run: Run, journal: Vec<Arc<Question>>) -> Run {
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
        self.bus.emit(Event::Run(Arc::new(final_run.clone())));
        final_run
    }

    async fn invoke_inner(&self, run: Run, journal: Vec<Arc<Question>>) -> Result<Run, (Run, StoreError)> {
        let Some(entry) = self.functions.get(&run.function).cloned() else {
            let message = replies::function_gone(&run.function);
            self.notify(&run, replies::warning(&message));
            return self.end_run(run, !journal.is_empty(), RunStatus::Failed, message).await;
        };
        let input = run.input.clone();
        let mut ctx = Context::new(self.clone(), run, journal);
        // A panic fails this run, not askgate: the function's future is dropped where it stood.
        let result = AssertUnwindSafe(entry.function.call(&mut ctx, &input)).catch_unwind().await;
        let (run, journal) = ctx.into_parts();
        let asked = !journal.is_empty();
        let result = match result {
            Ok(result) => result,
            Err(panic) => {
                let message = format!("the function panicked: {}", panic_message(panic.as_ref()));
                tracing::warn!(run = %run.id, function = %run.function, error = %message, "run failed");
                self.notify(
                    &run,
                    replies::run_failed(&run.function, &message, self.policies.presentation_for(&run).locale),
                );
                // The run ends first: cancelling its question then resumes nothing.
                let ended = self.end_run(run, !journal.is_empty(), RunStatus::Failed, message.clone()).await;
                self.cancel_left_pending(&journal, &message).await;
                return ended;
            }
        };
        match result {
            Ok(reply) => {
                if let Some(c) = &run.conversation
                    && !reply.trim().is_empty()
                {
                    self.delivery.send_text(c, reply.clone());
                }
                self.end_run(run, asked, RunStatus::Finished, reply).await
            }
            Err(FunctionError::Ask(AskError::Pending { question })) => {
                if run.mode == Mode::FollowUp {
                    self.turns.park(question, run.clone(), journal);
                }
                Ok(run)
            }
            Err(FunctionError::Ask(AskError::Cancelled { reason })) => {
                self.notify(
                    &run,
                    replies::run_cancelled(&run.function, &reason, self.policies.presentation_for(&run).locale),
                );
                self.end_run(run, asked, RunStatus::Cancelled, reason).await
            }
            Err(FunctionError::Hidden { public, detail }) => {
                tracing::warn!(run = %run.id, function = %run.function, error = %detail, "run failed");
                self.notify(
                    &run,
                    replies::run_failed(&run.function, &public, self.policies.presentation_for(&run).locale),
                );
                self.end_run(run, asked, RunStatus::Failed, detail).await
            }
            Err(e) => {
                let message = format!("{e:#}");
                tracing::warn!(run = %run.id, function = %run.function, error = %message, "run failed");
                self.notify(
                    &run,
                    replies::run_failed(&run.function, &message, self.policies.presentation_for(&run).locale),
                );
                self.end_run(run, asked, RunStatus::Failed, message).await
            }
        }
    }

    /// Closes the questions a failed turn left pending, so nobody answers into a dead run.
    async fn cancel_left_pending(&self, journal: &[Arc<Question>], reason: &str) {
        for question in journal.iter().filter(|q| q.status == Status::Pending) {
            let outcome = Outcome::Cancelled { reason: reason.to_owned() };
            if let Err(e) = self.claims.close(question, outcome).await {
                tracing::error!(question = %question.id, error = %e, "could not cancel a question of a failed run");
            }
        }
    }

    /// Records how `run` ended. A run that asked is stored already (its first ask wrote it), so
    /// only its end is written; one that never asked is written whole.
    async fn end_run(
        &self,
        mut run: Run,
        asked: bool,
        status: RunStatus,
        result: String,
    ) -> Result<Run, (Run, StoreError)> {
        run.status = status;
        run.updated_at = self.now_ms();
        let store = &self.store;
        let ended = match asked {
            true => store.finish_run(run.id, status, &result, run.updated_at).await,
            false => Ok(false),
        };
        run.result = Some(result);
        let saved = match ended {
            Ok(true) => Ok(()),
            Ok(false) => store.save_run(&run).await,
            Err(e) => Err(e),
        };
        match saved {
            Ok(()) => Ok(run),
            Err(e) => Err((run, e)),
        }
    }

    fn notify(&self, run: &Run, text: String) {
        if let Some(c) = &run.conversation {
            self.delivery.send_text(c, text);
        }
    }
}

/// The text of a panic's payload (`panic!("…")` carries a `&str` or a `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
