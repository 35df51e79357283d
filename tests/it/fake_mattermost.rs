//! A loopback Mattermost server, written from its public API reference: REST v4
//! (`GET /users/me`, `POST /posts`, `PUT /posts/{id}`, `POST /posts/ephemeral`, errors as
//! `{"id","message","status_code"}`, 429 with `Retry-After` and `X-Ratelimit-*` on demand)
//! and the WebSocket API on the same address (`/api/v4/websocket`: `hello` with a
//! `connection_id`, the `authentication_challenge` answered `{"status":"OK","seq_reply":1}`,
//! then `posted` events whose `data.post` is the post as a JSON string, numbered by `seq`).
//! People post as Mattermost's clients do (the event goes to every connection, askgate's own
//! posts too), and click a card's buttons as the server does: it POSTs the button's
//! `integration.context` with who clicked to askgate's action route, and shows the
//! response's `ephemeral_text` to the clicker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::support::eventually;

pub const BOT: &str = "b0000000000000000000000bot";
pub const TEAM: &str = "t000000000000000000000team";

#[derive(Default)]
struct Inner {
    token: String,
    next_id: u64,
    /// Every post by id, as it stands.
    posts: HashMap<String, Value>,
    /// Post ids in the order they were made.
    order: Vec<String>,
    /// Every post as it was made: what a client still shows until it hears of an update (a
    /// second click on a button already gone is one on this).
    made: HashMap<String, Value>,
    /// (method and path, body) of every REST call.
    calls: Vec<(String, Value)>,
    /// 429s still to answer to `POST /posts`.
    limited: u32,
    /// Live, authenticated connections' outboxes.
    sockets: Vec<mpsc::UnboundedSender<Value>>,
    /// Connections authenticated so far, and the queries they were opened with.
    connections: Vec<String>,
    /// Ephemeral texts shown, to whom.
    ephemerals: Vec<(String, String)>,
    /// askgate's own address, where clicks go.
    askgate: String,
}

/// The fake Mattermost.
#[derive(Clone, Default)]
pub struct FakeMattermost {
    inner: Arc<Mutex<Inner>>,
}

