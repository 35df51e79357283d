//! The two calls of the Chat API askgate makes, as the app (its service account's token):
//! `spaces.messages.create` and `spaces.messages.patch`, over reqwest and serde_json.
//!
//! Why no Google client crate: the generated `google-chat1` and its `yup-oauth2` bring a
//! hyper client of their own and many crates; askgate needs two REST calls and one token
//! exchange, whose JSON it reads like its tests do.

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use super::token::{TokenError, Tokens};
use crate::engine::Retry;
use crate::engine::retry::{Backoff, retrying};

/// A call the Chat API refused or that did not reach it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No token for the call.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// No answer (connection refused, timed out, a body that is not JSON).
    #[error("the Chat API cannot be reached: {0}")]
    Unreachable(String),
    /// 429: try again after the pause it asks for.
    #[error("the Chat API asks to slow down (HTTP 429)")]
    Limited(Option<Duration>),
    /// Any other refusal, with the API's words.
    #[error("the Chat API refused: {status} {message} (HTTP {code})")]
    Refused {
        /// The HTTP status.
        code: u16,
        /// Google's status (`PERMISSION_DENIED`).
        status: String,
        /// What it said.
        message: String,
    },
}

impl ApiError {
    /// Whether the call may succeed if tried again, and when.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Token(e) => e.retry(),
            Self::Unreachable(_) => Retry::Later(None),
            Self::Limited(after) => Retry::Later(*after),
            Self::Refused { code, .. } if *code >= 500 => Retry::Later(None),
            Self::Refused { .. } => Retry::No,
        }
    }

    /// Whether the API or the token endpoint cannot be used at all (for `/healthz`): it does
    /// not answer, or refuses the app.
    pub fn is_down(&self) -> bool {
        match self {
            Self::Token(_) | Self::Unreachable(_) => true,
            Self::Refused { code, .. } => matches!(code, 401 | 403) || *code >= 500,
            Self::Limited(_) => false,
        }
    }
}

/// The Chat API at one base URL, as the app.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    tokens: Tokens,
}

/// How long a call waits for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client of the API at `base` (`https://chat.googleapis.com`).
    ///
    /// # Errors
    /// When `base` is not an http(s) URL.
    pub fn new(base: &str, http: reqwest::Client, tokens: Tokens) -> Result<Self, String> {
        let base = Url::parse(base).map_err(|e| format!("`{base}` is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!("`{base}` is not an http(s) URL"));
        }
        Ok(Self { http, base, tokens })
    }

    /// The tokens the calls use.
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// `{base}/v1/{path}`: the resource names (`spaces/AAA/messages/BBB`) are paths.
    fn url(&self, name: &str, suffix: &str) -> Url {
        let mut url = self.base.clone();
        {
            let mut segments = url.path_segments_mut().unwrap_or_else(|()| unreachable!("`new` takes only base URLs"));
            segments.pop_if_empty().push("v1");
            segments.extend(name.split('/'));
            if !suffix.is_empty() {
                segments.push(suffix);
            }
        }
        url
    }

    async fn call_once(
        &self,
        method: Method,
        url: Url,
        query: &[(&str, &str)],
        body: &Value,
    ) -> Result<Value, ApiError> {
        let token = self.tokens.token().await?;
        let response = self
            .http
            .request(method, url)
            .query(query)
            .bearer_auth(token)
            .json(body)
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.to_string()))?;
        let status = response.status();
        let wait = crate::engine::retry::retry_after(response.headers());
        let body: Value = response.json().await.map_err(|e| ApiError::Unreachable(format!("HTTP {status}, {e}")))?;
        if status.is_success() {
            return Ok(body);
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Err(ApiError::Limited(wait));
        }
        if status == StatusCode::UNAUTHORIZED {
            // The token was revoked or has expired early: the next call fetches another.
            self.tokens.forget().await;
        }
        let error = &body["error"];
        Err(ApiError::Refused {
            code: status.as_u16(),
            status: error["status"].as_str().unwrap_or_default().to_owned(),
            message: error["message"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// A call, tried again while the API asks to slow down or does not answer.
    /// A token refused (revoked, or expired early) is forgotten, and the call made once more
    /// with a new one.
    async fn call(&self, method: Method, url: Url, query: &[(&str, &str)], body: &Value) -> Result<Value, ApiError> {
        let call =
            || retrying(Backoff::QUICK, ApiError::retry, || self.call_once(method.clone(), url.clone(), query, body));
        match call().await {
            Err(ApiError::Refused { code: 401, .. }) => call().await,
            result => result,
        }
    }

    /// Posts `message` in `space` (in `thread` when given, else starting one); its name.
    ///
    /// # Errors
    /// [`ApiError`] when it could not be posted.
    pub async fn create(&self, space: &str, message: &Value, thread: Option<&str>) -> Result<String, ApiError> {
        let mut message = message.clone();
        let mut query = Vec::new();
        if let Some(thread) = thread {
            message["thread"] = serde_json::json!({"name": thread});
            query.push(("messageReplyOption", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"));
        }
        let created = self.call(Method::POST, self.url(space, "messages"), &query, &message).await?;
        created["name"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Unreachable("the created message has no name".into()))
    }

    /// Replaces the fields `mask` names (`cardsV2`, `text`) of the message `name`.
    ///
    /// # Errors
    /// [`ApiError`] when it could not be changed.
    pub async fn update(&self, name: &str, mask: &str, message: &Value) -> Result<(), ApiError> {
        self.call(Method::PATCH, self.url(name, ""), &[("updateMask", mask)], message).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_final_and_busy_answers_are_tried_again() {
        let refused = |code| ApiError::Refused { code, status: String::new(), message: String::new() };
        assert_eq!(refused(403).retry(), Retry::No);
        assert!(refused(403).is_down() && !refused(404).is_down());
        assert_eq!(refused(503).retry(), Retry::Later(None));
        assert_eq!(ApiError::Limited(Some(Duration::from_secs(2))).retry(), Retry::Later(Some(Duration::from_secs(2))));
        assert!(!ApiError::Limited(None).is_down());
    }
}
