//! Delivery: the attached channels, the lanes that carry their cards, retractions and
//! messages, and how each channel stands.
//!
//! A conversation's deliveries keep their order: each goes over one of [`LANES`] lanes chosen
//! by the conversation. Lanes are grouped by the rules' key (`telegram`, or `webhook:sms` per
//! webhook endpoint), so that a bridge that stalls holds up only its own conversations, and a
//! chat the platform paces holds up only its lane. A card that cannot be delivered for a
//! while (the platform down, a 429, a 5xx) is tried again with backoff until its question
//! ends; one the platform refuses for good is logged and left. A group's lanes hold at most
//! [`held::HELD`] cards; the rest wait in the store and are read back in the order asked
//! (see [`held`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::access::policy_key;
mod held;
mod lane;

use super::event::Bus;
use super::metrics::Metrics;
use super::sweeper::Sweeper;
use super::{Channel, ChannelState};
use super::{Event, Policies, lock};
use crate::question::{Conversation, Question, UserRef};
use crate::store::{self, Store, Undelivered, Unshown};
use held::{Admit, Held, Reader, Slot};
use lane::Lane;

/// How many lanes each group of a channel's conversations is spread over.
pub(super) const LANES: usize = 16;

/// How long the redelivery of cards after a restart waits for the lanes before it reads more.
const REDELIVERY_PAUSE: Duration = Duration::from_secs(5);

/// The longest an adapter waits for a message it sent to be recorded.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Things the lanes deliver, in order per conversation.
pub(super) enum Outbound {
    /// A card, with its place among those the group's lanes hold (none for an escalation
    /// copy, which is not bounded).
    Card(Arc<Question>, Option<Slot>),
    Retract(Arc<Question>),
    /// A pending question changed (a quorum approval's count): its cards show it.
    Refresh(Arc<Question>),
    /// A reminder of a pending question, naming these people, sent at this time.
    Remind(Arc<Question>, Vec<UserRef>, i64),
    Text(Conversation, String),
    /// A message an adapter sent for a question by itself (a prompt for the next message),
    /// to be retracted with the question's cards; `recorded` hears once it is stored.
    Record(Arc<Question>, store::Delivery, Option<tokio::sync::oneshot::Sender<()>>),
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
    groups: HashMap<String, Group>,
    undelivered: Arc<AtomicUsize>,
}

/// A group's lanes, and the cards of its own conversations they hold (at most
/// [`held::HELD`]; the rest wait in the store).
struct Group {
    channel: Arc<dyn Channel>,
    lanes: Vec<mpsc::UnboundedSender<Outbound>>,
    held: Arc<Held>,
}

