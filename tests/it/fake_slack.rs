//! Loopback servers that speak Slack's JSON, for the real slack-morphism client: the Web API
//! (`auth.test`, `apps.connections.open`, `chat.postMessage`, `chat.update`,
//! `chat.postEphemeral`, `views.open`) with 429 injection and a log of every call, and a plain
//! `ws://` Socket Mode server (`hello` with `connection_info.app_id`, envelopes with
//! `envelope_id` and `accepts_response_payload`, `disconnect`, dropped sockets), which records
//! every acknowledgement with its payload.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::support::{eventually, eventually_at};

pub const TEAM: &str = "T0000TEAM";
pub const BOT: &str = "U0000BOT";

#[derive(Default)]
struct Inner {
    next_ts: u64,
    /// Bot messages by ts: the latest content.
    messages: HashMap<String, Value>,
    /// (method, body) of every Web API call.
    calls: Vec<(String, Value)>,
    /// 429s still to answer, by method.
    fail: HashMap<String, u32>,
    /// The live socket's outbox.
    socket: Option<mpsc::UnboundedSender<Ws>>,
    connections: u32,
    acks: Vec<String>,
    /// Each acknowledgement's payload, by envelope id (null when it had none).
    ack_payloads: HashMap<String, Value>,
    next_envelope: u64,
    /// Envelopes sent while no socket was up: Slack holds them for the next connection.
    held: Vec<String>,
}

/// The fake Slack.
#[derive(Clone, Default)]
pub struct FakeSlack {
    inner: Arc<Mutex<Inner>>,
}

