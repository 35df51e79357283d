//! The engine's outbound port: what a channel adapter implements so the engine can show
//! questions, retract their cards and send text ([`Channel`]), and how its connection stands
//! ([`ChannelState`]). The adapters in [`crate::channel`] implement it; the engine owns it, so
//! the engine depends on no adapter.

pub use super::retry::Retry;
use async_trait::async_trait;

use crate::question::{Conversation, Question, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

/// How a channel's connection to its platform stands, as `/healthz` and `/metrics` report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelState {
    /// Attached; not connected yet (or reconnecting).
    Connecting,
    /// Connected: it receives and sends.
    Up,
    /// Connected, but cards could not be delivered and are being tried again.
    Degraded(String),
    /// Not working, and why: a refused token, an unreachable platform.
    Down(String),
}

impl std::fmt::Display for ChannelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connecting => f.write_str("connecting"),
            Self::Up => f.write_str("up"),
            Self::Degraded(why) => write!(f, "degraded: {why}"),
            Self::Down(why) => write!(f, "down: {why}"),
        }
    }
}

/// A platform call that failed, and whether trying again may help. Logged by the engine; a
/// card whose delivery may succeed later is tried again while its question waits.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ChannelError {
    message: String,
    retry: Retry,
}

impl ChannelError {
    /// A failure that trying again will not mend (the platform refused what was sent).
    pub fn permanent(message: impl Into<String>) -> Self {
        Self { message: message.into(), retry: Retry::No }
    }

    /// A failure that may pass: the platform could not be reached, was busy, or asked for a
    /// pause (`after`).
    pub fn transient(message: impl Into<String>, after: Option<std::time::Duration>) -> Self {
        Self { message: message.into(), retry: Retry::Later(after) }
    }

    /// The end of a pass over several cards: fine when none failed, else one permanent error
    /// naming each failure (`could not update <chat>/<message>: …, …`, `verb` being `update`).
    ///
    /// # Errors
    /// When `failures` is not empty.
    pub fn unless_failed(verb: &str, failures: &[String]) -> Result<(), Self> {
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Self::permanent(format!("could not {verb} {}", failures.join(", "))))
        }
    }

    /// Whether, and when, to try again.
    pub fn retry(&self) -> Retry {
        self.retry
    }
}

/// The outbound half of a channel adapter.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// The channel's name, which is also the channel part of the conversations it serves:
    /// `console` serves `console:local`.
    fn name(&self) -> &'static str;

    /// The surface its cards and answers are recorded as.
    fn surface(&self) -> Surface;

    /// Renders a pending question in its conversation; returns the cards it sent, which the
    /// engine records for retraction.
    ///
    /// # Errors
    /// When the platform refused or could not be reached.
    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError>;

    /// Updates the cards of a resolved question: buttons removed, outcome and who answered
    /// shown.
    ///
    /// # Errors
    /// When the platform refused; the engine logs it and goes on.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError>;

    /// Shows a pending question's progress on its cards (a quorum approval's count so far),
    /// keeping what answers it. A surface whose messages cannot change (`cards` is empty or
    /// its messages are plain text) says it in a line instead.
    ///
    /// # Errors
    /// When the platform refused; the engine logs it and goes on.
    async fn refresh(&self, question: &Question, _cards: &[Delivery]) -> Result<(), ChannelError> {
        match (&question.conversation, question.tally()) {
            (Some(conversation), Some(tally)) => {
                self.send_text(conversation, &format!("[{}] {tally}", question.id.short())).await
            }
            _ => Ok(()),
        }
    }

    /// Reminds people of a pending question in its conversation: the card's text and commands,
    /// mentioning `people` where the platform can (plain text names them otherwise).
    ///
    /// # Errors
    /// When the platform refused or could not be reached.
    async fn remind(&self, question: &Question, people: &[UserRef], now_ms: i64) -> Result<(), ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(()) };
        let names: Vec<&str> = people.iter().map(UserRef::as_str).collect();
        self.send_text(conversation, &wording::reminder(question, &names.join(", "), now_ms)).await
    }

    /// Whether this channel can reach `conversation` (one of its own, by its channel part).
    /// The webhook channel serves only the endpoints it has.
    fn serves(&self, conversation: &Conversation) -> bool {
        conversation.channel() == self.name()
    }

    /// How the conversations this channel serves are named, for messages that list them:
    /// `telegram`, or `webhook:sms` per webhook endpoint.
    fn served(&self) -> Vec<String> {
        vec![self.name().to_owned()]
    }

    /// Sends plain text to a conversation: a function's `say` or reply, a notice.
    ///
    /// # Errors
    /// When the platform refused or could not be reached.
    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError>;
}
