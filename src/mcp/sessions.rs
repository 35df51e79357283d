//! MCP sessions (protocol revision 2025-11-25) that cost little while idle. An rmcp session
//! that runs holds a worker and a serve task with six channels, each allocating a first block
//! of 32 messages of about 500 bytes as it is made: about 100 KB a session, idle or not (the
//! session benchmark measured it). [`Sessions`] keeps rmcp's [`LocalSessionManager`] for the
//! sessions that are doing something (a request in flight, a response's stream open), and puts a
//! session away as soon as it is doing nothing: its running part ends, and a small record stays
//! (the client's `initialize` parameters, the token that opened it, when it was last used). The
//! next request on its `Mcp-Session-Id` starts it again with the same id, replaying the
//! client's `initialize` and `notifications/initialized` to a new handler, as rmcp's own
//! session restore does. (That restore, `StreamableHttpServerConfig::session_store`, starts a
//! session only from `has_session`, before the request is counted on it, so a session put away
//! in between would drop the request; here counting and starting are one step.) A session put
//! away is forgotten once it was unused for `session_timeout`, as a running one ends.
//!
//! A session is put away only with nothing in flight (no request of the client's unanswered,
//! no request of askgate's, such as a form, unanswered by the client), so held calls, their
//! progress, elicitation and cancellation run in a running session as before. The client's
//! standalone event stream (`GET /mcp`), which clients keep open all along, does not keep it
//! running: askgate holds that stream itself ([`listening`]). What a session put away loses:
//! the replay of a finished response's stream by `Last-Event-ID`.

mod listening;
mod run;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetExtensions, InitializeRequestParams, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use rmcp::transport::{Transport, WorkerTransport};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Server, Token};

/// askgate's MCP sessions: rmcp's local ones while they run, a record while put away.
#[derive(Clone)]
pub(super) struct Sessions(Arc<Shared>);

struct Shared {
    local: LocalSessionManager,
    records: Mutex<Records>,
    /// Told whenever a session stops closing or starting.
    changed: Notify,
    /// The handler a session started again gets (a clone).
    server: Server,
    stop: CancellationToken,
    timeout: Duration,
}

#[derive(Default)]
struct Records {
    by_id: HashMap<SessionId, Record>,
    /// How many records there may be before the expired ones are dropped.
    prune_at: usize,
}

/// What askgate keeps of a session.
struct Record {
    /// The client's `initialize` (none until it came).
    params: Option<InitializeRequestParams>,
    /// The token of the request that opened it.
    owner: Option<String>,
    /// Which run of the session the state is of: 1 is the one rmcp started at `initialize`.
    run: u64,
    state: State,
    used: Instant,
    /// The standalone event stream its client holds (none until it opened one).
    listening: Option<Box<listening::Listener>>,
}

enum State {
    /// rmcp's session runs: `busy` holds the requests it has yet to answer, `asked` its own
    /// requests the client has yet to answer, `streams` counts the streams of its responses
    /// open on it (resumed by `Last-Event-ID`), `ready` says whether the client's
    /// `initialized` came.
    Running { busy: Vec<RequestId>, asked: Vec<RequestId>, streams: usize, ready: bool },
    /// Its running part is ending.
    Closing,
    /// Being started again.
    Starting,
    /// Only the record is left.
    Away,
}

/// Errors of askgate's MCP sessions.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    /// No session has this id (it ended, or never was).
    #[error("no MCP session {0}")]
    Unknown(SessionId),
    /// The session could not be started again.
    #[error("the MCP session {0} could not be started again")]
    Restart(SessionId),
    /// rmcp's session failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// What a request or stream holds of a running session.
#[derive(Clone)]
enum Use {
    /// A request, until it is answered.
    Request(RequestId),
    /// A request of askgate's to the client, until the client answers it or askgate cancels it.
    Asked(RequestId),
    /// An event stream, until it closes.
    Stream,
    /// A notification or an answer, only while it is taken.
    Message,
}

