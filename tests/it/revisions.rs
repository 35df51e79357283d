//! Agents on today's MCP, through the real binary: clients of the 2026-07-28 revision and of
//! 2025-11-25, upstreams of each behind the gate, a call its client gave up on, the end of a
//! session, and an upstream's first start.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequest, ClientCapabilities, ClientRequest, ProtocolVersion, ServerNotification};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, SubscriptionFilter};
use rmcp::service::{PeerRequestOptions, RunningService};
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
async fn clients_of_either_revision_are_served_by_upstreams_of_either_revision() {
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
async fn a_call_its_client_gave_up_on_returns_the_answer_when_made_again_with_one_card() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    let url = format!("{base}/mcp");
    for (revision, client) in
        [("2026-07-28", modern_client(&url, &token).await), ("2025-11-25", http_client(&url, &token).await)]
    {
        gives_up_then_comes_back(&mut served, dir.path(), &client, revision).await;
        client.cancel().await.unwrap();
    }
    served.terminate().await;
}

async fn gives_up_then_comes_back(served: &mut Served, dir: &Path, client: &Client, revision: &str) {
    let prompt = format!("Which colour, after a timeout, in {revision}?");
    let arguments = json!({"prompt": prompt, "options": ["red", "blue"], "timeout": 600});

    // The client waits 3 s, then gives up (rmcp cancels the call with `request timeout`).
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", arguments.clone())));
    let options = PeerRequestOptions::with_timeout(Duration::from_secs(3));
    let handle = client.peer().send_request_with_option(request, options).await.unwrap();
    let id = served.card_id(&prompt).await;
    let gave_up = handle.await_response().await;
    assert!(matches!(gave_up, Err(rmcp::ServiceError::Timeout { .. })), "{revision}: {gave_up:?}");
    let detached = format!("question={}", &id[..8]);
    // A 2026-07-28 client times a call out by closing it, without a word: the question waits
    // the reattach grace for it to come back.
    let waits =
        if revision == "2026-07-28" { "its question waits for it to come back" } else { "its question still waits" };
    eventually(|| async { served.log().lines().any(|l| l.contains(waits) && l.contains(&detached)).then_some(()) })
        .await;
    assert_eq!(question_status(&dir.join("askgate.db"), &id).await, "pending", "{revision}");

    // The person answers while no call waits; the same call again (its keys in another order,
    // with `wait`) returns that answer at once, and nobody was asked twice.
    served.type_line(&format!("/answer {id} blue")).await;
    eventually(|| async { (question_status(&dir.join("askgate.db"), &id).await == "answered").then_some(()) }).await;
    let again = json!({"timeout": 600, "wait": true, "options": ["red", "blue"], "prompt": prompt});
    let result = client.call_tool(call("ask_user", again)).await.unwrap();
    assert_eq!(structured(&result)["value"], "blue", "{revision}: {}", text(&result));
    assert!(structured(&result)["id"].as_str().unwrap().starts_with(&id), "{}", text(&result));
    assert_eq!(served.cards(&prompt), 1, "{revision}");

    // Its outcome was taken: the same ask once more is a new question.
    let pending = call_in_background(client, call("ask_user", arguments));
    let second = served.nth_card_id(&prompt, 2).await;
    assert_ne!(second, id);
    served.type_line(&format!("/answer {second} red")).await;
    assert_eq!(structured(&pending.await.unwrap())["value"], "red", "{revision}");
}

