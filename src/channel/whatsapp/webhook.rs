//! The webhook on askgate's own HTTP server, `/channels/whatsapp`: `GET` answers Meta's
//! subscribe handshake (`hub.challenge`, when `hub.verify_token` is the configured one), `POST`
//! takes deliveries signed with the app secret (`X-Hub-Signature-256: sha256=<hex>`, the
//! HMAC-SHA256 of the raw body, compared in constant time) and refuses anything else with 401,
//! changing nothing. A delivery is applied before it is acknowledged, one at a time in the
//! order they come; Meta delivers again what was not acknowledged, and each message is applied
//! once by its id.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::WhatsApp;
use crate::channel::posted::{read_body, refuse};

/// The largest delivery accepted (Meta batches up to a thousand changes in one).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The webhook's state: the adapter, and the secrets that check Meta's requests.
#[derive(Clone)]
pub struct Door {
    pub whatsapp: Arc<WhatsApp>,
    pub app_secret: Arc<str>,
    pub verify_token: Arc<str>,
    /// One delivery applied at a time, in the order they came.
    pub applying: Arc<tokio::sync::Mutex<()>>,
}

/// The routes `GET` and `POST /channels/whatsapp`.
pub fn routes(door: Door) -> Router {
    Router::new().route("/channels/whatsapp", get(handshake).post(deliver)).with_state(door)
}

/// Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`, compared in
/// constant time; why not otherwise.
pub fn verify(secret: &[u8], header: Option<&str>, body: &[u8]) -> Result<(), &'static str> {
    let header = header.ok_or("X-Hub-Signature-256 is missing")?;
    let hex = header.strip_prefix("sha256=").ok_or("X-Hub-Signature-256 is not sha256=<hex>")?;
    let given = hex::decode(hex).map_err(|_| "X-Hub-Signature-256 is not sha256=<hex>")?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| "the app secret cannot key an HMAC")?;
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| "the signature does not match the app secret")
}

/// `GET /channels/whatsapp`: the subscribe handshake.
async fn handshake(State(door): State<Door>, Query(query): Query<Vec<(String, String)>>) -> Response {
    let field = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if field("hub.mode") != Some("subscribe") {
        return refuse(StatusCode::BAD_REQUEST, "bad_request", "not a subscribe handshake (hub.mode=subscribe)");
    }
    let token = field("hub.verify_token").unwrap_or_default();
    if !bool::from(token.as_bytes().ct_eq(door.verify_token.as_bytes())) {
        return refuse(StatusCode::FORBIDDEN, "forbidden", "hub.verify_token is not the configured verify token");
    }
    tracing::info!("answered WhatsApp's webhook handshake");
    field("hub.challenge").unwrap_or_default().to_owned().into_response()
}

/// `POST /channels/whatsapp`: a delivery.
async fn deliver(State(door): State<Door>, headers: HeaderMap, request: Request) -> Response {
    let body = match read_body(request, MAX_BODY).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let signature = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok());
    if let Err(why) = verify(door.app_secret.as_bytes(), signature, &body) {
        tracing::warn!(why, "refused a WhatsApp delivery");
        return refuse(StatusCode::UNAUTHORIZED, "bad_signature", why);
    }
    let events = serde_json::from_slice(&body)
        .map_err(|e| format!("not JSON: {e}"))
        .and_then(|value| super::events::read(&value, door.whatsapp.phone_number_id()));
    let events = match events {
        Ok(events) => events,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, "bad_request", why),
    };
    let _turn = door.applying.lock().await;
    for event in events {
        door.whatsapp.apply(event).await;
    }
    StatusCode::OK.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn a_delivery_is_taken_only_with_the_app_secrets_signature() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        assert_eq!(verify(b"secret", Some(&sign(b"secret", body)), body), Ok(()));
        assert_eq!(
            verify(b"secret", Some(&sign(b"other", body)), body),
            Err("the signature does not match the app secret")
        );
        assert!(verify(b"secret", Some(&sign(b"secret", body)), b"{}").is_err(), "another body");
        assert_eq!(verify(b"secret", None, body), Err("X-Hub-Signature-256 is missing"));
        let sha1 = sign(b"secret", body).replace("sha256=", "sha1=");
        assert_eq!(verify(b"secret", Some(&sha1), body), Err("X-Hub-Signature-256 is not sha256=<hex>"));
        assert!(verify(b"secret", Some("sha256=zz"), body).is_err());
    }
}
