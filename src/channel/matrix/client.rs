//! The few calls of the Matrix client-server API askgate makes, over reqwest and serde_json.
//!
//! Why not matrix-sdk or ruma: measured against askgate's 499 crates (`cargo tree -e normal`),
//! matrix-sdk 0.18 without default features adds 121 crates, and with `e2e-encryption` it does
//! not resolve at all (its crypto store's rusqlite wants libsqlite3-sys 0.35, askgate's pinned
//! sqlx links 0.37); ruma's client API types add 33. askgate needs ten endpoints (login, whoami,
//! sync, join, send, redact, relations, messages, account data read and write), whose JSON it
//! reads with serde_json like the platforms' tests do; this client adds none.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};

use crate::engine::Retry;

/// A call the homeserver refused or that did not reach it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No answer (connection refused, timed out, a body that is not JSON).
    #[error("the homeserver cannot be reached: {0}")]
    Unreachable(String),
    /// `M_LIMIT_EXCEEDED`: try again after the pause it asks for.
    #[error("the homeserver asks to slow down (M_LIMIT_EXCEEDED)")]
    Limited(Option<Duration>),
    /// Any other refusal, with the homeserver's words.
    #[error("{errcode}: {error} (HTTP {status})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The Matrix error code (`M_FORBIDDEN`).
        errcode: String,
        /// What the homeserver said.
        error: String,
    },
}

impl ApiError {
    /// Whether the call may succeed if tried again, and when.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Unreachable(_) => Retry::Later(None),
            Self::Limited(after) => Retry::Later(*after),
            Self::Refused { status, .. } if *status >= 500 => Retry::Later(None),
            Self::Refused { .. } => Retry::No,
        }
    }
}

/// A client of one homeserver, as one account (its access token: the configured one, or the
/// one a password login gave).
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: RwLock<String>,
    /// Transaction ids: unique across restarts (the start time) and within one (the count).
    txn_prefix: String,
    txn: AtomicU64,
}

