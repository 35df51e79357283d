//! What askgate sends to Mattermost: cards with their buttons, the cards again once answered
//! (the outcome, no buttons left), plain text.

use async_trait::async_trait;

use super::{Mattermost, SURFACE, channel_error, channel_of, render};
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};
use crate::wording;

impl Mattermost {
    /// The card's post for `question` in `channel`, as it waits: its text cut to fit, its
    /// choices as signed buttons.
    fn card_post(&self, question: &Question, channel: &str) -> serde_json::Value {
        let text = crate::text::clip(
            &wording::card(question, self.clock.now_ms()),
            render::MAX_MESSAGE,
            &wording::cut_mark(question),
        );
        let choices = crate::channel::buttons::choices(question);
        let buttons: Vec<render::Button<'_>> = choices
            .iter()
            .map(|(label, command)| render::Button { label, command, mac: self.signer.sign(command) })
            .collect();
        render::card(channel, &text, &buttons, &self.actions_url)
    }
}

#[async_trait]
impl Channel for Mattermost {
    fn name(&self) -> &'static str {
        "mattermost"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    /// The text card, with a button per choice under it.
    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let channel = channel_of(conversation)?;
        let post = self.card_post(question, channel);
        let card = self.create(&post).await.map_err(|e| channel_error(&e))?;
        Ok(vec![Delivery::card(question.id, SURFACE, channel.to_owned(), card)])
    }

    /// Each card shows the outcome and who answered, and its buttons are gone.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let text = crate::text::clip(
            &wording::whole(question, self.clock.now_ms()),
            render::MAX_MESSAGE,
            &wording::cut_mark(question),
        );
        let mut failures = Vec::new();
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let post = render::settled(&card.message, &card.chat, &text);
            if let Err(e) = self.update(&card.message, &post).await {
                failures.push(format!("{}/{}: {e}", card.chat, card.message));
            }
        }
        if let Some((conversation, line)) = wording::expiry_notice(question) {
            self.send_text(conversation, &line).await?;
        }
        ChannelError::unless_failed("update", &failures)
    }

    /// A quorum approval's count so far, on its cards (their buttons stay).
    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let mut post = self.card_post(question, &card.chat);
            post["id"] = serde_json::json!(card.message);
            self.update(&card.message, &post).await.map_err(|e| channel_error(&e))?;
        }
        Ok(())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let channel = channel_of(conversation)?;
        self.create(&render::message(channel, text)).await.map(|_| ()).map_err(|e| channel_error(&e))
    }
}
