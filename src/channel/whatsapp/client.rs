//! The two calls of the WhatsApp Cloud API askgate makes, over reqwest and serde_json: sending a
//! message (`POST /{version}/{phone_number_id}/messages`) and reading the business number
//! (`GET /{version}/{phone_number_id}`, which says whether the token is taken). The Graph API's
//! errors are read by their code, the names below.

use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use crate::engine::Retry;
use crate::engine::retry::retry_after;

/// The Graph API version askgate speaks.
pub const VERSION: &str = "v23.0";

/// The Graph API's error codes askgate acts on, by name.
pub mod code {
    /// The access token expired or was revoked.
    pub const TOKEN: i64 = 190;
    /// The person last wrote more than 24 hours ago: only a template may go out.
    pub const REENGAGEMENT: i64 = 131_047;
    /// The business number's throughput is reached: wait and send again.
    pub const THROUGHPUT: i64 = 130_429;
    /// Too many messages to this one person in a short time: wait and send again.
    pub const PAIR_RATE: i64 = 131_056;
    /// The app's own call rate (Graph's "application request limit").
    pub const APP_RATE: i64 = 4;
    /// The business account's call rate.
    pub const ACCOUNT_RATE: i64 = 80_007;
}

/// How long the pair rate limit asks between two messages to one person when Meta names no
/// pause (one message every 6 seconds, Meta's figure).
const PAIR_PAUSE: Duration = Duration::from_secs(6);

/// A call the Graph API refused, or that did not reach it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No answer (connection refused, timed out, a body that is not JSON).
    #[error("the Graph API cannot be reached: {0}")]
    Unreachable(String),
    /// The Graph API's refusal, with its code and words.
    #[error("{} ({code}, HTTP {status}): {message}", name(*code))]
    Graph {
        /// The HTTP status.
        status: u16,
        /// The Graph error code (`131047`).
        code: i64,
        /// What the Graph API said (its `message`, and its `error_data.details`).
        message: String,
        /// The pause `Retry-After` asked for.
        after: Option<Duration>,
    },
}

/// What a Graph error code means, in a few words.
fn name(code: i64) -> &'static str {
    match code {
        code::TOKEN => "the Graph API refuses the access token",
        code::REENGAGEMENT => "outside the 24-hour window: only a template may go out",
        code::THROUGHPUT => "the business number's throughput is reached",
        code::PAIR_RATE => "too many messages to this person in a short time (pair rate limit)",
        code::APP_RATE | code::ACCOUNT_RATE => "the Graph API's call rate is reached",
        _ => "the Graph API refused the call",
    }
}

impl ApiError {
    /// The Graph error code, when the Graph API answered.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Graph { code, .. } => Some(*code),
            Self::Unreachable(_) => None,
        }
    }

    /// Whether the call may succeed if tried again, and when.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Unreachable(_) => Retry::Later(None),
            Self::Graph { code: code::PAIR_RATE, after, .. } => Retry::Later(Some(after.unwrap_or(PAIR_PAUSE))),
            Self::Graph { code: code::THROUGHPUT | code::APP_RATE | code::ACCOUNT_RATE, after, .. } => {
                Retry::Later(*after)
            }
            Self::Graph { status, after, .. } if *status >= 500 || *status == 429 => Retry::Later(*after),
            Self::Graph { .. } => Retry::No,
        }
    }
}

/// A client of the Graph API for one business phone number.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    phone_number_id: String,
    token: String,
}

