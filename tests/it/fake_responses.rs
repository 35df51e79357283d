//! A loopback double of the OpenAI Responses API (`POST /v1/responses`, streamed as server-sent
//! events), written from the public reference and the events Codex reads
//! (`response.created`, `response.output_item.done`, `response.completed`), for the real Codex
//! CLI as a custom model provider. Its model does one thing: asked to work (the request ends
//! with the person's message), it calls the shell tool the request offers with `rm -rf build`;
//! given that call's output, it answers with the output as its message, so what the hook said
//! reaches Codex's own output. Every request is recorded.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The command the model runs.
pub const COMMAND: &str = "rm -rf build";

/// A running double.
#[derive(Clone)]
pub struct FakeResponses {
    /// `http://127.0.0.1:<port>/v1`: a provider's `base_url`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeResponses {
    /// Serves on a free loopback port until the test ends.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().route("/v1/responses", post(respond)).with_state(requests.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base_url, requests }
    }

    /// The bodies of the requests so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The outputs of the shell calls that came back to the model, in order (each request's
    /// newest item, when it is one: the history repeats the earlier ones).
    pub fn call_outputs(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|r| r["input"].as_array().and_then(|items| items.last()).cloned())
            .filter(|item| item["type"] == "function_call_output")
            .map(|item| match &item["output"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect()
    }
}

async fn respond(State(requests): State<Arc<Mutex<Vec<Value>>>>, body: axum::body::Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = {
        let mut requests = requests.lock().unwrap();
        requests.push(request.clone());
        requests.len()
    };
    let last = request["input"].as_array().and_then(|items| items.last()).cloned().unwrap_or_default();
    let output = (last["type"] == "function_call_output").then(|| last["output"].clone());
    let item = match output {
        None => shell_call(&request, n),
        Some(output) => {
            let text = output.as_str().map_or_else(|| output.to_string(), str::to_owned);
            json!({"type": "message", "role": "assistant", "id": "msg-done",
                   "content": [{"type": "output_text", "text": format!("The shell said: {text}")}]})
        }
    };
    let id = format!("resp-{n}");
    let usage = json!({"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
                       "output_tokens_details": null, "total_tokens": 15});
    let events = [
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.done", "item": item}),
        json!({"type": "response.completed", "response": {"id": id, "usage": usage}}),
    ];
    let stream: String =
        events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect();
    ([("content-type", "text/event-stream")], stream).into_response()
}

/// A call of the shell tool the request offers, with its own argument names: `exec_command`
/// (`cmd`), `shell_command` (`command` as a string) or `shell` (`command` as argv).
fn shell_call(request: &Value, n: usize) -> Value {
    let offered: Vec<&str> =
        request["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    let (name, arguments) = if offered.contains(&"exec_command") {
        ("exec_command", json!({"cmd": COMMAND}))
    } else if offered.contains(&"shell_command") {
        ("shell_command", json!({"command": COMMAND}))
    } else {
        ("shell", json!({"command": ["bash", "-lc", COMMAND]}))
    };
    json!({"type": "function_call", "call_id": format!("call-{n}"), "name": name, "arguments": arguments.to_string()})
}
