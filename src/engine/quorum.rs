//! Quorum approvals: an approval that needs several distinct approvers (one person is one
//! vote whichever surfaces they use; who asked for it does not count unless
//! `quorum_includes_requester` says so). Each approval is one
//! conditional write that succeeds only on the approvals it saw, so racing approvals are each
//! counted once; the approval that completes the quorum is the claim itself, so the question
//! resolves exactly once wherever the approvals come from.

use std::sync::Arc;

use serde_json::Value;

use super::claim::{Attempt, Resolver, lost_receipt};
use super::{Engine, Event, Outbound};
use crate::question::{Approver, MAX_QUORUM, Outcome, Question, Receipt};
use crate::store::{Resolution, StoreError, StoreExt};

impl Engine {
    /// Records `resolver`'s approval of a quorum approval: counted once per person; the one
    /// that completes the quorum allows it.
    ///
    /// # Errors
    /// When the store fails.
    pub(super) async fn approve_toward_quorum(
        &self,
        question: &Question,
        resolver: &Resolver,
    ) -> Result<Attempt, StoreError> {
        let allowed = Outcome::Answered { value: Value::String("once".to_owned()) };
        if !self.inner.settings.quorum_includes_requester && self.asked_by(question, &resolver.user).await? {
            return Ok(Attempt::from(Receipt::OwnRequest { id: question.id, quorum: question.quorum }));
        }
        let mut current = question.clone();
        // Each failed attempt means another approval was counted first, and there are at most
        // `quorum` of those.
        for _ in 0..=MAX_QUORUM {
            if !current.is_pending() {
                return Ok(Attempt::from(lost_receipt(&current, Some(&allowed))));
            }
            let (id, quorum) = (current.id, current.quorum);
            // One person, one vote: the operator at the console and through the token too.
            if current.approvals.iter().any(|a| resolver.user.is(&a.user)) {
                return Ok(Attempt::from(Receipt::AlreadyCounted { id, approvals: count(&current.approvals), quorum }));
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
                let resolution = Resolution {
                    outcome: allowed.clone(),
                    by: Some(resolver.user.to_string()),
                    name: resolver.name.clone(),
                    via: resolver.via,
                    at,
                    grant: None,
                    update: resolver.update.clone(),
                    approvals: Some(approvals),
                    question: current,
                };
                return self.claim_for(resolution).await;
            }
            let store = &self.inner.store;
            if store.vote(id, &current.approvals, &approvals, resolver.update.as_deref()).await? {
                let counted = count(&approvals);
                current.approvals = approvals;
                self.counted(Arc::new(current));
                return Ok(Attempt::from(Receipt::Counted { id, approvals: counted, quorum }));
            }
            current = match store.question(id).await? {
                Some(q) => q,
                None => return Ok(Attempt::from(Receipt::Unknown { reason: format!("no question {}", id.short()) })),
            };
        }
        Err(StoreError::Busy(format!("the approvals of {} kept changing", question.id.short())))
    }

    /// An approval was counted: the cards show the count, observers hear of it.
    fn counted(&self, question: Arc<Question>) {
        self.to_its_conversations(&question, Outbound::Refresh);
        self.emit(Event::Counted(question));
    }
}

fn count(approvals: &[Approver]) -> u32 {
    u32::try_from(approvals.len()).unwrap_or(u32::MAX)
}
