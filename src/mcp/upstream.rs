//! Upstream MCP servers (`[[mcp.upstream]]`): askgate starts or connects to each, keeps its
//! tool list, restarts one that stops (with backoff), and reports its state as the health of
//! `mcp:<name>`. Their tools are offered on `/mcp` as `<name>__<tool>`.
//!
//! Each call is bounded: it fails after the upstream's `call_timeout` (and is cancelled
//! there), and a result over its `max_result` is a tool error. A stdio upstream's stdout is
//! read through [`Lines`], so a line over the limit is never held whole: it is answered, for
//! the call it belongs to, with an error in its place.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytesize::ByteSize;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, ProtocolVersion, Tool};
use rmcp::service::{ClientInitializeError, NotificationContext, Peer, RunningService};
use rmcp::service::{SubscriptionContext, SubscriptionSink};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, RoleServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::lines::{Line, Lines, Oversized};

use crate::config::{UpstreamConfig, UpstreamTransport};
use crate::engine::ChannelState;
use crate::engine::{Engine, Tasks};

/// The longest pause between two attempts to start an upstream.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long an upstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one session or stream may take to hear that the tools changed (a stuck one is passed over).
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(1);
/// Room for the JSON-RPC envelope around a result, on top of `max_result`, in the
/// transports' own limits (which then never cut a result the cap would let through).
const ENVELOPE: u64 = 64 * 1024;
/// rmcp's own limit on one message from an HTTP upstream, raised when `max_result` is larger.
const RMCP_HTTP_LIMIT: u64 = 16 * 1024 * 1024;
/// Marks the error askgate writes for a stdio result over the limit, told from the upstream's own errors.
const TOO_LARGE: &str = "askgate:result_too_large";

/// The configured upstreams, and the sessions to tell when their tools change.
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    sessions: Sessions,
    /// How many upstreams have not had their first try at starting yet.
    untried: Arc<watch::Sender<usize>>,
}

/// Who to tell when the gated tools change: the peers of 2025-11-25 sessions, the
/// `subscriptions/listen` streams of 2026-07-28 clients (which have no session), and whoever
/// watches [`Sessions::changes`] (the event streams of sessions put away).
#[derive(Clone, Default)]
pub(super) struct Sessions(Arc<Mutex<Listeners>>, Arc<watch::Sender<u64>>);

#[derive(Default)]
struct Listeners {
    peers: Vec<Peer<RoleServer>>,
    streams: Vec<SubscriptionSink>,
}

impl Sessions {
    /// Keeps `peer`, forgetting sessions that have ended (so the list holds open ones only).
    pub(super) fn add(&self, peer: Peer<RoleServer>) {
        let mut listeners = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        listeners.peers.retain(|p| !p.is_transport_closed());
        listeners.peers.push(peer);
    }

    /// Tells `stream` of every change until its client closes it.
    pub(super) async fn listen(&self, stream: SubscriptionContext) {
        let sink = stream.sink().clone();
        self.0.lock().unwrap_or_else(PoisonError::into_inner).streams.push(sink.clone());
        stream.cancelled().await;
        self.0.lock().unwrap_or_else(PoisonError::into_inner).streams.retain(|s| s.id() != sink.id());
    }

    /// Changes whenever the gated tools do (a count of the changes).
    pub(super) fn changes(&self) -> watch::Receiver<u64> {
        self.1.subscribe()
    }

    async fn tools_changed(&self) {
        self.1.send_modify(|changes| *changes += 1);
        let (peers, streams) = {
            let mut listeners = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            listeners.peers.retain(|p| !p.is_transport_closed());
            (listeners.peers.clone(), listeners.streams.clone())
        };
        for peer in peers {
            // A session that ended meanwhile is forgotten at the next change.
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_tool_list_changed()).await;
        }
        for stream in streams {
            // One that closed meanwhile is forgotten as its listen ends.
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, stream.notify_tool_list_changed()).await;
        }
    }
}

/// One upstream server.
pub struct Upstream {
    /// Its settings.
    pub config: UpstreamConfig,
    /// `mcp:<name>`: its line in `/healthz` and `/metrics`.
    health: &'static str,
    live: Arc<Mutex<Option<Live>>>,
    /// Where its child's readers are spawned.
    tasks: Tasks,
}

#[derive(Clone)]
struct Live {
    peer: Peer<RoleClient>,
    tools: Vec<Tool>,
    /// Set when this connection was ended because the upstream sent a message over the limit
    /// that no call could be matched to (its size in bytes).
    unmatched: Arc<Mutex<Option<u64>>>,
}

