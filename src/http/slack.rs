//! `POST /channels/slack`: Slack's Events API, interactivity and slash commands over HTTP, on
//! askgate's own server (one Request URL for all three in the app's settings). Each request
//! must carry Slack's signature: `X-Slack-Signature: v0=<hex HMAC-SHA256 of
//! "v0:<timestamp>:<body>">` with the signing secret, and `X-Slack-Request-Timestamp` within 5
//! minutes; a request seen before is refused. It is answered at once (Slack waits 3 s); what
//! it carries is applied after, in order (see [`crate::channel::slack::inbound`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use slack_morphism::prelude::*;

use super::{ApiError, AppState, MAX_BODY, read_body};
use crate::channel::slack::{Incoming, Slack};

/// How far a request's timestamp may be from now.
pub const MAX_SKEW_SECS: i64 = 300;

/// The Slack channel's HTTP door: the adapter and the signing secret.
pub struct SlackEvents {
    slack: Arc<Slack>,
    secret: String,
    /// Signatures taken within the window, with their timestamps: a replay is refused.
    seen: Mutex<HashMap<String, i64>>,
}

impl SlackEvents {
    /// For `slack`, verified with `secret`.
    pub fn new(slack: Arc<Slack>, secret: String) -> Arc<Self> {
        Arc::new(Self { slack, secret, seen: Mutex::default() })
    }

    /// Whether `body` is Slack's, signed at `timestamp` (seconds) within the window around
    /// `now`, and not seen before.
    fn verify(&self, timestamp: Option<&str>, signature: Option<&str>, body: &[u8], now: i64) -> Result<(), String> {
        let timestamp = timestamp.ok_or("X-Slack-Request-Timestamp is missing")?;
        let at: i64 = timestamp.parse().map_err(|_| "X-Slack-Request-Timestamp is not a number of seconds")?;
        if (now - at).abs() > MAX_SKEW_SECS {
            return Err("the request's timestamp is more than 5 minutes from now".to_owned());
        }
        let hex = signature.and_then(|s| s.strip_prefix("v0=")).ok_or("X-Slack-Signature is not v0=<hex>")?;
        let expected = hex::decode(hex).map_err(|_| "X-Slack-Signature is not v0=<hex>")?;
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(format!("v0:{timestamp}:").as_bytes());
        mac.update(body);
        mac.verify_slice(&expected).map_err(|_| "the signature does not match the signing secret")?;
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.retain(|_, at| (now - *at).abs() <= MAX_SKEW_SECS);
        if seen.insert(hex.to_owned(), at).is_some() {
            return Err("this request was seen before (a replay)".to_owned());
        }
        Ok(())
    }
}

/// Reads one request: a URL check, an event, an interaction or a slash command.
fn incoming(headers: &HeaderMap, body: &[u8]) -> Result<Result<Incoming, String>, String> {
    let form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        return match value.get("type").and_then(serde_json::Value::as_str) {
            // The Request URL's check: answered with its challenge.
            Some("url_verification") => {
                Ok(Err(value.get("challenge").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned()))
            }
            Some("event_callback") => serde_json::from_value::<SlackPushEventCallback>(value)
                .map(|e| Ok(Incoming::Event(Box::new(e))))
                .map_err(|e| format!("not an event Slack sends: {e}")),
            other => Err(format!("an event of type {other:?} is not one askgate takes")),
        };
    }
    let fields: HashMap<String, String> = serde_urlencoded::from_bytes(body).map_err(|e| format!("not a form: {e}"))?;
    if let Some(payload) = fields.get("payload") {
        return serde_json::from_str::<SlackInteractionEvent>(payload)
            .map(|i| Ok(Incoming::Interaction(Box::new(i))))
            .map_err(|e| format!("not an interaction Slack sends: {e}"));
    }
    if fields.contains_key("command") {
        let fields = serde_json::to_value(&fields).map_err(|e| e.to_string())?;
        return serde_json::from_value::<SlackCommandEvent>(fields)
            .map(|c| Ok(Incoming::Command(Box::new(c))))
            .map_err(|e| format!("not a slash command Slack sends: {e}"));
    }
    Err("a form with neither `payload` nor `command`".to_owned())
}

/// `POST /channels/slack`.
pub(super) async fn events(State(state): State<AppState>, headers: HeaderMap, request: Request) -> Response {
    let Some(door) = &state.slack else {
        return ApiError::not_found("Slack's events over HTTP are off: set signing_secret_env in [channels.slack]")
            .into_response();
    };
    let body = match read_body(request, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = state.engine.clock().now_ms() / 1000;
    if let Err(why) = door.verify(header("x-slack-request-timestamp"), header("x-slack-signature"), &body, now) {
        return ApiError::new(StatusCode::UNAUTHORIZED, "bad_signature", why).into_response();
    }
    match incoming(&headers, &body) {
        Ok(Ok(incoming)) => {
            door.slack.accept(incoming);
            StatusCode::OK.into_response()
        }
        Ok(Err(challenge)) => axum::Json(serde_json::json!({"challenge": challenge})).into_response(),
        Err(why) => ApiError::bad_request(why).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_check_an_interaction_and_a_command_are_read_and_junk_is_refused() {
        let json = HeaderMap::new();
        let check = incoming(&json, br#"{"type":"url_verification","challenge":"abc"}"#).unwrap();
        assert_eq!(check.unwrap_err(), "abc");
        assert!(incoming(&json, b"{nope").is_err());
        assert!(incoming(&json, br#"{"type":"app_rate_limited"}"#).is_err());
        let mut form = HeaderMap::new();
        form.insert(axum::http::header::CONTENT_TYPE, "application/x-www-form-urlencoded".parse().unwrap());
        let command = "command=%2Faskgate&text=run+demo&team_id=T1&channel_id=C1&user_id=U1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx&trigger_id=1.2.3";
        assert!(matches!(incoming(&form, command.as_bytes()), Ok(Ok(Incoming::Command(_)))));
        assert!(incoming(&form, b"payload=%7Bnope").is_err());
        assert!(incoming(&form, b"other=1").is_err());
    }
}
