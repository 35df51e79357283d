//! The running service: opens the store, builds the engine, attaches the enabled channels,
//! recovers from the last stop, and shuts everything down in order.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::channel::console::Console;
use crate::channel::webhook::{Endpoint, Webhooks};
use crate::channel::{PLATFORMS, Serve};
use crate::clock::Clock;
use crate::config::{Config, Env, FunctionKind};
use crate::engine::{Channel, ChannelState};
use crate::engine::{ChannelPolicy, Engine, Entry, Function, Functions};
use crate::function::process::Process;
use crate::http::ApiToken;
use crate::http::token::TokenSource;
use crate::question::Mode;
use crate::store::{MemoryStore, PostgresStore, SqliteStore, Store, StoreError, is_memory_url, is_postgres_url};

/// How long an inbound channel (the HTTP server with its requests in flight, a poller) may
/// take to stop.
const INBOUND_GRACE: std::time::Duration = std::time::Duration::from_secs(3);
/// How long MCP sessions outlive the start of a shutdown (see [`mcp_sessions`]).
const MCP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The console's input and output, when the console channel is enabled.
///
/// With `tokio::io::stdin()` as input, a read may still be parked in a blocking thread after
/// shutdown: end the runtime with `shutdown_timeout` rather than dropping it (see
/// `examples/embed.rs`).
pub struct ConsoleIo {
    /// Lines typed by the person.
    pub input: Box<dyn AsyncBufRead + Send + Unpin>,
    /// Where cards and replies are printed.
    pub output: Box<dyn AsyncWrite + Send + Unpin>,
}

/// A started gateway.
pub struct Gateway {
    engine: Engine,
    inbound: Vec<JoinHandle<()>>,
    http: SocketAddr,
    /// Cancelled when the console's input has ended (never, without a console).
    console_ended: CancellationToken,
}

/// What a gateway is made of, before it starts: the configuration, plus what a Rust program
/// adds (its own functions and channels, a store of its choosing).
///
/// ```no_run
/// # async fn example(config: askgate::config::Config, deploy: impl askgate::engine::Function + 'static)
/// # -> Result<(), askgate::gateway::GatewayError> {
/// let gateway = askgate::gateway::Gateway::builder(config).function("deploy", "Deploy a service", deploy).start().await?;
/// gateway.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Builder {
    config: Config,
    env: Env,
    clock: Clock,
    console: Option<ConsoleIo>,
    functions: Vec<(String, Entry)>,
    channels: Vec<(Arc<dyn Channel>, ChannelPolicy)>,
    store: Option<Arc<dyn Store>>,
}

impl Builder {
    /// Where tokens and secrets named in the configuration are read; the process
    /// environment unless set.
    #[must_use]
    pub fn env(mut self, env: Env) -> Self {
        self.env = env;
        self
    }

    /// The clock; the system's unless set.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The console's input and output, used when the configuration enables the console.
    #[must_use]
    pub fn console(mut self, io: ConsoleIo) -> Self {
        self.console = Some(io);
        self
    }

    /// Registers a Rust function under `name`: a follow-up function that whoever the
    /// channel allows may start.
    #[must_use]
    pub fn function(self, name: &str, description: &str, function: impl Function + 'static) -> Self {
        self.function_entry(name, Entry::new(Arc::new(function), description))
    }

    /// Registers a function with its mode and who may start it.
    #[must_use]
    pub fn function_entry(mut self, name: &str, entry: Entry) -> Self {
        self.functions.push((name.to_owned(), entry));
        self
    }

    /// Attaches a channel of the program's own: it serves the conversations that start
    /// with its name, and `policy` says who may start runs and answer there. Its inbound
    /// half hands messages to [`Gateway::engine`]'s `handle`.
    #[must_use]
    pub fn channel(mut self, channel: Arc<dyn Channel>, policy: ChannelPolicy) -> Self {
        self.channels.push((channel, policy));
        self
    }

