//! What the memory store keeps: the same tables the SQL stores have (runs, questions, cards,
//! grants, inbound keys), each with the indexes its reads need, and the few places that change
//! a row together with its index entries, so that no index can disagree with its table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::question::{Conversation, Question, QuestionId, RunId, Status, Surface};
use crate::run::{Run, RunStatus};
use crate::store::{Delivery, Grant};

/// A question as kept: its place in the order questions were asked (SQLite's rowid,
/// PostgreSQL's `seq`), which pages and pending lists follow.
pub(super) struct Stored {
    pub(super) seq: u64,
    pub(super) question: Question,
}

/// A recorded card, in the order cards were recorded (the SQL stores' `created_at`).
pub(super) struct Card {
    pub(super) seq: u64,
    pub(super) delivery: Delivery,
}

/// A grant as kept: revoked or not.
pub(super) struct Kept {
    pub(super) grant: Grant,
    pub(super) revoked_at: Option<i64>,
}

impl Kept {
    /// Neither revoked nor expired at `now`.
    pub(super) fn live(&self, now: i64) -> bool {
        self.revoked_at.is_none() && self.grant.expires_at.is_none_or(|t| t > now)
    }
}

/// The indexes of pending questions (the SQL stores' partial indexes `WHERE status =
/// 'pending'`): a question is in them exactly while it waits.
#[derive(Default)]
pub(super) struct Pending {
    /// In the order they were asked.
    pub(super) by_seq: BTreeMap<u64, QuestionId>,
    /// In id order, for the start-up look for cards never recorded.
    pub(super) by_id: BTreeSet<QuestionId>,
    /// By the conversation each was asked in and the one it was escalated to.
    pub(super) in_conversation: HashMap<Conversation, BTreeSet<u64>>,
    /// By deadline.
    pub(super) deadlines: BTreeSet<(i64, u64, QuestionId)>,
    /// By next reminder or escalation.
    pub(super) nudges: BTreeSet<(i64, u64, QuestionId)>,
}

impl Pending {
    fn places(q: &Question) -> impl Iterator<Item = &Conversation> {
        let escalated = q.escalated_to.as_ref().filter(|e| q.conversation.as_ref() != Some(*e));
        q.conversation.iter().chain(escalated)
    }

    fn add(&mut self, seq: u64, q: &Question) {
        if q.status != Status::Pending {
            return;
        }
        self.by_seq.insert(seq, q.id);
        self.by_id.insert(q.id);
        for place in Self::places(q) {
            self.in_conversation.entry(place.clone()).or_default().insert(seq);
        }
        if let Some(at) = q.expires_at {
            self.deadlines.insert((at, seq, q.id));
        }
        if let Some(at) = q.nudge_at {
            self.nudges.insert((at, seq, q.id));
        }
    }

    fn remove(&mut self, seq: u64, q: &Question) {
        if q.status != Status::Pending {
            return;
        }
        self.by_seq.remove(&seq);
        self.by_id.remove(&q.id);
        for place in Self::places(q) {
            if let Some(set) = self.in_conversation.get_mut(place) {
                set.remove(&seq);
                if set.is_empty() {
                    self.in_conversation.remove(place);
                }
            }
        }
        if let Some(at) = q.expires_at {
            self.deadlines.remove(&(at, seq, q.id));
        }
        if let Some(at) = q.nudge_at {
            self.nudges.remove(&(at, seq, q.id));
        }
    }
}

/// Where a card is: surface, chat, message.
pub(super) type Place = (Surface, String, String);

/// Every table, with its indexes.
#[derive(Default)]
pub(super) struct Tables {
    /// The next sequence number of a question, card or grant (one counter: only each
    /// table's own order matters).
    next: u64,
    pub(super) runs: HashMap<RunId, Run>,
    /// Runs in status `running`, by when they were created.
    pub(super) running: BTreeSet<(i64, RunId)>,
    /// Ended runs by when they ended (and id), the order pruning takes them in.
    pub(super) ended: BTreeSet<(i64, RunId)>,
    /// In id order (their text's order too): a prefix of an id is a range.
    pub(super) questions: BTreeMap<QuestionId, Stored>,
    /// Every question in the order it was asked.
    pub(super) by_seq: BTreeMap<u64, QuestionId>,
    /// A run's questions by step (the `UNIQUE (run_id, step)` rule, and the journal).
    pub(super) by_run: HashMap<RunId, BTreeMap<u32, QuestionId>>,
    pub(super) pending: Pending,
    pub(super) cards: HashMap<QuestionId, Vec<Card>>,
    /// The questions whose cards are at a place.
    pub(super) card_places: HashMap<Place, Vec<QuestionId>>,
    pub(super) grants: BTreeMap<u64, Kept>,
    pub(super) grant_ids: HashMap<String, u64>,
    pub(super) grants_in: HashMap<Conversation, BTreeSet<u64>>,
    /// Inbound update keys, with when each was recorded.
    pub(super) inbound: HashMap<String, i64>,
    pub(super) inbound_by_time: BTreeSet<(i64, String)>,
    /// People's credentials by name.
    pub(super) logins: BTreeMap<String, crate::store::Login>,
    /// The callbacks' outbox, in the order written.
    pub(super) callbacks: Vec<super::outbox::Outboxed>,
    /// What people have filled in of forms asked one field at a time, by question and person.
    pub(super) drafts: HashMap<(QuestionId, String), crate::question::form::Draft>,
    /// Platforms' notes by key.
    pub(super) notes: HashMap<String, crate::store::Note>,
}

