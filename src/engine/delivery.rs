//! Delivery: the attached channels, the lanes that carry their cards, retractions and
//! messages, and how each channel stands.
//!
//! A conversation's deliveries keep their order: each goes over one of [`LANES`] lanes chosen
//! by the conversation. Lanes are grouped by the rules' key (`telegram`, or `webhook:sms` per
//! webhook endpoint), so that a bridge that stalls holds up only its own conversations, and a
//! chat the platform paces holds up only its lane. A card that cannot be delivered for a
//! while (the platform down, a 429, a 5xx) is tried again with backoff until its question
//! ends; one the platform refuses for good is logged and left.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::access::policy_key;
use super::recent::Recent;
use super::retry::{Backoff, Retry};
use super::{Channel, ChannelState};
use super::{Engine, Event, lock};
use crate::question::{Conversation, Question, UserRef};
use crate::store::{Delivery, DeliveryRole, Store, StoreExt, Undelivered};

/// How many lanes each group of a channel's conversations is spread over.
pub(super) const LANES: usize = 16;

/// How long the redelivery of cards after a restart waits for the lanes before it reads more.
const REDELIVERY_PAUSE: Duration = Duration::from_secs(5);

/// How long a card that could not be delivered waits before the next try, at most.
const CARD_BACKOFF: Backoff =
    Backoff { first: Duration::from_secs(1), max: Duration::from_secs(60), retries: u32::MAX };

/// The longest an adapter waits for a message it sent to be recorded.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Things the lanes deliver, in order per conversation.
pub(super) enum Outbound {
    Card(Arc<Question>),
    Retract(Arc<Question>),
    /// A pending question changed (a quorum approval's count): its cards show it.
    Refresh(Arc<Question>),
    /// A reminder of a pending question, naming these people, sent at this time.
    Remind(Arc<Question>, Vec<UserRef>, i64),
    Text(Conversation, String),
    /// A message an adapter sent for a question by itself (a prompt for the next message),
    /// to be retracted with the question's cards; `recorded` hears once it is stored.
    Record(Arc<Question>, Delivery, Option<tokio::sync::oneshot::Sender<()>>),
}

/// How many messages the lanes hold (queued or being delivered), and a wake-up for when
/// none are left.
#[derive(Default)]
pub(super) struct Backlog {
    count: AtomicUsize,
    idle: Notify,
}

impl Backlog {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

/// An attached channel, its lanes per group, and how many of its cards wait to be delivered.
pub(super) struct Attached {
    channel: Arc<dyn Channel>,
    groups: HashMap<String, Vec<mpsc::UnboundedSender<Outbound>>>,
    undelivered: Arc<AtomicUsize>,
}

/// A conversation that no enabled channel serves.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no enabled channel serves `{conversation}`; the channels here are {}", listed(channels))]
pub struct NotServed {
    /// The conversation.
    pub conversation: Conversation,
    /// The enabled channels (webhook endpoints as `webhook:<name>`).
    pub channels: Vec<String>,
}

fn listed(channels: &[String]) -> String {
    if channels.is_empty() { "none".to_owned() } else { channels.join(", ") }
}

/// The outbox: the attached channels with their lanes, how each channel stands, and what the
/// lanes hold. Its own locks; nothing else reaches into them.
pub(super) struct Outbox {
    store: Arc<dyn Store>,
    channels: Mutex<HashMap<&'static str, Attached>>,
    states: Mutex<BTreeMap<&'static str, ChannelState>>,
    backlog: Arc<Backlog>,
    /// The lanes' tasks, among the engine's.
    lanes: TaskTracker,
    tasks: super::Tasks,
    stop: CancellationToken,
    /// Fires when the lanes' grace at shutdown ran out: each drops what it was delivering.
    abandon: CancellationToken,
}

impl Outbox {
    pub(super) fn new(store: Arc<dyn Store>, stop: CancellationToken, tasks: super::Tasks) -> Self {
        Self {
            store,
            channels: Mutex::default(),
            states: Mutex::default(),
            backlog: Arc::default(),
            lanes: TaskTracker::new(),
            tasks,
            stop,
            abandon: CancellationToken::new(),
        }
    }

