//! The MCP server: AI agents ask a person through askgate with the tools `ask_user`,
//! `confirm`, `request_approval`, `notify` and `get_outcome`, over streamable HTTP at `/mcp`
//! (see [`service`]) or through `askgate mcp`, which bridges stdio to it ([`bridge`]).
//!
//! A tool call's question is an agent's question like one posted to `/api/questions`: a run of
//! mode `external` (its function is `mcp`, its initiator `mcp:<client name>`), persisted,
//! shown on every surface of the conversation, claimed once, expired with its fallback. The
//! call stays open until the outcome (with a progress notification every `progress_every`,
//! 15 s by default, when the client asked for progress), or returns `pending` at once with
//! `"wait": false`.

pub mod bridge;
mod elicit;
mod gate;
mod lines;
mod sessions;
mod tools;
pub mod upstream;
mod waiting;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CancelledNotificationParam,
    ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::task_manager::{TaskExit, TaskOptions};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::McpConfig;
use crate::engine::{Engine, ExternalAskError};
use crate::question::{Conversation, Question, QuestionId, UserRef};
use tools::{Call, Tool};
use upstream::Upstreams;
use waiting::{AskKey, Cancels, Ending, OpenAsks, TaskLists, Waiter};

/// The name of the agent whose token a `/mcp` request carries (`agent` for the default token),
/// put in the request's extensions by the HTTP surface that checked the token.
#[derive(Clone, Debug)]
pub struct AgentName(pub String);

/// The token a `/mcp` request carries (a token made at run time by its digest, a configured
/// one by its agent's name), put in the request's extensions beside [`AgentName`]: a session
/// takes requests only with the token that opened it.
#[derive(Clone, Debug)]
pub struct Token(pub String);

/// The longest `get_outcome` waits.
pub const MAX_WAIT: u64 = 60;

/// What `/mcp` serves.
pub type McpService = axum::Router;

/// The MCP service for `/mcp`: one [`Server`] per session, messages of at most `max_body`
/// bytes (the HTTP surface's limit). Sessions end when `stop` fires.
pub fn service(
    engine: Engine,
    config: McpConfig,
    upstreams: Arc<Upstreams>,
    http: std::net::SocketAddr,
    max_body: usize,
    stop: CancellationToken,
) -> McpService {
    let session_timeout = config.session_timeout;
    let config = Arc::new(config);
    // Asks outlive sessions: an agent that comes back in a new one attaches to its question.
    let open = Arc::new(OpenAsks::default());
    // Tasks outlive requests (2026-07-28 clients have no session): one list per agent token, so
    // an agent sees only its own.
    let tasks = Arc::new(TaskLists::default());
    let cancels = Arc::new(Cancels::default());
    let heard = cancels.clone();
    let server = move || Server {
        engine: engine.clone(),
        config: config.clone(),
        upstreams: upstreams.clone(),
        tasks: tasks.clone(),
        open: open.clone(),
        cancels: cancels.clone(),
    };
    // Host names are checked by the HTTP surface (loopback names only while it listens on
    // loopback); a browser page may reach `/mcp` only from askgate's own origin.
    let port = http.port();
    let origins = [format!("http://127.0.0.1:{port}"), format!("http://localhost:{port}"), format!("http://{http}")];
    let settings = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(stop.clone());
    // A session with nothing in flight and no request for `session_timeout` ends; a held call's
    // progress or pings (every `progress_every`, shorter) keep its session.
    let sessions = sessions::Sessions::new(server(), stop, session_timeout);
    let rmcp = StreamableHttpService::new(move || Ok(server()), Arc::new(sessions.clone()), settings);
    axum::Router::new()
        .fallback_service(rmcp)
        .layer(axum::middleware::from_fn_with_state(sessions, sessions::owned))
        .layer(axum::middleware::from_fn_with_state((heard, max_body), waiting::sessionless_cancels))
}

/// One MCP session's view of askgate.
#[derive(Clone)]
pub struct Server {
    engine: Engine,
    config: Arc<McpConfig>,
    upstreams: Arc<Upstreams>,
    tasks: Arc<TaskLists>,
    open: Arc<OpenAsks>,
    /// Why clients cancelled their calls.
    cancels: Arc<Cancels>,
}

