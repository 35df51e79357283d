//! `POST /hooks/claude-code`: a Claude Code hook asks a person (see [`crate::hooks`]). Only
//! agent tokens: the operator's could answer the approvals it asks for.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::api::refused;
use super::token::Role;
use super::{ApiError, AppState, Asker};
use crate::config::{ClaudeCodeConfig, ToolRule};
use crate::engine::Engine;
use crate::hooks::{Answer, HookInput, reply};
use crate::question::{Answerers, Ask, Question, QuestionId, UserRef};

/// How long before the hook's own timeout askgate answers `ask`, so the answer arrives.
const MARGIN: Duration = Duration::from_secs(5);

/// The largest hook body: a `Write` carries the whole file.
const MAX_HOOK_BODY: usize = 4 * 1024 * 1024;

pub(super) async fn claude_code(Asker(caller): Asker, State(state): State<AppState>, request: Request) -> Response {
    let Some(config) = state.claude_code.clone() else {
        return ApiError::not_found("askgate answers Claude Code's hooks once channels.toml has a [claude_code] table")
            .into_response();
    };
    if caller.role != Role::Agent {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_token",
            "/hooks/claude-code takes an agent token, not the operator's, which could answer the approvals it asks for",
        )
        .into_response();
    }
    let body = match super::read_body(request, MAX_HOOK_BODY).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let (event, input) = match HookInput::parse(&body) {
        Ok(parsed) => parsed,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    let answer = match config.rule(&input.tool_name) {
        ToolRule::Allow => Answer::Allow { input: None, permissions: Vec::new() },
        ToolRule::Pass => Answer::Pass,
        ToolRule::Ask => match ask(&state.engine, &config, &input, caller.user).await {
            Ok(answer) => answer,
            Err(e) => return e.into_response(),
        },
    };
    axum::Json(reply(event, &answer)).into_response()
}

/// Asks the hook's approval (or its questions, one after another) and waits for the outcome;
/// each expires before the hook's own timeout, which then answers `ask`.
async fn ask(
    engine: &Engine,
    config: &ClaudeCodeConfig,
    input: &HookInput,
    asker: UserRef,
) -> Result<Answer, ApiError> {
    let margin = MARGIN.min(config.hook_timeout / 4);
    let wait = config.hook_timeout.saturating_sub(margin).as_secs().max(1);
    if !input.is_question() {
        let question = settle(engine, config, input.approval(wait), asker).await?;
        return Ok(input.decided(&question));
    }
    let mut answered = Vec::new();
    for ask in input.questions(wait).map_err(ApiError::bad_request)? {
        let question = settle(engine, config, ask, asker.clone()).await?;
        // A declined or unanswered question ends the ask; the rest are not asked.
        let taken = matches!(question.outcome, Some(crate::question::Outcome::Answered { .. }));
        answered.push(question);
        if !taken {
            break;
        }
    }
    Ok(input.answered(&answered))
}

/// One ask, asked and waited for until it is resolved (its expiry resolves it).
async fn settle(
    engine: &Engine,
    config: &ClaudeCodeConfig,
    mut ask: Ask,
    asker: UserRef,
) -> Result<Question, ApiError> {
    ask.answerers = config.answerers.clone().map(|users| Answerers::Users { users });
    let question = engine.ask_external(config.conversation.clone(), ask, asker).await.map_err(refused)?;
    let mut abandoned = Abandoned { engine: engine.clone(), id: Some(question.id) };
    let question = engine
        .wait_resolved(question.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("the question {} is gone", question.id)))?;
    // Still pending only as askgate stops: the guard cancels it, and the hook answers `ask`.
    if !question.is_pending() {
        abandoned.id = None;
    }
    Ok(question)
}

/// Cancels the question of a hook Claude Code stopped waiting for (the person pressed Esc, or
/// its timeout came first), so that its card does not stay.
struct Abandoned {
    engine: Engine,
    id: Option<QuestionId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let engine = self.engine.clone();
            tokio::spawn(async move {
                if let Err(e) = engine.cancel_external(id, "client").await {
                    tracing::error!(question = %id, error = %e, "could not cancel an abandoned hook's question");
                }
            });
        }
    }
}
