//! A loopback server that speaks the Telegram Bot API's JSON, for the real teloxide client:
//! long-polled `getUpdates` with offsets, messages that can be edited, callback answers, 429
//! injection, and a log of every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{eventually, eventually_at};

/// The bot's user id.
pub const BOT_ID: i64 = 666;

#[derive(Default)]
struct Inner {
    next_update: i64,
    next_message: i64,
    /// Updates not yet confirmed by an offset, and updates to deliver once more.
    pending: Vec<(Value, bool)>,
    /// Every message the bot sent, by (chat, message id).
    messages: HashMap<(i64, i64), Value>,
    calls: Vec<(String, Value)>,
    fail: HashMap<String, u32>,
    /// Methods refused with an API error, as (code, description), until cleared.
    refuse: HashMap<String, (u16, String)>,
    /// Chats whose `sendMessage` calls hang until released (a platform pacing that chat).
    stalled: std::collections::HashSet<i64>,
    /// Long polls answered, and long polls the client gave up on before they were answered.
    polls_answered: u32,
    polls_abandoned: u32,
    /// Messages the bot deleted.
    deleted: Vec<(i64, i64)>,
    /// `getUpdates` hangs without answering (a network that swallows requests) until released.
    polls_hang: bool,
    /// The `language_code` each user's Telegram app reports, where a test set one.
    languages: HashMap<i64, String>,
}

/// The fake Bot API.
#[derive(Clone, Default)]
pub struct FakeTelegram {
    inner: Arc<Mutex<Inner>>,
    updated: Arc<Notify>,
    released: Arc<Notify>,
}

/// A bot call seen by the fake: its JSON body.
#[derive(Clone, Debug)]
pub struct Call {
    pub body: Value,
}

