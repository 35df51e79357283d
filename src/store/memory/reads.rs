//! The memory store's reads, each answering as the SQL stores' query for it does: the same
//! rows in the same order.

use std::collections::HashSet;
use std::ops::Bound;

use super::tables::Tables;
use crate::question::{Conversation, Mode, Question, QuestionId, RunId, Status, Surface};
use crate::store::rows::page_after;
use crate::store::{
    Delivery, DeliveryRole, Find, Grant, GrantFind, Orphans, QuestionFilter, Resume, StoreError, Undelivered, Unshown,
};

/// The lowest id that starts with `prefix`, when some id can (ids are UUIDs written as
/// lower-case hex with hyphens, so their text sorts as they do).
fn lowest_with_prefix(prefix: &str) -> Option<QuestionId> {
    const NIL: &str = "00000000-0000-0000-0000-000000000000";
    let rest = NIL.get(prefix.len()..)?;
    let lowest: QuestionId = format!("{prefix}{rest}").parse().ok()?;
    // The parser also takes upper-case hex, which no stored id's text starts with.
    lowest.to_string().starts_with(prefix).then_some(lowest)
}

impl Tables {
    /// Questions in the order of `ids`.
    fn these<'a>(&'a self, ids: impl Iterator<Item = &'a QuestionId>) -> impl Iterator<Item = &'a Question> {
        ids.filter_map(|id| self.questions.get(id)).map(|stored| &stored.question)
    }

    /// Pending questions by the order they were asked, from the positions `seqs`.
    fn pending_at<'a>(&'a self, seqs: impl Iterator<Item = &'a u64>) -> impl Iterator<Item = &'a Question> {
        self.these(seqs.filter_map(|seq| self.pending.by_seq.get(seq)))
    }

    pub(super) fn find(&self, find: Find<'_>) -> Vec<Question> {
        match find {
            Find::Id(id) => self.these(std::iter::once(&id)).cloned().collect(),
            Find::Prefix { conversation, prefix, limit } => self.with_prefix(conversation, prefix, limit),
            Find::Pending { conversation: Some(c), limit } => {
                let seqs = self.pending.in_conversation.get(c).into_iter().flatten();
                self.pending_at(seqs).take(limit as usize).cloned().collect()
            }
            Find::Pending { conversation: None, limit } => {
                self.these(self.pending.by_seq.values()).take(limit as usize).cloned().collect()
            }
            Find::Journal(run) => self.journal(run),
            Find::Due { now, limit } => {
                let due = self.pending.deadlines.iter().take_while(|(at, ..)| *at <= now);
                self.these(due.map(|(.., id)| id)).take(limit as usize).cloned().collect()
            }
            Find::Nudges { now, limit } => {
                let due = self.pending.nudges.iter().take_while(|(at, ..)| *at <= now);
                self.these(due.map(|(.., id)| id)).take(limit as usize).cloned().collect()
            }
        }
    }

    /// Questions whose id starts with `prefix`, asked in `conversation` or escalated to it,
    /// newest first.
    fn with_prefix(&self, conversation: Option<&Conversation>, prefix: &str, limit: u32) -> Vec<Question> {
        let Some(lowest) = lowest_with_prefix(prefix) else { return Vec::new() };
        let here = |q: &Question| {
            conversation.is_none_or(|c| q.conversation.as_ref() == Some(c) || q.escalated_to.as_ref() == Some(c))
        };
        let mut found: Vec<(i64, u64, &Question)> = self
            .questions
            .range(lowest..)
            .take_while(|(id, _)| id.to_string().starts_with(prefix))
            .map(|(_, s)| s)
            .filter(|s| here(&s.question))
            .map(|s| (s.question.created_at, s.seq, &s.question))
            .collect();
        found.sort_unstable_by_key(|&(created, seq, _)| std::cmp::Reverse((created, seq)));
        found.into_iter().take(limit as usize).map(|(.., q)| q.clone()).collect()
    }

