//! WhatsApp, over Meta's Cloud API: cards as reply buttons (up to 3 choices) or a list (up to
//! 10) whose ids are the text commands, anything else as the text card with its commands; a
//! person's 👍/👎 reaction on a card answers a confirm or an approval; the outcome is a reply
//! to the card, as WhatsApp cannot edit a message.
//!
//! Conversations and users are `whatsapp:<number in E.164>` (`whatsapp:+15551234567`; the
//! webhook's `wa_id` has no `+`). What people send comes to the webhook on askgate's own server
//! ([`webhook`]), each message applied once by its id. WhatsApp lets a business write freely
//! only within 24 hours of the person's last message: askgate notes when each person last wrote
//! (in the store, so it holds across restarts), and a question to someone outside that window
//! goes out as the configured template, which asks them to reply; without one the question
//! ends at once as cancelled, saying why, so the asker is never left waiting for nothing.

mod client;
mod component;
pub mod config;
mod events;
mod outbound;
mod render;
mod webhook;
mod window;

use std::sync::Arc;
use std::time::Duration;

use crate::channel::reactions;
use crate::clock::Clock;
use crate::command::Command;
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{ChannelError, ChannelState, Engine, Inbound, Retry};
use crate::question::{Conversation, Kind, Question, Receipt, UserRef};
use crate::say;
use crate::store::Delivery;
use client::{ApiError, Client, code};
use events::{Event, What};

pub use component::Platform;

/// Where answers given on WhatsApp come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("whatsapp");

/// How long after a person's last message a business may write to them freely.
const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// How much sooner than WhatsApp askgate takes the window as closed: a card sent in the last
/// minutes might arrive after it closed.
const WINDOW_MARGIN_MS: i64 = 5 * 60 * 1000;

/// The WhatsApp channel: one business phone number.
pub struct WhatsApp {
    client: Client,
    phone_number_id: String,
    template: Option<config::Template>,
    clock: Clock,
    /// The engine it hands what people do, and whose store keeps when each person last wrote.
    engine: Engine,
}

impl WhatsApp {
    /// The channel, sending with `token`; nothing is sent until it is used.
    ///
    /// # Errors
    /// An API URL that is not one.
    pub fn new(
        config: &config::WhatsAppConfig,
        token: String,
        clock: Clock,
        engine: Engine,
    ) -> Result<Arc<Self>, String> {
        let client = Client::new(&config.api_url, &config.phone_number_id, token)?;
        let (phone_number_id, template) = (config.phone_number_id.clone(), config.template.clone());
        Ok(Arc::new(Self { client, phone_number_id, template, clock, engine }))
    }

    /// The id of the business number it sends from.
    pub fn phone_number_id(&self) -> &str {
        &self.phone_number_id
    }