impl FakeMattermost {
    /// Starts the server, accepting `token` as the bot's; the fake and its base URL.
    pub async fn start(token: &str) -> (Self, String) {
        let fake = Self::default();
        fake.inner.lock().unwrap().token = token.to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/api/v4/users/me", get(me))
            .route("/api/v4/posts", post(create))
            .route("/api/v4/posts/ephemeral", post(ephemeral))
            .route("/api/v4/posts/{id}", put(update))
            .route("/api/v4/websocket", get(websocket))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, base)
    }

    /// Where askgate listens: clicks go to its action route there (as the server would reach
    /// askgate's `public_url`).
    pub fn set_askgate(&self, base: &str) {
        self.inner.lock().unwrap().askgate = base.to_owned();
    }

    /// The next `n` posts askgate makes are answered 429 first.
    pub fn limit_posts(&self, n: u32) {
        self.inner.lock().unwrap().limited = n;
    }

    fn id(inner: &mut Inner, kind: &str) -> String {
        inner.next_id += 1;
        // Mattermost's ids are 26 lower-case letters and digits.
        format!("{kind:a<4.4}{:0>22}", inner.next_id)
    }

    /// Waits until `n` WebSocket connections were authenticated in all.
    pub async fn connected(&self, n: usize) {
        eventually(|| async { (self.inner.lock().unwrap().connections.len() >= n).then_some(()) }).await;
    }

    /// The queries of the connections made so far.
    pub fn connections(&self) -> Vec<String> {
        self.inner.lock().unwrap().connections.clone()
    }

    /// `user` (as `@name`) posts `text` in `channel`, in the thread of `root`; the `posted`
    /// event sent, to deliver again.
    pub fn post_as(&self, user: &str, name: &str, channel: &str, text: &str, root: Option<&str>) -> Value {
        let mut inner = self.inner.lock().unwrap();
        let id = Self::id(&mut inner, "post");
        let post = json!({"id": id, "create_at": 1_700_000_000_000_u64, "update_at": 1_700_000_000_000_u64,
            "edit_at": 0, "delete_at": 0, "is_pinned": false, "user_id": user, "channel_id": channel,
            "root_id": root.unwrap_or_default(), "original_id": "", "message": text, "type": "", "props": {},
            "hashtags": "", "pending_post_id": "", "reply_count": 0, "metadata": {}});
        inner.posts.insert(id.clone(), post.clone());
        inner.order.push(id);
        let event = posted(&post, name, "O");
        Self::broadcast(&mut inner, &event);
        event
    }

    /// Delivers `event` once more, as a connection resumed with missed events would.
    pub fn redeliver(&self, event: &Value) {
        Self::broadcast(&mut self.inner.lock().unwrap(), event);
    }

    /// Closes every WebSocket connection, as a server restarting does.
    pub fn drop_connections(&self) {
        // A null in a connection's outbox closes it.
        Self::broadcast(&mut self.inner.lock().unwrap(), &Value::Null);
    }

    fn broadcast(inner: &mut Inner, event: &Value) {
        inner.sockets.retain(|socket| socket.send(event.clone()).is_ok());
    }

    /// The request the server sends askgate when `user` clicks the button labelled `label`
    /// on the post `post` (as it was made: a client may not have shown its update yet).
    pub fn click_request(&self, user: &str, name: &str, post: &str, label: &str) -> Value {
        let card = self.inner.lock().unwrap().made[post].clone();
        let action = actions(&card)
            .into_iter()
            .find(|a| a["name"].as_str().unwrap().to_lowercase().contains(&label.to_lowercase()))
            .unwrap_or_else(|| panic!("no button {label} on {card}"));
        json!({"user_id": user, "user_name": name, "channel_id": card["channel_id"], "channel_name": "town-square",
            "team_id": TEAM, "team_domain": "acme", "post_id": post, "trigger_id": format!("trigger-{post}-{label}"),
            "type": "", "data_source": "", "context": action["integration"]["context"]})
    }

    /// The URL the button labelled `label` on `post` sends its request to.
    pub fn button_url(&self, post: &str, label: &str) -> String {
        let inner = self.inner.lock().unwrap();
        let action = actions(&inner.posts[post]).into_iter().find(|a| a["name"] == label).unwrap();
        action["integration"]["url"].as_str().unwrap().to_owned()
    }

    /// Sends `request` to askgate's action route, as the server does for a click; the
    /// response's status and body (its `ephemeral_text` is shown to the clicker).
    pub async fn send_click(&self, request: &Value) -> (StatusCode, Value) {
        let url = format!("{}/channels/mattermost/actions", self.inner.lock().unwrap().askgate);
        let response = reqwest::Client::new().post(url).json(request).send().await.unwrap();
        let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if let Some(text) = body["ephemeral_text"].as_str().filter(|t| !t.is_empty()) {
            let user = request["user_id"].as_str().unwrap_or_default().to_owned();
            self.inner.lock().unwrap().ephemerals.push((user, text.to_owned()));
        }
        (status, body)
    }

    /// `user` clicks `label` on `post`; the response.
    pub async fn click(&self, user: &str, name: &str, post: &str, label: &str) -> (StatusCode, Value) {
        let request = self.click_request(user, name, post, label);
        self.send_click(&request).await
    }

    /// The posts askgate made, as they stand now, oldest first.
    pub fn bot_posts(&self) -> Vec<Value> {
        let inner = self.inner.lock().unwrap();
        inner.order.iter().map(|id| inner.posts[id].clone()).filter(|p| p["user_id"] == BOT).collect()
    }

    /// The post `id` as it stands.
    pub fn post(&self, id: &str) -> Value {
        self.inner.lock().unwrap().posts[id].clone()
    }

    /// Waits for askgate's first post whose message contains `needle`.
    pub async fn posted(&self, needle: &str) -> Value {
        eventually(|| async { self.bot_posts().into_iter().find(|p| message(p).contains(needle)) }).await
    }

    /// The REST calls made so far whose method and path start with `prefix` (`POST /posts`).
    pub fn calls(&self, prefix: &str) -> Vec<Value> {
        let inner = self.inner.lock().unwrap();
        inner.calls.iter().filter(|(at, _)| at.starts_with(prefix)).map(|(_, body)| body.clone()).collect()
    }

    /// The ephemeral texts shown so far to `user`.
    pub fn ephemerals(&self, user: &str) -> Vec<String> {
        let inner = self.inner.lock().unwrap();
        inner.ephemerals.iter().filter(|(to, _)| to == user).map(|(_, text)| text.clone()).collect()
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let expected = format!("Bearer {}", self.inner.lock().unwrap().token);
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) == Some(expected.as_str())
    }

    /// A WebSocket connection, from the hello on.
    async fn session(
        self,
        socket: tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>,
        query: String,
    ) {
        let (mut sink, mut source) = socket.split();
        let connection = Self::id(&mut self.inner.lock().unwrap(), "conn");
        let hello = json!({"event": "hello", "data": {"connection_id": connection, "server_version": "10.5.0"},
            "broadcast": {"omit_users": null, "user_id": BOT, "channel_id": "", "team_id": ""}, "seq": 0});
        if sink.send(Ws::text(hello.to_string())).await.is_err() {
            return;
        }
        // The first frame askgate sends must be the challenge with the bot's token.
        let challenge = loop {
            match source.next().await {
                Some(Ok(frame)) if frame.is_text() => {
                    break serde_json::from_str::<Value>(frame.to_text().unwrap()).unwrap_or_default();
                }
                Some(Ok(_)) => {}
                _ => return,
            }
        };
        let token = self.inner.lock().unwrap().token.clone();
        let seq = challenge["seq"].clone();
        if challenge["action"] != "authentication_challenge" || challenge["data"]["token"] != token.as_str() {
            let fail = json!({"status": "FAIL", "seq_reply": seq, "error": {"id": "api.web_socket_router.not_authenticated.app_error",
                "message": "authentication failed", "status_code": 401}});
            let _ = sink.send(Ws::text(fail.to_string())).await;
            return;
        }
        let _ = sink.send(Ws::text(json!({"status": "OK", "seq_reply": seq}).to_string())).await;
        let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
        {
            let mut inner = self.inner.lock().unwrap();
            inner.sockets.push(tx);
            inner.connections.push(query);
        }
        let mut next = 1;
        loop {
            tokio::select! {
                event = rx.recv() => {
                    let Some(mut event) = event else { return };
                    if event.is_null() {
                        let _ = sink.send(Ws::Close(None)).await;
                        return;
                    }
                    event["seq"] = json!(next);
                    next += 1;
                    if sink.send(Ws::text(event.to_string())).await.is_err() {
                        return;
                    }
                }
                frame = source.next() => match frame {
                    Some(Ok(frame)) if frame.is_close() => return,
                    Some(Ok(_)) => {}
                    _ => return,
                },
            }
        }
    }
}