#[tokio::test]
async fn only_a_deliberate_cancel_cancels_a_calls_question() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    let url = format!("{base}/mcp");
    let db = dir.path().join("askgate.db");

    // 2025-11-25: the client's `notifications/cancelled` in its session.
    let client = http_client(&url, &token).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", json!({"prompt": "Stop 1?"}))));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let id = served.card_id("Stop 1?").await;
    handle.cancel(Some("the agent moved on".to_owned())).await.unwrap();
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("cancelled (client)"));
    assert_eq!(question_status(&db, &id).await, "cancelled");
    client.cancel().await.unwrap();

    // 2026-07-28, as sent on the wire: a cancellation posted on its own (rmcp's transport
    // answers it 202 and drops it; askgate reads it first).
    let http = reqwest::Client::new();
    let post = |body: Value| {
        // The standard headers repeat what the body says (SEP-2243).
        let mut request = http
            .post(&url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", body["method"].as_str().unwrap());
        if let Some(name) = body["params"]["name"].as_str() {
            request = request.header("mcp-name", name);
        }
        request.json(&body).send()
    };
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "1"},
        "io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let held = post(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"_meta": meta, "name": "ask_user", "arguments": {"prompt": "Stop 2?"}}}));
    let held = tokio::spawn(held);
    let id = served.card_id("Stop 2?").await;
    let cancelled = post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the user stopped it"}}));
    assert_eq!(cancelled.await.unwrap().status(), 202);
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("cancelled (client)"));
    assert_eq!(question_status(&db, &id).await, "cancelled");
    drop(held);

    // 2026-07-28 through rmcp, whose transport cancels a call by dropping its request and sends
    // nothing: that cannot be told from a dropped connection, so the question waits for the
    // grace, and the same call again within it attaches to it.
    let client = modern_client(&url, &token).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", json!({"prompt": "Stop 3?"}))));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let id = served.card_id("Stop 3?").await;
    handle.cancel(Some("the agent moved on".to_owned())).await.unwrap();
    let detached = format!("question={}", &id[..8]);
    eventually(|| async {
        let back = "its question waits for it to come back";
        served.log().lines().any(|l| l.contains(back) && l.contains(&detached)).then_some(())
    })
    .await;
    assert_eq!(question_status(&db, &id).await, "pending");
    let again = call_in_background(&client, call("ask_user", json!({"prompt": "Stop 3?"})));
    served.log_line("attaches to the question an earlier call asked").await;
    served.type_line(&format!("/answer {id} fine")).await;
    assert_eq!(structured(&again.await.unwrap())["value"], "fine");
    assert_eq!(served.cards("Stop 3?"), 1);
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
async fn while_an_upstream_makes_its_first_start_health_says_starting() {
    let dir = TempDir::new().unwrap();
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &["--slow-start", "4"]));
    let served = Served::start(&write_config(dir.path(), &config));
    let (base, _) = served.agent(dir.path()).await;
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 503);
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "starting", "{body}");
    served.terminate().await;
}

#[tokio::test]
async fn while_an_upstream_makes_its_first_start_a_gated_call_is_refused() {
    let dir = TempDir::new().unwrap();
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &["--slow-start", "4"]));
    let served = Served::start(&write_config(dir.path(), &config));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    // A gated call now could not be made: refused with the reason, and nobody is asked.
    let refused = client.call_tool(call_named("files__delete_file", json!({"path": "a.txt"}))).await.unwrap();
    assert!(text(&refused).contains("`files` is not running"), "{}", text(&refused));
    assert_eq!(served.cards("delete_file"), 0);

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn while_an_upstream_makes_its_first_start_the_tools_list_waits_for_its_tools() {
    let dir = TempDir::new().unwrap();
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &["--slow-start", "4"]));
    let served = Served::start(&write_config(dir.path(), &config));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    // Listed once, during the start: the answer waits for the upstream's tools.
    let names: Vec<String> = client.list_tools(None).await.unwrap().tools.iter().map(|t| t.name.to_string()).collect();
    assert!(names.iter().any(|n| n == "files__read_file"), "{names:?}");
    let body: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(body["status"], "ok", "{body}");
    client.cancel().await.unwrap();
    served.terminate().await;
}

/// A client at `url` with `handler` as its side, in the 2026-07-28 revision.
async fn modern_with<H: rmcp::ClientHandler>(url: &str, token: &str, handler: H) -> RunningService<RoleClient, H> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    handler
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("a session")
}

/// A client that can show forms and fills each with `reply` (none: the person dismisses it),
/// keeping what it was shown; with `tasks`, it also runs long calls as tasks.
#[derive(Clone)]
struct Fills {
    reply: Option<Value>,
    tasks: bool,
    shown: Arc<Mutex<Vec<String>>>,
}

impl Fills {
    fn new(reply: Option<Value>) -> Self {
        Self { reply, tasks: false, shown: Arc::default() }
    }

