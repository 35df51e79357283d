//! Memory and responsiveness under many clients, against the real (release) binary:
//! 10,000 pending questions; 400 event-stream clients that never read (resident memory while
//! they are connected and after they leave, and `/healthz` latency meanwhile); 20 clients that
//! each list every pending question at once.
//!
//! `cargo bench --bench load` (add `-- --quick` for 2,000 questions and 100 clients). Figures go
//! to stdout.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use askgate::question::{Answerers, Ask, Conversation, Mode, RunId, UserRef};
use askgate::run::{Run, RunStatus};
use askgate::store::{SqliteStore, Store, Synchronous};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_askgate");

/// Resident and peak resident memory of a process, in MB.
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

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

struct Served {
    child: tokio::process::Child,
    base: String,
    token: String,
}

async fn serve(dir: &Path) -> Served {
    let config = dir.join("channels.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n",
            dir.join("askgate.db").display()
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next_line().await.unwrap().expect("askgate started");
        if let Some(rest) = line.split("web page on ").nth(1) {
            break rest.trim().trim_end_matches('/').to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(dir.join("askgate.token")).unwrap().trim().to_owned();
    Served { child, base, token }
}

/// `/healthz` latencies, sampled every 50 ms until `stop`.
async fn sample_health(base: String, stop: tokio_util::sync::CancellationToken) -> Vec<Duration> {
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
    let (pending, streams) = if quick { (2_000, 100) } else { (10_000, 400) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::TempDir::new().unwrap();
        fill(&dir.path().join("askgate.db"), pending).await;
        let mut served = serve(dir.path()).await;
        let pid = served.child.id().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (idle, _) = memory_mb(pid);
        println!("askgate load benchmark ({pending} pending questions, release binary)");
        println!("idle with {pending} pending:             {idle:>7.1} MB resident");

        // Clients that open the event stream and never read a byte.
        let stop = tokio_util::sync::CancellationToken::new();
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
    });
}
