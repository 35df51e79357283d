//! Reminders and escalation: the sweeper's second job. A question's next nudge time is
//! stored with it; whichever sweeper moves it on (one conditional write) sends what was due,
//! so each reminder and escalation happens once — also for questions that waited across a
//! restart, and never after a question ended.

use std::sync::Arc;
use std::time::Duration;

use super::{Delivery, Outbound, Policies};
use crate::clock::Clock;
use crate::question::{self, Answerers, Conversation, InvalidAsk, Question, UserRef, millis};
use crate::store::{Store, StoreError, StoreExt};

/// Nudges, the service that reminds and escalates: over the store's nudge times, the
/// policies' escalations, and delivery.
#[derive(Clone)]
pub(super) struct Nudges(Arc<NudgesParts>);

/// The parts of [`Nudges`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub(super) struct NudgesParts {
    store: Arc<dyn Store>,
    clock: Clock,
    /// The gateway's `remind_before`.
    remind_before: Option<Duration>,
    policies: Policies,
    delivery: Delivery,
}

super::parts!(Nudges, NudgesParts);

impl Nudges {
    pub(super) fn new(
        store: Arc<dyn Store>,
        clock: Clock,
        remind_before: Option<Duration>,
        policies: Policies,
        delivery: Delivery,
    ) -> Self {
        Self(Arc::new(NudgesParts { store, clock, remind_before, policies, delivery }))
    }

    /// Completes a new question's nudges with the configured ones (the gateway's
    /// `remind_before`, its channel's escalation) and schedules the first.
    ///
    /// # Errors
    /// [`InvalidAsk::Nudge`] when no enabled channel serves the conversation it would
    /// escalate to.
    pub(super) fn schedule_nudges(&self, question: &mut Question) -> Result<(), InvalidAsk> {
        let Some(conversation) = &question.conversation else { return Ok(()) };
        let defaults = question::Nudges {
            remind_before: self.remind_before.map(millis),
            ..self.policies.policy(conversation).nudges
        };
        question.nudges = std::mem::take(&mut question.nudges).or(&defaults, conversation);
        if let Some(to) = &question.nudges.escalate_to {
            if to == conversation {
                return Err(InvalidAsk::Nudge(format!("escalate_to names the question's own conversation ({to})")));
            }
            self.delivery.check_served(to).map_err(|e| InvalidAsk::Nudge(format!("escalate_to: {e}")))?;
        }
        question.nudge_at = question.nudges.next(question.created_at, question.expires_at, false, question.created_at);
        Ok(())
    }

    /// Sends the reminders and escalations that are due.
    pub(super) async fn nudge_due(&self) -> Result<(), StoreError> {
        loop {
            let now = self.clock.now_ms();
            let due = self.store.due_nudges(now, 256).await?;
            if due.is_empty() {
                return Ok(());
            }
            for question in due {
                self.nudge(question, now).await?;
            }
        }
    }

    async fn nudge(&self, mut question: Question, now: i64) -> Result<(), StoreError> {
        // `due_nudges` returns questions with a nudge time; one without a conversation (never
        // scheduled so) is moved on to nothing, so that the sweep cannot find it again.
        let Some(seen) = question.nudge_at else { return Ok(()) };
        let Some(conversation) = question.conversation.clone() else {
            self.store.advance_nudge(question.id, seen, None, None).await?;
            return Ok(());
        };
        let (asked, expires, nudges) = (question.created_at, question.expires_at, &question.nudges);
        let escalated = question.escalated_to.is_some();
        let escalate_to = nudges.escalation_due(asked, escalated, now).then(|| nudges.escalate_to.clone()).flatten();
        let remind = nudges.reminder_due(asked, expires, seen, now);
        let next = nudges.next(asked, expires, escalated || escalate_to.is_some(), now);
        if !self.store.advance_nudge(question.id, seen, next, escalate_to.as_ref()).await? {
            // It ended, or another sweeper sent this one.
            return Ok(());
        }
        question.nudge_at = next;
        if let Some(to) = escalate_to {
            question.escalated_to = Some(to.clone());
            tracing::info!(question = %question.id, %to, "escalated a question nobody answered");
            self.delivery.show_escalated(&question, &to);
        }
        if remind {
            let people = reminded(&question.answerers, &conversation);
            self.delivery.outbound(&conversation, Outbound::Remind(Arc::new(question), people, now));
        }
        Ok(())
    }
}

/// Who a reminder in `conversation` names: the answerers of its channel; nobody in particular
/// when anyone there may answer.
fn reminded(answerers: &Answerers, conversation: &Conversation) -> Vec<UserRef> {
    let people = match answerers {
        Answerers::Initiator { user } => vec![user.clone()],
        Answerers::Users { users } => users.clone(),
        Answerers::Conversation => Vec::new(),
    };
    people.into_iter().filter(|u| u.channel() == conversation.channel()).collect()
}