/// Why a proxied call did not reach its upstream, or failed there.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// It is not running now.
    #[error("the upstream `{0}` is not running now (askgate is restarting it); try again shortly")]
    Down(String),
    /// The call failed on the way or there.
    #[error("the upstream `{name}` failed during the call: {reason}")]
    Failed {
        /// The upstream.
        name: String,
        /// What failed.
        reason: String,
    },
    /// No result within the upstream's `call_timeout`; the call was cancelled there.
    #[error(
        "the upstream `{name}` did not answer within {}; the call was cancelled there (its `call_timeout`)",
        humantime::format_duration(*limit)
    )]
    TimedOut {
        /// The upstream.
        name: String,
        /// Its `call_timeout`.
        limit: Duration,
    },
    /// The result was larger than the upstream's `max_result`, and was dropped.
    #[error(
        "the upstream `{name}` sent a result of {}, over its limit of {} (its `max_result`); askgate dropped it",
        bytes.display().si(),
        UpstreamConfig::size_text(*limit)
    )]
    TooLarge {
        /// The upstream.
        name: String,
        /// The result's size (over stdio: of its whole message).
        bytes: ByteSize,
        /// Its `max_result`.
        limit: ByteSize,
    },
    /// The upstream sent a message over its `max_result` that askgate could not match to a
    /// call, so it ended the connection (failing the calls in flight) and restarts it.
    #[error(
        "the upstream `{name}` sent a message of {}, over its limit of {} (its `max_result`), that askgate could not match to a call; askgate ended the calls in flight and restarts it",
        bytes.display().si(),
        UpstreamConfig::size_text(*limit)
    )]
    Unmatched {
        /// The upstream.
        name: String,
        /// The message's size.
        bytes: ByteSize,
        /// Its `max_result`.
        limit: ByteSize,
    },
}

impl Upstreams {
    /// The upstreams of `configs`, supervised until `stop`: each is started (or connected to)
    /// and restarted when it stops.
    pub fn start(configs: &[UpstreamConfig], engine: &Engine, stop: &CancellationToken) -> Arc<Self> {
        let sessions = Sessions::default();
        let list: Vec<Arc<Upstream>> = configs
            .iter()
            .map(|config| {
                // Leaked once per configured upstream at start: health names are static.
                let health: &'static str = Box::leak(format!("mcp:{}", config.name).into_boxed_str());
                Arc::new(Upstream {
                    config: config.clone(),
                    health,
                    live: Arc::default(),
                    tasks: engine.tasks().clone(),
                })
            })
            .collect();
        let untried = Arc::new(watch::Sender::new(list.len()));
        for upstream in &list {
            engine.delivery().set_channel_state(upstream.health, ChannelState::Degraded("starting".to_owned()));
            let (upstream, engine, stop, sessions) = (upstream.clone(), engine.clone(), stop.clone(), sessions.clone());
            let first = FirstTry(Some(untried.clone()));
            engine.tasks().clone().spawn(async move { upstream.supervise(&engine, &stop, &sessions, first).await });
        }
        Arc::new(Self { list, sessions, untried })
    }

    /// Whether some upstream is still making its first start (`/healthz` says `starting`).
    pub fn starting(&self) -> bool {
        *self.untried.borrow() > 0
    }

    /// Waits, at most `limit`, until every upstream has had its first try at starting: a
    /// client that lists the tools as askgate starts gets the upstreams' too.
    pub(super) async fn first_tries(&self, limit: Duration) {
        let mut untried = self.untried.subscribe();
        let _ = tokio::time::timeout(limit, untried.wait_for(|n| *n == 0)).await;
    }

