//! opencode's prompts through the real binary, against a loopback server that speaks opencode's
//! event stream (`GET /global/event`, one `data:` line per event) and its reply routes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;

use crate::binary::{Served, write_config};
use crate::support::eventually;

/// A reply opencode received: its path, its `directory` and its body.
type Reply = (String, Option<String>, Value);

#[derive(Clone, Default)]
struct Fake {
    streams: Arc<Mutex<Vec<mpsc::UnboundedSender<String>>>>,
    replies: Arc<Mutex<Vec<Reply>>>,
    authorization: Arc<Mutex<Vec<String>>>,
    /// What `GET /permission` and `GET /question` list as pending.
    pending: Arc<Mutex<Vec<Value>>>,
    /// How many replies to refuse (500) before taking one.
    refuse: Arc<AtomicUsize>,
    /// Every reply that came, taken or refused: its path and whether it was taken.
    attempts: Arc<Mutex<Vec<(String, bool)>>>,
    /// `GET /project` never answers.
    hang_projects: Arc<AtomicBool>,
}

impl Fake {
    async fn start() -> (Self, String) {
        let fake = Self::default();
        let app = axum::Router::new()
            .route("/global/event", get(events))
            .route("/permission", get(listed))
            .route("/question", get(listed))
            .route("/permission/{id}/reply", post(replied))
            .route("/question/{id}/reply", post(replied))
            .route("/question/{id}/reject", post(replied))
            .route("/session/{session}/permissions/{id}", post(replied_old))
            .route("/project", get(projects))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, url)
    }

    /// Sends an event of project `directory` to every open stream.
    fn send(&self, directory: &str, kind: &str, properties: Value) {
        let event =
            json!({"directory": directory, "project": "p", "payload": {"type": kind, "properties": properties}});
        for stream in self.streams.lock().unwrap().iter() {
            let _ = stream.send(format!("data: {event}\n\n"));
        }
    }

    /// Sends `text` as it is to every open stream.
    fn send_raw(&self, text: String) {
        for stream in self.streams.lock().unwrap().iter() {
            let _ = stream.send(text.clone());
        }
    }

    /// Ends every open stream, as a restart of opencode does.
    fn drop_streams(&self) {
        self.streams.lock().unwrap().clear();
    }

    async fn reply(&self, path: &str) -> Reply {
        eventually(|| async { self.replies.lock().unwrap().iter().find(|r| r.0 == path).cloned() }).await
    }
}

async fn events(State(fake): State<Fake>, headers: HeaderMap) -> axum::response::Response {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    fake.authorization.lock().unwrap().push(auth);
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send("data: {\"payload\":{\"type\":\"server.connected\",\"properties\":{}}}\n\n".to_owned());
    fake.streams.lock().unwrap().push(tx);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, std::convert::Infallible>(line), rx))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(stream))
        .unwrap()
}

/// The pending prompts of the project the query names (those of no project in any).
async fn listed(
    State(fake): State<Fake>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    uri: axum::http::Uri,
) -> axum::Json<Value> {
    let prefix = if uri.path() == "/permission" { "per_" } else { "que_" };
    let pending = fake.pending.lock().unwrap().clone();
    let directory = query.get("directory").map(String::as_str);
    let here = |p: &Value| p.get("directory").is_none_or(|d| d.as_str() == directory);
    axum::Json(Value::Array(
        pending.into_iter().filter(|p| p["id"].as_str().unwrap().starts_with(prefix) && here(p)).collect(),
    ))
}

/// The projects opencode knows: every directory a pending prompt names.
async fn projects(State(fake): State<Fake>) -> axum::Json<Value> {
    if fake.hang_projects.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    let pending = fake.pending.lock().unwrap().clone();
    let worktrees: Vec<Value> =
        pending.iter().filter_map(|p| p.get("directory")).map(|d| json!({"id": "p", "worktree": d})).collect();
    axum::Json(Value::Array(worktrees))
}

/// A reply at the route of servers from before the permission rework.
async fn replied_old(
    State(fake): State<Fake>,
    Path(_): Path<(String, String)>,
    uri: axum::http::Uri,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.replies.lock().unwrap().push((uri.path().to_owned(), None, body));
    axum::Json(json!(true))
}

async fn replied(
    State(fake): State<Fake>,
    Path(_): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    uri: axum::http::Uri,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let refused = fake.refuse.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    fake.attempts.lock().unwrap().push((uri.path().to_owned(), !refused));
    if refused {
        return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "busy").into_response();
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.replies.lock().unwrap().push((uri.path().to_owned(), query.get("directory").cloned(), body));
    axum::Json(json!(true)).into_response()
}