    /// See [`Engine::attach`].
    fn attach(&self, channel: Arc<dyn Channel>) {
        let name = channel.name();
        let attached = Attached { channel, groups: HashMap::new(), undelivered: Arc::default() };
        lock(&self.channels).insert(name, attached);
        lock(&self.states).insert(name, ChannelState::Connecting);
    }

    /// See [`Engine::check_served`].
    fn check_served(&self, conversation: &Conversation) -> Result<(), NotServed> {
        let channels = lock(&self.channels);
        if channels.get(conversation.channel()).is_some_and(|a| a.channel.serves(conversation)) {
            return Ok(());
        }
        let mut names: Vec<String> = channels.values().flat_map(|a| a.channel.served()).collect();
        names.sort();
        Err(NotServed { conversation: conversation.clone(), channels: names })
    }

    fn set_state(&self, channel: &'static str, state: ChannelState) {
        let mut states = lock(&self.states);
        if states.get(channel) != Some(&state) {
            match &state {
                ChannelState::Down(why) => tracing::warn!(channel, "{channel} is down: {why}"),
                other => tracing::debug!(channel, "{channel} is {other}"),
            }
        }
        states.insert(channel, state);
    }

    fn states(&self) -> Vec<(&'static str, ChannelState)> {
        let undelivered = self.undelivered_cards();
        let states = lock(&self.states).clone();
        states
            .into_iter()
            .map(|(name, state)| {
                let waiting = undelivered.get(name).copied().unwrap_or(0);
                match state {
                    ChannelState::Up if waiting > 0 => {
                        (name, ChannelState::Degraded(format!("{waiting} cards waiting to be delivered")))
                    }
                    other => (name, other),
                }
            })
            .collect()
    }

    fn undelivered_cards(&self) -> BTreeMap<&'static str, usize> {
        lock(&self.channels).iter().map(|(name, a)| (*name, a.undelivered.load(Ordering::Relaxed))).collect()
    }

