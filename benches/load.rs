//! Memory and responsiveness under many clients, against the real (release) binary:
//! 10,000 pending questions; 400 event-stream clients that never read (resident memory while
//! they are connected and after they leave, and `/healthz` latency meanwhile); 20 clients that
//! each list every pending question at once; 4,300 clients that never finish their headers
//! (more than the default `max_connections` of 4,096; one that is closed connects again at
//! once), with `/healthz` and `/api` probed on fresh connections meanwhile, then the same under
//! an open-files limit of 1,024.
//!
//! `cargo bench --bench load` (add `-- --quick` for 2,000 questions and 100 clients,
//! `-- --slow-headers` for only the slow-header phases). `ASKGATE_BENCH_BIN` runs another
//! askgate binary (an earlier build, to compare). Figures go to stdout. Traffic stays on
//! 127.0.0.1.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use askgate::question::{Answerers, Ask, Conversation, Mode, RunId, UserRef};
use askgate::run::{Run, RunStatus};
use askgate::store::StoreExt;
use askgate::store::{SqliteStore, Store, Synchronous};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[path = "support/served.rs"]
mod served;
use served::{Start, memory_mb, serve};

/// Stores `n` questions waiting for an answer in `console:local`, as agents' asks would.
async fn fill(db: &Path, n: usize) {
    let store = SqliteStore::open(db.to_str().unwrap(), Synchronous::Normal).await.unwrap();
    let conversation = Conversation::parse("console:local").unwrap();
    let detail = "A paragraph of context, as agents send with their questions. ".repeat(8);
    let mut writes = Vec::new();
    for i in 0..n {
        let run = Run {
            id: RunId::new(),
            function: "api".into(),
            conversation: Some(conversation.clone()),
            initiator: UserRef::parse("api:operator").unwrap(),
            answerers: None,
            input: String::new(),
            mode: Mode::External,
            status: RunStatus::Waiting,
            says: 0,
            result: None,
            created_at: 1,
            updated_at: 1,
            update: None,
        };
        let ask = Ask::question(format!("Question {i}: which option?"))
            .options(["alpha", "beta", "gamma", "delta"])
            .detail(detail.clone())
            .timeout(askgate::question::Timeout::Never);
        let users = vec![UserRef::parse("console:local").unwrap()];
        let question = ask.validate().unwrap().pending(run.origin(0), Answerers::Users { users }, 1, None).unwrap();
        let store = &store;
        writes.push(async move { store.ask(&run, &Arc::new(question.clone())).await.unwrap() });
        if writes.len() == 256 {
            futures_util::future::join_all(writes.drain(..)).await;
        }
    }
    futures_util::future::join_all(writes).await;
    store.close().await;
}

/// `/healthz` latencies, sampled every 50 ms until `stop`.
async fn sample_health(base: String, stop: CancellationToken) -> Vec<Duration> {
    let client = reqwest::Client::new();
    let mut samples = Vec::new();
    while !stop.is_cancelled() {
        let started = Instant::now();
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            samples.push(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    samples
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let slow_only = std::env::args().any(|a| a == "--slow-headers");
    // Thousands of client sockets live in this process.
    let open_files = askgate::http::server::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        if !slow_only {
            many_clients(quick).await;
        }
        let limit = open_files.map_or("unlimited".to_owned(), |l| l.to_string());
        slow_headers(SLOW_CLIENTS, None, &limit).await;
        slow_headers(SLOW_CLIENTS, Some(1_024), "1024").await;
    });
}

/// The event-stream and listing phases.
async fn many_clients(quick: bool) {
    let (pending, streams) = if quick { (2_000, 100) } else { (10_000, 400) };
    {
        let dir = tempfile::TempDir::new().unwrap();
        fill(&dir.path().join("askgate.db"), pending).await;
        let mut served = serve(dir.path(), Start::default()).await;
        let pid = served.child.id().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (idle, _) = memory_mb(pid);
        println!("askgate load benchmark ({pending} pending questions, release binary)");
        println!("idle with {pending} pending:             {idle:>7.1} MB resident");

        // Clients that open the event stream and never read a byte.
        let stop = CancellationToken::new();
        let health = tokio::spawn(sample_health(served.base.clone(), stop.clone()));
        let addr = served.base.trim_start_matches("http://").to_owned();
        let mut sockets = Vec::new();
        for _ in 0..streams {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let request =
                format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n", served.token);
            s.write_all(request.as_bytes()).await.unwrap();
            sockets.push(s);
        }
        // Events flow meanwhile: agents ask, so every stream has something to fall behind on.
        let client = reqwest::Client::new();
        for i in 0..2_000 {
            let body = serde_json::json!({"conversation": "console:local", "prompt": format!("Live {i}?")});
            let _ = client
                .post(format!("{}/api/questions", served.base))
                .bearer_auth(&served.token)
                .json(&body)
                .send()
                .await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (with_clients, peak) = memory_mb(pid);
        println!("{streams} event clients that never read: {with_clients:>7.1} MB resident (peak {peak:.1} MB)");
        drop(sockets);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (after, _) = memory_mb(pid);
        println!("after they disconnect:               {after:>7.1} MB resident");

        stop.cancel();
        let mut samples = health.await.unwrap();
        samples.sort();
        println!(
            "/healthz meanwhile:                  p50 {:.1} ms, p99 {:.1} ms ({} samples)",
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.99).as_secs_f64() * 1e3,
            samples.len()
        );

        // Twenty clients each list every pending question, a page at a time, at once.
        let started = Instant::now();
        let listings = (0..20).map(|_| {
            let (client, base, token) = (client.clone(), served.base.clone(), served.token.clone());
            async move {
                let mut cursor: Option<String> = None;
                let mut n = 0;
                loop {
                    let mut url = format!("{base}/api/questions?limit=1000");
                    if let Some(c) = &cursor {
                        url.push_str(&format!("&cursor={c}"));
                    }
                    let page: serde_json::Value =
                        client.get(url).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
                    n += page["questions"].as_array().map_or(0, Vec::len);
                    match page["next"].as_str() {
                        Some(next) => cursor = Some(next.to_owned()),
                        None => return n,
                    }
                }
            }
        });
        let counts = futures_util::future::join_all(listings).await;
        let (_, peak) = memory_mb(pid);
        println!(
            "20 concurrent full listings:         {:.1} s, {} questions each, peak {peak:.1} MB resident",
            started.elapsed().as_secs_f64(),
            counts[0]
        );
        let _ = served.child.start_kill();
        let _ = served.child.wait().await;
    }
}

