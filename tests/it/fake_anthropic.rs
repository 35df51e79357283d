//! A loopback Anthropic Messages API, for the real Claude Code CLI (`ANTHROPIC_BASE_URL`):
//! `POST /v1/messages` (Claude Code adds `?beta=true` and asks for a stream) answers a
//! conversation that has not run a tool yet with one `Bash` tool use of the command it is
//! given, and one that carries a `tool_result` with a short text, streamed as the Messages API streams
//! (`message_start`, `content_block_start`, `content_block_delta` with `input_json_delta` or
//! `text_delta`, `content_block_stop`, `message_delta` with the stop reason, `message_stop`);
//! a request without `stream` gets the whole message as JSON. Every `tool_result` it receives
//! is kept: what the model was told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// What the model says once the tool ran (or was refused).
pub const FINAL_TEXT: &str = "The build folder is dealt with.";

#[derive(Clone)]
pub struct FakeAnthropic {
    /// The base URL Claude Code is given.
    pub url: String,
    /// The command its tool use runs.
    command: Arc<String>,
    /// Every `tool_result` block received, in order.
    results: Arc<Mutex<Vec<Value>>>,
    /// How many tool uses it has answered with (each gets its own id).
    uses: Arc<AtomicUsize>,
}

impl FakeAnthropic {
    /// Listens on loopback; each turn that has not run a tool yet asks for `Bash` `command`.
    pub async fn start(command: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Self {
            url: format!("http://{}", listener.local_addr().unwrap()),
            command: Arc::new(command.to_owned()),
            results: Arc::default(),
            uses: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// Every `tool_result` block the model was sent so far.
    pub fn tool_results(&self) -> Vec<Value> {
        self.results.lock().unwrap().clone()
    }
}

/// The text of a `tool_result` block: its `content` as a string, or its text blocks joined.
pub fn result_text(result: &Value) -> String {
    match &result["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

async fn count_tokens() -> Json<Value> {
    Json(json!({"input_tokens": 100}))
}

async fn messages(State(fake): State<FakeAnthropic>, Json(request): Json<Value>) -> Response {
    let model = request["model"].as_str().unwrap_or("claude").to_owned();
    // Every request carries the whole conversation: a tool that ran (or was refused) is in it.
    let results: Vec<Value> = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    let has_bash = request["tools"].as_array().into_iter().flatten().any(|tool| tool["name"] == "Bash");
    let block = if results.is_empty() && has_bash {
        let n = fake.uses.fetch_add(1, Ordering::SeqCst);
        let input = json!({"command": *fake.command, "description": "Remove the build folder"});
        json!({"type": "tool_use", "id": format!("toolu_{n:02}"), "name": "Bash", "input": input})
    } else {
        json!({"type": "text", "text": FINAL_TEXT})
    };
    let mut kept = fake.results.lock().unwrap();
    for result in results {
        if !kept.iter().any(|k| k["tool_use_id"] == result["tool_use_id"]) {
            kept.push(result);
        }
    }
    drop(kept);
    let stop_reason = if block["type"] == "tool_use" { "tool_use" } else { "end_turn" };
    if request["stream"] != true {
        let message = json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 20}});
        return Json(message).into_response();
    }
    (StatusCode::OK, [("content-type", "text/event-stream")], streamed(&model, &block, stop_reason)).into_response()
}

/// The message as the Messages API streams it: the block opened empty, its content as one delta.
fn streamed(model: &str, block: &Value, stop_reason: &str) -> String {
    let (opened, delta) = match block["type"].as_str() {
        Some("tool_use") => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        ),
        _ => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]})),
    };
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": opened}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    events.iter().map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or(""))).collect()
}