    pub(super) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Every offered tool, named `<upstream>__<tool>`, with its schemas unchanged.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = Vec::new();
        for upstream in &self.list {
            for tool in upstream.tools() {
                if upstream.config.offers(&tool.name) {
                    let mut tool = tool.clone();
                    tool.name = format!("{}__{}", upstream.config.name, tool.name).into();
                    tools.push(tool);
                }
            }
        }
        tools
    }

    /// The upstream and tool a prefixed name stands for: only a tool the upstream listed and
    /// askgate offers, under exactly the name it listed (after NFC, the one normalisation
    /// applied to what the agent sent). Any other spelling (`files__DELETE_FILE`,
    /// `files__delete-file`, a trailing space, a zero-width or fullwidth character) names
    /// nothing, so an upstream that normalises names itself cannot be reached past its rules.
    /// A name under the exact prefix of an upstream that is not running now is
    /// [`Resolved::Down`]: nothing can be called there, and the agent is told why.
    pub fn resolve(&self, name: &str) -> Resolved {
        use unicode_normalization::UnicodeNormalization;
        let name: String = name.nfc().collect();
        let Some((prefix, tool)) = name.split_once("__") else { return Resolved::Nothing };
        let Some(upstream) = self.list.iter().find(|u| u.config.name == prefix) else { return Resolved::Nothing };
        if !upstream.is_running() {
            return Resolved::Down(UpstreamError::Down(upstream.config.name.clone()));
        }
        match upstream.tools().into_iter().find(|t| t.name == tool) {
            Some(listed) if upstream.config.offers(&listed.name) => {
                Resolved::Tool(upstream.clone(), listed.name.to_string())
            }
            _ => Resolved::Nothing,
        }
    }
}

/// What a tool name an agent called stands for among the upstreams.
pub enum Resolved {
    /// A tool an upstream listed and askgate offers: the upstream, and the tool's listed name.
    Tool(Arc<Upstream>, String),
    /// The prefix of an upstream that is not running now.
    Down(UpstreamError),
    /// No offered tool has this name.
    Nothing,
}

