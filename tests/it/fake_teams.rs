//! A loopback double of the Bot Framework, written from its public reference, for askgate's
//! real Teams client: the Bot Connector REST API v3 (activities sent, replied to and updated in
//! place, personal chats started; 429 with `Retry-After` on demand; every call recorded), the
//! token endpoint of the client-credentials grant (refusing a wrong password), and the OpenID
//! metadata with its keys (an RSA key the test makes, endorsed for `msteams`, and another
//! endorsed for another channel only). It
//! delivers activities to askgate as the Bot Framework does: POSTed, with a bearer JWT signed
//! by that key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::signing::{TestKey, now_secs as now};
use crate::support::eventually;

/// The bot's Microsoft app id and password.
pub const APP_ID: &str = "c9e8c047-2a74-40a2-b28a-b162d5f5327c";
pub const APP_PASSWORD: &str = "app-password";
/// The tenant everyone here is in.
pub const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
/// The issuer of the Bot Framework's tokens.
const ISSUER: &str = "https://api.botframework.com";

/// The Bot Framework's signing key for Teams (the test's), and another: published for another
/// channel only, and a forger's when it signs under the first one's id.
fn keys_pair() -> (&'static TestKey, &'static TestKey) {
    let (published, forger) = TestKey::pair();
    (published, forger)
}

/// One call askgate made to the connector: its method, path (decoded) and body.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// The bot's messages by activity id: the latest content.
    messages: HashMap<String, Value>,
    calls: Vec<Call>,
    /// 429s still to answer.
    busy: u32,
    /// Tokens handed out.
    tokens: Vec<String>,
    /// How many of them, the first ones, the connector no longer takes.
    revoked: usize,
    /// Whether the token endpoint answers at all.
    token_down: bool,
    /// Whether the OpenID metadata answers at all.
    keys_down: bool,
}

/// The fake Bot Framework.
#[derive(Clone)]
pub struct FakeTeams {
    inner: Arc<Mutex<Inner>>,
    /// Its base URL, which is also the `serviceUrl` of the activities it delivers.
    pub base: String,
    http: reqwest::Client,
}

/// What a delivery to askgate should carry, to test the door.
#[derive(Clone, Debug)]
pub enum Signed {
    /// Signed as the Bot Framework signs.
    Properly,
    /// No Authorization header.
    Unsigned,
    /// Signed by a key nobody published.
    Forged,
    /// Signed for another bot.
    OtherAudience,
    /// Signed by a published key that does not endorse Teams (`msteams`).
    NotEndorsed,
    /// Naming another connector than the activity's `serviceUrl`.
    OtherServiceUrl,
}

impl FakeTeams {
    /// Starts it on loopback.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        let fake = Self { inner: Arc::default(), base, http: reqwest::Client::new() };
        keys_pair();
        let app = Router::new()
            .route("/openid", get(openid))
            .route("/keys", get(keys))
            .route("/token", post(token))
            .route("/v3/conversations", post(start_chat))
            .route("/v3/conversations/{conversation}/activities", post(send))
            .route("/v3/conversations/{conversation}/activities/{id}", post(reply).put(update))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// The `[channels.teams]` keys that aim askgate at this fake.
    pub fn section(&self) -> String {
        format!("openid_url = \"{0}openid\"\ntoken_url = \"{0}token\"\n", self.base)
    }

    /// The next `n` connector calls are answered 429 with `Retry-After: 1`.
    pub fn busy(&self, n: u32) {
        self.inner.lock().unwrap().busy = n;
    }

    /// Makes the OpenID metadata stop answering (a 503) or answer again.
    pub fn keys_down(&self, down: bool) {
        self.inner.lock().unwrap().keys_down = down;
    }

    /// Makes the token endpoint stop answering (a 503) or answer again.
    pub fn token_down(&self, down: bool) {
        self.inner.lock().unwrap().token_down = down;
    }

    /// Every connector call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// Makes the connector refuse (401) every token handed out so far, as when they are
    /// revoked before they expire.
    pub fn revoke_tokens(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.revoked = inner.tokens.len();
    }

    /// How many tokens were handed out.
    pub fn tokens(&self) -> usize {
        self.inner.lock().unwrap().tokens.len()
    }

    /// The bot's message `id` as it reads now.
    pub fn message(&self, id: &str) -> Value {
        self.inner.lock().unwrap().messages.get(id).cloned().unwrap_or_default()
    }

