//! How a call waits for a person, and what its end means for the question.
//!
//! A person's answer often takes longer than an agent's client waits: the client times the
//! call out (Claude Code after 30–60 s, the OpenAI Agents SDK after 5 s), its connection drops,
//! or the agent restarts. None of that loses the question: the call is *detached*, the question
//! keeps waiting, and calling the same tool again with the same arguments (by the same agent
//! and client) attaches to it — no second card — and returns its outcome as soon as there is
//! one, also when it was answered in between ([`OpenAsks`]). Only a deliberate cancel (the
//! user of the agent stopped the call, or cancelled its task) cancels the question and
//! retracts its cards.
//!
//! A client tells the two apart only by the reason of its `notifications/cancelled`: rmcp
//! sends `request timeout`, the TypeScript SDK `… Request timed out`; a user's cancel says
//! something else, or nothing. A 2026-07-28 client over HTTP sends none: it cancels a call by
//! closing its stream, as a dropped connection closes it. Such a call is *gone*
//! ([`Ending::Gone`]): its question waits `reattach_grace` for the same call (or `get_outcome`)
//! to come back, and is cancelled after that, so that no card waits for an answer nobody hears.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::response::IntoResponse;
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken, RequestId};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext};
use rmcp::task_manager::{TaskContext, TaskManager};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::question::{Question, QuestionId, UserRef};

/// How long a cancelled call waits for the reason of its cancellation, which rmcp hands to
/// the server just after it cancels the call.
const REASON_WAIT: Duration = Duration::from_millis(500);

/// How long an ask stays attachable after its question's deadline (or, for one that never
/// expires, after it was asked), when no call took its outcome.
const KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// How many cancellations are kept with their reason. Only a waiting call takes one, just
/// after it was cancelled; the others (a call that was not waiting for a person) are dropped
/// oldest first.
const REASONS_KEPT: usize = 256;

/// The reasons of the latest cancellations clients sent, by agent and request id. They are
/// shared by all sessions and requests: a 2026-07-28 client has no session, and its
/// `notifications/cancelled` comes in a request of its own, not the one it cancels.
#[derive(Default)]
pub(super) struct Cancels {
    reasons: Mutex<VecDeque<(Cancelled, Option<String>)>>,
    heard: Notify,
    /// Calls without a session that wait for a person: rmcp hands their cancellation to no
    /// one, so hearing it here cancels them.
    waiting: Mutex<HashMap<Cancelled, CancellationToken>>,
}

/// A cancelled request: the agent whose token it carried, and its id.
type Cancelled = (String, RequestId);

impl Cancels {
    /// Records that `agent`'s client cancelled `id`, and why.
    pub(super) fn heard(&self, agent: String, id: RequestId, reason: Option<String>) {
        let id = (agent, id);
        if let Some(call) = self.waiting.lock().unwrap_or_else(PoisonError::into_inner).get(&id) {
            call.cancel();
        }
        let mut reasons = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
        if reasons.len() == REASONS_KEPT {
            reasons.pop_front();
        }
        reasons.push_back((id, reason));
        drop(reasons);
        self.heard.notify_waiters();
    }

    fn take(&self, id: &Cancelled) -> Option<Option<String>> {
        let mut reasons = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
        let at = reasons.iter().position(|(heard, _)| heard == id)?;
        reasons.remove(at).map(|(_, reason)| reason)
    }

    /// Why the client cancelled `id` (taking it): `None` when no cancellation came for it
    /// within [`REASON_WAIT`].
    async fn reason(&self, id: &Cancelled) -> Option<Option<String>> {
        let deadline = tokio::time::Instant::now() + REASON_WAIT;
        loop {
            let heard = self.heard.notified();
            if let Some(reason) = self.take(id) {
                return Some(reason);
            }
            if tokio::time::timeout_at(deadline, heard).await.is_err() {
                return None;
            }
        }
    }
}

/// A waiting call without a session, listed in [`Cancels`] while it lives.
pub(super) struct Listed {
    cancels: Arc<Cancels>,
    id: Cancelled,
}

impl Listed {
    fn new(cancels: &Arc<Cancels>, id: &Cancelled, call: &CancellationToken) -> Self {
        cancels.waiting.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), call.clone());
        Self { cancels: cancels.clone(), id: id.clone() }
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.cancels.waiting.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
    }
}