/// How long `tools/list` waits for upstreams still making their first start.
const FIRST_START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_tasks().build(),
        )
        .with_server_info(Implementation::new("askgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "Ask a person and wait for the answer: ask_user (a question, with options or free text), confirm \
                 (yes/no), request_approval (an action to allow or reject), notify (a message, no answer). The person \
                 answers on {}, the console or the web page, which can take minutes. If your calls \
                 time out, ask with `wait: false` (you get the question's id at once) and call get_outcome with that \
                 id and `wait` up to 60 seconds, again until it is no longer pending. A call that ended before the \
                 answer leaves the question waiting: calling the same tool again with the same arguments returns \
                 its answer and asks nobody twice.",
            crate::channel::PLATFORMS.iter().map(|p| p.title()).collect::<Vec<_>>().join(", ")
        ))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A client that lists once, as askgate starts, still gets the gated upstreams' tools.
        self.upstreams.first_tries(FIRST_START_WAIT).await;
        let mut tools = tools::list();
        tools.extend(self.upstreams.tools());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Told when an upstream's tools change (2025-11-25).
        self.upstreams.sessions().add(context.peer);
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // 2026-07-28 clients hear of tool changes on a stream of their own; that is all
        // askgate sends.
        (requested.tools_list_changed == Some(true)).then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, stream: SubscriptionContext) -> Result<(), ErrorData> {
        self.upstreams.sessions().listen(stream).await;
        Ok(())
    }

    async fn on_cancelled(&self, notification: CancelledNotificationParam, context: NotificationContext<RoleServer>) {
        if let Some(id) = notification.request_id {
            self.cancels.heard(agent_of(&context.extensions), id, notification.reason);
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.of(&agent(&context)).get_task(&request.task_id).map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.of(&agent(&context)).cancel_task(&request.task_id)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.take().unwrap_or_default();
        let Some(tool) = Tool::named(&request.name) else {
            return self.gated(&request.name, arguments, &context).await;
        };
        let key = AskKey::new(&asker(&context), tool.name(), &arguments);
        Ok(match Call::parse(tool, arguments, &self.config) {
            Ok(call) => self.call(call, key, &request, &context).await,
            Err(message) => failure(message).into(),
        })
    }
}

impl Server {
    async fn call(
        &self,
        call: Call,
        key: AskKey,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        match call {
            Call::Ask { tool, conversation, ask, wait } => {
                let question = match self.attach(&key).await {
                    Some(question) => question,
                    None => match self.engine.asks().ask_external(conversation, *ask, asker(context)).await {
                        Ok(question) => {
                            self.open.asked(key, &question);
                            question
                        }
                        Err(e) => return failure(ask_refused(&e)).into(),
                    },
                };
                if !question.is_pending() {
                    self.open.taken(question.id);
                    return tools::outcome(tool, &question).into();
                }
                if !wait {
                    return tools::outcome(tool, &question).into();
                }
                let forms = self.config.elicitation && elicit::supported(context);
                let (asker, inline) = (asker(context), elicit::inline(context));
                if forms && inline {
                    // 2026-07-28: the form goes back as the result, and comes back with the
                    // same call again.
                    if elicit::returned(&self.engine, &question, &asker, request).await {
                        return match self.engine.records().question(question.id).await {
                            Ok(Some(question)) if !question.is_pending() => {
                                self.open.taken(question.id);
                                tools::outcome(tool, &question).into()
                            }
                            // Dismissed: it waits for an answer in the chat.
                            Ok(Some(question)) => self.hold(tool, question, None, context).await,
                            Ok(None) => failure(format!("the question {} is gone", question.id)).into(),
                            Err(e) => {
                                failure(format!("askgate could not read the question {}: {e}", question.id)).into()
                            }
                        };
                    }
                    if let Some(form) = elicit::input_required(&question, &asker) {
                        return form.into();
                    }
                }
                // 2025-11-25: held until the call ends; dropping it takes the form away.
                let form = (forms && !inline)
                    .then(|| elicit::show(self.engine.clone(), question.clone(), asker, context))
                    .flatten();
                self.hold(tool, question, form, context).await
            }
            Call::Notify { conversation, message } => {
                match self.engine.asks().notify_conversation(&conversation, message) {
                    Ok(()) => tools::notified(&conversation).into(),
                    Err(e) => failure(e.to_string()).into(),
                }
            }
            // Only the client's own questions: another's id is not found.
            Call::Outcome { id, .. } if !self.asked(id, context).await => failure(format!("no question {id}")).into(),
            Call::Outcome { id, wait } => {
                // A client that polls has come back to its question.
                self.open.came_back(id);
                match self.engine.asks().wait_outcome(id, wait).await {
                    Ok(Some(question)) => {
                        if !question.is_pending() {
                            self.open.taken(id);
                        }
                        tools::outcome(Tool::GetOutcome, &question).into()
                    }
                    Ok(None) => failure(format!("no question {id}")).into(),
                    Err(e) => failure(format!("askgate could not read the question: {e}")).into(),
                }
            }
        }
    }