    fn journal(&self, run: RunId) -> Vec<Question> {
        self.these(self.by_run.get(&run).into_iter().flat_map(|steps| steps.values())).cloned().collect()
    }

    /// See [`crate::store::Store::question_with_asker`].
    pub(super) fn question_with_asker(&self, id: QuestionId) -> Option<(Question, Option<String>)> {
        let question = self.these(std::iter::once(&id)).next()?.clone();
        let asker = self.runs.get(&question.run).map(|run| run.initiator.as_str().to_owned());
        Some((question, asker))
    }

    pub(super) fn run_record(&self, id: RunId, journal: bool) -> Option<Resume> {
        let run = self.runs.get(&id)?.clone();
        Some(Resume { run, journal: if journal { self.journal(id) } else { Vec::new() } })
    }

    /// A page: pending questions oldest first, others newest first, after the cursor (the
    /// position of the page before's last question, written as the SQL stores write theirs).
    pub(super) fn page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        let after = page_after(cursor)?
            .map(|n| u64::try_from(n).map_err(|_| StoreError::BadCursor(cursor.unwrap_or_default().to_owned())))
            .transpose()?;
        let limit = limit.max(1) as usize;
        let fits = |q: &Question| {
            filter.conversation.as_ref().is_none_or(|c| q.conversation.as_ref() == Some(c))
                && filter.kind.is_none_or(|k| q.kind == k)
                && filter.status.is_none_or(|s| q.status == s)
        };
        let stored = |(seq, id): (&u64, &QuestionId)| Some((*seq, &self.questions.get(id)?.question));
        let page: Vec<(u64, &Question)> = if filter.status == Some(Status::Pending) {
            let from = after.map_or(0, |a| a.saturating_add(1));
            match &filter.conversation {
                Some(c) => {
                    let seqs = self.pending.in_conversation.get(c).into_iter().flat_map(|s| s.range(from..));
                    let rows = seqs.filter_map(|seq| Some((seq, self.pending.by_seq.get(seq)?)));
                    rows.filter_map(stored).filter(|(_, q)| fits(q)).take(limit).collect()
                }
                None => {
                    self.pending.by_seq.range(from..).filter_map(stored).filter(|(_, q)| fits(q)).take(limit).collect()
                }
            }
        } else {
            let before = after.unwrap_or(u64::MAX);
            self.by_seq.range(..before).rev().filter_map(stored).filter(|(_, q)| fits(q)).take(limit).collect()
        };
        let next = match page.last() {
            Some((seq, _)) if page.len() == limit => Some(format!("r{seq}")),
            _ => None,
        };
        Ok((page.into_iter().map(|(_, q)| q.clone()).collect(), next))
    }

    /// Pending questions with a card missing in their conversation or the one they were
    /// escalated to, in the order they were asked, as `find` selects (one askgate holds this
    /// store: every run is its own).
    pub(super) fn undelivered(&self, find: Unshown<'_>) -> Vec<Undelivered> {
        let after = u64::try_from(find.after).unwrap_or(0);
        let of_channel = |c: &Conversation| find.channel.is_none_or(|channel| c.channel() == channel);
        self.pending
            .by_seq
            .range((Bound::Excluded(after), Bound::Unbounded))
            .filter_map(|(seq, id)| Some((*seq, &self.questions.get(id)?.question)))
            .filter(|(_, q)| q.conversation.as_ref().is_some_and(of_channel) && q.created_at < find.before)
            .filter_map(|(seq, q)| {
                let own = self.card_missing_in(q, q.conversation.as_ref());
                let escalation = self.card_missing_in(q, q.escalated_to.as_ref());
                let place = i64::try_from(seq).unwrap_or(i64::MAX);
                (own || escalation).then(|| Undelivered { question: q.clone(), place, own, escalation })
            })
            .take(find.limit as usize)
            .collect()
    }

    /// Whether `q` has no card in `place` (a card recorded without its conversation counts
    /// as shown anywhere); false when there is no such place.
    fn card_missing_in(&self, q: &Question, place: Option<&Conversation>) -> bool {
        let Some(place) = place else { return false };
        let cards = self.cards.get(&q.id).into_iter().flatten();
        !cards
            .map(|c| &c.delivery)
            .any(|d| d.role == DeliveryRole::Card && d.conversation.as_ref().is_none_or(|shown| shown == place))
    }

    pub(super) fn next_deadline(&self) -> Option<i64> {
        let deadline = self.pending.deadlines.first().map(|(at, ..)| *at);
        let nudge = self.pending.nudges.first().map(|(at, ..)| *at);
        deadline.into_iter().chain(nudge).min()
    }

    /// Everything running or blocking: a store one askgate holds was left all of it.
    pub(super) fn orphans(&self) -> Orphans {
        let blocking = self.these(self.pending.by_seq.values()).filter(|q| q.mode == Mode::Blocking);
        let runs = self.running.iter().filter_map(|(_, id)| self.runs.get(id));
        Orphans { blocking: blocking.cloned().collect(), runs: runs.cloned().collect() }
    }

    /// The cards of these questions, in the order they were recorded.
    pub(super) fn cards_of(&self, ids: &[QuestionId]) -> Vec<Delivery> {
        let ids: HashSet<&QuestionId> = ids.iter().collect();
        let mut cards: Vec<_> = ids.into_iter().filter_map(|id| self.cards.get(id)).flatten().collect();
        cards.sort_unstable_by_key(|c| c.seq);
        cards.into_iter().map(|c| c.delivery.clone()).collect()
    }

    pub(super) fn card_at(&self, surface: Surface, chat: &str, message: &str) -> Option<Delivery> {
        let question = *self.card_places.get(&(surface, chat.to_owned(), message.to_owned()))?.first()?;
        let card = self.cards.get(&question)?.iter().find(|c| {
            let d = &c.delivery;
            d.surface == surface && d.chat == chat && d.message == message
        })?;
        Some(card.delivery.clone())
    }

    pub(super) fn grants(&self, find: GrantFind<'_>) -> Vec<Grant> {
        match find {
            GrantFind::Live { conversation, now } => {
                let mut live: Vec<&Grant> = match conversation {
                    Some(c) => self.grants_in(c).filter(|k| k.live(now)).map(|k| &k.grant).collect(),
                    None => self.grants.values().filter(|k| k.live(now)).map(|k| &k.grant).collect(),
                };
                // Stable: grants of the same instant stay in the order they were given.
                live.sort_by_key(|g| g.created_at);
                live.into_iter().cloned().collect()
            }
            GrantFind::For { conversation, grantee, action, now } => {
                let candidates = self
                    .grants_in(conversation)
                    .filter(|k| {
                        k.live(now) && k.grant.grantee == grantee && (k.grant.pattern || k.grant.action == action)
                    })
                    .map(|k| k.grant.clone())
                    .collect();
                crate::store::covering(candidates, action).into_iter().collect()
            }
        }
    }

    fn grants_in(&self, c: &Conversation) -> impl Iterator<Item = &super::tables::Kept> {
        self.grants_in.get(c).into_iter().flatten().filter_map(|seq| self.grants.get(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::lowest_with_prefix;

    #[test]
    fn a_prefix_starts_the_range_of_ids_it_can_start() {
        assert_eq!(lowest_with_prefix("").unwrap().to_string(), "00000000-0000-0000-0000-000000000000");
        assert_eq!(lowest_with_prefix("3f2a9c1b-7").unwrap().to_string(), "3f2a9c1b-7000-0000-0000-000000000000");
        // Upper-case hex, a hyphen out of place, a letter past f, or too long: no id starts so.
        for never in ["3F2A", "3f2a-", "3g", "00000000-0000-0000-0000-0000000000000"] {
            assert_eq!(lowest_with_prefix(never), None, "{never}");
        }
    }
}
