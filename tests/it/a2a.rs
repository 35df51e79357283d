//! askgate as an A2A agent, through the real binary, with the official JavaScript SDK
//! (`@a2a-js/sdk`) as the client (`tests/a2a/driver.mjs`): a task stays working while the
//! person on the console thinks, and completes with the answer, is rejected with their words,
//! outlives a restart of askgate, and pushes its outcome to a listener `[callbacks] allow` lists.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::binary::{Served, write_config};
use crate::support::eventually;

const A2A: &str = "\n[a2a]\nconversation = \"console:local\"\n";

/// The `node_modules` folder that holds the SDK: beside a `node_modules/.bin` on the PATH, or
/// the one `.ci/run` installs into.
fn modules() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.ends_with("node_modules/.bin"))
        .filter_map(|bin| bin.parent().map(PathBuf::from))
        .chain([cache.join("askgate-ci/node_modules")])
        .find(|modules| modules.join("@a2a-js/sdk/package.json").is_file())
        .expect("@a2a-js/sdk is installed (build.rs found it)")
}

/// The SDK's client, in a node process the test sends commands to.
struct Sdk {
    _child: Child,
    input: ChildStdin,
    lines: Arc<Mutex<Vec<Value>>>,
    next: u64,
}

impl Sdk {
    async fn start(base: &str, token: &str) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/driver.mjs");
        let mut child = Command::new("node")
            .arg(script)
            .arg(modules())
            .arg(base)
            .arg(token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (out, kept) = (child.stdout.take().unwrap(), lines.clone());
        tokio::spawn(async move {
            let mut out = BufReader::new(out).lines();
            while let Ok(Some(line)) = out.next_line().await {
                kept.lock().unwrap().push(serde_json::from_str(&line).unwrap_or(json!({"unreadable": line})));
            }
        });
        let input = child.stdin.take().unwrap();
        let sdk = Self { _child: child, input, lines, next: 1 };
        sdk.answers(0, 1).await;
        sdk
    }

    /// Sends `command`; its tag.
    async fn send(&mut self, mut command: Value) -> u64 {
        let n = self.next;
        self.next += 1;
        command["n"] = json!(n);
        self.input.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        self.input.flush().await.unwrap();
        n
    }

    /// The first `count` answers to command `n`.
    async fn answers(&self, n: u64, count: usize) -> Vec<Value> {
        eventually(|| async {
            let lines = self.lines.lock().unwrap();
            let answers: Vec<Value> = lines.iter().filter(|l| l["n"] == json!(n)).cloned().collect();
            (answers.len() >= count).then_some(answers)
        })
        .await
    }

    /// The one answer to `command`.
    async fn call(&mut self, command: Value) -> Value {
        let n = self.send(command).await;
        self.answers(n, 1).await.remove(0)
    }

    /// A stream's events, once it ended.
    async fn ended(&self, n: u64) -> Vec<Value> {
        eventually(|| async {
            let lines = self.lines.lock().unwrap();
            let answers: Vec<Value> = lines.iter().filter(|l| l["n"] == json!(n)).cloned().collect();
            if let Some(error) = answers.iter().find(|a| a.get("error").is_some()) {
                panic!("the stream failed: {error}");
            }
            answers
                .iter()
                .any(|a| a["end"] == json!(true))
                .then(|| answers.iter().filter_map(|a| a.get("event").cloned()).collect())
        })
        .await
    }
}

/// The short id a card shows for task `id` (its question's id).
fn short(id: &Value) -> String {
    id.as_str().unwrap()[..8].to_owned()
}

#[cfg_attr(
    no_a2a_sdk,
    ignore = "needs node and @a2a-js/sdk 1.3.0: npm install --prefix ~/.cache/askgate-ci \
                                 @a2a-js/sdk@1.3.0 (or run .ci/run)"
)]
#[tokio::test]
async fn a_task_streams_working_then_completes_with_the_persons_answer_as_its_artifact() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), A2A));
    let (base, token) = served.agent(dir.path()).await;
    let mut sdk = Sdk::start(&base, &token).await;

    // The card the SDK read: three skills, the JSON-RPC endpoint, the bearer scheme.
    let card = sdk.call(json!({"op": "card"})).await;
    assert_eq!(card["skills"], json!(["ask", "confirm", "approve"]), "{card}");
    assert_eq!(card["url"], json!(format!("{base}/a2a")), "{card}");
    assert_eq!((card["streaming"].clone(), card["push"].clone()), (json!(true), json!(true)), "{card}");
    assert_eq!(card["schemes"], json!(["bearer"]), "{card}");

    let n = sdk
        .send(json!({"op": "stream", "text": "Which region for the cluster?",
                     "data": {"options": ["eu-west", "us-east"]}}))
        .await;
    let first = sdk.answers(n, 1).await.remove(0);
    assert_eq!(first["event"]["task"]["state"], "TASK_STATE_WORKING", "{first}");
    let id = first["event"]["task"]["id"].clone();
    let shown = served.card_id("Which region for the cluster?").await;
    assert_eq!(shown, short(&id), "the task is the question on the card");
    served.stdout_line("2. us-east").await;

    served.type_line(&format!("/answer {shown} 2")).await;
    let events = sdk.ended(n).await;
    let artifact = events.iter().find(|e| e["kind"] == "artifactUpdate").expect("the answer came as an artifact");
    assert_eq!(artifact["text"], "us-east", "{events:?}");
    assert_eq!(artifact["data"][0]["value"], "us-east", "{events:?}");
    assert_eq!(events.last().unwrap()["state"], "TASK_STATE_COMPLETED", "{events:?}");

    let got = sdk.call(json!({"op": "get", "id": id})).await;
    assert_eq!(got["task"]["state"], "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["task"]["artifacts"][0]["text"], "us-east", "{got}");

    // A task that is not there: the spec's TaskNotFound.
    let missing = sdk.call(json!({"op": "get", "id": "0b6f3e52-1111-4222-8333-944455556666"})).await;
    assert_eq!(missing["error"]["name"], "TaskNotFoundError", "{missing}");
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
    served.terminate().await;
}

