//! Faults and load: shutdown that cannot hang, slow and idle clients, bounded listings and
//! event streams, an agent's run ended in its claim's commit, and a crash test that kills the real binary.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use askgate::channel::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use askgate::config::Env;
use askgate::store::{SqliteStore, Store, Synchronous};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binary::{Served, write_config};
use crate::http::{App, error_code, now_secs};
use crate::support::eventually;
use askgate::store::StoreExt;

/// An HTTP client for the real binary's API.
struct Api {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Api {
    async fn of(served: &Served, dir: &Path) -> Self {
        let (base, token) = served.api(dir).await;
        Self { base, token, client: reqwest::Client::new() }
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        crate::support::answer(self.client.get(format!("{}{path}", self.base)).bearer_auth(&self.token)).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let request = self.client.post(format!("{}{path}", self.base)).bearer_auth(&self.token).json(&body);
        crate::support::answer(request).await
    }
}

#[tokio::test]
async fn sigterm_ends_every_waiting_caller_then_exits_zero() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[[functions]]\nname = \"approve-demo\"\nbuiltin = \"approve-demo\"\n");
    // The engine's debug lines say when a long-poll is held.
    let served = Served::start_with_env(&config, &[("RUST_LOG", "info,askgate::engine::external=debug")]);
    let api = Arc::new(Api::of(&served, dir.path()).await);
    // An API caller waits for a run whose approval nobody gives.
    let waiting = {
        let api = api.clone();
        tokio::spawn(async move {
            api.post("/api/runs", json!({"function": "approve-demo", "conversation": "console:local", "wait": true}))
                .await
        })
    };
    let question: String = eventually(|| async {
        let (_, list) = api.get("/api/questions?conversation=console:local").await;
        list["questions"].as_array()?.first().map(|q| q["id"].as_str().unwrap().to_owned())
    })
    .await;
    // And a long-poll and an event stream are open. The long-poll goes over a connection the
    // server has already served (so it is accepted, not waiting in the kernel's backlog when the
    // signal comes); under a loaded machine a fresh connection could lose that race.
    let poller = Api { base: api.base.clone(), token: api.token.clone(), client: reqwest::Client::new() };
    assert_eq!(poller.get("/healthz").await.0, StatusCode::OK);
    let path = format!("/api/questions/{question}/outcome?wait=60");
    let polling = tokio::spawn(async move { poller.get(&path).await });
    let events = api.client.get(format!("{}/api/events", api.base)).bearer_auth(&api.token).send().await.unwrap();
    let mut events = events.bytes_stream();
    events.next().await.expect("the stream began").unwrap();
    // The signal comes once the server holds the long-poll.
    served.log_line(&format!("a caller waits for the question's outcome question={question}")).await;

    served.signal("TERM");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["run"]["status"].as_str(), body["run"]["result"].as_str()), (Some("cancelled"), Some("shutdown")));
    // The long-poll answers at once: still pending (202), or the cancellation if it saw it first.
    let (status, body) = polling.await.unwrap();
    let cancelled = status == StatusCode::OK && body["outcome"]["reason"] == "shutdown";
    assert!(status == StatusCode::ACCEPTED || cancelled, "{status} {body}");
    // The stream ends rather than waiting for the next keep-alive.
    while let Some(Ok(_)) = events.next().await {}
    let mut served = served;
    let status = tokio::time::timeout(Duration::from_secs(20), served.child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "{}", served.log());
}

#[tokio::test]
async fn a_second_signal_during_a_slow_shutdown_exits_at_once() {
    let dir = TempDir::new().unwrap();
    // A program that ignores its input and sleeps: its turn holds the shutdown for its grace.
    // It leaves a mark when it runs (in the config's directory, its working directory).
    let extra = "\n[[functions]]\nname = \"slow\"\ncommand = [\"sh\", \"-c\", \"touch started; read s; sleep 60\"]\n";
    let mut served = Served::start(&write_config(dir.path(), extra));
    served.log_line("askgate is ready").await;
    served.type_line("/run slow").await;
    // Signalled before the turn started, askgate would have nothing to finish and stop at once.
    eventually(|| async { dir.path().join("started").exists().then_some(()) }).await;
    served.signal("TERM");
    served.log_line("stopping: finishing in-flight work").await;
    served.signal("TERM");
    let status = tokio::time::timeout(Duration::from_secs(20), served.child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(130), "{}", served.log());
}

