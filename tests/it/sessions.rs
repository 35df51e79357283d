//! Idle MCP sessions (protocol revision 2025-11-25), through the real binary: a session with
//! nothing in flight is put away, and the next request on its `Mcp-Session-Id` finds it again,
//! as the client left it. Its client's event stream (`GET /mcp`) stays open meanwhile and
//! still hears what is sent to it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::support::eventually;

const MCP: &str = "\n[mcp]\nconversation = \"console:local\"\n";

/// A client speaking MCP over plain HTTP, as the session benchmark does, with no event stream
/// of its own open.
pub struct Raw {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Raw {
    pub fn new(base: &str, token: &str) -> Self {
        Self { http: reqwest::Client::new(), url: format!("{base}/mcp"), token: token.to_owned() }
    }

    /// Posts `message` in `session` (none for `initialize`): the answer's status, the session id
    /// it names, and its JSON-RPC message, if any.
    pub async fn post(&self, session: Option<&str>, message: Value) -> (u16, Option<String>, Option<Value>) {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&message);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let id = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        let answer =
            body.lines().filter_map(|l| l.strip_prefix("data:")).find_map(|d| serde_json::from_str(d.trim()).ok());
        (status, id, answer)
    }

    /// Opens a session whose client has `capabilities`: `initialize`, then
    /// `notifications/initialized`. Its id.
    pub async fn initialize(&self, capabilities: Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "raw", "version": "1"}}});
        let (status, id, answer) = self.post(None, init).await;
        assert_eq!(status, 200, "{answer:?}");
        let id = id.expect("a session id");
        let (status, _, _) =
            self.post(Some(&id), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        assert_eq!(status, 202);
        id
    }

    /// Opens a session and leaves it idle: `initialize`, `notifications/initialized`,
    /// `tools/list`. Its id.
    pub async fn idle_session(&self) -> String {
        let id = self.initialize(json!({})).await;
        let (status, _, listed) =
            self.post(Some(&id), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
        assert_eq!(status, 200);
        let tools = listed.as_ref().and_then(|l| l["result"]["tools"].as_array()).map(Vec::len);
        assert_eq!(tools, Some(5), "{listed:?}");
        id
    }
}

/// The event stream (`GET /mcp`) of a session, read in the background: what it sent so far,
/// and its whole text once it ends.
pub struct Listening {
    pub heard: Arc<Mutex<String>>,
    pub ended: tokio::task::JoinHandle<String>,
}

impl Listening {
    /// Opens the stream of `session` with `token` (answered before this returns).
    pub async fn open(base: &str, token: &str, session: &str) -> Self {
        let response = reqwest::Client::new()
            .get(format!("{base}/mcp"))
            .bearer_auth(token)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "GET /mcp");
        let heard = Arc::new(Mutex::new(String::new()));
        let into = heard.clone();
        let ended = tokio::spawn(async move {
            let mut body = response.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                into.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk));
            }
            into.lock().unwrap().clone()
        });
        Self { heard, ended }
    }

    /// The first message it sent that `pick` picks, with the id of its event.
    pub async fn message(&self, pick: impl Fn(&Value) -> bool) -> (String, Value) {
        eventually(|| async {
            let heard = self.heard.lock().unwrap().clone();
            // An event is its lines up to a blank one, its fields in any order.
            heard.split("\n\n").find_map(|event| {
                let field = |name: &str| event.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
                let message = serde_json::from_str::<Value>(field("data:")?).ok().filter(|m| pick(m))?;
                Some((field("id:").unwrap_or_default().to_owned(), message))
            })
        })
        .await
    }
}

/// A `notify` call's message.
pub fn notify(id: u64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "notify", "arguments": {"message": message}}})
}

