//! `POST /channels/teams`: the bot's messaging endpoint, where the Bot Framework posts every
//! activity. Its token is checked first ([`super::auth`]): anything not the Bot Framework's,
//! for this bot, about this activity, is 401 and changes nothing. A checked activity is
//! applied, then answered (the Bot Framework waits 15 s, and sends again what it was not
//! answered).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use super::Teams;
use super::activity;
use super::auth::{Door, Refusal};
use crate::channel::jwt::Refused;
use crate::channel::posted::refuse;
use crate::engine::Engine;

/// The largest activity taken (the Bot Framework's messages are far smaller).
const MAX_BODY: usize = 256 * 1024;

/// The endpoint's state: the adapter and the check of its tokens, when Teams is configured.
#[derive(Clone)]
struct Endpoint {
    teams: Option<(Arc<Teams>, Arc<Door>, Engine)>,
}

/// The route `POST /channels/teams`, for `teams` checked by `door`, applied to the engine
/// (none: Teams is off, and the route says so).
pub fn routes(teams: Option<(Arc<Teams>, Arc<Door>, Engine)>) -> Router {
    Router::new()
        .route("/channels/teams", post(activity_posted))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Endpoint { teams })
}

/// `POST /channels/teams`.
async fn activity_posted(State(endpoint): State<Endpoint>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let Some((teams, door, engine)) = &endpoint.teams else {
        return refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            "Teams is off: configure [channels.teams] and set its variables",
        );
    };
    let unauthorized = |why: String| {
        tracing::info!(why, "refused an activity posted to /channels/teams");
        refuse(StatusCode::UNAUTHORIZED, "unauthorized", why)
    };
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let checked = match door.token(authorization).await {
        Ok(checked) => checked,
        // askgate's fault, not the sender's: the Bot Framework sends again what it was not
        // taken, and /healthz says why.
        Err(Refusal::Token(Refused::Unavailable(why))) => {
            tracing::warn!(why, "teams: the Bot Framework's keys cannot be fetched");
            engine.delivery().set_channel_state("teams", super::keys_unavailable());
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("the Bot Framework's keys: {why}"));
        }
        Err(why) => return unauthorized(why.to_string()),
    };
    let posted: Value = match serde_json::from_slice(&body) {
        Ok(posted) => posted,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "bad_request", format!("not JSON: {e}")),
    };
    let envelope = match activity::envelope(&posted) {
        Ok(envelope) => envelope,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, "bad_request", why),
    };
    if let Err(why) = checked.carries(&envelope) {
        return unauthorized(why.to_string());
    }
    match activity::read(&posted) {
        Ok(activity) => {
            teams.apply(activity, engine).await;
            StatusCode::OK.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, "bad_request", why),
    }
}
