//! A loopback Google Chat, written from the Chat API's reference: `spaces.messages.create` and
//! `spaces.messages.patch` (`updateMask`) as the app, each call's bearer token one the token
//! endpoint issued; the OAuth token endpoint, which takes a service account's signed assertion
//! (the JWT bearer grant) and verifies it with the public key of the account the test made;
//! the JWKS Chat's request tokens are signed under; and Chat's side of the app's HTTP
//! endpoint: interaction events posted to askgate with a bearer token signed by that key, and
//! the synchronous response applied as Chat does (a reply, the clicked card updated in place,
//! a note only its viewer sees). 429s on demand; a log of every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::signing::{TestKey, now_secs};
use crate::support::eventually;

/// The app's Cloud project number: the audience of Chat's tokens.
pub const PROJECT: &str = "1234567890";
/// Chat's own account: the issuer of its tokens.
pub const CHAT: &str = "chat@system.gserviceaccount.com";
/// The app's service account.
pub const ACCOUNT: &str = "askgate@askgate-test.iam.gserviceaccount.com";
/// The space most tests talk in.
pub const SPACE: &str = "spaces/AAAATEST";

/// The keys of the tests (made once per test process): Chat's, which signs its requests and
/// is published at `/jwks`; and another, the app's service account's, whose public half the
/// token endpoint verifies assertions with (and, signing under the name of Chat's key, a
/// forger's).
pub fn keys() -> &'static (TestKey, TestKey) {
    TestKey::pair()
}

/// The claims of `assertion` when the service account's key signed it for `audience`.
fn verify_assertion(assertion: &str, audience: &str) -> Result<Value, String> {
    let jwk = serde_json::from_value(keys().1.jwk.clone()).map_err(|e| e.to_string())?;
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[audience]);
    jsonwebtoken::decode::<Value>(assertion, &key, &validation).map(|t| t.claims).map_err(|e| e.to_string())
}

/// What the fake keeps.
#[derive(Default)]
struct Inner {
    next: u64,
    /// Every message in a space by name, as it reads now (the app's and people's).
    messages: HashMap<String, Value>,
    /// Names in the order the messages were made.
    order: Vec<String>,
    /// (`create` / `patch` / `token`, body) of every call.
    calls: Vec<(String, Value)>,
    /// 429s still to answer, by call.
    fail: HashMap<String, u32>,
    /// Whether the token endpoint refuses the key.
    refuse_key: bool,
    /// Access tokens issued.
    tokens: Vec<String>,
    /// How many of them, the first ones, the API no longer takes.
    revoked: usize,
    /// Private notes: (viewer, text).
    private: Vec<(String, String)>,
}

/// The fake Google Chat.
#[derive(Clone, Default)]
pub struct FakeGoogleChat {
    inner: Arc<Mutex<Inner>>,
    /// Its base URL (the Chat API's, the token endpoint's and the JWKS's).
    pub base: String,
}

impl FakeGoogleChat {
    /// Starts the fake on a port of its own.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Self { inner: Arc::default(), base: format!("http://{}", listener.local_addr().unwrap()) };
        let app = Router::new()
            .route("/v1/spaces/{space}/messages", post(create))
            .route("/v1/spaces/{space}/messages/{id}", patch(update))
            .route("/token", post(token))
            .route("/jwks", get(jwks))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// The service account's JSON key, its token endpoint this fake's.
    pub fn service_account(&self) -> String {
        json!({"type": "service_account", "project_id": "askgate-test", "private_key_id": keys().1.kid,
            "private_key": keys().1.pem, "client_email": ACCOUNT, "client_id": "1",
            "token_uri": format!("{}/token", self.base)})
        .to_string()
    }

    /// Makes the API refuse (401) every token issued so far, as when they are revoked before
    /// they expire; how many were issued.
    pub fn revoke_tokens(&self) -> usize {
        let mut inner = self.inner.lock().unwrap();
        inner.revoked = inner.tokens.len();
        inner.revoked
    }

    /// The next `n` calls of `call` (`create`, `patch`, `token`) are answered 429.
    pub fn fail(&self, call: &str, n: u32) {
        self.inner.lock().unwrap().fail.insert(call.to_owned(), n);
    }

