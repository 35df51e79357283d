//! `GET /api/events`: server-sent events.
//!
//! A new client first gets every still-pending question as `question.asked` (read from the
//! store a page at a time, never all at once), then `replay.done`, then live events. Every live
//! event carries an id; a client that reconnects with `Last-Event-ID` gets exactly the events
//! it missed when they are still kept, and the whole picture again otherwise. A client that
//! falls more than [`crate::engine::EVENTS_BUFFERED`] events behind (it does not read) is
//! dropped rather than buffered without end; it reconnects and resumes. The number of streams
//! is capped (`gateway.max_event_streams`), with a clear 503 beyond. A stream held with a
//! credential from the store ends as soon as that is revoked or expires.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use super::auth::Held;
use super::{ApiError, AppState, Caller, Params, Reader, conversation_param};
use crate::engine::{Engine, Event, Logged};
use crate::question::{Conversation, Question, Status};
use crate::store::QuestionFilter;

/// How many pending questions the backlog reads from the store at a time.
const BACKLOG_PAGE: u32 = 25;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsQuery {
    /// Only this conversation's events (`telegram:-100123`).
    #[schemars(with = "Option<Conversation>")]
    conversation: Option<String>,
}

/// Whether `event` is for this stream: of its conversation (when it names one), and one its
/// caller may see.
fn concerns(event: &Event, conversation: Option<&Conversation>, caller: &Caller) -> bool {
    let visible = match event {
        Event::Asked(q) | Event::Resolved(q) | Event::Counted(q) => caller.sees(q),
        Event::RunStarted(r) | Event::RunResumed(r) | Event::Run(r) => caller.sees_run(r),
    };
    let Some(wanted) = conversation else { return visible };
    let of = match event {
        Event::Asked(q) | Event::Resolved(q) | Event::Counted(q) => q.conversation.as_ref(),
        Event::RunStarted(r) | Event::RunResumed(r) | Event::Run(r) => r.conversation.as_ref(),
    };
    visible && of == Some(wanted)
}

fn to_sse(event: &Event) -> SseEvent {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_owned());
    SseEvent::default().event(event.name()).data(data)
}

/// Where a stream stands.
enum Phase {
    /// Sending the pending questions page by page; `cursor` is the next page's.
    Backlog { page: VecDeque<Question>, cursor: Option<String>, read: bool },
    /// Sending the events a reconnecting client missed.
    Missed(VecDeque<Arc<Logged>>),
    /// Sending events as they happen.
    Live,
}

struct Stream {
    engine: Engine,
    live: broadcast::Receiver<Arc<Logged>>,
    phase: Phase,
    conversation: Option<Conversation>,
    /// Who follows it: a person sees only their own questions and runs.
    caller: Caller,
    /// The caller's credential, held: the stream ends when it is revoked or expires, before
    /// anything else is sent.
    held: Held,
    /// The id of the latest event before the subscription (sent with `replay.done`).
    at: String,
    /// This process's id prefix: `<boot>-`.
    prefix: String,
    stop: CancellationToken,
    /// Taken to read a page of the backlog.
    backlog_reads: Arc<tokio::sync::Semaphore>,
    /// Held while the stream lives: one of the capped number of streams.
    _permit: OwnedSemaphorePermit,
}

impl Stream {
    fn live_event(&self, logged: &Logged) -> SseEvent {
        SseEvent::default().event(logged.event.name()).data(logged.json()).id(format!("{}{}", self.prefix, logged.seq))
    }

    /// The next event to send; none ends the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if self.held.is_ended() {
                tracing::info!(user = %self.caller.user, "an event stream's credential was revoked or expired");
                return None;
            }
            match &mut self.phase {
                Phase::Backlog { page, cursor, read } => {
                    if let Some(question) = page.pop_front() {
                        if !self.caller.sees(&question) {
                            continue;
                        }
                        // No id: a client cut off in the backlog needs it all again.
                        return Some(to_sse(&Event::Asked(Arc::new(question))));
                    }
                    if *read && cursor.is_none() {
                        self.phase = Phase::Live;
                        // Every card the client still shows but did not get again was
                        // resolved meanwhile; the id resumes from here.
                        return Some(SseEvent::default().event("replay.done").data("{}").id(self.at.clone()));
                    }
                    let filter = QuestionFilter {
                        conversation: self.conversation.clone(),
                        status: Some(Status::Pending),
                        kind: None,
                    };
                    // One stream reads its backlog at a time: however many connect at once,
                    // the store keeps readers free for everything else.
                    let Ok(_turn) = self.backlog_reads.acquire().await else { return None };
                    match self.engine.records().questions_page(&filter, cursor.as_deref(), BACKLOG_PAGE).await {
                        Ok((questions, next)) => {
                            *page = questions.into();
                            *cursor = next;
                            *read = true;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "could not read pending questions for an event stream");
                            return None;
                        }
                    }
                }
                Phase::Missed(missed) => match missed.pop_front() {
                    Some(logged) if concerns(&logged.event, self.conversation.as_ref(), &self.caller) => {
                        return Some(self.live_event(&logged));
                    }
                    Some(_) => {}
                    None => self.phase = Phase::Live,
                },
                Phase::Live => {
                    // Biased: an event that came after the revocation is never sent.
                    let next = tokio::select! {
                        biased;
                        () = self.held.ended() => continue,
                        () = self.stop.cancelled() => return None,
                        next = self.live.recv() => next,
                    };
                    match next {
                        Ok(logged) if concerns(&logged.event, self.conversation.as_ref(), &self.caller) => {
                            return Some(self.live_event(&logged));
                        }
                        Ok(_) => {}
                        Err(RecvError::Lagged(missed)) => {
                            // It does not read fast enough: end the stream rather than hold
                            // events for it; it reconnects and resumes from its last id.
                            tracing::info!(missed, "an event stream fell behind and was closed");
                            return None;
                        }
                        Err(RecvError::Closed) => return None,
                    }
                }
            }
        }
    }
}

pub(super) async fn stream(
    Reader(caller): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
    Params(query): Params<EventsQuery>,
) -> Result<Response, ApiError> {
    let conversation = conversation_param(query.conversation.as_deref())?;
    let permit = state.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            "too many event streams are open; close one or raise gateway.max_event_streams",
        )
    })?;
    let held = Held::of(&state, &caller).await?;
    let last_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let subscription = state.engine.subscribe_since(last_id);
    let phase = match subscription.missed {
        Some(missed) => Phase::Missed(missed.into()),
        None => {
            // The first page now, so that the backlog is as of the connection (later pages
            // follow as the client reads).
            let filter =
                QuestionFilter { conversation: conversation.clone(), status: Some(Status::Pending), kind: None };
            let turn = state.backlog_reads.acquire().await.map_err(ApiError::internal)?;
            let (page, cursor) = state.engine.records().questions_page(&filter, None, BACKLOG_PAGE).await?;
            drop(turn);
            Phase::Backlog { page: page.into(), cursor, read: true }
        }
    };
    let prefix = subscription.at.rsplit_once('-').map(|(boot, _)| format!("{boot}-")).unwrap_or_default();
    let stream = Stream {
        stop: state.engine.stopping(),
        engine: state.engine.clone(),
        live: subscription.live,
        phase,
        conversation,
        caller,
        held,
        at: subscription.at,
        prefix,
        backlog_reads: state.backlog_reads.clone(),
        _permit: permit,
    };
    let events = stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok::<_, Infallible>(event), stream))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}
