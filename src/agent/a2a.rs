//! A2A (the Agent2Agent protocol, v1.0), as a component: askgate as an A2A agent whose skills
//! are asking a person a question, a confirmation and an approval.
//!
//! - [`card`]: the agent card at `/.well-known/agent-card.json` (no token: a client reads it
//!   first), naming the JSON-RPC endpoint `/a2a` and the bearer scheme (an agent token).
//! - [`rpc`]: the endpoint. `SendMessage` asks in `[a2a] conversation` and answers at once with
//!   the task `working` (a person may take days, longer than a request should be held);
//!   `GetTask`, `CancelTask` (cancels the question), `SendStreamingMessage` and `SubscribeToTask`
//!   (the task, then its answer and final status once a person decided), and the push
//!   notification configs of a task.
//! - [`task`]: a task is a question (same id), read back from the store, so tasks outlive
//!   restarts; what A2A adds is a note of the store's.
//! - [`push`]: a task's outcome POSTed to its push configs, from the callbacks' outbox, under the
//!   callbacks' rules (`[callbacks] allow`).
//! - [`wire`]: the protocol's JSON types, shared with askgate's A2A client side.
//!
//! Its config section is `[a2a]` ([`crate::config::A2aConfig`]).

pub mod card;
mod push;
mod rpc;
pub mod task;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};

use super::callbacks::Outbound;
use crate::config::A2aConfig;
use crate::engine::Engine;
use crate::http::AppState;

/// What the routes and the pusher share.
struct A2a {
    engine: Engine,
    /// `[a2a]`; none: the endpoint says to add it.
    config: Option<Arc<A2aConfig>>,
    /// askgate's public address, which the card names.
    base: String,
    /// Where pushes may go.
    outbound: Outbound,
}

/// The routes (the card and the endpoint), for the HTTP surface to serve; `config` is `[a2a]`,
/// `base` askgate's public address, `outbound` where push notifications may go. With `[a2a]`,
/// the tasks' outcomes are pushed from the outbox until askgate stops.
pub fn routes(engine: &Engine, config: Option<A2aConfig>, base: &str, outbound: Outbound) -> Router<AppState> {
    let a2a = Arc::new(A2a { engine: engine.clone(), config: config.map(Arc::new), base: base.to_owned(), outbound });
    if a2a.config.is_some() {
        push::start(&a2a);
    }
    Router::new()
        .route(wire::AGENT_CARD_PATH, get(agent_card))
        .route(card::ENDPOINT, post(rpc::endpoint))
        .layer(Extension(a2a))
}

async fn agent_card(Extension(a2a): Extension<Arc<A2a>>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if a2a.config.is_none() {
        return crate::http::ApiError::not_found("askgate is an A2A agent once channels.toml has an [a2a] table")
            .into_response();
    }
    axum::Json(card::card(&a2a.base)).into_response()
}
