//! The MCP server, through the real binary: an `rmcp` client over streamable HTTP at `/mcp`
//! and over `askgate mcp` (stdio), with the console as the person's surface.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tempfile::TempDir;
use tokio::process::Command;

use crate::binary::{BIN, Served, write_config};
use crate::support::eventually;

const MCP: &str = "\n[mcp]\nconversation = \"console:local\"\nallowed_conversations = [\"console:other\"]\n";

pub type Client = RunningService<RoleClient, ()>;

async fn start() -> (TempDir, Served, String, String) {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), MCP));
    let (base, token) = served.agent(dir.path()).await;
    (dir, served, format!("{base}/mcp"), token)
}

pub async fn http_client(url: &str, token: &str) -> Client {
    client_with(url, token, ()).await
}

/// An MCP session at `url` (askgate's `/mcp`) whose client side is `handler`.
pub async fn client_with<H: rmcp::ClientHandler>(url: &str, token: &str, handler: H) -> RunningService<RoleClient, H> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    handler.serve(StreamableHttpClientTransport::from_config(config)).await.expect("an MCP session")
}

pub fn call(tool: &'static str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    CallToolRequestParams::new(tool).with_arguments(arguments)
}

/// Starts a tool call that waits; its result arrives through the handle.
pub fn call_in_background<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    params: CallToolRequestParams,
) -> tokio::task::JoinHandle<CallToolResult> {
    let peer = client.peer().clone();
    tokio::spawn(async move { peer.call_tool(params).await.expect("a tool result") })
}

pub fn structured(result: &CallToolResult) -> &Map<String, Value> {
    result.structured_content.as_ref().and_then(Value::as_object).expect("structured content")
}

pub fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// The short id of the newest card on the console that shows `prompt`.
async fn card_id(served: &Served, prompt: &str) -> String {
    served.card_id(prompt).await
}

