//! The HTTP surface: the REST API, the live event stream, the web page of question cards, the
//! signed webhook channel, `/healthz` and `/metrics`.
//!
//! Every `/api` route needs `Authorization: Bearer <token>`: the operator token (the operator,
//! `api:operator`) or an agent token (`agent:<name>`, which asks and reads what it asked, and
//! never answers); `/mcp` takes agent tokens only. Errors are `{"error":{"code","message"}}`.

mod access;
mod api;
mod auth;
mod bodies;
pub(super) mod chat;
mod events;
mod grants;
mod health;
mod limits;
pub mod openapi;
mod page;
pub(super) mod people;
mod process;
pub mod server;
pub mod token;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::validate_request::{ValidateRequest, ValidateRequestHeaderLayer};

use crate::channel::webhook::{InboundError, SIGNATURE_HEADER, TIMESTAMP_HEADER, Webhooks};
use crate::engine::Engine;

pub use api::refused;
pub use auth::{Admin, Answerer, Asker, Caller, Reader};
pub use bodies::{OutcomeView, RunView};
pub use token::{ApiToken, Role, Tokens};

/// Says where the operator answers: `web` from askgate's page, `api` (the default) otherwise.
pub const SURFACE_HEADER: &str = "x-askgate-surface";

/// The largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    engine: Engine,
    tokens: Arc<Tokens>,
    webhooks: Option<Arc<Webhooks>>,
    /// The web conversations.
    web: Option<Arc<crate::channel::web::WebChat>>,
    /// One permit per open event stream.
    streams: Arc<tokio::sync::Semaphore>,
    /// One permit: event streams read their backlogs one page at a time.
    backlog_reads: Arc<tokio::sync::Semaphore>,
    /// The gated MCP upstreams, whose first start `/healthz` waits for.
    upstreams: Option<Arc<crate::mcp::upstream::Upstreams>>,
    /// Whether a secret is configured for callbacks without their own.
    callback_secret: bool,
    /// Where callbacks may go; none: nowhere.
    callback_rules: Option<Arc<dyn CallbackCheck>>,
    /// How fast each person may act.
    person_limits: Arc<limits::PersonLimits>,
    /// Requests counted by route and status, for `/metrics`.
    requests: Arc<access::Requests>,
    /// The pending count `/healthz` shows.
    pending: Arc<health::Pending>,
}

/// The chat channels whose messages come over askgate's own server.
#[derive(Default)]
pub struct Surfaces {
    /// The webhook text channels.
    pub webhooks: Option<Arc<Webhooks>>,
    /// The chat platforms' own routes (a platform's events over HTTP).
    pub routes: Vec<Router>,
    /// People's own conversations on the page and in the TUI.
    pub web: Option<Arc<crate::channel::web::WebChat>>,
    /// The agents' own routes (Claude Code's hooks), called with a token: what one holds ends
    /// when that token is revoked.
    pub agents: Vec<Router<AppState>>,
}

/// How the HTTP surface is set up.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// It listens on a loopback address: only requests for loopback names are answered, so
    /// that a web page elsewhere cannot reach it through a DNS name that resolves to
    /// 127.0.0.1 (DNS rebinding).
    pub loopback: bool,
    /// The most event streams open at once.
    pub max_event_streams: usize,
    /// Whether a secret signs callbacks without one of their own (`gateway.callback_secret_env`
    /// is set); without it, a callback must bring its own.
    pub callback_secret: bool,
    /// Where callbacks may go (`[callbacks] allow`, askgate's own address); none: the API
    /// takes no callbacks.
    pub callbacks: Option<Arc<dyn CallbackCheck>>,
    /// How fast each person may act (`[limits]`).
    pub limits: crate::config::LimitsConfig,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            loopback: true,
            max_event_streams: crate::config::DEFAULT_MAX_EVENT_STREAMS,
            callback_secret: false,
            callbacks: None,
            limits: crate::config::LimitsConfig::default(),
        }
    }
}

/// Where a callback may go, checked when an agent asks for one (`agent::callbacks` sends it,
/// and checks again at every attempt).
pub trait CallbackCheck: std::fmt::Debug + Send + Sync {
    /// Whether a callback may go to `url` with `headers`.
    ///
    /// # Errors
    /// What is wrong, for the asker.
    fn check(&self, url: &str, headers: &[(String, String)]) -> Result<(), String>;
}

