//! Questions from outside: an agent asks through the API and learns the outcome by polling.
//! Each such question belongs to a run of mode `external`, which is never replayed and ends
//! when its question is resolved.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::claim::Claimed;
use super::event::Bus;
use super::nudge::Nudges;
use super::waiters::Waiters;
use super::{CallbackSpec, Callbacks, Claims, Delivery, Event, NotServed, Policies};
use crate::clock::Clock;
use crate::engine::access::AnswerersError;

use crate::question::{Answerers, Ask, Conversation, Mode, Outcome, Question, QuestionId, RunId, UserRef};
use crate::run::{Run, RunStatus};
use crate::store::{Store, StoreError, StoreExt};

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

/// Asks, the service agents ask through: over the store, the clock and the default timeout,
/// the policies, delivery, the claims, nudges, callbacks, the bus, the waiters, and the stop
/// (no new asks once it fires).
#[derive(Clone)]
pub struct Asks(Arc<AsksParts>);

/// The parts of [`Asks`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct AsksParts {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    /// How long an ask that names no timeout waits.
    pub(super) default_timeout: Duration,
    pub(super) policies: Policies,
    pub(super) delivery: Delivery,
    pub(super) claims: Claims,
    pub(super) nudges: Nudges,
    pub(super) callbacks: Callbacks,
    pub(super) bus: Bus,
    pub(super) waiters: Arc<Waiters>,
    /// Fires when shutdown begins: asks are refused, long waits end.
    pub(super) stop: CancellationToken,
}

super::parts!(Asks, AsksParts);

impl Asks {
    /// Asks a question on behalf of an external agent (the HTTP API): persisted and rendered in
    /// `conversation` like any other. Who may answer is the users the ask names, else the
    /// channel's `allowed_users` when that names people (see [`Policies::api_answerers`]). The
    /// agent learns the outcome with [`Asks::wait_outcome`].
    ///
    /// # Errors
    /// A malformed ask, a conversation no channel serves, no answerers; shutdown; the store.
    pub async fn ask_external(
        &self,
        conversation: Conversation,
        ask: Ask,
        asker: UserRef,
    ) -> Result<Question, ExternalAskError> {
        self.ask_external_with(conversation, ask, asker, None).await
    }

    /// As [`Asks::ask_external`], with a callback that reports the outcome once it is known
    /// (written before the question, in the store's outbox).
    ///
    /// # Errors
    /// As [`Asks::ask_external`].
    pub async fn ask_external_with(
        &self,
        conversation: Conversation,
        ask: Ask,
        asker: UserRef,
        callback: Option<CallbackSpec>,
    ) -> Result<Question, ExternalAskError> {
        let function = asker.channel().to_owned();
        self.ask_for(conversation, ask, asker, function, callback).await
    }

    /// As [`Asks::ask_external`], for an agent working in `project` (a Claude Code hook's
    /// `cwd`): an allow-always lets through later identical approvals of that agent in that
    /// project only. Without a project, as [`Asks::ask_external`].
    ///
    /// # Errors
    /// As [`Asks::ask_external`].
    pub async fn ask_in_project(
        &self,
        conversation: Conversation,
        ask: Ask,
        asker: UserRef,
        project: Option<&str>,
    ) -> Result<Question, ExternalAskError> {
        let function = match project {
            Some(project) => format!("{}{project}", crate::run::PROJECT_PREFIX),
            None => asker.channel().to_owned(),
        };
        self.ask_for(conversation, ask, asker, function, None).await
    }

    /// As [`Asks::ask_external`], for a call of a gated MCP upstream's tool: its run's function
    /// is `gate:<upstream>`, and an allow-always lets later calls of that upstream through (never
    /// the agent's own `request_approval`s, nor another upstream's calls).
    ///
    /// # Errors
    /// As [`Asks::ask_external`].
    pub async fn ask_gated(
        &self,
        conversation: Conversation,
        ask: Ask,
        asker: UserRef,
        upstream: &str,
    ) -> Result<Question, ExternalAskError> {
        self.ask_for(conversation, ask, asker, format!("{}{upstream}", crate::run::GATE_PREFIX), None).await
    }

