//! What askgate sends to WhatsApp: cards (within the window, else the template), the outcome as
//! a reply to each card, plain text.

use async_trait::async_trait;

use super::{SURFACE, WhatsApp, channel_error, code, number_in, render};
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};

#[async_trait]
impl Channel for WhatsApp {
    fn name(&self) -> &'static str {
        "whatsapp"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    /// The card, while the person's window is open; else (or when WhatsApp says it closed,
    /// 131047) the template, or the question ends saying why.
    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let number = number_in(conversation)?;
        if !self.window_open(number).await {
            return self.outside_window(question, number).await.map(|card| vec![card]);
        }
        let card = render::card(question, self.clock.now_ms());
        match self.send(number, &card).await {
            Ok(sent) => Ok(vec![Delivery::card(question.id, SURFACE, number.to_owned(), sent)]),
            Err(e) if e.code() == Some(code::REENGAGEMENT) => {
                self.outside_window(question, number).await.map(|card| vec![card])
            }
            Err(e) => Err(channel_error(&e)),
        }
    }

    /// Answers each card with the outcome and who gave it: WhatsApp cannot edit a message.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let mut failures = Vec::new();
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let reply = render::replying(render::outcome(question), &card.message);
            if let Err(e) = self.send(&card.chat, &reply).await {
                failures.push(format!("{}/{}: {e}", card.chat, card.message));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ChannelError::permanent(format!("could not answer the cards {}", failures.join(", "))))
        }
    }

    /// Sends `text`, in as many messages as it needs.
    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let number = number_in(conversation)?;
        for part in crate::text::split(text, render::MAX_TEXT, 8, "… [shortened]") {
            self.send(number, &render::text(&part)).await.map_err(|e| channel_error(&e))?;
        }
        Ok(())
    }
}