/// The page's policy: its own script and styles only, no framing, no forms posting elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The HTTP application; with `mcp`, the MCP server at `/mcp` (behind an agent token) and the
/// upstreams it gates.
pub fn router(
    engine: Engine,
    tokens: impl Into<Tokens>,
    surfaces: Surfaces,
    settings: HttpSettings,
    mcp: Option<(crate::mcp::McpService, Arc<crate::mcp::upstream::Upstreams>)>,
) -> Router {
    let streams = Arc::new(tokio::sync::Semaphore::new(settings.max_event_streams));
    let backlog_reads = Arc::new(tokio::sync::Semaphore::new(1));
    let (mcp, upstreams) = mcp.unzip();
    let state = AppState {
        engine,
        tokens: Arc::new(tokens.into()),
        webhooks: surfaces.webhooks,
        web: surfaces.web,
        streams,
        backlog_reads,
        upstreams,
        callback_secret: settings.callback_secret,
        callback_rules: settings.callbacks,
        person_limits: Arc::new(limits::PersonLimits::new(settings.limits)),
        requests: Arc::default(),
        pending: Arc::default(),
    };
    let mut app = Router::new();
    if let Some(mcp) = mcp {
        // The service itself too: a revoked agent's session is closed through it.
        let closes = (state.clone(), mcp.clone());
        app = app
            .nest_service("/mcp", mcp)
            .layer(axum::middleware::from_fn(session_ended))
            .layer(axum::middleware::from_fn_with_state(closes, auth::agents_only));
    }
    // The agents' routes, whose contracts are the agents' (not in /api/openapi.json).
    let agents = surfaces
        .agents
        .into_iter()
        .fold(Router::new(), Router::merge)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::until_revoked));
    let app = app
        .merge(agents)
        // The page's icon: an asset, not part of the API.
        .route("/favicon.svg", get(page::favicon));
    let app = routes()
        .into_iter()
        .fold(app, |app, (path, route)| app.route(path, route))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") });
    let requests = state.requests.clone();
    // The platforms' routes, whose contracts are the platforms'.
    let app = surfaces.routes.into_iter().fold(app.with_state(state), Router::merge);
    // One stack of layers that box nothing: each `Router::layer` (and each `from_fn`) boxes
    // every request's future again, which a long-poll keeps for up to a minute (measured: two
    // such layers cost a waiting request 2 KiB; these four, applied once, 0.6 KiB).
    let overriding = SetResponseHeaderLayer::overriding;
    app.layer(
        tower::ServiceBuilder::new()
            .layer(overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
            // A page that sets its own policy keeps it (a platform's confirm page posts its form).
            .layer(SetResponseHeaderLayer::if_not_present(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ))
            .layer(overriding(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")))
            .layer(access::layer(requests))
            // Inside the log: a request refused for its host is logged and counted.
            .layer(ValidateRequestHeaderLayer::custom(LoopbackHosts { only: settings.loopback })),
    )
}

/// Every route but `/mcp`: what `/api/openapi.json` describes.
fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/", get(page::page)),
        ("/page.js", get(page::script)),
        ("/page.css", get(page::style)),
        ("/healthz", get(health::healthz)),
        ("/livez", get(health::livez)),
        ("/metrics", get(access::metrics)),
        ("/api/openapi.json", get(openapi::serve)),
        ("/docs", get(openapi::reference)),
        ("/api/questions", get(api::list).post(api::create)),
        ("/api/questions/{id}", get(api::get_one)),
        ("/api/questions/{id}/outcome", get(api::outcome)),
        ("/api/questions/{id}/reply", post(api::reply)),
        ("/api/questions/{id}/reject", post(api::reject)),
        ("/api/events", get(events::stream)),
        ("/api/grants", get(grants::grants)),
        ("/api/grants/{id}", delete(grants::revoke_grant)),
        ("/api/runs", post(api::start_run)),
        ("/api/runs/{id}", get(api::get_run)),
        ("/api/me", get(people::me)),
        ("/api/messages", get(chat::lines).post(chat::say)),
        ("/api/signin", post(people::sign_in)),
        ("/api/signin/check", post(people::check_link)),
        ("/api/tokens", get(people::list_tokens).post(people::add_token)),
        ("/api/tokens/{name}", delete(people::revoke_token)),
        ("/channels/webhook/{name}", post(webhook)),
    ]
}

/// A `DELETE /mcp` that ended a session answers 200, as clients expect of a request that
/// succeeded (rmcp answers 202, which the Python SDK logs as `Session termination failed`).
async fn session_ended(request: Request, next: axum::middleware::Next) -> Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// Refuses (421) a request whose `Host` is not a loopback name or address, when askgate
/// listens on a loopback address (`only`).
#[derive(Clone, Copy)]
struct LoopbackHosts {
    only: bool,
}

