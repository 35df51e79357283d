//! Claiming: resolving a question is one conditional write that succeeds for exactly one
//! attempt. Everything that follows a win — retraction on every surface, events, handing the
//! outcome to a blocking waiter, handing a follow-up run to the runner to replay (see `turns`),
//! ending an agent's run — starts here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::event::Bus;
use super::metrics::Metrics;
use super::quorum::Vote;
use super::turns::Turns;
use super::waiters::Waiters;
use super::{Delivery, Event, Outbound};
use crate::clock::Clock;
use crate::question::{
    Choice, Conversation, InvalidChoice, Kind, Mode, Outcome, Question, Receipt, Status, Surface, UserRef,
};
use crate::store::{Claim, Grant, Resolution, RunWritten, Store, StoreError, StoreExt};

/// What a claim found; a won claim's question went on to the lanes, events and the run.
pub(super) enum Claimed {
    /// The question as stored.
    Won(Arc<Question>),
    Lost(Box<Question>),
    Missing,
}

/// A resolve attempt: what its sender is told, and the question as stored when it resolved it.
pub(super) struct Attempt {
    pub(super) receipt: Receipt,
    pub(super) resolved: Option<Arc<Question>>,
}

impl From<Receipt> for Attempt {
    fn from(receipt: Receipt) -> Self {
        Self { receipt, resolved: None }
    }
}

/// Who is resolving a question.
#[derive(Clone, Debug)]
pub struct Resolver {
    /// The person: `telegram:42`, `console:local`, `api:operator` for the operator token.
    pub user: UserRef,
    /// How people know them (`@alice`), when the surface said; shown with the outcome.
    pub name: Option<String>,
    /// Where the attempt came from.
    pub via: Surface,
    /// The agent that asked, answering in its own client (an MCP form): it may answer the
    /// questions it asked itself, never an approval (nobody approves their own request).
    pub asker: bool,
    /// The platform's id for the update that carries this attempt (`telegram:update:7`): it
    /// is recorded in the claim's own transaction, so a tap is never lost between the two.
    pub update: Option<String>,
    /// The conversation the attempt came from, when it came from one: in the conversation a
    /// question was escalated to, its escalation answerers may answer too.
    pub conversation: Option<Conversation>,
}

impl Resolver {
    /// A person on a surface, who may answer the questions whose answerers admit them. The
    /// operator token is such a person too (`api:operator`, the console's operator).
    pub fn person(user: UserRef, via: Surface) -> Self {
        Self { user, name: None, via, asker: false, update: None, conversation: None }
    }

    /// The agent that asked `question`, answering it in its own client: see [`Resolver::asker`].
    pub fn asker(user: UserRef, via: Surface) -> Self {
        Self { asker: true, ..Self::person(user, via) }
    }

    /// Whether this resolver may answer `question`: a person it admits (see
    /// [`Question::admits`]), or its own asker for anything but an approval.
    pub fn may_answer(&self, question: &Question) -> bool {
        question.admits(&self.user, self.conversation.as_ref()) || self.asker && question.kind != Kind::Approval
    }
}

/// Claims, the service that resolves questions once: the claim-once write and what follows a
/// win (retraction, events, counters, the waiting caller, the parked run), and quorum votes.
#[derive(Clone)]
pub struct Claims(Arc<ClaimsParts>);

/// The parts of [`Claims`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct ClaimsParts {
    // The quorum's vote (`quorum`) reads these too.
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    /// How long an "always" grant lasts (none: until revoked).
    pub(super) grant_ttl: Option<Duration>,
    /// Whether who asked for a quorum approval may count toward it.
    pub(super) quorum_includes_requester: bool,
    pub(super) bus: Bus,
    pub(super) metrics: Arc<Metrics>,
    pub(super) delivery: Delivery,
    pub(super) turns: Arc<Turns>,
    pub(super) waiters: Arc<Waiters>,
}

super::parts!(Claims, ClaimsParts);