#[tokio::test]
async fn the_tools_are_listed_with_their_schemas() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    let tools = client.list_tools(None).await.unwrap().tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask_user", "confirm", "request_approval", "notify", "get_outcome"]);
    for tool in &tools {
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(tool.output_schema.is_some(), "{} has an output schema", tool.name);
    }
    let ask = tools.iter().find(|t| t.name == "ask_user").unwrap();
    assert!(ask.input_schema["properties"].get("options").is_some());

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_ask_answered_on_the_console_returns_the_answer() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Answered on the console by picking the second option.
    let pending = call_in_background(
        &client,
        call("ask_user", json!({"prompt": "Deploy where?", "options": ["staging", "production"]})),
    );
    let id = card_id(&served, "Deploy where?").await;
    served.type_line(&format!("/answer {id} 2")).await;
    let result = pending.await.unwrap();
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let outcome = structured(&result);
    assert_eq!(outcome["status"], "answered");
    assert_eq!(outcome["value"], "production");
    assert_eq!(outcome["answered_by"], "console:local");
    assert_eq!(outcome["timed_out"], false);
    assert!(text(&result).contains("production"), "{}", text(&result));

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_ask_declined_on_the_console_returns_the_feedback() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Declined with feedback.
    let pending = call_in_background(&client, call("ask_user", json!({"prompt": "Drop the table?"})));
    let id = card_id(&served, "Drop the table?").await;
    served.type_line(&format!("/decline {id} use a migration")).await;
    let outcome = pending.await.unwrap();
    assert_eq!(structured(&outcome)["status"], "declined");
    assert_eq!(structured(&outcome)["feedback"], "use a migration");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_expired_ask_returns_its_default() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Expired: the default applies and says so.
    let outcome = client
        .call_tool(call("ask_user", json!({"prompt": "Pick one", "options": ["a", "b"], "default": "b", "timeout": 1})))
        .await
        .unwrap();
    let outcome = structured(&outcome);
    assert_eq!((outcome["status"].as_str(), &outcome["value"]), (Some("expired"), &json!("b")));
    assert_eq!(outcome["timed_out"], true);

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_confirm_always_ends_with_a_boolean() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // A confirm always ends with a boolean.
    let pending = call_in_background(&client, call("confirm", json!({"prompt": "Restart the worker?"})));
    let id = card_id(&served, "Restart the worker?").await;
    served.type_line(&format!("/answer {id} yes")).await;
    assert_eq!(structured(&pending.await.unwrap())["value"], true);
    let unanswered = client.call_tool(call("confirm", json!({"prompt": "Quick?", "timeout": 1}))).await.unwrap();
    assert_eq!(
        (structured(&unanswered)["status"].as_str(), &structured(&unanswered)["value"]),
        (Some("expired"), &json!(false))
    );

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn allow_always_lets_the_same_action_through_next_time() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    let pending = call_in_background(&client, call("request_approval", json!({"action": "rm -rf build/"})));
    let id = card_id(&served, "rm -rf build/").await;
    served.type_line(&format!("/approve {id} always")).await;
    let first = pending.await.unwrap();
    assert_eq!(structured(&first)["decision"], "always", "{}", text(&first));
    // The same action again: the grant answers, nobody is asked.
    let second = client.call_tool(call("request_approval", json!({"action": "rm -rf build/"}))).await.unwrap();
    assert_eq!(structured(&second)["decision"], "granted", "{}", text(&second));
    assert_eq!(structured(&second)["status"], "answered");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_rejected_approval_returns_the_feedback() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Rejected with feedback.
    let pending = call_in_background(&client, call("request_approval", json!({"action": "DROP TABLE users"})));
    let id = card_id(&served, "DROP TABLE users").await;
    served.type_line(&format!("/deny {id} not on a Friday")).await;
    let rejected = pending.await.unwrap();
    assert_eq!(structured(&rejected)["decision"], "rejected");
    assert_eq!(structured(&rejected)["feedback"], "not on a Friday");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_ask_without_waiting_is_fetched_with_get_outcome() {
    let (_dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // wait: false, then get_outcome.
    let asked = client.call_tool(call("ask_user", json!({"prompt": "Lunch?", "wait": false}))).await.unwrap();
    assert_eq!(structured(&asked)["status"], "pending");
    let question = structured(&asked)["id"].as_str().unwrap().to_owned();
    let still = client.call_tool(call("get_outcome", json!({"id": question}))).await.unwrap();
    assert_eq!(structured(&still)["status"], "pending");
    let id = card_id(&served, "Lunch?").await;
    served.type_line(&format!("/answer {id} pizza")).await;
    let done = client.call_tool(call("get_outcome", json!({"id": question, "wait": 30}))).await.unwrap();
    assert_eq!(
        (structured(&done)["status"].as_str(), &structured(&done)["value"]),
        (Some("answered"), &json!("pizza"))
    );

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn notify_reaches_the_conversation() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // notify reaches the conversation.
    let sent = client.call_tool(call("notify", json!({"message": "build 42 is green"}))).await.unwrap();
    assert_eq!(structured(&sent)["sent"], true);
    served.stdout_line("build 42 is green").await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn bad_tool_input_is_a_tool_error_naming_what_is_wrong() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Bad input: a tool error that names what is wrong; nothing is asked.
    for (tool, arguments, expected) in [
        ("ask_user", json!({"prompt": "x", "option": ["a"]}), "`option` is not an argument of ask_user"),
        ("ask_user", json!({"prompt": "x", "multi": "yes"}), "invalid arguments"),
        ("ask_user", json!({"options": ["a"]}), "prompt"),
        ("confirm", json!({"prompt": "x", "options": ["a"]}), "`options` is for questions"),
        ("request_approval", json!({"prompt": "x"}), "`prompt` is not an argument of request_approval"),
        ("ask_user", json!({"prompt": "x", "conversation": "telegram:42"}), "[mcp] allowed_conversations"),
        ("ask_user", json!({"prompt": "x", "timeout": -5}), "timeout"),
        ("get_outcome", json!({"id": "nope"}), "not a question id"),
        ("get_outcome", json!({"id": uuid(), "wait": 61}), "from 0 to 60"),
        ("notify", json!({"message": " "}), "`message` is empty"),
    ] {
        let result = client.call_tool(call(tool, arguments.clone())).await.unwrap();
        assert_eq!(result.is_error, Some(true), "{tool} {arguments}: {}", text(&result));
        assert!(text(&result).contains(expected), "{tool} {arguments}: {}", text(&result));
    }
    // A conversation that is allowed but that no channel serves.
    let result = client.call_tool(call("ask_user", json!({"prompt": "x", "conversation": "console:other"}))).await;
    let result = result.unwrap();
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    // An unknown tool is a protocol error.
    assert!(client.call_tool(call("ask_everyone", json!({}))).await.is_err());

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn the_endpoint_refuses_requests_without_the_token_or_from_elsewhere() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    // Without the token: 401, before any MCP.
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
    // With the token, from a web page elsewhere: refused (the MCP specification's Origin check).
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&token)
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FORBIDDEN);
    // A Host name that is not loopback while askgate listens on loopback (DNS rebinding): 421.
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&token)
        .header("host", "attacker.example")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::MISDIRECTED_REQUEST);

    client.cancel().await.unwrap();
    served.terminate().await;
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[tokio::test]
async fn a_stop_while_a_call_waits_ends_it_with_a_readable_error_cancelling_its_question() {
    let (_dir, served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    let pending = call_in_background(&client, call("ask_user", json!({"prompt": "Still there?"})));
    let id = card_id(&served, "Still there?").await;
    let status = served.terminate().await;
    assert!(status.success(), "{status:?}");
    let result = tokio::time::timeout(Duration::from_secs(10), pending).await.expect("the call ends").unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("askgate restarted"), "{}", text(&result));
    assert!(text(&result).contains("was cancelled"), "{}", text(&result));
    // The question was closed, not left pending for nobody.
    let db = _dir.path().join("askgate.db");
    let status = question_status(&db, &id).await;
    assert_eq!(status, "cancelled");
}

