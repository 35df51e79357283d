//! Safe defaults, through a real server on 127.0.0.1: who may start runs, who may answer what
//! arrives through the API, signed webhook requests that cannot be replayed, owner-only files,
//! the page's headers and the Host check, and room for requests when clients flood askgate
//! with connections that never finish their headers.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use askgate::channel::webhook::{OutboundMessage, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use askgate::config::{Config, Env};
use askgate::gateway::Gateway;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::{App, error_code, now_secs, receiver};
use crate::support::eventually;

/// A bridge's request to `/channels/webhook/<endpoint>`, signed at `at` with `secret`.
async fn bridge_post(app: &App, endpoint: &str, secret: &str, at: i64, body: &[u8]) -> (StatusCode, Value) {
    let r = app
        .client
        .post(app.url(&format!("/channels/webhook/{endpoint}")))
        .header("content-type", "application/json")
        .header(TIMESTAMP_HEADER, at.to_string())
        .header(SIGNATURE_HEADER, sign(secret.as_bytes(), at, body))
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A message from `user` in conversation `+1555` of endpoint `endpoint`, signed now.
async fn say(app: &App, endpoint: &str, user: &str, text: &str) -> (StatusCode, Value) {
    let body = serde_json::to_vec(&json!({"conversation": "+1555", "user": user, "text": text})).unwrap();
    bridge_post(app, endpoint, "hush", now_secs(), &body).await
}

/// Waits for a message to the bridge that contains `needle`.
async fn delivered(got: &Arc<std::sync::Mutex<Vec<OutboundMessage>>>, needle: &str) -> String {
    eventually(|| async { got.lock().unwrap().iter().find(|m| m.text.contains(needle)).map(|m| m.text.clone()) }).await
}

/// Two webhook endpoints on one bridge: `sms` names nobody, `ops` is open to `rule`.
async fn with_endpoints(rule: &str, more: &str) -> (App, Arc<std::sync::Mutex<Vec<OutboundMessage>>>) {
    let (out, got, _) = receiver("hush").await;
    let extra = format!(
        "\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"SECRET\"\n\n\
         [channels.webhook.ops]\nurl = \"{out}\"\nsecret_env = \"SECRET\"\nallowed_users = {rule}\n{more}"
    );
    (App::start(&extra, Env::from_pairs([("SECRET", "hush")])).await, got)
}

#[tokio::test]
async fn who_may_start_runs_is_nobody_by_default_anyone_with_star_or_whom_a_function_lists() {
    let more =
        "\n[[functions]]\nname = \"guarded\"\nbuiltin = \"approve-demo\"\nallowed_users = [\"webhook:ops:+2\"]\n";
    let (app, got) = with_endpoints("[\"*\"]", more).await;
    // No allowed_users on `sms`: nobody there may start runs, and the refusal says how to open.
    let (status, body) = say(&app, "sms", "+1", "/run demo").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refusal = delivered(&got, "You may not start runs here").await;
    assert_eq!(
        refusal,
        "You may not start runs here. An operator can allow you with allowed_users = [\"webhook:sms:+1\"] in [channels.webhook.sms]."
    );
    // `*` on `ops` opens it to anyone.
    say(&app, "ops", "+1", "/run demo").await;
    delivered(&got, "Which library for date formatting?").await;
    // A function's own list narrows the channel's.
    say(&app, "ops", "+1", "/run guarded").await;
    let narrowed = delivered(&got, "You may not run guarded").await;
    assert!(
        narrowed.contains("allowed_users = [\"webhook:ops:+1\"] in the [[functions]] entry named \"guarded\""),
        "{narrowed}"
    );
    say(&app, "ops", "+2", "/run guarded").await;
    delivered(&got, "Approve: rm -rf build/").await;
    // Answering is unchanged: a person who may not start runs still answers by the rules.
    app.stop().await;
}

#[tokio::test]
async fn an_api_question_names_who_answers_or_is_refused() {
    let (app, got) = with_endpoints("[\"+7\"]", "").await;
    // `sms` names nobody: an API question there must name its answerers.
    let (status, body) =
        app.post("/api/questions", json!({"conversation": "webhook:sms:+1555", "prompt": "Go?"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "answerers_required"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"answerers\"") && message.contains("[channels.webhook.sms]"), "{message}");
    let (status, body) = app
        .post("/api/questions", json!({"conversation": "webhook:sms:+1555", "prompt": "Go?", "answerers": []}))
        .await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_answerers"), "{body}");
    let (_, all) = app.get("/api/questions?status=all").await;
    assert!(all["questions"].as_array().unwrap().is_empty(), "a refused ask stored something: {all}");

    // Named answerers: only they can answer.
    let ask = json!({"conversation": "webhook:sms:+1555", "prompt": "Go?", "options": ["yes", "no"],
        "answerers": ["webhook:sms:+1"]});
    let (status, body) = app.post("/api/questions", ask).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    delivered(&got, "Go?").await;
    say(&app, "sms", "+2", &format!("/answer {id} 1")).await;
    delivered(&got, "Not yours to answer").await;
    let (_, q) = app.get(&format!("/api/questions/{id}")).await;
    assert_eq!(q["status"], "pending");
    say(&app, "sms", "+1", &format!("/answer {id} 1")).await;
    let (_, q) = eventually(|| async {
        let (s, q) = app.get(&format!("/api/questions/{id}")).await;
        (q["status"] == "answered").then_some((s, q))
    })
    .await;
    assert_eq!(q["answered_by"], "webhook:sms:+1");

    // `ops` names people: they answer when the ask names nobody.
    let (status, body) =
        app.post("/api/questions", json!({"conversation": "webhook:ops:+1555", "prompt": "Ok?"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["question"]["answerers"], json!({"policy": "users", "users": ["webhook:ops:+7"]}));

    // A run started through the API in a chat is answerable by the people it names.
    let run = json!({"function": "demo", "conversation": "webhook:sms:+1555"});
    let (status, body) = app.post("/api/runs", run).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "answerers_required"), "{body}");
    let run = json!({"function": "demo", "conversation": "webhook:sms:+1555", "answerers": ["webhook:sms:+1"]});
    let (status, body) = app.post("/api/runs", run).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    delivered(&got, "Which library for date formatting?").await;
    say(&app, "sms", "+1", "2").await;
    delivered(&got, "Archive all 87 emails?").await;
    app.stop().await;
}

#[tokio::test]
async fn a_conversation_no_channel_serves_is_refused_naming_the_channels() {
    let (app, _) = with_endpoints("[]", "").await;
    for (path, body) in [
        ("/api/questions", json!({"conversation": "slack:foo", "prompt": "x", "answerers": ["slack:me"]})),
        ("/api/runs", json!({"function": "demo", "conversation": "slack:foo", "answerers": ["slack:me"]})),
        ("/api/questions", json!({"conversation": "webhook:nope:1", "prompt": "x", "answerers": ["webhook:nope:1"]})),
    ] {
        let (status, body) = app.post(path, body).await;
        assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "unknown_conversation"), "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("console:local, web:<person>, webhook:ops, webhook:sms"),
            "the channels are named: {message}"
        );
    }
    let (_, all) = app.get("/api/questions?status=all").await;
    assert!(all["questions"].as_array().unwrap().is_empty(), "{all}");

    app.stop().await;
}

