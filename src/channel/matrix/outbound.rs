//! What askgate sends to Matrix: cards and their seeded reactions, their edits once answered
//! (the seeded reactions redacted), plain text.

use async_trait::async_trait;

use super::{Matrix, SURFACE, channel_error, render, room_of};
use crate::channel::reactions;
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};
use crate::wording;

impl Matrix {
    /// Edits the card `card` in `room` to read `text`.
    async fn edit(&self, room: &str, card: &str, text: &str) -> Result<(), ChannelError> {
        self.send(room, "m.room.message", &render::edit(card, text)).await.map(|_| ()).map_err(|e| channel_error(&e))
    }

    /// Redacts the reactions askgate seeded on `card`, so nothing tappable is left.
    async fn unseed(&self, room: &str, card: &str) -> Result<(), ChannelError> {
        let reactions = self.client.relations(room, card, "m.annotation").await.map_err(|e| channel_error(&e))?;
        for reaction in reactions.iter().filter(|r| r["sender"] == self.me.as_str()) {
            let Some(id) = reaction["event_id"].as_str() else { continue };
            self.redact(room, id).await.map_err(|e| channel_error(&e))?;
        }
        Ok(())
    }
}

#[async_trait]
impl Channel for Matrix {
    fn name(&self) -> &'static str {
        "matrix"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    /// The text card, then one reaction per choice under it (see [`reactions`]).
    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let room = room_of(conversation)?;
        let text = wording::card(question, self.clock.now_ms());
        let card = self.send(room, "m.room.message", &render::message("m.text", &text)).await;
        let card = card.map_err(|e| channel_error(&e))?;
        for seed in reactions::seeds(question) {
            // A reaction that could not be seeded leaves its typed command on the card.
            if let Err(e) = self.send(room, "m.reaction", &render::reaction(&card, seed.key)).await {
                tracing::warn!(error = %e, key = seed.key, "could not seed a reaction on a matrix card");
            }
        }
        Ok(vec![Delivery::card(question.id, SURFACE, room.to_owned(), card)])
    }

    /// Edits each card to show the outcome and who answered, and takes its reactions away.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let text = wording::whole(question, self.clock.now_ms());
        let mut failures = Vec::new();
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let done = match self.edit(&card.chat, &card.message, &text).await {
                Ok(()) => self.unseed(&card.chat, &card.message).await,
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                failures.push(format!("{}/{}: {e}", card.chat, card.message));
            }
        }
        if let Some((conversation, line)) = wording::expiry_notice(question) {
            self.send_text(conversation, &line).await?;
        }
        ChannelError::unless_failed("edit", &failures)
    }

    /// A quorum approval's count so far, on its cards (their reactions stay).
    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let text = wording::card(question, self.clock.now_ms());
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            self.edit(&card.chat, &card.message, &text).await?;
        }
        Ok(())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let room = room_of(conversation)?;
        self.send(room, "m.room.message", &render::message("m.notice", text))
            .await
            .map(|_| ())
            .map_err(|e| channel_error(&e))
    }
}