    /// From now on the token endpoint refuses the key (or takes it again).
    pub fn refuse_key(&self, refuse: bool) {
        self.inner.lock().unwrap().refuse_key = refuse;
    }

    /// The bodies of the calls of `call` so far.
    pub fn calls(&self, call: &str) -> Vec<Value> {
        self.inner.lock().unwrap().calls.iter().filter(|(c, _)| c == call).map(|(_, b)| b.clone()).collect()
    }

    /// The message `name` as it reads now.
    pub fn message(&self, name: &str) -> Value {
        self.inner.lock().unwrap().messages.get(name).cloned().unwrap_or(Value::Null)
    }

    /// The app's messages, oldest first.
    pub fn messages(&self) -> Vec<Value> {
        let inner = self.inner.lock().unwrap();
        inner
            .order
            .iter()
            .filter_map(|n| inner.messages.get(n))
            .filter(|m| m["sender"]["type"] == "BOT")
            .cloned()
            .collect()
    }

    /// Waits for the app's first message whose words contain `needle`.
    pub async fn sent(&self, needle: &str) -> Value {
        eventually(|| async { self.messages().into_iter().find(|m| words(m).contains(needle)) }).await
    }

    /// The private notes `viewer` got.
    pub fn private(&self, viewer: &str) -> Vec<String> {
        let inner = self.inner.lock().unwrap();
        inner.private.iter().filter(|(v, _)| v == viewer).map(|(_, t)| t.clone()).collect()
    }

    fn name(&self, space: &str) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.next += 1;
        format!("{space}/messages/m{}", inner.next)
    }

    fn keep(&self, message: Value) {
        let mut inner = self.inner.lock().unwrap();
        let name = message["name"].as_str().unwrap().to_owned();
        inner.order.push(name.clone());
        inner.messages.insert(name, message);
    }

    /// A token Chat would send with a request to the app: signed by Chat's key for `audience`.
    pub fn chat_token(audience: &str) -> String {
        let now = now_secs();
        keys().0.sign(&json!({"iss": CHAT, "aud": audience, "iat": now, "exp": now + 3600}))
    }

    /// Posts `event` to askgate at `askgate` (its base URL) with `bearer`, as Chat does, and
    /// applies the synchronous response as Chat would; the status and the response.
    pub async fn deliver_with(&self, askgate: &str, bearer: Option<&str>, event: &Value) -> (StatusCode, Value) {
        let mut request = reqwest::Client::new()
            .post(format!("{askgate}/channels/google-chat"))
            .header("user-agent", "Google-Dynamite")
            .json(event);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let response = request.send().await.unwrap();
        let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            self.respond(event, &body);
        }
        (status, body)
    }

    /// Posts `event` signed as Chat signs for the app's project.
    pub async fn deliver(&self, askgate: &str, event: &Value) -> (StatusCode, Value) {
        let (status, body) = self.deliver_with(askgate, Some(&Self::chat_token(PROJECT)), event).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        (status, body)
    }

    /// What Chat does with an app's synchronous response to `event`.
    fn respond(&self, event: &Value, response: &Value) {
        let kind = response["actionResponse"]["type"].as_str().unwrap_or("NEW_MESSAGE");
        if kind == "UPDATE_MESSAGE" {
            let name = event["message"]["name"].as_str().unwrap();
            let mut inner = self.inner.lock().unwrap();
            let message = inner.messages.get_mut(name).expect("the clicked message exists");
            for field in ["text", "cardsV2"] {
                if let Some(value) = response.get(field) {
                    message[field] = value.clone();
                }
            }
            return;
        }
        let has_words = response.get("text").is_some_and(|t| t.as_str().is_some_and(|t| !t.is_empty()))
            || response.get("cardsV2").is_some();
        if !has_words {
            return;
        }
        if let Some(viewer) = response["privateMessageViewer"]["name"].as_str() {
            let text = response["text"].as_str().unwrap_or_default().to_owned();
            self.inner.lock().unwrap().private.push((viewer.to_owned(), text));
            return;
        }
        let space = event["space"]["name"].as_str().unwrap();
        let mut message = response.clone();
        message["name"] = json!(self.name(space));
        message["sender"] = json!({"name": "users/app", "type": "BOT"});
        message["synchronous"] = json!(true);
        self.keep(message);
    }

    /// A person's message event: `text` from `user` in `space` (with the mention of the app
    /// Chat adds in a space); its name.
    pub fn message_event(&self, user: &Value, space: &str, text: &str) -> Value {
        let name = self.name(space);
        let event = json!({"type": "MESSAGE", "eventTime": "2026-12-06T22:00:00.000000Z",
            "space": {"name": space, "type": "ROOM", "spaceType": "SPACE", "displayName": "askgate test"},
            "message": {"name": name, "sender": user, "createTime": "2026-12-06T22:00:00.000000Z",
                "text": format!("@askgate {text}"), "argumentText": format!(" {text}"),
                "thread": {"name": format!("{space}/threads/t{}", name.rsplit('m').next().unwrap())},
                "annotations": [{"type": "USER_MENTION", "startIndex": 0, "length": 8,
                    "userMention": {"user": {"name": "users/app", "type": "BOT"}, "type": "MENTION"}}]},
            "user": user, "common": {"userLocale": user["locale"].as_str().unwrap_or("en"), "hostApp": "CHAT"}});
        let mut kept = event["message"].clone();
        kept["sender"]["type"] = json!("HUMAN");
        self.keep(kept);
        event
    }

    /// A click by `user` on the button carrying `command` of the card `message`.
    pub fn click_event(user: &Value, space: &str, message: &str, command: &str) -> Value {
        json!({"type": "CARD_CLICKED", "eventTime": "2026-12-06T22:00:01.000000Z",
            "space": {"name": space, "type": "ROOM", "spaceType": "SPACE"},
            "message": {"name": message, "sender": {"name": "users/app", "type": "BOT"}},
            "user": user,
            "action": {"actionMethodName": "answer", "parameters": [{"key": "command", "value": command}]},
            "common": {"userLocale": user["locale"].as_str().unwrap_or("en"), "hostApp": "CHAT",
                "invokedFunction": "answer", "parameters": {"command": command}}})
    }
}

