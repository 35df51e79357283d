//! A loopback AG-UI agent written from the protocol (1.0, `@ag-ui/core`'s types): `POST /agent`
//! takes a `RunAgentInput` and answers with its event stream (`text/event-stream`, one `data:`
//! JSON event each). It cleans a temp dir: its first run asks approval of `rm -rf build`
//! (`RUN_FINISHED` with an `interrupt` outcome); the run that resumes it deletes `build/` when
//! the resume entry approves, and leaves it, saying the person's words, when it does not.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

/// The interrupt's id.
pub const INTERRUPT: &str = "approve-rm-1";

/// The agent, and what it was sent.
#[derive(Clone)]
pub struct FakeAgui {
    /// Every `RunAgentInput` it received, in order.
    pub inputs: Arc<Mutex<Vec<Value>>>,
    /// The `Authorization` header of each.
    pub authorization: Arc<Mutex<Vec<String>>>,
    /// The folder whose `build/` it deletes.
    pub workdir: PathBuf,
}

impl FakeAgui {
    /// Starts it on loopback; its endpoint's URL.
    pub async fn start(workdir: PathBuf) -> (Self, String) {
        let fake = Self { inputs: Arc::default(), authorization: Arc::default(), workdir };
        let app = axum::Router::new().route("/agent", post(run)).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/agent", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, url)
    }

    /// The inputs received so far.
    pub fn inputs(&self) -> Vec<Value> {
        self.inputs.lock().unwrap().clone()
    }
}

async fn run(State(fake): State<FakeAgui>, headers: HeaderMap, body: axum::body::Bytes) -> axum::response::Response {
    let input: Value = serde_json::from_slice(&body).expect("a RunAgentInput is JSON");
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    fake.authorization.lock().unwrap().push(auth);
    fake.inputs.lock().unwrap().push(input.clone());
    let (thread, run) = (input["threadId"].as_str().unwrap(), input["runId"].as_str().unwrap());
    let mut events = vec![json!({"type": "RUN_STARTED", "threadId": thread, "runId": run})];
    let resume = input["resume"].as_array().cloned().unwrap_or_default();
    let answer = resume.iter().find(|r| r["interruptId"] == INTERRUPT);
    match answer {
        None => {
            events.extend(text("m1", "I will clean the build folder first."));
            events.push(json!({"type": "TOOL_CALL_START", "toolCallId": "call-1", "toolCallName": "shell"}));
            events.push(
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": "{\"command\":\"rm -rf build\"}"}),
            );
            events.push(json!({"type": "TOOL_CALL_END", "toolCallId": "call-1"}));
            events.push(json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run, "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": INTERRUPT, "reason": "tool_approval", "message": "rm -rf build",
                    "toolCallId": "call-1"}]
            }}));
        }
        Some(entry) => {
            let approved = entry["status"] == "resolved" && entry["payload"]["approved"] == true;
            let said = if approved {
                std::fs::remove_dir_all(fake.workdir.join("build")).unwrap();
                "Deleted build/.".to_owned()
            } else {
                let words = entry["payload"]["feedback"].as_str().unwrap_or("no reason given");
                format!("Left build/ alone: {words}")
            };
            events.extend(text("m2", &said));
            events.push(json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run,
                "outcome": {"type": "success"}, "result": {"approved": approved}}));
        }
    }
    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    axum::response::Response::builder().header("content-type", "text/event-stream").body(body.into()).unwrap()
}

/// A text message streamed in two fragments.
fn text(id: &str, said: &str) -> Vec<Value> {
    let middle = said.char_indices().nth(said.chars().count() / 2).map_or(0, |(i, _)| i);
    let (a, b) = said.split_at(middle);
    vec![
        json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": a}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": b}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
    ]
}