impl<B> ValidateRequest<B> for LoopbackHosts {
    type ResponseBody = axum::body::Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response> {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !self.only || is_loopback_host(host) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected",
            "askgate listens on a loopback address and answers only requests for localhost or 127.0.0.1",
        )
        .into_response())
    }
}

/// `localhost`, `*.localhost`, or a loopback address, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host
            .rsplit_once(':')
            .map_or(host, |(name, port)| if port.chars().all(|c| c.is_ascii_digit()) { name } else { host }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Serves `app` on `listener` until `stop` fires, with the limits of [`server`] and at most
/// [`DEFAULT_MAX_CONNECTIONS`] connections.
///
/// # Errors
/// When the server fails.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) -> std::io::Result<()> {
    server::serve(listener, app, stop, server::Limits::default()).await
}

/// An error response: `{"error":{"code","message", …}}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    receipt: Option<Box<crate::question::Receipt>>,
    /// Close the connection after this response (the rest of the request was not read).
    close: bool,
    /// Seconds to wait before trying again (`Retry-After`).
    retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `status`, with a `code` a client acts on and a `message` for a person.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), receipt: None, close: false, retry_after: None }
    }

    fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    fn with_receipt(mut self, receipt: crate::question::Receipt) -> Self {
        self.receipt = Some(Box::new(receipt));
        self
    }

    /// A 400 saying what is wrong with the request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// A 404 saying what is not there.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "an API request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "something went wrong on our side; nothing was changed",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = bodies::ErrorDetail { code: self.code, message: self.message, receipt: self.receipt.map(|r| *r) };
        let mut response = (self.status, axum::Json(bodies::ErrorBody { error })).into_response();
        if self.close {
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::internal(e)
    }
}

/// A JSON body read with a size limit; every failure is a JSON error (400 or 413).
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = read_body(request, MAX_BODY).await?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
    }
}

/// A request's body, at most `limit` bytes, read within the server's body timeout.
///
/// # Errors
/// 413 when it is longer, 408 when it comes too slowly; the connection is closed after either,
/// as the rest was not read.
pub async fn read_body(request: Request, limit: usize) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(server::BODY_TIMEOUT, axum::body::to_bytes(request.into_body(), limit));
    match read.await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the body is larger than {limit} bytes"),
        )
        .closing()),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!("the body did not arrive within {}s", server::BODY_TIMEOUT.as_secs()),
        )
        .closing()),
    }
}

/// Query parameters; a malformed one is a JSON error (400) like every other.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(e) => Err(ApiError::bad_request(format!("malformed query: {}", e.body_text()))),
        }
    }
}

/// An optional `conversation` parameter.
fn conversation_param(value: Option<&str>) -> Result<Option<crate::question::Conversation>, ApiError> {
    value
        .map(|c| {
            crate::question::Conversation::parse(c).map_err(|e| ApiError::bad_request(format!("conversation: {e}")))
        })
        .transpose()
}

async fn webhook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let Some(webhooks) = &state.webhooks else {
        return Err(ApiError::not_found(format!("no webhook channel named `{name}`")));
    };
    let body = read_body(request, MAX_BODY).await?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match webhooks.receive(&state.engine, &name, &body, header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER)).await {
        Ok(response) => {
            Ok(axum::Json(bodies::WebhookReply { ok: true, receipt: response.receipt, reply: response.text })
                .into_response())
        }
        Err(e @ InboundError::UnknownEndpoint(_)) => Err(ApiError::not_found(e.to_string())),
        Err(InboundError::BadSignature(e)) => {
            Err(ApiError::new(StatusCode::UNAUTHORIZED, "bad_signature", e.to_string()))
        }
        Err(e @ InboundError::Malformed(_)) => Err(ApiError::bad_request(e.to_string())),
        Err(InboundError::Store(e)) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_and_every_description_is_routed() {
        let described: Vec<&str> =
            openapi::document()["paths"].as_object().unwrap().keys().map(String::as_str).collect();
        let routed: Vec<&str> = routes().into_iter().map(|(path, _)| path).chain(["/mcp"]).collect();
        for path in &routed {
            assert!(described.contains(path), "{path} is routed but not in /api/openapi.json");
        }
        for path in &described {
            assert!(routed.contains(path), "{path} is in /api/openapi.json but not routed");
        }
    }

    #[test]
    fn loopback_hosts_are_names_or_addresses_with_or_without_a_port() {
        for host in ["localhost", "localhost:8080", "127.0.0.1:8080", "127.0.0.1", "[::1]:8080", "app.localhost:1"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in
            ["", "evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.1:8080", "localhost.evil"]
        {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