impl FakeTelegram {
    /// Starts the fake on a free loopback port; returns it with its base URL.
    pub async fn start() -> (Self, String) {
        let fake = Self::default();
        fake.inner.lock().unwrap().next_message = 1000;
        fake.inner.lock().unwrap().next_update = 1;
        let app = Router::new().route("/{bot}/{method}", any(handle)).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, url)
    }

    fn push(&self, update: Value) -> i64 {
        let id = update["update_id"].as_i64().unwrap();
        self.inner.lock().unwrap().pending.push((update, false));
        self.updated.notify_waiters();
        id
    }

    fn new_update_id(&self) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        inner.next_update += 1;
        inner.next_update
    }

    /// From now on, `user`'s updates carry `language_code` (as their Telegram app's language).
    pub fn speaks(&self, user: i64, language_code: &str) {
        self.inner.lock().unwrap().languages.insert(user, language_code.to_owned());
    }

    fn from(&self, user: i64) -> Value {
        let mut from = user_json(user);
        if let Some(code) = self.inner.lock().unwrap().languages.get(&user) {
            from["language_code"] = json!(code);
        }
        from
    }

    /// A user's text message; returns its update id.
    pub fn text(&self, user: i64, chat: i64, text: &str, reply_to: Option<i64>) -> i64 {
        let id = self.new_update_id();
        let mut message = json!({
            "message_id": 10_000 + id,
            "date": 1_795_989_700,
            "chat": chat_json(chat),
            "from": self.from(user),
            "text": text,
        });
        if text.starts_with('/') {
            let len = text.split_whitespace().next().unwrap().encode_utf16().count();
            message["entities"] = json!([{"type": "bot_command", "offset": 0, "length": len}]);
        }
        if let Some(reply_to) = reply_to {
            let replied =
                self.inner.lock().unwrap().messages.get(&(chat, reply_to)).cloned().expect("reply to a bot message");
            message["reply_to_message"] = replied;
        }
        self.push(json!({"update_id": id, "message": message}))
    }

    /// A tap on a button of a bot message; returns its update id.
    pub fn press(&self, user: i64, chat: i64, message: i64, data: &str) -> i64 {
        let id = self.new_update_id();
        let stored = self.message(chat, message);
        self.push(json!({
            "update_id": id,
            "callback_query": {
                "id": format!("cb-{id}"),
                "from": self.from(user),
                "chat_instance": format!("ci-{chat}"),
                "data": data,
                "message": stored,
            }
        }))
    }

    /// Delivers an update once more, whatever offset the bot confirmed.
    pub fn redeliver(&self, update_id: i64) {
        let mut inner = self.inner.lock().unwrap();
        let update = inner
            .calls
            .iter()
            .filter(|(m, _)| m == "getupdates.result")
            .flat_map(|(_, r)| r.as_array().cloned().unwrap_or_default())
            .find(|u| u["update_id"] == update_id)
            .expect("the update was delivered before");
        inner.pending.push((update, true));
        drop(inner);
        self.updated.notify_waiters();
    }

    /// `sendMessage` to `chat` hangs (after being logged) until [`FakeTelegram::release`].
    pub fn stall(&self, chat: i64) {
        self.inner.lock().unwrap().stalled.insert(chat);
    }

    pub fn release(&self, chat: i64) {
        self.inner.lock().unwrap().stalled.remove(&chat);
        self.released.notify_waiters();
    }

    /// The next `n` calls of `method` (lower case) get 429 with retry_after 1.
    pub fn fail_next(&self, method: &str, n: u32) {
        self.inner.lock().unwrap().fail.insert(method.to_owned(), n);
    }

    /// Every call of `method` (lower case) gets the API error `code` until [`FakeTelegram::accept`].
    pub fn refuse(&self, method: &str, code: u16, description: &str) {
        self.inner.lock().unwrap().refuse.insert(method.to_owned(), (code, description.to_owned()));
        self.updated.notify_waiters();
    }

    pub fn accept(&self, method: &str) {
        self.inner.lock().unwrap().refuse.remove(method);
    }

    /// A bot message as it stands now.
    pub fn message(&self, chat: i64, id: i64) -> Value {
        self.inner.lock().unwrap().messages.get(&(chat, id)).cloned().expect("a bot message")
    }

    /// `getUpdates` calls hang, unanswered, until [`FakeTelegram::answer_polls`].
    pub fn hang_polls(&self) {
        self.inner.lock().unwrap().polls_hang = true;
    }

    pub fn answer_polls(&self) {
        self.inner.lock().unwrap().polls_hang = false;
        self.released.notify_waiters();
    }

    /// Long polls answered so far, and how many of them the client gave up on first.
    pub fn polls(&self) -> (u32, u32) {
        let inner = self.inner.lock().unwrap();
        (inner.polls_answered, inner.polls_abandoned)
    }

    /// Whether the bot deleted this message.
    pub fn deleted(&self, chat: i64, id: i64) -> bool {
        self.inner.lock().unwrap().deleted.contains(&(chat, id))
    }

    /// Every call of `method` (lower case) so far.
    pub fn calls(&self, method: &str) -> Vec<Call> {
        let inner = self.inner.lock().unwrap();
        inner.calls.iter().filter(|(m, _)| m == method).map(|(_, b)| Call { body: b.clone() }).collect()
    }

    /// Waits for the `n`th call (from 1) of `method` and returns it.
    pub async fn call(&self, method: &str, n: usize) -> Call {
        eventually(|| async { self.calls(method).get(n - 1).cloned() }).await
    }

    /// Waits for the `n`th sent message whose text contains `needle`; returns it.
    #[track_caller]
    pub fn sent<'a>(&'a self, needle: &'a str, n: usize) -> impl Future<Output = Value> + 'a {
        eventually_at(std::panic::Location::caller(), move || async move {
            let inner = self.inner.lock().unwrap();
            let mut found: Vec<&Value> =
                inner.messages.values().filter(|m| m["text"].as_str().unwrap_or("").contains(needle)).collect();
            found.sort_by_key(|m| m["message_id"].as_i64());
            found.get(n - 1).map(|m| (*m).clone())
        })
    }

    /// Waits until `n` messages sent (`sendMessage`, not edits) contain `needle`, then asserts
    /// that exactly `n` do: "at most" holds only as far as the caller waited, so call it after
    /// an event that comes after anything more would have (a later message answered).
    #[track_caller]
    pub fn sent_exactly<'a>(&'a self, needle: &'a str, n: usize) -> impl Future<Output = Vec<Value>> + 'a {
        let at = std::panic::Location::caller();
        async move {
            let posted = || {
                let calls = self.calls("sendmessage").into_iter().map(|c| c.body);
                calls.filter(|b| b["text"].as_str().unwrap_or("").contains(needle)).collect::<Vec<_>>()
            };
            eventually_at(at, || async { (posted().len() >= n).then_some(()) }).await;
            let posted = posted();
            assert_eq!(posted.len(), n, "{needle:?} sent {} times, not {n} (at {at}): {posted:?}", posted.len());
            posted
        }
    }

    /// The callback answer for a pressed update.
    pub async fn callback_answer(&self, update_id: i64) -> Value {
        let id = format!("cb-{update_id}");
        eventually(|| async {
            self.calls("answercallbackquery")
                .into_iter()
                .find(|c| c.body["callback_query_id"] == id.as_str())
                .map(|c| c.body)
        })
        .await
    }
}