impl Upstream {
    fn is_running(&self) -> bool {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    fn tools(&self) -> Vec<Tool> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|l| l.tools.clone()).unwrap_or_default()
    }

    /// Calls `tool` upstream; its result comes back unchanged.
    ///
    /// # Errors
    /// [`UpstreamError`] when it is not running, the call fails on the way, takes longer than
    /// `call_timeout`, or its result is larger than `max_result`.
    pub async fn call(&self, tool: &str, arguments: JsonObject) -> Result<CallToolResult, UpstreamError> {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let live = live.ok_or_else(|| UpstreamError::Down(self.config.name.clone()))?;
        let (name, limit) = (self.config.name.clone(), self.config.max_result);
        // Dropping this future (the agent cancelled, or the timeout below) cancels the call
        // upstream too: rmcp sends `notifications/cancelled`.
        let call = live.peer.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments));
        let result = match tokio::time::timeout(self.config.call_timeout, call).await {
            Err(_) => return Err(UpstreamError::TimedOut { name, limit: self.config.call_timeout }),
            Ok(Err(e)) => {
                if let Some(bytes) = too_large(&e) {
                    return Err(UpstreamError::TooLarge { name, bytes: ByteSize(bytes), limit });
                }
                if let Some(bytes) = *live.unmatched.lock().unwrap_or_else(PoisonError::into_inner) {
                    return Err(UpstreamError::Unmatched { name, bytes: ByteSize(bytes), limit });
                }
                return Err(UpstreamError::Failed { name, reason: e.to_string() });
            }
            Ok(Ok(result)) => result,
        };
        // Over stdio the whole message was bounded as it was read; over HTTP the result is
        // measured here, after it arrived.
        if let UpstreamTransport::Http { .. } = self.config.transport {
            let bytes = json_size(&result);
            if bytes > limit.as_u64() {
                return Err(UpstreamError::TooLarge { name, bytes: ByteSize(bytes), limit });
            }
        }
        Ok(result)
    }

    async fn supervise(&self, engine: &Engine, stop: &CancellationToken, sessions: &Sessions, mut first: FirstTry) {
        let name = &self.config.name;
        let new_pauses = || crate::engine::retry::pauses(Duration::from_secs(1), MAX_BACKOFF);
        let mut pauses = new_pauses();
        loop {
            let started = tokio::select! {
                started = tokio::time::timeout(START_TIMEOUT, self.connect(sessions)) => started,
                () = stop.cancelled() => return,
            };
            match started {
                Ok(Ok((service, child))) => {
                    pauses = new_pauses();
                    engine.delivery().set_channel_state(self.health, ChannelState::Up);
                    // Counted before the wait below; the call after the match then does nothing.
                    first.done();
                    tokio::select! { () = sessions.tools_changed() => {}, () = stop.cancelled() => return }
                    let ended = tokio::select! {
                        ended = service.waiting() => ended,
                        () = stop.cancelled() => return,
                    };
                    *self.live.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    drop(child);
                    tracing::warn!(upstream = %name, reason = ?ended, "the upstream MCP server stopped; restarting it");
                    engine
                        .delivery()
                        .set_channel_state(self.health, ChannelState::Degraded("stopped; restarting".to_owned()));
                    tokio::select! { () = sessions.tools_changed() => {}, () = stop.cancelled() => return }
                }
                Ok(Err(e)) => {
                    engine
                        .delivery()
                        .set_channel_state(self.health, ChannelState::Degraded(format!("cannot start: {e}")));
                }
                Err(_) => {
                    let message = format!("did not answer within {}s", START_TIMEOUT.as_secs());
                    engine.delivery().set_channel_state(self.health, ChannelState::Degraded(message));
                }
            }
            first.done();
            tokio::select! {
                () = tokio::time::sleep(pauses.next().unwrap_or(MAX_BACKOFF)) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Starts or connects to it and reads its tools: in the 2026-07-28 revision, else with the
    /// `initialize` handshake. A server of an older revision answers `server/discover` with the
    /// revisions it has, or ends the connection at it (rmcp's does, over stdio), and rmcp's
    /// fallback takes neither; so only then it is started again for the handshake.
    async fn connect(
        &self,
        sessions: &Sessions,
    ) -> Result<(RunningService<RoleClient, Watcher>, Option<Child>), String> {
        match self.connect_with(sessions, modern()).await {
            Ok(connected) => Ok(connected),
            Err(Failed { message, older: true }) => {
                tracing::debug!(upstream = %self.config.name, error = %message, "no 2026-07-28; trying initialize");
                self.connect_with(sessions, legacy()).await.map_err(|failed| failed.message)
            }
            Err(failed) => Err(failed.message),
        }
    }

    async fn connect_with(
        &self,
        sessions: &Sessions,
        lifecycle: ClientLifecycleMode,
    ) -> Result<(RunningService<RoleClient, Watcher>, Option<Child>), Failed> {
        let watcher =
            Watcher { upstream: self.config.name.clone(), sessions: sessions.clone(), live: self.live.clone() };
        let unmatched = Arc::new(Mutex::new(None));
        // Lines are bounded by `max_result` as they are read; rmcp's own line limit sits
        // behind that bound, above it, so it never drops a line silently.
        let max = usize::try_from(self.config.max_result.as_u64()).unwrap_or(usize::MAX);
        let (service, child) = match &self.config.transport {
            UpstreamTransport::Stdio { command, cwd, pass_env, set_env } => {
                let mut child = crate::function::child::clean_command(command, cwd, pass_env, set_env)
                    .spawn()
                    .map_err(|e| format!("`{}`: {e}", command[0]))?;
                let (stdout, stdin) = (child.stdout.take(), child.stdin.take());
                if let Some(stderr) = child.stderr.take() {
                    let upstream = self.config.name.clone();
                    self.tasks.spawn(async move {
                        let mut lines = BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::info!(upstream = %upstream, "{line}");
                        }
                    });
                }
                let (stdout, stdin) = (stdout.ok_or("no stdout")?, stdin.ok_or("no stdin")?);
                let (reader, bounded) = tokio::io::simplex(64 * 1024);
                let (name, unmatched) = (self.config.name.clone(), unmatched.clone());
                self.tasks.spawn(async move {
                    let ended = bound_stdout(Lines::new(stdout, max), bounded, &unmatched).await;
                    if let Err(e) = ended {
                        tracing::warn!(upstream = %name, error = %e, "reading the upstream's stdout failed");
                    }
                });
                let transport = AsyncRwTransport::new_client(reader, stdin).with_max_line_length(max.saturating_add(1));
                (watcher.serve_with_lifecycle(transport, lifecycle).await.map_err(Failed::start)?, Some(child))
            }
            UpstreamTransport::Http { url } => {
                let limit = usize::try_from(RMCP_HTTP_LIMIT.max(self.config.max_result.as_u64() + ENVELOPE))
                    .unwrap_or(usize::MAX);
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .max_sse_event_size(limit)
                    .max_json_response_size(limit);
                let transport = StreamableHttpClientTransport::from_config(config);
                (watcher.serve_with_lifecycle(transport, lifecycle).await.map_err(Failed::start)?, None)
            }
        };
        let tools = service.list_all_tools().await.map_err(|e| format!("listing its tools failed: {e}"))?;
        tracing::info!(upstream = %self.config.name, tools = tools.len(), "upstream MCP server ready");
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Live { peer: service.peer().clone(), tools, unmatched });
        Ok((service, child))
    }
}

