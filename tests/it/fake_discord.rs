//! Loopback servers that speak Discord's JSON, for the real serenity client: an HTTP API
//! (gateway URL, messages, edits, interaction callbacks, commands) and a plain `ws://`
//! gateway (Hello, Identify, Ready, heartbeats, Resume, dispatches), with 429 injection,
//! forced reconnects and a log of every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::support::eventually;

pub const APP_ID: u64 = 900_000_000_000_000_001;
pub const BOT_ID: u64 = 900_000_000_000_000_002;
/// Short, so that a connection that died silently is noticed within a second or two.
const HEARTBEAT_MS: u64 = 1000;

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Bot messages by id.
    messages: HashMap<u64, Value>,
    /// (method, path, body) of every REST call.
    calls: Vec<(String, String, Value)>,
    fail: HashMap<String, u32>,
    /// The live gateway connection's outbox.
    socket: Option<mpsc::UnboundedSender<Ws>>,
    /// Events dispatched while no session was live, by sequence number: a session that
    /// resumes gets those after the last it saw, as Discord replays them; a new one, none.
    missed: Vec<(u64, String)>,
    identifies: u32,
    resumes: u32,
    seq: u64,
    /// The message each component interaction was on.
    interactions: HashMap<u64, u64>,
    /// The locale each user's Discord client reports, where a test set one (`en-US` otherwise).
    locales: HashMap<u64, String>,
}

/// The fake Discord.
#[derive(Clone, Default)]
pub struct FakeDiscord {
    inner: Arc<Mutex<Inner>>,
}

