//! The HTTP surface: the REST API, the live event stream, the web page of question cards, the
//! signed webhook channel, `/healthz` and `/metrics`.
//!
//! Every `/api` route needs `Authorization: Bearer <token>`; the token is an operator
//! credential and answers as `api:operator`. Errors are `{"error":{"code","message"}}`.

mod api;
mod events;
pub mod token;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::channel::ChannelState;
use crate::channel::webhook::{InboundError, SIGNATURE_HEADER, Webhooks};
use crate::engine::{Engine, Resolver};
use crate::question::{Surface, UserRef};

pub use token::ApiToken;

/// The largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    engine: Engine,
    token: Arc<ApiToken>,
    webhooks: Option<Arc<Webhooks>>,
}

/// The HTTP application.
pub fn router(engine: Engine, token: ApiToken, webhooks: Option<Arc<Webhooks>>) -> Router {
    let state = AppState { engine, token: Arc::new(token), webhooks };
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/questions", get(api::list).post(api::create))
        .route("/api/questions/{id}", get(api::get_one))
        .route("/api/questions/{id}/outcome", get(api::outcome))
        .route("/api/questions/{id}/reply", post(api::reply))
        .route("/api/questions/{id}/reject", post(api::reject))
        .route("/api/events", get(events::stream))
        .route("/api/grants", get(api::grants))
        .route("/api/grants/{id}", axum::routing::delete(api::revoke_grant))
        .route("/api/runs", post(api::start_run))
        .route("/api/runs/{id}", get(api::get_run))
        .route("/channels/webhook/{name}", post(webhook))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .with_state(state)
}

/// Serves `app` on `listener` until `stop` fires.
///
/// # Errors
/// When the server fails.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await }).await
}

/// An error response: `{"error":{"code","message", …}}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    extra: Option<Value>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), extra: None }
    }

    fn with(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn not_found(message: impl Into<String>) -> Self {
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
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(Value::Object(extra)), Value::Object(map)) = (self.extra, &mut error) {
            map.extend(extra);
        }
        (self.status, axum::Json(json!({ "error": error }))).into_response()
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
        let bytes = read_body(request).await?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
    }
}

async fn read_body(request: Request) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(request.into_body(), MAX_BODY).await.map_err(|_| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the body is larger than {MAX_BODY} bytes"))
    })
}

/// The caller, authorized by the bearer token: the operator, via the API or the web page.
/// As an extractor it runs before the body is read, so an unauthorized request is refused as
/// such whatever its body.
pub struct Operator(pub Resolver);

impl axum::extract::FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        authorize(state, &parts.headers).map(Operator)
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

/// Checks the bearer token; returns who is acting (the operator, via the API or the page).
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<Resolver, ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(given) = given else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "send Authorization: Bearer <token>"));
    };
    if !state.token.matches(given) {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "the token is not valid"));
    }
    let via = match headers.get("x-askgate-surface").and_then(|v| v.to_str().ok()) {
        Some("web") => Surface::Web,
        _ => Surface::Api,
    };
    let user = UserRef::parse(&format!("api:{}", state.token.name())).map_err(ApiError::internal)?;
    Ok(Resolver { user, name: None, via, operator: true })
}

async fn page() -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "no-store"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
        Html(include_str!("http/page.html")),
    )
}

/// 200 when the store answers and no channel is down; 503 otherwise. The body says what
/// stands how: `{"status","store","pending","channels":{"telegram":"up",…}}`.
async fn healthz(State(state): State<AppState>) -> Response {
    let store = state.engine.store().pending_count().await;
    let channels = state.engine.channel_states();
    let down = channels.iter().any(|(_, s)| matches!(s, ChannelState::Down(_)));
    let healthy = store.is_ok() && !down;
    let body = json!({
        "status": if healthy { "ok" } else { "failing" },
        "store": match &store {
            Ok(_) => "ok".to_owned(),
            Err(e) => format!("failing: {e}"),
        },
        "pending": store.ok(),
        "channels": channels.iter().map(|(name, s)| ((*name).to_owned(), json!(s.to_string()))).collect::<serde_json::Map<_, _>>(),
    });
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, [(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
}

async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let pending = state.engine.store().pending_count().await?;
    let text = state.engine.metrics().render(
        usize::try_from(pending).unwrap_or(usize::MAX),
        &state.engine.channel_states(),
        &state.engine.store().write_stats(),
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
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
    let body = read_body(request).await?;
    let signature = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
    match webhooks.receive(&state.engine, &name, &body, signature).await {
        Ok(response) => {
            Ok(axum::Json(json!({"ok": true, "receipt": response.receipt, "reply": response.text})).into_response())
        }
        Err(e @ InboundError::UnknownEndpoint(_)) => Err(ApiError::not_found(e.to_string())),
        Err(e @ InboundError::BadSignature) => {
            Err(ApiError::new(StatusCode::UNAUTHORIZED, "bad_signature", e.to_string()))
        }
        Err(e @ InboundError::Malformed(_)) => Err(ApiError::bad_request(e.to_string())),
    }
}
