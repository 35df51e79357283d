//! The HTTP surface through a real server on 127.0.0.1: every endpoint's success and error
//! paths, racing answers, reconnect replay, long-polling, the webhook channel.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use askgate::channel::webhook::{OutboundMessage, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use askgate::clock::Clock;
use askgate::config::{Config, Env};
use askgate::engine::Inbound;
use askgate::gateway::{ConsoleIo, Gateway};
use askgate::question::{Conversation, Surface, UserRef};
use askgate::store::Store;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::backend::Place;
use crate::support::{eventually, init_log};

pub struct App {
    pub gateway: Option<Gateway>,
    pub base: String,
    pub token: String,
    pub client: reqwest::Client,
    pub dir: Arc<TempDir>,
    /// The console's half of its input pipe: kept open, so the console reads until the end.
    _console: tokio::io::DuplexStream,
    /// The database it runs on, kept until the app goes.
    _place: Option<Place>,
}

impl App {
    /// askgate with the console (its output discarded), `demo` and `approve-demo`, and `extra`
    /// configuration, on a fresh database.
    pub async fn start(extra: &str, env: Env) -> Self {
        Self::start_in(Arc::new(TempDir::new().unwrap()), extra, env).await
    }

    /// As [`App::start`] on the database in `dir` (a restart when one ran there before).
    pub async fn start_in(dir: Arc<TempDir>, extra: &str, env: Env) -> Self {
        Self::start_config(dir, "", extra, env).await
    }

    /// As [`App::start`], on the database `place` keeps (SQLite in its directory, PostgreSQL, or
    /// the memory store's data).
    pub async fn on(place: Place, extra: &str, env: Env) -> Self {
        let mut app = match &place {
            Place::File(dir) => Self::start_full(dir.clone(), "", extra, env, None, None).await,
            Place::Postgres(_) | Place::Memory(_) => {
                let store = place.open().await;
                Self::start_full(Arc::new(TempDir::new().unwrap()), "", extra, env, Some(store), None).await
            }
        };
        app._place = Some(place);
        app
    }

    /// As [`App::start_in`], with `gateway` lines added to the `[gateway]` section.
    pub async fn start_config(dir: Arc<TempDir>, gateway: &str, extra: &str, env: Env) -> Self {
        Self::start_full(dir, gateway, extra, env, None, None).await
    }

    /// As [`App::start`], on `clock`.
    pub async fn start_clocked(extra: &str, env: Env, clock: Clock) -> Self {
        Self::start_full(Arc::new(TempDir::new().unwrap()), "", extra, env, None, Some(clock)).await
    }

    /// As [`App::start_in`] with no extra configuration, on `store` (which the test may close
    /// underneath the gateway).
    pub async fn start_with_store(dir: Arc<TempDir>, store: Arc<dyn Store>) -> Self {
        Self::start_full(dir, "", "", Env::default(), Some(store), None).await
    }