    /// Waits for the first message the bot sent (or updated) whose words contain `needle`:
    /// its activity id, conversation and content.
    pub async fn sent(&self, needle: &str) -> (String, String, Value) {
        eventually(|| async {
            let calls = self.calls();
            calls.iter().filter(|c| c.method == "POST" && c.path.ends_with("/activities")).find_map(|c| {
                let id = c.body["id"].as_str()?.to_owned();
                let now = self.message(&id);
                words(&now).contains(needle).then(|| (id, conversation_of(&c.path), now))
            })
        })
        .await
    }

    /// Waits for a reply (to any activity) whose words contain `needle`.
    pub async fn replied(&self, needle: &str) -> Value {
        eventually(|| async {
            self.calls()
                .into_iter()
                .find(|c| c.body.get("replyToId").is_some() && words(&c.body).contains(needle))
                .map(|c| c.body)
        })
        .await
    }

    /// An activity from `from` (an AAD object id, named `name`) in `conversation`.
    pub fn activity(&self, conversation: &str, personal: bool, from: &str, name: &str) -> Value {
        let id = {
            let mut inner = self.inner.lock().unwrap();
            inner.next += 1;
            format!("1700000{:06}", inner.next)
        };
        json!({
            "type": "message",
            "id": id,
            "timestamp": "2026-12-06T18:33:23.8Z",
            "serviceUrl": self.base,
            "channelId": "msteams",
            "from": {"id": format!("29:{from}"), "name": name, "aadObjectId": from},
            "conversation": {"id": conversation, "tenantId": TENANT,
                "conversationType": if personal { "personal" } else { "groupChat" }},
            "recipient": {"id": format!("28:{APP_ID}"), "name": "askgate"},
            "locale": "en-US",
            "channelData": {"tenant": {"id": TENANT}},
        })
    }

    /// A message saying `text`.
    pub fn message_activity(&self, conversation: &str, personal: bool, from: &str, name: &str, text: &str) -> Value {
        let mut activity = self.activity(conversation, personal, from, name);
        activity["textFormat"] = json!("plain");
        activity["text"] = json!(text);
        activity
    }

    /// A tap on a card's `Action.Submit` whose data is `data`.
    pub fn tap_activity(&self, conversation: &str, personal: bool, from: &str, name: &str, data: &Value) -> Value {
        let mut activity = self.activity(conversation, personal, from, name);
        activity["value"] = data.clone();
        activity
    }

    /// Posts `activity` to askgate's messaging endpoint at `askgate`, signed as `signed` says;
    /// askgate's answer's status.
    pub async fn deliver(&self, askgate: &str, activity: &Value, signed: Signed) -> StatusCode {
        let service_url = activity["serviceUrl"].as_str().unwrap_or_default().to_owned();
        let mut claims = json!({"iss": ISSUER, "aud": APP_ID, "exp": now() + 3600, "nbf": now() - 10,
            "serviceurl": service_url});
        let (published, forger) = keys_pair();
        match signed {
            Signed::OtherAudience => claims["aud"] = json!("another-bot"),
            Signed::OtherServiceUrl => claims["serviceurl"] = json!("https://elsewhere.example/"),
            _ => {}
        }
        let mut request = self.http.post(format!("{askgate}/channels/teams")).json(activity);
        let token = match signed {
            Signed::Unsigned => None,
            // The published key's id on a token it did not sign.
            Signed::Forged => Some(askgate::channel::jwt::sign(&forger.pem, Some(&published.kid), &claims).unwrap()),
            Signed::NotEndorsed => Some(forger.sign(&claims)),
            _ => Some(published.sign(&claims)),
        };
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let status = request.send().await.unwrap().status();
        StatusCode::from_u16(status.as_u16()).unwrap()
    }
}

/// A card's or a message's words: its text, and its text blocks with their escapes undone.
pub fn words(activity: &Value) -> String {
    let mut out: Vec<String> = activity["text"].as_str().map(str::to_owned).into_iter().collect();
    for attachment in activity["attachments"].as_array().into_iter().flatten() {
        for block in attachment["content"]["body"].as_array().into_iter().flatten() {
            out.push(unescape(block["text"].as_str().unwrap_or_default()));
        }
    }
    out.join("\n")
}