/// Why a wait ended before its outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The user of the agent cancelled the call or its task: the question is cancelled with
    /// this reason (`client`).
    Deliberate(&'static str),
    /// The client stopped waiting (a timeout, a closed session): the question goes on waiting
    /// for a call that attaches to it.
    Detached(&'static str),
    /// A 2026-07-28 client closed the call's stream without a word: a cancel, or a connection
    /// that dropped. The question waits for the same call to come back within the grace, and is
    /// cancelled after it.
    Gone,
}

/// Whether a cancellation's reason is a client's timeout rather than a person's decision.
fn is_timeout(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    reason.contains("timeout") || reason.contains("timed out")
}

/// Who waits for an outcome, and how they hear that it still waits.
pub(super) enum Waiter {
    /// A tool call held open: progress notifications when the client sent a progress token,
    /// else a `ping` on the call's stream. Either way the session sees traffic every
    /// `progress_every`, so it is not reaped as idle while the call waits.
    Call {
        id: Cancelled,
        cancelled: CancellationToken,
        /// Keeps a call without a session cancellable by its client's notification.
        _listed: Option<Listed>,
        cancels: Arc<Cancels>,
        peer: Peer<RoleServer>,
        progress: Option<(ProgressToken, u32)>,
        /// Made without a session (2026-07-28).
        sessionless: bool,
    },
    /// A task the client polls: its status message.
    Task(TaskContext),
}

impl Waiter {
    /// For a call held open: cancelled with it; progress when the client sent a token.
    pub(super) fn call(context: &RequestContext<RoleServer>, agent: String, cancels: &Arc<Cancels>) -> Self {
        let sessionless = context
            .extensions
            .get::<axum::http::request::Parts>()
            .is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"));
        let id = (agent, context.id.clone());
        let cancelled = context.ct.child_token();
        let listed = sessionless.then(|| Listed::new(cancels, &id, &cancelled));
        Self::Call {
            id,
            cancelled,
            _listed: listed,
            cancels: cancels.clone(),
            peer: context.peer.clone(),
            progress: context.meta.get_progress_token().map(|token| (token, 0)),
            sessionless,
        }
    }

    pub(super) async fn cancelled(&self) {
        match self {
            Self::Call { cancelled, .. } => cancelled.cancelled().await,
            Self::Task(context) => context.cancelled().await,
        }
    }

    /// Why the wait ended before its outcome (once [`Waiter::cancelled`] returned). A task's
    /// cancel is always deliberate: a client that polls has no timeout of its own.
    pub(super) async fn ending(&self) -> Ending {
        match self {
            Self::Call { peer, .. } if peer.is_transport_closed() => Ending::Detached("session_closed"),
            Self::Call { id, cancels, peer, sessionless, .. } => match cancels.reason(id).await {
                Some(Some(reason)) if is_timeout(&reason) => Ending::Detached("timeout"),
                // The session ended meanwhile, which ended the call.
                None if peer.is_transport_closed() => Ending::Detached("session_closed"),
                // A client without a session (2026-07-28) cancels by closing the call's stream,
                // which is also what a dropped connection looks like: it may come back.
                None if *sessionless => Ending::Gone,
                _ => Ending::Deliberate("client"),
            },
            Self::Task(_) => Ending::Deliberate("client"),
        }
    }

    pub(super) async fn report(&mut self, message: String) {
        match self {
            Self::Call { peer, progress: Some((token, ticks)), .. } => {
                *ticks += 1;
                let note = ProgressNotificationParam::new(token.clone(), f64::from(*ticks)).with_message(message);
                if let Err(e) = peer.notify_progress(note).await {
                    tracing::debug!(error = %e, "could not send a progress notification");
                }
            }
            Self::Call { peer, progress: None, .. } => {
                // Sent from the call's own task, the ping rides the call's stream; its answer
                // is not awaited (a client that never reads it loses nothing).
                let ping = rmcp::model::ServerRequest::PingRequest(rmcp::model::PingRequest::default());
                if let Err(e) = peer.send_cancellable_request(ping, PeerRequestOptions::no_options()).await {
                    tracing::debug!(error = %e, "could not send a keep-alive ping");
                }
            }
            Self::Task(context) => context.set_status_message(message),
        }
    }
}

/// What makes two calls the same ask: who asks (agent and client), the tool, and its
/// arguments but `wait` (which says how to wait, not what is asked). Object keys are sorted,
/// so the same arguments in another order are the same ask.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct AskKey {
    asker: String,
    tool: String,
    arguments: String,
}