    /// Uses `store` instead of opening the configured database.
    #[must_use]
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Starts everything the configuration enables, with what was added.
    ///
    /// # Errors
    /// When the database cannot be opened, migrated or read, a function name is taken twice,
    /// or a channel's settings are unusable.
    pub async fn start(self) -> Result<Gateway, GatewayError> {
        let Self { config, env, clock, console, functions: added, channels, store } = self;
        crate::channel::check(&config)?;
        let mut registry = functions(&config, &env);
        let mut settings = config.settings.clone();
        for (name, entry) in added {
            if registry.get(&name).is_some() {
                return Err(GatewayError::FunctionTaken(name));
            }
            registry.insert_entry(name, entry);
        }
        // The port first: a start that fails on it leaves nothing behind in the database (on
        // PostgreSQL, opening the store signs this instance on).
        let listener = crate::http::server::listen(config.http, config.max_connections)
            .map_err(|e| GatewayError::Bind(config.http, e))?;
        let http = listener.local_addr().map_err(|e| GatewayError::Bind(config.http, e))?;
        let (store, opened_here) = match store {
            Some(store) => (store, false),
            None => (open_store(&config).await?, true),
        };
        for (channel, policy) in &channels {
            settings.channels.insert(channel.name().to_owned(), policy.clone());
        }
        if settings.page_url.is_none() {
            // `/web` links name the address askgate listens on.
            settings.page_url = Some(format!("http://{}/", crate::config::reachable(http)));
        }
        // A person's own web conversation is theirs: anyone the HTTP surface lets in may start
        // runs there (a person's token only when it may ask), of the functions open to them.
        settings.channels.entry("web".to_owned()).or_insert_with(|| ChannelPolicy {
            allowed_users: crate::engine::Access::Anyone,
            ..ChannelPolicy::default()
        });
        let engine = Engine::new(store.clone(), registry, settings, clock.clone());
        for (channel, _) in channels {
            let name = channel.name();
            engine.delivery().attach(channel);
            engine.delivery().set_channel_state(name, ChannelState::Up);
        }
        let started = Gateway::start_engine(&config, &env, clock, console, engine, listener).await;
        if started.is_err() && opened_here {
            // Signed off again: another instance must not wait for a heartbeat that never comes.
            store.close().await;
        }
        started
    }
}

impl Gateway {
    /// A gateway made from `config`, to which a Rust program can add its own functions and
    /// channels before it starts.
    pub fn builder(config: Config) -> Builder {
        Builder {
            config,
            env: Env::process(),
            clock: Clock::system(),
            console: None,
            functions: Vec::new(),
            channels: Vec::new(),
            store: None,
        }
    }

