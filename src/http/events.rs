//! `GET /api/events`: server-sent events. On connect every still-pending question is replayed
//! as `question.asked`, then live events follow; a client that reconnects after missing
//! events redraws every pending card without extra calls.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::{ApiError, AppState, Operator, Params, conversation_param};
use crate::engine::Event;
use crate::question::Conversation;

#[derive(Deserialize)]
pub(super) struct EventsQuery {
    conversation: Option<String>,
}

fn concerns(event: &Event, conversation: Option<&Conversation>) -> bool {
    let Some(wanted) = conversation else { return true };
    let of = match event {
        Event::Asked(q) | Event::Resolved(q) => q.conversation.as_ref(),
        Event::RunStarted(r) | Event::RunResumed(r) | Event::Run(r) => r.conversation.as_ref(),
    };
    of == Some(wanted)
}

fn to_sse(event: &Event) -> SseEvent {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_owned());
    SseEvent::default().event(event.name()).data(data)
}

pub(super) async fn stream(
    _: Operator,
    State(state): State<AppState>,
    Params(query): Params<EventsQuery>,
) -> Result<Response, ApiError> {
    let conversation = conversation_param(query.conversation.as_deref())?;
    // Subscribe first: a question asked while the backlog is read arrives twice at worst
    // (clients key cards by id), never not at all.
    let live = state.engine.subscribe();
    let backlog: VecDeque<Event> =
        state.engine.store().pending(conversation.as_ref()).await?.into_iter().map(Event::Asked).collect();
    let engine = state.engine.clone();
    let stop = engine.stopping();
    // After the backlog, one `replay.done` tells a reconnecting client that every card it
    // still shows but did not get again was resolved meanwhile.
    let state = (live, backlog, conversation, false);
    let events = stream::unfold(state, move |(mut live, mut backlog, conversation, mut replayed)| {
        let engine = engine.clone();
        let stop = stop.clone();
        async move {
            loop {
                if let Some(event) = backlog.pop_front() {
                    return Some((Ok::<_, Infallible>(to_sse(&event)), (live, backlog, conversation, replayed)));
                }
                if !replayed {
                    replayed = true;
                    let done = SseEvent::default().event("replay.done").data("{}");
                    return Some((Ok(done), (live, backlog, conversation, replayed)));
                }
                let next = tokio::select! {
                    next = live.recv() => next,
                    () = stop.cancelled() => return None,
                };
                match next {
                    Ok(event) if concerns(&event, conversation.as_ref()) => {
                        return Some((Ok(to_sse(&event)), (live, backlog, conversation, replayed)));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(missed)) => {
                        // Fell behind: redraw from the store, as a reconnecting client would.
                        tracing::warn!(missed, "an event stream fell behind; replaying pending questions");
                        match engine.store().pending(conversation.as_ref()).await {
                            Ok(pending) => backlog.extend(pending.into_iter().map(Event::Asked)),
                            Err(e) => tracing::error!(error = %e, "could not replay pending questions"),
                        }
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}
