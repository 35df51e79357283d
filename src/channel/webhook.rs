//! A text channel over signed webhooks, for text-only platforms (SMS, Signal or WhatsApp
//! bridges and the like).
//!
//! Inbound, the bridge POSTs `{"conversation", "user", "text"}` (and optionally `"id"`, its
//! message id, applied once, and `"name"`, how people know the sender) to
//! `/channels/webhook/<name>`. Outbound, askgate POSTs `{"conversation", "text"}` to the
//! endpoint's `url`. Both directions carry
//! `X-Askgate-Signature: sha256=<hex HMAC-SHA256 of the body under the shared secret>`.
//! Conversations are `webhook:<name>:<conversation>`, users `webhook:<name>:<user>`.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::{Channel, ChannelError, text};
use crate::clock::Clock;
use crate::engine::{Engine, Inbound, Response};
use crate::question::{Conversation, Question, Receipt, Surface, UserRef};
use crate::store::Delivery;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "x-askgate-signature";

/// One named endpoint.
#[derive(Clone)]
pub struct Endpoint {
    /// Where askgate POSTs messages.
    pub url: String,
    /// The shared secret.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url).field("secret", &"<redacted>").finish()
    }
}

/// The webhook channel: every named endpoint.
pub struct Webhooks {
    endpoints: HashMap<String, Endpoint>,
    client: reqwest::Client,
    clock: Clock,
}

/// Signs `body` as the signature header's value.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Checks a signature header in constant time.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(header) = header.and_then(|h| h.strip_prefix("sha256=")) else { return false };
    let Some(expected) = hex_decode(header) else { return false };
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// What a bridge POSTs.
#[derive(Debug, Deserialize)]
pub struct InboundMessage {
    /// The bridge's conversation id (a phone number, a group id).
    pub conversation: String,
    /// The bridge's user id.
    pub user: String,
    /// What the person wrote.
    pub text: String,
    /// The bridge's message id; a message with an id seen before is applied once.
    #[serde(default)]
    pub id: Option<String>,
    /// How people know the sender (`Alice`, `+44 20 …`), shown with an outcome they give.
    #[serde(default)]
    pub name: Option<String>,
}

/// What askgate POSTs to a bridge.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboundMessage {
    /// The bridge's conversation id.
    pub conversation: String,
    /// The text to deliver.
    pub text: String,
}

/// Why an inbound request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InboundError {
    /// No endpoint has that name.
    #[error("no webhook channel named `{0}`")]
    UnknownEndpoint(String),
    /// The signature is missing or wrong.
    #[error("missing or wrong X-Askgate-Signature")]
    BadSignature,
    /// The body is not the expected JSON.
    #[error("malformed body: {0}")]
    Malformed(String),
}

impl Webhooks {
    /// The channel with its endpoints.
    pub fn new(endpoints: HashMap<String, Endpoint>, clock: Clock) -> Self {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Self { endpoints, client, clock }
    }

    /// Handles a POST to `/channels/webhook/<name>`: checks the signature, hands the message
    /// to the engine, and sends the response text back through the endpoint.
    ///
    /// # Errors
    /// An unknown endpoint, a bad signature, or a malformed body; nothing was done.
    pub async fn receive(
        &self,
        engine: &Engine,
        name: &str,
        body: &[u8],
        signature: Option<&str>,
    ) -> Result<Response, InboundError> {
        let endpoint = self.endpoints.get(name).ok_or_else(|| InboundError::UnknownEndpoint(name.to_owned()))?;
        if !verify(&endpoint.secret, body, signature) {
            return Err(InboundError::BadSignature);
        }
        let message: InboundMessage =
            serde_json::from_slice(body).map_err(|e| InboundError::Malformed(e.to_string()))?;
        let conversation = Conversation::parse(&format!("webhook:{name}:{}", message.conversation))
            .map_err(|_| InboundError::Malformed("conversation must be non-empty and without spaces".to_owned()))?;
        let user = UserRef::parse(&format!("webhook:{name}:{}", message.user))
            .map_err(|_| InboundError::Malformed("user must be non-empty and without spaces".to_owned()))?;
        let mut inbound = Inbound::text(conversation.clone(), user, Surface::Webhook, message.text);
        if let Some(name) = &message.name {
            inbound = inbound.named(name);
        }
        inbound.key = message.id.map(|id| format!("webhook:{name}:{id}"));
        let response = engine.handle(inbound).await;
        let reply = match &response.receipt {
            Some(Receipt::Resolved { .. }) => None,
            _ => response.text.clone(),
        };
        if let Some(reply) = reply
            && let Err(e) = self.send_text(&conversation, &reply).await
        {
            tracing::warn!(%conversation, error = %e, "could not send a webhook reply");
        }
        Ok(response)
    }

    async fn post(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let mut parts = conversation.as_str().splitn(3, ':');
        let (Some("webhook"), Some(name), Some(chat)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ChannelError(format!("`{conversation}` is not a webhook conversation")));
        };
        let endpoint =
            self.endpoints.get(name).ok_or_else(|| ChannelError(format!("no webhook channel named `{name}`")))?;
        let body = serde_json::to_vec(&OutboundMessage { conversation: chat.to_owned(), text: text.to_owned() })
            .map_err(|e| ChannelError(e.to_string()))?;
        let signature = sign(&endpoint.secret, &body);
        let mut wait = Duration::from_millis(200);
        let mut last = String::new();
        for _ in 0..4 {
            let sent = self
                .client
                .post(&endpoint.url)
                .header("content-type", "application/json")
                .header(SIGNATURE_HEADER, &signature)
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) if r.status().is_client_error() && r.status().as_u16() != 429 => {
                    return Err(ChannelError(format!("{} refused the message: {}", endpoint.url, r.status())));
                }
                Ok(r) => last = r.status().to_string(),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        Err(ChannelError(format!("{} did not take the message: {last}", endpoint.url)))
    }
}

#[async_trait]
impl Channel for Webhooks {
    fn name(&self) -> &'static str {
        "webhook"
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        self.post(conversation, &text::card(question, self.clock.now_ms())).await?;
        Ok(vec![Delivery::card(question.id, "webhook", conversation.to_string(), question.id.short())])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        match (&question.conversation, cards.is_empty()) {
            (Some(conversation), false) => self.post(conversation, &text::resolved_line(question)).await,
            _ => Ok(()),
        }
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.post(conversation, text).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_body_and_secret() {
        let signature = sign(b"secret", b"{\"text\":\"hi\"}");
        assert!(signature.starts_with("sha256="));
        assert!(verify(b"secret", b"{\"text\":\"hi\"}", Some(&signature)));
        assert!(!verify(b"secret", b"{\"text\":\"ho\"}", Some(&signature)));
        assert!(!verify(b"other", b"{\"text\":\"hi\"}", Some(&signature)));
        assert!(!verify(b"secret", b"{\"text\":\"hi\"}", None));
        assert!(!verify(b"secret", b"{\"text\":\"hi\"}", Some("sha256=zz")));
    }
}
