//! What askgate sends to Google Chat: cards, their updates once answered (the outcome, no
//! buttons), plain text.

use async_trait::async_trait;
use serde_json::json;

use super::client::ApiError;
use super::{GoogleChat, SURFACE, render, space_of};
use crate::engine::{Channel, ChannelError, Retry};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};

fn channel_error(e: &ApiError) -> ChannelError {
    match e.retry() {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

impl GoogleChat {
    async fn post(&self, space: &str, message: &serde_json::Value) -> Result<String, ChannelError> {
        let posted = self.client.create(space, message, None).await;
        self.heard(&posted);
        posted.map_err(|e| channel_error(&e))
    }

    /// Replaces the cards of each delivered card message with `cards`.
    async fn update(&self, deliveries: &[Delivery], cards: &serde_json::Value) -> Result<(), ChannelError> {
        let mut failures = Vec::new();
        for card in deliveries.iter().filter(|c| c.role == DeliveryRole::Card) {
            let updated = self.client.update(&card.message, "cardsV2", &json!({"cardsV2": cards})).await;
            self.heard(&updated);
            if let Err(e) = updated {
                failures.push(format!("{}: {e}", card.message));
            }
        }
        ChannelError::unless_failed("update", &failures)
    }
}

#[async_trait]
impl Channel for GoogleChat {
    fn name(&self) -> &'static str {
        "google_chat"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let space = space_of(conversation)?;
        let card = render::card(question, self.clock.now_ms());
        let name = self.post(space, &json!({"cardsV2": card})).await?;
        Ok(vec![Delivery::card(question.id, SURFACE, space.to_owned(), name)])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let updated = self.update(cards, &render::resolved(question)).await;
        if let Some((conversation, line)) = crate::wording::expiry_notice(question) {
            self.send_text(conversation, &line).await?;
        }
        updated
    }

    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        self.update(cards, &render::card(question, self.clock.now_ms())).await
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let space = space_of(conversation)?;
        self.post(space, &json!({"text": render::text(text)})).await.map(|_| ())
    }
}