    /// Checks the token against the business number, and says how the channel stands.
    async fn serve(self: Arc<Self>) -> Result<(), crate::channel::ServeError> {
        let stop = self.engine.stopping();
        let mut pauses = crate::engine::retry::pauses(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match self.client.number().await {
                Ok(number) => {
                    tracing::info!(number, "whatsapp connected");
                    self.engine.delivery().set_channel_state("whatsapp", ChannelState::Up);
                    break;
                }
                Err(e) if e.retry() == Retry::No => {
                    // A token refused says so in its own words; any other refusal (a wrong
                    // phone_number_id) in the Graph API's.
                    let why = format!("the Graph API refused to read the business number: {e}");
                    self.engine.delivery().set_channel_state("whatsapp", ChannelState::Down(why));
                    self.refused(&e);
                    tracing::warn!(error = %e, "the Graph API refused askgate's call for the business number");
                    break;
                }
                Err(e) => {
                    self.engine.delivery().set_channel_state("whatsapp", ChannelState::Down(e.to_string()));
                    let wait = pauses.next().unwrap_or(Duration::from_secs(60));
                    if crate::engine::retry::pause(wait, &stop).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
        stop.cancelled().await;
        Ok(())
    }

    /// A refusal that says something about the channel as a whole: a token the Graph API
    /// refuses puts it down (`/healthz` says so) until a call succeeds again.
    fn refused(&self, e: &ApiError) {
        if e.code() == Some(code::TOKEN) {
            let why = format!("the Graph API refuses the token (190): {e}");
            self.engine.delivery().set_channel_state("whatsapp", ChannelState::Down(why));
        }
    }

    /// Sends `message` to `number`, waiting out the limits WhatsApp names (throughput, the pair
    /// rate, `Retry-After`) a few times; the message's id.
    async fn send(&self, number: &str, message: &serde_json::Value) -> Result<String, ApiError> {
        let to = number.trim_start_matches('+');
        let sent = retrying(Backoff::QUICK, ApiError::retry, || self.client.send(to, message)).await;
        match &sent {
            Ok(_) => self.up(),
            Err(e) => self.refused(e),
        }
        sent
    }

    /// A call went through: a channel put down for its token is up again.
    fn up(&self) {
        let states = self.engine.delivery().channel_states();
        if states.iter().any(|(name, state)| *name == "whatsapp" && matches!(state, ChannelState::Down(_))) {
            self.engine.delivery().set_channel_state("whatsapp", ChannelState::Up);
        }
    }

    /// Says `text` to `number`, quoting the message `to`; a failure is logged.
    async fn answer(&self, number: &str, text: &str, to: &str) {
        if let Err(e) = self.send(number, &render::replying(render::text(text), to)).await {
            tracing::warn!(error = %e, "could not answer on whatsapp");
        }
    }

    /// Applies one event of a delivery.
    async fn apply(&self, event: Event) {
        match event {
            Event::Message { id, from, name, context, what } => {
                let reopened = !self.window_open(&from).await;
                self.heard(&from).await;
                let (Some(user), Some(conversation)) = (user_ref(&from), conversation_of(&from)) else { return };
                let key = format!("whatsapp:message:{id}");
                let said = Said { id: &id, from: &from, name: name.as_deref(), key, conversation, user };
                match what {
                    What::Text(text) if reopened && !text.trim_start().starts_with('/') => {
                        if !self.show_waiting(&said).await {
                            self.typed(said, text, context).await;
                        }
                    }
                    What::Text(text) => self.typed(said, text, context).await,
                    What::Choice { id: payload, title } => match Command::parse(&payload) {
                        Some(Ok(command)) => self.tapped(said, command, context.as_deref().unwrap_or(&id)).await,
                        _ => self.typed(said, title, context).await,
                    },
                    What::Reaction { on, emoji: Some(emoji) } => {
                        let Some(command) = self.reaction_command(&from, &on, &emoji).await else { return };
                        self.tapped(said, command, &on).await;
                    }
                    What::Reaction { emoji: None, .. } => {}
                    What::Other(kind) => self.unread(&said, &kind).await,
                }
            }
            Event::Status { id, recipient, status, errors } => self.on_status(&id, &recipient, &status, &errors).await,
        }
    }

    /// A typed message (a reply when `context` names the message it quotes).
    async fn typed(&self, said: Said<'_>, text: String, context: Option<String>) {
        let mut inbound = Inbound::text(said.conversation, said.user, SURFACE, text).keyed(said.key).in_private(true);
        if let Some(name) = said.name {
            inbound = inbound.named(name);
        }
        if let Some(to) = context {
            inbound = inbound.replying_to(said.from.to_owned(), to);
        }
        let response = self.engine.router().handle(inbound).await;
        if let Some(text) = response.text {
            self.answer(said.from, &text, said.id).await;
        }
    }

    /// A tapped button or row, or a reaction, on the card `card`: a tap that resolved shows in
    /// the outcome's reply to the card; anything else (already answered, not yours) is said.
    async fn tapped(&self, said: Said<'_>, command: Command, card: &str) {
        let mut inbound = Inbound::tap(said.conversation, said.user, SURFACE, command).keyed(said.key).in_private(true);
        if let Some(name) = said.name {
            inbound = inbound.named(name);
        }
        let response = self.engine.router().handle(inbound).await;
        if !matches!(response.receipt, Some(Receipt::Resolved { .. }))
            && let Some(note) =
                crate::wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale)
        {
            self.answer(said.from, &note, card).await;
        }
    }

    /// The command a reaction `emoji` on the message `on` stands for, when that message is a
    /// card of this person's chat. WhatsApp seeds no reactions, so a person reacts with their
    /// own: 👍/👎 answer a confirm (yes/no) and an approval (👍 allows once; 👎 rejects), the
    /// keycaps 1️⃣…🔟 an option; a skin tone changes nothing.
    async fn reaction_command(&self, number: &str, on: &str, emoji: &str) -> Option<Command> {
        let emoji: String = emoji.chars().filter(|c| !('\u{1f3fb}'..='\u{1f3ff}').contains(c)).collect();
        if !reactions::is_choice(&emoji) {
            return None;
        }
        let question = self.card(number, on).await?;
        reactions::command(&question, approval_key(&question, &emoji))
    }

    /// The question whose card is the message `id` to `number`. A card is recorded once it is
    /// sent: what comes about it that quickly (its status, a reaction) waits for that a moment.
    async fn card(&self, number: &str, id: &str) -> Option<Question> {
        for attempt in 0..4 {
            match self.engine.records().card_question(SURFACE, number, id).await {
                Ok(Some(question)) => return Some(question),
                Ok(None) if attempt < 3 => tokio::time::sleep(Duration::from_millis(300)).await,
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, message = id, "could not read the question of a whatsapp card");
                    return None;
                }
            }
        }
        None
    }