#[tokio::test]
async fn a_bad_query_is_refused_in_json() {
    let (app, _) = with_endpoints("[]", "").await;
    let (status, body) = app.get("/api/questions/00000000-0000-4000-8000-000000000000/outcome?wait=-1").await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "bad_request"), "{body}");

    app.stop().await;
}

#[tokio::test]
async fn a_prompt_of_invisible_characters_is_refused() {
    let (app, _) = with_endpoints("[]", "").await;
    let (status, body) =
        app.post("/api/questions", json!({"conversation": "console:local", "prompt": "\u{200B} \u{FEFF}"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask"), "{body}");

    app.stop().await;
}

#[tokio::test]
async fn a_replayed_or_old_signed_request_is_refused_even_after_a_restart() {
    let (out, got, _) = receiver("hush").await;
    let extra = format!("\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"SECRET\"\n");
    let env = || Env::from_pairs([("SECRET", "hush")]);
    let app = App::start(&extra, env()).await;
    let body = serde_json::to_vec(&json!({"conversation": "+1555", "user": "+1", "text": "/help"})).unwrap();
    let at = now_secs();
    assert_eq!(bridge_post(&app, "sms", "hush", at, &body).await.0, StatusCode::OK);
    delivered(&got, "Commands:").await;
    let (status, replayed) = bridge_post(&app, "sms", "hush", at, &body).await;
    assert_eq!((status, error_code(&replayed)), (StatusCode::UNAUTHORIZED, "bad_signature"), "{replayed}");
    assert!(replayed["error"]["message"].as_str().unwrap().contains("accepted before"), "{replayed}");

    // A restart does not reopen the window.
    let dir = app.dir.clone();
    app.stop().await;
    let app = App::start_in(dir, &extra, env()).await;
    let (status, _) = bridge_post(&app, "sms", "hush", at, &body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a replay after a restart was accepted");

    // A request signed 301 s ago is refused; a new one is applied.
    let pending = serde_json::to_vec(&json!({"conversation": "+1555", "user": "+1", "text": "/pending"})).unwrap();
    let (status, old) = bridge_post(&app, "sms", "hush", now_secs() - 301, &pending).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{old}");
    assert!(old["error"]["message"].as_str().unwrap().contains("away from askgate's clock"), "{old}");
    assert_eq!(bridge_post(&app, "sms", "hush", now_secs(), &pending).await.0, StatusCode::OK);
    delivered(&got, "No questions are waiting here.").await;
    // Empty ids are refused clearly.
    let blank = serde_json::to_vec(&json!({"conversation": " ", "user": "+1", "text": "hi"})).unwrap();
    let (status, body) = bridge_post(&app, "sms", "hush", now_secs(), &blank).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "bad_request"), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn askgates_files_are_owner_only() {
    let app = App::start("", Env::default()).await;
    app.ask("console:local", "Written?").await;
    let dir = app.dir.clone();
    for file in ["askgate.db", "askgate.db-wal", "askgate.db-shm", "askgate.db.lock", "askgate.token"] {
        let mode = std::fs::metadata(dir.path().join(file)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file} has mode {mode:o}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_token_file_others_can_read_is_refused() {
    let dir = TempDir::new().unwrap();
    let token = dir.path().join("askgate.token");
    std::fs::write(&token, "a".repeat(64)).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text =
        format!("[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n", dir.path().join("askgate.db").display());
    let config = Config::parse(&text, "test.toml", dir.path()).unwrap();
    let Err(e) = Gateway::builder(config).env(Env::default()).start().await else {
        panic!("askgate started with a token file others can read")
    };
    let e = e.to_string();
    assert!(e.contains("can be read by others") && e.contains("chmod 600"), "{e}");
}

#[tokio::test]
async fn the_page_sends_its_content_policy() {
    let app = App::start("", Env::default()).await;
    let page = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(!html.contains("<script>") && html.contains("<script src=\"/page.js\">"), "no inline script");
    let script = app.client.get(app.url("/page.js")).send().await.unwrap();
    assert!(script.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));

    app.stop().await;
}

#[tokio::test]
async fn only_loopback_host_names_are_answered() {
    let app = App::start("", Env::default()).await;
    // DNS rebinding: a name that resolves to 127.0.0.1 but is not a loopback name.
    let port = app.base.rsplit(':').next().unwrap().to_owned();
    for (host, expected) in [
        (format!("evil.example:{port}"), StatusCode::MISDIRECTED_REQUEST),
        ("evil.example".to_owned(), StatusCode::MISDIRECTED_REQUEST),
        (format!("localhost:{port}"), StatusCode::OK),
        (format!("127.0.0.1:{port}"), StatusCode::OK),
    ] {
        let r = app.client.get(app.url("/healthz")).header("host", &host).send().await.unwrap();
        assert_eq!(r.status(), expected, "Host: {host}");
        // A refusal too carries the security headers (the check is inside them).
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "Host: {host}");
    }

    app.stop().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = App::start("", Env::default()).await;
    // The bearer scheme is case-insensitive; another scheme is not a bearer token.
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = app
            .client
            .get(app.url("/api/questions"))
            .header("authorization", format!("{scheme} {}", app.token))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{scheme}");
    }
    let r =
        app.client.get(app.url("/api/questions")).header("authorization", format!("Basic {}", app.token)).send().await;
    assert_eq!(r.unwrap().status(), StatusCode::UNAUTHORIZED);

    app.stop().await;
}

#[tokio::test]
async fn clients_that_never_finish_their_headers_make_room_for_requests_but_not_for_an_open_stream() {
    let dir = Arc::new(TempDir::new().unwrap());
    let app = App::start_config(dir, "[gateway]\nmax_connections = 8\n", "", Env::default()).await;
    // An event stream holds a request in flight for as long as it is open.
    let mut stream = app.client.get(app.url("/api/events")).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    // Twice as many clients as there is room for start a request and never finish its headers.
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..16 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
        slow.push(s);
    }
    // Each probe on a connection of its own, bounded well below the 10 s header timeout that
    // would otherwise free a place.
    let probe = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(3)).build().unwrap();
    for path in ["/healthz", "/api/questions", "/healthz", "/api/questions", "/healthz"] {
        let r = probe.get(app.url(path)).bearer_auth(&app.token).send().await;
        assert_eq!(r.map(|r| r.status()).map_err(|e| e.to_string()), Ok(StatusCode::OK), "{path}");
    }
    // The oldest slow client was closed to make room.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(3), slow[0].read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0))), "the oldest client that never finished its headers is still open");
    // The stream, older than all of them, was not: it hears of a new question, and is still
    // open seconds later (a connection closed for room is given one to finish its answer).
    let prompt = "Still streaming?";
    app.ask("console:local", prompt).await;
    let mut seen = String::new();
    let read = tokio::time::timeout(Duration::from_secs(3), async {
        while let Ok(Some(chunk)) = stream.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(read.is_err(), "the event stream was closed to make room");
    assert!(seen.contains(prompt), "{seen}");
    app.stop().await;
}