/// More slow clients than the default `max_connections`.
const SLOW_CLIENTS: usize = 4_300;

/// What a flood of slow clients has done so far.
#[derive(Default)]
struct Flood {
    /// Connected and holding a request open.
    open: AtomicU64,
    /// Clients that have connected at least once.
    started: AtomicU64,
    /// Closed by askgate (each connects again).
    closed: AtomicU64,
    /// Connection attempts refused or not answered within 3 s.
    failed: AtomicU64,
}

/// One client that sends part of a request's headers and never the rest; when askgate closes
/// the connection, it connects again at once.
async fn slow_client(addr: String, flood: Arc<Flood>, stop: CancellationToken) {
    let mut first = true;
    while !stop.is_cancelled() {
        let connected = tokio::select! {
            connected = tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(&addr)) => connected,
            () = stop.cancelled() => return,
        };
        let Ok(Ok(mut socket)) = connected else {
            flood.failed.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = stop.cancelled() => return,
            }
            continue;
        };
        if socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.is_err() {
            flood.closed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        flood.open.fetch_add(1, Ordering::Relaxed);
        if std::mem::take(&mut first) {
            flood.started.fetch_add(1, Ordering::Relaxed);
        }
        let mut byte = [0u8; 1];
        tokio::select! {
            _ = socket.read(&mut byte) => { flood.closed.fetch_add(1, Ordering::Relaxed); }
            () = stop.cancelled() => {}
        }
        flood.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `clients` slow clients against askgate at its defaults (under an open-files limit of
/// `open_files` when given), and probes of `/healthz` and `/api` on fresh connections meanwhile:
/// how many are answered within 5 s, and how fast.
async fn slow_headers(clients: usize, open_files: Option<u64>, limit: &str) {
    let dir = tempfile::TempDir::new().unwrap();
    let mut served = serve(dir.path(), Start { open_files, cpu: None }).await;
    let addr = served.base.trim_start_matches("http://").to_owned();
    let (flood, stop) = (Arc::new(Flood::default()), CancellationToken::new());
    let slow: Vec<_> =
        (0..clients).map(|_| tokio::spawn(slow_client(addr.clone(), flood.clone(), stop.clone()))).collect();
    // Until each has connected once, or 15 s.
    let started = Instant::now();
    while (flood.started.load(Ordering::Relaxed) as usize) < clients && started.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "{clients} clients that never finish their headers (open-files limit {limit}): {} connected within {:.1} s, {} at once now",
        flood.started.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        flood.open.load(Ordering::Relaxed)
    );
    // Forty probes, one every 250 ms, each on a connection of its own and given 5 s.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(5)).build().unwrap();
    let closed_before = flood.closed.load(Ordering::Relaxed);
    let probing = Instant::now();
    let mut probes = Vec::new();
    for i in 0..40 {
        let path = if i % 2 == 0 { "/healthz" } else { "/api/questions?limit=1" };
        let request = client.get(format!("{}{path}", served.base)).bearer_auth(&served.token);
        probes.push(tokio::spawn(async move {
            let started = Instant::now();
            let answered = request.send().await.is_ok_and(|r| r.status().is_success());
            (i % 2, answered.then(|| started.elapsed()))
        }));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let results = futures_util::future::join_all(probes).await;
    let closed = flood.closed.load(Ordering::Relaxed) - closed_before;
    println!(
        "  meanwhile askgate closed {closed} of them ({:.0}/s, each connected again); {} connection attempts failed in all",
        closed as f64 / probing.elapsed().as_secs_f64(),
        flood.failed.load(Ordering::Relaxed)
    );
    for (kind, name) in [(0, "/healthz"), (1, "/api/questions")] {
        let all: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).filter(|(k, _)| *k == kind).collect();
        let mut answered: Vec<Duration> = all.iter().filter_map(|(_, d)| *d).collect();
        answered.sort();
        println!(
            "  {name:<15} {}/{} answered within 5 s, p50 {:.1} ms, p99 {:.1} ms",
            answered.len(),
            all.len(),
            percentile(&answered, 0.5).as_secs_f64() * 1e3,
            percentile(&answered, 0.99).as_secs_f64() * 1e3
        );
    }
    stop.cancel();
    futures_util::future::join_all(slow).await;
    let _ = served.child.start_kill();
    let _ = served.child.wait().await;
}