    /// Answers a message askgate does not read (an image, a voice note), once.
    async fn unread(&self, said: &Said<'_>, kind: &str) {
        if !matches!(self.engine.router().first_sighting(&said.key).await, Ok(true)) {
            return;
        }
        let text = say!(crate::question::Locale::default(), "whatsapp.unread", kind = kind);
        self.answer(said.from, &text, said.id).await;
    }

    /// The first message after the window had closed, that is no command: the person answers
    /// the template's call to reply. The questions waiting for them there are shown as cards
    /// now (the template carried only the prompt); false when none waits, and the message is
    /// then taken as any other.
    async fn show_waiting(&self, said: &Said<'_>) -> bool {
        let waiting = match self.engine.records().pending_for(Some(&said.conversation), 10).await {
            Ok(waiting) => waiting,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the questions waiting on whatsapp");
                return false;
            }
        };
        let waiting: Vec<Question> =
            waiting.into_iter().filter(|q| q.admits(&said.user, Some(&said.conversation))).collect();
        if waiting.is_empty() || !matches!(self.engine.router().first_sighting(&said.key).await, Ok(true)) {
            return !waiting.is_empty();
        }
        for question in waiting {
            let message = render::card(&question, self.clock.now_ms());
            match self.send(said.from, &message).await {
                Ok(card) => {
                    let delivery = Delivery::card(question.id, SURFACE, said.from.to_owned(), card);
                    self.engine.delivery().record_delivery(&question, delivery).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, question = %question.id, "could not show a waiting question on whatsapp")
                }
            }
        }
        true
    }

    /// A status of a message askgate sent: its errors are logged; a card that failed because
    /// the window had closed (131047, which WhatsApp may report here rather than when it was
    /// sent) goes out again as the template, or its question ends saying why.
    async fn on_status(&self, id: &str, recipient: &str, status: &str, errors: &[(i64, String)]) {
        for (code, words) in errors {
            tracing::warn!(message = id, recipient, status, code, words, "WhatsApp did not deliver a message");
        }
        if !errors.iter().any(|(code, _)| *code == code::REENGAGEMENT) {
            return;
        }
        let Some(question) = self.card(recipient, id).await.filter(Question::is_pending) else { return };
        match self.outside_window(&question, recipient).await {
            Ok(delivery) => self.engine.delivery().record_delivery(&question, delivery).await,
            Err(e) => tracing::warn!(error = %e, question = %question.id, "a card WhatsApp did not deliver"),
        }
    }

    /// Sends `question` to `number`, who has not written in the last 24 hours: as the template
    /// (its card, which a reply answers), or, without one, not at all: the question ends as
    /// cancelled, saying why, and the error says it too.
    async fn outside_window(&self, question: &Question, number: &str) -> Result<Delivery, ChannelError> {
        let Some(template) = &self.template else {
            let why = format!(
                "{number} has not written to the WhatsApp number in the last 24 hours, and WhatsApp lets a business \
                 write first only with an approved template: set template (and template_language) in \
                 [channels.whatsapp]"
            );
            // A question escalated here is another conversation's: it stays as it is there. (The
            // lane shows such a copy with its conversation set to this one; a status reports
            // on the question as stored, whose conversation is its own.)
            let own = question.conversation.as_ref().map(Conversation::as_str) == Some(&format!("whatsapp:{number}"));
            let copy = !own || question.is_escalation_copy();
            if !copy && let Err(e) = self.engine.claims().cancel(question, &why).await {
                tracing::error!(error = %e, question = %question.id, "could not cancel a question WhatsApp cannot deliver");
            }
            return Err(ChannelError::permanent(why));
        };
        let message = render::template(question, &template.name, &template.language);
        let sent = self.send(number, &message).await.map_err(|e| channel_error(&e))?;
        tracing::info!(question = %question.id, number, template = template.name, "sent a question as the template: the person is outside the 24-hour window");
        Ok(Delivery::card(question.id, SURFACE, number.to_owned(), sent))
    }

    /// Whether `number` wrote within the last 24 hours (less a margin).
    async fn window_open(&self, number: &str) -> bool {
        self.last_heard(number).await.is_some_and(|at| self.clock.now_ms() - at < WINDOW_MS - WINDOW_MARGIN_MS)
    }
}