#[tokio::test]
async fn an_idle_session_put_away_answers_a_tool_call_in_the_same_session() {
    let dir = TempDir::new().unwrap();
    let served = Served::start_with_env(&write_config(dir.path(), MCP), &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Raw::new(&base, &token);
    let session = raw.idle_session().await;
    // Nothing in flight: the session's running part ended (after tools/list, at the latest).
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;

    let (status, id, answer) = raw.post(Some(&session), notify(3, "Deploy finished")).await;
    assert_eq!(status, 200);
    assert_eq!(id, None, "no new session was made");
    let answer = answer.expect("an answer");
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    served.stdout_line("Deploy finished").await;
    // The session's client is the one that initialized it: its name, kept while it was away,
    // is who asked.
    let ask = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "ask_user", "arguments": {"prompt": "Ship it?", "wait": false}}});
    let (_, _, asked) = raw.post(Some(&session), ask).await;
    let asked = asked.expect("an answer");
    assert_eq!(asked["result"]["structuredContent"]["status"], "pending", "{asked}");
    let (_, operator) = served.api(dir.path()).await;
    let id = asked["result"]["structuredContent"]["id"].as_str().unwrap().to_owned();
    let question: Value = reqwest::Client::new()
        .get(format!("{base}/api/questions/{id}"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(question["asked_by"], "mcp:agent.raw", "{question}");

    // Ended by its client, it is gone.
    let ended = reqwest::Client::new()
        .delete(format!("{base}/mcp"))
        .bearer_auth(&token)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    let (status, _, _) = raw.post(Some(&session), notify(5, "after")).await;
    assert_eq!(status, 404);
    served.terminate().await;
}

#[tokio::test]
async fn requests_at_once_on_a_session_put_away_are_all_answered_in_it() {
    let dir = TempDir::new().unwrap();
    let served = Served::start_with_env(&write_config(dir.path(), MCP), &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Raw::new(&base, &token);
    let session = raw.idle_session().await;
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;

    // Each finds the session starting (or closing again) and waits for it; none is refused.
    let calls = (0..20u64).map(|i| {
        let (raw, session) = (&raw, &session);
        async move { raw.post(Some(session), notify(10 + i, &format!("Step {i} done"))).await }
    });
    for (i, (status, id, answer)) in futures_util::future::join_all(calls).await.into_iter().enumerate() {
        assert_eq!((status, id), (200, None), "call {i}: {answer:?}");
        let answer = answer.expect("an answer");
        assert_eq!(answer["id"], 10 + i, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    for i in 0..20 {
        served.stdout_line(&format!("Step {i} done")).await;
    }
    served.terminate().await;
}

#[tokio::test]
async fn a_session_put_away_then_unused_for_session_timeout_is_gone() {
    let dir = TempDir::new().unwrap();
    let mcp = format!("{MCP}progress_every = \"1s\"\nsession_timeout = \"2s\"\n");
    let served = Served::start_with_env(&write_config(dir.path(), &mcp), &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Raw::new(&base, &token);
    // Before the session's first request: its last use is later.
    let opened = std::time::Instant::now();
    let session = raw.idle_session().await;
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;
    // Only the time since its last request counts; every request would count as a use, so
    // askgate is not asked meanwhile: it says when it forgets the session.
    served.log_line(&format!("an MCP session unused for session_timeout was forgotten session={session}")).await;
    // askgate looks for such sessions every session_timeout: one is forgotten within two of
    // its last use (with two seconds to spare here).
    let unused = opened.elapsed();
    assert!(unused >= Duration::from_secs(2), "forgotten before its session_timeout: {unused:?}");
    assert!(unused < Duration::from_secs(6), "forgotten long after its session_timeout: {unused:?}");
    let (status, _, _) = raw.post(Some(&session), notify(3, "Too late")).await;
    assert_eq!(status, 404, "the session ended as a running one would have");
    assert!(!served.stdout().contains("Too late"));
    served.terminate().await;
}

#[tokio::test]
async fn a_task_can_still_be_polled_after_its_session_is_put_away() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start_with_env(&write_config(dir.path(), MCP), &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Raw::new(&base, &token);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (_, session, _) = raw.post(None, init).await;
    let session = session.expect("a session id");
    raw.post(Some(&session), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let ask = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ask_user", "arguments": {"prompt": "Tea or coffee?"}}});
    let (_, _, created) = raw.post(Some(&session), ask).await;
    let created = created.expect("an answer");
    let task = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    // The call returned: nothing is in flight, and the session is put away while its task waits.
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;

    let id = served.card_id("Tea or coffee?").await;
    served.type_line(&format!("/answer {id} tea")).await;
    let get = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": task}});
    let done = crate::support::eventually(|| async {
        let (_, _, polled) = raw.post(Some(&session), get.clone()).await;
        let polled = polled?;
        (polled["result"]["status"] != "working").then_some(polled)
    })
    .await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(done.to_string().contains(r#""value":"tea""#), "{done}");
    served.terminate().await;
}

/// How many times the session `session` was put away, as the log says.
fn put_away(served: &Served, session: &str) -> usize {
    served.log().matches(&format!("an idle MCP session was put away session={session}")).count()
}

#[tokio::test]
async fn a_held_event_stream_hears_tools_list_changed_while_its_session_is_put_away() {
    let dir = TempDir::new().unwrap();
    let config = crate::gate::gated_config(dir.path(), "");
    let served = Served::start_with_env(&config, &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Raw::new(&base, &token);
    let listener = raw.initialize(json!({})).await;
    let listening = Listening::open(&base, &token, &listener).await;
    // Nothing in flight: put away, its stream open all along.
    served.log_line(&format!("an idle MCP session was put away session={listener}")).await;

    // Another session has the upstream change its tools.
    let other = raw.initialize(json!({})).await;
    let grow =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "files__grow", "arguments": {}}});
    eventually(|| async {
        let (_, _, grown) = raw.post(Some(&other), grow.clone()).await;
        (grown?["result"]["isError"] == false).then_some(())
    })
    .await;
    let (id, _) = listening.message(|m| m["method"] == "notifications/tools/list_changed").await;
    assert_eq!(id, "1", "the stream's first event after rmcp's priming one");
    assert_eq!(put_away(&served, &listener), 1, "askgate wrote it; the session was not started for it");
    assert!(!listening.ended.is_finished(), "the stream stays open");
    served.terminate().await;
}

#[tokio::test]
async fn a_form_reaches_the_held_event_stream_of_a_session_that_was_put_away() {
    let dir = TempDir::new().unwrap();
    let mcp = format!("{MCP}elicitation = true\n");
    let served = Served::start_with_env(&write_config(dir.path(), &mcp), &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, token) = served.agent(dir.path()).await;
    let raw = Arc::new(Raw::new(&base, &token));
    let session = raw.initialize(json!({"elicitation": {}})).await;
    let listening = Listening::open(&base, &token, &session).await;
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;

    // The call starts the session again; its form (sent on the session's own stream) reaches
    // the stream askgate held meanwhile.
    let ask = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ask_user", "arguments": {"prompt": "Tea or coffee?"}}});
    let call = tokio::spawn({
        let (raw, session) = (raw.clone(), session.clone());
        async move { raw.post(Some(&session), ask).await }
    });
    let (_, form) = listening.message(|m| m["method"] == "elicitation/create").await;
    assert!(form.to_string().contains("Tea or coffee?"), "{form}");
    let answer =
        json!({"jsonrpc": "2.0", "id": form["id"], "result": {"action": "accept", "content": {"answer": "tea"}}});
    let (status, _, _) = raw.post(Some(&session), answer).await;
    assert_eq!(status, 202);
    let (status, _, answered) = tokio::time::timeout(Duration::from_secs(20), call).await.unwrap().unwrap();
    assert_eq!(status, 200);
    let answered = answered.expect("an answer");
    assert_eq!(answered["result"]["structuredContent"]["value"], "tea", "{answered}");
    served.terminate().await;
}