pub fn user_json(id: i64) -> Value {
    json!({"id": id, "is_bot": false, "first_name": format!("User{id}"), "username": format!("user{id}")})
}

fn chat_json(id: i64) -> Value {
    if id < 0 {
        json!({"id": id, "type": "supergroup", "title": "Group"})
    } else {
        json!({"id": id, "type": "private", "first_name": format!("User{id}")})
    }
}

fn ok(result: Value) -> Response {
    (StatusCode::OK, axum::Json(json!({"ok": true, "result": result}))).into_response()
}

async fn handle(
    State(fake): State<FakeTelegram>,
    Path((_bot, method)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let method = method.to_lowercase();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    {
        let mut inner = fake.inner.lock().unwrap();
        inner.calls.push((method.clone(), body.clone()));
        if let Some((code, description)) = inner.refuse.get(&method) {
            let status = StatusCode::from_u16(*code).unwrap();
            let body = json!({"ok": false, "error_code": code, "description": description});
            return (status, axum::Json(body)).into_response();
        }
        if let Some(n) = inner.fail.get_mut(&method).filter(|n| **n > 0) {
            *n -= 1;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                axum::Json(json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}})),
            )
                .into_response();
        }
    }
    match method.as_str() {
        "getme" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Ask", "username": "askgate_bot",
            "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false,
            "can_connect_to_business": false, "has_main_web_app": false
        })),
        "getwebhookinfo" => ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0})),
        "deletewebhook" | "setwebhook" | "answercallbackquery" => ok(json!(true)),
        "deletemessage" => {
            let key = (body["chat_id"].as_i64().unwrap_or_default(), body["message_id"].as_i64().unwrap_or_default());
            let mut inner = fake.inner.lock().unwrap();
            if inner.messages.remove(&key).is_none() {
                return (StatusCode::BAD_REQUEST, axum::Json(json!({"ok": false, "error_code": 400, "description": "Bad Request: message to delete not found"}))).into_response();
            }
            inner.deleted.push(key);
            ok(json!(true))
        }
        "getupdates" => get_updates(fake, body).await,
        "sendmessage" => {
            let chat = body["chat_id"].as_i64().unwrap_or_default();
            loop {
                let released = fake.released.notified();
                if !fake.inner.lock().unwrap().stalled.contains(&chat) {
                    break;
                }
                released.await;
            }
            let mut inner = fake.inner.lock().unwrap();
            inner.next_message += 1;
            let id = inner.next_message;
            let mut message = json!({
                "message_id": id,
                "date": 1_795_989_700,
                "chat": chat_json(chat),
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Ask", "username": "askgate_bot"},
            });
            let (text, entities) = parse_html(body["text"].as_str().unwrap_or_default());
            message["text"] = json!(text);
            if !entities.is_empty() {
                message["entities"] = json!(entities);
            }
            if let Some(markup) = body.get("reply_markup").filter(|m| m.get("inline_keyboard").is_some()) {
                message["reply_markup"] = markup.clone();
            }
            if let Some(thread) = body.get("message_thread_id") {
                message["message_thread_id"] = thread.clone();
                message["is_topic_message"] = json!(true);
            }
            inner.messages.insert((chat, id), message.clone());
            ok(message)
        }
        "editmessagetext" | "editmessagereplymarkup" => {
            let key = (body["chat_id"].as_i64().unwrap_or_default(), body["message_id"].as_i64().unwrap_or_default());
            let mut inner = fake.inner.lock().unwrap();
            let Some(message) = inner.messages.get_mut(&key) else {
                return (StatusCode::BAD_REQUEST, axum::Json(json!({"ok": false, "error_code": 400, "description": "Bad Request: message to edit not found"}))).into_response();
            };
            if method == "editmessagetext" {
                let (text, entities) = parse_html(body["text"].as_str().unwrap_or_default());
                message["text"] = json!(text);
                message["entities"] = json!(entities);
            }
            match body.get("reply_markup") {
                Some(markup) => message["reply_markup"] = markup.clone(),
                None => {
                    if let Some(m) = message.as_object_mut() {
                        m.remove("reply_markup");
                    }
                }
            }
            ok(message.clone())
        }
        other => (StatusCode::BAD_REQUEST, axum::Json(json!({"ok": false, "error_code": 400, "description": format!("Bad Request: the fake does not know {other}")}))).into_response(),
    }
}