    /// Waits for a pending question's outcome: as a task when the client runs tasks, else
    /// holding the call. `form` (the client's own) is taken away once it ends.
    async fn hold(
        &self,
        tool: Tool,
        question: Question,
        form: Option<DropGuard>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        if tasks_supported(context) {
            return self.as_task(tool, question, form, &agent(context)).into();
        }
        let result = self.wait(tool, question, Waiter::call(context, agent(context), &self.cancels)).await;
        drop(form);
        result.into()
    }

    /// The question an earlier call of the same ask left waiting (its client timed out, or its
    /// session ended) or answered with nobody to take the outcome; none when there is none.
    async fn attach(&self, key: &AskKey) -> Option<Question> {
        let id = self.open.find(key, self.engine.clock().now_ms())?;
        match self.engine.records().question(id).await {
            Ok(Some(question)) => {
                tracing::info!(question = %id, "an MCP call attaches to the question an earlier call asked");
                Some(question)
            }
            Ok(None) | Err(_) => {
                self.open.taken(id);
                None
            }
        }
    }

    /// Whether the question `id` was asked by this session's agent and client.
    async fn asked(&self, id: QuestionId, context: &RequestContext<RoleServer>) -> bool {
        matches!(self.engine.records().asked_by(id, &asker(context)).await, Ok(Some(_)))
    }

    /// The call as a task the client polls (`tasks/get`) and may cancel (`tasks/cancel`); it
    /// is kept until a while after the question's deadline.
    fn as_task(&self, tool: Tool, question: Question, form: Option<DropGuard>, agent: &str) -> CreateTaskResult {
        let left = question.expires_at.map(|at| u64::try_from(at - self.engine.clock().now_ms()).unwrap_or(0));
        let options = TaskOptions::new()
            .with_ttl_ms(left.map(|ms| ms + TASK_KEPT_MS))
            .with_status_message(self.waiting(&question));
        let server = self.clone();
        let task = self.tasks.of(agent).spawn(options, move |context| {
            Box::pin(async move {
                let result = server.wait(tool, question, Waiter::Task(context.clone())).await;
                drop(form);
                if context.is_cancel_requested() { Err(TaskExit::Cancelled) } else { Ok(result) }
            })
        });
        CreateTaskResult::new(task)
    }

    /// Waits for the outcome, telling the client it still waits every `progress_every`. A
    /// client that cancels the call, or askgate stopping, cancels the question (its cards are
    /// retracted); a client that stops waiting leaves it waiting (see [`waiting`]).
    async fn wait(&self, tool: Tool, question: Question, mut waiter: Waiter) -> CallToolResult {
        let _waiting = self.open.waiting(question.id);
        match self.settle(question, &mut waiter).await {
            Ok(question) => {
                self.open.taken(question.id);
                tools::outcome(tool, &question)
            }
            Err(failed) => failed,
        }
    }

    /// The question once it is resolved, or the error the agent reads.
    async fn settle(&self, question: Question, waiter: &mut Waiter) -> Result<Question, CallToolResult> {
        let id = question.id;
        let stop = self.engine.stopping();
        loop {
            let waited = tokio::select! {
                waited = self.engine.asks().wait_outcome(id, self.config.progress_every) => waited,
                () = waiter.cancelled() => {
                    return Err(self.ended(id, waiter.ending().await).await);
                }
            };
            let question = match waited {
                Ok(Some(q)) => q,
                Ok(None) => return Err(failure(format!("the question {id} is gone"))),
                Err(e) => return Err(failure(format!("askgate could not read the question {id}: {e}"))),
            };
            if !question.is_pending() {
                return Ok(question);
            }
            if stop.is_cancelled() {
                // Nobody would be waiting for its answer after the restart.
                self.cancel(id, "shutdown").await;
                return Err(failure(format!(
                    "askgate restarted; the question {id} was cancelled. Ask again once askgate is back."
                )));
            }
            waiter.report(self.waiting(&question)).await;
        }
    }

    /// `waiting for an answer on telegram:42 (expires in 28m (20:36 UTC))`.
    fn waiting(&self, question: &Question) -> String {
        let at = question.conversation.as_ref().map_or_else(String::new, |c| format!(" on {c}"));
        let expiry = crate::wording::expiry(question.expires_at, self.engine.clock().now_ms());
        format!("waiting for an answer{at} ({expiry})")
    }

    /// What a wait that ended before its outcome does to the question, and what the (former)
    /// caller is told.
    async fn ended(&self, id: QuestionId, ending: Ending) -> CallToolResult {
        match ending {
            _ if self.engine.stopping().is_cancelled() => {
                self.cancel(id, "shutdown").await;
                failure(format!("askgate restarted; the question {id} was cancelled. Ask again once askgate is back."))
            }
            Ending::Deliberate(reason) => {
                self.cancel(id, reason).await;
                failure(format!("the call was cancelled; so was the question {id}"))
            }
            Ending::Gone => {
                self.await_return(id);
                failure(format!(
                    "the call ended before the answer; the question {id} waits {} s for the same call to come back",
                    self.config.reattach_grace.as_secs()
                ))
            }
            Ending::Detached(why) => {
                tracing::info!(question = %id, why, "an MCP call stopped waiting; its question still waits");
                failure(format!(
                    "the call ended before the answer ({why}); the question {id} still waits. Call the tool again \
                     with the same arguments, or get_outcome with its id, to get the answer"
                ))
            }
        }
    }