/// How long any call but a sync waits for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client of the homeserver at `base` (`https://matrix.example.org`).
    ///
    /// # Errors
    /// When `base` is not an http(s) URL, or the TLS roots cannot be loaded.
    pub fn new(base: &str, token: String, now_ms: i64) -> Result<Self, String> {
        let base = Url::parse(base).map_err(|e| format!("`{base}` is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!("`{base}` is not an http(s) URL"));
        }
        let http = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
        Ok(Self { http, base, token: RwLock::new(token), txn_prefix: format!("ag{now_ms}-"), txn: AtomicU64::new(0) })
    }

    /// A new transaction id, for one event sent (the same on its retries).
    pub fn txn(&self) -> String {
        format!("{}{}", self.txn_prefix, self.txn.fetch_add(1, Ordering::Relaxed))
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .unwrap_or_else(|()| unreachable!("`new` accepts only URLs that can be a base"))
            .pop_if_empty()
            .extend(segments);
        url
    }

    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let mut request = self.http.request(method, self.url(segments)).query(query).timeout(timeout);
        let token = self.token.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if !token.is_empty() {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
        let status = response.status();
        let header_wait = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .map(Duration::from_secs);
        let body: Value = response.json().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
        if status.is_success() {
            return Ok(body);
        }
        let errcode = body["errcode"].as_str().unwrap_or_default().to_owned();
        if status == StatusCode::TOO_MANY_REQUESTS || errcode == "M_LIMIT_EXCEEDED" {
            let wait = body["retry_after_ms"].as_u64().map(Duration::from_millis).or(header_wait);
            return Err(ApiError::Limited(wait));
        }
        let error = body["error"].as_str().unwrap_or_default().to_owned();
        Err(ApiError::Refused { status: status.as_u16(), errcode, error })
    }

    /// Logs in as `user` with `password` on the device `device` (`m.login.password`), and acts
    /// with the access token it gives from then on.
    ///
    /// # Errors
    /// When the homeserver refuses the password or cannot be reached.
    pub async fn login(&self, user: &str, password: &str, device: &str) -> Result<(), ApiError> {
        let body = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user},
            "password": password,
            "device_id": device,
            "initial_device_display_name": "askgate",
        });
        let path = ["_matrix", "client", "v3", "login"];
        let answer = self.call(Method::POST, &path, &[], Some(&body), CALL_TIMEOUT).await?;
        let Some(token) = answer["access_token"].as_str() else {
            let error = "the login's answer has no access_token".to_owned();
            return Err(ApiError::Refused { status: 200, errcode: "M_UNKNOWN".to_owned(), error });
        };
        *self.token.write().unwrap_or_else(std::sync::PoisonError::into_inner) = token.to_owned();
        Ok(())
    }

    /// The account's user id (`@askgate:example.org`): checks the token.
    ///
    /// # Errors
    /// When the homeserver refuses the token or cannot be reached.
    pub async fn whoami(&self) -> Result<String, ApiError> {
        let me = self.call(Method::GET, &["_matrix", "client", "v3", "account", "whoami"], &[], None, CALL_TIMEOUT);
        Ok(me.await?["user_id"].as_str().unwrap_or_default().to_owned())
    }

    /// One `/sync`: what happened since `since` (everything, when none), waiting up to
    /// `wait` for something to happen, filtered by `filter` (a JSON filter).
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn sync(&self, since: Option<&str>, wait: Duration, filter: &str) -> Result<Value, ApiError> {
        let wait_ms = wait.as_millis().to_string();
        let mut query = vec![("timeout", wait_ms.as_str()), ("filter", filter)];
        query.extend(since.map(|since| ("since", since)));
        let path = ["_matrix", "client", "v3", "sync"];
        self.call(Method::GET, &path, &query, None, wait + CALL_TIMEOUT).await
    }

    /// Joins a room by id or alias; its room id.
    ///
    /// # Errors
    /// When the homeserver refuses (not invited, no such room) or cannot be reached.
    pub async fn join(&self, room: &str) -> Result<String, ApiError> {
        let path = ["_matrix", "client", "v3", "join", room];
        let joined = self.call(Method::POST, &path, &[], Some(&json!({})), CALL_TIMEOUT).await?;
        Ok(joined["room_id"].as_str().unwrap_or(room).to_owned())
    }

    /// Sends an event of `kind` to `room` under transaction `txn`; its event id.
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn send(&self, room: &str, kind: &str, txn: &str, content: &Value) -> Result<String, ApiError> {
        let path = ["_matrix", "client", "v3", "rooms", room, "send", kind, txn];
        let sent = self.call(Method::PUT, &path, &[], Some(content), CALL_TIMEOUT).await?;
        Ok(sent["event_id"].as_str().unwrap_or_default().to_owned())
    }

    /// Redacts `event` in `room` under transaction `txn`.
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn redact(&self, room: &str, event: &str, txn: &str) -> Result<(), ApiError> {
        let path = ["_matrix", "client", "v3", "rooms", room, "redact", event, txn];
        self.call(Method::PUT, &path, &[], Some(&json!({})), CALL_TIMEOUT).await.map(|_| ())
    }

    /// The events that relate to `event` in `room` as `rel_type` (`m.annotation`: its
    /// reactions), newest first, up to 100.
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn relations(&self, room: &str, event: &str, rel_type: &str) -> Result<Vec<Value>, ApiError> {
        let path = ["_matrix", "client", "v1", "rooms", room, "relations", event, rel_type];
        let found = self.call(Method::GET, &path, &[("limit", "100")], None, CALL_TIMEOUT).await?;
        Ok(found["chunk"].as_array().cloned().unwrap_or_default())
    }

    /// A page of `room`'s events going back from `from` to `to` (both sync positions), newest
    /// first, with where the next page starts (none at `to`).
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn messages_back(
        &self,
        room: &str,
        from: &str,
        to: &str,
    ) -> Result<(Vec<Value>, Option<String>), ApiError> {
        let path = ["_matrix", "client", "v3", "rooms", room, "messages"];
        let query = [("dir", "b"), ("from", from), ("to", to), ("limit", "100")];
        let page = self.call(Method::GET, &path, &query, None, CALL_TIMEOUT).await?;
        let events = page["chunk"].as_array().cloned().unwrap_or_default();
        let end = page["end"].as_str().filter(|_| !events.is_empty()).map(str::to_owned);
        Ok((events, end))
    }

    /// The account's data of type `kind`; none when it has none.
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn account_data(&self, user: &str, kind: &str) -> Result<Option<Value>, ApiError> {
        let path = ["_matrix", "client", "v3", "user", user, "account_data", kind];
        match self.call(Method::GET, &path, &[], None, CALL_TIMEOUT).await {
            Ok(data) => Ok(Some(data)),
            Err(ApiError::Refused { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets the account's data of type `kind`.
    ///
    /// # Errors
    /// When the homeserver refuses or cannot be reached.
    pub async fn set_account_data(&self, user: &str, kind: &str, data: &Value) -> Result<(), ApiError> {
        let path = ["_matrix", "client", "v3", "user", user, "account_data", kind];
        self.call(Method::PUT, &path, &[], Some(data), CALL_TIMEOUT).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_one_path_segment_each() {
        let client = Client::new("http://127.0.0.1:8008/", "t".into(), 1).unwrap();
        let url = client.url(&["_matrix", "client", "v3", "join", "#ops:example.org"]);
        assert_eq!(url.as_str(), "http://127.0.0.1:8008/_matrix/client/v3/join/%23ops:example.org");
        let url = client.url(&["rooms", "!a/b:x", "send", "m.reaction", "ag1-0"]);
        assert_eq!(url.as_str(), "http://127.0.0.1:8008/rooms/!a%2Fb:x/send/m.reaction/ag1-0");
        assert!(Client::new("ftp://x", "t".into(), 1).is_err());
        assert_ne!(client.txn(), client.txn());
    }
}
