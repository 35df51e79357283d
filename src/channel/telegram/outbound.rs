//! What askgate sends to Telegram: cards, their updates and retraction, plain text.

use async_trait::async_trait;
use teloxide::RequestError;
use teloxide::payloads::EditMessageTextSetters;
use teloxide::prelude::{Request, Requester};
use teloxide::types::{ChatId, MessageId, ParseMode};

use super::{Telegram, render, retry};
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Locale, Question, Surface, UserRef};
use crate::store::{Delivery, DeliveryRole};
use crate::wording;

impl Telegram {
    /// Deletes a prompt for the next message; one too old for Telegram to delete (48 hours) is
    /// edited to say it is closed instead, so that nobody replies to it in vain.
    async fn remove_prompt(&self, chat: ChatId, message: MessageId, l: Locale) -> Result<(), RequestError> {
        let delete = self.bot.delete_message(chat, message);
        if retry(|| delete.clone().send()).await.is_ok() {
            return Ok(());
        }
        let edit = self.bot.edit_message_text(chat, message, crate::say!(l, "tg.closed"));
        retry(|| edit.clone().send()).await.map(|_| ())
    }
}

#[async_trait]
impl Channel for Telegram {
    fn name(&self) -> &'static str {
        "telegram"
    }

    fn surface(&self) -> Surface {
        super::SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let card = render::card(question, self.clock.now_ms());
        let sent = self.send(conversation, card.text, card.keyboard).await?;
        Ok(vec![Delivery::card(question.id, super::SURFACE, sent.chat.id.0.to_string(), sent.id.0.to_string())])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let text = &render::resolved(question, self.clock.now_ms());
        let edited = each_message(cards, |chat, message, role| async move {
            match role {
                // Without a reply_markup the edit removes the keyboard.
                DeliveryRole::Card => {
                    let edit = self.bot.edit_message_text(chat, message, text.clone()).parse_mode(ParseMode::Html);
                    retry(|| edit.clone().send()).await.map(|_| ())
                }
                // The card shows the outcome; the prompt that asked for a reply goes.
                DeliveryRole::Prompt | DeliveryRole::Note => {
                    self.remove_prompt(chat, message, question.presentation.locale).await
                }
            }
        })
        .await;
        if let Some((conversation, line)) = wording::expiry_notice(question) {
            let line = render::escape(&render::shorten(&line, 500));
            self.send(conversation, line, None).await?;
        }
        edited
    }

    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let card = &render::card(question, self.clock.now_ms());
        each_message(cards, |chat, message, _| async move {
            let mut edit = self.bot.edit_message_text(chat, message, card.text.clone()).parse_mode(ParseMode::Html);
            if let Some(keyboard) = &card.keyboard {
                edit = edit.reply_markup(keyboard.clone());
            }
            retry(|| edit.clone().send()).await.map(|_| ())
        })
        .await
    }

    async fn remind(&self, question: &Question, people: &[UserRef], now_ms: i64) -> Result<(), ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(()) };
        // A mention by id: Telegram links it to the person and notifies them.
        let mentions: Vec<String> = people
            .iter()
            .filter_map(|u| u.as_str().strip_prefix("telegram:")?.parse::<u64>().ok())
            .map(|id| format!("<a href=\"tg://user?id={id}\">user {id}</a>"))
            .collect();
        let card = render::shorten(&wording::card(question, now_ms), render::MAX_TEXT - 300);
        // The line's own words need no escaping; the mentions are HTML already.
        let line = wording::reminder_line(&mentions.join(", "), question.presentation.locale);
        self.send(conversation, format!("{line}\n{}", render::escape(&card)), None).await.map(|_| ())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.send(conversation, render::escape(&render::shorten(text, render::MAX_TEXT)), None).await.map(|_| ())
    }
}

/// Does `act` to each message in `cards` (those whose ids are Telegram's), and names the ones
/// it failed on.
async fn each_message<F, Done>(cards: &[Delivery], mut act: F) -> Result<(), ChannelError>
where
    F: FnMut(ChatId, MessageId, DeliveryRole) -> Done,
    Done: std::future::Future<Output = Result<(), RequestError>>,
{
    let mut failures = Vec::new();
    for card in cards {
        let (Ok(chat), Ok(message)) = (card.chat.parse::<i64>(), card.message.parse::<i32>()) else { continue };
        if let Err(e) = act(ChatId(chat), MessageId(message), card.role).await {
            failures.push(format!("{}/{}: {e}", card.chat, card.message));
        }
    }
    ChannelError::unless_failed("edit", &failures)
}
