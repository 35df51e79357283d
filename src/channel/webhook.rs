//! A text channel over signed webhooks, for text-only platforms (SMS, Signal or WhatsApp
//! bridges and the like).
//!
//! Inbound, the bridge POSTs `{"conversation", "user", "text"}` (and optionally `"id"`, its
//! message id, applied once, and `"name"`, how people know the sender) to
//! `/channels/webhook/<name>`. Outbound, askgate POSTs `{"conversation", "text"}` to the
//! endpoint's `url`. Both directions carry `X-Askgate-Timestamp: <unix seconds>` and
//! `X-Askgate-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" under the shared secret>`.
//! A request whose timestamp is more than five minutes off, or whose signature was accepted
//! before, is refused: a captured request cannot be sent again.
//! Conversations are `webhook:<name>:<conversation>`, users `webhook:<name>:<user>`.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::clock::Clock;
use crate::engine::retry::{Backoff, retry_after, retrying};
use crate::engine::{Channel, ChannelError};
use crate::engine::{Engine, Inbound, Response};
use crate::question::{Conversation, Question, Receipt, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "x-askgate-signature";
/// The header that carries the time of signing, in unix seconds.
pub const TIMESTAMP_HEADER: &str = "x-askgate-timestamp";
/// How far a request's timestamp may be from askgate's clock, in seconds.
pub const MAX_SKEW_SECS: i64 = 300;

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

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The signature header's value for `body` signed at `timestamp` (unix seconds): `v1=<hex>`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("v1={}", hex::encode(mac(secret, &timestamp.to_string(), body).finalize().into_bytes()))
}

/// Why a signature was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A header is missing or not in the expected form.
    #[error(
        "send X-Askgate-Timestamp (unix seconds) and X-Askgate-Signature: v1=<hex HMAC-SHA256 of \"<timestamp>.<body>\">"
    )]
    Missing,
    /// The timestamp is too far from askgate's clock.
    #[error(
        "X-Askgate-Timestamp is {0} s away from askgate's clock (at most {MAX_SKEW_SECS} s): sign each request when it is sent"
    )]
    Stale(i64),
    /// The signature does not match.
    #[error("X-Askgate-Signature does not match the timestamp and body under the shared secret")]
    Wrong,
    /// This exact signature was accepted before.
    #[error("this request was accepted before; sign each request anew (and send an \"id\" to make retries safe)")]
    Replayed,
}

/// Checks the timestamp (within [`MAX_SKEW_SECS`] of `now_ms`) and the signature, in constant
/// time; returns the signature's bytes, the key under which it is remembered.
///
/// # Errors
/// [`SignatureError`] saying what is wrong.
pub fn verify(
    secret: &[u8],
    body: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    now_ms: i64,
) -> Result<String, SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp.map(str::trim), signature.map(str::trim)) else {
        return Err(SignatureError::Missing);
    };
    let at: i64 = timestamp.parse().map_err(|_| SignatureError::Missing)?;
    let hex = signature.strip_prefix("v1=").ok_or(SignatureError::Missing)?;
    let given = hex::decode(hex).map_err(|_| SignatureError::Missing)?;
    let skew = (now_ms.div_euclid(1000) - at).abs();
    if skew > MAX_SKEW_SECS {
        return Err(SignatureError::Stale(skew));
    }
    mac(secret, timestamp, body).verify_slice(&given).map_err(|_| SignatureError::Wrong)?;
    Ok(hex.to_ascii_lowercase())
}