impl Claims {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        store: Arc<dyn Store>,
        clock: Clock,
        settings: &super::Settings,
        bus: Bus,
        metrics: Arc<Metrics>,
        delivery: Delivery,
        turns: Arc<Turns>,
        waiters: Arc<Waiters>,
    ) -> Self {
        let (grant_ttl, quorum_includes_requester) = (settings.grant_ttl, settings.quorum_includes_requester);
        Self(Arc::new(ClaimsParts {
            store,
            clock,
            grant_ttl,
            quorum_includes_requester,
            bus,
            metrics,
            delivery,
            turns,
            waiters,
        }))
    }

    pub(super) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Resolves `question` with a choice typed or tapped by `resolver`: checks who is asking,
    /// whether it is still open, and whether the choice fits; then claims it.
    ///
    /// # Errors
    /// Only when the store fails; every refusal is a [`Receipt`].
    pub async fn resolve(&self, question: &Question, choice: &str, resolver: &Resolver) -> Result<Receipt, StoreError> {
        Ok(self.attempt(question, question.parse_choice(choice), resolver).await?.receipt)
    }

    /// As [`Claims::resolve`] with the choice as the question judged it (parsed from text,
    /// or made from ticks or one's own words), and the question as stored when the attempt
    /// resolved it.
    pub(super) async fn attempt(
        &self,
        question: &Question,
        choice: Result<Choice, InvalidChoice>,
        resolver: &Resolver,
    ) -> Result<Attempt, StoreError> {
        // Who is asking comes first: a non-answerer learns nothing about what would fit.
        if !resolver.may_answer(question) {
            return Ok(Attempt::from(Receipt::NotAuthorized { id: question.id }));
        }
        let choice = match choice {
            Ok(c) => Some(c),
            Err(_) if !question.is_pending() => None,
            Err(e) => return Ok(Attempt::from(Receipt::InvalidChoice { id: question.id, hint: e.hint })),
        };
        self.claim_choice(question, choice, resolver).await
    }

    /// As [`Claims::resolve`] with an already parsed choice (`None`: the attempt is compared
    /// with nothing, for a stale tap whose payload no longer parses).
    ///
    /// # Errors
    /// Only when the store fails.
    pub async fn resolve_choice(
        &self,
        question: &Question,
        choice: Option<Choice>,
        resolver: &Resolver,
    ) -> Result<Receipt, StoreError> {
        Ok(self.attempt_choice(question, choice, resolver).await?.receipt)
    }

    /// As [`Claims::resolve_choice`], with the question as stored when the attempt resolved it.
    pub(super) async fn attempt_choice(
        &self,
        question: &Question,
        choice: Option<Choice>,
        resolver: &Resolver,
    ) -> Result<Attempt, StoreError> {
        if !resolver.may_answer(question) {
            return Ok(Attempt::from(Receipt::NotAuthorized { id: question.id }));
        }
        self.claim_choice(question, choice, resolver).await
    }

    /// The claim of an authorized resolver's choice.
    pub(super) async fn claim_choice(
        &self,
        question: &Question,
        choice: Option<Choice>,
        resolver: &Resolver,
    ) -> Result<Attempt, StoreError> {
        let Some(choice) = choice else {
            return Ok(Attempt::from(lost_receipt(question, None)));
        };
        if question.needs_quorum() {
            match choice {
                Choice::Answer(_) => {
                    return match self.approve_toward_quorum(question, resolver).await? {
                        Vote::Told(receipt) => Ok(Attempt::from(receipt)),
                        Vote::Completes(resolution) => self.claim_for(*resolution).await,
                    };
                }
                Choice::AllowLike(_) => {
                    return Ok(Attempt::from(Receipt::InvalidChoice {
                        id: question.id,
                        hint: question.no_rule_hint(),
                    }));
                }
                Choice::Decline(_) => {}
            }
        }
        if matches!(choice, Choice::AllowLike(_)) && self.gated(question).await? {
            // A gated call's action is a tool and its arguments as JSON: a pattern over that text
            // could reach past one value into others, so its only standing rule is "always".
            let hint = crate::wording::replies::gated_takes_no_rule(question.presentation.locale);
            return Ok(Attempt::from(Receipt::InvalidChoice { id: question.id, hint }));
        }
        let rule = match &choice {
            Choice::AllowLike(pattern) => Some(pattern.clone()),
            Choice::Answer(_) | Choice::Decline(_) => None,
        };
        let outcome = choice.into_outcome();
        let always =
            matches!(&outcome, Outcome::Answered { value } if question.kind == Kind::Approval && value == "always");
        // Whom the grant lets through comes from the run that asked (read only for "always").
        let grantee = match always {
            true => self.store.run(question.run).await?.map(|run| run.grantee()),
            false => None,
        };
        let grant = match (grantee, &question.conversation) {
            (Some(grantee), Some(c)) => Some(Grant {
                grantee,
                id: uuid::Uuid::new_v4().to_string(),
                conversation: c.clone(),
                pattern: rule.is_some(),
                action: rule.unwrap_or_else(|| question.prompt.clone()),
                granted_by: resolver.user.to_string(),
                granted_name: resolver.name.clone(),
                expires_at: self.grant_ttl.map(|ttl| super::after(self.now_ms(), ttl)),
                question: question.id,
                created_at: self.now_ms(),
            }),
            _ => None,
        };
        let resolution = Resolution {
            question: question.clone(),
            outcome: outcome.clone(),
            by: Some(resolver.user.to_string()),
            name: resolver.name.clone(),
            via: resolver.via,
            at: self.now_ms(),
            grant,
            update: resolver.update.clone(),
            approvals: None,
        };
        self.claim_for(resolution).await
    }

    /// Whether `question` is a gated MCP upstream's call.
    async fn gated(&self, question: &Question) -> Result<bool, StoreError> {
        let run = self.store.run(question.run).await?;
        Ok(run.is_some_and(|run| run.function.starts_with(crate::run::GATE_PREFIX)))
    }

    /// A person's claim, and what they are told: resolved, lost to an earlier resolution, or
    /// no such question.
    async fn claim_for(&self, resolution: Resolution) -> Result<Attempt, StoreError> {
        let (id, outcome) = (resolution.question.id, resolution.outcome.clone());
        Ok(match self.claim(resolution).await? {
            Claimed::Won(resolved) => Attempt { receipt: Receipt::Resolved { id, outcome }, resolved: Some(resolved) },
            Claimed::Lost(q) => lost_receipt(&q, Some(&outcome)).into(),
            Claimed::Missing => Receipt::Unknown { reason: format!("no question {}", id.short()) }.into(),
        })
    }

    /// Resolves a question on behalf of askgate itself (timeouts, cancellations).
    pub(super) async fn close(&self, question: &Question, outcome: Outcome) -> Result<Claimed, StoreError> {
        self.claim(Resolution {
            question: question.clone(),
            outcome,
            by: None,
            name: None,
            via: Surface::GATEWAY,
            at: self.now_ms(),
            grant: None,
            update: None,
            approvals: None,
        })
        .await
    }

    /// Ends a pending question as `cancelled(reason)` on askgate's behalf: a channel that
    /// cannot put it before anyone (its platform will not deliver it) says why, and the asker
    /// hears that at once rather than waiting for nothing. `false` when it was not pending.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn cancel(&self, question: &Question, reason: &str) -> Result<bool, StoreError> {
        let outcome = Outcome::Cancelled { reason: reason.to_owned() };
        Ok(matches!(self.close(question, outcome).await?, Claimed::Won(_)))
    }

    /// The claim-once write, and everything that follows a win.
    async fn claim(&self, resolution: Resolution) -> Result<Claimed, StoreError> {
        Ok(match self.store.resolve(resolution).await? {
            Claim::Won(question, run) => {
                let question = Arc::new(question);
                self.after_resolution(question.clone(), run);
                Claimed::Won(question)
            }
            Claim::Lost(question) => Claimed::Lost(Box::new(question)),
            Claim::Missing => Claimed::Missing,
        })
    }

    /// `run` is what the claim wrote to the question's run: a run parked here follows it.
    fn after_resolution(&self, question: Arc<Question>, run: Option<RunWritten>) {
        self.delivery.to_its_conversations(&question, Outbound::Retract);
        self.bus.emit(Event::Resolved(question.clone()));
        self.metrics.resolved(question.status, question.answered_via);
        match question.mode {
            // The resolution's event woke the blocking ask that waits on it (see `waiters`).
            Mode::Blocking => {}
            Mode::FollowUp => {
                let resolved = Instant::now();
                // The parked copy follows what the claim wrote; when it wrote nothing to the run
                // (no longer waiting), the runner reads the run and decides as stored.
                let parked = match (self.turns.unpark(question.id), run) {
                    (Some((mut run, mut journal)), Some(written))
                        if journal.last().is_some_and(|q| q.id == question.id) =>
                    {
                        if let Some(last) = journal.last_mut() {
                            *last = question.clone();
                        }
                        written.apply(&mut run);
                        Some((run, journal))
                    }
                    _ => None,
                };
                self.turns.resume(question.run, question.conversation.as_ref(), Some(resolved), parked);
            }
            // The claim ended the agent's run in its own commit; the agent hears the outcome
            // from its waiter or by asking.
            Mode::External => {}
        }
    }

    /// Ends every blocking ask as `cancelled(shutdown)`, so that whoever waits on one (an API
    /// caller, a program in hold mode) gets an answer before askgate stops.
    pub(super) async fn cancel_blocking(&self) {
        for (question, waiter) in self.waiters.take_held() {
            let outcome = Outcome::Cancelled { reason: "shutdown".to_owned() };
            if let Err(e) = self.close(&question, outcome.clone()).await {
                tracing::warn!(question = %question.id, error = %e, "could not record a shutdown cancellation");
            }
            let _ = waiter.send(outcome);
        }
    }

    /// Cancels the waiting runs of a conversation that `user` may answer for: their pending
    /// questions end as `cancelled`, the runs see it and end. Returns how many were cancelled.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn cancel_conversation(&self, conversation: &Conversation, user: &UserRef) -> Result<usize, StoreError> {
        let mut cancelled = 0;
        for question in self.store.pending(Some(conversation), u32::MAX).await? {
            // Runs of this conversation only: one escalated here is another conversation's.
            if question.conversation.as_ref() != Some(conversation) || !question.answerers.admits(user) {
                continue;
            }
            let outcome = Outcome::Cancelled { reason: format!("cancelled by {user}") };
            let resolution = Resolution {
                question: question.clone(),
                outcome,
                by: Some(user.to_string()),
                name: None,
                via: Surface::GATEWAY,
                at: self.now_ms(),
                grant: None,
                update: None,
                approvals: None,
            };
            if matches!(self.claim(resolution).await?, Claimed::Won(_)) {
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }

    /// Expires every question whose deadline has passed, applying its default.
    pub(super) async fn expire_due(&self) -> Result<(), StoreError> {
        loop {
            let due = self.store.due(self.now_ms(), 256).await?;
            if due.is_empty() {
                return Ok(());
            }
            for question in due {
                let outcome = Outcome::Expired { value: question.default.clone() };
                self.close(&question, outcome).await?;
            }
        }
    }
}

/// What a losing attempt is told: how the question ended before it.
pub(super) fn lost_receipt(current: &Question, attempt: Option<&Outcome>) -> Receipt {
    match (&current.outcome, current.status) {
        (_, Status::Expired) => Receipt::Expired { id: current.id },
        (Some(o), _) if Some(o) == attempt => {
            Receipt::AlreadyResolvedSame { id: current.id, by: current.answerer().map(str::to_owned) }
        }
        (Some(o), _) => Receipt::AlreadyResolvedConflict {
            id: current.id,
            outcome: o.clone(),
            by: current.answerer().map(str::to_owned),
        },
        (None, _) => Receipt::AlreadyResolvedConflict {
            id: current.id,
            outcome: Outcome::Cancelled { reason: "unknown".to_owned() },
            by: None,
        },
    }
}
