//! Claude Code's routes: `POST /hooks/claude-code`, where a hook asks a person (see
//! [`super`]), and the channel relay's `POST /hooks/claude-code/permission` and `GET
//! /hooks/claude-code/messages`. Only agent tokens: the operator's could answer the approvals it
//! asks for. Their contract is Claude Code's, so `/api/openapi.json` does not describe them.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::relay::{PermissionRequest, Settled};
use super::reply;
use crate::agent::hook::wait::{ask, wait};
use crate::agent::hook::{Answer, HookInput};
use crate::config::{ClaudeCodeConfig, ToolRule};
use crate::engine::Engine;
use crate::http::{ApiError, AppState, Asker, Caller, Role, read_body, refused};
use crate::question::{Answerers, QuestionId, UserRef};

/// What the routes share.
struct Hooks {
    engine: Engine,
    /// `[claude_code]`; none: each route says to add it.
    config: Option<Arc<ClaudeCodeConfig>>,
    /// The relayed permission prompts waiting for a person.
    relayed: Relayed,
}

/// The routes, for the HTTP surface to serve behind a token; `config` is `[claude_code]`.
pub fn routes(engine: &Engine, config: Option<ClaudeCodeConfig>) -> Router<AppState> {
    let hooks = Arc::new(Hooks { engine: engine.clone(), config: config.map(Arc::new), relayed: Relayed::default() });
    Router::new()
        .route("/hooks/claude-code", post(claude_code))
        .route("/hooks/claude-code/permission", post(permission))
        .route("/hooks/claude-code/messages", get(messages))
        .layer(Extension(hooks))
}

/// The largest hook body: a `Write` carries the whole file.
const MAX_HOOK_BODY: usize = 4 * 1024 * 1024;

/// The `[claude_code]` table and the body of a request only an agent token may send.
async fn admitted(
    caller: &Caller,
    hooks: &Hooks,
    request: Request,
) -> Result<(Arc<ClaudeCodeConfig>, axum::body::Bytes), ApiError> {
    let Some(config) = hooks.config.clone() else {
        return Err(ApiError::not_found(
            "askgate answers Claude Code's hooks once channels.toml has a [claude_code] table",
        ));
    };
    if caller.role != Role::Agent {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_token",
            "/hooks/claude-code takes an agent token, not the operator's, which could answer the approvals it asks for",
        ));
    }
    Ok((config, read_body(request, MAX_HOOK_BODY).await?))
}