#[tokio::test]
async fn opencodes_prompts_are_answered_on_the_console() {
    let (fake, url) = Fake::start().await;
    let dir = TempDir::new().unwrap();
    let extra = format!(
        "\n[[opencode]]\nname = \"laptop\"\nurl = \"{url}\"\npassword_env = \"OC_PASSWORD\"\nconversation = \"console:local\"\n"
    );
    let mut served = Served::start_with_env(&write_config(dir.path(), &extra), &[("OC_PASSWORD", "secret")]);
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    // Basic auth as opencode's server takes it: user `opencode`, the password from the environment.
    assert_eq!(fake.authorization.lock().unwrap()[0], "Basic b3BlbmNvZGU6c2VjcmV0");

    // A permission, allowed always: opencode is told `always`, in the project it came from.
    let asked = json!({"id": "per_1", "sessionID": "ses_1", "permission": "bash", "patterns": ["rm -rf build"],
        "metadata": {"command": "rm -rf build"}, "always": ["rm *"], "tool": {"messageID": "msg_1", "callID": "c1"}});
    fake.send("/home/dev/app", "permission.asked", asked);
    let id = served.card_id("bash: rm -rf build").await;
    served.stdout_line("Allow always lets rm * through in opencode.").await;
    served.stdout_line("in /home/dev/app · session ses_1").await;
    served.type_line(&format!("/approve {id} always")).await;
    let (_, directory, body) = fake.reply("/permission/per_1/reply").await;
    assert_eq!((directory.as_deref(), body), (Some("/home/dev/app"), json!({"reply": "always"})));

    // Rejected with a reason: opencode's model reads it and goes on.
    let asked = json!({"id": "per_2", "sessionID": "ses_1", "permission": "edit", "patterns": ["src/main.rs"],
        "metadata": {"filepath": "/home/dev/app/src/main.rs", "diff": "-a\n+b"}, "always": ["*"]});
    fake.send("/home/dev/app", "permission.asked", asked);
    let id = served.card_id("edit: /home/dev/app/src/main.rs").await;
    served.type_line(&format!("/deny {id} not that file")).await;
    let (_, _, body) = fake.reply("/permission/per_2/reply").await;
    assert_eq!(body, json!({"reply": "reject", "message": "not that file"}));

    // Answered in opencode's own TUI first: the card is retracted, and askgate replies nothing.
    let asked = json!({"id": "per_3", "sessionID": "ses_2", "permission": "bash", "patterns": ["ls"], "metadata": {"command": "ls"}});
    fake.send("/home/dev/app", "permission.asked", asked);
    let id = served.card_id("bash: ls").await;
    fake.send(
        "/home/dev/app",
        "permission.replied",
        json!({"sessionID": "ses_2", "requestID": "per_3", "reply": "once"}),
    );
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("cancelled (answered in opencode)"));

    // A question: the chosen labels, one list per question.
    let asked = json!({"id": "que_1", "sessionID": "ses_1", "questions": [{"question": "Which colour?", "header": "Colour",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]}]});
    fake.send("/home/dev/app", "question.asked", asked);
    let id = served.card_id("Which colour?").await;
    // Each option's description is the line under it.
    served.stdout_line("      cool").await;
    served.type_line(&format!("/answer {id} 2")).await;
    let (_, _, body) = fake.reply("/question/que_1/reply").await;
    assert_eq!(body, json!({"answers": [["Blue"]]}));
    assert!(!fake.replies.lock().unwrap().iter().any(|r| r.0 == "/permission/per_3/reply"));
    served.terminate().await;
}

#[tokio::test]
async fn after_a_reconnect_the_cards_follow_what_is_pending_now() {
    let (fake, url) = Fake::start().await;
    let dir = TempDir::new().unwrap();
    let extra = format!("\n[[opencode]]\nname = \"laptop\"\nurl = \"{url}\"\nconversation = \"console:local\"\n");
    let mut served = Served::start(&write_config(dir.path(), &extra));
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    let asked = json!({"id": "per_a", "sessionID": "ses_1", "permission": "bash", "patterns": ["make a"], "metadata": {"command": "make a"}});
    fake.send("/home/dev/app", "permission.asked", asked);
    let settled = served.card_id("bash: make a").await;

    // opencode restarts: per_a was answered there meanwhile, and per_b came.
    let per_b = json!({"id": "per_b", "sessionID": "ses_1", "permission": "bash", "patterns": ["make b"], "metadata": {"command": "make b"}});
    fake.pending.lock().unwrap().push(per_b);
    fake.drop_streams();
    let id = served.card_id("bash: make b").await;
    assert!(served.stdout_line(&format!("[{settled}]")).await.contains("cancelled (answered in opencode)"));
    served.type_line(&format!("/approve {id}")).await;
    let (_, directory, body) = fake.reply("/permission/per_b/reply").await;
    assert_eq!((directory.as_deref(), body), (Some("/home/dev/app"), json!({"reply": "once"})));
    served.terminate().await;
}