/// The lane of a conversation, among a group's [`LANES`].
fn lane_of(conversation: &Conversation) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(conversation, &mut hasher);
    usize::try_from(std::hash::Hasher::finish(&hasher) % LANES as u64).unwrap_or(0)
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

    /// See [`Delivery::attach`].
    fn attach(&self, channel: Arc<dyn Channel>) {
        let name = channel.name();
        let attached = Attached { channel, groups: HashMap::new(), undelivered: Arc::default() };
        lock(&self.channels).insert(name, attached);
        lock(&self.states).insert(name, ChannelState::Connecting);
    }

    /// See [`Delivery::check_served`].
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

    /// Queues a delivery on the lane of its conversation. Cards of questions in their own
    /// conversation go through [`Outbox::card`]; what comes here is queued whatever the lanes
    /// hold: retractions, updates, reminders, texts and escalation copies are each one per event
    /// that happened (a resolution, a reminder due), not one per question waiting, and a
    /// retraction must follow its card.
    pub(super) fn send(&self, conversation: &Conversation, message: Outbound) {
        let mut channels = lock(&self.channels);
        let Some(group) = self.group(&mut channels, conversation) else { return };
        self.queue(group, conversation, message);
    }

    /// Queues the card of `question`, asked at `place`, in its own conversation, while its
    /// group holds fewer than [`held::HELD`] and none waits in the store; otherwise it waits
    /// there too, and the group's reader shows it in turn (and a card the lanes hold already
    /// is not queued again). False when it waits in the store.
    pub(super) fn card(&self, conversation: &Conversation, question: Arc<Question>, place: i64) -> bool {
        let mut channels = lock(&self.channels);
        let Some(group) = self.group(&mut channels, conversation) else { return true };
        match group.held.admit(question.id, place) {
            Admit::Queue => {
                let slot = Slot::new(&group.held, question.id);
                self.queue(group, conversation, Outbound::Card(question, Some(slot)));
                true
            }
            Admit::Held => true,
            Admit::Spill { first: false } => false,
            Admit::Spill { first: true } => {
                self.backlog.add();
                let reader = Reader {
                    store: self.store.clone(),
                    channel: group.channel.clone(),
                    group: policy_key(conversation),
                    lanes: group.lanes.clone(),
                    held: group.held.clone(),
                    backlog: self.backlog.clone(),
                    stop: self.stop.clone(),
                };
                self.tasks.spawn(reader.run(place));
                false
            }
        }
    }

    /// The group of `conversation`'s lanes, started on its first message; none when no channel
    /// is attached for it.
    fn group<'c>(
        &self,
        channels: &'c mut HashMap<&'static str, Attached>,
        conversation: &Conversation,
    ) -> Option<&'c Group> {
        let Some(attached) = channels.get_mut(conversation.channel()) else {
            tracing::debug!(%conversation, "no channel attached for this conversation");
            return None;
        };
        let (channel, undelivered) = (attached.channel.clone(), attached.undelivered.clone());
        Some(attached.groups.entry(policy_key(conversation)).or_insert_with(|| {
            let held = Arc::new(Held::default());
            let lanes = (0..LANES)
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
                .collect();
            Group { channel, lanes, held }
        }))
    }

    /// Queues `message` on the lane of `conversation` in `group`.
    fn queue(&self, group: &Group, conversation: &Conversation, message: Outbound) {
        self.backlog.add();
        if group.lanes[lane_of(conversation)].send(message).is_err() {
            self.backlog.done();
            tracing::warn!(%conversation, "the channel stopped; a message was not delivered");
        }
    }

    /// How many cards the lanes hold, over every group of every channel.
    fn held(&self) -> usize {
        lock(&self.channels).values().flat_map(|a| a.groups.values()).map(|g| g.held.len()).sum()
    }

    /// See [`Delivery::outbound_idle`].
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

/// Delivery, the service that shows questions and sends messages: the outbox's lanes, with
/// what a new question wakes (the sweeper, the counters, the observers).
#[derive(Clone)]
pub struct Delivery(Arc<DeliveryParts>);

/// The parts of [`Delivery`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct DeliveryParts {
    outbox: Arc<Outbox>,
    store: Arc<dyn Store>,
    bus: Bus,
    policies: Policies,
    sweeper: Arc<Sweeper>,
    metrics: Arc<Metrics>,
}

super::parts!(Delivery, DeliveryParts);

impl Delivery {
    pub(super) fn new(
        outbox: Outbox,
        store: Arc<dyn Store>,
        bus: Bus,
        policies: Policies,
        sweeper: Arc<Sweeper>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self(Arc::new(DeliveryParts { outbox: Arc::new(outbox), store, bus, policies, sweeper, metrics }))
    }

    /// See [`Outbox::close`].
    pub(super) async fn close(&self, grace: Duration) -> bool {
        self.outbox.close(grace).await
    }

    /// Attaches a channel's outbound half: cards, retractions and text for conversations of
    /// `channel.name()` go to it, in order per conversation.
    pub fn attach(&self, channel: Arc<dyn Channel>) {
        self.outbox.attach(channel);
    }

    /// Checks that an attached channel serves `conversation`.
    ///
    /// # Errors
    /// [`NotServed`] naming the channels that are enabled.
    pub fn check_served(&self, conversation: &Conversation) -> Result<(), NotServed> {
        self.outbox.check_served(conversation)
    }

    /// Records how an attached channel's connection stands (adapters report it).
    pub fn set_channel_state(&self, channel: &'static str, state: ChannelState) {
        self.outbox.set_state(channel, state);
    }

    /// Every attached channel with how it stands, by name: as its adapter reported, or
    /// `degraded` while cards of it wait to be delivered.
    pub fn channel_states(&self) -> Vec<(&'static str, ChannelState)> {
        self.outbox.states()
    }