async fn claude_code(Asker(caller): Asker, Extension(hooks): Extension<Arc<Hooks>>, request: Request) -> Response {
    let (config, body) = match admitted(&caller, &hooks, request).await {
        Ok(admitted) => admitted,
        Err(e) => return e.into_response(),
    };
    // A tool that ran, or a turn that ended: a prompt relayed meanwhile was answered there.
    if let Some(settled) = Settled::parse(&body) {
        hooks.relayed.settle(&hooks.engine, &settled, &caller.user);
        return axum::Json(serde_json::json!({})).into_response();
    }
    let also = " (and reads PostToolUse, PostToolUseFailure, Stop and SessionEnd)";
    let (event, input) = match HookInput::parse(&body, "Claude Code", also) {
        Ok(parsed) => parsed,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    let answer = match config.hooks.rule(&input.tool_name) {
        ToolRule::Allow => Answer::Allow { input: None, permissions: Vec::new() },
        ToolRule::Pass => Answer::Pass,
        ToolRule::Ask => match ask(&hooks.engine, &config.hooks, &input, caller.user, true).await {
            Ok(answer) => answer,
            Err(e) => return e.into_response(),
        },
    };
    axum::Json(reply(event, &answer)).into_response()
}

/// `POST /hooks/claude-code/permission`: a permission prompt relayed by `askgate mcp
/// --channel`, answered `{"behavior": "allow" | "deny" | null}` (null: nobody decided here).
async fn permission(Asker(caller): Asker, Extension(hooks): Extension<Arc<Hooks>>, request: Request) -> Response {
    let (config, body) = match admitted(&caller, &hooks, request).await {
        Ok(admitted) => admitted,
        Err(e) => return e.into_response(),
    };
    let request = match PermissionRequest::parse(&body) {
        Ok(request) => request,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    let behavior = match config.hooks.rule(&request.tool_name) {
        ToolRule::Allow => Some("allow"),
        ToolRule::Pass => None,
        ToolRule::Ask => {
            let mut ask = request.approval(config.hooks.hook_timeout.as_secs().max(1));
            ask.answerers = config.hooks.answerers.clone().map(|users| Answerers::Users { users });
            let engine = &hooks.engine;
            // Listed before it is asked: a hook saying the terminal answered may come as soon
            // as the card is out, before the ask returns.
            let project = request.cwd.clone();
            let listed = hooks.relayed.add(request, caller.user.clone());
            let asked = engine
                .asks()
                .ask_in_project(config.hooks.conversation.clone(), ask, caller.user, project.as_deref())
                .await;
            let question = match asked {
                Ok(question) => question,
                Err(e) => return refused(e).into_response(),
            };
            if listed.asked(question.id) {
                retract(engine, question.id);
            }
            match wait(engine, question.id).await {
                Ok(question) => PermissionRequest::behavior(&question),
                Err(e) => return e.into_response(),
            }
        }
    };
    axum::Json(serde_json::json!({"behavior": behavior})).into_response()
}

/// `GET /hooks/claude-code/messages`: the plain messages of `[claude_code] conversation` that
/// answer and start nothing, one JSON object per line (`{"text", "user", "name"}`), while the
/// request lasts; `askgate mcp --channel` pushes each into its Claude Code session.
async fn messages(Asker(caller): Asker, Extension(hooks): Extension<Arc<Hooks>>, request: Request) -> Response {
    let config = match admitted(&caller, &hooks, request).await {
        Ok((config, _)) => config,
        Err(e) => return e.into_response(),
    };
    if !config.messages {
        return ApiError::not_found("set messages = true in [claude_code] to pass plain messages on to Claude Code")
            .into_response();
    }
    let heard = hooks.engine.policies().listen(&config.hooks.conversation);
    let stop = hooks.engine.stopping();
    let lines = futures_util::stream::unfold((heard, stop), |(mut heard, stop)| async move {
        loop {
            let message = tokio::select! {
                message = heard.recv() => message,
                () = stop.cancelled() => return None,
            };
            match message {
                Ok(m) => {
                    let line = serde_json::json!({"text": m.text, "user": m.user.to_string(), "name": m.name});
                    let line = format!("{line}\n");
                    return Some((Ok::<_, std::convert::Infallible>(line), (heard, stop)));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "Claude Code's channel fell behind the conversation's messages");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(axum::body::Body::from_stream(lines))
        .unwrap_or_default()
}

/// The relayed prompts waiting for a person, so that a hook saying the terminal answered
/// first retracts their cards.
#[derive(Default)]
struct Relayed(std::sync::Mutex<Vec<Entry>>);

/// A relayed prompt: its question once asked, or whether it was settled before that.
struct Entry {
    serial: u64,
    request: PermissionRequest,
    /// The agent whose token relayed it.
    agent: UserRef,
    question: Option<QuestionId>,
    settled: bool,
}

impl Relayed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists `request` while the guard lives.
    fn add(&self, request: PermissionRequest, agent: UserRef) -> Listed<'_> {
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().push(Entry { serial, request, agent, question: None, settled: false });
        Listed { relayed: self, serial }
    }

    /// Cancels the questions of the prompts `settled` answered, among those `agent` relayed
    /// (another agent's hook, whatever project it names, settles none of them); a prompt not
    /// asked yet is marked, and retracted once asked.
    fn settle(&self, engine: &Engine, settled: &Settled, agent: &UserRef) {
        let mut ids = Vec::new();
        for entry in self.lock().iter_mut().filter(|e| e.agent == *agent && e.request.settled_by(settled)) {
            entry.settled = true;
            ids.extend(entry.question);
        }
        for id in ids {
            retract(engine, id);
        }
    }
}

/// Cancels a relayed prompt's question: the terminal answered it.
fn retract(engine: &Engine, id: QuestionId) {
    let engine = engine.clone();
    engine.tasks().clone().spawn(async move {
        if let Err(e) = engine.asks().cancel_external(id, "answered in Claude Code").await {
            tracing::error!(question = %id, error = %e, "could not retract a relayed prompt's card");
        }
    });
}

/// A relayed prompt's place in [`Relayed`], given up when its request ends.
struct Listed<'a> {
    relayed: &'a Relayed,
    serial: u64,
}

impl Listed<'_> {
    /// Records the prompt's question; true when a hook settled the prompt before it was asked.
    fn asked(&self, id: QuestionId) -> bool {
        let mut entries = self.relayed.lock();
        let Some(entry) = entries.iter_mut().find(|e| e.serial == self.serial) else { return false };
        entry.question = Some(id);
        entry.settled
    }
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.relayed.lock().retain(|e| e.serial != self.serial);
    }
}