    fn shown(&self) -> Vec<String> {
        self.shown.lock().unwrap().clone()
    }
}

impl rmcp::ClientHandler for Fills {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities = match self.tasks {
            true => ClientCapabilities::builder().enable_elicitation().enable_tasks().build(),
            false => ClientCapabilities::builder().enable_elicitation().build(),
        };
        rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("fills", "1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request {
            self.shown.lock().unwrap().push(format!("{message} {}", serde_json::to_string(&requested_schema).unwrap()));
        }
        Ok(match &self.reply {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content.clone()),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

#[tokio::test]
async fn a_2026_client_gets_the_form_as_input_required_where_the_first_answer_wins() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), &format!("{MCP}elicitation = true\n")));
    let (base, token) = served.agent(dir.path()).await;
    let url = format!("{base}/mcp");

    // Filled in the client: the call comes again with the form and returns the person's answer;
    // the console's card is closed, and it was the only card.
    let fills = Fills::new(Some(json!({"answer": "blue"})));
    let client = modern_with(&url, &token, fills.clone()).await;
    let ask = json!({"prompt": "Which colour, in 2026?", "options": ["red", "blue"]});
    let filled = tokio::time::timeout(Duration::from_secs(30), client.call_tool(call("ask_user", ask)));
    let result = filled.await.expect("the form was shown and filled").unwrap();
    assert_eq!(structured(&result)["value"], "blue", "{}", text(&result));
    assert!(fills.shown()[0].contains(r#""enum":["red","blue"]"#), "{:?}", fills.shown());
    let line = served.stdout_line("✅ blue").await;
    assert!(line.contains("via mcp"), "{line}");
    assert_eq!(served.cards("Which colour, in 2026?"), 1);
    client.cancel().await.unwrap();

    // Dismissed in the client: the call comes again and waits for the chat's answer.
    let fills = Fills::new(None);
    let client = modern_with(&url, &token, fills.clone()).await;
    let waiting = client.call_tool(call("confirm", json!({"prompt": "Ship it, in 2026?"})));
    let answer = async {
        let id = served.card_id("Ship it, in 2026?").await;
        // The call came again with the dismissed form (the second attach of this test).
        let attached = || served.log().matches("attaches to the question an earlier call asked").count();
        eventually(|| async { (attached() == 2).then_some(()) }).await;
        served.type_line(&format!("/answer {id} yes")).await;
    };
    let (result, ()) = tokio::join!(waiting, answer);
    let result = result.unwrap();
    assert_eq!(structured(&result)["value"], true, "{}", text(&result));
    assert_eq!(fills.shown().len(), 1, "{:?}", fills.shown());
    assert_eq!(served.cards("Ship it, in 2026?"), 1);

    // Its own approval is never a form in its client: a person approves it in the chat.
    let waiting = client.call_tool(call("request_approval", json!({"action": "terraform apply, in 2026"})));
    let answer = async {
        let id = served.card_id("terraform apply, in 2026").await;
        served.type_line(&format!("/approve {id}")).await;
    };
    let (result, ()) = tokio::join!(waiting, answer);
    assert_eq!(structured(&result.unwrap())["decision"], "once");
    assert_eq!(fills.shown().len(), 1, "only the question was a form: {:?}", fills.shown());
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_2026_client_with_tasks_polls_its_ask_to_the_outcome() {
    use rmcp::model::{CallToolResponse, GetTaskParams, TaskPayload, TaskStatus};

    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    let tasks = Fills { tasks: true, ..Fills::new(None) };
    let client = modern_with(&format!("{base}/mcp"), &token, tasks).await;
    let CallToolResponse::Task(created) =
        client.call_tool_once(call("ask_user", json!({"prompt": "Tea or coffee, in 2026?"}))).await.unwrap()
    else {
        panic!("not a task")
    };
    let task = created.task.task_id;
    let polled = client.get_task(GetTaskParams::new(task.clone())).await.unwrap();
    assert_eq!(polled.task.task.status, TaskStatus::Working);
    let id = served.card_id("Tea or coffee, in 2026?").await;
    served.type_line(&format!("/answer {id} coffee")).await;
    let result = eventually(|| async {
        match client.get_task(GetTaskParams::new(task.clone())).await.unwrap().task.payload {
            TaskPayload::Completed { result } => Some(result),
            _ => None,
        }
    })
    .await;
    assert_eq!(result["structuredContent"]["value"], "coffee", "{result:?}");
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn askgate_mcp_serves_clients_of_either_revision_with_the_gated_tools_over_stdio() {
    let dir = TempDir::new().unwrap();
    let upstreams = format!("{}{}", upstream(dir.path(), "files", &[]), upstream(dir.path(), "old", &["--legacy"]));
    let mut served = Served::start(&write_config(dir.path(), &format!("{MCP}{upstreams}")));
    let (base, _) = served.agent(dir.path()).await;
    let modern = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    // askgate's own address, as one would type it, and its full MCP endpoint.
    let (at, endpoint) = (base.clone(), format!("{base}/mcp"));
    for (revision, lifecycle, url) in
        [("2026-07-28", modern, at), ("2025-11-25", ClientLifecycleMode::Initialize, endpoint)]
    {
        let mut bridge = tokio::process::Command::new(crate::binary::BIN)
            .args(["mcp", "--config"])
            .arg(dir.path().join("channels.toml"))
            .args(["--url", &url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let transport = (bridge.stdout.take().unwrap(), bridge.stdin.take().unwrap());
        let client = ().serve_with_lifecycle(transport, lifecycle).await.expect("a session over stdio");
        let names: Vec<String> =
            client.list_tools(None).await.unwrap().tools.iter().map(|t| t.name.to_string()).collect();
        for expected in ["ask_user", "get_outcome", "files__read_file", "old__delete_file"] {
            assert!(names.iter().any(|n| n == expected), "{revision}: {expected} in {names:?}");
        }
        let prompt = format!("Via stdio, in {revision}?");
        let pending = call_in_background(&client, call("ask_user", json!({"prompt": prompt})));
        let id = served.card_id(&prompt).await;
        served.type_line(&format!("/answer {id} yes")).await;
        let result = pending.await.unwrap();
        assert_eq!(structured(&result)["value"], "yes", "{revision}: {}", text(&result));
        client.cancel().await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(5), bridge.wait()).await;
    }
    served.terminate().await;
}

#[tokio::test]
async fn a_2026_client_that_listens_hears_when_the_gated_tools_change() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{MCP}{}", upstream(dir.path(), "files", &[]))));
    let (base, token) = served.agent(dir.path()).await;
    let client = modern_client(&format!("{base}/mcp"), &token).await;
    let names = |tools: Vec<rmcp::model::Tool>| tools.into_iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
    assert!(!names(client.list_tools(None).await.unwrap().tools).iter().any(|n| n == "files__echo"));
    let mut changes = client.peer().listen(SubscriptionFilter::builder().tools_list_changed().build()).await.unwrap();
    assert_eq!(changes.acknowledged().tools_list_changed, Some(true));

    let grown = client.call_tool(call_named("files__grow", json!({}))).await.unwrap();
    assert_eq!(text(&grown), "echo is offered now");
    let heard = tokio::time::timeout(Duration::from_secs(15), changes.next()).await.expect("a change is heard");
    assert!(matches!(heard, Ok(Some(ServerNotification::ToolListChangedNotification(_)))), "{heard:?}");
    assert!(names(client.list_tools(None).await.unwrap().tools).iter().any(|n| n == "files__echo"));
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_always_for_a_call_that_could_not_be_made_leaves_no_grant() {
    let dir = TempDir::new().unwrap();
    // Each start takes 3 s: the approval comes while the upstream is down, before it is back.
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &["--slow-start", "3"]));
    let mut served = Served::start(&write_config(dir.path(), &config));
    let (base, token) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    client.list_tools(None).await.unwrap();
    std::fs::write(dir.path().join("files").join("a.txt"), "keep").unwrap();

    let pending = call_in_background(&client, call_named("files__delete_file", json!({"path": "a.txt"})));
    let id = served.card_id("files__delete_file").await;
    let pid = std::fs::read_to_string(dir.path().join("files").join("files_server.pid")).unwrap();
    assert!(std::process::Command::new("kill").args(["-KILL", pid.trim()]).status().unwrap().success());
    served.log_line("restarting it").await;
    served.type_line(&format!("/approve {id} always")).await;
    let failed = pending.await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(text(&failed).contains("not running now"), "{}", text(&failed));
    assert!(text(&failed).contains("was withdrawn"), "{}", text(&failed));
    assert!(dir.path().join("files").join("a.txt").exists());
    let grants = crate::support::get_json(&format!("{base}/api/grants"), &operator).await;
    assert_eq!(grants["grants"], json!([]), "{grants}");
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn every_question_names_who_asks_wherever_it_shows() {
    use futures_util::StreamExt;

    let dir = TempDir::new().unwrap();
    let config = format!("{MCP}{}", upstream(dir.path(), "files", &[]));
    let mut served = Served::start(&write_config(dir.path(), &config));
    let (base, token) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let http = reqwest::Client::new();
    let events = http.get(format!("{base}/api/events")).bearer_auth(&operator).send().await.unwrap();
    let mut events = events.bytes_stream();
    let client = http_client(&format!("{base}/mcp"), &token).await;
    client.list_tools(None).await.unwrap();

    // A function's, an agent's and a gated call's question.
    served.type_line("/run demo").await;
    let asked = call_in_background(&client, call("ask_user", json!({"prompt": "Who is asking?"})));
    let gated = call_in_background(&client, call_named("files__delete_file", json!({"path": "x.txt"})));
    let pending = eventually(|| async {
        let body: Value =
            http.get(format!("{base}/api/questions")).bearer_auth(&operator).send().await.ok()?.json().await.ok()?;
        let questions = body["questions"].as_array()?.clone();
        (questions.len() == 3).then_some(questions)
    })
    .await;
    let asker_of = |prompt: &str| {
        let q = pending.iter().find(|q| q["prompt"].as_str().unwrap().contains(prompt)).expect(prompt);
        (q["id"].as_str().unwrap()[..8].to_owned(), q["asked_by"].as_str().unwrap().to_owned())
    };
    let (agent_id, agent) = asker_of("Who is asking?");
    assert!(agent.starts_with("mcp:agent."), "{agent}");
    let (gated_id, gate) = asker_of("files__delete_file");
    assert_eq!(gate, format!("{agent} via files"));
    let demo = pending.iter().find(|q| q["asked_by"] == "demo").expect("the function's question names it");
    let demo_id = demo["id"].as_str().unwrap()[..8].to_owned();

    // Each console card says so in its last line.
    for (id, asker) in [(&agent_id, &agent), (&gated_id, &gate), (&demo_id, &"demo".to_owned())] {
        let line = served.stdout_line(&format!("id {id} · ")).await;
        assert!(line.ends_with(&format!(" · asked by {asker}")), "{line}");
    }
    // And the event stream's `asked` events carry it.
    let mut seen = String::new();
    for asker in [&agent, &gate, &"demo".to_owned()] {
        while !seen.contains(&format!("\"asked_by\":\"{asker}\"")) {
            let chunk = tokio::time::timeout(Duration::from_secs(15), events.next()).await.expect(asker).unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    }

    served.type_line(&format!("/deny {gated_id}")).await;
    served.type_line(&format!("/answer {agent_id} me")).await;
    assert_eq!(structured(&asked.await.unwrap())["value"], "me");
    assert_eq!(gated.await.unwrap().is_error, Some(true));
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_2026_call_that_waits_hears_progress() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), &format!("{MCP}progress_every = \"1s\"\n")));
    let (base, token) = served.agent(dir.path()).await;
    let progress = crate::mcp::Progress::default();
    let client = modern_with(&format!("{base}/mcp"), &token, progress.clone()).await;
    let pending = call_in_background(&client, call("ask_user", json!({"prompt": "Slow, in 2026?"})));
    let id = served.card_id("Slow, in 2026?").await;
    let message = eventually(|| async { progress.0.lock().unwrap().first().cloned() }).await;
    assert!(message.starts_with("waiting for an answer on console:local (expires in 30m"), "{message}");
    served.type_line(&format!("/answer {id} now")).await;
    assert_eq!(structured(&pending.await.unwrap())["value"], "now");
    client.cancel().await.unwrap();
    served.terminate().await;
}