impl Tables {
    fn seq(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Stores `run` (replacing the stored one), with its index entries. What it was started
    /// by is not kept, as in the SQL stores.
    pub(super) fn put_run(&mut self, mut run: Run) {
        run.update = None;
        if let Some(old) = self.runs.get(&run.id) {
            self.running.remove(&(old.created_at, old.id));
            self.ended.remove(&(old.updated_at, old.id));
        }
        match run.status {
            RunStatus::Running => {
                self.running.insert((run.created_at, run.id));
            }
            RunStatus::Finished | RunStatus::Failed | RunStatus::Cancelled => {
                self.ended.insert((run.updated_at, run.id));
            }
            RunStatus::Waiting => {}
        }
        self.runs.insert(run.id, run);
    }

    /// Changes a stored run through `change`; false when there is none.
    pub(super) fn change_run(&mut self, id: RunId, change: impl FnOnce(&mut Run)) -> bool {
        let Some(mut run) = self.runs.get(&id).cloned() else { return false };
        change(&mut run);
        self.put_run(run);
        true
    }

    /// Inserts a question whose id and step were checked to be free; its place in the order
    /// asked.
    pub(super) fn insert_question(&mut self, question: Question) -> u64 {
        let seq = self.seq();
        self.pending.add(seq, &question);
        self.by_seq.insert(seq, question.id);
        self.by_run.entry(question.run).or_default().insert(question.step, question.id);
        self.questions.insert(question.id, Stored { seq, question });
        seq
    }

    /// Changes a stored question through `change`, keeping the pending indexes true; the
    /// question as changed, none when there is no such question.
    pub(super) fn change_question(&mut self, id: QuestionId, change: impl FnOnce(&mut Question)) -> Option<&Question> {
        let stored = self.questions.get_mut(&id)?;
        self.pending.remove(stored.seq, &stored.question);
        change(&mut stored.question);
        self.pending.add(stored.seq, &stored.question);
        Some(&stored.question)
    }

    /// Deletes a run with its questions and their cards.
    pub(super) fn remove_run(&mut self, id: RunId) {
        for (_, question) in self.by_run.remove(&id).unwrap_or_default() {
            self.remove_question(question);
        }
        if let Some(old) = self.runs.remove(&id) {
            self.running.remove(&(old.created_at, old.id));
            self.ended.remove(&(old.updated_at, old.id));
        }
    }

    fn remove_question(&mut self, id: QuestionId) {
        for card in self.cards.remove(&id).unwrap_or_default() {
            let d = card.delivery;
            let place = (d.surface, d.chat, d.message);
            if let Some(shown) = self.card_places.get_mut(&place) {
                shown.retain(|q| *q != id);
                if shown.is_empty() {
                    self.card_places.remove(&place);
                }
            }
        }
        if let Some(stored) = self.questions.remove(&id) {
            self.pending.remove(stored.seq, &stored.question);
            self.by_seq.remove(&stored.seq);
        }
    }

    /// Records a card unless one of its question is recorded at the same place (the
    /// deliveries' primary key, which the SQL stores' inserts ignore conflicts on).
    pub(super) fn insert_card(&mut self, delivery: Delivery) {
        let place = (delivery.surface, delivery.chat.clone(), delivery.message.clone());
        let shown = self.card_places.get(&place).is_some_and(|questions| questions.contains(&delivery.question));
        if shown {
            return;
        }
        let seq = self.seq();
        self.card_places.entry(place).or_default().push(delivery.question);
        self.cards.entry(delivery.question).or_default().push(Card { seq, delivery });
    }

    /// Inserts a grant whose id was checked to be free.
    pub(super) fn insert_grant(&mut self, grant: Grant) {
        let seq = self.seq();
        self.grant_ids.insert(grant.id.clone(), seq);
        self.grants_in.entry(grant.conversation.clone()).or_default().insert(seq);
        self.grants.insert(seq, Kept { grant, revoked_at: None });
    }

    /// Records an inbound key; false when it was recorded before.
    pub(super) fn first_seen(&mut self, key: &str, at: i64) -> bool {
        if self.inbound.contains_key(key) {
            return false;
        }
        self.inbound.insert(key.to_owned(), at);
        self.inbound_by_time.insert((at, key.to_owned()));
        true
    }

    /// Deletes up to `limit` inbound keys recorded before `before`, oldest first.
    pub(super) fn prune_inbound(&mut self, before: i64, limit: usize) -> u64 {
        let old: Vec<(i64, String)> =
            self.inbound_by_time.iter().take_while(|(at, _)| *at < before).take(limit).cloned().collect();
        for entry in &old {
            self.inbound_by_time.remove(entry);
            self.inbound.remove(&entry.1);
        }
        old.len() as u64
    }
}
