//! The context a function asks through: `ask`, `confirm`, `approve`, `say`, `can_ask`.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::Runner;
use crate::question::{Ask, InvalidAsk, Kind, Mode, Outcome, Question, QuestionId, Surface, ValidAsk};
use crate::run::{Run, RunStatus};
use crate::store::{StoreError, StoreExt};

/// An ask that did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The question is persisted and rendered; this turn of the run ends here and the run is
    /// replayed when the answer comes. Propagate it with `?`.
    #[error("waiting for an answer")]
    Pending {
        /// The question that waits.
        question: QuestionId,
    },
    /// The human declined (for an approval: rejected); the feedback, if any, is their words.
    #[error("declined{}", feedback.as_ref().map(|f| format!(": {f}")).unwrap_or_default())]
    Declined {
        /// What the human said.
        feedback: Option<String>,
    },
    /// No answer came before the deadline and the ask had no default.
    #[error("no answer before the timeout")]
    Timeout,
    /// The question was closed without an answer.
    #[error("cancelled ({})", crate::question::cancel_reason(reason))]
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The ask itself is malformed; nothing was persisted.
    #[error("invalid ask: {0}")]
    Invalid(#[from] InvalidAsk),
    /// On replay, the function asked something different at a step that already has an
    /// outcome; the run fails rather than feed it the wrong answer.
    #[error("replay mismatch at step {step}: recorded `{recorded}`, now asked `{asked}`")]
    ReplayMismatch {
        /// The step, from 0.
        step: u32,
        /// The recorded prompt.
        recorded: String,
        /// The prompt asked now.
        asked: String,
    },
    /// The store failed.
    #[error("storage failed")]
    Store(#[from] StoreError),
}

/// An answer to an ask.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// Text for a single choice or free text, a list for multi, a bool for confirm.
    pub value: Value,
    /// True when nobody answered and this is the ask's default.
    pub timed_out: bool,
}

impl Answer {
    /// The answer as text (a list joined by ", ").
    pub fn text(&self) -> String {
        match &self.value {
            Value::String(s) => s.clone(),
            other => crate::question::display_value(Kind::Question, other),
        }
    }

    /// The answer as a list of choices.
    pub fn list(&self) -> Vec<String> {
        match &self.value {
            Value::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

/// An approval that was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Allowed this time.
    Once,
    /// Allowed, and a standing grant was stored for this conversation.
    Always,
    /// A standing grant covered it; nobody was asked.
    Granted,
    /// Allowed this time as the approver edited it (an editable approval): this action
    /// instead of the one asked.
    Edited(String),
}

/// The handle a function asks through. One per invocation.
pub struct Context {
    /// What the asks go through.
    runner: Runner,
    run: Run,
    journal: Vec<Arc<Question>>,
    step: u32,
    said: u32,
    /// The blocking question being awaited; stays set if the awaiting future is dropped.
    awaiting: Option<Question>,
}

impl Context {
    pub(super) fn new(runner: Runner, run: Run, journal: Vec<Arc<Question>>) -> Self {
        Self { runner, run, journal, step: 0, said: 0, awaiting: None }
    }

    /// The number the next ask gets, from 0.
    pub fn next_step(&self) -> u32 {
        self.step
    }

    /// The run this invocation belongs to.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Whether a human is attached: false for a run with no conversation, where every ask
    /// returns `cancelled(no_human)` at once.
    pub fn can_ask(&self) -> bool {
        self.run.conversation.is_some()
    }

    /// Asks a question and returns the answer (or the default, marked `timed_out`).
    ///
    /// # Errors
    /// [`AskError::Pending`] in follow-up mode when the answer is not in yet: propagate it with
    /// `?`. Otherwise declined, timeout (no default), cancelled, invalid, or replay mismatch.
    pub async fn ask(&mut self, ask: Ask) -> Result<Answer, AskError> {
        match self.ask_outcome(ask).await? {
            Outcome::Answered { value } => Ok(Answer { value, timed_out: false }),
            Outcome::Expired { value: Some(value) } => Ok(Answer { value, timed_out: true }),
            Outcome::Expired { value: None } => Err(AskError::Timeout),
            Outcome::Declined { feedback } => Err(AskError::Declined { feedback }),
            Outcome::Cancelled { reason } => Err(AskError::Cancelled { reason }),
        }
    }

    /// Asks and returns the raw outcome — answered, declined, expired or cancelled — for
    /// callers that pass it on as it is (the process bridge).
    ///
    /// # Errors
    /// [`AskError::Pending`] in follow-up mode; invalid asks, replay mismatches, the store.
    pub async fn ask_outcome(&mut self, ask: Ask) -> Result<Outcome, AskError> {
        let ask = ask.validate()?;
        self.outcome_of(ask).await
    }

    /// Closes the blocking question whose wait was abandoned (the program that asked it died)
    /// as `cancelled(reason)`, retracting its cards. Does nothing when no wait was abandoned.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn abandon_wait(&mut self, reason: &str) -> Result<(), AskError> {
        if let Some(question) = self.awaiting.take() {
            self.runner.waiters.release(question.id);
            self.runner.claims.close(&question, Outcome::Cancelled { reason: reason.to_owned() }).await?;
        }
        Ok(())
    }

    /// Asks yes or no. A timeout returns the default (`false` unless set); it never errors.
    ///
    /// # Errors
    /// As [`Context::ask`], except that a timeout is not an error.
    pub async fn confirm(&mut self, ask: Ask) -> Result<bool, AskError> {
        let ask = Ask { kind: Some(Kind::Confirm), ..ask };
        let answer = self.ask(ask).await?;
        Ok(answer.value.as_bool().unwrap_or(false))
    }

    /// Asks approval for an action (the ask's prompt). A standing grant in this conversation
    /// approves it without asking.
    ///
    /// # Errors
    /// [`AskError::Declined`] when rejected, with the feedback as its text; otherwise as
    /// [`Context::ask`].
    pub async fn approve(&mut self, ask: Ask) -> Result<Approval, AskError> {
        let ask = Ask { kind: Some(Kind::Approval), ..ask };
        let step = self.step;
        let answer = self.ask(ask).await?;
        let granted = self.journal.get(step as usize).is_some_and(|q| q.answered_via == Some(Surface::GATEWAY));
        if let Some(action) = crate::question::edited_action(&answer.value) {
            return Ok(Approval::Edited(action.to_owned()));
        }
        Ok(match answer.value.as_str() {
            Some("always") if granted => Approval::Granted,
            Some("always") => Approval::Always,
            _ => Approval::Once,
        })
    }

    /// Sends a message to the conversation. On replay, messages an earlier invocation already
    /// delivered are not sent again.
    ///
    /// # Errors
    /// When the store fails to record the message.
    pub async fn say(&mut self, text: impl Into<String>) -> Result<(), AskError> {
        self.said += 1;
        if self.said <= self.run.says {
            return Ok(());
        }
        self.run.says = self.said;
        let Some(conversation) = self.run.conversation.clone() else { return Ok(()) };
        // Persist before sending: a crash between the two loses the message rather than
        // repeating it on every replay.
        self.runner.store.set_says(self.run.id, self.said).await?;
        self.runner.delivery.send_text(&conversation, text.into());
        Ok(())
    }

    /// What this run kept under `name` in an earlier invocation ([`Context::keep`]), if it did.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn kept(&self, name: &str) -> Result<Option<String>, AskError> {
        Ok(self.runner.store.note(&self.note_key(name)).await?.map(|note| note.value))
    }

