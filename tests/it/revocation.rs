//! Revocation reaches what a token already opened, through the real binary: a person's event
//! stream and long-polls end as the token is revoked and never carry what was asked after;
//! an agent's MCP session made with a token of run time ends, its held call with it (an idle
//! one takes no request after, with any token), and so does a Claude Code hook it holds (its
//! question cancelled); on PostgreSQL a token revoked through one instance ends the stream
//! another holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::backend::TestDatabase;
use crate::binary::{Served, write_config, write_config_on};
use crate::support::eventually;

/// How long something that should end at once may take, at most, on a busy machine.
const DEADLINE: Duration = Duration::from_secs(10);

async fn call(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Makes a token (`POST /api/tokens` with `body`) and returns its secret.
async fn token(base: &str, operator: &str, body: Value) -> String {
    let (status, made) = call(reqwest::Method::POST, format!("{base}/api/tokens"), operator, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["token"].as_str().unwrap().to_owned()
}

/// Asks the console a question that `web:alice` may answer; its id.
async fn ask_alice(base: &str, operator: &str, prompt: &str) -> String {
    let body = json!({"conversation": "console:local", "prompt": prompt, "answerers": ["web:alice"]});
    let (status, asked) = call(reqwest::Method::POST, format!("{base}/api/questions"), operator, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{asked}");
    asked["id"].as_str().unwrap().to_owned()
}

/// How many requests the token `name` holds open, as `GET /api/tokens` says.
async fn open(base: &str, operator: &str, name: &str) -> u64 {
    let (_, list) = call(reqwest::Method::GET, format!("{base}/api/tokens"), operator, None).await;
    list["tokens"].as_array().unwrap().iter().find(|t| t["name"] == name).map_or(0, |t| t["open"].as_u64().unwrap())
}

/// An event stream read in the background: what it sent so far, and its whole text once it ends.
fn follow(base: &str, token: &str) -> (Arc<Mutex<String>>, tokio::task::JoinHandle<String>) {
    let heard = Arc::new(Mutex::new(String::new()));
    let (url, token, into) = (format!("{base}/api/events"), token.to_owned(), heard.clone());
    let ended = tokio::spawn(async move {
        let response = reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            into.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk));
        }
        into.lock().unwrap().clone()
    });
    (heard, ended)
}

/// Revokes the token `name` through the API.
async fn revoke(base: &str, operator: &str, name: &str) {
    let (status, body) = call(reqwest::Method::DELETE, format!("{base}/api/tokens/{name}"), operator, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

#[tokio::test]
async fn a_revoked_token_is_cut_off_from_everything_it_waits_on() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, operator) = served.api(dir.path()).await;
    let alice = token(&base, &operator, json!({"name": "alice"})).await;
    let first = ask_alice(&base, &operator, "Asked before the revocation").await;
    let (heard, stream) = follow(&base, &alice);
    eventually(|| async { heard.lock().unwrap().contains("replay.done").then_some(()) }).await;
    assert!(heard.lock().unwrap().contains("Asked before the revocation"));
    // Two long-polls that would wait far longer than the deadline below.
    let poll = |path: String| {
        let (url, alice) = (format!("{base}{path}"), alice.clone());
        tokio::spawn(async move { call(reqwest::Method::GET, url, &alice, None).await })
    };
    let outcome = poll(format!("/api/questions/{first}/outcome?wait=60"));
    let lines = poll("/api/messages?wait=30".to_owned());
    // The stream and both polls are held before the revocation.
    eventually(|| async { (open(&base, &operator, "alice").await == 3).then_some(()) }).await;

    revoke(&base, &operator, "alice").await;
    ask_alice(&base, &operator, "Asked after the revocation").await;
    let said = tokio::time::timeout(DEADLINE, stream).await.expect("the stream ended").unwrap();
    assert!(!said.contains("Asked after the revocation"), "the revoked stream heard a later question: {said}");
    for (poll, what) in [(outcome, "outcome"), (lines, "messages")] {
        let (status, body) = tokio::time::timeout(DEADLINE, poll).await.expect("the long-poll ended").unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("revoked or expired while the request waited"), "{what}: {body}");
    }
    assert_eq!(open(&base, &operator, "alice").await, 0);
    let (status, _) = call(reqwest::Method::GET, format!("{base}/api/events"), &alice, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "and it cannot come back");
    served.terminate().await;
}

