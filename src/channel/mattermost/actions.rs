//! `POST /channels/mattermost/actions`: a card's button clicked. Mattermost sends the
//! button's `context` (its command and the command's signature), who clicked (`user_id`) and
//! the post; it signs nothing, so askgate checks the signature it put there itself: a request
//! without one, or with one that is not the command's, is refused with 401 and changes
//! nothing. A click that resolves is shown by the card's update (every card is updated with
//! the outcome); anything else (a stranger's click, an answer too late) is told to the
//! clicker alone, as the response's `ephemeral_text`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::json;

use super::{Mattermost, SURFACE, conversation, user_ref};
use crate::channel::posted::refuse;
use crate::command::Command;
use crate::engine::{Engine, Inbound};
use crate::question::Receipt;

/// What a button's request carries (Mattermost's `PostActionIntegrationRequest`), as far as
/// askgate reads it.
#[derive(Debug, Deserialize)]
struct Request {
    user_id: String,
    #[serde(default)]
    user_name: String,
    channel_id: String,
    #[serde(default)]
    post_id: String,
    #[serde(default)]
    context: Context,
}

/// The `integration.context` askgate gave the button.
#[derive(Debug, Default, Deserialize)]
struct Context {
    #[serde(default)]
    command: String,
    #[serde(default)]
    mac: String,
}

/// What the route answers from: the adapter and the engine, when Mattermost is on.
#[derive(Clone)]
struct Door {
    on: Option<(Arc<Mattermost>, Engine)>,
}

/// The route `POST /channels/mattermost/actions`, answered by `mattermost` (none: the channel
/// is off, and the route says so).
pub fn routes(mattermost: Option<(Arc<Mattermost>, Engine)>) -> Router {
    Router::new().route(super::render::ACTIONS_PATH, post(action)).with_state(Door { on: mattermost })
}

async fn action(State(door): State<Door>, body: Bytes) -> Response {
    let Some((mattermost, engine)) = &door.on else {
        return refuse(StatusCode::NOT_FOUND, "not_found", "Mattermost is off: configure [channels.mattermost]");
    };
    let request: Request = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "bad_request", format!("not a button's request: {e}")),
    };
    let context = &request.context;
    if context.command.is_empty() || !mattermost.signer.verify(&context.command, &context.mac) {
        return refuse(StatusCode::UNAUTHORIZED, "bad_signature", "the button's command is not signed by askgate");
    }
    let (Some(conversation), Some(user)) = (conversation(&request.channel_id), user_ref(&request.user_id)) else {
        return refuse(StatusCode::BAD_REQUEST, "bad_request", "the request names no channel or user");
    };
    let Some(Ok(command)) = Command::parse(&context.command) else {
        return refuse(StatusCode::BAD_REQUEST, "bad_request", "the button's command is not understood");
    };
    let key = format!("mattermost:action:{}:{}:{}", request.post_id, request.user_id, context.command);
    let mut inbound = Inbound::tap(conversation, user, SURFACE, command).keyed(key);
    if !request.user_name.is_empty() {
        inbound = inbound.named(&format!("@{}", request.user_name));
    }
    let response = engine.router().handle(inbound).await;
    let note = match response.receipt {
        Some(Receipt::Resolved { .. }) => None,
        _ => crate::wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale),
    };
    axum::Json(json!({"ephemeral_text": note.unwrap_or_default()})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buttons_request_is_read_with_its_context() {
        let body = r#"{"user_id":"u1","user_name":"alice","channel_id":"c1","channel_name":"town-square","team_id":"t1",
            "team_domain":"acme","post_id":"p1","trigger_id":"tr1","type":"","data_source":"",
            "context":{"command":"/answer 0b6f #2","mac":"ab"}}"#;
        let request: Request = serde_json::from_str(body).unwrap();
        assert_eq!((request.user_id.as_str(), request.context.command.as_str()), ("u1", "/answer 0b6f #2"));
        let bare: Request = serde_json::from_str(r#"{"user_id":"u1","channel_id":"c1"}"#).unwrap();
        assert!(bare.context.command.is_empty());
    }
}