    async fn start_engine(
        config: &Config,
        env: &Env,
        clock: Clock,
        console_io: Option<ConsoleIo>,
        engine: Engine,
        listener: tokio::net::TcpListener,
    ) -> Result<Self, GatewayError> {
        let console = match (config.console, console_io) {
            (true, Some(io)) => {
                let console = Console::new(io.output, clock.clone());
                engine.delivery().attach(console.clone());
                Some((console, io.input))
            }
            _ => None,
        };
        let mut serves: Vec<(&'static str, Serve)> = Vec::new();
        let mut routes = Vec::new();
        for platform in PLATFORMS {
            let name = platform.name();
            let cx = crate::channel::Context { section: config.chat(name), env, clock: &clock, engine: &engine };
            let started = platform.start(&cx).map_err(|source| GatewayError::Platform { name, source })?;
            serves.extend(started.serve.map(|serve| (name, serve)));
            routes.extend(started.routes);
        }
        let web = Arc::new(crate::channel::web::WebChat::new(clock.clone()));
        engine.delivery().attach(web.clone());
        engine.delivery().set_channel_state("web", ChannelState::Up);
        let webhooks = webhooks(config, env, &clock);
        if let Some(w) = &webhooks {
            engine.delivery().attach(w.clone());
            // Bridges call askgate's HTTP surface: up as soon as it listens.
            engine.delivery().set_channel_state(w.name(), ChannelState::Up);
        }
        let (token, source) = ApiToken::load_or_create(env.get("ASKGATE_API_TOKEN"), &config.database)?;
        let tokens = agent_tokens(config, env, token)?;
        let http = listener.local_addr().map_err(|e| GatewayError::Bind(config.http, e))?;
        engine.start().await?;
        let states = crate::channel::states(config, env);
        for (name, state) in &states {
            tracing::info!(channel = name, "{state}");
        }
        match source {
            TokenSource::Environment => tracing::info!("API token: from ASKGATE_API_TOKEN"),
            TokenSource::File(path) => tracing::info!("API token: in {}", path.display()),
            TokenSource::Created(path) => tracing::info!("API token: created in {} (owner-only)", path.display()),
            TokenSource::Ephemeral if is_postgres_url(&config.database) => tracing::warn!(
                "the API token is kept nowhere with PostgreSQL: set ASKGATE_API_TOKEN (the same on every instance) to use the API"
            ),
            TokenSource::Ephemeral => tracing::warn!(
                "the API token is kept nowhere with an in-memory database: set ASKGATE_API_TOKEN to use the API"
            ),
        }
        tracing::info!("HTTP API, events and web page on http://{http}/");
        // The inbound half of every channel and the HTTP server: tracked with every other task,
        // and each waited for on its own as askgate stops.
        let (tasks, mut inbound) = (engine.tasks().clone(), Vec::new());
        let callback_secret = config.callback_secret_env.as_ref().and_then(|name| env.get(name));
        if let Some(name) = config.callback_secret_env.as_ref().filter(|_| callback_secret.is_none()) {
            tracing::warn!("{name} is not set: callbacks are accepted only with a secret of their own");
        }
        let callbacks = crate::agent::callbacks::CallbackRules::new(
            config.callbacks.clone(),
            http,
            config.settings.page_url.as_deref(),
        );
        let settings = crate::http::HttpSettings {
            loopback: http.ip().is_loopback(),
            max_event_streams: config.max_event_streams,
            callback_secret: callback_secret.is_some(),
            callbacks: Some(Arc::new(callbacks.clone())),
            limits: config.limits,
        };
        let outbound = crate::agent::callbacks::Outbound::new(callbacks.clone(), config.callback_timeout);
        crate::agent::callbacks::start(&engine, callback_secret, config.callback_timeout, callbacks);
        let mcp = config.mcp.clone().map(|mcp| {
            tracing::info!(conversation = %mcp.conversation, "MCP server on http://{http}/mcp");
            let upstreams = crate::mcp::upstream::Upstreams::start(&mcp.upstreams, &engine, &engine.stopping());
            let sessions = mcp_sessions(&engine);
            let service =
                crate::mcp::service(engine.clone(), mcp, upstreams.clone(), http, crate::http::MAX_BODY, sessions);
            (service, upstreams)
        });
        crate::agent::opencode::start(&config.opencode, &engine);
        // Where agents reach askgate, as `/web` links name it: the A2A card says so.
        let page =
            (config.settings.page_url.clone()).unwrap_or_else(|| format!("http://{}/", crate::config::reachable(http)));
        if let Some(a2a) = &config.a2a {
            tracing::info!(conversation = %a2a.conversation, "A2A agent on {page}a2a (its card at {page}.well-known/agent-card.json)");
        }
        let agents = vec![
            crate::agent::claude_code::routes(&engine, config.claude_code.clone()),
            crate::agent::a2a::routes(&engine, config.a2a.clone(), &page, outbound),
            crate::agent::codex::routes(&engine, config.codex.clone()),
        ];
        let surfaces = crate::http::Surfaces { webhooks, routes, web: Some(web), agents };
        let app = crate::http::router(engine.clone(), tokens, surfaces, settings, mcp);
        let max_connections = config.max_connections;
        let stop = engine.stopping();
        inbound.push(tasks.spawn(async move {
            let limits = crate::http::server::Limits { max_connections, ..Default::default() };
            if let Err(e) = crate::http::server::serve(listener, app, stop, limits).await {
                tracing::error!(error = %e, "the HTTP server stopped");
            }
        }));
        let console_ended = CancellationToken::new();
        if let Some((console, input)) = console {
            let (engine, ended) = (engine.clone(), console_ended.clone());
            inbound.push(tasks.spawn(async move {
                console.read_loop(engine.clone(), input, engine.stopping()).await;
                ended.cancel();
            }));
        }
        for (name, serve) in serves {
            let engine = engine.clone();
            inbound.push(tasks.spawn(async move {
                if let Err(e) = serve.await {
                    stopped(&engine, name, e.as_ref());
                }
            }));
        }
        Ok(Self { engine, inbound, http, console_ended })
    }

    /// Resolves once the console's input has ended (end of file on a pipe); never without a
    /// console.
    pub async fn console_ended(&self) {
        self.console_ended.cancelled().await;
    }

    /// Where the HTTP surface listens.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
    }

    /// The engine, for surfaces and tests.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops in an order that cannot hang: first whatever waits on a person at askgate's
    /// request (blocking asks end as `cancelled(shutdown)`, long-polls and event streams end),
    /// so that every HTTP request in flight can be answered; then inbound channels (each
    /// finishes the message in hand); then turns in flight and queued deliveries, each with a
    /// short grace; then the store.
    pub async fn shutdown(self) {
        self.engine.begin_shutdown().await;
        for task in self.inbound {
            match tokio::time::timeout(INBOUND_GRACE, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "an inbound channel ended abnormally"),
                Err(_) => tracing::warn!("an inbound channel did not stop in time; going on"),
            }
        }
        self.engine.finish_shutdown().await;
    }
}

/// What ends the MCP sessions: a moment after askgate begins to stop, so that tool calls
/// that were waiting (and end when it stops) can still send their result.
fn mcp_sessions(engine: &Engine) -> CancellationToken {
    let sessions = CancellationToken::new();
    let (stop, end) = (engine.stopping(), sessions.clone());
    engine.tasks().spawn(async move {
        stop.cancelled().await;
        tokio::time::sleep(MCP_GRACE).await;
        end.cancel();
    });
    sessions
}

