//! Agents on today's MCP, through the real binary: clients of the 2026-07-28 revision and of
//! 2025-11-25, upstreams of each behind the gate, a call its client gave up on, the end of a
//! session, and an upstream's first start.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{CallToolRequest, ClientRequest, ProtocolVersion};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, example, write_config};
use crate::mcp::{Client, call, call_in_background, http_client, question_status, structured, text};
use crate::support::eventually;

const MCP: &str = "\n[mcp]\nconversation = \"console:local\"\n";

/// `[[mcp.upstream]]` of `examples/files_server.rs` named `name`, in its own directory under
/// `dir`, started with `flags`; its `delete_*` calls need an approval.
fn upstream(dir: &Path, name: &str, flags: &[&str]) -> String {
    let files = dir.join(name);
    std::fs::create_dir_all(&files).unwrap();
    let mut command = vec![example("files_server").display().to_string()];
    command.extend(flags.iter().map(|f| (*f).to_owned()));
    command.push(files.display().to_string());
    format!(
        "\n[[mcp.upstream]]\nname = \"{name}\"\ncommand = {}\napprove = [\"delete_*\"]\n",
        serde_json::to_string(&command).unwrap()
    )
}

/// A session at `url` that negotiates the 2026-07-28 revision (`server/discover`, no
/// `initialize`, no session).
async fn modern_client(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("a 2026-07-28 session")
}

#[tokio::test]
async fn clients_of_either_revision_list_the_tools_of_upstreams_of_either_revision_and_are_answered() {
    let dir = TempDir::new().unwrap();
    let upstreams = format!("{}{}", upstream(dir.path(), "files", &[]), upstream(dir.path(), "old", &["--legacy"]));
    let mut served = Served::start(&write_config(dir.path(), &format!("{MCP}{upstreams}")));
    let (base, token) = served.agent(dir.path()).await;
    let url = format!("{base}/mcp");
    for (revision, client) in
        [("2026-07-28", modern_client(&url, &token).await), ("2025-11-25", http_client(&url, &token).await)]
    {
        // Listed once, as many clients do: askgate's tools with titles and hints, and both
        // upstreams' (askgate waits for their first start).
        let tools = client.list_tools(None).await.unwrap().tools;
        let ask = tools.iter().find(|t| t.name == "ask_user").expect("ask_user is listed");
        assert_eq!(ask.title.as_deref(), Some("Ask a person"), "{revision}");
        let hints = ask.annotations.as_ref().expect("ask_user has annotations");
        assert_eq!((hints.read_only_hint, hints.idempotent_hint), (Some(false), Some(true)), "{revision}");
        let outcome = tools.iter().find(|t| t.name == "get_outcome").unwrap();
        assert_eq!(outcome.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true), "{revision}");
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        for expected in ["files__read_file", "old__read_file", "files__delete_file"] {
            assert!(names.iter().any(|n| n == expected), "{revision}: {expected} in {names:?}");
        }

        // Each upstream is spoken to in its own revision, whichever the agent speaks.
        for (name, spoken) in [("files", "2026-07-28"), ("old", "2025-11-25")] {
            std::fs::write(dir.path().join(name).join("a.txt"), format!("{name} for {revision}")).unwrap();
            let read = client.call_tool(call_named(&format!("{name}__read_file"), json!({"path": "a.txt"}))).await;
            assert_eq!(text(&read.unwrap()), format!("{name} for {revision}"));
            let heard = std::fs::read_to_string(dir.path().join(name).join("revision")).unwrap();
            assert_eq!(heard, spoken, "{name}");
        }

        // A question, answered on the console.
        let prompt = format!("Which revision, {revision}?");
        let pending = call_in_background(&client, call("ask_user", json!({"prompt": prompt, "options": ["a", "b"]})));
        let id = served.card_id(&prompt).await;
        served.type_line(&format!("/answer {id} b")).await;
        let result = pending.await.unwrap();
        assert_eq!(structured(&result)["value"], "b", "{revision}: {}", text(&result));
        client.cancel().await.unwrap();
    }
    served.terminate().await;
}

fn call_named(name: &str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

#[tokio::test]
async fn a_call_its_client_gave_up_on_is_attached_to_again_and_returns_the_answer_with_one_card() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    let prompt = "Which colour, after a timeout?";
    let arguments = json!({"prompt": prompt, "options": ["red", "blue"], "timeout": 600});

    // The client waits 3 s, then gives up (rmcp cancels the call with `request timeout`).
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", arguments.clone())));
    let options = PeerRequestOptions::with_timeout(Duration::from_secs(3));
    let handle = client.peer().send_request_with_option(request, options).await.unwrap();
    let id = served.card_id(prompt).await;
    let gave_up = handle.await_response().await;
    assert!(matches!(gave_up, Err(rmcp::ServiceError::Timeout { .. })), "{gave_up:?}");
    served.log_line("its question still waits").await;
    assert_eq!(question_status(&dir.path().join("askgate.db"), &id).await, "pending");

    // The person answers while no call waits; the same call again (its keys in another order,
    // with `wait`) returns that answer at once, and nobody was asked twice.
    served.type_line(&format!("/answer {id} blue")).await;
    eventually(|| async { (question_status(&dir.path().join("askgate.db"), &id).await == "answered").then_some(()) })
        .await;
    let again = json!({"timeout": 600, "wait": true, "options": ["red", "blue"], "prompt": prompt});
    let result = client.call_tool(call("ask_user", again)).await.unwrap();
    assert_eq!(structured(&result)["value"], "blue", "{}", text(&result));
    assert!(structured(&result)["id"].as_str().unwrap().starts_with(&id), "{}", text(&result));
    assert_eq!(served.cards(prompt), 1);

    // Its outcome was taken: the same ask once more is a new question.
    let pending = call_in_background(&client, call("ask_user", arguments));
    let second = served.nth_card_id(prompt, 2).await;
    assert_ne!(second, id);
    served.type_line(&format!("/answer {second} red")).await;
    assert_eq!(structured(&pending.await.unwrap())["value"], "red");
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn ending_a_session_answers_200() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let response = http
        .post(format!("{base}/mcp"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let ended = http
        .delete(format!("{base}/mcp"))
        .bearer_auth(&token)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    // The session is gone: a request in it is refused.
    let after = http
        .post(format!("{base}/mcp"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 404);
    served.terminate().await;
}

#[tokio::test]
async fn while_an_upstream_makes_its_first_start_health_says_starting_gated_calls_are_refused_and_tools_list_waits() {
    let dir = TempDir::new().unwrap();
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &["--slow-start", "4"]));
    let served = Served::start(&write_config(dir.path(), &config));
    let (base, token) = served.agent(dir.path()).await;
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 503);
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "starting", "{body}");

    // A gated call now could not be made: refused with the reason, and nobody is asked.
    let client = http_client(&format!("{base}/mcp"), &token).await;
    let refused = client.call_tool(call_named("files__delete_file", json!({"path": "a.txt"}))).await.unwrap();
    assert!(text(&refused).contains("`files` is not running"), "{}", text(&refused));
    assert_eq!(served.cards("delete_file"), 0);

    // Listed once, during the start: the answer waits for the upstream's tools.
    let names: Vec<String> = client.list_tools(None).await.unwrap().tools.iter().map(|t| t.name.to_string()).collect();
    assert!(names.iter().any(|n| n == "files__read_file"), "{names:?}");
    let body: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(body["status"], "ok", "{body}");
    client.cancel().await.unwrap();
    served.terminate().await;
}
