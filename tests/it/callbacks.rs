//! Callbacks through the real binary: an agent's question and a run report their outcome to
//! a receiver on loopback that `[callbacks] allow` lists, signed, from the outbox; a receiver
//! that was down across a restart of askgate gets it once it is up, exactly once; a slow one
//! sees the same key again; one being sent as askgate stops is waited for. A callback aimed inside (loopback, link-local, private ranges,
//! askgate itself) is refused when asked, and a name that resolves inside when it is sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::support::{eventually, post};

const SECRET: &str = "callback-secret";
/// A function that ends at once, with a reply.
const QUICK: &str = "\n[[functions]]\nname = \"quick\"\ncommand = [\"sh\", \"-c\", \"read -r start; echo '{\\\"type\\\":\\\"done\\\",\\\"reply\\\":\\\"all done\\\"}'\"]\n";

/// `[callbacks]` listing the loopback receivers at `ports`: the operator's way to reach them.
fn allow(ports: &[u16]) -> String {
    let listed: Vec<String> = ports.iter().map(|p| format!("\"http://127.0.0.1:{p}\"")).collect();
    format!("\n[callbacks]\nallow = [{}]\n", listed.join(", "))
}

fn env() -> [(&'static str, &'static str); 3] {
    [
        ("ASKGATE_GATEWAY_CALLBACK_SECRET_ENV", "CALLBACK_SECRET"),
        ("CALLBACK_SECRET", SECRET),
        ("ASKGATE_GATEWAY_CALLBACK_TIMEOUT", "2s"),
    ]
}

/// What the receiver was sent.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The signature checks out as the webhook channel's does.
    fn signed(&self) -> bool {
        let timestamp: i64 = self.header("x-askgate-timestamp").parse().unwrap_or_default();
        askgate::channel::webhook::sign(SECRET.as_bytes(), timestamp, &self.body) == self.header("x-askgate-signature")
    }
}

#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Vec<Received>>>,
    /// The first request waits this long before it is answered.
    first_takes: Duration,
}