impl AskKey {
    /// A call of one of askgate's own tools.
    pub(super) fn new(asker: &UserRef, tool: &str, arguments: &Map<String, Value>) -> Self {
        let mut arguments = arguments.clone();
        arguments.remove("wait");
        Self::gated(asker, tool, &arguments)
    }

    /// A gated call of an upstream's tool (`<upstream>__<tool>`): all its arguments are the
    /// upstream's.
    pub(super) fn gated(asker: &UserRef, tool: &str, arguments: &Map<String, Value>) -> Self {
        Self {
            asker: asker.to_string(),
            tool: tool.to_owned(),
            arguments: canonical(&Value::Object(arguments.clone())),
        }
    }
}

/// A value as text with every object's keys in order: the same arguments in any order are the
/// same text (askgate's JSON objects keep the order they were written in).
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

struct Open {
    question: QuestionId,
    kept_until: i64,
    /// Calls waiting on it now.
    waiting: u32,
    /// Set while its last call is gone and it waits for one to come back: cancelled when one
    /// does.
    back: Option<CancellationToken>,
}

/// The asks whose outcome no call has taken yet, by what was asked. An entry goes when a call
/// returns the question's outcome (or `get_outcome` does), when the question is cancelled
/// deliberately, or a day after its deadline.
///
/// Kept in this process: an agent that comes back to another askgate instance sharing the
/// database, or to this one after a restart (which cancels an agent's waiting questions),
/// asks anew.
#[derive(Default)]
pub(super) struct OpenAsks(Mutex<HashMap<AskKey, Open>>);

impl OpenAsks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AskKey, Open>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The question an earlier call with the same key asked and no call took the outcome of;
    /// a call that finds it has come back to it.
    pub(super) fn find(&self, key: &AskKey, now: i64) -> Option<QuestionId> {
        let mut open = self.lock();
        open.retain(|_, o| o.kept_until > now);
        let found = open.get_mut(key)?;
        if let Some(back) = found.back.take() {
            back.cancel();
        }
        Some(found.question)
    }

    /// Keeps `question`, just asked for `key`.
    pub(super) fn asked(&self, key: AskKey, question: &Question) {
        let kept_until = question.expires_at.unwrap_or(question.created_at).saturating_add(KEPT_MS);
        let open = Open { question: question.id, kept_until, waiting: 0, back: None };
        self.lock().insert(key, open);
    }

    /// Forgets `question`: its outcome was handed to a call, or it was cancelled.
    pub(super) fn taken(&self, question: QuestionId) {
        self.lock().retain(|_, o| {
            let keep = o.question != question;
            if let (false, Some(back)) = (keep, &o.back) {
                back.cancel();
            }
            keep
        });
    }

    /// A client asked for `question`'s outcome by its id (`get_outcome`): it came back to it.
    pub(super) fn came_back(&self, question: QuestionId) {
        for open in self.lock().values_mut().filter(|o| o.question == question) {
            if let Some(back) = open.back.take() {
                back.cancel();
            }
        }
    }

    /// Counts a call waiting on `question` while the guard lives.
    pub(super) fn waiting(self: &Arc<Self>, question: QuestionId) -> Waiting {
        for open in self.lock().values_mut().filter(|o| o.question == question) {
            open.waiting += 1;
        }
        Waiting { open: self.clone(), question }
    }

    /// `question`'s call went away without saying why: cancelled when a call comes back (the
    /// same call again, or `get_outcome`); none when no entry keeps it.
    pub(super) fn gone(&self, question: QuestionId) -> Option<CancellationToken> {
        let mut open = self.lock();
        let entry = open.values_mut().find(|o| o.question == question)?;
        let back = entry.back.get_or_insert_with(CancellationToken::new);
        Some(back.clone())
    }

    /// Whether a call waits on `question` now.
    pub(super) fn is_waited_on(&self, question: QuestionId) -> bool {
        self.lock().values().any(|o| o.question == question && o.waiting > 0)
    }
}