#[tokio::test]
async fn prompts_pending_before_askgate_started_are_asked_in_either_servers_form() {
    let (fake, url) = Fake::start().await;
    // Pending in a project whose events askgate never heard: opencode lists it under /project.
    let waiting = json!({"id": "per_w", "sessionID": "ses_3", "permission": "bash", "patterns": ["make w"],
        "metadata": {"command": "make w"}, "directory": "/home/dev/other"});
    fake.pending.lock().unwrap().push(waiting);
    let dir = TempDir::new().unwrap();
    let extra = format!("\n[[opencode]]\nname = \"laptop\"\nurl = \"{url}\"\nconversation = \"console:local\"\n");
    let mut served = Served::start(&write_config(dir.path(), &extra));
    let id = served.card_id("bash: make w").await;
    served.stdout_line("in /home/dev/other · session ses_3").await;
    served.type_line(&format!("/approve {id}")).await;
    let (_, directory, body) = fake.reply("/permission/per_w/reply").await;
    assert_eq!((directory.as_deref(), body), (Some("/home/dev/other"), json!({"reply": "once"})));

    // A server from before the permission rework: `permission.updated`, replied to at the
    // session's route with `response`.
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    let old = json!({"id": "per_old", "type": "bash", "pattern": "git push", "sessionID": "ses_9", "messageID": "m",
        "title": "git push", "metadata": {"command": "git push"}, "time": {"created": 1}});
    fake.send("/home/dev/app", "permission.updated", old);
    let id = served.card_id("bash: git push").await;
    served.type_line(&format!("/approve {id} always")).await;
    let (_, _, body) = fake.reply("/session/ses_9/permissions/per_old").await;
    assert_eq!(body, json!({"response": "always"}));

    // Its `permission.replied` names the prompt `permissionID`: the card is retracted.
    let old = json!({"id": "per_old2", "type": "bash", "pattern": ["rm a", "rm b"], "sessionID": "ses_9",
        "title": "rm", "metadata": {}});
    fake.send("/home/dev/app", "permission.updated", old);
    let id = served.card_id("bash: rm a rm b").await;
    fake.send(
        "/home/dev/app",
        "permission.replied",
        json!({"sessionID": "ses_9", "permissionID": "per_old2", "response": "once"}),
    );
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("cancelled (answered in opencode)"));
    served.terminate().await;
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn an_opencode_permission_allowed_always_on_discord_reaches_opencode_as_always() {
    const ALICE: u64 = 100;
    let (fake, url) = Fake::start().await;
    let (discord, discord_url) = crate::fake_discord::FakeDiscord::start().await;
    let dir = TempDir::new().unwrap();
    let extra = format!(
        "\n[channels.discord]\ntoken_env = \"ASKGATE_TEST_DC_TOKEN\"\napi_url = \"{discord_url}\"\nallowed_users = [\"{ALICE}\"]\n\
         \n[[opencode]]\nname = \"laptop\"\nurl = \"{url}\"\nconversation = \"discord:555\"\nanswerers = [\"discord:{ALICE}\"]\n"
    );
    let served = Served::start_with_env(&write_config(dir.path(), &extra), &[("ASKGATE_TEST_DC_TOKEN", "fake-token")]);
    discord.connected().await;
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    let asked = json!({"id": "per_d", "sessionID": "ses_d", "permission": "bash", "patterns": ["make release"],
        "metadata": {"command": "make release"}, "always": ["make *"]});
    fake.send("/home/dev/app", "permission.asked", asked);
    let card = discord.sent("bash: make release", 1).await;
    assert!(card["content"].as_str().unwrap().contains("Allow always lets make \\* through in opencode."), "{card}");
    let always = card["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .find(|c| c["label"] == "Allow always")
        .unwrap_or_else(|| panic!("no Allow always on {card}"));
    let message: u64 = card["id"].as_str().unwrap().parse().unwrap();
    discord.click(ALICE, 555, message, always["custom_id"].as_str().unwrap());
    let (_, directory, body) = fake.reply("/permission/per_d/reply").await;
    assert_eq!((directory.as_deref(), body), (Some("/home/dev/app"), json!({"reply": "always"})));
    served.terminate().await;
}

/// `[[opencode]]` named laptop at `url`, asking on the console.
fn laptop(url: &str) -> String {
    format!("\n[[opencode]]\nname = \"laptop\"\nurl = \"{url}\"\nconversation = \"console:local\"\n")
}

/// `/healthz`'s line for the opencode server named laptop.
async fn health_of_laptop(base: &str) -> String {
    let body: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
    body["channels"]["opencode:laptop"].as_str().unwrap_or_default().to_owned()
}

fn permission(id: &str, command: &str) -> Value {
    json!({"id": id, "sessionID": "ses_1", "permission": "bash", "patterns": [command], "metadata": {"command": command}})
}

#[tokio::test]
async fn a_reply_opencode_refuses_is_sent_again_until_it_takes_it_also_across_a_restart() {
    let (fake, url) = Fake::start().await;
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), &laptop(&url));
    let mut served = Served::start(&config);
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    fake.refuse.store(2, Ordering::SeqCst);
    fake.send("/home/dev/app", "permission.asked", permission("per_r", "make deploy"));
    let id = served.card_id("bash: make deploy").await;
    served.type_line(&format!("/approve {id}")).await;
    let (_, directory, body) = fake.reply("/permission/per_r/reply").await;
    assert_eq!((directory.as_deref(), body), (Some("/home/dev/app"), json!({"reply": "once"})));
    let attempts = fake.attempts.lock().unwrap().clone();
    assert_eq!(attempts.iter().map(|a| a.1).collect::<Vec<_>>(), [false, false, true], "{attempts:?}");
    served.log_line("opencode refused a reply; it is sent again").await;

    // Refused until askgate stops: the next askgate sends it.
    fake.refuse.store(usize::MAX, Ordering::SeqCst);
    fake.send("/home/dev/app", "permission.asked", permission("per_s", "make stop"));
    let id = served.card_id("bash: make stop").await;
    served.type_line(&format!("/deny {id} not now")).await;
    // Its refusal recorded (a stop in the middle of an attempt leaves the reply to the next
    // askgate only once that attempt's hold on it has run out).
    eventually(|| async { (served.log().matches("not delivered; it is tried again").count() >= 3).then_some(()) })
        .await;
    assert!(served.terminate().await.success());
    fake.refuse.store(0, Ordering::SeqCst);
    let served = Served::start(&config);
    let (_, _, body) = fake.reply("/permission/per_s/reply").await;
    assert_eq!(body, json!({"reply": "reject", "message": "not now"}));
    served.terminate().await;
}