impl Receiver {
    fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// Serves on `listener` until the test ends.
    fn serve(&self, listener: std::net::TcpListener) {
        async fn take(State(r): State<Receiver>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
            let first = {
                let mut seen = r.seen.lock().unwrap();
                seen.push(Received { headers, body: body.to_vec() });
                seen.len() == 1
            };
            if first {
                tokio::time::sleep(r.first_takes).await;
            }
            StatusCode::NO_CONTENT
        }
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let app = axum::Router::new().route("/done", axum::routing::post(take)).with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
}

#[tokio::test]
async fn a_callback_reaches_a_receiver_that_was_down_across_a_restart_exactly_once() {
    let dir = TempDir::new().unwrap();
    // A port nobody listens on yet: the receiver is down.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = write_config(dir.path(), &allow(&[port]));
    let served = Served::start_with_env(&config, &env());
    let url = format!("http://127.0.0.1:{port}/done");
    let id = ask_calling_back(&served, dir.path(), json!({"url": url, "headers": {"X-Trace": "run-7"}})).await;
    answer_yes(&served, dir.path(), &id).await;
    served.log_line("callback not delivered").await;
    served.terminate().await;

    let receiver = Receiver::default();
    receiver.serve(std::net::TcpListener::bind(("127.0.0.1", port)).unwrap());
    let served = Served::start_with_env(&config, &env());
    let got = eventually(|| async { receiver.seen().first().cloned() }).await;
    assert!(got.signed(), "signed with the configured secret: {:?}", got.headers);
    assert_eq!(got.header("x-trace"), "run-7", "the agent's own header");
    let key = got.header("idempotency-key").to_owned();
    assert!(!key.is_empty() && got.header("x-askgate-callback") == key);
    let outcome = got.json();
    assert_eq!(
        (outcome["id"].as_str(), outcome["status"].as_str()),
        (Some(id.as_str()), Some("answered")),
        "{outcome}"
    );
    assert_eq!(outcome["outcome"]["value"], "yes", "{outcome}");
    served.log_line("callback delivered").await;
    served.terminate().await;
    assert_eq!(receiver.seen().len(), 1, "delivered exactly once");
    nothing_left_to_send(dir.path()).await;
}

#[tokio::test]
async fn a_slow_receiver_sees_the_same_key_again_and_a_run_reports_how_it_ended() {
    let dir = TempDir::new().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/done", listener.local_addr().unwrap());
    let extra = format!("{QUICK}{}", allow(&[listener.local_addr().unwrap().port()]));
    let served = Served::start_with_env(&write_config(dir.path(), &extra), &env());
    let (base, token) = served.api(dir.path()).await;
    // Longer than the 2 s an attempt may take: askgate gives up on it and tries again.
    let receiver = Receiver { first_takes: Duration::from_secs(4), ..Receiver::default() };
    receiver.serve(listener);
    let own_secret = json!({"url": url, "secret": "its-own"});
    let (status, body) =
        post(&base, &token, "/api/runs", json!({"function": "quick", "callback": own_secret, "wait": true})).await;
    assert_eq!(status, 400, "a run waited for has no callback: {body}");
    let callback = json!({"url": url});
    let (status, started) = post(&base, &token, "/api/runs", json!({"function": "quick", "callback": callback})).await;
    assert_eq!(status, 202, "{started}");

    let seen = eventually(|| async { Some(receiver.seen()).filter(|s| s.len() == 2) }).await;
    assert_eq!(seen[0].header("idempotency-key"), seen[1].header("idempotency-key"), "one key for every attempt");
    assert!(seen.iter().all(Received::signed));
    let run = seen[1].json();
    assert_eq!(run["run"]["id"], started["id"], "{run}");
    assert_eq!((run["run"]["status"].as_str(), run["run"]["result"].as_str()), (Some("finished"), Some("all done")));
    served.log_line("callback delivered").await;
    served.terminate().await;
    assert_eq!(receiver.seen().len(), 2, "nothing after the attempt that succeeded");
    nothing_left_to_send(dir.path()).await;
}

/// Asks "Ship it?" in the console as the agent, with `callback`; the question's id.
async fn ask_calling_back(served: &Served, dir: &std::path::Path, callback: Value) -> String {
    let (base, token) = served.agent(dir).await;
    let ask = json!({"conversation": "console:local", "prompt": "Ship it?", "options": ["yes", "no"],
                     "callback": callback});
    let (status, asked) = post(&base, &token, "/api/questions", ask).await;
    assert_eq!(status, 201, "{asked}");
    asked["id"].as_str().unwrap().to_owned()
}

/// The operator answers the question `id` "yes".
async fn answer_yes(served: &Served, dir: &std::path::Path, id: &str) {
    let (base, operator) = served.api(dir).await;
    let (status, body) = post(&base, &operator, &format!("/api/questions/{id}/reply"), json!({"value": "yes"})).await;
    assert_eq!(status, 200, "{body}");
}

/// The outbox in `dir`'s database holds no callback to send, now or after any pause: each was
/// recorded delivered (or given up), so no askgate on it sends one again.
async fn nothing_left_to_send(dir: &std::path::Path) {
    let path = crate::support::db_path(dir);
    let store =
        askgate::store::SqliteStore::open(path.to_str().unwrap(), askgate::store::Synchronous::Normal).await.unwrap();
    let due = askgate::store::Store::due_callbacks(&store, i64::MAX, "http", 16).await.unwrap();
    assert!(due.is_empty(), "still to send: {due:?}");
}

/// Issue #46: a callback being sent when askgate is told to stop is waited for, and recorded
/// as delivered before the store closes, so that it is not sent again after a restart.
#[tokio::test]
async fn a_stop_waits_for_a_callback_being_sent_and_records_it_delivered() {
    let dir = TempDir::new().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = write_config(dir.path(), &allow(&[port]));
    // Held well within the 2 s an attempt may take, and longer than the rest of a stop takes.
    let receiver = Receiver { first_takes: Duration::from_millis(1500), ..Receiver::default() };
    receiver.serve(listener);
    let served = Served::start_with_env(&config, &env());
    let url = format!("http://127.0.0.1:{port}/done");
    let id = ask_calling_back(&served, dir.path(), json!({"url": url})).await;
    answer_yes(&served, dir.path(), &id).await;
    // The receiver holds the callback: askgate is told to stop while it is being sent.
    eventually(|| async { receiver.seen().first().cloned() }).await;
    let (exit, log) = served.terminate_logged().await;
    assert!(exit.success(), "{log}");
    let delivered = log.find("callback delivered").unwrap_or_else(|| panic!("not waited for:\n{log}"));
    assert!(log[..delivered].contains("stopping: finishing in-flight work"), "delivered while stopping:\n{log}");

    let logged = [&env()[..], &[("RUST_LOG", "info,askgate::engine::callbacks=debug")]].concat();
    let served = Served::start_with_env(&config, &logged);
    // The outbox is looked at once at start: a callback the stop had not recorded would be open.
    let read = served.log_line("looked for open callbacks").await;
    assert!(read.contains("open=Ok(false)"), "nothing is open after the stop recorded the delivery: {read}");
    assert_eq!(receiver.seen().len(), 1, "delivered once, and known to be");
    served.terminate().await;
}

#[tokio::test]
async fn a_bad_callback_is_refused_with_what_is_wrong() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    for (callback, says) in [
        (json!({"url": "ftp://127.0.0.1/x", "secret": "s"}), "not an http(s) URL"),
        (json!({"url": "https://relay.example/x", "secret": "s", "headers": {"Idempotency-Key": "x"}}), "reserved"),
        (json!({"url": "https://relay.example/x", "secret": "s", "headers": {"bad name": "x"}}), "not a header name"),
        (json!({"url": "https://relay.example/x"}), "give it a \"secret\""),
        (json!({"url": "https://relay.example/x", "secret": "s", "retries": 3}), "unknown field"),
    ] {
        let ask = json!({"conversation": "console:local", "prompt": "Ship it?", "callback": callback});
        let (status, body) = post(&base, &token, "/api/questions", ask).await;
        assert_eq!(status, 400, "{callback}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{callback}: {message}");
    }
    let (base, operator) = served.api(dir.path()).await;
    let pending = crate::support::get_json(&format!("{base}/api/questions"), &operator).await;
    assert_eq!(pending["questions"], json!([]), "nothing was asked: {pending}");
    served.terminate().await;
}

