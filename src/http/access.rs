//! What operators see of the HTTP server: one log line per request (method, route, status,
//! duration) under the target `askgate::access`, and for `/metrics` the requests counted by
//! route and status with a latency histogram by route.
//!
//! The route is the pattern that matched (`/api/questions/{id}`), never the path asked for, so
//! ids do not become label values; a path no route matched counts as `unmatched`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::AppState;

/// Upper bounds of the latency histogram, in seconds (a long-poll's wait counts).
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

/// The counts since start.
#[derive(Default)]
pub(super) struct Requests {
    counts: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
}

#[derive(Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
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
        *self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((method.clone(), route.clone(), status))
            .or_default() += 1;
        let mut latency = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
        let h = latency.entry((method, route)).or_default();
        for (bound, count) in BUCKETS.iter().zip(h.buckets.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// The counts in Prometheus' text format.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP askgate_http_requests_total HTTP requests answered, by method, route and status.\n");
        out.push_str("# TYPE askgate_http_requests_total counter\n");
        for ((method, route, status), n) in self.counts.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(
                out,
                "askgate_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                label(route)
            );
        }
        out.push_str("# HELP askgate_http_request_duration_seconds Time to answer an HTTP request (to its headers).\n");
        out.push_str("# TYPE askgate_http_request_duration_seconds histogram\n");
        for ((method, route), h) in self.latency.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let labels = format!("method=\"{method}\",route=\"{}\"", label(route));
            for (bound, count) in BUCKETS.iter().zip(h.buckets.iter()) {
                let _ =
                    writeln!(out, "askgate_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "askgate_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "askgate_http_request_duration_seconds_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "askgate_http_request_duration_seconds_count{{{labels}}} {}", h.count);
        }
        out
    }
}

/// A label value as Prometheus' text format writes it.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