impl FakeSlack {
    /// Starts the Web API and the Socket Mode server; returns the fake and the API base URL.
    pub async fn start() -> (Self, String) {
        let fake = Self::default();
        fake.inner.lock().unwrap().next_ts = 1_700_000_000;
        let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws_url = format!("ws://{}/link", socket.local_addr().unwrap());
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/api/", http.local_addr().unwrap());
        let app = Router::new().route("/api/{method}", any(web_api)).with_state((fake.clone(), ws_url));
        tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
        let s = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = socket.accept().await {
                tokio::spawn(s.clone().session(stream));
            }
        });
        (fake, base)
    }

    async fn session(self, stream: tokio::net::TcpStream) {
        let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
        let (mut sink, mut source) = ws.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Ws>();
        let hello = json!({"type": "hello", "num_connections": 1,
            "debug_info": {"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0000APP"}});
        let _ = tx.send(Ws::Text(hello.to_string()));
        {
            let mut inner = self.inner.lock().unwrap();
            for envelope in std::mem::take(&mut inner.held) {
                let _ = tx.send(Ws::Text(envelope));
            }
            inner.socket = Some(tx);
            inner.connections += 1;
        }
        let writer = tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                let close = matches!(m, Ws::Close(_));
                if sink.send(m).await.is_err() || close {
                    break;
                }
            }
        });
        while let Some(Ok(message)) = source.next().await {
            let Ws::Text(text) = message else { continue };
            let Ok(ack) = serde_json::from_str::<Value>(&text) else { continue };
            if let Some(id) = ack["envelope_id"].as_str() {
                let mut inner = self.inner.lock().unwrap();
                inner.acks.push(id.to_owned());
                inner.ack_payloads.insert(id.to_owned(), ack["payload"].clone());
            }
        }
        writer.abort();
    }

    /// Waits until `n` Socket Mode connections were made in all.
    pub async fn connected(&self, n: u32) {
        eventually(|| async { (self.inner.lock().unwrap().connections >= n).then_some(()) }).await;
    }

    /// Sends an envelope on the live socket; its id.
    pub fn envelope(&self, kind: &str, payload: Value) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.next_envelope += 1;
        let id = format!("env-{}", inner.next_envelope);
        self.send_envelope(&mut inner, &id, kind, payload, 0);
        id
    }

    /// Sends envelope `id` again, as Slack does when it saw no acknowledgement.
    pub fn redeliver(&self, id: &str, kind: &str, payload: Value) {
        let mut inner = self.inner.lock().unwrap();
        self.send_envelope(&mut inner, id, kind, payload, 1);
    }

    fn send_envelope(&self, inner: &mut Inner, id: &str, kind: &str, payload: Value, retry: u32) {
        let accepts = kind != "events_api";
        let mut envelope =
            json!({"type": kind, "envelope_id": id, "payload": payload, "accepts_response_payload": accepts});
        if kind == "events_api" {
            envelope["retry_attempt"] = json!(retry);
            envelope["retry_reason"] = json!(if retry > 0 { "timeout" } else { "" });
        }
        match &inner.socket {
            Some(socket) => socket.send(Ws::Text(envelope.to_string())).unwrap(),
            None => inner.held.push(envelope.to_string()),
        }
    }

    /// An Events API callback for a person's message (`thread`: the thread it is in).
    pub fn message_event(user: &str, channel: &str, text: &str, thread: Option<&str>, n: u64) -> Value {
        let mut event = json!({"type": "message", "channel": channel, "user": user, "text": text,
            "ts": format!("1800000000.{n:06}"), "channel_type": if channel.starts_with('D') { "im" } else { "channel" },
            "event_ts": format!("1800000000.{n:06}")});
        if let Some(thread) = thread {
            event["thread_ts"] = json!(thread);
        }
        json!({"token": "x", "team_id": TEAM, "api_app_id": "A0000APP", "type": "event_callback",
            "event_id": format!("Ev{n:08}"), "event_time": 1_800_000_000, "event": event,
            "authorizations": [{"team_id": TEAM, "user_id": BOT, "is_bot": true}]})
    }

    /// A person types `text` in `channel`; the envelope's id.
    pub fn message(&self, user: &str, channel: &str, text: &str, thread: Option<&str>) -> String {
        let n = self.inner.lock().unwrap().next_envelope + 1;
        self.envelope("events_api", Self::message_event(user, channel, text, thread, n))
    }

    /// A `block_actions` payload for a click on the element `action` of the card `ts`.
    pub fn actions_payload(user: &str, channel: &str, ts: &str, action: Value, state: Value, n: u64) -> Value {
        let mut action = action;
        action["action_ts"] = json!(format!("1800000001.{n:06}"));
        action["block_id"] = json!("b");
        json!({"type": "block_actions", "team": {"id": TEAM, "domain": "fake"},
            "user": {"id": user, "username": format!("user{user}"), "name": format!("user{user}"), "team_id": TEAM},
            "api_app_id": "A0000APP", "token": "x", "trigger_id": format!("trigger.{n}"),
            "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
            "channel": {"id": channel, "name": "general"},
            "message": {"type": "message", "ts": ts, "text": "card", "user": BOT, "bot_id": "B0000BOT"},
            "response_url": "https://hooks.slack.com/actions/x", "actions": [action], "state": state})
    }

    /// A person clicks the button `value` on the card `ts`.
    pub fn click(&self, user: &str, channel: &str, ts: &str, value: &str) -> String {
        let n = self.inner.lock().unwrap().next_envelope + 1;
        let action =
            json!({"type": "button", "action_id": "a1", "value": value, "text": {"type": "plain_text", "text": "x"}});
        self.envelope("interactive", Self::actions_payload(user, channel, ts, action, json!({"values": {}}), n))
    }

    /// A person picks `value` in the single-choice menu `action_id` of the card `ts`.
    pub fn pick(&self, user: &str, channel: &str, ts: &str, action_id: &str, value: &str) -> String {
        let n = self.inner.lock().unwrap().next_envelope + 1;
        let action = json!({"type": "static_select", "action_id": action_id,
            "selected_option": {"text": {"type": "plain_text", "text": value}, "value": value}});
        self.envelope("interactive", Self::actions_payload(user, channel, ts, action, json!({"values": {}}), n))
    }

    /// A person submits the modal `view` (as `views.open` got it) with `text` typed in.
    pub fn submit(&self, user: &str, view: &Value, text: &str) -> String {
        self.submit_form(user, view, json!({"text": {"text": {"type": "plain_text_input", "value": text}}}))
    }

    /// A person submits the form modal `view` (as `views.open` got it) with `values` as its
    /// state: `{"f1": {"v": {"type": "plain_text_input", "value": "Ada"}}, …}`.
    pub fn submit_form(&self, user: &str, view: &Value, values: Value) -> String {
        let n = self.inner.lock().unwrap().next_envelope + 1;
        self.envelope("interactive", Self::form_payload(user, view, values, n))
    }

    /// The `view_submission` payload of the form modal `view` with `values` as its state.
    pub fn form_payload(user: &str, view: &Value, values: Value, n: u64) -> Value {
        let mut view = view.clone();
        view["id"] = json!(format!("V{n:08}"));
        view["team_id"] = json!(TEAM);
        view["hash"] = json!("h");
        view["state"] = json!({ "values": values });
        json!({"type": "view_submission", "team": {"id": TEAM, "domain": "fake"},
            "user": {"id": user, "username": format!("user{user}"), "team_id": TEAM},
            "api_app_id": "A0000APP", "token": "x", "trigger_id": format!("trigger.{n}"), "view": view})
    }

    /// Slack asks the client to reconnect (`disconnect`, as before a refresh).
    pub fn disconnect(&self) {
        let inner = self.inner.lock().unwrap();
        let envelope = json!({"type": "disconnect", "reason": "refresh_requested",
            "debug_info": {"host": "applink-fake"}});
        inner.socket.as_ref().unwrap().send(Ws::Text(envelope.to_string())).unwrap();
    }

    /// Drops the live socket without a word.
    pub fn drop_socket(&self) {
        if let Some(socket) = self.inner.lock().unwrap().socket.take() {
            let _ = socket.send(Ws::Close(None));
        }
    }

    /// Answers the next `n` calls of `method` with 429 and `Retry-After: 1`.
    pub fn fail(&self, method: &str, n: u32) {
        self.inner.lock().unwrap().fail.insert(method.to_owned(), n);
    }

    /// Every call of `method`'s body, in order.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.inner.lock().unwrap().calls.iter().filter(|(m, _)| m == method).map(|(_, b)| b.clone()).collect()
    }

    /// Waits until `n` messages posted (`chat.postMessage`, not updates) start with `title`,
    /// then asserts that exactly `n` do: "at most" holds only as far as the caller waited, so
    /// call it after an event that comes after anything more would have (a later message
    /// answered).
    #[track_caller]
    pub fn sent_exactly<'a>(&'a self, title: &'a str, n: usize) -> impl std::future::Future<Output = Vec<Value>> + 'a {
        let at = std::panic::Location::caller();
        async move {
            let posted = || {
                let calls = self.calls("chat.postMessage").into_iter();
                calls.filter(|b| b["text"].as_str().is_some_and(|t| t.starts_with(title))).collect::<Vec<_>>()
            };
            eventually_at(at, || async { (posted().len() >= n).then_some(()) }).await;
            let posted = posted();
            let texts: Vec<&Value> = posted.iter().map(|b| &b["text"]).collect();
            assert_eq!(posted.len(), n, "{title:?} posted {} times, not {n} (at {at}): {texts:?}", posted.len());
            posted
        }
    }

    /// Whether envelope `id` was acknowledged.
    pub async fn acked(&self, id: &str) {
        eventually(|| async { self.inner.lock().unwrap().acks.iter().any(|a| a == id).then_some(()) }).await;
    }

    /// The payload of envelope `id`'s acknowledgement, once it came (null when it had none):
    /// what Slack shows in answer to a submitted modal.
    pub async fn ack_payload(&self, id: &str) -> Value {
        eventually(|| async { self.inner.lock().unwrap().ack_payloads.get(id).cloned() }).await
    }

    /// The `n`th (from 1) bot message whose text contains `needle`: (ts, latest content).
    pub async fn sent(&self, needle: &str, n: usize) -> (String, Value) {
        eventually(|| async {
            let inner = self.inner.lock().unwrap();
            let mut posts: Vec<(&String, &Value)> = inner.messages.iter().collect();
            posts.sort_by(|a, b| a.0.cmp(b.0));
            posts
                .into_iter()
                .filter(|(_, m)| m.to_string().contains(needle))
                .nth(n - 1)
                .map(|(ts, m)| (ts.clone(), m.clone()))
        })
        .await
    }

    /// The latest content of the bot message `ts`.
    pub fn message_at(&self, ts: &str) -> Value {
        self.inner.lock().unwrap().messages[ts].clone()
    }

    /// The ephemeral note to `user` that contains `needle`.
    pub async fn ephemeral(&self, user: &str, needle: &str) -> Value {
        eventually(|| async {
            self.calls("chat.postEphemeral").into_iter().find(|c| c["user"] == user && c.to_string().contains(needle))
        })
        .await
    }

    /// The view of the `n`th `views.open` call.
    pub async fn opened(&self, n: usize) -> Value {
        eventually(|| async { self.calls("views.open").get(n - 1).map(|c| c["view"].clone()) }).await
    }
}