pub async fn question_status(db: &Path, short_id: &str) -> String {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=ro", db.display())).await.unwrap();
    let value: String = sqlx::query_scalar("SELECT status FROM questions WHERE id LIKE ?1")
        .bind(format!("{short_id}%"))
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    value
}

/// A client that keeps the progress notifications it receives.
#[derive(Clone, Default)]
pub struct Progress(pub Arc<Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params.message.unwrap_or_default());
    }
}

#[tokio::test]
async fn a_waiting_call_reports_progress() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{MCP}progress_every = \"1s\"\n")));
    let (base, token) = served.agent(dir.path()).await;
    let progress = Progress::default();
    let client = client_with(&format!("{base}/mcp"), &token, progress.clone()).await;

    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", json!({"prompt": "Slow one?"}))));
    let _waiting = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    served.card_id("Slow one?").await;
    let message = eventually(|| async { progress.0.lock().unwrap().first().cloned() }).await;
    assert!(message.starts_with("waiting for an answer on console:local (expires in 30m"), "{message}");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_cancelled_call_cancels_its_question() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{MCP}progress_every = \"1s\"\n")));
    let (base, token) = served.agent(dir.path()).await;
    let progress = Progress::default();
    let client = client_with(&format!("{base}/mcp"), &token, progress.clone()).await;

    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(call("ask_user", json!({"prompt": "Slow one?"}))));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let id = served.card_id("Slow one?").await;

    handle.cancel(Some("the agent moved on".to_owned())).await.unwrap();
    // The question ends as cancelled by the client, and the console says so (its retraction).
    let line = served.stdout_line("cancelled (client)").await;
    assert!(line.starts_with(&format!("[{id}]")), "{line}");
    assert_eq!(question_status(&dir.path().join("askgate.db"), &id).await, "cancelled");

    client.cancel().await.unwrap();
    served.terminate().await;
}

/// A client that can show forms: it answers each with `answer`, or holds it until it is
/// taken away (`None`), counting the forms it was shown and the ones taken away.
#[derive(Clone)]
pub struct Forms {
    pub answer: Option<Value>,
    pub shown: Arc<Mutex<Vec<String>>>,
    pub taken_away: Arc<Mutex<u32>>,
}

impl rmcp::ClientHandler for Forms {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder().enable_elicitation().build(),
            rmcp::model::Implementation::new("forms", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request {
            self.shown.lock().unwrap().push(format!("{message} {}", serde_json::to_string(&requested_schema).unwrap()));
        }
        match &self.answer {
            Some(answer) => {
                Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(answer.clone()))
            }
            None => {
                context.ct.cancelled().await;
                *self.taken_away.lock().unwrap() += 1;
                Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Cancel))
            }
        }
    }
}

