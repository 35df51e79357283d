//! A loopback WhatsApp Cloud API, for askgate's real client: `POST /{version}/{phone_number_id}/messages`
//! (records every message askgate sends, answers with a `wamid`, or with the Graph error it is
//! told to give next) and `GET /{version}/{phone_number_id}` (the business number, or 190 for
//! a refused token), written from Meta's reference; and Meta's side of the webhook: deliveries
//! of people's messages, button and list replies and reactions, signed with the test app
//! secret (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::net::TcpListener;

use crate::support::eventually;

/// The business number's id, as the Graph API names it.
pub const PHONE_NUMBER_ID: &str = "106540352242922";
/// The business number people write to.
pub const BUSINESS: &str = "15550001111";
/// The system user's token askgate is given.
pub const TOKEN: &str = "EAAG-test-token";
/// The app secret that signs deliveries.
pub const APP_SECRET: &str = "test-app-secret";
/// The webhook's verify token.
pub const VERIFY_TOKEN: &str = "test-verify-token";

/// One message askgate sent: its id and the body it posted.
#[derive(Clone, Debug)]
pub struct Sent {
    pub id: String,
    pub body: Value,
}

impl Sent {
    /// Its words: a text's body, an interactive message's body, a template's parameters.
    pub fn text(&self) -> String {
        let b = &self.body;
        match b["type"].as_str() {
            Some("text") => b["text"]["body"].as_str().unwrap_or_default().to_owned(),
            Some("interactive") => b["interactive"]["body"]["text"].as_str().unwrap_or_default().to_owned(),
            Some("template") => {
                b["template"]["components"][0]["parameters"][0]["text"].as_str().unwrap_or_default().to_owned()
            }
            _ => String::new(),
        }
    }

    /// The recipient, in E.164.
    pub fn to(&self) -> String {
        format!("+{}", self.body["to"].as_str().unwrap_or_default().trim_start_matches('+'))
    }

    /// The message it replies to, when it does.
    pub fn replying_to(&self) -> Option<&str> {
        self.body["context"]["message_id"].as_str()
    }

    /// Its reply buttons or list rows: each title and id.
    pub fn choices(&self) -> Vec<(String, String)> {
        let interactive = &self.body["interactive"];
        let buttons = interactive["action"]["buttons"].as_array().into_iter().flatten().map(|b| &b["reply"]);
        let rows = interactive["action"]["sections"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["rows"].as_array().into_iter().flatten());
        buttons
            .chain(rows)
            .map(|c| {
                (c["title"].as_str().unwrap_or_default().to_owned(), c["id"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    }
}

#[derive(Default)]
struct Inner {
    sent: Vec<Sent>,
    next: u64,
    /// Graph errors to answer the next sends with: (HTTP status, code, Retry-After).
    failures: VecDeque<(u16, i64, Option<u64>)>,
    /// Whether the token is refused (190) on every call.
    token_refused: bool,
    /// Deliveries made so far (each message's id is unique).
    delivered: u64,
}

/// The fake Graph API and Meta's webhook deliverer.
#[derive(Clone, Default)]
pub struct FakeWhatsApp {
    inner: Arc<Mutex<Inner>>,
    http: reqwest::Client,
}

impl FakeWhatsApp {
    /// Starts the Graph API on loopback; the fake and its base URL.
    pub async fn start() -> (Self, String) {
        let fake = Self::default();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/{version}/{number}/messages", post(messages))
            .route("/{version}/{number}", get(number))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, base)
    }

    /// The next sends are refused with the Graph error `code` (HTTP `status`), each once.
    pub fn fail_next(&self, status: u16, code: i64, retry_after: Option<u64>) {
        self.inner.lock().unwrap().failures.push_back((status, code, retry_after));
    }

    /// Every call is refused from now on: the token expired (190).
    pub fn refuse_token(&self) {
        self.inner.lock().unwrap().token_refused = true;
    }

    /// Everything askgate sent so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.inner.lock().unwrap().sent.clone()
    }

    /// Waits for a message askgate sent that `pick` takes.
    pub async fn wait_for(&self, pick: impl Fn(&Sent) -> bool) -> Sent {
        eventually(|| async { self.sent().into_iter().find(|s| pick(s)) }).await
    }

    /// Waits for the card (a message that replies to none) whose words contain `prompt`.
    pub async fn card(&self, prompt: &str) -> Sent {
        self.wait_for(|s| s.replying_to().is_none() && s.body["type"] != "template" && s.text().contains(prompt)).await
    }

    /// Waits for a reply to the message `to` whose words contain `needle`.
    pub async fn reply_to(&self, to: &str, needle: &str) -> Sent {
        self.wait_for(|s| s.replying_to() == Some(to) && s.text().contains(needle)).await
    }

    /// How many messages askgate sent whose words contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.sent().iter().filter(|s| s.text().contains(needle)).count()
    }

    /// A new message id, as WhatsApp makes them.
    fn wamid(&self) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.delivered += 1;
        format!("wamid.IN{:06}", inner.delivered)
    }