/// How long a call waits for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client of the Graph API at `base` (`https://graph.facebook.com`) for the number
    /// `phone_number_id`, with the system user's `token`.
    ///
    /// # Errors
    /// When `base` is not an http(s) URL, or the TLS roots cannot be loaded.
    pub fn new(base: &str, phone_number_id: &str, token: String) -> Result<Self, String> {
        let base = Url::parse(base).map_err(|e| format!("`{base}` is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!("`{base}` is not an http(s) URL"));
        }
        let http = reqwest::Client::builder().timeout(CALL_TIMEOUT).build().map_err(|e| e.to_string())?;
        Ok(Self { http, base, phone_number_id: phone_number_id.to_owned(), token })
    }

    fn url(&self, last: Option<&str>) -> Url {
        let mut url = self.base.clone();
        let mut segments = url.path_segments_mut().unwrap_or_else(|()| unreachable!("`new` takes base URLs only"));
        segments.pop_if_empty().extend([VERSION, self.phone_number_id.as_str()]);
        if let Some(last) = last {
            segments.push(last);
        }
        drop(segments);
        url
    }

    /// Sends `message` (its `type` and content) to the person whose WhatsApp id is `to` (the
    /// number's digits); the message's id (`wamid.…`).
    ///
    /// # Errors
    /// The Graph API's refusal, or none at all.
    pub async fn send(&self, to: &str, message: &Value) -> Result<String, ApiError> {
        let mut body = json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": to});
        if let (Some(body), Some(message)) = (body.as_object_mut(), message.as_object()) {
            body.extend(message.clone());
        }
        let request = self.http.post(self.url(Some("messages"))).bearer_auth(&self.token).json(&body);
        let answer = answer(request).await?;
        answer["messages"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Unreachable(format!("an answer without a message id: {answer}")))
    }

    /// Reads the business number: whether the token is taken, and the number it shows.
    ///
    /// # Errors
    /// The Graph API's refusal, or none at all.
    pub async fn number(&self) -> Result<String, ApiError> {
        let request =
            self.http.get(self.url(None)).query(&[("fields", "display_phone_number")]).bearer_auth(&self.token);
        let answer = answer(request).await?;
        Ok(answer["display_phone_number"].as_str().unwrap_or_default().to_owned())
    }
}

/// The JSON of a successful answer, or the Graph error it carries.
async fn answer(request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
    let response = request.send().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
    let (status, after) = (response.status(), retry_after(response.headers()));
    let text = response.text().await.map_err(|e| ApiError::Unreachable(e.to_string()))?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() && value.is_object() {
        return Ok(value);
    }
    Err(refusal(status.as_u16(), &value, after).unwrap_or_else(|| {
        let text = crate::text::clip(&text, 200, "…");
        ApiError::Unreachable(format!("HTTP {status} with a body that is no Graph answer: {text}"))
    }))
}

/// The Graph error of an answer's body: `{"error": {"code", "message", "error_data": {"details"}}}`.
pub fn refusal(status: u16, body: &Value, after: Option<Duration>) -> Option<ApiError> {
    let error = body.get("error")?;
    let code = error["code"].as_i64()?;
    let mut message = error["message"].as_str().unwrap_or_default().to_owned();
    if let Some(details) = error["error_data"]["details"].as_str().filter(|d| !d.is_empty()) {
        message = format!("{message} ({details})");
    }
    Some(ApiError::Graph { status, code, message, after })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_errors_are_read_by_code_with_the_limits_waited() {
        let body = json!({"error": {"message": "(#131047) Re-engagement message", "type": "OAuthException",
            "code": 131047, "error_data": {"messaging_product": "whatsapp",
            "details": "Message failed to send because more than 24 hours have passed"}, "fbtrace_id": "A1"}});
        let e = refusal(400, &body, None).unwrap();
        assert_eq!((e.code(), e.retry()), (Some(code::REENGAGEMENT), Retry::No));
        assert!(e.to_string().contains("outside the 24-hour window") && e.to_string().contains("24 hours have passed"));
        let limited = |code| refusal(400, &json!({"error": {"code": code, "message": "m"}}), None).unwrap();
        assert_eq!(limited(code::THROUGHPUT).retry(), Retry::Later(None));
        assert_eq!(limited(code::PAIR_RATE).retry(), Retry::Later(Some(PAIR_PAUSE)));
        let asked = refusal(400, &json!({"error": {"code": 130429, "message": "m"}}), Some(Duration::from_secs(3)));
        assert_eq!(asked.unwrap().retry(), Retry::Later(Some(Duration::from_secs(3))));
        let token = limited(code::TOKEN);
        assert_eq!(token.retry(), Retry::No);
        assert!(token.to_string().contains("refuses the access token"), "{token}");
        assert_eq!(
            refusal(500, &json!({"error": {"code": 2, "message": "m"}}), None).unwrap().retry(),
            Retry::Later(None)
        );
        assert!(refusal(400, &json!({"nope": 1}), None).is_none());
    }

    #[test]
    fn the_messages_endpoint_is_under_the_version_then_the_number() {
        let client = Client::new("http://127.0.0.1:9/graph/", "1065", "t".into()).unwrap();
        assert_eq!(client.url(Some("messages")).as_str(), "http://127.0.0.1:9/graph/v23.0/1065/messages");
        assert_eq!(client.url(None).as_str(), "http://127.0.0.1:9/graph/v23.0/1065");
        assert!(Client::new("mailto:x@y", "1", "t".into()).is_err());
    }
}
