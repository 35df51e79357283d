//! The bound on what a group's lanes hold of its cards, and the reading that shows the cards
//! over it from the store, where every pending question without a card already is.
//!
//! A question is written before its card is queued, so a card the lanes cannot take loses
//! nothing by not being held in memory: the group *spills*, its later cards wait in the store
//! too (so that a conversation's cards keep their order), and one reader per group reads them
//! back in the order they were asked as the lanes make room. Asking a million questions faster
//! than a channel shows them then costs [`HELD`] cards of memory per group, not a million.
//!
//! The bound is the group's, not each lane's: a card a platform refuses for a while holds its
//! lane, and the cards queued behind it count against the group. When more than
//! `HELD - PAGE` of them wait behind such a card, the group's cards in the store wait with
//! them until it gets through or its question ends (the lanes not held up keep showing what
//! they were given).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Backlog, Outbound, lane_of};
use crate::engine::Channel;
use crate::engine::access::policy_key;
use crate::engine::lock;
use crate::engine::recent::Recent;
use crate::engine::retry::{Backoff, Retry, retrying};
use crate::question::QuestionId;
use crate::store::{Store, Undelivered, Unshown};

/// The most cards of a group's own conversations its lanes hold at once, queued or being
/// shown (about 1 KB each with their question). Enough for any chat's pace between two reads;
/// the rest wait in the store.
pub(super) const HELD: usize = 1_024;

/// How many questions the reader reads at a time; it reads when the lanes hold at most
/// [`HELD`] less this many, so a page always fits.
const PAGE: u32 = 256;

/// How many cards the lanes were done with lately are remembered: a card is not queued again
/// when its question is announced late or read from a page read before it was shown (a page
/// is 500 at most; this is what a group's lanes show in the time a page is read, and more).
const RELEASED: usize = 2_048;

/// How long the reader waits after the store failed, at most: it tries until the stop.
const STORE_BACKOFF: Backoff =
    Backoff { first: Duration::from_millis(100), max: Duration::from_secs(10), retries: u32::MAX };

/// A group's cards in its lanes, and whether more wait in the store.
#[derive(Default)]
pub(super) struct Held {
    state: Mutex<State>,
    /// Wakes the reader when the lanes made room.
    room: Notify,
}

struct State {
    /// The questions whose card the lanes hold (at most [`HELD`]): a card already held is not
    /// queued twice.
    cards: HashSet<QuestionId>,
    /// The last [`RELEASED`] cards the lanes were done with: nor is one of those.
    released: Recent<()>,
    /// Whether cards wait in the store (a reader reads them).
    spilling: bool,
    /// How many cards were turned away so far: the reader ends only after a read during
    /// which none was.
    turned_away: u64,
    /// The lowest place in the order asked of a card turned away since the reader last read:
    /// it reads from there (questions are not announced in the order they were committed,
    /// nor, on PostgreSQL, committed in the order of their places).
    lowest: Option<i64>,
}

impl Default for State {
    fn default() -> Self {
        Self { cards: HashSet::new(), released: Recent::new(RELEASED), spilling: false, turned_away: 0, lowest: None }
    }
}

/// What the lanes do with a card of the group's own conversations.
pub(super) enum Admit {
    /// Queue it.
    Queue,
    /// Nothing: the lanes hold it already, or were done with it lately.
    Held,
    /// Nothing: it waits in the store; `first` when it is the first, so a reader must start.
    Spill { first: bool },
}

impl Held {
    /// Takes the card of `question`, asked at `place`, for the lanes, unless they hold it or
    /// are full.
    pub(super) fn admit(&self, question: QuestionId, place: i64) -> Admit {
        let mut state = lock(&self.state);
        if state.cards.contains(&question) || state.released.get(&question).is_some() {
            return Admit::Held;
        }
        if !state.spilling && state.cards.len() < HELD {
            state.cards.insert(question);
            return Admit::Queue;
        }
        state.turned_away += 1;
        state.lowest = Some(state.lowest.map_or(place, |lowest| lowest.min(place)));
        let first = !state.spilling;
        state.spilling = true;
        Admit::Spill { first }
    }

    /// The lanes are done with the card of `question` (shown and recorded, given up, or not
    /// needed): see [`Slot`].
    fn release(&self, question: QuestionId) {
        let mut state = lock(&self.state);
        if !state.cards.remove(&question) {
            return;
        }
        state.released.insert(question, ());
        if state.spilling && state.cards.len() <= HELD - PAGE as usize {
            drop(state);
            self.room.notify_one();
        }
    }