impl Sessions {
    /// Sessions whose handler is a clone of `server`, ended by `stop`, forgotten after
    /// `timeout` without a request (running ones end then too).
    pub(super) fn new(server: Server, stop: CancellationToken, timeout: Duration) -> Self {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(timeout);
        let records = Mutex::new(Records { by_id: HashMap::new(), prune_at: PRUNE_MIN });
        let changes = server.upstreams.sessions().changes();
        let shared = Arc::new(Shared { local, records, changed: Notify::new(), server, stop, timeout });
        shared.server.engine.tasks().spawn(shared.clone().background(changes));
        Self(shared)
    }

    /// Whether a request with `token` may use the session `id`: only the token that opened it
    /// may (so a revoked token's session ends with it). An unknown id is rmcp's to refuse.
    pub(super) fn admits(&self, id: &str, token: Option<&str>) -> bool {
        let records = self.0.lock();
        records.by_id.get(id).is_none_or(|record| record.owner.as_deref() == token)
    }
}

/// How many records there may be before expired ones are first looked for.
const PRUNE_MIN: usize = 1024;

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `what` on the session `id` and the run it counted on, starting the session
    /// again when it was put away (except for a message, which has nothing to start it for:
    /// none then).
    async fn hold(
        self: &Arc<Self>,
        id: &SessionId,
        what: Use,
        parts: Option<&axum::http::request::Parts>,
    ) -> Result<Option<u64>, SessionsError> {
        loop {
            // Made before the look, so a change told meanwhile is not missed.
            let changed = self.changed.notified();
            let start = {
                let mut records = self.lock();
                let Some(record) = records.by_id.get_mut(id) else { return Err(SessionsError::Unknown(id.clone())) };
                record.used = Instant::now();
                match &mut record.state {
                    State::Running { busy, streams, .. } => {
                        match what {
                            Use::Request(request) => busy.push(request),
                            Use::Stream => *streams += 1,
                            Use::Asked(_) | Use::Message => {}
                        }
                        return Ok(Some(record.run));
                    }
                    State::Away if matches!(what, Use::Message | Use::Asked(_)) => return Ok(None),
                    State::Away => {
                        let Some(params) = record.params.clone() else {
                            return Err(SessionsError::Unknown(id.clone()));
                        };
                        record.state = State::Starting;
                        record.run += 1;
                        Some((params, record.run))
                    }
                    State::Closing | State::Starting => None,
                }
            };
            match start {
                Some((params, run)) => self.restart(id, run, params, parts).await?,
                // Another request is closing or starting it: look again once that is done.
                None => changed.await,
            }
        }
    }

    /// What ended: the request `request` was answered, an event stream closed, or nothing
    /// (`Use::Message`); a session left with nothing to do is put away.
    fn release(self: &Arc<Self>, id: &SessionId, run: u64, what: Use) {
        let mut records = self.lock();
        let Some(record) = records.by_id.get_mut(id).filter(|r| r.run == run) else { return };
        let State::Running { busy, asked, streams, ready } = &mut record.state else { return };
        match what {
            Use::Request(request) => forget(busy, &request),
            Use::Asked(request) => forget(asked, &request),
            Use::Stream => *streams = streams.saturating_sub(1),
            Use::Message => {}
        }
        record.used = Instant::now();
        if !(*ready && busy.is_empty() && asked.is_empty() && *streams == 0 && record.params.is_some()) {
            return;
        }
        // Dropped as askgate stops (outside its runtime), it is ending anyway.
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        record.state = State::Closing;
        drop(records);
        let (shared, id) = (self.clone(), id.clone());
        self.server.engine.tasks().spawn(async move { shared.close_local(&id).await });
    }

    /// askgate's run `run` of the session `id` sent the client its request `request`: the
    /// session is not put away until the client answers it (or askgate cancels it).
    fn asking(&self, id: &SessionId, run: u64, request: RequestId) {
        let mut records = self.lock();
        if let Some(record) = records.by_id.get_mut(id).filter(|r| r.run == run)
            && let State::Running { asked, .. } = &mut record.state
        {
            asked.push(request);
        }
    }

    /// The run `run` of the session `id` ended (one started again here; rmcp tells of its
    /// first run through [`SessionManager::close_session`]).
    async fn ended(&self, id: &SessionId, run: u64) {
        let forget = {
            let mut records = self.lock();
            match records.by_id.get_mut(id) {
                Some(record) if record.run == run && matches!(record.state, State::Closing) => {
                    record.state = State::Away;
                    tracing::debug!(session = %id, "an idle MCP session was put away");
                    false
                }
                // It ended by itself (idle past the timeout, or askgate stopping).
                Some(record) if record.run == run => {
                    records.by_id.remove(id);
                    true
                }
                _ => false,
            }
        };
        self.changed.notify_waiters();
        if forget {
            self.close_local(id).await;
        }
    }

    /// Ends rmcp's session `id`, if it still has it.
    async fn close_local(&self, id: &SessionId) {
        if let Err(e) = self.local.close_session(id).await {
            tracing::warn!(session = %id, error = %e, "an MCP session did not close");
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = Watched;

    async fn create_session(&self) -> Result<(SessionId, Watched), SessionsError> {
        let (id, transport) = self.0.local.create_session().await?;
        let mut records = self.0.lock();
        if records.by_id.len() >= records.prune_at {
            let timeout = self.0.timeout;
            records.by_id.retain(|_, r| !(matches!(r.state, State::Away) && r.used.elapsed() >= timeout));
            records.prune_at = (records.by_id.len() * 2).max(PRUNE_MIN);
        }
        let state = State::Running { busy: Vec::new(), asked: Vec::new(), streams: 0, ready: false };
        let record = Record { params: None, owner: None, run: 1, state, used: Instant::now(), listening: None };
        records.by_id.insert(id.clone(), record);
        Ok((id.clone(), Watched { inner: transport, sessions: self.0.clone(), id, run: 1 }))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionsError> {
        if let JsonRpcMessage::Request(request) = &message
            && let ClientRequest::InitializeRequest(initialize) = &request.request
            && let Some(record) = self.0.lock().by_id.get_mut(id)
        {
            record.params = Some(initialize.params.clone());
            record.owner = parts(&message).and_then(|p| p.extensions.get::<Token>()).map(|t| t.0.clone());
        }
        Ok(self.0.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionsError> {
        let mut records = self.0.lock();
        let expired =
            records.by_id.get(id).map(|r| matches!(r.state, State::Away) && r.used.elapsed() >= self.0.timeout);
        if expired == Some(true) {
            records.by_id.remove(id);
        }
        Ok(expired == Some(false))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionsError> {
        let forget = {
            let mut records = self.0.lock();
            match records.by_id.get_mut(id) {
                // The first run ended because it was put away: rmcp tells of it here.
                Some(record) if record.run == 1 && matches!(record.state, State::Closing) => {
                    record.state = State::Away;
                    tracing::debug!(session = %id, "an idle MCP session was put away");
                    false
                }
                // The client's DELETE, or the first run ended by itself.
                Some(_) => {
                    records.by_id.remove(id);
                    true
                }
                None => true,
            }
        };
        self.0.changed.notify_waiters();
        if forget {
            self.0.local.close_session(id).await?;
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        let what = match &message {
            JsonRpcMessage::Request(request) => Use::Request(request.id.clone()),
            _ => Use::Message,
        };
        let undo = what.clone();
        let run = self.0.hold(id, what, parts(&message)).await?.ok_or_else(|| SessionsError::Unknown(id.clone()))?;
        match self.0.local.create_stream(id, message).await {
            Ok(stream) => Ok(stream),
            Err(e) => {
                self.0.release(id, run, undo);
                Err(e.into())
            }
        }
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), SessionsError> {
        let initialized = matches!(&message, JsonRpcMessage::Notification(n)
            if matches!(n.notification, ClientNotification::InitializedNotification(_)));
        let done = match &message {
            JsonRpcMessage::Notification(n) => match &n.notification {
                ClientNotification::CancelledNotification(c) => c.params.request_id.clone().map(Use::Request),
                _ => None,
            },
            // The client answered a request of askgate's.
            JsonRpcMessage::Response(response) => Some(Use::Asked(response.id.clone())),
            JsonRpcMessage::Error(error) => error.id.clone().map(Use::Asked),
            _ => None,
        };
        // A session put away has nothing in flight for a notification or an answer to be about.
        let Some(run) = self.0.hold(id, Use::Message, parts(&message)).await? else { return Ok(()) };
        let accepted = self.0.local.accept_message(id, message).await;
        if initialized
            && let Some(record) = self.0.lock().by_id.get_mut(id).filter(|r| r.run == run)
            && let State::Running { ready, .. } = &mut record.state
        {
            *ready = true;
        }
        self.0.release(id, run, done.unwrap_or(Use::Message));
        Ok(accepted?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        let (stream, running) = {
            let mut records = self.0.lock();
            let Some(record) = records.by_id.get_mut(id) else { return Err(SessionsError::Unknown(id.clone())) };
            record.used = Instant::now();
            let stream = run::listener(&mut record.listening).open();
            (stream, matches!(record.state, State::Running { .. }).then_some(record.run))
        };
        // A session put away forwards once it starts again.
        if let Some(run) = running {
            self.0.forward(id, run).await;
        }
        Ok(stream)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        // The standalone stream's events are not kept: the client gets a new stream.
        if listening::is_standalone(&last_event_id) {
            return Ok(self.create_standalone_stream(id).await?.left_stream());
        }
        let run = self.0.hold(id, Use::Stream, None).await?.ok_or_else(|| SessionsError::Unknown(id.clone()))?;
        let open = OpenStream { sessions: self.0.clone(), id: id.clone(), run };
        let stream = self.0.local.resume(id, last_event_id).await?;
        Ok(stream
            .map(move |message| {
                let _open = &open;
                message
            })
            .right_stream())
    }
}

/// Takes `request` out of `requests`.
fn forget(requests: &mut Vec<RequestId>, request: &RequestId) {
    if let Some(at) = requests.iter().position(|r| r == request) {
        requests.swap_remove(at);
    }
}

/// The HTTP request parts rmcp puts in a client message's extensions.
fn parts(message: &ClientJsonRpcMessage) -> Option<&axum::http::request::Parts> {
    match message {
        JsonRpcMessage::Request(r) => r.request.extensions().get(),
        JsonRpcMessage::Notification(n) => n.notification.extensions().get(),
        _ => None,
    }
}

/// An event stream open on a session: it keeps the session running until it closes.
struct OpenStream {
    sessions: Arc<Shared>,
    id: SessionId,
    run: u64,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.sessions.release(&self.id, self.run, Use::Stream);
    }
}

/// A running session's transport, which tells [`Sessions`] when a request was answered.
pub(super) struct Watched {
    inner: WorkerTransport<LocalSessionWorker>,
    sessions: Arc<Shared>,
    id: SessionId,
    run: u64,
}

impl Transport<RoleServer> for Watched {
    type Error = <WorkerTransport<LocalSessionWorker> as Transport<RoleServer>>::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let done = match &item {
            JsonRpcMessage::Response(response) => Some(Use::Request(response.id.clone())),
            JsonRpcMessage::Error(error) => error.id.clone().map(Use::Request),
            JsonRpcMessage::Request(request) => {
                // Counted before it leaves, so the client's answer finds the session running.
                self.sessions.asking(&self.id, self.run, request.id.clone());
                None
            }
            // askgate took its request back (a form answered elsewhere).
            JsonRpcMessage::Notification(n) => match &n.notification {
                ServerNotification::CancelledNotification(c) => c.params.request_id.clone().map(Use::Asked),
                _ => None,
            },
        };
        let sent = self.inner.send(item);
        let (sessions, id, run) = (self.sessions.clone(), self.id.clone(), self.run);
        async move {
            let result = sent.await;
            if let Some(done) = done {
                sessions.release(&id, run, done);
            }
            result
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Refuses a request on a session opened with another token (404, as for an unknown session):
/// a session is its token's, and ends for good when that is revoked.
pub(super) async fn owned(
    axum::extract::State(sessions): axum::extract::State<Sessions>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let id = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
    let token = request.extensions().get::<Token>().map(|t| t.0.as_str());
    if let Some(id) = id
        && !sessions.admits(id, token)
    {
        return (axum::http::StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    next.run(request).await
}
