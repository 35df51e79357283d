//! What operators see of the HTTP server: one log line per request (method, route, status,
//! duration) under the target `askgate::access`; for `/metrics` (prometheus-client, OpenMetrics
//! text) the requests counted by route and status with a latency histogram by route, beside the
//! engine's counters and the process's.
//!
//! The route is the pattern that matched (`/api/questions/{id}`), never the path asked for, so
//! ids do not become label values; a path no route matched counts as `unmatched`.
//!
//! A middleware of its own rather than tower-http's `TraceLayer`: the trace layer hands its
//! `on_response` only the response, the latency and the span (tower-http 0.6), while the log
//! line's fields and the metrics' labels are the request's method and matched route, which a
//! span's recorded fields cannot be read back from. Carrying them across would take a side
//! table keyed by span id (which a disabled span does not have) or a response classifier used
//! as a hook: more code than this, and less plain.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tracing::Instrument;

use super::AppState;

/// Upper bounds of the latency histogram, in seconds (a long-poll's wait counts).
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

type Labels = Vec<(&'static str, String)>;
type Latency = Family<Labels, Histogram, fn() -> Histogram>;

/// The counts since start, in a registry of their own.
pub(super) struct Requests {
    registry: Registry,
    counts: Family<Labels, Counter>,
    latency: Latency,
}

impl Default for Requests {
    fn default() -> Self {
        let counts = Family::<Labels, Counter>::default();
        let latency: Latency = Family::new_with_constructor(|| Histogram::new(BUCKETS));
        let mut registry = Registry::default();
        registry.register(
            "askgate_http_requests",
            "HTTP requests answered, by method, route and status",
            counts.clone(),
        );
        registry.register(
            "askgate_http_request_duration_seconds",
            "Time to answer an HTTP request (to its headers)",
            latency.clone(),
        );
        Self { registry, counts, latency }
    }
}

/// Times a request, logs it and counts it.
pub(super) async fn record(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned();
    // The request's span for traces (what it does inside, such as a question answered, is a
    // child of it); logs do not show it.
    let span = tracing::info_span!(
        target: "askgate::otel", "request", otel.name = format!("{method} {route}"),
        http.request.method = %method, http.route = %route, http.response.status_code = tracing::field::Empty
    );
    let response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    tracing::info!(
        target: "askgate::access",
        method = %method, route = %route, status, ms = elapsed.as_secs_f64() * 1000.0,
        "{method} {route} {status}"
    );
    state.requests.add(method, route, status, elapsed.as_secs_f64());
    response
}

impl Requests {
    fn add(&self, method: String, route: String, status: u16, seconds: f64) {
        let by_route = vec![("method", method), ("route", route)];
        self.latency.get_or_create(&by_route).observe(seconds);
        let mut by_status = by_route;
        by_status.push(("status", status.to_string()));
        self.counts.get_or_create(&by_status).inc();
    }
}

/// `/metrics`: the engine's counters and figures, the requests', the build, this instance
/// among others, and the standard `process_*` metrics, in OpenMetrics text.
pub(super) async fn metrics(State(state): State<AppState>) -> Result<Response, super::ApiError> {
    use prometheus_client::encoding::text::{encode_eof, encode_registry};

    let pending = state.engine.pending_count().await?;
    let now = crate::engine::metrics::Snapshot::new(
        pending,
        &state.engine.channel_states(),
        &state.engine.undelivered_cards(),
        &state.engine.write_stats(),
    );
    let mut text = String::new();
    let mut scrape = Registry::default();
    scrape.register(
        "askgate_build",
        "The version and the git commit askgate was built from",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION")), ("commit", env!("ASKGATE_COMMIT"))]),
    );
    if let Some(instance) = state.engine.instance() {
        let help = "This instance's id among those sharing the database";
        scrape.register("askgate_instance", help, Info::new(vec![("instance", instance.to_string())]));
    }
    scrape.register_collector(Box::new(super::process::Process));
    let written = state
        .engine
        .metrics()
        .encode(&mut text, now)
        .and_then(|()| encode_registry(&mut text, &state.requests.registry))
        .and_then(|()| encode_registry(&mut text, &scrape))
        .and_then(|()| encode_eof(&mut text));
    written.map_err(|_| super::ApiError::internal("the metrics could not be written"))?;
    Ok(([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

/// What `/metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