/// Who said something, and where: what every kind of message is applied with.
struct Said<'a> {
    /// The message's id.
    id: &'a str,
    /// The sender's number.
    from: &'a str,
    name: Option<&'a str>,
    /// The message's key, so that a redelivery is applied once.
    key: String,
    conversation: Conversation,
    user: UserRef,
}

/// The emoji an approval's card would offer for `emoji`: 👍 allows once, 👎 rejects.
fn approval_key<'a>(question: &Question, emoji: &'a str) -> &'a str {
    let plain: String = emoji.chars().filter(|c| *c != '\u{fe0f}').collect();
    match (question.kind, plain.as_str()) {
        (Kind::Approval, "👍") => "✅",
        (Kind::Approval, "👎") => "❌",
        _ => emoji,
    }
}

fn channel_error(e: &ApiError) -> ChannelError {
    match e.retry() {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

/// Whether `number` is a phone number in E.164: `+`, a country code that does not start with
/// 0, at most 15 digits in all (at least 7).
pub(crate) fn is_e164(number: &str) -> bool {
    number.strip_prefix('+').is_some_and(|digits| {
        (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0')
    })
}

/// The number in E.164 of a WhatsApp id (`15551234567`, the webhook's `wa_id`): `+15551234567`.
fn number_of(wa_id: &str) -> Option<String> {
    let number = format!("+{}", wa_id.trim_start_matches('+'));
    is_e164(&number).then_some(number)
}

/// `whatsapp:+15551234567`.
fn conversation_of(number: &str) -> Option<Conversation> {
    Conversation::parse(&format!("whatsapp:{number}")).ok()
}

/// `whatsapp:+15551234567`.
fn user_ref(number: &str) -> Option<UserRef> {
    UserRef::parse(&format!("whatsapp:{number}")).ok()
}

/// The number of a conversation: `+15551234567` of `whatsapp:+15551234567`.
fn number_in(conversation: &Conversation) -> Result<&str, ChannelError> {
    conversation.as_str().strip_prefix("whatsapp:").filter(|n| is_e164(n)).ok_or_else(|| {
        ChannelError::permanent(format!("`{conversation}` is not a WhatsApp number like whatsapp:+15551234567"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Ask;

    #[test]
    fn a_conversation_is_a_number_in_e164() {
        assert_eq!(number_of("15551234567").as_deref(), Some("+15551234567"));
        assert_eq!(number_of("+15551234567").as_deref(), Some("+15551234567"));
        assert_eq!(number_of("0555"), None);
        assert!(is_e164("+4915112345678") && !is_e164("+0155512345") && !is_e164("15551234567"));
        assert!(!is_e164("+1234567890123456"), "more than 15 digits");
        let c = Conversation::parse("whatsapp:+15551234567").unwrap();
        assert_eq!(number_in(&c).unwrap(), "+15551234567");
        assert!(number_in(&Conversation::parse("whatsapp:alice").unwrap()).is_err());
        assert_eq!(user_ref("+15551234567").unwrap().as_str(), "whatsapp:+15551234567");
    }

    #[test]
    fn a_thumb_allows_an_approval_once_or_says_yes_to_a_confirm() {
        let approval = crate::question::test_question(Ask::approval("rm -rf build/"));
        assert!(matches!(
            reactions::command(&approval, approval_key(&approval, "👍")),
            Some(Command::Approve { how: crate::command::Allow::Once, .. })
        ));
        assert!(matches!(reactions::command(&approval, approval_key(&approval, "👎")), Some(Command::Decline { .. })));
        let confirm = crate::question::test_question(Ask::confirm("Archive?"));
        assert_eq!(approval_key(&confirm, "👍"), "👍");
        assert!(reactions::command(&confirm, approval_key(&confirm, "👍")).is_some());
    }
}