/// A call waiting on a question, counted in [`OpenAsks`] while it lives.
pub(super) struct Waiting {
    open: Arc<OpenAsks>,
    question: QuestionId,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        for open in self.open.lock().values_mut().filter(|o| o.question == self.question) {
            open.waiting = open.waiting.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_same_ask_is_its_arguments_in_any_order_without_wait_by_the_same_asker() {
        let asker = UserRef::parse("mcp:agent.claude-code").unwrap();
        let object = |v: Value| v.as_object().cloned().unwrap();
        let key = AskKey::new(&asker, "confirm", &object(json!({"prompt": "Ship?", "timeout": 60})));
        let nested = |a: Value| AskKey::new(&asker, "ask_user", &object(json!({"prompt": "x", "schema": a})));
        assert_eq!(nested(json!({"a": 1, "b": {"c": 2, "d": 3}})), nested(json!({"b": {"d": 3, "c": 2}, "a": 1})));
        let same = AskKey::new(&asker, "confirm", &object(json!({"timeout": 60, "prompt": "Ship?", "wait": false})));
        assert_eq!(key, same);
        assert_ne!(key, AskKey::new(&asker, "confirm", &object(json!({"prompt": "Ship it?", "timeout": 60}))));
        assert_ne!(key, AskKey::new(&asker, "ask_user", &object(json!({"prompt": "Ship?", "timeout": 60}))));
        let other = UserRef::parse("mcp:agent.cursor").unwrap();
        assert_ne!(key, AskKey::new(&other, "confirm", &object(json!({"prompt": "Ship?", "timeout": 60}))));
    }

    #[test]
    fn the_latest_reasons_are_kept_and_a_waiting_call_takes_its_own() {
        let cancels = Cancels::default();
        for n in 0..=REASONS_KEPT as i64 {
            cancels.heard("agent".into(), RequestId::Number(n), Some(format!("reason {n}")));
        }
        let id = |n| ("agent".to_owned(), RequestId::Number(n));
        assert_eq!(cancels.take(&id(0)), None, "the oldest is dropped");
        assert_eq!(cancels.take(&("other".to_owned(), RequestId::Number(5))), None, "another agent's is not this");
        assert_eq!(cancels.take(&id(5)), Some(Some("reason 5".to_owned())));
        assert_eq!(cancels.take(&id(5)), None, "taken once");
    }

    #[test]
    fn only_a_timeout_detaches() {
        assert!(is_timeout("request timeout"));
        assert!(is_timeout("McpError: MCP error -32001: Request timed out"));
        assert!(!is_timeout("the agent moved on"));
        assert!(!is_timeout("User cancelled"));
    }
}

/// The tasks of each agent token. A task outlives the request that made it (2026-07-28
/// clients have no session, and a 2025-11-25 client may poll from a new one); an agent sees
/// only its own, and within one agent a task's id (random) is its handle. Agent tokens are the
/// operator's, so the lists are as many.
#[derive(Default)]
pub(super) struct TaskLists(Mutex<HashMap<String, TaskManager>>);

impl TaskLists {
    pub(super) fn of(&self, agent: &str) -> TaskManager {
        let mut lists = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        lists.entry(agent.to_owned()).or_default().clone()
    }
}

/// Hears the cancellations of clients without a session before rmcp does: its stateless
/// transport answers their notifications 202 and drops them, while the reason is what tells a
/// client that gave up (a timeout) from one whose user cancelled. Other requests pass as they
/// came. Bodies are bounded by `max_body`, as rmcp bounds them.
pub(super) async fn sessionless_cancels(
    axum::extract::State((cancels, max_body)): axum::extract::State<(Arc<Cancels>, usize)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() != axum::http::Method::POST || request.headers().contains_key("mcp-session-id") {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body).await else {
        let message = format!("a message to /mcp may be at most {max_body} bytes");
        return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, message).into_response();
    };
    if let Some((id, reason)) = cancellation(&bytes) {
        let agent = parts.extensions.get::<super::AgentName>().map_or_else(|| "agent".to_owned(), |a| a.0.clone());
        cancels.heard(agent, id, reason);
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// The request id and reason of a `notifications/cancelled`; none for any other message.
fn cancellation(body: &[u8]) -> Option<(RequestId, Option<String>)> {
    const METHOD: &[u8] = b"notifications/cancelled";
    // Most messages are not cancellations: only those are parsed.
    body.windows(METHOD.len()).any(|w| w == METHOD).then_some(())?;
    let message: Value = serde_json::from_slice(body).ok()?;
    if message.get("method")?.as_str()? != "notifications/cancelled" || message.get("id").is_some() {
        return None;
    }
    let params = message.get("params")?;
    let id = serde_json::from_value(params.get("requestId")?.clone()).ok()?;
    Some((id, params.get("reason").and_then(Value::as_str).map(str::to_owned)))
}