    /// Queues a delivery on the lane of its conversation.
    pub(super) fn send(&self, conversation: &Conversation, message: Outbound) {
        let mut channels = lock(&self.channels);
        let Some(attached) = channels.get_mut(conversation.channel()) else {
            tracing::debug!(%conversation, "no channel attached for this conversation");
            return;
        };
        let (channel, undelivered) = (attached.channel.clone(), attached.undelivered.clone());
        let lanes = attached.groups.entry(policy_key(conversation)).or_insert_with(|| {
            (0..LANES)
                .map(|_| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let lane = Lane {
                        store: self.store.clone(),
                        backlog: self.backlog.clone(),
                        channel: channel.clone(),
                        undelivered: undelivered.clone(),
                        stop: self.stop.clone(),
                        abandon: self.abandon.clone(),
                    };
                    self.tasks.spawn(self.lanes.track_future(lane.run(rx)));
                    tx
                })
                .collect()
        });
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(conversation, &mut hasher);
        let lane = usize::try_from(std::hash::Hasher::finish(&hasher) % LANES as u64).unwrap_or(0);
        self.backlog.add();
        if lanes[lane].send(message).is_err() {
            self.backlog.done();
            tracing::warn!(%conversation, "the channel stopped; a message was not delivered");
        }
    }

    /// See [`Engine::outbound_idle`].
    pub(super) async fn idle(&self) {
        let backlog = &self.backlog;
        loop {
            let idle = backlog.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if backlog.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Detaches every channel and gives the lanes `grace` to deliver what they hold; false
    /// when some did not finish in time, and those drop what they held (a card not shown is
    /// shown at the next start) and end at once.
    pub(super) async fn close(&self, grace: Duration) -> bool {
        lock(&self.channels).clear();
        self.lanes.close();
        let delivered = tokio::time::timeout(grace, self.lanes.wait()).await.is_ok();
        self.abandon.cancel();
        delivered
    }
}

impl Engine {
    /// Attaches a channel's outbound half: cards, retractions and text for conversations of
    /// `channel.name()` go to it, in order per conversation.
    pub fn attach(&self, channel: Arc<dyn Channel>) {
        self.inner.outbox.attach(channel);
    }

    /// Checks that an attached channel serves `conversation`.
    ///
    /// # Errors
    /// [`NotServed`] naming the channels that are enabled.
    pub fn check_served(&self, conversation: &Conversation) -> Result<(), NotServed> {
        self.inner.outbox.check_served(conversation)
    }

    /// Records how an attached channel's connection stands (adapters report it).
    pub fn set_channel_state(&self, channel: &'static str, state: ChannelState) {
        self.inner.outbox.set_state(channel, state);
    }

    /// Every attached channel with how it stands, by name: as its adapter reported, or
    /// `degraded` while cards of it wait to be delivered.
    pub fn channel_states(&self) -> Vec<(&'static str, ChannelState)> {
        self.inner.outbox.states()
    }

    /// How many cards of each channel could not be delivered yet and are being tried again.
    pub fn undelivered_cards(&self) -> BTreeMap<&'static str, usize> {
        self.inner.outbox.undelivered_cards()
    }

    /// Queues a delivery on the lane of its conversation.
    pub(super) fn outbound(&self, conversation: &Conversation, message: Outbound) {
        self.inner.outbox.send(conversation, message);
    }

    /// Returns once the lanes hold nothing: every card, retraction and message handed to them
    /// so far was delivered (or given up). A card that is being tried again until its question
    /// ends holds this until then.
    pub async fn outbound_idle(&self) {
        self.inner.outbox.idle().await;
    }

    /// Records a message an adapter sent for `question` outside its card (a prompt for the
    /// next message), so that it is retracted with the cards; one recorded after the question
    /// was resolved is retracted at once.
    ///
    /// Returns once it is stored (or after [`RECORD_WAIT`], when the lane is held up): an
    /// adapter that handles its updates one after another then reads a reply to the prompt
    /// as one, however soon it comes.
    pub async fn record_delivery(&self, question: &Question, delivery: Delivery) {
        let Some(c) = &question.conversation else { return };
        let (recorded, stored) = tokio::sync::oneshot::channel();
        self.outbound(c, Outbound::Record(Arc::new(question.clone()), delivery, Some(recorded)));
        let _ = tokio::time::timeout(RECORD_WAIT, stored).await;
    }

    /// Queues `message` about `question` on the lane of its conversation and, when it may
    /// have been escalated to a conversation of another channel, on that one's too, as a
    /// copy placed there: each lane handles the cards of its own surface.
    pub(super) fn to_its_conversations(&self, question: &Arc<Question>, message: fn(Arc<Question>) -> Outbound) {
        let Some(conversation) = &question.conversation else { return };
        self.outbound(conversation, message(question.clone()));
        if let Some(to) = &question.nudges.escalate_to
            && to.channel() != conversation.channel()
        {
            let copy = Question { conversation: Some(to.clone()), ..(**question).clone() };
            self.outbound(to, message(Arc::new(copy)));
        }
    }

    /// Sends plain text to a conversation through its channel, made safe to show (it is a
    /// function's or an agent's words: see [`crate::text::safe`]).
    pub fn send_text(&self, conversation: &Conversation, text: String) {
        let text = match crate::text::safe(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(safe) => safe,
        };
        self.outbound(conversation, Outbound::Text(conversation.clone(), text));
    }

    /// A question was persisted: render it and tell observers.
    pub(super) fn announce(&self, question: Arc<Question>) {
        if let Some(c) = &question.conversation {
            self.outbound(c, Outbound::Card(question.clone()));
        }
        self.wake_sweeper_for(&question);
        self.inner.metrics.asked();
        self.inner.bus.emit(Event::Asked(question));
    }

    /// Shows `question` in the conversation it is escalated to, after a line that says why.
    pub(super) fn show_escalated(&self, question: &Question, to: &Conversation) {
        let Some(conversation) = &question.conversation else { return };
        let waited = std::time::Duration::from_millis(question.nudges.escalate_after.unwrap_or(0));
        // The line reads as the conversation it is escalated to speaks; the card as its own.
        let locale = self.policies().presentation_of(Some(to), None).locale;
        let line = crate::wording::replies::escalated(conversation.as_str(), waited, locale);
        self.send_text(to, line);
        // Placed in the conversation it is escalated to (the card goes there, its answers
        // come from there); its own conversation's lane keeps the rest.
        let card = Question { conversation: Some(to.clone()), ..question.clone() };
        self.outbound(to, Outbound::Card(Arc::new(card)));
    }

    /// Shows again the pending questions asked before `before` that have no card (their
    /// delivery failed and askgate stopped before it got through): a card is never dropped
    /// while its question waits. Questions asked since are on their way through the lanes.
    ///
    /// A page at a time: the next page is read once the lanes delivered the last (or after
    /// [`REDELIVERY_PAUSE`], when a channel that is down holds them), so that many such
    /// questions never sit in memory at once.
    pub(super) async fn redeliver_undelivered(&self, before: i64) {
        let mut after = None;
        loop {
            let page = match self.inner.store.undelivered(before, after, 500).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::error!(error = %e, "could not look for questions whose card was not delivered");
                    return;
                }
            };
            let Some(last) = page.last() else { return };
            after = Some(last.question.id);
            let mut shown = 0;
            for Undelivered { question, own, escalation } in page {
                if own
                    && let Some(c) = &question.conversation
                    && self.check_served(c).is_ok()
                {
                    tracing::debug!(question = %question.id, "showing a card that was not delivered before the stop");
                    self.outbound(c, Outbound::Card(Arc::new(question.clone())));
                    shown += 1;
                }
                if escalation
                    && let Some(to) = &question.escalated_to
                    && self.check_served(to).is_ok()
                {
                    tracing::debug!(question = %question.id, %to, "showing an escalation card that was not delivered before the stop");
                    self.show_escalated(&question, to);
                    shown += 1;
                }
            }
            if shown > 0 {
                tracing::info!("showing {shown} cards that were not delivered before the stop");
                let _ = tokio::time::timeout(REDELIVERY_PAUSE, self.outbound_idle()).await;
            }
        }
    }
}