/// A `posted` event of `post`, as the server broadcasts it.
fn posted(post: &Value, sender: &str, channel_type: &str) -> Value {
    json!({"event": "posted", "data": {"channel_display_name": "Town Square", "channel_name": "town-square",
        "channel_type": channel_type, "post": post.to_string(), "sender_name": sender, "set_online": true,
        "team_id": TEAM}, "broadcast": {"omit_users": null, "user_id": "", "channel_id": post["channel_id"],
        "team_id": ""}, "seq": 0})
}

/// A post's message.
pub fn message(post: &Value) -> String {
    post["message"].as_str().unwrap_or_default().to_owned()
}

/// A post's buttons.
pub fn actions(post: &Value) -> Vec<Value> {
    let attachments = post["props"]["attachments"].as_array().cloned().unwrap_or_default();
    attachments.iter().flat_map(|a| a["actions"].as_array().cloned().unwrap_or_default()).collect()
}

fn error(status: StatusCode, id: &str, message: &str) -> Response {
    let body =
        json!({"id": id, "message": message, "detailed_error": "", "request_id": "r1", "status_code": status.as_u16()});
    (status, axum::Json(body)).into_response()
}

fn unauthorized() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "api.context.session_expired.app_error",
        "Invalid or expired session, please login again.",
    )
}