    /// How many cards of each channel could not be delivered yet and are being tried again.
    pub fn undelivered_cards(&self) -> BTreeMap<&'static str, usize> {
        self.outbox.undelivered_cards()
    }

    /// How many cards of questions' own conversations the lanes hold, queued or being shown:
    /// at most [`held::HELD`] per group of a channel's conversations, however many wait.
    pub fn cards_held(&self) -> usize {
        self.outbox.held()
    }

    /// Queues a delivery on the lane of its conversation.
    pub(super) fn outbound(&self, conversation: &Conversation, message: Outbound) {
        self.outbox.send(conversation, message);
    }

    /// Returns once the lanes hold nothing: every card, retraction and message handed to them
    /// so far was delivered (or given up). A card that is being tried again until its question
    /// ends holds this until then.
    pub async fn outbound_idle(&self) {
        self.outbox.idle().await;
    }

    /// Records a message an adapter sent for `question` outside its card (a prompt for the
    /// next message), so that it is retracted with the cards; one recorded after the question
    /// was resolved is retracted at once.
    ///
    /// Returns once it is stored (or after [`RECORD_WAIT`], when the lane is held up): an
    /// adapter that handles its updates one after another then reads a reply to the prompt
    /// as one, however soon it comes.
    pub async fn record_delivery(&self, question: &Question, delivery: store::Delivery) {
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

    /// A question was persisted at `place` in the order asked: render it and tell observers.
    pub(super) fn announce(&self, question: Arc<Question>, place: i64) {
        if let Some(c) = &question.conversation {
            self.outbox.card(c, question.clone(), place);
        }
        self.sweeper.wake_for(&question);
        self.metrics.asked();
        self.bus.emit(Event::Asked(question));
    }

    /// Shows `question` in the conversation it is escalated to, after a line that says why.
    pub(super) fn show_escalated(&self, question: &Question, to: &Conversation) {
        let Some(conversation) = &question.conversation else { return };
        let waited = std::time::Duration::from_millis(question.nudges.escalate_after.unwrap_or(0));
        // The line reads as the conversation it is escalated to speaks; the card as its own.
        let locale = self.policies.presentation_of(Some(to), None).locale;
        let line = crate::wording::replies::escalated(conversation.as_str(), waited, locale);
        self.send_text(to, line);
        // Placed in the conversation it is escalated to (the card goes there, its answers
        // come from there); its own conversation's lane keeps the rest.
        let card = Question { conversation: Some(to.clone()), ..question.clone() };
        self.outbound(to, Outbound::Card(Arc::new(card), None));
    }

    /// Shows again the pending questions asked before `before` that have no card (their
    /// delivery failed and askgate stopped before it got through): a card is never dropped
    /// while its question waits. Questions asked since are on their way through the lanes.
    ///
    /// In the order asked, a page at a time. A group's cards over its bound wait in the store
    /// for its reader, and escalation copies are not bounded: after a page that left cards
    /// waiting or queued copies, the next is read once the lanes and readers are done (or
    /// after [`REDELIVERY_PAUSE`], when a channel that is down holds them), so that neither
    /// memory nor the reading outruns the channels.
    pub(super) async fn redeliver_undelivered(&self, before: i64) {
        let mut after = 0;
        loop {
            let find = Unshown { after, before, channel: None, limit: 500 };
            let page = match self.store.undelivered(find).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::error!(error = %e, "could not look for questions whose card was not delivered");
                    return;
                }
            };
            let Some(last) = page.last() else { return };
            after = last.place;
            let (mut shown, mut escalations, mut waiting) = (0, 0, false);
            for Undelivered { question, own, escalation, place } in page {
                if own
                    && let Some(c) = &question.conversation
                    && self.check_served(c).is_ok()
                {
                    tracing::debug!(question = %question.id, "showing a card that was not delivered before the stop");
                    waiting |= !self.outbox.card(c, Arc::new(question.clone()), place);
                    shown += 1;
                }
                if escalation
                    && let Some(to) = &question.escalated_to
                    && self.check_served(to).is_ok()
                {
                    tracing::debug!(question = %question.id, %to, "showing an escalation card that was not delivered before the stop");
                    self.show_escalated(&question, to);
                    escalations += 1;
                }
            }
            if shown + escalations > 0 {
                tracing::info!("showing {} cards that were not delivered before the stop", shown + escalations);
            }
            if waiting || escalations > 0 {
                let _ = tokio::time::timeout(REDELIVERY_PAUSE, self.outbound_idle()).await;
            }
        }
    }
}