/// The 2026-07-28 revision: `server/discover`, no handshake; a server that answers it as one
/// of an older revision does (over HTTP) gets the `initialize` handshake at once.
fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// The `initialize` handshake, offering 2025-11-25 (a server may answer an older revision).
fn legacy() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

/// Why starting an upstream failed, and whether it may be of an older revision.
struct Failed {
    message: String,
    older: bool,
}

impl Failed {
    fn start(error: ClientInitializeError) -> Self {
        let older = matches!(
            error,
            ClientInitializeError::NoCompatibleProtocolVersion { .. } | ClientInitializeError::ConnectionClosed(_)
        );
        Self { message: error.to_string(), older }
    }
}

impl From<String> for Failed {
    fn from(message: String) -> Self {
        Self { message, older: false }
    }
}

impl From<&str> for Failed {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// An upstream's first try at starting, counted once when it is over (started or not).
struct FirstTry(Option<Arc<watch::Sender<usize>>>);

impl FirstTry {
    fn done(&mut self) {
        if let Some(untried) = self.0.take() {
            untried.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

/// Passes a stdio upstream's messages on to rmcp, each at most the reader's limit. One over it
/// is answered in its place with an error for its id (ids are what rmcp matches responses
/// by); an oversized request or notification from the upstream is dropped. One with no id to
/// match ends the stream, so that the calls in flight fail now rather than at their timeout,
/// and `unmatched` says why.
///
/// # Errors
/// What reading the upstream's stdout failed with. A closed `out` (the connection ended) is
/// the end, not an error.
async fn bound_stdout(
    mut lines: Lines<ChildStdout>,
    mut out: impl AsyncWrite + Unpin,
    unmatched: &Mutex<Option<u64>>,
) -> std::io::Result<()> {
    let passed = pass_lines(&mut lines, &mut out, unmatched).await;
    // The end of this stream is how rmcp learns that the connection ended (a simplex pipe
    // is not closed by dropping its writer).
    let _ = out.shutdown().await;
    passed
}

async fn pass_lines(
    lines: &mut Lines<ChildStdout>,
    out: &mut (impl AsyncWrite + Unpin),
    unmatched: &Mutex<Option<u64>>,
) -> std::io::Result<()> {
    while let Some(line) = lines.next().await? {
        let mut message = match line {
            Line::Whole(line) => line,
            Line::TooLong(Oversized { method: true, bytes, .. }) => {
                tracing::warn!(bytes, "the upstream sent a request or notification over its max_result; dropped");
                continue;
            }
            Line::TooLong(Oversized { id: Some(id), bytes, .. }) => {
                let error = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                        "message": format!("the result is {bytes} bytes, over the upstream's max_result"),
                        "data": {"reason": TOO_LARGE, "bytes": bytes},
                    },
                });
                error.to_string().into_bytes()
            }
            Line::TooLong(Oversized { id: None, bytes, .. }) => {
                *unmatched.lock().unwrap_or_else(PoisonError::into_inner) = Some(bytes);
                return Ok(());
            }
        };
        message.push(b'\n');
        if out.write_all(&message).await.is_err() {
            // rmcp closed its side: the connection ended.
            return Ok(());
        }
    }
    Ok(())
}

/// The size of the result askgate wrote in place of one over the limit, if `error` is that.
fn too_large(error: &ServiceError) -> Option<u64> {
    let ServiceError::McpError(error) = error else { return None };
    let data = error.data.as_ref()?;
    (data.get("reason")? == TOO_LARGE).then(|| data.get("bytes").and_then(Value::as_u64)).flatten()
}

/// The length of `result` as JSON, counted without keeping the text.
fn json_size(result: &CallToolResult) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a result that came from JSON serializes again.
    let _ = serde_json::to_writer(&mut count, result);
    count.0
}

/// The client side of an upstream connection: reads the tools again when they change, and
/// passes `tools/list_changed` on to the agents' sessions.
#[derive(Clone)]
struct Watcher {
    upstream: String,
    sessions: Sessions,
    live: Arc<Mutex<Option<Live>>>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        match context.peer.list_all_tools().await {
            Ok(tools) => {
                tracing::info!(upstream = %self.upstream, tools = tools.len(), "the upstream's tools changed");
                if let Some(live) = self.live.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
                    live.tools = tools;
                }
                self.sessions.tools_changed().await;
            }
            Err(e) => tracing::warn!(upstream = %self.upstream, error = %e, "could not read the upstream's new tools"),
        }
    }
}
