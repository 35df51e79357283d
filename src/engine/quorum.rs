//! Quorum approvals: an approval that needs several distinct approvers (one person is one
//! vote whichever surfaces they use; who asked for it does not count unless
//! `quorum_includes_requester` says so). Each approval is one
//! conditional write that succeeds only on the approvals it saw, so racing approvals are each
//! counted once; the approval that completes the quorum is the claim itself (the vote hands
//! the claim its resolution, and never calls back into it), so the question resolves exactly
//! once wherever the approvals come from.

use std::sync::Arc;

use serde_json::Value;

use super::claim::{Claims, Resolver, lost_receipt};
use super::{Event, Outbound};
use crate::question::{Approver, MAX_QUORUM, Outcome, Question, Receipt, UserRef};
use crate::store::{Resolution, StoreError, StoreExt};

/// What an approval toward a quorum comes to.
pub(super) enum Vote {
    /// Nothing to claim: what the approver is told (counted, counted already, their own
    /// request, too late).
    Told(Receipt),
    /// It completes the quorum: the claim that allows the question, with every approval.
    Completes(Box<Resolution>),
}

impl Claims {
    /// Records `resolver`'s approval of a quorum approval: counted once per person; the one
    /// that completes the quorum comes back as the resolution to claim.
    ///
    /// # Errors
    /// When the store fails.
    pub(super) async fn approve_toward_quorum(
        &self,
        question: &Question,
        resolver: &Resolver,
    ) -> Result<Vote, StoreError> {
        let allowed = Outcome::Answered { value: Value::String("once".to_owned()) };
        if !self.quorum_includes_requester && self.asked_by(question, &resolver.user).await? {
            return Ok(Vote::Told(Receipt::OwnRequest { id: question.id, quorum: question.quorum }));
        }
        let mut current = question.clone();
        // Each failed attempt means another approval was counted first, and there are at most
        // `quorum` of those.
        for _ in 0..=MAX_QUORUM {
            if !current.is_pending() {
                return Ok(Vote::Told(lost_receipt(&current, Some(&allowed))));
            }
            let (id, quorum) = (current.id, current.quorum);
            // One person, one vote: the operator at the console and through the token too.
            if current.approvals.iter().any(|a| resolver.user.is(&a.user)) {
                return Ok(Vote::Told(Receipt::AlreadyCounted { id, approvals: count(&current.approvals), quorum }));
            }
            let at = self.now_ms();
            let mut approvals = current.approvals.clone();
            approvals.push(Approver {
                user: resolver.user.to_string(),
                name: resolver.name.clone(),
                via: resolver.via,
                at,
            });
            if count(&approvals) >= quorum {
                return Ok(Vote::Completes(Box::new(Resolution {
                    outcome: allowed.clone(),
                    by: Some(resolver.user.to_string()),
                    name: resolver.name.clone(),
                    via: resolver.via,
                    at,
                    grant: None,
                    update: resolver.update.clone(),
                    approvals: Some(approvals),
                    question: current,
                })));
            }
            let store = &self.store;
            if store.vote(id, &current.approvals, &approvals, resolver.update.as_deref()).await? {
                let counted = count(&approvals);
                current.approvals = approvals;
                self.counted(Arc::new(current));
                return Ok(Vote::Told(Receipt::Counted { id, approvals: counted, quorum }));
            }
            current = match store.question(id).await? {
                Some(q) => q,
                None => return Ok(Vote::Told(Receipt::Unknown { reason: format!("no question {}", id.short()) })),
            };
        }
        Err(StoreError::Busy(format!("the approvals of {} kept changing", question.id.short())))
    }

    /// Whether `user` asked `question`: started its run (the agent, for an agent's question).
    /// One person under either of the operator's ids.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn asked_by(&self, question: &Question, user: &UserRef) -> Result<bool, StoreError> {
        Ok(self.store.run(question.run).await?.is_some_and(|run| run.initiator.same_person(user)))
    }

    /// An approval was counted: the cards show the count, observers hear of it.
    fn counted(&self, question: Arc<Question>) {
        self.delivery.to_its_conversations(&question, Outbound::Refresh);
        self.bus.emit(Event::Counted(question));
    }
}

fn count(approvals: &[Approver]) -> u32 {
    u32::try_from(approvals.len()).unwrap_or(u32::MAX)
}