/// A person as Chat's events name them.
pub fn person(id: &str, name: &str, locale: &str) -> Value {
    json!({"name": format!("users/{id}"), "displayName": name, "email": format!("{}@example.com", name.to_lowercase()),
        "type": "HUMAN", "domainId": "d1", "locale": locale})
}

/// A message's words: its text and its cards' paragraphs (without the markup).
pub fn words(message: &Value) -> String {
    let mut found = vec![message["text"].as_str().unwrap_or_default().to_owned()];
    for widget in widgets(message) {
        if let Some(text) = widget["textParagraph"]["text"].as_str() {
            found.push(strip_markup(text));
        }
    }
    found.join("\n")
}

fn widgets(message: &Value) -> Vec<Value> {
    let cards = message["cardsV2"].as_array().cloned().unwrap_or_default();
    cards
        .iter()
        .flat_map(|c| c["card"]["sections"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["widgets"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A message's buttons: (label, command).
pub fn buttons(message: &Value) -> Vec<(String, String)> {
    widgets(message)
        .iter()
        .flat_map(|w| w["buttonList"]["buttons"].as_array().cloned().unwrap_or_default())
        .map(|b| {
            let command = b["onClick"]["action"]["parameters"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["key"] == "command"))
                .and_then(|p| p["value"].as_str())
                .unwrap_or_default()
                .to_owned();
            (b["text"].as_str().unwrap_or_default().to_owned(), command)
        })
        .collect()
}

/// Text of a card's paragraph as people read it: its tags gone, its entities read.
fn strip_markup(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    let html = html.replace("<br>", "\n");
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ").map(str::to_owned)
}

fn error(code: StatusCode, status: &str, message: &str) -> Response {
    (code, axum::Json(json!({"error": {"code": code.as_u16(), "message": message, "status": status}}))).into_response()
}

/// Checks the call's token and its 429s; records it. The refusal, if any.
fn refusal(fake: &FakeGoogleChat, headers: &HeaderMap, call: &str, body: &Value) -> Option<Response> {
    let mut inner = fake.inner.lock().unwrap();
    if !bearer(headers).is_some_and(|t| inner.tokens[inner.revoked..].contains(&t)) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials.",
        ));
    }
    inner.calls.push((call.to_owned(), body.clone()));
    if let Some(left) = inner.fail.get_mut(call).filter(|n| **n > 0) {
        *left -= 1;
        let mut limited = error(StatusCode::TOO_MANY_REQUESTS, "RESOURCE_EXHAUSTED", "Quota exceeded.");
        limited.headers_mut().insert("retry-after", "1".parse().unwrap());
        return Some(limited);
    }
    None
}