#[tokio::test]
async fn listings_are_paged_with_a_cursor() {
    let app = App::start("", Env::default()).await;
    let mut asked = Vec::new();
    for i in 0..25 {
        asked.push(app.ask("console:local", &format!("Question {i}?")).await);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/questions?limit=10&cursor={c}"),
            None => "/api/questions?limit=10".to_owned(),
        };
        let (status, page) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let questions = page["questions"].as_array().unwrap();
        assert!(questions.len() <= 10);
        seen.extend(questions.iter().map(|q| q["id"].as_str().unwrap().to_owned()));
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, asked, "every pending question once, oldest first");
    let (status, body) = app.get("/api/questions?status=all&limit=3").await;
    assert_eq!(status, StatusCode::OK);
    let newest: Vec<&str> = body["questions"].as_array().unwrap().iter().map(|q| q["id"].as_str().unwrap()).collect();
    assert_eq!(newest, [asked[24].as_str(), asked[23].as_str(), asked[22].as_str()], "history is newest first");
    for bad in ["/api/questions?limit=0", "/api/questions?limit=1001", "/api/questions?cursor=nope"] {
        let (status, body) = app.get(bad).await;
        assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "bad_request"), "{bad}: {body}");
    }
    app.stop().await;
}

/// Server-sent events as they arrive: (name, id, data).
struct Sse {
    stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    buffer: String,
}

impl Sse {
    fn new(response: reqwest::Response) -> Self {
        Self { stream: Box::pin(response.bytes_stream()), buffer: String::new() }
    }

    /// The next `n` named events.
    async fn read(&mut self, n: usize) -> Vec<(String, Option<String>, Value)> {
        let mut out = Vec::new();
        while out.len() < n {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut id, mut data) = (String::new(), None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                if !name.is_empty() {
                    out.push((name, id, serde_json::from_str(&data).unwrap_or(Value::Null)));
                }
                continue;
            }
            let chunk =
                tokio::time::timeout(Duration::from_secs(20), self.stream.next()).await.expect("an event in time");
            let Some(Ok(chunk)) = chunk else { break };
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
        out
    }
}

#[tokio::test]
async fn an_event_client_resumes_from_its_last_id() {
    let app = App::start("\n", Env::default()).await;
    let events = |last: Option<String>| {
        let mut request = app.client.get(app.url("/api/events")).bearer_auth(&app.token);
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request.send()
    };
    let mut first = Sse::new(events(None).await.unwrap());
    assert_eq!(first.read(1).await[0].0, "replay.done", "nothing waits yet");
    let a = app.ask("console:local", "First?").await;
    let seen = first.read(2).await;
    let (_, last_id, asked) = seen.iter().find(|(n, _, _)| n == "question.asked").unwrap();
    assert_eq!(asked["id"], a.as_str());
    assert!(last_id.is_some(), "a live event carries its id");
    drop(first);
    // Disconnected. Meanwhile the question is answered and another is asked.
    app.post(&format!("/api/questions/{a}/reply"), json!({"value": "red"})).await;
    let b = app.ask("console:local", "Second?").await;
    let resumed = Sse::new(events(last_id.clone()).await.unwrap()).read(3).await;
    let names: Vec<&str> = resumed.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(!names.contains(&"replay.done"), "a resumed client gets what it missed, not everything: {names:?}");
    assert_eq!(resumed[0].2["id"], a.as_str(), "first what happened to the first question: {names:?}");
    assert!(resumed.iter().any(|(n, _, q)| n == "question.asked" && q["id"] == b.as_str()), "{names:?}");
    // An id from another process (before a restart) gets the whole picture again.
    let fresh = Sse::new(events(Some("00000000-1".to_owned())).await.unwrap()).read(2).await;
    assert_eq!((fresh[0].0.as_str(), fresh[0].2["id"].as_str()), ("question.asked", Some(b.as_str())));
    assert_eq!(fresh[1].0, "replay.done");
    app.stop().await;
}