#[tokio::test]
async fn an_agents_token_revoked_while_a_call_waits_ends_its_mcp_session() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), "\n[mcp]\nconversation = \"console:local\"\n"));
    let (base, operator) = served.api(dir.path()).await;
    let agent = token(&base, &operator, json!({"name": "ci", "agent": true})).await;
    let (status, me) = call(reqwest::Method::GET, format!("{base}/api/me"), &agent, None).await;
    assert_eq!((status, me["user"].as_str(), me["role"].as_str()), (StatusCode::OK, Some("agent:ci"), Some("agent")));
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{base}/api/tokens"),
        &operator,
        Some(json!({"name": "agent", "agent": true})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "the default agent's name is taken: {body}");

    let client = crate::mcp::http_client(&format!("{base}/mcp"), &agent).await;
    let peer = client.peer().clone();
    let waiting = tokio::spawn(async move {
        peer.call_tool(crate::mcp::call("ask_user", json!({"prompt": "Merge the release branch?"}))).await
    });
    served.card_id("Merge the release branch?").await;
    eventually(|| async { (open(&base, &operator, "agent:ci").await >= 1).then_some(()) }).await;

    revoke(&base, &operator, "agent:ci").await;
    let ended = tokio::time::timeout(DEADLINE, waiting).await.expect("the held call ended").unwrap();
    assert!(ended.is_err(), "the call ended without a result: {ended:?}");
    let again = client.list_tools(None).await;
    assert!(again.is_err(), "the session is over: {again:?}");
    let (status, body) = call(reqwest::Method::POST, format!("{base}/api/questions"), &agent, Some(json!({}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    served.terminate().await;
}

#[tokio::test]
async fn an_idle_mcp_session_of_a_revoked_agents_token_takes_no_request_with_any_token() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), "\n[mcp]\nconversation = \"console:local\"\n"));
    let (base, operator) = served.api(dir.path()).await;
    let ci = token(&base, &operator, json!({"name": "ci", "agent": true})).await;
    let (_, agent) = served.agent(dir.path()).await;
    let mine = crate::sessions::Raw::new(&base, &ci);
    let other = crate::sessions::Raw::new(&base, &agent);
    let session = mine.idle_session().await;
    // A session is its token's: another agent's token does not reach it.
    assert_eq!(other.post(Some(&session), crate::sessions::notify(3, "Not mine")).await.0, 404);
    assert_eq!(mine.post(Some(&session), crate::sessions::notify(4, "Still mine")).await.0, 200);
    served.stdout_line("Still mine").await;

    // Revoked with nothing in flight: the session takes nothing more, with any token.
    revoke(&base, &operator, "agent:ci").await;
    assert_eq!(mine.post(Some(&session), crate::sessions::notify(5, "Revoked")).await.0, 401);
    assert_eq!(other.post(Some(&session), crate::sessions::notify(6, "Taken over")).await.0, 404);
    let shown = served.stdout();
    assert!(!shown.contains("Not mine") && !shown.contains("Revoked") && !shown.contains("Taken over"), "{shown}");
    served.terminate().await;
}

