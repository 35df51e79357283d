//! Email: cards go out over SMTP, and replies come in over IMAP.
//!
//! A card is a mail to the person (`email:<address>` is both the conversation and the user):
//! a text part with the same `/answer` commands as the console's card, an HTML part, a subject
//! that names the question, and askgate's own `Message-ID`, recorded as the card. A reply that
//! names the card (`In-Reply-To`, `References`) answers its question with its first words
//! (`2`, `yes`); a command (`/answer 1a2b3c4d 2`, `run demo`) anywhere in the new part of any
//! mail works as typed. The outcome of a card is a short mail in its thread. askgate watches
//! the mailbox over IMAP (IDLE, or polling where the server has no IDLE), reads each new mail
//! once and marks it `\Seen`; a mail it cannot read stays in the mailbox with a log line.

mod component;
pub mod compose;
pub mod config;
mod links;
mod mailbox;
pub mod read;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

pub use self::component::Platform;
use self::compose::{Composed, Sender};
use crate::clock::Clock;
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{Channel, ChannelError, ChannelState, Engine};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};
use crate::wording;

/// What a card's `Message-ID` starts with.
pub const CARD: &str = "askgate.card.";

/// `text` made safe inside HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The surface of answers given by mail.
pub const SURFACE: Surface = Surface::platform("email");

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The email adapter: the sender of cards and text, and how its two servers answer.
pub struct Email {
    sender: Sender,
    smtp: AsyncSmtpTransport<Tokio1Executor>,
    clock: Clock,
    health: Mutex<Health>,
    engine: Mutex<Option<Engine>>,
    /// When each sender was last told why their mail changed nothing (once an hour at most).
    explained: Mutex<HashMap<String, i64>>,
}

/// How often one sender is told why their mail changed nothing.
const EXPLAIN_EVERY_MS: i64 = 60 * 60 * 1000;

/// What each server last did: whether the mailbox was reached yet, its reason for not
/// answering, and SMTP's.
#[derive(Default)]
struct Health {
    reached: bool,
    mailbox: Option<String>,
    smtp: Option<String>,
}

/// The SMTP URL is not one askgate can use.
#[derive(Debug, thiserror::Error)]
#[error("the SMTP URL is not usable ({0}); write smtp://user:pass@host:port, smtps://… or smtp+starttls://…")]
pub struct SmtpUrlError(String);