    /// Asks for an agent whose run's function is `function` (the agent's channel, its
    /// project, or the gated upstream): refused once askgate begins to stop.
    async fn ask_for(
        &self,
        conversation: Conversation,
        mut ask: Ask,
        asker: UserRef,
        function: String,
        callback: Option<CallbackSpec>,
    ) -> Result<Question, ExternalAskError> {
        if self.stop.is_cancelled() {
            return Err(ExternalAskError::ShuttingDown);
        }
        self.delivery.check_served(&conversation)?;
        let answerers = match ask.answerers.take() {
            Some(Answerers::Users { users }) => self.policies.api_answerers(&conversation, Some(users))?,
            Some(other) => other,
            None => self.policies.api_answerers(&conversation, None)?,
        };
        let ask = ask.answerers(answerers).validate()?;
        let now = self.clock.now_ms();
        let run = Run {
            id: RunId::new(),
            function,
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
            update: None,
        };
        let expires_at = super::deadline(self.default_timeout, ask.timeout, now);
        let mut origin = run.origin(0);
        origin.presentation = self.policies.presentation_of(run.conversation.as_ref(), None);
        let mut question = ask.pending(origin, Answerers::Conversation, now, expires_at)?;
        self.nudges.schedule_nudges(&mut question)?;
        if let Some(callback) = callback {
            self.callbacks.add_callback(callback, run.id, Some(question.id)).await?;
        }
        if let Some(granted) = self.policies.granted(&question, &run).await? {
            // As for a function's approval: a standing grant answers it, nobody is asked.
            question = granted;
            let mut run = run;
            run.status = RunStatus::Finished;
            run.result = Some(question.outcome_line_in(crate::question::Locale::En));
            let question = Arc::new(question);
            self.store.ask(&run, &question).await?;
            self.bus.emit(Event::RunStarted(Arc::new(run)));
            return Ok(Arc::unwrap_or_clone(question));
        }
        let question = Arc::new(question);
        let place = self.store.ask(&run, &question).await?;
        self.bus.emit(Event::RunStarted(Arc::new(run)));
        self.delivery.announce(question.clone(), place);
        Ok(Arc::unwrap_or_clone(question))
    }

    /// Cancels an agent's pending question (the agent gave up on it, or is gone): its cards
    /// are retracted and its run ends. `false` when it was not pending (or is not an agent's).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn cancel_external(&self, id: QuestionId, reason: &str) -> Result<bool, StoreError> {
        let Some(question) = self.store.question(id).await? else { return Ok(false) };
        if !question.is_pending() || question.mode != Mode::External {
            return Ok(false);
        }
        let outcome = Outcome::Cancelled { reason: reason.to_owned() };
        Ok(matches!(self.claims.close(&question, outcome).await?, Claimed::Won(_)))
    }

    /// Sends a message to a conversation for an agent; nothing is awaited or kept.
    ///
    /// # Errors
    /// When no enabled channel serves the conversation.
    pub fn notify_conversation(&self, conversation: &Conversation, text: String) -> Result<(), NotServed> {
        self.delivery.check_served(conversation)?;
        self.delivery.send_text(conversation, text);
        Ok(())
    }

    /// The question as it stands once it is resolved, or after `wait` if it is still pending,
    /// or at once when askgate begins to stop. `None` when there is no such question.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn wait_outcome(&self, id: QuestionId, wait: Duration) -> Result<Option<Question>, StoreError> {
        // Watch before looking, so that a resolution between the two is not missed.
        let watch = self.watch_outcome(id);
        let Some(question) = self.store.question(id).await? else { return Ok(None) };
        watch.wait(question, wait).await.map(Some)
    }

    /// Watches `id`'s resolution from now on: a caller that reads the question after this
    /// (to check it may see it) waits with what it read, without reading it again.
    pub fn watch_outcome(&self, id: QuestionId) -> OutcomeWatch<'_> {
        OutcomeWatch { watch: self.waiters.watch(id), asks: self }
    }

    /// The question once it is resolved, however long that takes: still pending only when
    /// askgate begins to stop. `None` when there is no such question.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn wait_resolved(&self, id: QuestionId) -> Result<Option<Question>, StoreError> {
        // A question that never expires may wait longer than one sleep.
        const LONG: Duration = Duration::from_secs(24 * 60 * 60);
        loop {
            match self.wait_outcome(id, LONG).await? {
                Some(question) if question.is_pending() && !self.stop.is_cancelled() => {}
                other => return Ok(other),
            }
        }
    }
}

/// A question's resolution, watched from the moment [`Asks::watch_outcome`] made it; only that
/// question's resolution wakes it.
pub struct OutcomeWatch<'a> {
    watch: super::waiters::Watch<'a>,
    asks: &'a Asks,
}

impl OutcomeWatch<'_> {
    /// `seen` (the question as read after the watch began) once it is resolved, or after
    /// `wait` if it is still pending, or at once when askgate begins to stop.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn wait(self, seen: Question, wait: Duration) -> Result<Question, StoreError> {
        if !seen.is_pending() || wait.is_zero() {
            return Ok(seen);
        }
        Ok(self.resolution(wait).await?.unwrap_or(seen))
    }

    /// The question once it is resolved, for a caller that saw it pending after the watch
    /// began; `None` after `wait`, or at once when askgate begins to stop. What waits is the
    /// watch alone (no question): a long-poll holds it for up to a minute, so thousands of
    /// them cost what this future is.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn resolution(mut self, wait: Duration) -> Result<Option<Question>, StoreError> {
        let id = self.watch.id();
        // From here a resolution reaches the watch: the line tells that a caller is held.
        tracing::debug!(question = %id, "a caller waits for the question's outcome");
        let asks = self.asks;
        tokio::select! {
            resolved = &mut self.watch.resolved => match resolved {
                Ok(resolved) => Ok(Some(Question::clone(&resolved))),
                // Not told (cannot happen while the watch is kept): the store knows.
                Err(_) => Ok(Box::pin(asks.store.question(id)).await?),
            },
            () = tokio::time::sleep(wait) => Ok(None),
            () = asks.stop.cancelled() => Ok(None),
        }
    }
}