/// What a bridge POSTs.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    /// No endpoint has that name.
    #[error("no webhook channel named `{0}`")]
    UnknownEndpoint(String),
    /// The signature is missing, wrong, stale or replayed.
    #[error(transparent)]
    BadSignature(#[from] SignatureError),
    /// The body is not the expected JSON.
    #[error("malformed body: {0}")]
    Malformed(String),
    /// The store could not remember the signature; nothing was done.
    #[error("storage failed")]
    Store(#[from] crate::store::StoreError),
}

impl Webhooks {
    /// The channel with its endpoints.
    pub fn new(endpoints: HashMap<String, Endpoint>, clock: Clock) -> Self {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Self { endpoints, client, clock }
    }

    /// Handles a POST to `/channels/webhook/<name>`: checks the timestamp and signature, and
    /// that the signature was not accepted before, hands the message to the engine, and sends
    /// the response text back through the endpoint.
    ///
    /// # Errors
    /// An unknown endpoint, a bad or replayed signature, or a malformed body; nothing was done.
    pub async fn receive(
        &self,
        engine: &Engine,
        name: &str,
        body: &[u8],
        timestamp: Option<&str>,
        signature: Option<&str>,
    ) -> Result<Response, InboundError> {
        let endpoint = self.endpoints.get(name).ok_or_else(|| InboundError::UnknownEndpoint(name.to_owned()))?;
        let signature = verify(&endpoint.secret, body, timestamp, signature, self.clock.now_ms())?;
        let message: InboundMessage =
            serde_json::from_slice(body).map_err(|e| InboundError::Malformed(e.to_string()))?;
        if message.conversation.trim().is_empty() || message.user.trim().is_empty() {
            return Err(InboundError::Malformed("conversation and user must be non-empty".to_owned()));
        }
        // Remembered in the store (a week), so a restart does not reopen the window: the
        // timestamp check alone would let a captured request through for five minutes.
        if !engine.router().first_sighting(&format!("webhook:{name}:signature:{signature}")).await? {
            return Err(SignatureError::Replayed.into());
        }
        let conversation = Conversation::parse(&format!("webhook:{name}:{}", message.conversation))
            .map_err(|_| InboundError::Malformed("conversation must be non-empty and without spaces".to_owned()))?;
        let user = UserRef::parse(&format!("webhook:{name}:{}", message.user))
            .map_err(|_| InboundError::Malformed("user must be non-empty and without spaces".to_owned()))?;
        // A chat of one person (its conversation is its sender) is private.
        let private = message.conversation == message.user;
        let mut inbound = Inbound::text(conversation.clone(), user, Surface::WEBHOOK, message.text).in_private(private);
        if let Some(name) = &message.name {
            inbound = inbound.named(name);
        }
        inbound.key = message.id.map(|id| format!("webhook:{name}:{id}"));
        let response = engine.router().handle(inbound).await;
        let reply = match &response.receipt {
            Some(Receipt::Resolved { .. }) => None,
            _ => response.text.clone(),
        };
        // Through the conversation's lane, in order with its cards, and without making the
        // bridge wait on its own endpoint: the request is answered at once.
        if let Some(reply) = reply {
            engine.delivery().send_text(&conversation, reply);
        }
        Ok(response)
    }

    async fn post(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let mut parts = conversation.as_str().splitn(3, ':');
        let (Some("webhook"), Some(name), Some(chat)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ChannelError::permanent(format!("`{conversation}` is not a webhook conversation")));
        };
        let endpoint = self
            .endpoints
            .get(name)
            .ok_or_else(|| ChannelError::permanent(format!("no webhook channel named `{name}`")))?;
        let body = serde_json::to_vec(&OutboundMessage { conversation: chat.to_owned(), text: text.to_owned() })
            .map_err(|e| ChannelError::permanent(e.to_string()))?;
        retrying(Backoff::QUICK, ChannelError::retry, || self.send_once(endpoint, &body)).await
    }

    /// Posts `text` to each of `conversations`, going on past one that fails; the first
    /// failure is returned.
    async fn post_to_each(&self, conversations: &[Conversation], text: &str) -> Result<(), ChannelError> {
        let mut first = Ok(());
        for conversation in conversations {
            if let Err(e) = self.post(conversation, text).await {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// One signed POST to a bridge. Each attempt is signed anew: the bridge refuses a
    /// signature it has seen.
    async fn send_once(&self, endpoint: &Endpoint, body: &[u8]) -> Result<(), ChannelError> {
        let timestamp = self.clock.now_ms().div_euclid(1000);
        let sent = self
            .client
            .post(&endpoint.url)
            .header("content-type", "application/json")
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, sign(&endpoint.secret, timestamp, body))
            .body(body.to_vec())
            .send()
            .await;
        let failed = |what: String| format!("{} {what}", endpoint.url);
        match sent {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) if r.status().as_u16() == 429 || r.status().is_server_error() => Err(ChannelError::transient(
                failed(format!("did not take the message: {}", r.status())),
                retry_after(r.headers()),
            )),
            Ok(r) => Err(ChannelError::permanent(failed(format!("refused the message: {}", r.status())))),
            Err(e) => Err(ChannelError::transient(failed(format!("could not be reached: {e}")), None)),
        }
    }
}

#[async_trait]
impl Channel for Webhooks {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn surface(&self) -> Surface {
        Surface::WEBHOOK
    }

    fn serves(&self, conversation: &Conversation) -> bool {
        let mut parts = conversation.as_str().splitn(3, ':');
        matches!((parts.next(), parts.next()), (Some("webhook"), Some(name)) if self.endpoints.contains_key(name))
    }

    fn served(&self) -> Vec<String> {
        self.endpoints.keys().map(|name| format!("webhook:{name}")).collect()
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        self.post(conversation, &wording::card(question, self.clock.now_ms())).await?;
        Ok(vec![Delivery::card(question.id, Surface::WEBHOOK, conversation.to_string(), question.id.short())])
    }

    /// A sent message cannot change: each conversation that was shown a card (its own, and
    /// one it was escalated to on this channel) is told the outcome in a line.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        self.post_to_each(&shown_in(question, cards), &wording::resolved_line(question)).await
    }

    /// A quorum approval's count so far, in a line to each conversation shown a card (to its
    /// own when none was).
    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let Some(tally) = question.tally() else { return Ok(()) };
        let mut conversations = shown_in(question, cards);
        if conversations.is_empty() {
            conversations.extend(question.conversation.clone());
        }
        self.post_to_each(&conversations, &format!("[{}] {tally}", question.id.short())).await
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.post(conversation, text).await
    }
}

