//! The Bot Connector REST API, v3, at each conversation's `serviceUrl`: send an activity to a
//! conversation, reply to one, update one in place, start a personal chat; each call with a
//! client-credentials token of the bot's app ([`Tokens`]), and how each call stood, for
//! `/healthz` (a connector or token endpoint that does not answer, or refuses the app's
//! credentials, is down).

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::engine::ChannelState;
use crate::engine::retry::{Backoff, Retry, retry_after, retrying};

/// The scope of the tokens the Bot Connector takes.
pub const SCOPE: &str = "https://api.botframework.com/.default";

/// How long before its expiry a token is fetched again.
const RENEW_BEFORE_MS: i64 = 5 * 60 * 1000;

/// A call to the connector or the token endpoint that failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No answer (or not one in HTTP).
    #[error("{0} did not answer: {1}")]
    Unreachable(String, String),
    /// The token endpoint refused the app's id and password.
    #[error("the token endpoint refused the app's credentials ({status}): {body}")]
    Credentials {
        /// Its status.
        status: StatusCode,
        /// What it said.
        body: String,
    },
    /// The connector refused the call.
    #[error("the Bot Connector answered {status}: {body}")]
    Refused {
        /// Its status.
        status: StatusCode,
        /// What it said.
        body: String,
        /// What `Retry-After` asked for.
        after: Option<Duration>,
    },
}

impl ApiError {
    /// Whether trying again may help: after a 429's `Retry-After`, a 5xx, or no answer.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Unreachable(..) => Retry::Later(None),
            Self::Refused { status, after, .. }
                if *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() =>
            {
                Retry::Later(*after)
            }
            Self::Refused { .. } | Self::Credentials { .. } => Retry::No,
        }
    }
}

/// The bot's tokens from the client-credentials grant, each kept until shortly before it
/// expires.
struct Tokens {
    url: String,
    app_id: String,
    password: String,
    cached: tokio::sync::Mutex<Option<(String, i64)>>,
}

/// The Bot Connector client: the bot's tokens, and how the last calls stood.
pub struct Connector {
    http: reqwest::Client,
    tokens: Tokens,
    clock: Clock,
    state: watch::Sender<ChannelState>,
}

impl Connector {
    /// A client for the app `app_id` with `password`, getting its tokens from `token_url`.
    pub fn new(http: reqwest::Client, token_url: String, app_id: String, password: String, clock: Clock) -> Self {
        let tokens = Tokens { url: token_url, app_id, password, cached: tokio::sync::Mutex::default() };
        Self { http, tokens, clock, state: watch::Sender::new(ChannelState::Connecting) }
    }

    /// How the connection stands, each time it changes.
    pub fn states(&self) -> watch::Receiver<ChannelState> {
        self.state.subscribe()
    }

    fn stood(&self, result: Result<(), &ApiError>) {
        let state = match result {
            Ok(()) => ChannelState::Up,
            Err(e @ (ApiError::Unreachable(..) | ApiError::Credentials { .. })) => ChannelState::Down(e.to_string()),
            Err(ApiError::Refused { status, .. }) if status.is_server_error() => {
                ChannelState::Down(result.err().map(ToString::to_string).unwrap_or_default())
            }
            // The connector answered: it is up, though it refused this call.
            Err(ApiError::Refused { .. }) => ChannelState::Up,
        };
        self.state.send_if_modified(|now| {
            let changed = *now != state;
            *now = state;
            changed
        });
    }

    /// A token for the Bot Connector: the one kept, or a new one.
    ///
    /// # Errors
    /// When the token endpoint does not answer or refuses the app's credentials.
    pub async fn token(&self) -> Result<String, ApiError> {
        let mut cached = self.tokens.cached.lock().await;
        let now = self.clock.now_ms();
        if let Some((token, expires)) = cached.as_ref()
            && *expires - RENEW_BEFORE_MS > now
        {
            return Ok(token.clone());
        }
        let fetched = self.fetch_token().await;
        self.stood(fetched.as_ref().map(|_| ()));
        let (token, lasts) = fetched?;
        *cached = Some((token.clone(), now + lasts * 1000));
        Ok(token)
    }