    /// How many cards the lanes hold.
    pub(super) fn len(&self) -> usize {
        lock(&self.state).cards.len()
    }

    /// Takes a card the reader found, whatever the bound (it reads only into room); false
    /// when the lanes hold it already or were done with it lately.
    fn take(&self, question: QuestionId) -> bool {
        let mut state = lock(&self.state);
        state.released.get(&question).is_none() && state.cards.insert(question)
    }

    /// Before a read: the cards the lanes hold now (one they held then and the read finds
    /// without a card may have been shown since), how many were turned away so far, and the
    /// lowest place of those turned away since the last read.
    fn before_read(&self) -> (HashSet<QuestionId>, u64, Option<i64>) {
        let mut state = lock(&self.state);
        (state.cards.clone(), state.turned_away, state.lowest.take())
    }

    /// Returns once the lanes have room for a page.
    async fn room(&self) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.len() <= HELD - PAGE as usize {
                return;
            }
            room.await;
        }
    }

    /// Ends the spill unless a card was turned away since `seen`; whether it ended.
    fn end(&self, seen: u64) -> bool {
        let mut state = lock(&self.state);
        if state.turned_away != seen {
            return false;
        }
        state.spilling = false;
        true
    }
}

/// A card's place among those its group's lanes hold, carried with the card: released when
/// the lane is done with it, and also when the card is dropped unshown (a lane that ended,
/// at shutdown or after a panic), so that the bound never keeps a card nobody will show.
pub(in crate::engine) struct Slot(Arc<Held>, QuestionId);

impl Slot {
    pub(super) fn new(held: &Arc<Held>, question: QuestionId) -> Self {
        Self(held.clone(), question)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// Reads the cards a group spilled back from the store into its lanes, in the order asked.
pub(super) struct Reader {
    pub(super) store: Arc<dyn Store>,
    pub(super) channel: Arc<dyn Channel>,
    pub(super) group: String,
    pub(super) lanes: Vec<mpsc::UnboundedSender<Outbound>>,
    pub(super) held: Arc<Held>,
    pub(super) backlog: Arc<Backlog>,
    pub(super) stop: CancellationToken,
}

impl Reader {
    /// Shows what waits from `first` (the place of the first card turned away) on, until
    /// nothing is left or the stop (the next start shows the rest: pending questions without a
    /// card).
    pub(super) async fn run(self, first: i64) {
        let (channel, group) = (self.channel.name(), self.group.as_str());
        tracing::warn!(
            channel,
            group,
            "more than {HELD} cards wait to be shown in {group}; the rest wait in the store and are shown in the order asked as the channel takes them"
        );
        tokio::select! {
            () = self.catch_up(first) => tracing::info!(channel, group, "every card that waited in the store for {group} is shown"),
            () = self.stop.cancelled() => {}
        }
        self.backlog.done();
    }

    async fn catch_up(&self, first: i64) {
        let mut after = first - 1;
        loop {
            self.held.room().await;
            // While the group spills only this reader adds to the lanes, so a card neither
            // held before the read nor recorded in it waits in the store.
            let (held, seen, lowest) = self.held.before_read();
            if let Some(lowest) = lowest {
                after = after.min(lowest - 1);
            }
            let find = Unshown { after, before: i64::MAX, channel: Some(self.channel.name()), limit: PAGE };
            let page = self.read(find).await;
            let read = page.len();
            for unshown in page {
                after = after.max(unshown.place);
                let Some(conversation) = unshown.question.conversation.clone() else { continue };
                let id = unshown.question.id;
                if !unshown.own
                    || policy_key(&conversation) != self.group
                    || !self.channel.serves(&conversation)
                    || held.contains(&id)
                    || !self.held.take(id)
                {
                    continue;
                }
                self.backlog.add();
                let card = Outbound::Card(Arc::new(unshown.question), Some(Slot::new(&self.held, id)));
                if self.lanes[lane_of(&conversation)].send(card).is_err() {
                    // Its lane ended: the card stays in the store for the next start.
                    self.backlog.done();
                }
            }
            if read < PAGE as usize && self.held.end(seen) {
                return;
            }
        }
    }

    /// A page of what waits, read again with backoff while the store fails (until the stop).
    async fn read(&self, find: Unshown<'_>) -> Vec<Undelivered> {
        loop {
            let read = retrying(STORE_BACKOFF, |_| Retry::Later(None), || self.store.undelivered(find)).await;
            match read {
                Ok(page) => return page,
                Err(e) => {
                    tracing::warn!(channel = self.channel.name(), error = %e, "could not read the cards that wait to be shown")
                }
            }
        }
    }
}