async fn ask_with(base: &str, token: &str, callback: Value) -> (reqwest::StatusCode, String) {
    let ask = json!({"conversation": "console:local", "prompt": "Ship it?", "options": ["yes", "no"],
                     "callback": callback});
    let (status, body) = post(base, token, "/api/questions", ask).await;
    (status, body["error"]["message"].as_str().map_or_else(|| body.to_string(), str::to_owned))
}

#[tokio::test]
async fn a_callback_aimed_inside_or_at_askgate_is_refused_and_a_listed_receiver_still_gets_its_signed_callback() {
    let dir = TempDir::new().unwrap();
    let receiver_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let receiver_port = receiver_listener.local_addr().unwrap().port();
    // askgate on a port of its own choosing, listed too: it never calls itself all the same.
    let own = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = write_config(dir.path(), &allow(&[receiver_port, own.port()]));
    let own_http = own.to_string();
    let mut env = env().to_vec();
    env.push(("ASKGATE_GATEWAY_HTTP", &own_http));
    let served = Served::start_with_env(&config, &env);
    let (base, token) = served.agent(dir.path()).await;
    let receiver = Receiver::default();
    receiver.serve(receiver_listener);

    for (url, says) in [
        ("https://169.254.169.254/latest/meta-data/iam/security-credentials/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "is not https"),
        ("https://[::1]:8443/done", "loopback"),
        ("https://[::ffff:127.0.0.1]/done", "loopback"),
        ("https://10.0.0.7/done", "private"),
        ("https://192.168.1.1/done", "private"),
        ("https://172.20.0.1/done", "private"),
        ("https://100.64.0.1/done", "shared address space"),
        ("https://[fd00::1]/done", "unique-local"),
        ("https://[fe80::1]/done", "link-local"),
        ("https://0.0.0.0/done", "unspecified"),
        (format!("https://127.0.0.1:{receiver_port}/done").as_str(), "loopback"),
        (format!("http://127.0.0.1:{}/api/questions", own.port()).as_str(), "askgate's own address"),
    ] {
        let (status, message) = ask_with(&base, &token, json!({"url": url})).await;
        assert_eq!(status, 400, "{url}: {message}");
        assert!(message.contains(says), "{url}: {message}");
        let rule = message.contains("[callbacks] allow");
        assert!(rule, "{url}: the message names the key that opens a target: {message}");
    }
    let listed = format!("http://127.0.0.1:{receiver_port}/done");
    for header in
        ["Host", "Content-Length", "Transfer-Encoding", "Connection", "X-Askgate-Signature", "X-Forwarded-For"]
    {
        let (status, message) = ask_with(&base, &token, json!({"url": listed, "headers": {header: "x"}})).await;
        assert_eq!(status, 400, "{header}: {message}");
        assert!(message.contains(&format!("`{header}` is reserved")), "{header}: {message}");
    }
    let (operator_base, operator) = served.api(dir.path()).await;
    let pending = crate::support::get_json(&format!("{operator_base}/api/questions"), &operator).await;
    assert_eq!(pending["questions"], json!([]), "nothing refused was asked: {pending}");

    let (status, message) =
        ask_with(&base, &token, json!({"url": listed, "headers": {"Authorization": "Bearer receiver"}})).await;
    assert_eq!(status, 201, "{message}");
    let asked = crate::support::get_json(&format!("{operator_base}/api/questions"), &operator).await;
    let id = asked["questions"][0]["id"].as_str().unwrap().to_owned();
    let (status, body) =
        post(&operator_base, &operator, &format!("/api/questions/{id}/reply"), json!({"value": "no"})).await;
    assert_eq!(status, 200, "{body}");
    let got = eventually(|| async { receiver.seen().first().cloned() }).await;
    assert!(got.signed(), "signed: {:?}", got.headers);
    assert_eq!(got.header("authorization"), "Bearer receiver", "the asker's own header");
    assert_eq!(got.json()["outcome"]["value"], "no");
    served.terminate().await;
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_when_the_callback_is_sent() {
    let dir = TempDir::new().unwrap();
    let served = Served::start_with_env(&write_config(dir.path(), ""), &env());
    let (base, token) = served.agent(dir.path()).await;
    // Something listens there: a connection would show as one accepted.
    let inside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    inside.set_nonblocking(true).unwrap();
    let url = format!("https://localhost:{}/done", inside.local_addr().unwrap().port());
    // A name is not resolved when asked (what it resolves to may change by the time it is sent).
    let (status, message) = ask_with(&base, &token, json!({"url": url})).await;
    assert_eq!(status, 201, "{message}");
    let (operator_base, operator) = served.api(dir.path()).await;
    let asked = crate::support::get_json(&format!("{operator_base}/api/questions"), &operator).await;
    let id = asked["questions"][0]["id"].as_str().unwrap().to_owned();
    answer_yes(&served, dir.path(), &id).await;
    let line = served.log_line("callback not delivered").await;
    assert!(line.contains("resolves to no public address") && line.contains("loopback"), "{line}");
    assert_eq!(
        inside.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "askgate connected to the loopback address the name resolved to"
    );
    served.terminate().await;
}