impl Email {
    /// The adapter, sending from `from` through the SMTP server of `smtp_url`; with
    /// `link_base`, cards carry one-click links to it.
    ///
    /// # Errors
    /// When `from` is not an address or the URL not an SMTP URL (the message never repeats
    /// the URL, which holds a password).
    pub fn new(
        from: &str,
        link_base: Option<&str>,
        smtp_url: &str,
        clock: Clock,
    ) -> Result<Self, crate::channel::PlatformError> {
        let sender = Sender::new(from, link_base)?;
        let url = match smtp_url.strip_prefix("smtp+starttls://") {
            Some(rest) => {
                let glue = if rest.contains('?') { '&' } else { '?' };
                format!("smtp://{rest}{glue}tls=required")
            }
            None => smtp_url.to_owned(),
        };
        if !(url.starts_with("smtp://") || url.starts_with("smtps://")) {
            return Err(SmtpUrlError("not smtp://, smtps:// or smtp+starttls://".to_owned()).into());
        }
        // askgate greets the server as its sending domain (lettre's default is `localhost`).
        let hello = ClientId::Domain(sender.domain().to_owned());
        let smtp = AsyncSmtpTransport::<Tokio1Executor>::from_url(&url)
            .map_err(|e| SmtpUrlError(e.to_string()))?
            .hello_name(hello)
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(Self {
            sender,
            smtp,
            clock,
            health: Mutex::new(Health::default()),
            engine: Mutex::new(None),
            explained: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `sender` may be told now why their mail changed nothing: not in the last
    /// hour. Then it counts as told.
    fn may_explain(&self, sender: &str) -> bool {
        let now = self.clock.now_ms();
        let mut explained = self.explained.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        explained.retain(|_, at| now - *at < EXPLAIN_EVERY_MS);
        if explained.contains_key(sender) {
            return false;
        }
        explained.insert(sender.to_owned(), now);
        true
    }

    /// Reports how both servers answer on `engine`'s health, from now on.
    fn report_to(&self, engine: &Engine) {
        *self.engine.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(engine.clone());
        self.report();
    }

    /// Notes how the mailbox answers (none: it does) and reports both servers.
    fn mailbox_is(&self, problem: Option<String>) {
        let mut health = self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        health.reached |= problem.is_none();
        health.mailbox = problem;
        drop(health);
        self.report();
    }

    fn smtp_is(&self, problem: Option<String>) {
        let mut health = self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if health.smtp == problem {
            return;
        }
        health.smtp = problem;
        drop(health);
        self.report();
    }

    fn report(&self) {
        let state = {
            let health = self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match (&health.mailbox, &health.smtp) {
                (Some(mailbox), _) => ChannelState::Down(format!("the mailbox does not answer: {mailbox}")),
                (None, _) if !health.reached => ChannelState::Connecting,
                (None, Some(smtp)) => ChannelState::Degraded(format!("SMTP does not take mail: {smtp}")),
                (None, None) => ChannelState::Up,
            }
        };
        let engine = self.engine.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(engine) = engine {
            engine.delivery().set_channel_state(SURFACE.as_str(), state);
        }
    }

    /// Sends `mail`, trying again while the server answers 4xx or cannot be reached; a 5xx
    /// answer is final, and logged with the server's reason by the caller.
    async fn send(&self, mail: &Composed) -> Result<(), ChannelError> {
        let sent = retrying(Backoff::QUICK, ChannelError::retry, || async {
            match self.smtp.send(mail.message.clone()).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_permanent() => Err(ChannelError::permanent(format!("SMTP refused the mail: {e}"))),
                Err(e) => Err(ChannelError::transient(format!("SMTP did not take the mail: {e}"), None)),
            }
        })
        .await;
        match &sent {
            Ok(()) => self.smtp_is(None),
            // A refusal of one mail (a bad recipient) says nothing of the server.
            Err(e) if e.retry() == crate::engine::Retry::No => {}
            Err(e) => self.smtp_is(Some(e.to_string())),
        }
        sent
    }
}

/// The address of an `email:<address>` conversation.
fn address(conversation: &Conversation) -> Result<&str, ChannelError> {
    match conversation.as_str().split_once(':') {
        Some(("email", address)) if address.contains('@') => Ok(address),
        _ => Err(ChannelError::permanent(format!("`{conversation}` is not an email conversation"))),
    }
}

fn composing(e: compose::ComposeError) -> ChannelError {
    ChannelError::permanent(e.to_string())
}

#[async_trait]
impl Channel for Email {
    fn name(&self) -> &'static str {
        SURFACE.as_str()
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let to = address(conversation)?;
        let now = self.clock.now_ms();
        let card = self.sender.card(question, to, &wording::card(question, now), now).map_err(composing)?;
        self.send(&card).await?;
        Ok(vec![Delivery::card(question.id, SURFACE, to, card.id)])
    }

    /// A sent mail cannot change: each card gets a short mail in its thread with the outcome.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let line = wording::resolved_line(question);
        let mut first = Ok(());
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let mail = self.sender.outcome(question, &card.chat, &card.message, &line).map_err(composing);
            if let Err(e) = match mail {
                Ok(mail) => self.send(&mail).await,
                Err(e) => Err(e),
            } {
                tracing::warn!(question = %question.id, to = %card.chat, error = %e, "could not send a card's outcome");
                first = first.and(Err(e));
            }
        }
        first
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let mail = self.sender.text(address(conversation)?, text).map_err(composing)?;
        self.send(&mail).await
    }
}

/// The adapter, shared by its lane and its mailbox watcher.
pub type Shared = Arc<Email>;
