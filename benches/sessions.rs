//! Idle MCP sessions, against the real (release) binary: the resident memory each costs the
//! server, and the server's CPU per session opened. An idle session is what an agent's client
//! leaves behind when it has started and looked: `initialize`, `notifications/initialized`,
//! `tools/list` (protocol revision 2025-11-25, which has sessions), then nothing. The client
//! keeps a pool of at most 8 connections, so the figures are the sessions', not sockets'.
//! Afterwards one of the first sessions calls a tool 1,000 times, one call after another: they
//! still work, and the time per call says what a call on an idle session costs.
//!
//! `cargo bench --bench sessions` (2,000 then 10,000 sessions, each in a fresh askgate; add
//! `-- --quick` for 2,000 only, `-- --streams` for 2,000 then 2,000 whose clients keep the
//! session's event stream, `GET /mcp`, open). `ASKGATE_BENCH_BIN` runs another askgate binary (an earlier
//! build, to compare). Figures go to stdout. Traffic stays on 127.0.0.1.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

#[path = "support/served.rs"]
mod served;
use served::{Start, cpu, memory_mb};

/// Sessions opened at once (and connections kept) by the bench.
const CONCURRENCY: usize = 8;

/// Tool calls made one after another in one session at the end.
const CALLS: u64 = 1_000;

struct Served {
    child: tokio::process::Child,
    url: String,
    token: String,
}

/// askgate on `dir` with an `[mcp]` section.
async fn serve(dir: &Path) -> Served {
    let config = dir.join("channels.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n\n\
             [mcp]\nconversation = \"console:local\"\n",
            dir.join("askgate.db").display()
        ),
    )
    .unwrap();
    // A line per session would be the log's cost, not the session's.
    let (child, base) = served::launch(&config, &Start { log: Some("info,rmcp=warn"), ..Start::default() }).await;
    let token = std::fs::read_to_string(dir.join("askgate-agent.token")).unwrap().trim().to_owned();
    Served { child, url: format!("{base}/mcp"), token }
}

/// One JSON-RPC message to `/mcp` in `session` (none for `initialize`): the session id the
/// answer names, and the answer's message (the `data:` of its event stream), if any.
async fn post(
    client: &reqwest::Client,
    served: &Served,
    session: Option<&str>,
    message: Value,
) -> (Option<String>, Option<Value>) {
    let mut request = client
        .post(&served.url)
        .bearer_auth(&served.token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{message}: {}", response.status());
    let id = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let body = response.text().await.unwrap();
    let answer = body.lines().filter_map(|l| l.strip_prefix("data:")).find_map(|d| serde_json::from_str(d.trim()).ok());
    (id, answer)
}

/// Opens an idle session; its id.
async fn open(client: &reqwest::Client, served: &Served) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let (id, answer) = post(client, served, None, init).await;
    let id = id.expect("a session id");
    assert!(answer.is_some_and(|a| a.get("result").is_some()));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(client, served, Some(&id), initialized).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (_, listed) = post(client, served, Some(&id), list).await;
    let tools = listed.and_then(|l| l["result"]["tools"].as_array().map(Vec::len));
    assert!(tools.is_some_and(|n| n > 0), "tools/list answered no tools");
    id
}

async fn open_many(client: &reqwest::Client, served: &Served, n: usize) -> Vec<String> {
    futures_util::stream::iter(0..n).map(|_| open(client, served)).buffered(CONCURRENCY).collect().await
}

/// Opens the event stream (`GET /mcp`) of `session`, as clients that listen for the server's
/// notifications keep one open; it stays open while the response is kept.
async fn listen(client: &reqwest::Client, served: &Served, session: &str) -> reqwest::Response {
    let response = client
        .get(&served.url)
        .bearer_auth(&served.token)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "GET /mcp: {}", response.status());
    response
}

/// Opens `n` idle sessions in a fresh askgate (each with its event stream open, when
/// `streams`) and prints what they cost.
async fn measure(n: usize, streams: bool) {
    let dir = tempfile::TempDir::new().unwrap();
    let mut served = serve(dir.path()).await;
    let pid = served.child.id().unwrap();
    let client = reqwest::Client::builder().pool_max_idle_per_host(CONCURRENCY).build().unwrap();
    // What the first sessions start once (the tool list, the HTTP stack) is no session's.
    let mut ids = open_many(&client, &served, 100).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ((before, _), cpu_before) = (memory_mb(pid), cpu(pid));
    let opened = open_many(&client, &served, n).await;
    let listener = reqwest::Client::new();
    let listening: Vec<reqwest::Response> = match streams {
        true => {
            futures_util::stream::iter(&opened)
                .map(|id| listen(&listener, &served, id))
                .buffered(CONCURRENCY)
                .collect()
                .await
        }
        false => Vec::new(),
    };
    ids.extend(opened);
    let cpu = cpu(pid) - cpu_before;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (after, peak) = memory_mb(pid);
    let per = (after - before).max(0.0) * 1024.0 / n as f64;
    println!(
        "{n:>6} idle sessions{}: {:.1} → {:.1} MB resident (peak {:.1} MB), {per:.1} KB per session; \
         askgate's CPU {:.2} ms per session opened",
        if streams { " with their event streams open" } else { "" },
        before,
        after,
        peak,
        cpu.as_secs_f64() * 1000.0 / n as f64
    );
    // The first session (idle all along) still calls a tool, and calls it again one call
    // after another (each finding it idle).
    let started = std::time::Instant::now();
    for i in 0..CALLS {
        let call = json!({"jsonrpc": "2.0", "id": 3 + i, "method": "tools/call",
            "params": {"name": "notify", "arguments": {"message": "still here"}}});
        let (_, called) = post(&client, &served, Some(&ids[0]), call).await;
        let called = called.expect("an answer to tools/call");
        assert_eq!(called["result"]["isError"], json!(false), "{called}");
    }
    println!(
        "{:>6} notify calls one after another in a session opened first: {:.2} ms each",
        CALLS,
        started.elapsed().as_secs_f64() * 1000.0 / CALLS as f64
    );
    drop(listening);
    served.child.kill().await.unwrap();
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let streams = std::env::args().any(|a| a == "--streams");
    // With their event streams open, 2,000 sessions are 2,000 sockets in this process.
    askgate::http::server::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        println!("askgate idle MCP sessions ({})", served::bin());
        measure(2_000, false).await;
        if streams {
            measure(2_000, true).await;
        } else if !quick {
            measure(10_000, false).await;
        }
    });
}
