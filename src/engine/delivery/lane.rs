//! One lane of a channel's group: the deliveries of its conversations in the order they were
//! queued, a card tried again with backoff while its question waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Backlog, Outbound};
use crate::engine::Channel;
use crate::engine::recent::Recent;
use crate::engine::retry::{Backoff, Retry};
use crate::question::Question;
use crate::store::{self, DeliveryRole, Store, StoreExt};

/// How long a card that could not be delivered waits before the next try, at most.
const CARD_BACKOFF: Backoff =
    Backoff { first: Duration::from_secs(1), max: Duration::from_secs(60), retries: u32::MAX };

/// One lane: deliveries in the order they were queued.
pub(super) struct Lane {
    pub(super) store: Arc<dyn Store>,
    pub(super) backlog: Arc<Backlog>,
    pub(super) channel: Arc<dyn Channel>,
    pub(super) undelivered: Arc<AtomicUsize>,
    pub(super) stop: CancellationToken,
    pub(super) abandon: CancellationToken,
}

impl Lane {
    pub(super) async fn run(self, mut queue: mpsc::UnboundedReceiver<Outbound>) {
        // Cards shown lately, so that a retraction rarely reads them back from the store.
        let mut shown: Recent<Vec<store::Delivery>> = Recent::new(512);
        // Questions resolved lately: a card whose question was resolved before it went out (a
        // resolution racing the announcement) is not shown at all, and a message recorded
        // late is retracted at once.
        let mut closed: Recent<Arc<Question>> = Recent::new(128);
        // A delivery that outlasts the grace at shutdown (a platform that does not answer,
        // sends tried again) is dropped with the rest of the queue.
        let abandoned = self.abandon.clone();
        let delivering = async {
            while let Some(message) = queue.recv().await {
                self.deliver(message, &mut shown, &mut closed).await;
                self.backlog.done();
            }
        };
        tokio::select! {
            () = delivering => {}
            () = abandoned.cancelled() => {}
        }
    }

    async fn deliver(
        &self,
        message: Outbound,
        shown: &mut Recent<Vec<store::Delivery>>,
        closed: &mut Recent<Arc<Question>>,
    ) {
        match message {
            // The slot is released when this arm ends, shown or not.
            Outbound::Card(question, _slot) => {
                if closed.remove(&question.id).is_some() {
                    return;
                }
                if let Some(mut cards) = self.show(&question).await {
                    for card in &mut cards {
                        if card.conversation.is_none() {
                            card.conversation.clone_from(&question.conversation);
                        }
                        if let Err(e) = self.store.add_delivery(card).await {
                            tracing::error!(question = %question.id, error = %e, "could not record a card");
                        }
                    }
                    // An escalation card is shown on another lane than its question's, whose
                    // retraction may have read the cards just before this one was recorded.
                    if question.is_escalation_copy()
                        && let Ok(Some(now)) = self.store.question(question.id).await
                        && !now.is_pending()
                    {
                        let ended = Question { conversation: question.conversation.clone(), ..now };
                        self.retract(&ended, cards).await;
                        return;
                    }
                    shown.insert(question.id, cards);
                }
            }
            Outbound::Retract(question) => {
                let Some(cards) = self.cards(&question, shown.remove(&question.id)).await else { return };
                if cards.is_empty() {
                    if question.is_escalation_copy() {
                        return;
                    }
                    closed.insert(question.id, question.clone());
                }
                self.retract(&question, cards).await;
            }
            Outbound::Refresh(question) => {
                let Some(cards) = self.cards(&question, shown.get(&question.id).cloned()).await else { return };
                let cards: Vec<store::Delivery> = cards.into_iter().filter(|d| d.role == DeliveryRole::Card).collect();
                if cards.is_empty() && question.is_escalation_copy() {
                    return;
                }
                if let Err(e) = self.channel.refresh(&question, &cards).await {
                    tracing::warn!(question = %question.id, channel = self.channel.name(), error = %e, "could not update a card");
                }
            }
            Outbound::Remind(question, people, now) => {
                if let Err(e) = self.channel.remind(&question, &people, now).await {
                    tracing::warn!(question = %question.id, channel = self.channel.name(), error = %e, "could not send a reminder");
                }
            }
            Outbound::Text(conversation, text) => {
                if let Err(e) = self.channel.send_text(&conversation, &text).await {
                    tracing::warn!(%conversation, error = %e, "could not send a message");
                }
            }
            Outbound::Record(question, delivery, recorded) => {
                if let Err(e) = self.store.add_delivery(&delivery).await {
                    tracing::error!(question = %question.id, error = %e, "could not record a message");
                }
                if let Some(recorded) = recorded {
                    let _ = recorded.send(());
                }
                if let Some(resolved) = closed.get(&question.id) {
                    self.retract(resolved, vec![delivery]).await;
                } else if let Some(cards) = shown.get_mut(&question.id) {
                    cards.push(delivery);
                }
                // Otherwise the cards are not cached here: a retraction reads them all back.
            }
        }
    }

    /// Shows a card, trying again while the failure may pass and the question waits; none when
    /// it could not be shown.
    async fn show(&self, question: &Question) -> Option<Vec<store::Delivery>> {
        let mut attempt = 0;
        loop {
            let error = match self.channel.show_question(question).await {
                Ok(cards) => {
                    if attempt > 0 {
                        self.undelivered.fetch_sub(1, Ordering::Relaxed);
                        tracing::info!(question = %question.id, channel = self.channel.name(), "a card got through");
                    }
                    return Some(cards);
                }
                Err(e) => e,
            };
            let Retry::Later(asked) = error.retry() else {
                tracing::warn!(question = %question.id, channel = self.channel.name(), error = %error, "could not show a question");
                return self.gave_up(attempt);
            };
            attempt += 1;
            if attempt == 1 {
                self.undelivered.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(question = %question.id, channel = self.channel.name(), error = %error, "could not show a question; trying again until it ends");
            }
            let pause = CARD_BACKOFF.pause(attempt, asked);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                // The next start shows it again (a pending question without a card).
                () = self.stop.cancelled() => return self.gave_up(attempt),
            }
            match self.store.question(question.id).await {
                Ok(Some(q)) if q.is_pending() => {}
                Ok(_) => return self.gave_up(attempt),
                Err(e) => {
                    tracing::warn!(question = %question.id, error = %e, "could not check a question before trying its card again")
                }
            }
        }
    }

    /// The messages of `question` on this lane's surface: those it showed (`cached`), or read
    /// back from the store. A question that may have been escalated has cards another lane
    /// may have shown too, so those are always read back. None when the store failed.
    async fn cards(&self, question: &Question, cached: Option<Vec<store::Delivery>>) -> Option<Vec<store::Delivery>> {
        if let Some(cards) = cached.filter(|_| question.nudges.escalate_to.is_none()) {
            return Some(cards);
        }
        match self.store.deliveries(question.id).await {
            Ok(cards) => Some(cards.into_iter().filter(|d| d.surface == self.channel.surface()).collect()),
            Err(e) => {
                tracing::error!(question = %question.id, error = %e, "could not load a question's cards");
                None
            }
        }
    }

    fn gave_up(&self, attempt: u32) -> Option<Vec<store::Delivery>> {
        if attempt > 0 {
            self.undelivered.fetch_sub(1, Ordering::Relaxed);
        }
        None
    }

    async fn retract(&self, question: &Question, cards: Vec<store::Delivery>) {
        if let Err(e) = self.channel.retract(question, &cards).await {
            tracing::warn!(question = %question.id, channel = self.channel.name(), error = %e, "could not retract a card");
        }
    }
}