/// The operator's token and the agents': the default agent token (`ASKGATE_AGENT_TOKEN`, or
/// `askgate-agent.token` beside the database), and each `[[agents]]` entry whose variable is
/// set. No two may be the same secret.
fn agent_tokens(config: &Config, env: &Env, operator: ApiToken) -> Result<crate::http::Tokens, GatewayError> {
    let (default, source) = ApiToken::load_or_create_agent(env.get("ASKGATE_AGENT_TOKEN"), &config.database)?;
    match source {
        TokenSource::Environment => tracing::info!("agent token: from ASKGATE_AGENT_TOKEN"),
        TokenSource::File(path) => tracing::info!("agent token (askgate mcp): in {}", path.display()),
        TokenSource::Created(path) => {
            tracing::info!("agent token (askgate mcp): created in {} (owner-only)", path.display());
        }
        TokenSource::Ephemeral => {
            tracing::warn!("the agent token is kept nowhere with this database: set ASKGATE_AGENT_TOKEN for agents")
        }
    }
    let mut agents = vec![default];
    for agent in &config.agents {
        let Some(secret) = env.get(&agent.token_env) else {
            tracing::warn!(agent = %agent.name, "{} is not set: the agent cannot connect", agent.token_env);
            continue;
        };
        agents.push(ApiToken::named_agent(&agent.name, &agent.token_env, &secret)?);
    }
    let tokens = crate::http::Tokens::new(operator, agents);
    if let Some(name) = tokens.reused() {
        return Err(crate::http::token::TokenError::Reused(name).into());
    }
    Ok(tokens)
}

/// A channel's inbound half ended with `error`: the channel is marked down with it
/// and its causes (`stopped: the Bot API refused or could not be reached: Invalid token`).
fn stopped(engine: &Engine, channel: &'static str, error: &dyn std::error::Error) {
    // Logged by the engine as the channel goes down.
    engine.delivery().set_channel_state(channel, ChannelState::Down(format!("stopped: {}", crate::error_chain(error))));
}

/// The functions the configuration names, ready to run; remote agents' tokens are read from
/// `env`.
pub fn functions(config: &Config, env: &Env) -> Functions {
    let mut registry = Functions::new();
    for spec in &config.functions {
        let (function, mode): (Arc<dyn Function>, Mode) = match &spec.kind {
            FunctionKind::Builtin(b) => match crate::function::builtin(b) {
                Some((f, _)) => (f, Mode::FollowUp),
                // Checked when the file was read: a built-in it names exists.
                None => continue,
            },
            FunctionKind::Process(p) => (
                Arc::new(Process::new(spec.name.clone(), p.clone())),
                if p.hold { Mode::Blocking } else { Mode::FollowUp },
            ),
            FunctionKind::Agui(agent) => (crate::agent::agui::function(&spec.name, agent, env), Mode::FollowUp),
            FunctionKind::A2a(agent) => (crate::agent::a2a_remote::function(&spec.name, agent, env), Mode::FollowUp),
        };
        let entry = Entry {
            function,
            description: spec.description.clone(),
            mode,
            allowed_users: spec.allowed_users.clone(),
            pre_approved: spec.pre_approved.clone(),
        };
        registry.insert_entry(spec.name.clone(), entry);
    }
    registry
}

/// The webhook channel with every endpoint whose secret is set; none when there is none.
fn webhooks(config: &Config, env: &Env, clock: &Clock) -> Option<Arc<Webhooks>> {
    let endpoints: HashMap<String, Endpoint> = config
        .webhooks
        .iter()
        .filter_map(|w| Some((w.name.clone(), Endpoint { url: w.url.clone(), secret: w.secret(env)?.into_bytes() })))
        .collect();
    (!endpoints.is_empty()).then(|| Arc::new(Webhooks::new(endpoints, clock.clone())))
}

/// The configured database, opened and brought to the current schema.
///
/// # Errors
/// When it cannot be opened or migrated.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, StoreError> {
    Ok(if is_postgres_url(&config.database) {
        Arc::new(PostgresStore::open(&config.database).await?)
    } else if is_memory_url(&config.database) {
        tracing::warn!(
            "gateway.database = \"memory:\": runs, questions and grants are kept in memory; nothing survives a restart"
        );
        Arc::new(MemoryStore::new())
    } else {
        Arc::new(SqliteStore::open(&config.database, config.synchronous).await?)
    })
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The HTTP address cannot be bound.
    #[error("cannot listen on {0} (gateway.http; another program may be using the port)")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// The API token may not be used (too short, readable by others) or cannot be read.
    #[error(transparent)]
    Token(#[from] crate::http::token::TokenError),
    /// The store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A chat platform's section names no platform, or its own keys are unusable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A program registered a function under a name the configuration already uses.
    #[error("a function named `{0}` is registered twice")]
    FunctionTaken(String),
    /// A chat platform's settings are unusable, or its client cannot be built.
    #[error("{name}: {source}")]
    Platform {
        /// The platform.
        name: &'static str,
        /// Why.
        #[source]
        source: crate::channel::PlatformError,
    },
}