    /// A delivery of one message from `from` (E.164) to the business number: `message` is its
    /// type and content, to which the sender, its id and its time are added.
    pub fn delivery(&self, from: &str, message: Value) -> Value {
        let wa_id = from.trim_start_matches('+');
        let mut message = message;
        message["from"] = json!(wa_id);
        message["id"] = json!(self.wamid());
        message["timestamp"] = json!("1700000000");
        json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": BUSINESS, "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": format!("Person {}", &wa_id[wa_id.len() - 4..])}, "wa_id": wa_id}],
            "messages": [message],
        }}]}]})
    }

    /// A delivery of the status of a message askgate sent, failed with the Graph error `code`.
    pub fn failed_status(&self, id: &str, to: &str, code: i64) -> Value {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": BUSINESS, "phone_number_id": PHONE_NUMBER_ID},
            "statuses": [{"id": id, "status": "failed", "timestamp": "1700000000",
                "recipient_id": to.trim_start_matches('+'),
                "errors": [{"code": code, "title": "Re-engagement message", "message": "Re-engagement message",
                    "error_data": {"details": "Message failed to send because more than 24 hours have passed since the customer last replied to this number."}}]}],
        }}]}]})
    }

    /// Meta delivers `body` to askgate's webhook at `base`, signed with `secret` (none:
    /// unsigned); the status askgate answers (the delivery is applied before it answers).
    pub async fn deliver_signed(&self, base: &str, body: &Value, secret: Option<&str>) -> StatusCode {
        let bytes = serde_json::to_vec(body).unwrap();
        let mut request =
            self.http.post(format!("{base}/channels/whatsapp")).header("content-type", "application/json");
        if let Some(secret) = secret {
            request = request.header("x-hub-signature-256", sign(secret, &bytes));
        }
        let status = request.body(bytes).send().await.unwrap().status();
        StatusCode::from_u16(status.as_u16()).unwrap()
    }

    /// Meta delivers `body`, signed with the app secret; asserts askgate took it.
    pub async fn deliver(&self, base: &str, body: &Value) {
        assert_eq!(self.deliver_signed(base, body, Some(APP_SECRET)).await, StatusCode::OK, "{body}");
    }
}

/// `sha256=<hex HMAC-SHA256 of body under secret>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A text message.
pub fn text(body: &str) -> Value {
    json!({"type": "text", "text": {"body": body}})
}

/// A tap on the reply button (`list: false`) or list row with `id` and `title`, on the card `card`.
pub fn choice(card: &str, id: &str, title: &str, list: bool) -> Value {
    let kind = if list { "list_reply" } else { "button_reply" };
    let mut interactive = json!({"type": kind});
    interactive[kind] = json!({"id": id, "title": title});
    json!({"type": "interactive", "context": {"from": BUSINESS, "id": card}, "interactive": interactive})
}

/// A reaction `emoji` on the message `on`.
pub fn reaction(on: &str, emoji: &str) -> Value {
    json!({"type": "reaction", "reaction": {"message_id": on, "emoji": emoji}})
}

/// `message` as a reply to the message `to`.
pub fn replying(mut message: Value, to: &str) -> Value {
    message["context"] = json!({"from": BUSINESS, "id": to});
    message
}

/// A Graph error in Meta's shape.
fn graph_error(status: u16, code: i64, retry_after: Option<u64>) -> Response {
    let body = json!({"error": {"message": format!("(#{code}) refused by the fake"), "type": "OAuthException", "code": code,
        "error_data": {"messaging_product": "whatsapp", "details": "the fake was told to refuse"}, "fbtrace_id": "Afake"}});
    let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    if let Some(after) = retry_after {
        response.headers_mut().insert("retry-after", after.to_string().parse().unwrap());
    }
    response
}

/// Whether the call carries the token and the fake takes it.
fn authorised(fake: &FakeWhatsApp, headers: &HeaderMap) -> bool {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"));
    bearer && !fake.inner.lock().unwrap().token_refused
}

async fn messages(
    State(fake): State<FakeWhatsApp>,
    Path((_, number)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    if !authorised(&fake, &headers) {
        return graph_error(401, 190, None);
    }
    if number != PHONE_NUMBER_ID || body["messaging_product"] != "whatsapp" || !body["to"].is_string() {
        return graph_error(400, 100, None);
    }
    let mut inner = fake.inner.lock().unwrap();
    if let Some((status, code, after)) = inner.failures.pop_front() {
        return graph_error(status, code, after);
    }
    inner.next += 1;
    let id = format!("wamid.OUT{:06}", inner.next);
    inner.sent.push(Sent { id: id.clone(), body: body.0.clone() });
    let to = body["to"].clone();
    axum::Json(
        json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": id}]}),
    )
    .into_response()
}

async fn number(
    State(fake): State<FakeWhatsApp>,
    Path((_, number)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorised(&fake, &headers) {
        return graph_error(401, 190, None);
    }
    if number != PHONE_NUMBER_ID {
        return graph_error(400, 100, None);
    }
    axum::Json(json!({"display_phone_number": "+1 555-000-1111", "id": PHONE_NUMBER_ID})).into_response()
}
