//! `POST /channels/slack`: Slack's Events API, interactivity and slash commands over HTTP, on
//! askgate's own server (one Request URL for all three in the app's settings). Each request
//! must carry Slack's signature: `X-Slack-Signature: v0=<hex HMAC-SHA256 of
//! "v0:<timestamp>:<body>">` with the signing secret, and `X-Slack-Request-Timestamp` within 5
//! minutes, checked by slack-morphism's verifier (which takes the signature exactly as Slack
//! writes it, lower-case hex, so one request has one signature); a signature seen before is
//! refused. It is answered at once (Slack waits 3 s); what it carries is applied after, in
//! order (see [`super::inbound`]), except a form's submitted modal, answered in
//! the response's body once it is applied. Slack's `app_rate_limited` notice is
//! answered 200 and logged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use slack_morphism::prelude::*;
use slack_morphism::signature_verifier::{SlackEventSignatureVerifier, SlackEventSignatureVerifierError};

use super::{Incoming, Slack};
use crate::channel::posted::{read_body, refuse};
use crate::clock::Clock;

/// The largest request body accepted (the API's limit).
const MAX_BODY: usize = 64 * 1024;

/// How far a request's timestamp may be from now (slack-morphism's window, which is Slack's).
pub const MAX_SKEW_SECS: i64 = SlackEventSignatureVerifier::MAX_TIMESTAMP_AGE_SECONDS;

/// The Slack channel's HTTP door: the adapter and the signing secret.
pub struct SlackEvents {
    slack: Arc<Slack>,
    verifier: SlackEventSignatureVerifier,
    /// Signatures taken within the window, with their timestamps: a replay is refused.
    seen: Mutex<HashMap<String, i64>>,
}

impl SlackEvents {
    /// For `slack`, verified with `secret`.
    pub fn new(slack: Arc<Slack>, secret: String) -> Arc<Self> {
        let verifier = SlackEventSignatureVerifier::new(&SlackSigningSecret::new(secret));
        Arc::new(Self { slack, verifier, seen: Mutex::default() })
    }

    /// Whether `body` is Slack's, signed at `timestamp` (seconds) within Slack's window, and
    /// not seen before; `now` (seconds) ages the signatures kept for that.
    fn verify(&self, timestamp: Option<&str>, signature: Option<&str>, body: &[u8], now: i64) -> Result<(), String> {
        let timestamp = timestamp.ok_or("X-Slack-Request-Timestamp is missing")?;
        let signature = signature.ok_or("X-Slack-Signature is missing")?;
        // Slack signs text (JSON or a form); a body that is not UTF-8 is no request of Slack's.
        let text = std::str::from_utf8(body).map_err(|_| "the signature does not match the signing secret")?;
        self.verifier.verify(signature, text, timestamp).map_err(|e| match e {
            SlackEventSignatureVerifierError::IncorrectOrExpiredTimestampError(_) => {
                "the request's timestamp is not a time within 5 minutes of now".to_owned()
            }
            SlackEventSignatureVerifierError::WrongSignatureError(_) => {
                "the signature does not match the signing secret".to_owned()
            }
            other => format!("the signature cannot be checked: {other}"),
        })?;
        // The verifier took the timestamp as a number of seconds near now.
        let at = timestamp.parse::<i64>().unwrap_or(now);
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.retain(|_, at| (now - *at).abs() <= MAX_SKEW_SECS);
        if seen.insert(signature.to_owned(), at).is_some() {
            return Err("this request was seen before (a replay)".to_owned());
        }
        Ok(())
    }
}

/// What one request is.
#[derive(Debug)]
enum Read {
    /// Something people did, to apply.
    Incoming(Incoming),
    /// The Request URL's check: answered with its challenge.
    Challenge(String),
    /// Slack stopped sending this workspace's events for the minute it names (more than
    /// 30,000 an hour): acknowledged, and logged.
    RateLimited {
        /// The workspace.
        team: String,
        /// The minute it began, in seconds since 1970.
        minute: i64,
    },
}