/// A card's actions: each one's title and the command its data carries.
pub fn actions(activity: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for attachment in activity["attachments"].as_array().into_iter().flatten() {
        for action in attachment["content"]["actions"].as_array().into_iter().flatten() {
            assert_eq!(action["type"], "Action.Submit", "{action}");
            let title = action["title"].as_str().unwrap_or_default().to_owned();
            out.push((title, action["data"]["askgate"].as_str().unwrap_or_default().to_owned()));
        }
    }
    out
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// The conversation of a connector path `/v3/conversations/<id>/activities…`.
fn conversation_of(path: &str) -> String {
    path.trim_start_matches("/v3/conversations/").split("/activities").next().unwrap_or_default().to_owned()
}

async fn openid(State(fake): State<FakeTeams>) -> Response {
    if fake.inner.lock().unwrap().keys_down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    axum::Json(json!({
        "issuer": ISSUER,
        "authorization_endpoint": "https://invalid.botframework.com",
        "jwks_uri": format!("{}keys", fake.base),
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
    }))
    .into_response()
}

async fn keys() -> Response {
    let (teams, other) = keys_pair();
    let (mut teams, mut other) = (teams.jwk.clone(), other.jwk.clone());
    teams["endorsements"] = json!(["msteams", "skype"]);
    // Published, but for another channel only.
    other["endorsements"] = json!(["skype"]);
    axum::Json(json!({"keys": [teams, other]})).into_response()
}

async fn token(State(fake): State<FakeTeams>, axum::Form(form): axum::Form<HashMap<String, String>>) -> Response {
    let mut inner = fake.inner.lock().unwrap();
    if inner.token_down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let field = |k: &str| form.get(k).map(String::as_str);
    if field("grant_type") != Some("client_credentials")
        || field("scope") != Some("https://api.botframework.com/.default")
    {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_request"}))).into_response();
    }
    if field("client_id") != Some(APP_ID) || field("client_secret") != Some(APP_PASSWORD) {
        let refusal =
            json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."});
        return (StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response();
    }
    let token = format!("bot-token-{}", inner.tokens.len() + 1);
    inner.tokens.push(token.clone());
    axum::Json(json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}))
        .into_response()
}

impl FakeTeams {
    /// Records a connector call, after checking its token and whether it is to be answered 429.
    fn call(&self, headers: &HeaderMap, method: &str, path: String, body: &Value) -> Result<String, Box<Response>> {
        let mut inner = self.inner.lock().unwrap();
        let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if !token.is_some_and(|t| inner.tokens[inner.revoked..].iter().any(|issued| issued == t)) {
            let refusal = json!({"error": {"code": "Unauthorized"}});
            return Err(Box::new((StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response()));
        }
        if inner.busy > 0 {
            inner.busy -= 1;
            let busy = json!({"error": {"code": "TooManyRequests", "message": "slow down"}});
            return Err(Box::new(
                (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], axum::Json(busy)).into_response(),
            ));
        }
        inner.next += 1;
        let id = format!("1:bot{}", inner.next);
        let mut body = body.clone();
        if method == "POST" && body.get("replyToId").is_none() && path.ends_with("/activities") {
            body["id"] = json!(id);
        }
        inner.calls.push(Call { method: method.to_owned(), path, body });
        Ok(id)
    }
}

async fn send(
    State(fake): State<FakeTeams>,
    Path(conversation): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let path = format!("/v3/conversations/{conversation}/activities");
    match fake.call(&headers, "POST", path, &body) {
        Ok(id) => {
            fake.inner.lock().unwrap().messages.insert(id.clone(), body);
            (StatusCode::CREATED, axum::Json(json!({"id": id}))).into_response()
        }
        Err(refusal) => *refusal,
    }
}

async fn reply(
    State(fake): State<FakeTeams>,
    Path((conversation, to)): Path<(String, String)>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let path = format!("/v3/conversations/{conversation}/activities/{to}");
    match fake.call(&headers, "POST", path, &body) {
        Ok(id) => (StatusCode::CREATED, axum::Json(json!({"id": id}))).into_response(),
        Err(refusal) => *refusal,
    }
}

async fn update(
    State(fake): State<FakeTeams>,
    Path((conversation, id)): Path<(String, String)>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let path = format!("/v3/conversations/{conversation}/activities/{id}");
    match fake.call(&headers, "PUT", path, &body) {
        Ok(_) => {
            let mut inner = fake.inner.lock().unwrap();
            if !inner.messages.contains_key(&id) {
                return (StatusCode::NOT_FOUND, axum::Json(json!({"error": {"code": "ActivityNotFound"}})))
                    .into_response();
            }
            inner.messages.insert(id.clone(), body);
            axum::Json(json!({"id": id})).into_response()
        }
        Err(refusal) => *refusal,
    }
}

async fn start_chat(
    State(fake): State<FakeTeams>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let member = body["members"][0]["id"].as_str().unwrap_or_default().to_owned();
    match fake.call(&headers, "POST", "/v3/conversations".to_owned(), &body) {
        Ok(_) => axum::Json(json!({"id": format!("a:personal-{member}")})).into_response(),
        Err(refusal) => *refusal,
    }
}