async fn forms_client(
    served: &Served,
    dir: &Path,
    answer: Option<Value>,
) -> (RunningService<RoleClient, Forms>, Forms) {
    let (base, token) = served.agent(dir).await;
    let forms = Forms { answer, shown: Arc::default(), taken_away: Arc::default() };
    let client = client_with(&format!("{base}/mcp"), &token, forms.clone()).await;
    (client, forms)
}

#[tokio::test]
async fn an_answer_in_the_agents_form_closes_the_card() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{MCP}elicitation = true\n")));
    // Answered in the client's form: the call returns it and the console's card is closed.
    let (client, forms) = forms_client(&served, dir.path(), Some(json!({"answer": "blue"}))).await;
    let result = client
        .call_tool(call(
            "ask_user",
            json!({"prompt": "Which colour?", "options": ["red", {"label": "blue", "description": "the calm one"}]}),
        ))
        .await
        .unwrap();
    let outcome = structured(&result);
    assert_eq!(
        (outcome["status"].as_str(), &outcome["value"]),
        (Some("answered"), &json!("blue")),
        "{}",
        text(&result)
    );
    assert!(forms.shown.lock().unwrap()[0].contains(r#""enum":["red","blue"]"#), "{:?}", forms.shown);
    // Each option's title says what it is.
    assert!(
        forms.shown.lock().unwrap()[0].contains(r#""enumNames":["red","blue — the calm one"]"#),
        "{:?}",
        forms.shown
    );
    let line = served.stdout_line("✅ blue").await;
    assert!(line.contains("via mcp"), "{line}");
    client.cancel().await.unwrap();

    served.terminate().await;
}

#[tokio::test]
async fn an_answer_in_the_chat_first_takes_the_form_away() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), &format!("{MCP}elicitation = true\n")));
    // Answered in the chat first: the form is taken away from the client.
    let (client, forms) = forms_client(&served, dir.path(), None).await;
    let pending = call_in_background(&client, call("confirm", json!({"prompt": "Ship it?"})));
    let id = served.card_id("Ship it?").await;
    eventually(|| async { (!forms.shown.lock().unwrap().is_empty()).then_some(()) }).await;
    served.type_line(&format!("/answer {id} yes")).await;
    assert_eq!(structured(&pending.await.unwrap())["value"], true);
    eventually(|| async { (*forms.taken_away.lock().unwrap() == 1).then_some(()) }).await;
    client.cancel().await.unwrap();

    served.terminate().await;
}

#[tokio::test]
async fn a_closed_session_leaves_its_question_waiting_for_the_agent_to_come_back() {
    let (dir, mut served, url, token) = start().await;
    let client = http_client(&url, &token).await;
    let _pending = call_in_background(&client, call("ask_user", json!({"prompt": "Anyone?"})));
    let id = served.card_id("Anyone?").await;
    // The agent goes away (its client ends the session): the question still waits.
    client.cancel().await.unwrap();
    served.log_line("its question still waits").await;
    assert_eq!(question_status(&dir.path().join("askgate.db"), &id).await, "pending");

    // It comes back in a new session and asks the same: the same question, no second card.
    let client = http_client(&url, &token).await;
    let again = call_in_background(&client, call("ask_user", json!({"prompt": "Anyone?"})));
    served.log_line("attaches to the question an earlier call asked").await;
    served.type_line(&format!("/answer {id} here")).await;
    let outcome = again.await.unwrap();
    assert_eq!(structured(&outcome)["value"], "here", "{}", text(&outcome));
    assert_eq!(served.cards("Anyone?"), 1);
    client.cancel().await.unwrap();
    served.terminate().await;
}

/// A client that says it runs long calls as tasks.
#[derive(Clone)]
pub struct Tasks;

impl rmcp::ClientHandler for Tasks {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder().enable_tasks().build(),
            rmcp::model::Implementation::new("tasks", "1"),
        )
    }
}