#[tokio::test]
async fn the_event_stream_cap_answers_503_beyond_it() {
    let dir = Arc::new(TempDir::new().unwrap());
    let app = App::start_config(dir, "[gateway]\nmax_event_streams = 1\n", "", Env::default()).await;
    let open = app.client.get(app.url("/api/events")).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(open.status(), StatusCode::OK);
    let (status, body) = app.get("/api/events").await;
    assert_eq!((status, error_code(&body)), (StatusCode::SERVICE_UNAVAILABLE, "too_many_streams"), "{body}");
    drop(open);
    eventually(|| async {
        let r = app.client.get(app.url("/api/events")).bearer_auth(&app.token).send().await.unwrap();
        (r.status() == StatusCode::OK).then_some(())
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn slow_headers_are_cut_off_within_a_connection_cap() {
    let dir = Arc::new(TempDir::new().unwrap());
    let app = App::start_in(dir.clone(), "", Env::default()).await;
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let token = askgate::http::ApiToken::new("t".repeat(32), "operator");
    let router =
        askgate::http::router(engine.clone(), token, Default::default(), askgate::http::HttpSettings::default(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = askgate::http::server::Limits { max_connections: 2, header_timeout: Duration::from_millis(500) };
    tokio::spawn(askgate::http::server::serve(listener, router, engine.stopping(), limits));
    // Two clients that send their headers a byte at a time, and never finish.
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /hea").await.unwrap();
        slow.push(s);
    }
    // A third is served at once, in the place of the older slow one; the header timeout cuts
    // off the other.
    let health = reqwest::get(format!("http://{addr}/healthz")).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    for mut s in slow {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "a client that never finished its headers was kept open");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_closing_the_connection() {
    let dir = Arc::new(TempDir::new().unwrap());
    let app = App::start_in(dir.clone(), "", Env::default()).await;
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let token = askgate::http::ApiToken::new("t".repeat(32), "operator");
    let router =
        askgate::http::router(engine.clone(), token, Default::default(), askgate::http::HttpSettings::default(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = askgate::http::server::Limits { max_connections: 2, header_timeout: Duration::from_millis(500) };
    tokio::spawn(askgate::http::server::serve(listener, router, engine.stopping(), limits));
    // A body over the limit gets 413 and the connection is closed.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = "x".repeat(askgate::http::MAX_BODY + 10);
    let request = format!(
        "POST /api/questions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        "t".repeat(32),
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut response)).await.unwrap().unwrap();
    let response = String::from_utf8_lossy(&response).to_lowercase();
    assert!(response.starts_with("http/1.1 413"), "{response}");
    assert!(response.contains("connection: close"), "{response}");
    app.stop().await;
}

/// A bridge whose answers the test sets: refuse (503 with Retry-After), stall, or take.
#[derive(Clone, Default)]
struct Bridge {
    state: Arc<std::sync::Mutex<BridgeState>>,
    released: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct BridgeState {
    refuse: u32,
    stall: bool,
    got: Vec<String>,
    tries: u32,
}

impl Bridge {
    async fn start() -> (Self, String) {
        let bridge = Self::default();
        let b = bridge.clone();
        let app = axum::Router::new().route(
            "/out",
            axum::routing::post(move |body: axum::body::Bytes| {
                let b = b.clone();
                async move {
                    loop {
                        let released = b.released.notified();
                        if !b.state.lock().unwrap().stall {
                            break;
                        }
                        released.await;
                    }
                    let mut state = b.state.lock().unwrap();
                    state.tries += 1;
                    if state.refuse > 0 {
                        state.refuse -= 1;
                        return (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")], "busy").into_response();
                    }
                    let message: Value = serde_json::from_slice(&body).unwrap();
                    state.got.push(message["text"].as_str().unwrap().to_owned());
                    (StatusCode::OK, [("retry-after", "0")], "ok").into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/out", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (bridge, url)
    }

    fn got(&self, needle: &str) -> bool {
        self.state.lock().unwrap().got.iter().any(|t| t.contains(needle))
    }
}

use axum::response::IntoResponse;

async fn bridge_post(app: &App, endpoint: &str, text: &str) -> StatusCode {
    let body = serde_json::to_vec(&json!({"conversation": "+1", "user": "+1", "text": text})).unwrap();
    let at = now_secs();
    app.client
        .post(app.url(&format!("/channels/webhook/{endpoint}")))
        .header(TIMESTAMP_HEADER, at.to_string())
        .header(SIGNATURE_HEADER, sign(b"hush", at, &body))
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_card_is_tried_again_until_it_gets_through_and_a_stalled_bridge_holds_up_only_itself() {
    let (good, good_url) = Bridge::start().await;
    let (stuck, stuck_url) = Bridge::start().await;
    let extra = format!(
        "\n[channels.webhook.good]\nurl = \"{good_url}\"\nsecret_env = \"S\"\nallowed_users = [\"*\"]\n\
         \n[channels.webhook.stuck]\nurl = \"{stuck_url}\"\nsecret_env = \"S\"\nallowed_users = [\"*\"]\n"
    );
    let app = App::start(&extra, Env::from_pairs([("S", "hush")])).await;

    // The stuck bridge takes nothing: an inbound message is still answered at once.
    stuck.state.lock().unwrap().stall = true;
    assert_eq!(bridge_post(&app, "stuck", "/run demo").await, StatusCode::OK);
    // The good bridge refuses for a while (503, Retry-After: 1): its card is tried again.
    good.state.lock().unwrap().refuse = 7;
    assert_eq!(bridge_post(&app, "good", "/run demo").await, StatusCode::OK);
    let health = eventually(|| async {
        let r = app.client.get(app.url("/healthz")).send().await.unwrap();
        let body: Value = r.json().await.unwrap();
        (body["status"] == "degraded").then_some(body)
    })
    .await;
    assert!(health["channels"]["webhook"].as_str().unwrap().starts_with("degraded: "), "{health}");
    let metrics = app.client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("askgate_cards_undelivered{channel=\"webhook\"} "), "{metrics}");
    eventually(|| async { good.got("Which library for date formatting?").then_some(()) }).await;
    assert!(good.state.lock().unwrap().tries > 7, "the card was tried until it got through");
    assert!(!stuck.got("Which library"), "the stuck bridge took nothing");
    // Released, the stuck bridge gets its card too: it was held, not dropped.
    stuck.state.lock().unwrap().stall = false;
    stuck.released.notify_waiters();
    eventually(|| async { stuck.got("Which library for date formatting?").then_some(()) }).await;
    app.stop().await;
}

#[tokio::test]
async fn a_run_that_cannot_be_stored_is_refused_not_accepted() {
    let dir = Arc::new(TempDir::new().unwrap());
    let db = dir.path().join("askgate.db");
    let store = Arc::new(SqliteStore::open(&db.to_string_lossy(), Synchronous::Normal).await.unwrap());
    let app = App::start_with_store(dir, store.clone()).await;
    // The store is closed underneath the API: nothing can be written.
    store.close().await;
    let (status, body) = app.post("/api/runs", json!({"function": "demo"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("closed"), "the store's reason: {body}");
}

/// A small deterministic generator, so that a failing crash test can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[tokio::test]
async fn answers_survive_sigkill_at_random_points() {
    let seed = std::env::var("ASKGATE_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_cafe_u64);
    let mut rng = Rng(seed);
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    // Every answer the API acknowledged (200), by question: it must stay recorded as given.
    let mut acknowledged: std::collections::HashMap<String, Value> = Default::default();
    let mut runs: Vec<String> = Vec::new();
    let started = std::time::Instant::now();
    let mut kills = 0;
    while kills < 20 {
        let served = Served::start(&config);
        let api = Api::of(&served, dir.path()).await;
        // Before anything new: what survived the last kill.
        check_after_restart(&api, &acknowledged, &runs).await;
        // Work until a random moment, then SIGKILL mid-flight.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(50 + rng.next() % 400);
        let work = async {
            loop {
                let (status, body) =
                    api.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
                if status != StatusCode::ACCEPTED {
                    continue;
                }
                runs.push(body["id"].as_str().unwrap().to_owned());
                for _ in 0..2 {
                    let run = runs.last().unwrap().clone();
                    let Some(q) = pending_of(&api, &run).await else { break };
                    let value =
                        if q["kind"] == "confirm" { json!(rng.next().is_multiple_of(2)) } else { json!("luxon") };
                    let (status, _) = api
                        .post(&format!("/api/questions/{}/reply", q["id"].as_str().unwrap()), json!({"value": value}))
                        .await;
                    if status == StatusCode::OK {
                        acknowledged.insert(q["id"].as_str().unwrap().to_owned(), value);
                    }
                }
            }
        };
        let _ = tokio::time::timeout_at(deadline, work).await;
        served.signal("KILL");
        let mut served = served;
        let _ = served.child.wait().await;
        kills += 1;
    }
    let served = Served::start(&config);
    let api = Api::of(&served, dir.path()).await;
    check_after_restart(&api, &acknowledged, &runs).await;
    assert!(acknowledged.len() >= 10, "the test answered too little to mean much: {}", acknowledged.len());
    assert_eq!(served.terminate().await.code(), Some(0));
    eprintln!(
        "crash test: seed {seed:#x}, {kills} kills, {} answers, {} runs, {:?}",
        acknowledged.len(),
        runs.len(),
        started.elapsed()
    );
}

/// The pending question of `run`, waiting for it to appear (a run asks shortly after it starts).
async fn pending_of(api: &Api, run: &str) -> Option<Value> {
    for _ in 0..200 {
        let (_, list) = api.get("/api/questions?conversation=console:local&limit=1000").await;
        if let Some(q) = list["questions"].as_array().and_then(|qs| qs.iter().find(|q| q["run"] == run)) {
            return Some(q.clone());
        }
        let (_, body) = api.get(&format!("/api/runs/{run}")).await;
        if body["run"]["status"].as_str().is_some_and(|s| s != "running" && s != "waiting") {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// No acknowledged answer is lost or changed, and no run stays `running`.
async fn check_after_restart(api: &Api, acknowledged: &std::collections::HashMap<String, Value>, runs: &[String]) {
    for (id, value) in acknowledged {
        let (status, q) = api.get(&format!("/api/questions/{id}")).await;
        assert_eq!(status, StatusCode::OK, "an acknowledged question is gone: {id}");
        assert_eq!(q["status"], "answered", "an acknowledged answer was lost: {q}");
        assert_eq!(&q["outcome"]["value"], value, "an acknowledged answer changed: {q}");
    }
    for run in runs {
        eventually(|| async {
            let (status, body) = api.get(&format!("/api/runs/{run}")).await;
            assert_eq!(status, StatusCode::OK, "an accepted run is gone: {run}");
            (body["run"]["status"] != "running").then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn an_agents_run_ends_in_its_claims_commit_so_a_crash_after_it_leaves_nothing_to_repair() {
    use askgate::question::{Answerers, Ask, Mode, Outcome, Surface};
    use askgate::run::RunStatus;
    use askgate::store::{Resolution, Store};
    let dir = TempDir::new().unwrap();
    let db = dir.path().join("askgate.db");
    let run = {
        // The claim lands, and the store closes before anything else is written.
        let store = SqliteStore::open(db.to_str().unwrap(), Synchronous::Normal).await.unwrap();
        let mut run = crate::support::waiting_run("console:local", "");
        run.mode = Mode::External;
        let q = Ask::question("Still there?")
            .validate()
            .unwrap()
            .pending(run.origin(0), Answerers::Conversation, 1, None)
            .unwrap();
        store.ask(&run, &Arc::new(q.clone())).await.unwrap();
        let outcome = Outcome::Answered { value: json!("yes") };
        let resolution = Resolution {
            question: q.clone(),
            outcome,
            by: None,
            name: None,
            via: Surface::API,
            // Now: the claim ends the run at this time, and a run that ended long ago is pruned.
            at: askgate::clock::Clock::system().now_ms(),
            grant: None,
            update: None,
            approvals: None,
        };
        store.resolve(resolution.clone()).await.unwrap();
        assert_eq!(store.run(run.id).await.unwrap().unwrap().status, RunStatus::Finished);
        store.close().await;
        run.id
    };
    let dir = Arc::new(dir);
    let app = App::start_in(dir, "", Env::default()).await;
    let finished = app.gateway.as_ref().unwrap().engine().records().run(run).await.unwrap().unwrap();
    assert_eq!(finished.status, RunStatus::Finished);
    assert!(finished.result.unwrap().starts_with("✅ yes"));
    app.stop().await;
}

#[tokio::test]
async fn an_event_client_that_does_not_read_is_disconnected_but_may_resume() {
    let app = App::start("", Env::default()).await;
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let response = app.client.get(app.url("/api/events")).bearer_auth(&app.token).send().await.unwrap();
    let mut stream = Sse::new(response);
    let first = stream.read(1).await;
    let resume_from = first[0].1.clone().expect("replay.done carries an id");
    // It stops reading while far more events happen than a stream may fall behind.
    let operator = askgate::question::UserRef::parse("api:operator").unwrap();
    let console = askgate::question::Conversation::parse("console:local").unwrap();
    for i in 0..(askgate::engine::EVENTS_BUFFERED + 200) {
        let ask = askgate::question::Ask::question(format!("Flood {i}?"));
        engine.asks().ask_external(console.clone(), ask, operator.clone()).await.unwrap();
    }
    // Reading again, it finds its stream ended (rather than buffered without end) ...
    let got = stream.read(usize::MAX).await;
    assert!(got.len() < 2 * (askgate::engine::EVENTS_BUFFERED + 200), "the stream was buffered without end");
    // ... and reconnecting with its last id, it is given the whole picture again (what it
    // missed is more than is kept per stream) or what it missed, never an error.
    let again = app
        .client
        .get(app.url("/api/events"))
        .bearer_auth(&app.token)
        .header("last-event-id", resume_from)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert!(!Sse::new(again).read(1).await.is_empty());
    app.stop().await;
}