#[cfg_attr(
    no_a2a_sdk,
    ignore = "needs node and @a2a-js/sdk 1.3.0: npm install --prefix ~/.cache/askgate-ci \
                                 @a2a-js/sdk@1.3.0 (or run .ci/run)"
)]
#[tokio::test]
async fn a_declined_approval_is_rejected_with_the_persons_words_while_a_cancel_cancels_the_question() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), A2A));
    let (base, token) = served.agent(dir.path()).await;
    let mut sdk = Sdk::start(&base, &token).await;

    let sent = sdk.call(json!({"op": "send", "text": "rm -rf build", "data": {"kind": "approval"}})).await;
    assert_eq!(sent["task"]["state"], "TASK_STATE_WORKING", "{sent}");
    let id = sent["task"]["id"].clone();
    served.type_line(&format!("/deny {} not before the release is tagged", short(&id))).await;
    let got = eventually(|| async {
        let got = sdk_get(&base, &token, &id).await;
        (got["task"]["state"] != "TASK_STATE_WORKING").then_some(got)
    })
    .await;
    assert_eq!(got["task"]["state"], "TASK_STATE_REJECTED", "{got}");
    assert!(got["task"]["said"].as_str().unwrap().contains("not before the release is tagged"), "{got}");

    // Cancelled by the agent: the question ends, its card says so; an ended task is not cancelable.
    let sent = sdk.call(json!({"op": "send", "text": "Deploy v1.2?", "data": {"kind": "confirm"}})).await;
    let id = sent["task"]["id"].clone();
    served.card_id("Deploy v1.2?").await;
    let cancelled = sdk.call(json!({"op": "cancel", "id": id})).await;
    assert_eq!(cancelled["task"]["state"], "TASK_STATE_CANCELED", "{cancelled}");
    assert!(cancelled["task"]["said"].as_str().unwrap().contains("cancelled by agent:"), "{cancelled}");
    let (_, operator) = served.api(dir.path()).await;
    let (_, question) =
        crate::support::get(&base, &operator, &format!("/api/questions/{}", id.as_str().unwrap())).await;
    assert_eq!(question["status"], "cancelled", "the question itself is cancelled: {question}");
    let again = sdk.call(json!({"op": "cancel", "id": id})).await;
    assert_eq!(again["task"]["state"], "TASK_STATE_CANCELED", "cancelling twice is still canceled: {again}");
    let done = sdk.call(json!({"op": "send", "text": "Ship it?", "data": {"kind": "confirm"}})).await;
    let done_id = done["task"]["id"].clone();
    served.type_line(&format!("/answer {} yes", short(&done_id))).await;
    eventually(|| async {
        (sdk_get(&base, &token, &done_id).await["task"]["state"] == "TASK_STATE_COMPLETED").then_some(())
    })
    .await;
    let refused = sdk.call(json!({"op": "cancel", "id": done_id})).await;
    assert_eq!(refused["error"]["name"], "TaskNotCancelableError", "{refused}");
    served.terminate().await;
}

/// `GetTask` through a client of its own (a poll beside the driver's commands).
async fn sdk_get(base: &str, token: &str, id: &Value) -> Value {
    let mut sdk = Sdk::start(base, token).await;
    sdk.call(json!({"op": "get", "id": id})).await
}

