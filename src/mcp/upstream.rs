//! Upstream MCP servers (`[[mcp.upstream]]`): askgate starts or connects to each, keeps its
//! tool list, restarts one that stops (with backoff), and reports its state as the health of
//! `mcp:<name>`. Their tools are offered on `/mcp` as `<name>__<tool>`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, RoleServer, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use crate::channel::ChannelState;
use crate::config::{UpstreamConfig, UpstreamTransport};
use crate::engine::Engine;

/// The longest pause between two attempts to start an upstream.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long an upstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The configured upstreams, and the sessions to tell when their tools change.
#[derive(Default)]
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    sessions: Sessions,
}

/// Peers of open MCP sessions, for `tools/list_changed`.
#[derive(Clone, Default)]
pub(super) struct Sessions(Arc<Mutex<Vec<Peer<RoleServer>>>>);

impl Sessions {
    /// Keeps `peer`, forgetting sessions that have ended (so the list holds open ones only).
    pub(super) fn add(&self, peer: Peer<RoleServer>) {
        let mut peers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    async fn tools_changed(&self) {
        let peers = {
            let mut peers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            // A session that ended meanwhile is forgotten at the next change.
            let _ = peer.notify_tool_list_changed().await;
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
}

#[derive(Clone)]
struct Live {
    peer: Peer<RoleClient>,
    tools: Vec<Tool>,
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
                Arc::new(Upstream { config: config.clone(), health, live: Arc::default() })
            })
            .collect();
        for upstream in &list {
            engine.set_channel_state(upstream.health, ChannelState::Degraded("starting".to_owned()));
            let (upstream, engine, stop, sessions) = (upstream.clone(), engine.clone(), stop.clone(), sessions.clone());
            tokio::spawn(async move { upstream.supervise(&engine, &stop, &sessions).await });
        }
        Arc::new(Self { list, sessions })
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
    pub fn resolve(&self, name: &str) -> Option<(Arc<Upstream>, String)> {
        use unicode_normalization::UnicodeNormalization;
        let name: String = name.nfc().collect();
        let (prefix, tool) = name.split_once("__")?;
        let upstream = self.list.iter().find(|u| u.config.name == prefix)?;
        let listed = upstream.tools().into_iter().find(|t| t.name == tool)?;
        upstream.config.offers(&listed.name).then(|| (upstream.clone(), listed.name.to_string()))
    }
}

impl Upstream {
    fn tools(&self) -> Vec<Tool> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|l| l.tools.clone()).unwrap_or_default()
    }

    /// Calls `tool` upstream; its result comes back unchanged.
    ///
    /// # Errors
    /// [`UpstreamError`] when it is not running or the call fails on the way.
    pub async fn call(&self, tool: &str, arguments: JsonObject) -> Result<CallToolResult, UpstreamError> {
        let peer = self.live.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|l| l.peer.clone());
        let peer = peer.ok_or_else(|| UpstreamError::Down(self.config.name.clone()))?;
        // Dropping this future (the agent cancelled) cancels the call upstream too.
        peer.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .map_err(|e| UpstreamError::Failed { name: self.config.name.clone(), reason: e.to_string() })
    }

    async fn supervise(&self, engine: &Engine, stop: &CancellationToken, sessions: &Sessions) {
        let name = &self.config.name;
        let mut backoff = Duration::from_secs(1);
        loop {
            let started = tokio::select! {
                started = tokio::time::timeout(START_TIMEOUT, self.connect(sessions)) => started,
                () = stop.cancelled() => return,
            };
            match started {
                Ok(Ok((service, child))) => {
                    backoff = Duration::from_secs(1);
                    engine.set_channel_state(self.health, ChannelState::Up);
                    sessions.tools_changed().await;
                    let ended = tokio::select! {
                        ended = service.waiting() => ended,
                        () = stop.cancelled() => return,
                    };
                    *self.live.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    drop(child);
                    tracing::warn!(upstream = %name, reason = ?ended, "the upstream MCP server stopped; restarting it");
                    engine.set_channel_state(self.health, ChannelState::Degraded("stopped; restarting".to_owned()));
                    sessions.tools_changed().await;
                }
                Ok(Err(e)) => {
                    engine.set_channel_state(self.health, ChannelState::Degraded(format!("cannot start: {e}")));
                }
                Err(_) => {
                    let message = format!("did not answer within {}s", START_TIMEOUT.as_secs());
                    engine.set_channel_state(self.health, ChannelState::Degraded(message));
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Starts or connects to it and reads its tools.
    async fn connect(
        &self,
        sessions: &Sessions,
    ) -> Result<(RunningService<RoleClient, Watcher>, Option<Child>), String> {
        let watcher =
            Watcher { upstream: self.config.name.clone(), sessions: sessions.clone(), live: self.live.clone() };
        let (service, child) = match &self.config.transport {
            UpstreamTransport::Stdio { command, cwd, pass_env, set_env } => {
                let mut child = crate::function::child::clean_command(command, cwd, pass_env, set_env)
                    .spawn()
                    .map_err(|e| format!("`{}`: {e}", command[0]))?;
                let (stdout, stdin) = (child.stdout.take(), child.stdin.take());
                if let Some(stderr) = child.stderr.take() {
                    let upstream = self.config.name.clone();
                    tokio::spawn(async move {
                        let mut lines = BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::info!(upstream = %upstream, "{line}");
                        }
                    });
                }
                let transport = (stdout.ok_or("no stdout")?, stdin.ok_or("no stdin")?);
                (watcher.serve(transport).await.map_err(|e| e.to_string())?, Some(child))
            }
            UpstreamTransport::Http { url } => {
                let transport = StreamableHttpClientTransport::from_uri(url.clone());
                (watcher.serve(transport).await.map_err(|e| e.to_string())?, None)
            }
        };
        let tools = service.list_all_tools().await.map_err(|e| format!("listing its tools failed: {e}"))?;
        tracing::info!(upstream = %self.config.name, tools = tools.len(), "upstream MCP server ready");
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(Live { peer: service.peer().clone(), tools });
        Ok((service, child))
    }
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