async fn create(
    State(fake): State<FakeGoogleChat>,
    Path(space): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if let Some(refusal) = refusal(&fake, &headers, "create", &body) {
        return refusal;
    }
    let space = format!("spaces/{space}");
    let mut message = body.clone();
    message["name"] = json!(fake.name(&space));
    message["sender"] = json!({"name": "users/app", "type": "BOT"});
    message["space"] = json!({"name": space});
    if message.get("thread").is_none() {
        message["thread"] = json!({"name": format!("{space}/threads/new")});
    }
    if let Some(viewer) = body["privateMessageViewer"]["name"].as_str() {
        let text = body["text"].as_str().unwrap_or_default().to_owned();
        fake.inner.lock().unwrap().private.push((viewer.to_owned(), text));
    } else {
        fake.keep(message.clone());
    }
    axum::Json(message).into_response()
}

async fn update(
    State(fake): State<FakeGoogleChat>,
    Path((space, id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut call = body.clone();
    call["updateMask"] = json!(query.get("updateMask"));
    call["name"] = json!(format!("spaces/{space}/messages/{id}"));
    if let Some(refusal) = refusal(&fake, &headers, "patch", &call) {
        return refusal;
    }
    let Some(mask) = query.get("updateMask") else {
        return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "updateMask is required.");
    };
    let name = format!("spaces/{space}/messages/{id}");
    let mut inner = fake.inner.lock().unwrap();
    let Some(message) = inner.messages.get_mut(&name) else {
        return error(StatusCode::NOT_FOUND, "NOT_FOUND", "Message not found.");
    };
    for field in mask.split(',').map(str::trim) {
        match field {
            "text" | "cardsV2" | "cards_v2" => {
                let key = if field == "text" { "text" } else { "cardsV2" };
                message[key] = body.get(key).cloned().unwrap_or(Value::Null);
            }
            other => return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", &format!("Unknown field {other}.")),
        }
    }
    axum::Json(message.clone()).into_response()
}

async fn token(State(fake): State<FakeGoogleChat>, body: String) -> Response {
    let form: HashMap<String, String> = serde_urlencoded::from_str(&body).unwrap_or_default();
    let mut inner = fake.inner.lock().unwrap();
    inner.calls.push(("token".to_owned(), json!(form)));
    if let Some(left) = inner.fail.get_mut("token").filter(|n| **n > 0) {
        *left -= 1;
        return (StatusCode::TOO_MANY_REQUESTS, axum::Json(json!({"error": "rate_limit_exceeded"}))).into_response();
    }
    let refuse = |words: &str| {
        (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant", "error_description": words})))
            .into_response()
    };
    if form.get("grant_type").map(String::as_str) != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "unsupported_grant_type"}))).into_response();
    }
    if inner.refuse_key {
        return refuse("Invalid JWT Signature.");
    }
    let Some(assertion) = form.get("assertion") else { return refuse("No assertion.") };
    let claims = match verify_assertion(assertion, &format!("{}/token", fake.base)) {
        Ok(claims) => claims,
        Err(e) => return refuse(&format!("Invalid JWT Signature: {e}")),
    };
    if claims["iss"] != ACCOUNT || claims["scope"] != "https://www.googleapis.com/auth/chat.bot" {
        return refuse("Invalid JWT: the account or the scope is wrong.");
    }
    let token = format!("ya29.fake-{}", inner.tokens.len() + 1);
    inner.tokens.push(token.clone());
    axum::Json(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})).into_response()
}

async fn jwks() -> Response {
    axum::Json(json!({"keys": [keys().0.jwk]})).into_response()
}
