//! What askgate sends to Teams: cards (to a conversation askgate has heard from, or to a
//! person's personal chat with the bot), their updates in place once answered, plain text.

use async_trait::async_trait;
use serde_json::Value;

use super::references::Place;
use super::{SURFACE, Teams, channel_error, render};
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Question, Surface};
use crate::store::{Delivery, DeliveryRole};

/// Where a message to a conversation goes: its connector and its Teams conversation id.
struct Target {
    place: Place,
    conversation: String,
}

impl Teams {
    /// Where `conversation` is: a conversation askgate heard from, or the personal chat of a
    /// person who wrote to the bot (started now if it was not known).
    async fn target(&self, conversation: &Conversation) -> Result<Target, ChannelError> {
        let store = |e: crate::store::StoreError| ChannelError::transient(e.to_string(), None);
        let id = conversation
            .as_str()
            .strip_prefix("teams:")
            .ok_or_else(|| ChannelError::permanent(format!("`{conversation}` is not a Teams conversation")))?;
        if let Some(place) = self.references.place(id).await.map_err(store)? {
            return Ok(Target { place, conversation: id.to_owned() });
        }
        let Some(person) = self.references.person(id).await.map_err(store)? else {
            return Err(ChannelError::permanent(format!(
                "askgate has not heard from `{conversation}` on Teams: Teams lets a bot write only to a \
                 conversation it was added to or a person who wrote to it, so ask them to send the bot a \
                 message first"
            )));
        };
        let chat = match &person.personal {
            Some(chat) => chat.clone(),
            None => {
                let bot = format!("28:{}", self.app_id);
                let started =
                    self.connector.personal_chat(&person.service_url, &bot, &person.id, person.tenant.as_deref());
                let chat = started.await.map_err(|e| channel_error(&e))?;
                self.references.chat_started(id, &person, &chat).await.map_err(store)?;
                chat
            }
        };
        let place = Place { service_url: person.service_url, tenant: person.tenant };
        Ok(Target { place, conversation: chat })
    }

    /// Whether askgate has heard neither from `conversation` nor from the person it names.
    async fn never_heard(&self, conversation: &Conversation) -> Result<bool, crate::store::StoreError> {
        let Some(id) = conversation.as_str().strip_prefix("teams:") else { return Ok(false) };
        Ok(self.references.place(id).await?.is_none() && self.references.person(id).await?.is_none())
    }

    async fn send(&self, conversation: &Conversation, activity: &Value) -> Result<(String, String), ChannelError> {
        let target = self.target(conversation).await?;
        let sent = self.connector.send(&target.place.service_url, &target.conversation, activity).await;
        Ok((target.conversation, sent.map_err(|e| channel_error(&e))?))
    }

    /// Replaces each card of `cards` by `activity`.
    async fn update(&self, cards: &[Delivery], activity: &Value) -> Result<(), ChannelError> {
        let mut failures = Vec::new();
        for card in cards.iter().filter(|c| c.role == DeliveryRole::Card) {
            let place = self.references.place(&card.chat).await.ok().flatten();
            let Some(place) = place else {
                failures.push(format!("{}/{}: its conversation is not known", card.chat, card.message));
                continue;
            };
            if let Err(e) = self.connector.update(&place.service_url, &card.chat, &card.message, activity).await {
                failures.push(format!("{}/{}: {e}", card.chat, card.message));
            }
        }
        ChannelError::unless_failed("update", &failures)
    }
}

#[async_trait]
impl Channel for Teams {
    fn name(&self) -> &'static str {
        "teams"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let (chat, id) = match self.send(conversation, &render::card(question, self.clock.now_ms())).await {
            Ok(sent) => sent,
            Err(e) if matches!(self.never_heard(conversation).await, Ok(true)) => {
                // Nowhere to ask: the question ends now, saying why, rather than wait for a
                // card nobody sees. A copy escalated here stays as it is where it was asked.
                if !question.is_escalation_copy()
                    && let Err(e) = self.claims.cancel(question, &e.to_string()).await
                {
                    tracing::error!(error = %e, question = %question.id, "could not cancel a question Teams cannot carry");
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        Ok(vec![Delivery::card(question.id, SURFACE, chat, id)])
    }

    /// Updates each card in place to show the outcome and who answered, with nothing to tap.
    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let updated = self.update(cards, &render::resolved(question, self.clock.now_ms())).await;
        if let Some((conversation, line)) = crate::wording::expiry_notice(question) {
            self.send_text(conversation, &line).await?;
        }
        updated
    }

    /// A quorum approval's count so far, on its cards (their buttons stay).
    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        self.update(cards, &render::card(question, self.clock.now_ms())).await
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.send(conversation, &render::text(text)).await.map(|_| ())
    }
}