    async fn start_full(
        dir: Arc<TempDir>,
        gateway: &str,
        extra: &str,
        env: Env,
        store: Option<Arc<dyn Store>>,
        clock: Option<Clock>,
    ) -> Self {
        init_log();
        let db = dir.path().join("askgate.db");
        let gateway = gateway.trim_start_matches("[gateway]\n");
        let text = format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n{gateway}\n[channels.console]\nenabled = true\n\n\
             [[functions]]\nname = \"demo\"\nbuiltin = \"demo\"\n\n\
             [[functions]]\nname = \"approve-demo\"\nbuiltin = \"approve-demo\"\n{extra}",
            db.display()
        );
        let config = Config::parse(&text, "test.toml", dir.path()).unwrap();
        let (console, input) = tokio::io::duplex(1024);
        let io = ConsoleIo { input: Box::new(tokio::io::BufReader::new(input)), output: Box::new(tokio::io::sink()) };
        let mut builder = Gateway::builder(config).env(env).console(io);
        if let Some(store) = store {
            builder = builder.store(store);
        }
        if let Some(clock) = clock {
            builder = builder.clock(clock);
        }
        let gateway = builder.start().await.unwrap();
        let token = std::fs::read_to_string(dir.path().join("askgate.token")).unwrap().trim().to_owned();
        let base = format!("http://{}", gateway.http_addr());
        Self {
            gateway: Some(gateway),
            base,
            token,
            client: reqwest::Client::new(),
            dir,
            _console: console,
            _place: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        crate::support::answer(self.client.get(self.url(path)).bearer_auth(&self.token)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        crate::support::answer(self.client.post(self.url(path)).bearer_auth(&self.token).json(&body)).await
    }

    /// Asks a question in `conversation` through the API; returns its id.
    pub async fn ask(&self, conversation: &str, prompt: &str) -> String {
        let (status, body) = self
            .post(
                "/api/questions",
                json!({"conversation": conversation, "prompt": prompt, "options": ["red", "green", "blue"]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    /// Stops the gateway; whatever the test left under way has ended by the time the store
    /// closes (a task the stop waited out and left running is a fault).
    pub async fn stop(mut self) {
        let gateway = self.gateway.take().unwrap();
        let tasks = gateway.engine().tasks().clone();
        gateway.shutdown().await;
        assert!(tasks.is_empty(), "{} tasks outlived the stop", tasks.len());
    }
}

/// Unix seconds now, for signing webhook requests.
pub fn now_secs() -> i64 {
    Clock::system().now_ms() / 1000
}

pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"))
}

#[tokio::test]
async fn healthz_needs_no_token() {
    let app = App::start("", Env::from_pairs::<[(&str, &str); 0], _, _>([])).await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let health: Value = r.json().await.unwrap();
    assert_eq!((health["status"].as_str(), health["store"].as_str()), (Some("ok"), Some("ok")), "{health}");
    app.stop().await;
}

#[tokio::test]
async fn every_api_route_needs_the_token() {
    let app = App::start("", Env::from_pairs::<[(&str, &str); 0], _, _>([])).await;
    for path in ["/api/questions", "/api/events", "/api/questions/00000000-0000-4000-8000-000000000000"] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(error_code(&body), "unauthorized");
        let r = app.client.get(app.url(path)).bearer_auth("wrong").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path} with a wrong token");
    }
    let r = app.client.post(app.url("/api/questions")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_route_is_a_json_not_found() {
    let app = App::start("", Env::from_pairs::<[(&str, &str); 0], _, _>([])).await;
    let (status, body) = app.get("/nowhere").await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    app.stop().await;
}

/// askgate with a webhook channel and a Telegram channel whose API nobody answers.
#[cfg(feature = "telegram")]
async fn telegram_unreachable() -> App {
    // Telegram's API address is a port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let extra = format!(
        "\n[channels.telegram]\ntoken_env = \"TG\"\napi_url = \"http://{closed}\"\n\n\
         [channels.webhook.sms]\nurl = \"http://{closed}/\"\nsecret_env = \"SMS_SECRET\"\n"
    );
    App::start(&extra, Env::from_pairs([("TG", "123:fake"), ("SMS_SECRET", "s")])).await
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn healthz_says_which_channel_is_down_with_the_reason() {
    let app = telegram_unreachable().await;
    let health = eventually(|| async {
        let r = app.client.get(app.url("/healthz")).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        (status == StatusCode::SERVICE_UNAVAILABLE).then_some(body)
    })
    .await;
    assert_eq!(health["status"], "failing");
    assert_eq!(health["store"], "ok");
    assert_eq!(health["pending"], 0);
    assert_eq!(health["channels"]["webhook"], "up");
    let telegram = health["channels"]["telegram"].as_str().unwrap();
    assert!(telegram.starts_with("down: the Bot API cannot be reached"), "{health}");
    app.stop().await;
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn metrics_say_which_channel_is_up() {
    let app = telegram_unreachable().await;
    let metrics = eventually(|| async {
        let metrics = app.client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap();
        metrics.contains("askgate_channel_up{channel=\"telegram\"} 0").then_some(metrics)
    })
    .await;
    assert!(metrics.contains("askgate_channel_up{channel=\"webhook\"} 1"), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn requests_are_counted_by_the_route_that_matched_never_by_the_path_asked_for() {
    let app = App::start("", Env::from_pairs::<[(&str, &str); 0], _, _>([])).await;
    let (status, _) = app.get("/api/questions/00000000-0000-4000-8000-000000000000").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.post("/nowhere/00000000-0000-4000-8000-000000000000", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let metrics = app.client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for counted in [
        "askgate_http_requests_total{method=\"GET\",route=\"/api/questions/{id}\",status=\"404\"} 1",
        "askgate_http_requests_total{method=\"POST\",route=\"unmatched\",status=\"404\"} 1",
        "askgate_http_request_duration_seconds_count{method=\"POST\",route=\"unmatched\"} 1",
    ] {
        assert!(metrics.contains(counted), "{counted} in\n{metrics}");
    }
    // No id becomes a label value.
    assert!(!metrics.contains("00000000-"), "{metrics}");
    app.stop().await;
}

async fn an_agents_run_ends_when_its_question_is_resolved(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let id = app.ask("console:local", "Which colour?").await;
    let (_, q) = app.get(&format!("/api/questions/{id}")).await;
    let run = q["run"].as_str().unwrap().to_owned();
    let (status, body) = app.get(&format!("/api/runs/{run}")).await;
    assert_eq!((status, body["run"]["status"].as_str()), (StatusCode::OK, Some("waiting")), "{body}");
    let (status, _) =
        app.post(&format!("/api/questions/{id}/reply"), json!({"value": "green", "name": " Alice\n"})).await;
    assert_eq!(status, StatusCode::OK);
    let done = eventually(|| async {
        let (_, body) = app.get(&format!("/api/runs/{run}")).await;
        (body["run"]["status"] == "finished").then_some(body)
    })
    .await;
    // The typed name is a label beside the token's person, not a handle.
    assert_eq!(done["run"]["result"], "✅ green — “Alice” (api:operator) via api", "{done}");
    let (_, outcome) = app.get(&format!("/api/questions/{id}/outcome")).await;
    assert_eq!(
        (outcome["answered_by"].as_str(), outcome["answered_name"].as_str()),
        (Some("api:operator"), Some("“Alice” (api:operator)"))
    );

    // A rejection names its author the same way.
    let other = app.ask("console:local", "Which colour again?").await;
    let (status, _) = app.post(&format!("/api/questions/{other}/reject"), json!({"name": "Bob"})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, outcome) = app.get(&format!("/api/questions/{other}/outcome")).await;
    assert_eq!(outcome["answered_name"], "“Bob” (api:operator)", "{outcome}");
    app.stop().await;
}

async fn an_asked_question_is_fetched_by_its_id(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let id = app.ask("console:local", "Which colour?").await;
    let (status, q) = app.get(&format!("/api/questions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(q["prompt"], "Which colour?");
    assert_eq!(q["status"], "pending");
    assert_eq!(q["mode"], "external");
    assert_eq!(
        q["answerers"],
        json!({"policy": "users", "users": ["console:local"]}),
        "the console's operator answers"
    );
    assert!(q["expires_at"].as_i64().unwrap() > q["created_at"].as_i64().unwrap());
    assert!(q["deliveries"].is_array());
    // The 8 characters a card shows name it too, for every route that takes an id.
    let short = &id[..8];
    let (status, by_short) = app.get(&format!("/api/questions/{short}")).await;
    assert_eq!((status, by_short["id"].as_str()), (StatusCode::OK, Some(id.as_str())), "{by_short}");
    let (status, outcome) = app.get(&format!("/api/questions/{short}/outcome")).await;
    assert_eq!((status, outcome["id"].as_str()), (StatusCode::ACCEPTED, Some(id.as_str())), "{outcome}");
    app.stop().await;
}

async fn questions_are_listed_by_conversation(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    app.ask("console:local", "Which colour?").await;
    let (_, list) = app.get("/api/questions?conversation=console:local&status=pending").await;
    assert_eq!(list["questions"].as_array().unwrap().len(), 1);
    let (_, other) = app.get("/api/questions?conversation=telegram:1").await;
    assert_eq!(other["questions"].as_array().unwrap().len(), 0);
    app.stop().await;
}

async fn an_unknown_or_too_short_id_is_not_found(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let (status, body) = app.get("/api/questions/00000000-0000-4000-8000-000000000000").await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, _) = app.get("/api/questions/not-an-id").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = app.get("/api/questions/0b6f").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "too short: {body}");
    app.stop().await;
}

async fn a_bad_request_for_questions_is_refused_clearly(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let (status, body) = app.get("/api/questions?status=maybe").await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "bad_request"));

    let r = app.client.post(app.url("/api/questions")).bearer_auth(&app.token).body("{not json").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().starts_with("malformed JSON body"), "{body}");
    let (status, body) = app.post("/api/questions", json!({"conversation": "console:local"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = app.post("/api/questions", json!({"conversation": "no channel", "prompt": "x"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) =
        app.post("/api/questions", json!({"conversation": "console:local", "prompt": "x", "timeout": -5})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("timeout -5 is not a positive number"), "{body}");
    let (status, body) = app
        .post("/api/questions", json!({"conversation": "console:local", "prompt": "x", "options": ["a", "A"]}))
        .await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask"));
    let huge = "x".repeat(askgate::http::MAX_BODY + 1);
    let (status, body) = app.post("/api/questions", json!({"conversation": "console:local", "prompt": huge})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::PAYLOAD_TOO_LARGE, "too_large"));
    app.stop().await;
}

async fn a_reply_is_claimed_once_with_clear_refusals(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let id = app.ask("console:local", "Which colour?").await;
    let (status, body) = app.post(&format!("/api/questions/{id}/reply"), json!({"value": "purple"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_choice"));
    assert!(body["error"]["message"].as_str().unwrap().contains("1–3"));
    let (status, body) = app.post(&format!("/api/questions/{id}/reply"), json!({"value": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["receipt"]["receipt"], "resolved");
    let (status, body) = app.post(&format!("/api/questions/{id}/reply"), json!({"value": "blue"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::CONFLICT, "already_resolved"));
    assert_eq!(body["error"]["receipt"]["outcome"]["value"], "green");
    assert_eq!(body["error"]["receipt"]["by"], "api:operator");
    let (status, body) = app.post(&format!("/api/questions/{id}/reject"), json!({"feedback": "late"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _) = app.post("/api/questions/00000000-0000-4000-8000-000000000000/reply", json!({"value": 1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.post(&format!("/api/questions/{id}/reply"), json!({"valeu": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let rejected = app.ask("console:local", "Again?").await;
    let (status, body) = app.post(&format!("/api/questions/{rejected}/reject"), json!({"feedback": "no thanks"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, q) = app.get(&format!("/api/questions/{rejected}")).await;
    assert_eq!(q["outcome"], json!({"status": "declined", "feedback": "no thanks"}));
    app.stop().await;
}

async fn an_api_answer_racing_a_console_answer_resumes_the_run_once(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let console = Conversation::parse("console:local").unwrap();
    let user = UserRef::parse("console:local").unwrap();
    for round in 0..10 {
        engine.router().handle(Inbound::text(console.clone(), user.clone(), Surface::CONSOLE, "/run demo")).await;
        let (_, list) = eventually(|| async {
            let (s, list) = app.get("/api/questions?conversation=console:local").await;
            let found = list["questions"]
                .as_array()
                .is_some_and(|q| q.iter().any(|q| q["prompt"].as_str().unwrap().starts_with("Which")));
            found.then_some((s, list))
        })
        .await;
        let q = list["questions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["prompt"].as_str().unwrap().starts_with("Which"))
            .unwrap()
            .clone();
        let id = q["id"].as_str().unwrap().to_owned();
        let path = format!("/api/questions/{id}/reply");
        let api = app.post(&path, json!({"value": "dayjs"}));
        let typed = engine.router().handle(Inbound::text(
            console.clone(),
            user.clone(),
            Surface::CONSOLE,
            format!("/answer {id} luxon"),
        ));
        let ((status, _), response) = tokio::join!(api, typed);
        let console_won = matches!(response.receipt, Some(askgate::question::Receipt::Resolved { .. }));
        assert!(
            (status == StatusCode::OK) != console_won,
            "round {round}: both or neither won ({status}, {response:?})"
        );
        // The run resumed once: exactly one confirmation question follows.
        let run = engine.records().question(id.parse().unwrap()).await.unwrap().unwrap().run;
        let journal =
            eventually(|| async { Some(engine.records().journal(run).await.unwrap()).filter(|j| j.len() == 2) }).await;
        assert_eq!(journal[1].prompt, "Archive all 87 emails?");
        let confirm = journal[1].id;
        app.post(&format!("/api/questions/{confirm}/reply"), json!({"value": false})).await;
        let done =
            eventually(|| async { engine.records().run(run).await.unwrap().filter(|r| r.status.is_final()) }).await;
        assert_eq!(engine.records().journal(run).await.unwrap().len(), 2, "round {round}: {done:?}");
    }
    app.stop().await;
}

/// Reads server-sent events until `n` have arrived (or the stream ends).
async fn read_events(response: reqwest::Response, n: usize) -> Vec<(String, Value)> {
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.next()).await.expect("an event in time");
        let Some(Ok(chunk)) = chunk else { break };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            if !data.is_empty() {
                events.push((name, serde_json::from_str(&data).unwrap()));
            }
        }
    }
    events
}

async fn a_reconnecting_event_client_gets_exactly_the_pending_questions_first(place: Place) {
    let (out, _, _) = receiver("hush").await;
    let extra = format!("\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"SMS_SECRET\"\n");
    let app = App::on(place, &extra, Env::from_pairs([("SMS_SECRET", "hush")])).await;
    let events = |conversation: &'static str| {
        app.client.get(app.url(&format!("/api/events?conversation={conversation}"))).bearer_auth(&app.token).send()
    };
    let first = events("console:local").await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let a = app.ask("console:local", "First?").await;
    let b = app.ask("console:local", "Second?").await;
    let (status, body) = app
        .post(
            "/api/questions",
            json!({"conversation": "webhook:sms:+1555", "prompt": "Elsewhere?", "answerers": ["webhook:sms:+1555"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let seen = read_events(first, 5).await;
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "replay.done");
    assert_eq!(names.iter().filter(|n| **n == "run.started").count(), 2, "each ask opens an external run: {names:?}");
    let asked: Vec<&str> =
        seen.iter().filter(|(n, _)| n == "question.asked").map(|(_, q)| q["id"].as_str().unwrap()).collect();
    assert_eq!(asked, [a.as_str(), b.as_str()], "{names:?}");
    // Disconnected (the response is dropped); one question is answered meanwhile.
    app.post(&format!("/api/questions/{a}/reply"), json!({"value": "red"})).await;
    let again = events("console:local").await.unwrap();
    let replay = read_events(again, 2).await;
    assert_eq!(replay[0].0, "question.asked");
    assert_eq!(replay[0].1["id"], b.as_str(), "exactly the still-pending question comes first");
    assert_eq!(replay[1].0, "replay.done");
    app.stop().await;
}

async fn a_long_poll_returns_the_answer_when_it_lands(place: Place) {
    let app = Arc::new(App::on(place, "", Env::default()).await);
    let id = app.ask("console:local", "Which colour?").await;
    let waiting = {
        let (app, id) = (app.clone(), id.clone());
        tokio::spawn(async move { app.get(&format!("/api/questions/{id}/outcome?wait=30")).await })
    };
    // The answer lands once the server holds the poll, the usual case and the one exercised
    // here; an answer that lands first is returned at once, which is just as right.
    crate::support::logged(&format!("a caller waits for the question's outcome question={id}")).await;
    app.post(&format!("/api/questions/{id}/reply"), json!({"value": "blue"})).await;
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(25), waiting).await.expect("the long-poll returned").unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["outcome"]["value"], "blue");
    assert_eq!(body["answered_via"], "api");
}

async fn a_long_poll_that_times_out_says_pending_with_202(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let id = app.ask("console:local", "Which colour?").await;
    let (status, body) = app.get(&format!("/api/questions/{id}/outcome?wait=1")).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::ACCEPTED, Some("pending")));
    // Said of the question waited for, which the wait no longer keeps.
    assert_eq!((body["id"].as_str(), &body["outcome"]), (Some(id.as_str()), &Value::Null), "{body}");
    app.stop().await;
}

async fn a_long_poll_on_an_unknown_question_is_not_found(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let (status, _) = app.get("/api/questions/00000000-0000-4000-8000-000000000000/outcome?wait=1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

async fn runs_start_blocking_or_not_through_the_api(place: Place) {
    let app = Arc::new(App::on(place, "", Env::default()).await);
    let (status, body) = app.post("/api/runs", json!({"function": "nothing"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = app.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let waiting = {
        let app = app.clone();
        tokio::spawn(async move {
            app.post("/api/runs", json!({"function": "approve-demo", "conversation": "console:local", "wait": true}))
                .await
        })
    };
    let q = eventually(|| async {
        let (_, list) = app.get("/api/questions?conversation=console:local").await;
        list["questions"].as_array().unwrap().iter().find(|q| q["mode"] == "blocking").cloned()
    })
    .await;
    assert_eq!(q["prompt"], "rm -rf build/");
    app.post(&format!("/api/questions/{}/reply", q["id"].as_str().unwrap()), json!({"value": "once"})).await;
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["run"]["status"], "finished");
    assert_eq!(body["run"]["result"], "Allowed once: ran `rm -rf build/`.");
    let run_id = body["run"]["id"].as_str().unwrap();
    let (status, body) = app.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!((status, body["run"]["status"].as_str()), (StatusCode::OK, Some("finished")));
}

#[tokio::test]
async fn metrics_count_questions_by_outcome_per_surface() {
    let app = App::start("", Env::default()).await;
    let metrics = || async { app.client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap() };
    let before = metrics().await;
    assert!(before.contains("askgate_resume_seconds_count 0"), "{before}");
    let build = format!("askgate_build_info{{version=\"{}\",commit=\"", env!("CARGO_PKG_VERSION"));
    assert!(before.contains(&build), "{before}");
    for standard in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(before.lines().any(|l| l.starts_with(standard)), "{standard}in {before}");
    }
    // Liveness needs no token and says nothing about readiness.
    let live = app.client.get(app.url("/livez")).send().await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    let id = app.ask("console:local", "Which colour?").await;
    app.ask("console:local", "Another?").await;
    app.post(&format!("/api/questions/{id}/reply"), json!({"value": "red"})).await;
    // A follow-up run: its answer resumes it, and the resume is timed.
    let (status, body) = app.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let library = eventually(|| async {
        let (_, list) = app.get("/api/questions?conversation=console:local").await;
        list["questions"].as_array().unwrap().iter().find(|q| q["mode"] == "follow_up").cloned()
    })
    .await;
    app.post(&format!("/api/questions/{}/reply", library["id"].as_str().unwrap()), json!({"value": "dayjs"})).await;
    let text =
        eventually(|| async { Some(metrics().await).filter(|t| t.contains("askgate_questions_asked_total 4")) }).await;
    assert!(text.contains("askgate_questions_resolved_total{outcome=\"answered\",surface=\"api\"} 2"), "{text}");
    assert!(text.contains("askgate_questions_pending 2"), "{text}");
    assert!(text.contains("askgate_resume_seconds_count 1"), "{text}");
    let resumed: f64 =
        text.lines().find_map(|l| l.strip_prefix("askgate_resume_seconds_sum ")?.parse().ok()).expect("a sum");
    assert!(resumed > 0.0, "{text}");
    let counter = |name: &str| -> f64 {
        text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or_else(|| panic!("{name}: {text}"))
    };
    // Two asks and a claim at least; each batch holds one write or more.
    assert!(counter("askgate_store_writes_total ") >= 3.0, "{text}");
    assert!(counter("askgate_store_batches_total ") >= 1.0, "{text}");
    assert!(counter("askgate_store_batches_total ") <= counter("askgate_store_writes_total "), "{text}");
    assert_eq!(counter("askgate_store_write_errors_total "), 0.0, "{text}");
    assert_eq!(counter("askgate_store_held_seconds_total "), 0.0, "no checkpoint fell behind: {text}");
    app.stop().await;
}

/// A loopback receiver for outbound webhook messages; records the ones with a good signature.
pub async fn receiver(secret: &'static str) -> (String, Arc<Mutex<Vec<OutboundMessage>>>, Arc<Mutex<u32>>) {
    use axum::http::HeaderMap;
    let got = Arc::new(Mutex::new(Vec::new()));
    let bad = Arc::new(Mutex::new(0));
    let (g, b) = (got.clone(), bad.clone());
    let app = axum::Router::new().route(
        "/out",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let (g, b) = (g.clone(), b.clone());
            async move {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
                let now = Clock::system().now_ms();
                let checked = askgate::channel::webhook::verify(
                    secret.as_bytes(),
                    &body,
                    header(TIMESTAMP_HEADER),
                    header(SIGNATURE_HEADER),
                    now,
                );
                if checked.is_ok() {
                    g.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
                } else {
                    *b.lock().unwrap() += 1;
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/out", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got, bad)
}

#[tokio::test]
async fn the_webhook_channel_round_trips_signed_messages_only() {
    let (out, got, bad) = receiver("hush").await;
    let extra = format!(
        "\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"SMS_SECRET\"\nallowed_users = [\"+15550001\"]\n"
    );
    let app = App::start(&extra, Env::from_pairs([("SMS_SECRET", "hush")])).await;
    let inbound = |text: &str, secret: Option<&str>| {
        let body =
            // A name is optional; control characters and surrounding blanks are dropped.
            serde_json::to_vec(&json!({"conversation": "+15550001", "user": "+15550001", "text": text,
                "name": " Alice\u{7}\n"}))
            .unwrap();
        let mut request = app.client.post(app.url("/channels/webhook/sms")).header("content-type", "application/json");
        if let Some(secret) = secret {
            let at = now_secs();
            request = request
                .header(TIMESTAMP_HEADER, at.to_string())
                .header(SIGNATURE_HEADER, sign(secret.as_bytes(), at, &body));
        }
        request.body(body).send()
    };
    assert_eq!(inbound("/run demo", None).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(inbound("/run demo", Some("wrong")).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let r = app.client.post(app.url("/channels/webhook/nope")).body("{}").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(inbound("/run demo", Some("hush")).await.unwrap().status(), StatusCode::OK);
    let card = eventually(|| async {
        got.lock().unwrap().iter().find(|m| m.text.contains("Which library")).map(|m| m.text.clone())
    })
    .await;
    assert!(card.contains("1. dayjs") && card.contains("/answer "), "a text card lists its commands: {card}");
    assert_eq!(got.lock().unwrap()[0].conversation, "+15550001");
    assert_eq!(inbound("2", Some("hush")).await.unwrap().status(), StatusCode::OK);
    eventually(|| async {
        got.lock().unwrap().iter().any(|m| m.text.contains("✅ date-fns — “Alice” via webhook")).then_some(())
    })
    .await;
    eventually(|| async {
        got.lock().unwrap().iter().any(|m| m.text.contains("Archive all 87 emails?")).then_some(())
    })
    .await;
    inbound("yes", Some("hush")).await.unwrap();
    eventually(|| async {
        got.lock().unwrap().iter().any(|m| m.text == "Using date-fns for dates; archived 87 emails.").then_some(())
    })
    .await;
    // Allowed always, a grant is listed by /grants and taken back by /revoke, as text.
    let said = |needle: String| {
        let got = got.clone();
        eventually(move || {
            let got = got.clone();
            let needle = needle.clone();
            async move { got.lock().unwrap().iter().find(|m| m.text.contains(&needle)).map(|m| m.text.clone()) }
        })
    };
    inbound("/run approve-demo", Some("hush")).await.unwrap();
    said("Approve: rm -rf build/".into()).await;
    inbound("always", Some("hush")).await.unwrap();
    let (_, grants) = app.get("/api/grants").await;
    let short = grants["grants"][0]["id"].as_str().unwrap()[..8].to_owned();
    inbound("/grants", Some("hush")).await.unwrap();
    let listed = said("1 standing grant here".into()).await;
    assert!(listed.contains("\"rm -rf build/\" — set by “Alice”"), "{listed}");
    inbound(&format!("/revoke {short}"), Some("hush")).await.unwrap();
    said(format!("Revoked {short}: \"rm -rf build/\" will be asked again.")).await;
    let r = app
        .client
        .post(app.url("/channels/webhook/sms"))
        .header(TIMESTAMP_HEADER, now_secs().to_string())
        .header(SIGNATURE_HEADER, sign(b"hush", now_secs(), b"{oops"))
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(*bad.lock().unwrap(), 0, "every outbound message was signed");
    app.stop().await;
}

async fn allow_always_through_the_api_answers_the_next_ask_at_once(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let (status, body) = app
        .post("/api/questions", json!({"conversation": "console:local", "kind": "approval", "prompt": "deploy prod"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap();
    // Not editable: an edit does not fit, and nothing changes.
    let edit = json!({"value": {"decision": "edited", "action": "deploy staging"}});
    let (status, refused) = app.post(&format!("/api/questions/{id}/reply"), edit).await;
    assert_eq!((status, &refused["error"]["code"]), (StatusCode::UNPROCESSABLE_ENTITY, &json!("invalid_choice")));
    app.post(&format!("/api/questions/{id}/reply"), json!({"value": "always"})).await;
    // Asked again, the grant allows it at once, and the answer says so.
    let (status, again) = app
        .post("/api/questions", json!({"conversation": "console:local", "kind": "approval", "prompt": "deploy prod"}))
        .await;
    assert_eq!((status, &again["status"]), (StatusCode::CREATED, &json!("answered")), "{again}");
    assert_eq!(again["question"]["answered_name"], "a grant set by api:operator");
    app.stop().await;
}

async fn an_api_grant_is_listed_until_revoked(place: Place) {
    let app = App::on(place, "", Env::default()).await;
    let (status, body) = app
        .post("/api/questions", json!({"conversation": "console:local", "kind": "approval", "prompt": "deploy prod"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap();
    app.post(&format!("/api/questions/{id}/reply"), json!({"value": "always"})).await;
    let (_, list) = app.get("/api/grants?conversation=console:local").await;
    let grants = list["grants"].as_array().unwrap().clone();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["action"], "deploy prod");
    let grant = grants[0]["id"].as_str().unwrap();
    let r = app.client.delete(app.url(&format!("/api/grants/{grant}"))).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = app.client.delete(app.url(&format!("/api/grants/{grant}"))).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "a revoked grant is gone");
    let (_, list) = app.get("/api/grants").await;
    assert!(list["grants"].as_array().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn an_approval_ask_that_cannot_be_met_is_refused() {
    let app = App::on(Place::sqlite(), "", Env::default()).await;
    let ask = |extra: Value| {
        let mut body = json!({"conversation": "console:local", "kind": "approval", "prompt": "drop table users",
                              "answerers": ["console:local", "test:bob", "test:carol"]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        app.post("/api/questions", body)
    };
    for (bad, says) in [(json!({"quorum": 0}), "a quorum of 0"), (json!({"quorum": 2, "editable": true}), "editable")] {
        let (status, body) = ask(bad).await;
        assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask"), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{body}");
    }
    let (status, body) =
        app.post("/api/questions", json!({"conversation": "console:local", "prompt": "x?", "quorum": 2})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a quorum is for approvals: {body}");
    // The console's operator and the operator token are one person: not two approvers.
    let (status, body) = ask(json!({"quorum": 2, "answerers": ["console:local", "api:operator"]})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask"), "{body}");
    // Escalation to a conversation no channel here serves is refused before anything is stored.
    let (status, body) = ask(json!({"escalate_after": "10m", "escalate_to": "telegram:-100"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("escalate_to: no enabled channel serves"), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_quorum_approval_counts_each_person_once_but_never_the_asker() {
    let app = App::on(Place::sqlite(), "", Env::default()).await;
    let ask = |extra: Value| {
        let mut body = json!({"conversation": "console:local", "kind": "approval", "prompt": "drop table users",
                              "answerers": ["console:local", "test:bob", "test:carol"]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        app.post("/api/questions", body)
    };
    let (status, body) = ask(json!({"quorum": 2})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let reply = format!("/api/questions/{id}/reply");
    let (status, refused) = app.post(&reply, json!({"value": "always"})).await;
    assert_eq!((status, error_code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_choice"), "{refused}");
    // The token asked for it: its own approval does not count, nor the console's (the same person).
    let (status, own) = app.post(&reply, json!({"value": "once", "name": "Ops bot"})).await;
    assert_eq!((status, error_code(&own)), (StatusCode::FORBIDDEN, "own_request"), "{own}");
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let console = Conversation::parse("console:local").unwrap();
    let approve = |user: &str| {
        let user = UserRef::parse(user).unwrap();
        engine.router().handle(Inbound::text(console.clone(), user, Surface::CONSOLE, format!("/approve {}", &id[..8])))
    };
    let typed = approve("console:local").await;
    assert!(matches!(typed.receipt, Some(askgate::question::Receipt::OwnRequest { .. })), "{typed:?}");

    // Two others complete it, each counted once.
    let first = approve("test:bob").await;
    assert!(matches!(first.receipt, Some(askgate::question::Receipt::Counted { approvals: 1, .. })), "{first:?}");
    let again = approve("test:bob").await;
    assert!(matches!(again.receipt, Some(askgate::question::Receipt::AlreadyCounted { .. })), "{again:?}");
    let (_, q) = app.get(&format!("/api/questions/{id}")).await;
    assert_eq!((q["status"].as_str(), q["quorum"].as_u64()), (Some("pending"), Some(2)), "{q}");
    assert_eq!(q["approvals"][0]["user"], "test:bob");
    let last = approve("test:carol").await;
    assert!(matches!(last.receipt, Some(askgate::question::Receipt::Resolved { .. })), "{last:?}");
    let (_, outcome) = app.get(&format!("/api/questions/{id}/outcome")).await;
    assert_eq!(outcome["status"], "answered", "{outcome}");
    let (_, q) = app.get(&format!("/api/questions/{id}")).await;
    assert_eq!(q["approvals"].as_array().unwrap().len(), 2, "{q}");
    assert_eq!(q["answered_by"], "test:carol");
    app.stop().await;
}

// The API's behaviour that rests on the store's, on every store.
crate::backend::on_every_store!(
    an_agents_run_ends_when_its_question_is_resolved,
    an_asked_question_is_fetched_by_its_id,
    questions_are_listed_by_conversation,
    an_unknown_or_too_short_id_is_not_found,
    a_bad_request_for_questions_is_refused_clearly,
    a_reply_is_claimed_once_with_clear_refusals,
    an_api_answer_racing_a_console_answer_resumes_the_run_once,
    a_reconnecting_event_client_gets_exactly_the_pending_questions_first,
    a_long_poll_returns_the_answer_when_it_lands,
    a_long_poll_that_times_out_says_pending_with_202,
    a_long_poll_on_an_unknown_question_is_not_found,
    runs_start_blocking_or_not_through_the_api,
    allow_always_through_the_api_answers_the_next_ask_at_once,
    an_api_grant_is_listed_until_revoked,
);
