//! Questions from outside: an agent asks through the API and learns the outcome by polling.
//! Each such question belongs to a run of mode `external`, which is never replayed and ends
//! when its question is resolved.

use std::sync::Arc;

use super::{CallbackSpec, Engine, Event, NotServed};
use crate::engine::access::AnswerersError;

use crate::question::{Answerers, Ask, Conversation, Mode, Outcome, Question, QuestionId, RunId, UserRef};
use crate::run::{Run, RunStatus};
use crate::store::{StoreError, StoreExt};

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

impl Engine {
    /// Asks a question on behalf of an external agent (the HTTP API): persisted and rendered in
    /// `conversation` like any other. Who may answer is the users the ask names, else the
    /// channel's `allowed_users` when that names people (see [`Policies::api_answerers`](super::Policies::api_answerers)). The
    /// agent learns the outcome with [`Engine::wait_outcome`].
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

    /// As [`Engine::ask_external`], with a callback that reports the outcome once it is known
    /// (written before the question, in the store's outbox).
    ///
    /// # Errors
    /// As [`Engine::ask_external`].
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

    /// As [`Engine::ask_external`], for an agent working in `project` (a Claude Code hook's
    /// `cwd`): an allow-always lets through later identical approvals of that agent in that
    /// project only. Without a project, as [`Engine::ask_external`].
    ///
    /// # Errors
    /// As [`Engine::ask_external`].
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

    /// As [`Engine::ask_external`], for a call of a gated MCP upstream's tool: its run's function
    /// is `gate:<upstream>`, and an allow-always lets later calls of that upstream through (never
    /// the agent's own `request_approval`s, nor another upstream's calls).
    ///
    /// # Errors
    /// As [`Engine::ask_external`].
    pub async fn ask_gated(
        &self,
        conversation: Conversation,
        ask: Ask,
        asker: UserRef,
        upstream: &str,
    ) -> Result<Question, ExternalAskError> {
        self.ask_for(conversation, ask, asker, format!("{}{upstream}", crate::run::GATE_PREFIX), None).await
    }

    async fn ask_for(
        &self,
        conversation: Conversation,
        mut ask: Ask,
        asker: UserRef,
        function: String,
        callback: Option<CallbackSpec>,
    ) -> Result<Question, ExternalAskError> {
        if self.inner.stop.is_cancelled() {
            return Err(ExternalAskError::ShuttingDown);
        }
        self.delivery().check_served(&conversation)?;
        let answerers = match ask.answerers.take() {
            Some(Answerers::Users { users }) => self.policies().api_answerers(&conversation, Some(users))?,
            Some(other) => other,
            None => self.policies().api_answerers(&conversation, None)?,
        };
        let ask = ask.answerers(answerers).validate()?;
        let now = self.now_ms();
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
        let expires_at = super::deadline(self.inner.settings.default_timeout, ask.timeout, now);
        let mut origin = run.origin(0);
        origin.presentation = self.policies().presentation_of(run.conversation.as_ref(), None);
        let mut question = ask.pending(origin, Answerers::Conversation, now, expires_at)?;
        self.inner.nudges.schedule_nudges(&mut question)?;
        if let Some(callback) = callback {
            self.callbacks().add_callback(callback, run.id, Some(question.id)).await?;
        }
        if let Some(granted) = self.policies().granted(&question, &run).await? {
            // As for a function's approval: a standing grant answers it, nobody is asked.
            question = granted;
            let mut run = run;
            run.status = RunStatus::Finished;
            run.result = Some(question.outcome_line_in(crate::question::Locale::En));
            let question = Arc::new(question);
            self.inner.store.ask(&run, &question).await?;
            self.inner.bus.emit(Event::RunStarted(Arc::new(run)));
            return Ok(Arc::unwrap_or_clone(question));
        }
        let question = Arc::new(question);
        self.inner.store.ask(&run, &question).await?;
        self.inner.bus.emit(Event::RunStarted(Arc::new(run)));
        self.delivery().announce(question.clone());
        Ok(Arc::unwrap_or_clone(question))
    }

    /// Cancels an agent's pending question (the agent gave up on it, or is gone): its cards
    /// are retracted and its run ends. `false` when it was not pending (or is not an agent's).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn cancel_external(&self, id: QuestionId, reason: &str) -> Result<bool, StoreError> {
        let Some(question) = self.inner.store.question(id).await? else { return Ok(false) };
        if !question.is_pending() || question.mode != Mode::External {
            return Ok(false);
        }
        let outcome = Outcome::Cancelled { reason: reason.to_owned() };
        Ok(matches!(self.claims().close(&question, outcome).await?, super::claim::Claimed::Won(_)))
    }

    /// Sends a message to a conversation for an agent; nothing is awaited or kept.
    ///
    /// # Errors
    /// When no enabled channel serves the conversation.
    pub fn notify_conversation(&self, conversation: &Conversation, text: String) -> Result<(), NotServed> {
        self.delivery().check_served(conversation)?;
        self.delivery().send_text(conversation, text);
        Ok(())
    }
}