#[tokio::test]
async fn a_client_with_tasks_polls_its_ask_until_answered() {
    use rmcp::model::{CallToolResponse, GetTaskParams, TaskPayload, TaskStatus};

    let (_dir, mut served, url, token) = start().await;
    let client = client_with(&url, &token, Tasks).await;
    let task = |response: CallToolResponse| match response {
        CallToolResponse::Task(created) => created.task,
        other => panic!("not a task: {other:?}"),
    };
    // Answered while the client polls.
    let created = task(client.call_tool_once(call("ask_user", json!({"prompt": "Tea or coffee?"}))).await.unwrap());
    let polled = client.get_task(GetTaskParams::new(created.task_id.clone())).await.unwrap();
    assert_eq!(polled.task.task.status, TaskStatus::Working);
    let status = polled.task.task.status_message.unwrap_or_default();
    assert!(status.starts_with("waiting for an answer on console:local"), "{status}");
    let id = served.card_id("Tea or coffee?").await;
    served.type_line(&format!("/answer {id} tea")).await;
    let result = eventually(|| async {
        match client.get_task(GetTaskParams::new(created.task_id.clone())).await.unwrap().task.payload {
            TaskPayload::Completed { result } => Some(result),
            _ => None,
        }
    })
    .await;
    assert_eq!(result["structuredContent"]["value"], "tea", "{result:?}");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_client_with_tasks_may_cancel_its_ask() {
    use rmcp::model::{CallToolResponse, CancelTaskParams, GetTaskParams, TaskStatus};

    let (dir, served, url, token) = start().await;
    let client = client_with(&url, &token, Tasks).await;
    let task = |response: CallToolResponse| match response {
        CallToolResponse::Task(created) => created.task,
        other => panic!("not a task: {other:?}"),
    };
    // Cancelled by the client: the question ends and its card is closed.
    let created = task(client.call_tool_once(call("confirm", json!({"prompt": "Reboot now?"}))).await.unwrap());
    let id = served.card_id("Reboot now?").await;
    client.cancel_task(CancelTaskParams::new(created.task_id.clone())).await.unwrap();
    let line = served.stdout_line("cancelled (client)").await;
    assert!(line.starts_with(&format!("[{id}]")), "{line}");
    assert_eq!(question_status(&dir.path().join("askgate.db"), &id).await, "cancelled");
    let status = eventually(|| async {
        let task = client.get_task(GetTaskParams::new(created.task_id.clone())).await.unwrap().task.task;
        (task.status != TaskStatus::Working).then_some(task.status)
    })
    .await;
    assert_eq!(status, TaskStatus::Cancelled);

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn askgate_mcp_without_an_askgate_says_so_in_one_line() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), MCP);
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = Command::new(BIN)
        .args(["mcp", "--config"])
        .arg(&config)
        .args(["--url", &url])
        .env("ASKGATE_AGENT_TOKEN", "x".repeat(40))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("no askgate answers at {url}")), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on the MCP stream");
}

/// Reads the bridge's stdout until the answer to `id` (`null` for an error without an id).
async fn answer_to(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    id: Value,
) -> Value {
    let read = async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the bridge is still serving");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("an answer")
}

#[tokio::test]
async fn askgate_mcp_answers_an_oversized_or_malformed_message_with_an_error_then_keeps_serving() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let (dir, served, _url, _token) = start().await;
    let (base, _) = served.api(dir.path()).await;
    let mut bridge = Command::new(BIN)
        .args(["mcp", "--config"])
        .arg(dir.path().join("channels.toml"))
        .args(["--url", &format!("{base}/mcp")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    let mut send = async |message: String| {
        stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    send(init.to_string()).await;
    assert!(answer_to(&mut lines, json!(1)).await.get("result").is_some());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()).await;

    // 70 KB: over the 64 KiB askgate's /mcp takes. That request fails, and only it.
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ask_user", "arguments": {"prompt": "x".repeat(70_000)}}});
    send(big.to_string()).await;
    let refused = answer_to(&mut lines, json!(2)).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("askgate did not take this message") && message.contains("413"), "{message}");

    // Not JSON: a parse error without an id. JSON that is no MCP message: invalid, for its id.
    send("this is not json".to_owned()).await;
    let unparsed = answer_to(&mut lines, Value::Null).await;
    assert_eq!(unparsed["error"]["code"], -32700, "{unparsed}");
    send(json!({"jsonrpc": "2.0", "id": 3, "nonsense": true}).to_string()).await;
    assert_eq!(answer_to(&mut lines, json!(3)).await["error"]["code"], -32600);

    // Still serving: the same session lists its tools.
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string()).await;
    let listed = answer_to(&mut lines, json!(4)).await;
    assert_eq!(listed["result"]["tools"].as_array().map(Vec::len), Some(5), "{listed}");

    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), bridge.wait()).await;
    served.terminate().await;
}