    /// Keeps `value` under `name` for this run's later invocations: what the function learned
    /// from the world outside (a remote agent's question, its ids) that a replay must read back
    /// rather than ask the world for again. Kept in the store, so it survives a restart.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn keep(&mut self, name: &str, value: &str) -> Result<(), AskError> {
        let at = self.runner.now_ms();
        self.runner.store.remember(&self.note_key(name), value, at).await?;
        Ok(())
    }

    fn note_key(&self, name: &str) -> String {
        format!("run:{}:{name}", self.run.id)
    }

    /// The final state of this invocation's run record, for the runner.
    pub(super) fn into_parts(self) -> (Run, Vec<Arc<Question>>) {
        (self.run, self.journal)
    }

    async fn outcome_of(&mut self, ask: ValidAsk) -> Result<Outcome, AskError> {
        let step = self.step;
        self.step += 1;
        if let Some(recorded) = self.journal.get(step as usize) {
            if recorded.fingerprint != ask.fingerprint() {
                return Err(AskError::ReplayMismatch {
                    step,
                    recorded: recorded.prompt.clone(),
                    asked: ask.prompt.clone(),
                });
            }
            // A pending recorded step means this invocation overlapped with its own question
            // (e.g. resumed at start-up while it waits): its card is already out.
            return recorded.outcome.clone().ok_or(AskError::Pending { question: recorded.id });
        }
        if self.run.conversation.is_none() {
            return Ok(Outcome::Cancelled { reason: "no_human".to_owned() });
        }
        let runner = self.runner.clone();
        let now = runner.now_ms();
        let expires_at = runner.deadline(ask.timeout, now);
        let mut origin = self.run.origin(step);
        origin.presentation = runner.policies.presentation_for(&self.run);
        let mut question = ask.pending(origin, runner.default_answerers(&self.run), now, expires_at)?;
        runner.nudges.schedule_nudges(&mut question)?;
        if let Some(granted) = runner.policies.granted(&question, &self.run).await? {
            let outcome = granted.outcome.clone().unwrap_or_else(|| unreachable!("a granted question is answered"));
            let question = Arc::new(granted);
            runner.store.ask(&self.run, &question).await?;
            self.run.update = None;
            self.journal.push(question);
            return Ok(outcome);
        }
        match self.run.mode {
            // External runs belong to agents that ask through the API, not to functions.
            Mode::FollowUp | Mode::External => {
                self.run.status = RunStatus::Waiting;
                self.run.updated_at = now;
                let question = Arc::new(question);
                let place = runner.store.ask(&self.run, &question).await?;
                self.run.update = None;
                runner.delivery.announce(question.clone(), place);
                let id = question.id;
                self.journal.push(question);
                Err(AskError::Pending { question: id })
            }
            Mode::Blocking => {
                let (tx, rx) = oneshot::channel();
                runner.waiters.hold(&question, tx);
                let shared = Arc::new(question.clone());
                let place = match runner.store.ask(&self.run, &shared).await {
                    Ok(place) => place,
                    Err(e) => {
                        runner.waiters.release(question.id);
                        return Err(e.into());
                    }
                };
                self.run.update = None;
                runner.delivery.announce(shared, place);
                self.awaiting = Some(question.clone());
                let waiting = runner.waiting_on_a_person(question.conversation.as_ref());
                let outcome = rx.await.unwrap_or(Outcome::Cancelled { reason: "shutdown".to_owned() });
                drop(waiting);
                self.awaiting = None;
                question.outcome = Some(outcome.clone());
                question.status = outcome.status();
                self.journal.push(Arc::new(question));
                Ok(outcome)
            }
        }
    }
}
