//! Codex's route: `POST /hooks/codex`, where `askgate hook codex` hands in a `PreToolUse` or
//! `PermissionRequest` hook (see [`super`]). Only agent tokens: the operator's could answer the
//! approvals it asks for. Its contract is Codex's, so `/api/openapi.json` does not describe it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::reply;
use crate::agent::hook::wait::ask;
use crate::agent::hook::{Answer, Event, HookInput};
use crate::config::{CodexConfig, ToolRule};
use crate::engine::Engine;
use crate::http::{ApiError, AppState, Asker, Role, read_body};

/// The largest hook body: an `apply_patch` carries the whole patch.
const MAX_HOOK_BODY: usize = 4 * 1024 * 1024;

/// What the route holds.
struct Hooks {
    engine: Engine,
    /// `[codex]`; none: the route says to add it.
    config: Option<Arc<CodexConfig>>,
}

/// The route, for the HTTP surface to serve behind a token; `config` is `[codex]`.
pub fn routes(engine: &Engine, config: Option<CodexConfig>) -> Router<AppState> {
    let hooks = Arc::new(Hooks { engine: engine.clone(), config: config.map(Arc::new) });
    Router::new().route("/hooks/codex", post(codex)).layer(Extension(hooks))
}

async fn codex(Asker(caller): Asker, Extension(hooks): Extension<Arc<Hooks>>, request: Request) -> Response {
    let Some(config) = hooks.config.clone() else {
        return ApiError::not_found("askgate answers Codex's hooks once channels.toml has a [codex] table")
            .into_response();
    };
    if caller.role != Role::Agent {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_token",
            "/hooks/codex takes an agent token, not the operator's, which could answer the approvals it asks for",
        )
        .into_response();
    }
    let body = match read_body(request, MAX_HOOK_BODY).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let (event, input) = match HookInput::parse(&body, "Codex", "") {
        Ok(parsed) => parsed,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    let answer = match config.rule(&input.tool_name) {
        ToolRule::Allow => Answer::Allow { input: None, permissions: Vec::new() },
        ToolRule::Pass => Answer::Pass,
        // Codex runs an edited command only from PreToolUse (PermissionRequest refuses updatedInput).
        ToolRule::Ask => match ask(&hooks.engine, &config, &input, caller.user, event == Event::PreToolUse).await {
            Ok(answer) => answer,
            Err(e) => return e.into_response(),
        },
    };
    axum::Json(reply(event, &answer)).into_response()
}