#[tokio::test]
async fn a_list_that_hangs_holds_up_no_event_but_shows_in_healthz() {
    let (fake, url) = Fake::start().await;
    fake.hang_projects.store(true, Ordering::SeqCst);
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), &laptop(&url)));
    let (base, _) = served.api(dir.path()).await;
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    fake.send("/home/dev/app", "permission.asked", permission("per_h", "make hang"));
    let id = served.card_id("bash: make hang").await;
    let health = eventually(|| async {
        let health = health_of_laptop(&base).await;
        health.starts_with("degraded").then_some(health)
    })
    .await;
    assert!(health.contains("GET /project did not answer within 10 s"), "{health}");
    served.type_line(&format!("/approve {id}")).await;
    fake.reply("/permission/per_h/reply").await;
    served.terminate().await;
}

#[tokio::test]
async fn healthz_names_an_opencode_that_never_answers() {
    // It takes connections and never says a word.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &laptop(&url)));
    let (base, _) = served.api(dir.path()).await;
    let health = eventually(|| async {
        let health = health_of_laptop(&base).await;
        health.starts_with("degraded").then_some(health)
    })
    .await;
    assert!(health.contains("/global/event did not answer within 10 s"), "{health}");
    held.abort();
    served.terminate().await;
}

#[tokio::test]
async fn an_event_line_of_100_mb_is_skipped_without_being_kept() {
    let (fake, url) = Fake::start().await;
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &laptop(&url)));
    eventually(|| async { (!fake.streams.lock().unwrap().is_empty()).then_some(()) }).await;
    let pid = served.child.id().unwrap();
    let peak = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
    };
    let before = peak();
    // 100 MB of one line without a newline, a megabyte at a time, then an event.
    let chunk = "x".repeat(1 << 20);
    for _ in 0..100 {
        fake.send_raw(chunk.clone());
    }
    fake.send_raw("\n".to_owned());
    fake.send("/home/dev/app", "permission.asked", permission("per_big", "make after"));
    served.card_id("bash: make after").await;
    // Reading is bounded by the 8 MiB line limit, not by the line: the read buffer doubles
    // past the limit once before the line is dropped (37–41 MB measured). A reader that kept
    // the line would grow by more than its 100 MB.
    let grown = peak().saturating_sub(before);
    assert!(grown < 64, "peak memory grew {grown} MB reading a 100 MB line");
    served.log_line("skipped an event line longer than askgate reads").await;
    served.terminate().await;
}