/// The `value` of the button labelled `label` in a message's blocks.
pub fn button(message: &Value, label: &str) -> String {
    elements(message)
        .into_iter()
        .find(|e| e["type"] == "button" && e["text"]["text"] == label)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no button {label} in {message}"))
}

/// Every element of a message's actions blocks.
pub fn elements(message: &Value) -> Vec<Value> {
    message["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .collect()
}

async fn web_api(
    State((fake, ws_url)): State<(FakeSlack, String)>,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut inner = fake.inner.lock().unwrap();
    inner.calls.push((method.clone(), body.clone()));
    if let Some(left) = inner.fail.get_mut(&method).filter(|n| **n > 0) {
        *left -= 1;
        let limited = json!({"ok": false, "error": "ratelimited"});
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], axum::Json(limited)).into_response();
    }
    let answer = match method.as_str() {
        "auth.test" => json!({"ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "askgate",
                              "team_id": TEAM, "user_id": BOT, "bot_id": "B0000BOT"}),
        "apps.connections.open" => json!({"ok": true, "url": ws_url}),
        "chat.postMessage" => {
            inner.next_ts += 1;
            let ts = format!("{}.000100", inner.next_ts);
            let mut message = body.clone();
            message["ts"] = json!(ts);
            inner.messages.insert(ts.clone(), message);
            json!({"ok": true, "channel": body["channel"], "ts": ts,
                   "message": {"type": "message", "ts": ts, "text": body["text"], "user": BOT, "bot_id": "B0000BOT"}})
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default().to_owned();
            let Some(message) = inner.messages.get_mut(&ts) else {
                return axum::Json(json!({"ok": false, "error": "message_not_found"})).into_response();
            };
            *message = json!({"channel": body["channel"], "ts": ts, "text": body["text"], "blocks": body["blocks"]});
            json!({"ok": true, "channel": body["channel"], "ts": ts, "text": body["text"],
                   "message": {"text": body["text"], "user": BOT, "bot_id": "B0000BOT"}})
        }
        "chat.postEphemeral" => json!({"ok": true, "message_ts": "1800000009.000001"}),
        "views.open" => {
            let mut view = body["view"].clone();
            view["id"] = json!("V0000OPEN");
            view["team_id"] = json!(TEAM);
            view["hash"] = json!("h");
            json!({"ok": true, "view": view})
        }
        _ => json!({"ok": false, "error": "unknown_method"}),
    };
    axum::Json(answer).into_response()
}