/// Counts a long poll as abandoned unless it was answered: axum drops the handler when the
/// client goes away.
struct PollGuard {
    fake: FakeTelegram,
    answered: bool,
}

impl Drop for PollGuard {
    fn drop(&mut self) {
        let mut inner = self.fake.inner.lock().unwrap();
        if self.answered {
            inner.polls_answered += 1;
        } else {
            inner.polls_abandoned += 1;
        }
    }
}

/// Holds the poll for the timeout the client asked for, as Telegram does, unless updates come.
async fn get_updates(fake: FakeTelegram, body: Value) -> Response {
    let mut guard = PollGuard { fake: fake.clone(), answered: false };
    let response = poll(fake, body).await;
    guard.answered = true;
    response
}

async fn poll(fake: FakeTelegram, body: Value) -> Response {
    loop {
        let released = fake.released.notified();
        if !fake.inner.lock().unwrap().polls_hang {
            break;
        }
        released.await;
    }
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = fake.updated.notified();
        {
            let mut inner = fake.inner.lock().unwrap();
            // A refusal ends a poll in progress, as Telegram ends one when another starts.
            if let Some((code, description)) = inner.refuse.get("getupdates") {
                let body = json!({"ok": false, "error_code": code, "description": description});
                return (StatusCode::from_u16(*code).unwrap(), axum::Json(body)).into_response();
            }
            // An offset confirms every update below it; forced redeliveries go out regardless.
            inner.pending.retain(|(u, forced)| *forced || u["update_id"].as_i64().unwrap_or(0) >= offset);
            if !inner.pending.is_empty() {
                let mut out = Vec::new();
                for (u, forced) in inner.pending.iter_mut() {
                    out.push(u.clone());
                    *forced = false;
                }
                // Forced copies below the offset are gone once delivered.
                inner.pending.retain(|(u, _)| u["update_id"].as_i64().unwrap_or(0) >= offset);
                let result = Value::Array(out);
                inner.calls.push(("getupdates.result".to_owned(), result.clone()));
                return ok(result);
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return ok(json!([]));
        }
    }
}

/// Telegram's reading of an HTML message: the visible text and its formatting entities
/// (`bold`, `italic`, `code`, `pre`), with offsets and lengths in UTF-16 code units.
fn parse_html(html: &str) -> (String, Vec<Value>) {
    let mut text = String::new();
    let mut units = 0;
    let mut open: Vec<(&str, usize)> = Vec::new();
    let mut entities = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').map_or(rest.len(), |e| e + 1);
            let tag = rest[1..end - 1].trim();
            let kind = |name: &str| match name {
                "b" => Some("bold"),
                "i" => Some("italic"),
                "code" => Some("code"),
                "pre" => Some("pre"),
                _ => None,
            };
            if let Some(name) = tag.strip_prefix('/') {
                if let Some(at) = open.iter().rposition(|(n, _)| *n == name) {
                    let (name, offset) = open.remove(at);
                    if let Some(kind) = kind(name) {
                        entities.push(json!({"type": kind, "offset": offset, "length": units - offset}));
                    }
                }
            } else {
                open.push((tag.split_whitespace().next().unwrap_or(""), units));
            }
            rest = &rest[end..];
            continue;
        }
        let (decoded, used) = match ["&lt;", "&gt;", "&amp;", "&quot;"].iter().find(|e| rest.starts_with(**e)) {
            Some(&"&lt;") => ('<', 4),
            Some(&"&gt;") => ('>', 4),
            Some(&"&amp;") => ('&', 5),
            Some(_) => ('"', 6),
            None => (c, c.len_utf8()),
        };
        text.push(decoded);
        units += decoded.len_utf16();
        rest = &rest[used..];
    }
    (text, entities)
}
