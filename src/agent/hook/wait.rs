//! A hook's ask, asked in the configured conversation and waited for: it expires a little
//! before the agent's own timeout of the hook, so the answer arrives, and it is cancelled when
//! the agent stops waiting first.

use std::time::Duration;

use super::{Answer, HookInput};
use crate::config::HookRules;
use crate::engine::Engine;
use crate::http::{ApiError, refused};
use crate::question::{Answerers, Ask, Question, QuestionId, UserRef};

/// How long before the hook's own timeout askgate answers, so the answer arrives.
const MARGIN: Duration = Duration::from_secs(5);

/// How long a person has: the hook's timeout less a margin (a quarter of it, at most
/// [`MARGIN`]), in whole seconds.
pub fn seconds(rules: &HookRules) -> u64 {
    let margin = MARGIN.min(rules.hook_timeout / 4);
    rules.hook_timeout.saturating_sub(margin).as_secs().max(1)
}

/// Asks the hook's approval (or its questions, together) and waits for the outcome; `editable`
/// is false where the agent cannot run an edited command. Each expires before the hook's own
/// timeout.
///
/// # Errors
/// The ask is refused (its questions malformed, nobody to answer), or askgate stops.
pub async fn ask(
    engine: &Engine,
    rules: &HookRules,
    input: &HookInput,
    asker: UserRef,
    editable: bool,
) -> Result<Answer, ApiError> {
    let wait = seconds(rules);
    if !input.is_question() {
        let mut approval = input.approval(wait);
        if !editable {
            approval = approval.editable(false);
        }
        let question = settle(engine, rules, approval, asker, input.project()).await?;
        return Ok(input.decided(&question));
    }
    let ask = input.questions(wait).map_err(ApiError::bad_request)?;
    let question = settle(engine, rules, ask, asker, input.project()).await?;
    Ok(input.answered(&question))
}

/// One ask, asked and waited for until it is resolved (its expiry resolves it).
async fn settle(
    engine: &Engine,
    rules: &HookRules,
    mut ask: Ask,
    asker: UserRef,
    project: Option<&str>,
) -> Result<Question, ApiError> {
    ask.answerers = rules.answerers.clone().map(|users| Answerers::Users { users });
    let question =
        engine.asks().ask_in_project(rules.conversation.clone(), ask, asker, project).await.map_err(refused)?;
    wait(engine, question.id).await
}

/// Waits until question `id` is resolved (its expiry resolves it); cancelled when the caller
/// stops waiting first.
///
/// # Errors
/// The question is gone, or askgate stops.
pub async fn wait(engine: &Engine, id: QuestionId) -> Result<Question, ApiError> {
    let mut abandoned = Abandoned { engine: engine.clone(), id: Some(id) };
    let question = engine
        .asks()
        .wait_resolved(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("the question {id} is gone")))?;
    // Still pending only as askgate stops: the guard cancels it, and the hook answers that
    // nobody decided.
    if !question.is_pending() {
        abandoned.id = None;
    }
    Ok(question)
}

/// Cancels the question of a hook the agent stopped waiting for (the person pressed Esc, or
/// its timeout came first), so that its card does not stay.
struct Abandoned {
    engine: Engine,
    id: Option<QuestionId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let engine = self.engine.clone();
            self.engine.tasks().spawn(async move {
                if let Err(e) = engine.asks().cancel_external(id, "client").await {
                    tracing::error!(question = %id, error = %e, "could not cancel an abandoned hook's question");
                }
            });
        }
    }
}