impl FakeDiscord {
    /// Starts the HTTP API and the gateway; returns the fake and the API base URL.
    pub async fn start() -> (Self, String) {
        let fake = Self::default();
        fake.inner.lock().unwrap().next_id = 700_000_000_000_000_000;
        let gateway = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws_url = format!("ws://{}", gateway.local_addr().unwrap());
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", http.local_addr().unwrap());
        let app = Router::new().route("/api/v10/{*path}", any(rest)).with_state((fake.clone(), ws_url));
        tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
        let g = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = gateway.accept().await {
                tokio::spawn(g.clone().session(stream));
            }
        });
        (fake, base)
    }

    fn next_id(&self) -> u64 {
        let mut inner = self.inner.lock().unwrap();
        inner.next_id += 1;
        inner.next_id
    }

    async fn session(self, stream: tokio::net::TcpStream) {
        let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
        let (mut sink, mut source) = ws.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Ws>();
        let _ = tx.send(Ws::Text(json!({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}}).to_string()));
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
            let Ok(payload) = serde_json::from_str::<Value>(&text) else { continue };
            match payload["op"].as_u64() {
                Some(1) => {
                    let _ = tx.send(Ws::Text(json!({"op": 11}).to_string()));
                }
                Some(2) => {
                    let mut inner = self.inner.lock().unwrap();
                    inner.identifies += 1;
                    inner.missed.clear();
                    inner.seq += 1;
                    let ready = json!({"op": 0, "s": inner.seq, "t": "READY", "d": {
                        "v": 10, "user": {"id": BOT_ID.to_string(), "username": "askgate", "discriminator": "0", "bot": true},
                        "guilds": [], "session_id": "session-1", "resume_gateway_url": "ws://127.0.0.1:1",
                        "application": {"id": APP_ID.to_string(), "flags": 0}}});
                    let _ = tx.send(Ws::Text(ready.to_string()));
                    inner.socket = Some(tx.clone());
                }
                Some(6) => {
                    let mut inner = self.inner.lock().unwrap();
                    inner.resumes += 1;
                    let seen = payload["d"]["seq"].as_u64().unwrap_or(0);
                    for (_, event) in std::mem::take(&mut inner.missed).into_iter().filter(|(s, _)| *s > seen) {
                        let _ = tx.send(Ws::Text(event));
                    }
                    inner.seq += 1;
                    let _ = tx.send(Ws::Text(json!({"op": 0, "s": inner.seq, "t": "RESUMED", "d": {}}).to_string()));
                    inner.socket = Some(tx.clone());
                }
                _ => {}
            }
        }
        writer.abort();
        let mut inner = self.inner.lock().unwrap();
        if inner.socket.as_ref().is_some_and(|s| s.same_channel(&tx)) {
            inner.socket = None;
        }
    }

    /// How many times the client identified, and resumed.
    pub fn sessions(&self) -> (u32, u32) {
        let inner = self.inner.lock().unwrap();
        (inner.identifies, inner.resumes)
    }

    /// Whether no gateway session is live: what is dispatched now waits for a resume.
    pub fn away(&self) -> bool {
        self.inner.lock().unwrap().socket.is_none()
    }

    /// Waits for a live gateway session.
    pub async fn connected(&self) {
        eventually(|| async { self.inner.lock().unwrap().socket.is_some().then_some(()) }).await;
    }

    fn dispatch(&self, kind: &str, data: Value) {
        let mut inner = self.inner.lock().unwrap();
        inner.seq += 1;
        let payload = json!({"op": 0, "s": inner.seq, "t": kind, "d": data}).to_string();
        match &inner.socket {
            Some(socket) => socket.send(Ws::Text(payload)).unwrap(),
            None => {
                let seq = inner.seq;
                inner.missed.push((seq, payload));
            }
        }
    }

    /// Closes the gateway connection the way Discord does on a server-side failure (4000).
    pub fn drop_connection(&self) {
        use tokio_tungstenite::tungstenite::protocol::CloseFrame;
        use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
        let mut inner = self.inner.lock().unwrap();
        if let Some(socket) = inner.socket.take() {
            let _ = socket
                .send(Ws::Close(Some(CloseFrame { code: CloseCode::Library(4000), reason: "unknown error".into() })));
        }
    }

    /// Asks the client to reconnect (op 7).
    pub fn request_reconnect(&self) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(socket) = inner.socket.take() {
            let _ = socket.send(Ws::Text(json!({"op": 7, "d": null}).to_string()));
        }
    }

    /// The guild's data, as the gateway sends it on connecting (`GUILD_CREATE`), with its
    /// `preferred_locale`.
    pub fn guild(&self, guild: u64, preferred_locale: &str) {
        let guild = json!({
            "id": guild.to_string(), "name": "a guild", "icon": null, "splash": null, "discovery_splash": null,
            "owner_id": "1", "afk_channel_id": null, "afk_timeout": 300, "verification_level": 0,
            "default_message_notifications": 0, "explicit_content_filter": 0, "roles": [], "emojis": [],
            "features": [], "mfa_level": 0, "application_id": null, "system_channel_id": null,
            "system_channel_flags": 0, "rules_channel_id": null, "vanity_url_code": null, "description": null,
            "banner": null, "premium_tier": 0, "preferred_locale": preferred_locale, "public_updates_channel_id": null,
            "nsfw_level": 0, "stickers": [], "premium_progress_bar_enabled": false,
            "joined_at": "2026-11-29T12:00:00.000000+00:00", "large": false, "unavailable": false,
            "member_count": 1, "voice_states": [], "members": [], "channels": [], "threads": [], "presences": [],
            "stage_instances": [], "guild_scheduled_events": [],
        });
        self.dispatch("GUILD_CREATE", guild);
    }

    /// A user's message in a guild's channel; returns its id.
    pub fn guild_message(&self, user: u64, guild: u64, channel: u64, content: &str) -> u64 {
        let id = self.next_id();
        let mut message = message_json(id, channel, user_json(user), content);
        message["guild_id"] = json!(guild.to_string());
        self.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// A user's message in a channel; returns its id.
    pub fn message(&self, user: u64, channel: u64, content: &str, reply_to: Option<u64>) -> u64 {
        let id = self.next_id();
        let mut message = message_json(id, channel, user_json(user), content);
        if let Some(reply_to) = reply_to {
            message["message_reference"] =
                json!({"message_id": reply_to.to_string(), "channel_id": channel.to_string()});
            message["referenced_message"] = self.bot_message(reply_to);
            message["type"] = json!(19);
        }
        self.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// From now on, `user`'s interactions carry `locale` (as their Discord client's language).
    pub fn speaks(&self, user: u64, locale: &str) {
        self.inner.lock().unwrap().locales.insert(user, locale.to_owned());
    }

    fn interaction(&self, kind: u8, user: u64, channel: u64, data: Value, message: Option<Value>) -> u64 {
        let id = self.next_id();
        let locale = self.inner.lock().unwrap().locales.get(&user).cloned().unwrap_or_else(|| "en-US".into());
        let mut interaction = json!({
            "id": id.to_string(), "application_id": APP_ID.to_string(), "type": kind, "data": data,
            "channel_id": channel.to_string(), "token": format!("itok-{id}"), "version": 1,
            "locale": locale, "entitlements": [], "attachment_size_limit": 8_388_608,
            "user": user_json(user),
        });
        if let Some(message) = message {
            interaction["message"] = message;
        }
        self.dispatch("INTERACTION_CREATE", interaction);
        id
    }

    /// A click on a button of a bot message; returns the interaction id.
    pub fn click(&self, user: u64, channel: u64, message: u64, custom_id: &str) -> u64 {
        let stored = self.bot_message(message);
        let id = self.interaction(3, user, channel, json!({"custom_id": custom_id, "component_type": 2}), Some(stored));
        self.inner.lock().unwrap().interactions.insert(id, message);
        id
    }

    /// The same interaction delivered again.
    pub fn redeliver_click(&self, interaction: u64, user: u64, channel: u64, message: u64, custom_id: &str) {
        let stored = self.bot_message(message);
        let data = json!({
            "id": interaction.to_string(), "application_id": APP_ID.to_string(), "type": 3,
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": channel.to_string(), "token": format!("itok-{interaction}"), "version": 1,
            "locale": "en-US", "entitlements": [], "attachment_size_limit": 8_388_608,
            "user": user_json(user), "message": stored,
        });
        self.dispatch("INTERACTION_CREATE", data);
    }

    /// A choice in a string select.
    pub fn select(&self, user: u64, channel: u64, message: u64, custom_id: &str, values: &[&str]) -> u64 {
        let stored = self.bot_message(message);
        let data = json!({"custom_id": custom_id, "component_type": 3, "values": values});
        let id = self.interaction(3, user, channel, data, Some(stored));
        self.inner.lock().unwrap().interactions.insert(id, message);
        id
    }

    /// A modal submitted with one text input.
    pub fn submit_modal(&self, user: u64, channel: u64, message: u64, custom_id: &str, text: &str) -> u64 {
        let data = json!({"custom_id": custom_id, "components": [{"type": 1, "components": [{"type": 4, "custom_id": "text", "value": text}]}]});
        let stored = self.bot_message(message);
        let id = self.interaction(5, user, channel, data, Some(stored));
        self.inner.lock().unwrap().interactions.insert(id, message);
        id
    }

    /// A modal submitted with several text inputs, each `(custom_id, value)`.
    pub fn submit_inputs(
        &self,
        user: u64,
        channel: u64,
        message: u64,
        custom_id: &str,
        inputs: &[(&str, &str)],
    ) -> u64 {
        let rows: Vec<Value> = (inputs.iter())
            .map(|(id, value)| json!({"type": 1, "components": [{"type": 4, "custom_id": id, "value": value}]}))
            .collect();
        let data = json!({"custom_id": custom_id, "components": rows});
        let stored = self.bot_message(message);
        let id = self.interaction(5, user, channel, data, Some(stored));
        self.inner.lock().unwrap().interactions.insert(id, message);
        id
    }

    /// The `/run` application command.
    pub fn run_command(&self, user: u64, channel: u64, function: &str) -> u64 {
        let data = json!({"id": "1", "name": "run", "type": 1, "options": [{"name": "function", "type": 3, "value": function}]});
        self.interaction(2, user, channel, data, None)
    }

    /// The next `n` message sends and edits get 429.
    pub fn fail_next(&self, n: u32) {
        self.inner.lock().unwrap().fail.insert("messages".into(), n);
    }

    pub fn bot_message(&self, id: u64) -> Value {
        self.inner.lock().unwrap().messages.get(&id).cloned().expect("a bot message")
    }

    /// Every bot message as it stands now, in the order they were sent.
    pub fn messages(&self) -> Vec<Value> {
        let mut all: Vec<Value> = self.inner.lock().unwrap().messages.values().cloned().collect();
        all.sort_by_key(|m| m["id"].as_str().unwrap().parse::<u64>().unwrap());
        all
    }

    /// Waits for the `n`th bot message whose content contains `needle`.
    pub async fn sent(&self, needle: &str, n: usize) -> Value {
        eventually(|| async {
            let inner = self.inner.lock().unwrap();
            let mut found: Vec<&Value> =
                inner.messages.values().filter(|m| m["content"].as_str().unwrap_or("").contains(needle)).collect();
            found.sort_by_key(|m| m["id"].as_str().unwrap().parse::<u64>().unwrap());
            found.get(n - 1).map(|m| (*m).clone())
        })
        .await
    }

    /// Waits until `n` messages posted (not edits) contain `needle`, then asserts that exactly
    /// `n` do: "at most" holds only as far as the caller waited, so call it after an event that
    /// comes after anything more would have (a later message answered).
    #[track_caller]
    pub fn sent_exactly<'a>(&'a self, needle: &'a str, n: usize) -> impl std::future::Future<Output = Vec<Value>> + 'a {
        let at = std::panic::Location::caller();
        async move {
            let posted = || {
                let calls = self.calls("/messages").into_iter();
                let posts = calls.filter(|(method, _, _)| method == "POST");
                posts
                    .map(|(_, _, body)| body)
                    .filter(|b| b["content"].as_str().unwrap_or("").contains(needle))
                    .collect::<Vec<_>>()
            };
            crate::support::eventually_at(at, || async { (posted().len() >= n).then_some(()) }).await;
            let posted = posted();
            assert_eq!(posted.len(), n, "{needle:?} posted {} times, not {n} (at {at}): {posted:?}", posted.len());
            posted
        }
    }

    /// Every REST call whose path contains `needle`, as (method, path, body).
    pub fn calls(&self, needle: &str) -> Vec<(String, String, Value)> {
        self.inner.lock().unwrap().calls.iter().filter(|(_, p, _)| p.contains(needle)).cloned().collect()
    }

    /// The response to an interaction.
    pub async fn callback(&self, interaction: u64) -> Value {
        let path = format!("interactions/{interaction}/");
        eventually(|| async { self.calls(&path).into_iter().next().map(|(_, _, body)| body) }).await
    }
}

pub fn user_json(id: u64) -> Value {
    json!({"id": id.to_string(), "username": format!("user{id}"), "discriminator": "0", "global_name": null, "avatar": null})
}

fn message_json(id: u64, channel: u64, author: Value, content: &str) -> Value {
    json!({
        "id": id.to_string(), "channel_id": channel.to_string(), "author": author, "content": content,
        "timestamp": "2026-11-29T12:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0, "components": [],
    })
}

async fn rest(
    State((fake, ws_url)): State<(FakeDiscord, String)>,
    method: Method,
    Path(path): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    {
        let mut inner = fake.inner.lock().unwrap();
        inner.calls.push((method.to_string(), path.clone(), body.clone()));
        if path.contains("/messages")
            && (method == Method::POST || method == Method::PATCH)
            && let Some(n) = inner.fail.get_mut("messages").filter(|n| **n > 0)
        {
            *n -= 1;
            let limited = json!({"message": "You are being rate limited.", "retry_after": 0.2, "global": false});
            return (StatusCode::TOO_MANY_REQUESTS, axum::Json(limited)).into_response();
        }
    }
    let parts: Vec<&str> = path.split('/').collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["gateway"]) => axum::Json(json!({"url": ws_url})).into_response(),
        ("GET", ["gateway", "bot"]) => axum::Json(json!({"url": ws_url, "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}}))
        .into_response(),
        ("PUT", ["applications", _, "commands"]) => axum::Json(json!([])).into_response(),
        ("POST", ["interactions", interaction, _, "callback"]) => {
            // UPDATE_MESSAGE edits the message the interaction came from.
            if body["type"] == 7 {
                let mut inner = fake.inner.lock().unwrap();
                let message = interaction.parse().ok().and_then(|i: u64| inner.interactions.get(&i).copied());
                if let Some(message) = message.and_then(|m| inner.messages.get_mut(&m)) {
                    message["content"] = body["data"]["content"].clone();
                    message["components"] = body["data"]["components"].clone();
                }
            }
            StatusCode::NO_CONTENT.into_response()
        }
        ("POST", ["channels", channel, "messages"]) => {
            let id = fake.next_id();
            let mut message = message_json(
                id,
                channel.parse().unwrap_or(0),
                json!({"id": BOT_ID.to_string(), "username": "askgate", "discriminator": "0", "bot": true}),
                body["content"].as_str().unwrap_or(""),
            );
            message["components"] = body.get("components").cloned().unwrap_or(json!([]));
            fake.inner.lock().unwrap().messages.insert(id, message.clone());
            axum::Json(message).into_response()
        }
        ("PATCH", ["channels", _, "messages", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let mut inner = fake.inner.lock().unwrap();
            let Some(message) = inner.messages.get_mut(&id) else {
                return (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Unknown Message", "code": 10008})))
                    .into_response();
            };
            if let Some(content) = body.get("content") {
                message["content"] = content.clone();
            }
            if let Some(components) = body.get("components") {
                message["components"] = components.clone();
            }
            axum::Json(message.clone()).into_response()
        }
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": format!("the fake does not know {method} {path}"), "code": 0})),
        )
            .into_response(),
    }
}
