//! The CPU the request log and the HTTP metrics cost: `GET /livez` sent `N` times, one after
//! another, straight into the router (no sockets), on one thread; the process's user and
//! system CPU time per request, first with no tracing subscriber (the layer's own work: the
//! route label, the metrics, the span callsites), then with the log layer askgate runs with
//! (text lines at `info`, the trace-only spans filtered out) writing to a sink.
//!
//! `cargo bench --bench access` (add `-- --quick` for 20,000 requests). Figures go to stdout;
//! to compare two builds, run their bench binaries in turn, several times each.

use std::sync::Arc;
use std::time::Duration;

use askgate::clock::Clock;
use askgate::engine::{Engine, Functions, Settings};
use askgate::http::{ApiToken, HttpSettings};
use askgate::store::{SqliteStore, Synchronous};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use tower_service::Service;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::prelude::*;

/// The allocator the `askgate` binary runs with (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// This process's user and system CPU time so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports them in USER_HZ, 100 a second on every common build.
    Duration::from_millis(ticks * 10)
}

/// `n` requests to `/livez`, each answered and its body read; the CPU per request.
async fn livez(app: &axum::Router, n: u32) -> Duration {
    let started = cpu();
    for _ in 0..n {
        let request = Request::get("/livez").header(header::HOST, "localhost").body(Body::empty()).unwrap();
        let response = app.clone().call(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
    }
    (cpu() - started) / n
}

fn main() {
    let n = if std::env::args().any(|a| a == "--quick") { 20_000 } else { 200_000 };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("askgate.db");
        let store = SqliteStore::open(db.to_str().unwrap(), Synchronous::Normal).await.unwrap();
        let engine = Engine::new(Arc::new(store), Functions::new(), Settings::default(), Clock::system());
        engine.start().await.unwrap();
        let token = ApiToken::new("bench-secret", "operator");
        let app = askgate::http::router(engine.clone(), token, Default::default(), HttpSettings::default(), None);
        // Warm up: the metric families' first entries, the allocator's pages.
        livez(&app, n / 20).await;
        let quiet = livez(&app, n).await;
        // The log layer of `askgate serve` (see `cli/telemetry.rs`), into a sink.
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_ansi(false)
            .with_filter(EnvFilter::new("info"))
            .with_filter(filter_fn(|meta| !(meta.is_span() && meta.target() == "askgate::otel")));
        tracing_subscriber::registry().with(logs).init();
        livez(&app, n / 20).await;
        let logged = livez(&app, n).await;
        println!(
            "{n} × GET /livez: {:.2} µs CPU per request without a subscriber, {:.2} µs with the log layer",
            quiet.as_secs_f64() * 1e6,
            logged.as_secs_f64() * 1e6
        );
        engine.shutdown().await;
    });
}