async fn me(State(fake): State<FakeMattermost>, headers: HeaderMap) -> Response {
    if !fake.authorized(&headers) {
        return unauthorized();
    }
    fake.inner.lock().unwrap().calls.push(("GET /users/me".into(), Value::Null));
    axum::Json(json!({"id": BOT, "username": "askgate", "is_bot": true, "roles": "system_user"})).into_response()
}

async fn create(
    State(fake): State<FakeMattermost>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if !fake.authorized(&headers) {
        return unauthorized();
    }
    let mut inner = fake.inner.lock().unwrap();
    inner.calls.push(("POST /posts".into(), body.clone()));
    if inner.limited > 0 {
        inner.limited -= 1;
        let mut limited = error(StatusCode::TOO_MANY_REQUESTS, "api.context.rate_limit.app_error", "too many requests");
        for (name, value) in [
            ("retry-after", "1"),
            ("x-ratelimit-limit", "10"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1"),
        ] {
            limited.headers_mut().insert(name, value.parse().unwrap());
        }
        return limited;
    }
    if body["channel_id"].as_str().is_none_or(str::is_empty) {
        return error(
            StatusCode::BAD_REQUEST,
            "api.context.invalid_body_param.app_error",
            "Invalid or missing post in request body.",
        );
    }
    let id = FakeMattermost::id(&mut inner, "post");
    let mut post = body.clone();
    post["id"] = json!(id);
    post["user_id"] = json!(BOT);
    post["create_at"] = json!(1_700_000_000_000_u64);
    post["type"] = json!("");
    if post.get("props").is_none() {
        post["props"] = json!({});
    }
    post["props"]["from_bot"] = json!("true");
    inner.posts.insert(id.clone(), post.clone());
    inner.made.insert(id.clone(), post.clone());
    inner.order.push(id);
    let event = posted(&post, "@askgate", "O");
    FakeMattermost::broadcast(&mut inner, &event);
    (StatusCode::CREATED, axum::Json(post)).into_response()
}

async fn update(
    State(fake): State<FakeMattermost>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if !fake.authorized(&headers) {
        return unauthorized();
    }
    let mut inner = fake.inner.lock().unwrap();
    inner.calls.push((format!("PUT /posts/{id}"), body.clone()));
    if body["id"] != id.as_str() {
        return error(StatusCode::BAD_REQUEST, "api.context.invalid_body_param.app_error", "Invalid post id.");
    }
    let Some(post) = inner.posts.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "app.post.get.app_error", "Unable to get the post.");
    };
    post["message"] = body["message"].clone();
    post["props"] = body.get("props").cloned().unwrap_or_else(|| json!({}));
    post["edit_at"] = json!(1_700_000_000_001_u64);
    (StatusCode::OK, axum::Json(post.clone())).into_response()
}

async fn ephemeral(
    State(fake): State<FakeMattermost>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if !fake.authorized(&headers) {
        return unauthorized();
    }
    let mut inner = fake.inner.lock().unwrap();
    inner.calls.push(("POST /posts/ephemeral".into(), body.clone()));
    let (user, text) = (body["user_id"].as_str().unwrap_or_default(), message(&body["post"]));
    inner.ephemerals.push((user.to_owned(), text));
    (StatusCode::CREATED, axum::Json(body["post"].clone())).into_response()
}

/// `GET /api/v4/websocket`: the upgrade, answered as RFC 6455 says, then a session.
async fn websocket(State(fake): State<FakeMattermost>, mut request: Request) -> Response {
    let Some(key) = request.headers().get("sec-websocket-key").cloned() else {
        return error(StatusCode::BAD_REQUEST, "api.web_socket.connect.upgrade.app_error", "not a WebSocket upgrade");
    };
    let query = request.uri().query().unwrap_or_default().to_owned();
    let Some(upgrade) = request.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return error(StatusCode::BAD_REQUEST, "api.web_socket.connect.upgrade.app_error", "no upgrade");
    };
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let io = hyper_util::rt::TokioIo::new(upgraded);
        let role = tokio_tungstenite::tungstenite::protocol::Role::Server;
        let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(io, role, None).await;
        fake.session(socket, query).await;
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .header("sec-websocket-accept", accept)
        .body(axum::body::Body::empty())
        .unwrap()
}