#[cfg_attr(
    no_a2a_sdk,
    ignore = "needs node and @a2a-js/sdk 1.3.0: npm install --prefix ~/.cache/askgate-ci \
                                 @a2a-js/sdk@1.3.0 (or run .ci/run)"
)]
#[tokio::test]
async fn a_task_waiting_across_a_restart_is_seen_completed_by_the_sdk_once_answered_after_it() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), A2A);
    let served = Served::start(&config);
    let (base, token) = served.agent(dir.path()).await;
    let mut sdk = Sdk::start(&base, &token).await;
    let sent = sdk.call(json!({"op": "send", "text": "Rotate the signing key?", "data": {"kind": "confirm"}})).await;
    let id = sent["task"]["id"].clone();
    served.card_id("Rotate the signing key?").await;
    assert!(served.terminate().await.success());

    let mut served = Served::start(&config);
    let (base, token) = served.agent(dir.path()).await;
    let mut sdk = Sdk::start(&base, &token).await;
    let got = sdk.call(json!({"op": "get", "id": id})).await;
    assert_eq!(got["task"]["state"], "TASK_STATE_WORKING", "the task waits across the restart: {got}");
    let n = sdk.send(json!({"op": "subscribe", "id": id})).await;
    let first = sdk.answers(n, 1).await.remove(0);
    assert_eq!(first["event"]["task"]["state"], "TASK_STATE_WORKING", "{first}");

    served.type_line(&format!("/answer {} yes", short(&id))).await;
    let events = sdk.ended(n).await;
    assert_eq!(events.last().unwrap()["state"], "TASK_STATE_COMPLETED", "{events:?}");
    let got = sdk.call(json!({"op": "get", "id": id})).await;
    assert_eq!(got["task"]["artifacts"][0]["data"][0]["value"], true, "{got}");
    served.terminate().await;
}

#[cfg_attr(
    no_a2a_sdk,
    ignore = "needs node and @a2a-js/sdk 1.3.0: npm install --prefix ~/.cache/askgate-ci \
                                 @a2a-js/sdk@1.3.0 (or run .ci/run)"
)]
#[tokio::test]
async fn a_tasks_outcome_is_pushed_to_a_listener_the_callbacks_allow() {
    type Pushed = Arc<Mutex<Vec<(Option<String>, Value)>>>;
    let pushed: Pushed = Arc::default();
    let kept = pushed.clone();
    let app = axum::Router::new().route(
        "/a2a-push",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let token = headers.get("x-a2a-notification-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
                kept.lock().unwrap().push((token, serde_json::from_slice(&body).unwrap_or(Value::Null)));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://127.0.0.1:{port}/a2a-push");

    let dir = TempDir::new().unwrap();
    let extra = format!("{A2A}\n[callbacks]\nallow = [\"http://127.0.0.1:{port}\"]\n");
    let mut served = Served::start(&write_config(dir.path(), &extra));
    let (base, token) = served.agent(dir.path()).await;
    let mut sdk = Sdk::start(&base, &token).await;

    // A target the rules do not list is refused when it is given.
    let refused = sdk
        .call(json!({"op": "send", "text": "x?", "push": {"url": "http://127.0.0.1:9/elsewhere", "token": "t"}}))
        .await;
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("[callbacks] allow"), "{refused}");

    // One config given with the message, one set after; set, read, listed, one deleted.
    let push = json!({"url": url, "token": "first-token"});
    let sent = sdk.call(json!({"op": "send", "text": "Merge the release branch?", "push": push})).await;
    let id = sent["task"]["id"].clone();
    let set =
        sdk.call(json!({"op": "push_set", "taskId": id, "id": "second", "url": url, "token": "second-token"})).await;
    assert_eq!(set["push"]["id"], "second", "{set}");
    let extra_set = sdk.call(json!({"op": "push_set", "taskId": id, "id": "gone", "url": url})).await;
    assert_eq!(extra_set["push"]["taskId"], id, "{extra_set}");
    let listed = sdk.call(json!({"op": "push_list", "taskId": id})).await;
    assert_eq!(listed["pushes"].as_array().unwrap().len(), 3, "{listed}");
    let deleted = sdk.call(json!({"op": "push_delete", "taskId": id, "id": "gone"})).await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    let read = sdk.call(json!({"op": "push_get", "taskId": id, "id": "second"})).await;
    assert_eq!(read["push"]["token"], "second-token", "{read}");
    assert!(pushed.lock().unwrap().is_empty(), "nothing is pushed while the person thinks");

    served.type_line(&format!("/answer {} merge it", short(&id))).await;
    let got = eventually(|| async {
        let got = pushed.lock().unwrap().clone();
        (got.len() >= 2).then_some(got)
    })
    .await;
    let mut tokens: Vec<String> = got.iter().filter_map(|(token, _)| token.clone()).collect();
    tokens.sort();
    assert_eq!(tokens, ["first-token", "second-token"], "each config's own token");
    for (_, body) in &got {
        assert_eq!(body["task"]["id"], id, "{body}");
        assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
        assert_eq!(body["task"]["artifacts"][0]["parts"][0]["text"], "merge it", "{body}");
    }
    served.terminate().await;
}