    /// Cancels the question of a call that went away ([`Ending::Gone`]) unless a call comes
    /// back to it within `reattach_grace`, or one still waits on it then.
    fn await_return(&self, id: QuestionId) {
        let Some(back) = self.open.gone(id) else { return };
        let grace = self.config.reattach_grace;
        tracing::info!(question = %id, grace = ?grace, "an MCP call went away; its question waits for it to come back");
        let (server, stop) = (self.clone(), self.engine.stopping());
        self.engine.tasks().spawn(async move {
            tokio::select! {
                () = back.cancelled() => {}
                () = tokio::time::sleep(grace) => {
                    if server.open.is_waited_on(id) {
                        return;
                    }
                    server.cancel(id, "client gone").await;
                }
                // Nobody would come back to it after the restart.
                () = stop.cancelled() => server.cancel(id, "shutdown").await,
            }
        });
    }

    async fn cancel(&self, id: QuestionId, reason: &str) {
        self.open.taken(id);
        match self.engine.asks().cancel_external(id, reason).await {
            Ok(_) => {
                tracing::info!(question = %id, reason, "an MCP call ended before its answer; the question is cancelled")
            }
            Err(e) => tracing::error!(question = %id, error = %e, "could not cancel an MCP call's question"),
        }
    }
}

/// How long a finished task stays observable past its question's deadline.
const TASK_KEPT_MS: u64 = 10 * 60 * 1000;

/// Whether the client negotiated the Tasks extension.
fn tasks_supported(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks())
}

/// `mcp:<agent>.<client name>`: the agent whose token the session's requests carry (checked
/// by askgate), and the name its client gave in `initialize` (its own word, a label): who
/// asked, as runs record it, and whose own grants an allow-always on its `request_approval`
/// makes.
fn asker(context: &RequestContext<RoleServer>) -> UserRef {
    let agent = agent(context);
    let name: String = context
        .client_info()
        .map(|info| info.name)
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(64)
        .collect();
    let name = if name.is_empty() { "client".to_owned() } else { name };
    UserRef::parse(&format!("mcp:{agent}.{name}"))
        .unwrap_or_else(|_| UserRef::parse("mcp:agent.client").expect("a valid user"))
}

/// The agent whose token the request carries (`agent` for the default token).
fn agent(context: &RequestContext<RoleServer>) -> String {
    agent_of(&context.extensions)
}

fn agent_of(extensions: &rmcp::model::Extensions) -> String {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<AgentName>())
        .map_or_else(|| "agent".to_owned(), |agent| agent.0.clone())
}

/// What an agent is told of a tool name askgate does not offer: names are exact, as listed.
fn unknown_tool(name: &str) -> String {
    let shown: String = name.chars().take(80).flat_map(char::escape_debug).collect();
    format!("no tool named `{shown}`: call a tool by exactly the name tools/list gives; nothing was called")
}

/// What an agent is told when its ask was refused.
fn ask_refused(error: &ExternalAskError) -> String {
    match error {
        ExternalAskError::Store(e) => {
            tracing::error!(error = %e, "an MCP ask could not be stored");
            "askgate could not store the question; nothing was asked".to_owned()
        }
        other => other.to_string(),
    }
}

/// A tool error: the agent reads `message`.
fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A conversation named by a call, when `[mcp]` allows it.
fn allowed_conversation(value: Option<Value>, config: &McpConfig) -> Result<Conversation, String> {
    let Some(value) = value else { return Ok(config.conversation.clone()) };
    let Value::String(text) = value else {
        return Err(format!("`conversation` must be a string like \"{}\"", crate::question::EXAMPLE_USER));
    };
    let conversation = Conversation::parse(&text).map_err(|e| format!("`conversation`: {e}"))?;
    if config.allows(&conversation) {
        Ok(conversation)
    } else {
        Err(format!(
            "`conversation` {conversation} is not allowed: an operator can add it to [mcp] allowed_conversations"
        ))
    }
}

/// Rejects keys left over once a tool took its own.
fn no_unknown(arguments: &Map<String, Value>, tool: Tool) -> Result<(), String> {
    match arguments.keys().next() {
        Some(key) => Err(format!("`{key}` is not an argument of {}; it takes {}", tool.name(), tool.arguments())),
        None => Ok(()),
    }
}