/// Reads one request: a URL check, a rate-limit notice, an event, an interaction or a slash
/// command.
fn incoming(headers: &HeaderMap, body: &[u8]) -> Result<Read, String> {
    let form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        return match value.get("type").and_then(serde_json::Value::as_str) {
            Some("url_verification") => Ok(Read::Challenge(
                value.get("challenge").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned(),
            )),
            Some("app_rate_limited") => Ok(Read::RateLimited {
                team: value.get("team_id").and_then(serde_json::Value::as_str).unwrap_or("?").to_owned(),
                minute: value.get("minute_rate_limited").and_then(serde_json::Value::as_i64).unwrap_or_default(),
            }),
            Some("event_callback") => serde_json::from_value::<SlackPushEventCallback>(value)
                .map(|e| Read::Incoming(Incoming::Event(Box::new(e))))
                .map_err(|e| format!("not an event Slack sends: {e}")),
            other => Err(format!("an event of type {other:?} is not one askgate takes")),
        };
    }
    let fields: HashMap<String, String> = serde_urlencoded::from_bytes(body).map_err(|e| format!("not a form: {e}"))?;
    if let Some(payload) = fields.get("payload") {
        return serde_json::from_str::<SlackInteractionEvent>(payload)
            .map(|i| Read::Incoming(Incoming::Interaction(Box::new(i))))
            .map_err(|e| format!("not an interaction Slack sends: {e}"));
    }
    if fields.contains_key("command") {
        let fields = serde_json::to_value(&fields).map_err(|e| e.to_string())?;
        return serde_json::from_value::<SlackCommandEvent>(fields)
            .map(|c| Read::Incoming(Incoming::Command(Box::new(c))))
            .map_err(|e| format!("not a slash command Slack sends: {e}"));
    }
    Err("a form with neither `payload` nor `command`".to_owned())
}

/// What `POST /channels/slack` is answered from: the door when events come over HTTP.
#[derive(Clone)]
struct Door {
    events: Option<Arc<SlackEvents>>,
    clock: Clock,
}

/// The route `POST /channels/slack`, answered through `door` (none: the HTTP mode is off, and
/// the route says so).
pub fn routes(door: Option<Arc<SlackEvents>>, clock: Clock) -> Router {
    Router::new().route("/channels/slack", post(events)).with_state(Door { events: door, clock })
}

/// `POST /channels/slack`.
async fn events(State(state): State<Door>, headers: HeaderMap, request: Request) -> Response {
    let Some(door) = &state.events else {
        return refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            "Slack's events over HTTP are off: set signing_secret_env in [channels.slack]",
        );
    };
    let body = match read_body(request, MAX_BODY).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = state.clock.now_ms() / 1000;
    if let Err(why) = door.verify(header("x-slack-request-timestamp"), header("x-slack-signature"), &body, now) {
        return refuse(StatusCode::UNAUTHORIZED, "bad_signature", why);
    }
    match incoming(&headers, &body) {
        Ok(Read::Incoming(Incoming::Interaction(interaction))) => match door.slack.interact(*interaction).await {
            // A form's modal: Slack reads what it is to show in the response's body.
            Some(reply) => axum::Json(reply).into_response(),
            None => StatusCode::OK.into_response(),
        },
        Ok(Read::Incoming(incoming)) => {
            door.slack.accept(incoming);
            StatusCode::OK.into_response()
        }
        Ok(Read::Challenge(challenge)) => axum::Json(serde_json::json!({"challenge": challenge})).into_response(),
        Ok(Read::RateLimited { team, minute }) => {
            tracing::warn!(
                team,
                minute,
                "Slack is holding back this workspace's events for a minute (app_rate_limited): more than \
                 30,000 an hour; what people do in that minute does not reach askgate"
            );
            StatusCode::OK.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, "bad_request", why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_check_an_interaction_and_a_command_are_read_and_junk_is_refused() {
        let json = HeaderMap::new();
        let check = incoming(&json, br#"{"type":"url_verification","challenge":"abc"}"#).unwrap();
        assert!(matches!(check, Read::Challenge(c) if c == "abc"));
        assert!(incoming(&json, b"{nope").is_err());
        let limited = br#"{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}"#;
        assert!(matches!(incoming(&json, limited), Ok(Read::RateLimited { team, minute: 1518467820 }) if team == "T1"));
        assert!(incoming(&json, br#"{"type":"team_migration_started"}"#).is_err());
        let mut form = HeaderMap::new();
        form.insert(axum::http::header::CONTENT_TYPE, "application/x-www-form-urlencoded".parse().unwrap());
        let command = "command=%2Faskgate&text=run+demo&team_id=T1&channel_id=C1&user_id=U1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx&trigger_id=1.2.3";
        assert!(matches!(incoming(&form, command.as_bytes()), Ok(Read::Incoming(Incoming::Command(_)))));
        assert!(incoming(&form, b"payload=%7Bnope").is_err());
        assert!(incoming(&form, b"other=1").is_err());
    }
}