/// Whether `question` is the copy sent to the lane of the conversation it may have been
/// escalated to (see [`Engine::to_its_conversations`]): with no card of its own there, that
/// lane has nothing to do.
fn is_escalation_copy(question: &Question) -> bool {
    question.conversation.is_some() && question.conversation == question.nudges.escalate_to
}

/// One lane: deliveries in the order they were queued.
struct Lane {
    store: Arc<dyn Store>,
    backlog: Arc<Backlog>,
    channel: Arc<dyn Channel>,
    undelivered: Arc<AtomicUsize>,
    stop: CancellationToken,
    abandon: CancellationToken,
}

impl Lane {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Outbound>) {
        // Cards shown lately, so that a retraction rarely reads them back from the store.
        let mut shown: Recent<Vec<Delivery>> = Recent::new(512);
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

    async fn deliver(&self, message: Outbound, shown: &mut Recent<Vec<Delivery>>, closed: &mut Recent<Arc<Question>>) {
        match message {
            Outbound::Card(question) => {
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
                    if is_escalation_copy(&question)
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
                    if is_escalation_copy(&question) {
                        return;
                    }
                    closed.insert(question.id, question.clone());
                }
                self.retract(&question, cards).await;
            }
            Outbound::Refresh(question) => {
                let Some(cards) = self.cards(&question, shown.get(&question.id).cloned()).await else { return };
                let cards: Vec<Delivery> = cards.into_iter().filter(|d| d.role == DeliveryRole::Card).collect();
                if cards.is_empty() && is_escalation_copy(&question) {
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
    async fn show(&self, question: &Question) -> Option<Vec<Delivery>> {
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
    async fn cards(&self, question: &Question, cached: Option<Vec<Delivery>>) -> Option<Vec<Delivery>> {
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

    fn gave_up(&self, attempt: u32) -> Option<Vec<Delivery>> {
        if attempt > 0 {
            self.undelivered.fetch_sub(1, Ordering::Relaxed);
        }
        None
    }

    async fn retract(&self, question: &Question, cards: Vec<Delivery>) {
        if let Err(e) = self.channel.retract(question, &cards).await {
            tracing::warn!(question = %question.id, channel = self.channel.name(), error = %e, "could not retract a card");
        }
    }
}