    async fn fetch_token(&self) -> Result<(String, i64), ApiError> {
        let t = &self.tokens;
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", t.app_id.as_str()),
            ("client_secret", t.password.as_str()),
            ("scope", SCOPE),
        ];
        let unreachable =
            |e: reqwest::Error| ApiError::Unreachable(format!("the token endpoint {}", t.url), e.to_string());
        let response = self.http.post(&t.url).form(&form).send().await.map_err(unreachable)?;
        let status = response.status();
        let after = retry_after(response.headers());
        let body: Value = response.json().await.unwrap_or_default();
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(ApiError::Refused { status, body: body.to_string(), after });
        }
        match (status.is_success(), body["access_token"].as_str(), body["expires_in"].as_i64()) {
            (true, Some(token), lasts) => Ok((token.to_owned(), lasts.unwrap_or(3600))),
            _ => Err(ApiError::Credentials { status, body: body.to_string() }),
        }
    }

    /// Makes one call, waiting out 429s and pauses as [`Backoff::QUICK`] says; the answer's
    /// body.
    /// A token the connector refuses (revoked, or expired early) is forgotten, and the call
    /// made once more with a new one.
    async fn call(&self, method: Method, url: Url, body: &Value) -> Result<Value, ApiError> {
        let call = || retrying(Backoff::QUICK, ApiError::retry, || self.call_once(method.clone(), url.clone(), body));
        let result = match call().await {
            Err(ApiError::Refused { status: StatusCode::UNAUTHORIZED, .. }) => {
                *self.tokens.cached.lock().await = None;
                call().await
            }
            result => result,
        };
        self.stood(result.as_ref().map(|_| ()));
        result
    }

    async fn call_once(&self, method: Method, url: Url, body: &Value) -> Result<Value, ApiError> {
        let token = self.token().await?;
        let unreachable =
            |e: reqwest::Error| ApiError::Unreachable(format!("the Bot Connector at {url}"), e.to_string());
        let response =
            self.http.request(method, url.clone()).bearer_auth(token).json(body).send().await.map_err(unreachable)?;
        let status = response.status();
        let after = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(ApiError::Refused { status, body: text, after });
        }
        Ok(serde_json::from_str(&text).unwrap_or_default())
    }

    /// Sends `activity` to `conversation`; its activity id.
    ///
    /// # Errors
    /// When the connector refused it or could not be reached.
    pub async fn send(&self, service_url: &str, conversation: &str, activity: &Value) -> Result<String, ApiError> {
        let url = endpoint(service_url, &["v3", "conversations", conversation, "activities"])?;
        Ok(id_of(&self.call(Method::POST, url, activity).await?))
    }

    /// Sends `activity` to `conversation` as a reply to the activity `to`.
    ///
    /// # Errors
    /// When the connector refused it or could not be reached.
    pub async fn reply(
        &self,
        service_url: &str,
        conversation: &str,
        to: &str,
        activity: &Value,
    ) -> Result<(), ApiError> {
        let url = endpoint(service_url, &["v3", "conversations", conversation, "activities", to])?;
        let mut activity = activity.clone();
        activity["replyToId"] = json!(to);
        self.call(Method::POST, url, &activity).await.map(|_| ())
    }

    /// Replaces the activity `id` of `conversation` by `activity` (a card's update).
    ///
    /// # Errors
    /// When the connector refused it or could not be reached.
    pub async fn update(
        &self,
        service_url: &str,
        conversation: &str,
        id: &str,
        activity: &Value,
    ) -> Result<(), ApiError> {
        let url = endpoint(service_url, &["v3", "conversations", conversation, "activities", id])?;
        let mut activity = activity.clone();
        activity["id"] = json!(id);
        self.call(Method::PUT, url, &activity).await.map(|_| ())
    }

    /// Starts (or finds) the personal chat of the bot `bot` with the person `user` (their
    /// Teams id, `29:…`) in `tenant`; its conversation id.
    ///
    /// # Errors
    /// When the connector refused it or could not be reached.
    pub async fn personal_chat(
        &self,
        service_url: &str,
        bot: &str,
        user: &str,
        tenant: Option<&str>,
    ) -> Result<String, ApiError> {
        let url = endpoint(service_url, &["v3", "conversations"])?;
        let body = json!({
            "bot": {"id": bot},
            "members": [{"id": user}],
            "isGroup": false,
            "tenantId": tenant,
            "channelData": {"tenant": {"id": tenant}},
        });
        Ok(id_of(&self.call(Method::POST, url, &body).await?))
    }
}

/// The `id` of a connector's answer (a `ResourceResponse` or a `ConversationResourceResponse`).
fn id_of(answer: &Value) -> String {
    answer["id"].as_str().unwrap_or_default().to_owned()
}

/// `service_url` with `segments` appended, each escaped as the Bot Framework's SDKs escape them
/// (conversation ids hold `:`, `;`, `@`).
fn endpoint(service_url: &str, segments: &[&str]) -> Result<Url, ApiError> {
    let bad = |why: String| ApiError::Refused { status: StatusCode::BAD_REQUEST, body: why, after: None };
    let mut url = Url::parse(service_url).map_err(|e| bad(format!("`{service_url}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(bad(format!("`{service_url}` is not an http(s) URL")));
    }
    let mut path = url.path().trim_end_matches('/').to_owned();
    for segment in segments {
        path.push('/');
        path.extend(url::form_urlencoded::byte_serialize(segment.as_bytes()));
    }
    url.set_path(&path);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_id_is_one_escaped_segment_after_the_service_url() {
        let url = endpoint(
            "https://smba.trafficmanager.net/amer/",
            &["v3", "conversations", "19:a;messageid=1", "activities"],
        );
        assert_eq!(
            url.unwrap().as_str(),
            "https://smba.trafficmanager.net/amer/v3/conversations/19%3Aa%3Bmessageid%3D1/activities"
        );
        let url = endpoint("http://127.0.0.1:9", &["v3", "conversations"]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/v3/conversations");
        assert!(endpoint("file:///x", &["v3"]).is_err());
    }

    #[test]
    fn a_busy_connector_is_tried_again_a_refusal_never() {
        let refused = |status: u16, after| ApiError::Refused {
            status: StatusCode::from_u16(status).unwrap(),
            body: String::new(),
            after,
        };
        assert_eq!(refused(429, Some(Duration::from_secs(2))).retry(), Retry::Later(Some(Duration::from_secs(2))));
        assert_eq!(refused(503, None).retry(), Retry::Later(None));
        assert_eq!(refused(403, None).retry(), Retry::No);
        assert_eq!(ApiError::Credentials { status: StatusCode::UNAUTHORIZED, body: String::new() }.retry(), Retry::No);
    }
}
