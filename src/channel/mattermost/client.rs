//! The few calls of Mattermost's REST API v4 askgate makes, over reqwest and serde_json: who
//! the bot is, a post made, a post changed. Every call carries the bot's
//! personal access token as a bearer token.

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use crate::engine::Retry;

/// How long a call waits for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A call the server refused or that did not reach it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No answer (connection refused, timed out, a body that is not JSON).
    #[error("the Mattermost server cannot be reached: {0}")]
    Unreachable(String),
    /// HTTP 429: try again after the pause it names (`Retry-After`, else `X-Ratelimit-Reset`).
    #[error("the Mattermost server asks to slow down (HTTP 429)")]
    Limited(Option<Duration>),
    /// Any other refusal, with the server's words.
    #[error("{message} ({id}, HTTP {status})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's error id (`api.context.session_expired.app_error`).
        id: String,
        /// What the server said.
        message: String,
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

    /// Whether the server refused the token itself.
    pub fn is_token(&self) -> bool {
        matches!(self, Self::Refused { status: 401 | 403, .. })
    }
}

/// A client of one Mattermost server, as the bot.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: String,
}

impl Client {
    /// A client of the server at `base` (`https://chat.example.com`).
    ///
    /// # Errors
    /// When `base` is not an http(s) URL, or the TLS roots cannot be loaded.
    pub fn new(base: &str, token: String) -> Result<Self, String> {
        let base = Url::parse(base).map_err(|e| format!("`{base}` is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!("`{base}` is not an http(s) URL"));
        }
        let http = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
        Ok(Self { http, base, token })
    }

    /// The bot's token (the WebSocket's authentication challenge carries it).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// `<base>/api/v4/<segments…>`, each segment one path segment.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .unwrap_or_else(|()| unreachable!("`new` accepts only URLs that can be a base"))
            .pop_if_empty()
            .extend(["api", "v4"])
            .extend(segments);
        url
    }

    /// The WebSocket's address: the base's, `ws` for `http` and `wss` for `https`.
    pub fn websocket(&self) -> Url {
        let mut url = self.url(&["websocket"]);
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        url.set_scheme(scheme).unwrap_or_else(|()| unreachable!("http(s) and ws(s) are both special schemes"));
        url
    }

    async fn call(&self, method: Method, segments: &[&str], body: Option<&Value>) -> Result<Value, ApiError> {
        let mut request = self.http.request(method, self.url(segments)).timeout(CALL_TIMEOUT).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Err(ApiError::Limited(limited_for(response.headers())));
        }
        let body: Value = response.json().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
        if status.is_success() {
            return Ok(body);
        }
        let text = |key: &str| body[key].as_str().unwrap_or_default().to_owned();
        Err(ApiError::Refused { status: status.as_u16(), id: text("id"), message: text("message") })
    }

    /// The bot's user: checks the token.
    ///
    /// # Errors
    /// When the server refuses the token or cannot be reached.
    pub async fn me(&self) -> Result<Value, ApiError> {
        self.call(Method::GET, &["users", "me"], None).await
    }

    /// Makes a post (`channel_id`, `message`, `root_id`, `props`); the post made.
    ///
    /// # Errors
    /// When the server refuses or cannot be reached.
    pub async fn create_post(&self, post: &Value) -> Result<Value, ApiError> {
        self.call(Method::POST, &["posts"], Some(post)).await
    }

    /// Replaces the post `id`'s message and props.
    ///
    /// # Errors
    /// When the server refuses or cannot be reached.
    pub async fn update_post(&self, id: &str, post: &Value) -> Result<(), ApiError> {
        self.call(Method::PUT, &["posts", id], Some(post)).await.map(|_| ())
    }
}

/// The pause a 429 asks for: `Retry-After`, else `X-Ratelimit-Reset` (seconds until the
/// limit resets, as Mattermost sends it).
fn limited_for(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    crate::engine::retry::retry_after(headers).or_else(|| {
        let reset = headers.get("x-ratelimit-reset")?.to_str().ok()?;
        reset.trim().parse::<u64>().ok().map(Duration::from_secs)
    })
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn paths_are_under_api_v4_with_the_websocket_on_the_same_scheme() {
        let client = Client::new("https://chat.example.com/mm/", "t".into()).unwrap();
        assert_eq!(client.url(&["posts", "a/b"]).as_str(), "https://chat.example.com/mm/api/v4/posts/a%2Fb");
        assert_eq!(client.websocket().as_str(), "wss://chat.example.com/mm/api/v4/websocket");
        let plain = Client::new("http://127.0.0.1:8065", "t".into()).unwrap();
        assert_eq!(plain.websocket().as_str(), "ws://127.0.0.1:8065/api/v4/websocket");
        assert!(Client::new("ftp://x", "t".into()).is_err());
    }

    #[test]
    fn a_429_waits_what_retry_after_or_the_reset_says() {
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-reset", HeaderValue::from_static("3"));
        assert_eq!(limited_for(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after", HeaderValue::from_static("1"));
        assert_eq!(limited_for(&headers), Some(Duration::from_secs(1)));
        assert_eq!(limited_for(&HeaderMap::new()), None);
        let refused = ApiError::Refused { status: 401, id: "x".into(), message: "no".into() };
        assert!(refused.is_token() && refused.retry() == Retry::No);
        assert_eq!(ApiError::Limited(Some(Duration::from_secs(2))).retry(), Retry::Later(Some(Duration::from_secs(2))));
    }
}
