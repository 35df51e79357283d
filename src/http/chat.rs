//! The web conversation over HTTP: a person's (or the operator's) own conversation,
//! `web:<name>`, where `POST /api/messages` says something as in a chat (a command, or a plain
//! reply that answers the question waiting there) and `GET /api/messages` reads what was said,
//! waiting for the next line when asked to.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::auth::Held;
use super::{ApiError, AppState, JsonBody, Params, Reader, Role};
use crate::channel::web::{Line, WebChat, own_conversation};
use crate::command::Command;
use crate::engine::Inbound;
use crate::question::{Conversation, Receipt, Surface};
use crate::store::Powers;

/// The longest a read waits for the next line.
const MAX_WAIT: u64 = 30;
/// The longest message taken.
const MAX_TEXT: usize = 4000;

/// Something to say in one's own conversation.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Say {
    /// A command (`/run demo`, `/pending`), or plain words: a reply to the question waiting
    /// there answers it.
    #[schemars(length(min = 1, max = 4000))]
    text: String,
}

/// What askgate made of it.
#[derive(Serialize, JsonSchema)]
pub(super) struct Said {
    /// The conversation (`web:alice`).
    #[schemars(with = "String")]
    conversation: Conversation,
    /// askgate's reply, when it has one (also a line of the conversation).
    #[serde(skip_serializing_if = "Option::is_none")]
    reply: Option<String>,
    /// What an answer did, when it was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<Receipt>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LinesQuery {
    /// Only lines after this one (default 0: all that are kept).
    after: Option<u64>,
    /// Seconds to wait for a line when none is there yet (default 0, at most 30).
    #[schemars(range(max = 30))]
    wait: Option<u64>,
}

/// The lines of one's conversation.
#[derive(Serialize, JsonSchema)]
pub(super) struct Lines {
    /// The conversation (`web:alice`).
    #[schemars(with = "String")]
    conversation: Conversation,
    /// Oldest first.
    lines: Vec<Line>,
    /// The number of the conversation's latest line. Below `after`, askgate restarted (lines
    /// are kept in memory): `lines` then holds all it has, and a client reads on from here.
    latest: u64,
}

fn chat(state: &AppState) -> Result<&WebChat, ApiError> {
    state.web.as_deref().ok_or_else(|| ApiError::not_found("web conversations are not served here"))
}

fn own(user: &crate::question::UserRef) -> Result<Conversation, ApiError> {
    own_conversation(user).ok_or_else(|| ApiError::bad_request(format!("{user} is too long an id for a conversation")))
}

/// Why a person whose token may do `may` cannot say `text`, if they cannot: starting a run
/// takes `ask`; plain words (a reply to the question waiting) and the commands that answer or
/// act take `answer`; reading commands take neither.
fn refusal(text: &str, may: Powers) -> Option<ApiError> {
    let (allowed, code, message) = match Command::parse(text) {
        Some(Ok(Command::Run { .. })) => (may.ask, "may_not_ask", "this token may not start runs (--may answer,ask)"),
        Some(Ok(Command::Pending | Command::Show { .. } | Command::Help | Command::Grants | Command::Web))
        | Some(Err(_)) => return None,
        _ => (may.answer, "may_not_answer", "this token may not answer (--may answer)"),
    };
    (!allowed).then(|| ApiError::new(StatusCode::FORBIDDEN, code, message))
}

pub(super) async fn say(
    Reader(caller): Reader,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<Say>,
) -> Result<Response, ApiError> {
    let web = chat(&state)?;
    state.person_limits.count(&caller)?;
    let text = body.text.trim();
    if text.is_empty() || text.chars().count() > MAX_TEXT {
        return Err(ApiError::bad_request(format!("text: say something, in at most {MAX_TEXT} characters")));
    }
    if caller.role == Role::Person
        && let Some(refused) = refusal(text, caller.may)
    {
        return Err(refused);
    }
    let conversation = own(&caller.user)?;
    web.push(&conversation, caller.user.as_str(), text, None);
    // The person's own conversation is on the page, or in the TUI when that is where they typed.
    let surface = if caller.via == Surface::TUI { Surface::TUI } else { Surface::WEB };
    let inbound =
        Inbound::text(conversation.clone(), caller.user.clone(), surface, text).in_private(true).on_board(true);
    let response = state.engine.router().handle(inbound).await;
    if let Some(reply) = &response.text {
        web.push(&conversation, "askgate", reply, None);
    }
    Ok(axum::Json(Said { conversation, reply: response.text, receipt: response.receipt }).into_response())
}

pub(super) async fn lines(
    Reader(caller): Reader,
    State(state): State<AppState>,
    Params(query): Params<LinesQuery>,
) -> Result<Response, ApiError> {
    let web = chat(&state)?;
    let wait = query.wait.unwrap_or(0);
    if wait > MAX_WAIT {
        return Err(ApiError::bad_request(format!("wait {wait} is more than {MAX_WAIT} seconds")));
    }
    let conversation = own(&caller.user)?;
    // A wait ends when the token that holds it is revoked, and then says nothing.
    let held = if wait == 0 { Held::none() } else { Held::of(&state, &caller).await? };
    let (lines, latest) = tokio::select! {
        biased;
        () = held.ended() => return Err(Held::refusal()),
        read = web.lines_after(&conversation, query.after.unwrap_or(0), Duration::from_secs(wait)) => read,
    };
    if held.is_ended() {
        return Err(Held::refusal());
    }
    Ok(axum::Json(Lines { conversation, lines, latest }).into_response())
}