/// The conversations `cards` of `question` were shown in, each once, in the order shown. A
/// card recorded before deliveries kept their conversation names it as its chat (a webhook
/// card's chat is its conversation); failing that, it was the question's own.
fn shown_in(question: &Question, cards: &[Delivery]) -> Vec<Conversation> {
    let mut shown: Vec<Conversation> = Vec::new();
    for card in cards {
        let conversation = card
            .conversation
            .clone()
            .or_else(|| Conversation::parse(&card.chat).ok())
            .or_else(|| question.conversation.clone());
        if let Some(c) = conversation.filter(|c| !shown.contains(c)) {
            shown.push(c);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const AT: i64 = NOW / 1000;

    #[test]
    fn each_conversation_shown_a_card_is_named_once_also_from_cards_recorded_before_they_kept_it() {
        let conversation = |c: &str| Conversation::parse(c).unwrap();
        let own = conversation("webhook:sms:+1555");
        let question = Question {
            conversation: Some(own.clone()),
            ..crate::question::test_question(crate::question::Ask::question("Ship?"))
        };
        let card = |chat: &str, shown: Option<&str>| Delivery {
            conversation: shown.map(conversation),
            ..Delivery::card(question.id, Surface::WEBHOOK, chat, question.id.short())
        };
        let cards = [
            card("webhook:sms:+1555", Some("webhook:sms:+1555")),
            card("webhook:sms:ops", Some("webhook:sms:ops")),
            card("webhook:sms:ops", None),
            card("webhook:sms:+1555", None),
        ];
        assert_eq!(shown_in(&question, &cards), [own, conversation("webhook:sms:ops")]);
        assert!(shown_in(&question, &[]).is_empty(), "nothing was shown, nobody is told");
    }

    #[test]
    fn a_signature_verifies_only_for_its_timestamp_body_and_secret() {
        let body = b"{\"text\":\"hi\"}";
        let signature = sign(b"secret", AT, body);
        assert!(signature.starts_with("v1=") && signature.len() == 3 + 64, "{signature}");
        let at = AT.to_string();
        let check = |secret: &[u8], body: &[u8], at: &str, sig: Option<&str>| verify(secret, body, Some(at), sig, NOW);
        assert!(check(b"secret", body, &at, Some(&signature)).is_ok());
        assert_eq!(check(b"secret", b"{\"text\":\"ho\"}", &at, Some(&signature)), Err(SignatureError::Wrong));
        assert_eq!(check(b"other", body, &at, Some(&signature)), Err(SignatureError::Wrong));
        assert_eq!(check(b"secret", body, &(AT + 1).to_string(), Some(&signature)), Err(SignatureError::Wrong));
        assert_eq!(check(b"secret", body, &at, None), Err(SignatureError::Missing));
        assert_eq!(check(b"secret", body, &at, Some("v1=zz")), Err(SignatureError::Missing));
        assert_eq!(check(b"secret", body, &at, Some("sha256=00")), Err(SignatureError::Missing));
        assert_eq!(verify(b"secret", body, None, Some(&signature), NOW), Err(SignatureError::Missing));
    }

    #[test]
    fn a_timestamp_more_than_five_minutes_away_is_refused() {
        let body = b"{}";
        let old = AT - 301;
        let sig = sign(b"s", old, body);
        assert_eq!(verify(b"s", body, Some(&old.to_string()), Some(&sig), NOW), Err(SignatureError::Stale(301)));
        let edge = AT - 300;
        let sig = sign(b"s", edge, body);
        assert!(verify(b"s", body, Some(&edge.to_string()), Some(&sig), NOW).is_ok());
        let ahead = AT + 301;
        let sig = sign(b"s", ahead, body);
        assert!(verify(b"s", body, Some(&ahead.to_string()), Some(&sig), NOW).is_err());
    }
}