#[tokio::test]
async fn the_event_stream_of_a_revoked_agents_session_put_away_ends_within_a_second() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[mcp]\nconversation = \"console:local\"\n");
    let served = Served::start_with_env(&config, &[("RUST_LOG", "info,askgate::mcp=debug")]);
    let (base, operator) = served.api(dir.path()).await;
    let ci = token(&base, &operator, json!({"name": "ci", "agent": true})).await;
    let raw = crate::sessions::Raw::new(&base, &ci);
    let session = raw.idle_session().await;
    let listening = crate::sessions::Listening::open(&base, &ci, &session).await;
    served.log_line(&format!("an idle MCP session was put away session={session}")).await;
    assert!(!listening.ended.is_finished());

    let revoked = std::time::Instant::now();
    revoke(&base, &operator, "agent:ci").await;
    tokio::time::timeout(DEADLINE, listening.ended).await.expect("the stream ended").unwrap();
    let took = revoked.elapsed();
    assert!(took < Duration::from_secs(1), "the stream ended {took:?} after the revocation");
    assert_eq!(raw.post(Some(&session), crate::sessions::notify(3, "Revoked")).await.0, 401);
    served.terminate().await;
}

#[tokio::test]
async fn a_token_revoked_through_one_instance_ends_the_stream_another_holds() {
    const OPERATOR: &str = "0123456789abcdef0123456789abcdef-revocation";
    let database = TestDatabase::create().await;
    let start = || async {
        let dir = TempDir::new().unwrap();
        let served =
            Served::start_with_env(&write_config_on(dir.path(), &database.url, ""), &[("ASKGATE_API_TOKEN", OPERATOR)]);
        let line = served.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        (dir, served, base)
    };
    let (_a_dir, a, a_base) = start().await;
    let (_b_dir, b, b_base) = start().await;
    let alice = token(&b_base, OPERATOR, json!({"name": "alice"})).await;
    let (heard, stream) = follow(&a_base, &alice);
    eventually(|| async { heard.lock().unwrap().contains("replay.done").then_some(()) }).await;

    revoke(&b_base, OPERATOR, "alice").await;
    ask_alice(&b_base, OPERATOR, "Asked after the revocation").await;
    let said = tokio::time::timeout(DEADLINE, stream).await.expect("A ended the stream B's revocation named").unwrap();
    assert!(!said.contains("Asked after the revocation"), "{said}");
    // A found alice's token when her stream began; once it heard the revocation, it does not
    // take the token again.
    let (status, me) = call(reqwest::Method::GET, format!("{a_base}/api/me"), &alice, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{me}");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test]
async fn a_claude_code_hook_waiting_on_a_revoked_agents_token_ends_with_its_question() {
    let dir = TempDir::new().unwrap();
    let hooks = "\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\"]\n";
    let served = Served::start(&write_config(dir.path(), hooks));
    let (base, operator) = served.api(dir.path()).await;
    let agent = token(&base, &operator, json!({"name": "claude", "agent": true})).await;
    let hook = json!({"session_id": "4f0c9a2e-1b7d-4c3a-9e55-2b8a7c6d5e4f", "cwd": "/home/dev/app",
                      "transcript_path": "/home/dev/.claude/projects/app/4f0c9a2e.jsonl",
                      "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                      "tool_input": {"command": "make deploy", "description": "Deploy"}, "tool_use_id": "toolu_01"});
    let waiting = {
        let url = format!("{base}/hooks/claude-code");
        tokio::spawn(async move { call(reqwest::Method::POST, url, &agent, Some(hook)).await })
    };
    eventually(|| async {
        assert!(!waiting.is_finished(), "the hook answered before anyone did");
        (open(&base, &operator, "agent:claude").await == 1).then_some(())
    })
    .await;
    served.card_id("Bash: make deploy").await;

    revoke(&base, &operator, "agent:claude").await;
    let (status, body) = tokio::time::timeout(DEADLINE, waiting).await.expect("the hook ended").unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // Nobody waits for it any more: its question is cancelled, not left on the cards.
    let questions = format!("{base}/api/questions?status=all");
    let cancelled = eventually(|| async {
        let page = crate::support::get_json(&questions, &operator).await;
        let question = page["questions"]
            .as_array()?
            .iter()
            .find(|q| q["prompt"].as_str().is_some_and(|p| p.contains("make deploy")))?
            .clone();
        (question["status"] == "cancelled").then_some(question)
    })
    .await;
    assert_eq!(cancelled["status"], "cancelled");
    served.terminate().await;
}
