//! A loopback OpenAI-compatible chat completions API, for the real opencode CLI (a provider of
//! `@ai-sdk/openai-compatible` whose `baseURL` is this): `POST /v1/chat/completions` answers a
//! conversation that offers a `bash` tool and has no tool message yet with one call of it (the
//! command it is given), and any other (a reply after the tool, a title) with a short text,
//! streamed as chunks (`data: {choices: [{delta}]}` lines, a last chunk with the usage, then
//! `data: [DONE]`), or whole as one completion when `stream` is not set. Every tool message it
//! receives is kept: what the model was told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// What the model says when it calls no tool.
pub const FINAL_TEXT: &str = "The build folder is dealt with.";

#[derive(Clone)]
pub struct FakeOpenai {
    /// The base URL (`…/v1`) the provider is given.
    pub url: String,
    command: Arc<String>,
    /// Every `tool` message received (its call's id, its content), in order.
    tool_messages: Arc<Mutex<Vec<(String, String)>>>,
    calls: Arc<AtomicUsize>,
}

impl FakeOpenai {
    /// Listens on loopback; each conversation with a `bash` tool calls it with `command` first.
    pub async fn start(command: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Self {
            url: format!("http://{}/v1", listener.local_addr().unwrap()),
            command: Arc::new(command.to_owned()),
            tool_messages: Arc::default(),
            calls: Arc::default(),
        };
        let app = axum::Router::new().route("/v1/chat/completions", post(completions)).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// The content of every tool message the model was sent so far.
    pub fn tool_messages(&self) -> Vec<String> {
        self.tool_messages.lock().unwrap().iter().map(|(_, text)| text.clone()).collect()
    }
}

async fn completions(State(fake): State<FakeOpenai>, Json(request): Json<Value>) -> Response {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    // Every request carries the whole conversation: each tool message is kept once.
    let mut kept = fake.tool_messages.lock().unwrap();
    for message in &tools {
        let id = message["tool_call_id"].as_str().unwrap_or_default().to_owned();
        let text = match &message["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        if !kept.iter().any(|(seen, _)| *seen == id) {
            kept.push((id, text));
        }
    }
    drop(kept);
    let has_bash = request["tools"].as_array().into_iter().flatten().any(|tool| tool["function"]["name"] == "bash");
    let model = request["model"].clone();
    let (message, finish) = if tools.is_empty() && has_bash {
        let n = fake.calls.fetch_add(1, Ordering::SeqCst);
        let arguments = json!({"command": *fake.command, "description": "Remove the build folder"}).to_string();
        let call = json!({"id": format!("call_{n:02}"), "type": "function",
            "function": {"name": "bash", "arguments": arguments}});
        (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
    } else {
        (json!({"role": "assistant", "content": FINAL_TEXT}), "stop")
    };
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120});
    if request["stream"] != true {
        return Json(json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}))
        .into_response();
    }
    let chunk = |choices: Value| json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": choices});
    let mut delta = message.clone();
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (index, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(index);
        }
    }
    let mut chunks = vec![
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}])),
    ];
    let mut last = chunk(json!([]));
    last["usage"] = usage;
    chunks.push(last);
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).chain(["data: [DONE]\n\n".to_owned()]).collect();
    (StatusCode::OK, [("content-type", "text/event-stream")], body).into_response()
}
