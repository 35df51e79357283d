//! Socket Mode: slack-morphism's client opens the URL `apps.connections.open` returns with the
//! app-level token, reconnects on a `disconnect` envelope or a dropped socket, and acknowledges
//! each envelope once its callback returns. The callbacks only queue what came (see
//! [`super::inbound`]), so every envelope is acknowledged at once and the work goes on after;
//! but a form's submitted modal waits for its turn, as Slack reads the answer to it in the
//! acknowledgement's payload.
//! With several instances on one database, one of them holds the connection at a time (the
//! lease `slack:socket`); another takes over when it stops or dies.

use std::sync::Arc;

use slack_morphism::prelude::*;
use tokio_util::sync::CancellationToken;

use super::{Incoming, Slack};
use crate::engine::{ChannelState, Engine};

/// What the callbacks reach through slack-morphism's user state.
struct Inbox {
    slack: Arc<Slack>,
    engine: Engine,
}

/// Holds the Socket Mode connection until `stop` fires.
pub(super) async fn serve(slack: &Arc<Slack>, engine: &Engine, app_token: String, stop: &CancellationToken) {
    let app_token = SlackApiToken::new(app_token.into());
    while let Some(held) = engine.leases().lease("slack:socket").await {
        let callbacks = SlackSocketModeListenerCallbacks::new()
            // Slack's `hello` (its type is not exported by name): the connection is up.
            .with_hello_events(|_hello, _client, states| async move { on_hello(&states).await })
            .with_push_events(on_push)
            .with_interaction_events(on_interaction)
            .with_command_events(on_command);
        let environment = Arc::new(
            SlackClientEventsListenerEnvironment::new(slack.client.clone())
                .with_error_handler(on_error)
                .with_user_state(Inbox { slack: slack.clone(), engine: engine.clone() }),
        );
        // One connection (Slack sends each envelope once, to one of them), tried again soon.
        let config = SlackClientSocketModeConfig::new()
            .with_max_connections_count(1)
            .with_reconnect_timeout_in_seconds(2)
            .with_initial_backoff_in_seconds(1);
        let listener = SlackClientSocketModeListener::new(&config, environment, callbacks);
        if let Err(e) = listener.listen_for(&app_token).await {
            tracing::error!(error = %e, "could not start slack's socket mode");
            engine.delivery().set_channel_state("slack", ChannelState::Down(format!("socket mode: {e}")));
            return;
        }
        engine.delivery().set_channel_state("slack", ChannelState::Connecting);
        listener.start().await;
        tokio::select! {
            () = stop.cancelled() => {
                listener.shutdown().await;
                return;
            }
            () = held.lost() => {
                tracing::warn!("left slack's socket mode: the lease on it was lost");
                listener.shutdown().await;
            }
        }
    }
}

async fn inbox(states: &SlackClientEventsUserState) -> Option<(Arc<Slack>, Engine)> {
    let states = states.read().await;
    states.get_user_state::<Inbox>().map(|i| (i.slack.clone(), i.engine.clone()))
}

async fn on_hello(states: &SlackClientEventsUserState) {
    tracing::info!("slack socket mode connected");
    if let Some((_, engine)) = inbox(states).await {
        engine.delivery().set_channel_state("slack", ChannelState::Up);
    }
}

/// Queues what came; the envelope is acknowledged when this returns.
async fn queue(states: &SlackClientEventsUserState, incoming: Incoming) -> UserCallbackResult<()> {
    if let Some((slack, _)) = inbox(states).await {
        slack.accept(incoming);
    }
    Ok(())
}

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    queue(&states, Incoming::Event(Box::new(event))).await
}

/// Queues a click or a pick; a form's submission is answered in the acknowledgement's payload.
async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<SlackInteractionResponse> {
    let Some((slack, _)) = inbox(&states).await else { return Ok(SlackInteractionResponse::Empty) };
    Ok(slack.interact(event).await.map_or(SlackInteractionResponse::Empty, SlackInteractionResponse::from))
}

async fn on_command(
    event: SlackCommandEvent,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<SlackCommandEventResponse> {
    queue(&states, Incoming::Command(Box::new(event))).await?;
    // What the command did is told to the person as an ephemeral note once it is applied.
    Ok(SlackCommandEventResponse::new(SlackMessageContent::new()))
}

fn on_error(
    error: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<SlackHyperClient>,
    _states: SlackClientEventsUserState,
) -> axum::http::StatusCode {
    tracing::warn!(error = %error, "slack socket mode");
    // Acknowledged all the same: an envelope that cannot be read never reads better.
    axum::http::StatusCode::OK
}
