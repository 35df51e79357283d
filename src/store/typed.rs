//! A typed method for each of the store's commands and filters, over any [`Store`]: what the
//! rest of askgate calls. A store implements only the trait's few methods.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use super::command::{
    Ask, Command, Deliver, FinishRun, Nudge, Prune, Remember, Resolve, RevokeGrant, SaveRun, Says, Seen, SetDraft,
    TakeOrphans, UseLink, Vote,
};
use super::{
    CardFind, Claim, Delivery, Find, Grant, GrantFind, Lease, Login, LoginFind, Orphans, Pruned, Resolution, Resume,
    RunEvent, Store, StoreError,
};
use crate::question::{Approver, Conversation, Question, QuestionId, RunId};
use crate::run::{Run, RunStatus};

/// The store's commands and reads, typed.
///
/// Its futures are the callers' own (not boxed, as a `dyn` trait's must be): only [`Store`]'s
/// methods cross the `dyn` boundary. Every caller holds a concrete store (`dyn Store`, or one
/// of the stores), whose futures are `Send` when the store's are.
#[allow(async_fn_in_trait)]
pub trait StoreExt: Store {
    /// Applies `command` and answers what it answers, once it committed.
    // Boxed, not an `async fn`: the compiler does not prove a future that holds the reply's
    // associated type `Send` for every lifetime of its callers' borrows.
    fn run_command<C: Command>(&self, command: C) -> BoxFuture<'_, Result<C::Reply, StoreError>> {
        let (reply, answer) = oneshot::channel();
        let written = self.write(command.call(reply));
        Box::pin(async move {
            written.await;
            answer.await.map_err(|_| StoreError::Closed)?
        })
    }

    /// Inserts or updates a run.
    async fn save_run(&self, run: &Run) -> Result<(), StoreError> {
        self.run_command(SaveRun(Box::new(run.clone()))).await
    }

    /// Ends a stored run without reading it; false when there is no such run.
    async fn finish_run(&self, id: RunId, status: RunStatus, result: &str, at: i64) -> Result<bool, StoreError> {
        self.run_command(FinishRun { id, status, result: result.to_owned(), at }).await
    }

    /// Saves the run and inserts its new question, in one transaction.
    async fn ask(&self, run: &Run, question: &Arc<Question>) -> Result<i64, StoreError> {
        self.run_command(Ask { run: Box::new(run.clone()), question: question.clone() }).await
    }

    /// The claim-once write (see [`Resolve`]).
    async fn resolve(&self, resolution: Resolution) -> Result<Claim, StoreError> {
        Ok(*self.run_command(Resolve(Box::new(resolution))).await?)
    }

    /// See [`Vote`].
    async fn vote(
        &self,
        question: QuestionId,
        seen: &[Approver],
        approvals: &[Approver],
        update: Option<&str>,
    ) -> Result<bool, StoreError> {
        let vote =
            Vote { question, seen: seen.to_vec(), approvals: approvals.to_vec(), update: update.map(str::to_owned) };
        self.run_command(vote).await
    }

    /// See [`Nudge`].
    async fn advance_nudge(
        &self,
        question: QuestionId,
        seen: i64,
        next: Option<i64>,
        escalated_to: Option<&Conversation>,
    ) -> Result<bool, StoreError> {
        self.run_command(Nudge { question, seen, next, escalated_to: escalated_to.cloned() }).await
    }

    /// Records a rendered card.
    async fn add_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        self.run_command(Deliver(delivery.clone())).await
    }

    /// Revokes a grant; false when there was no live grant with that id.
    async fn revoke_grant(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        self.run_command(RevokeGrant { id: id.to_owned(), at }).await
    }

    /// Records an inbound update key; false when it was seen before.
    async fn first_seen(&self, key: &str, at: i64) -> Result<bool, StoreError> {
        self.run_command(Seen { key: key.to_owned(), at }).await
    }

    /// Keeps what `person` has filled in so far of the form `question` (none: forgets it).
    async fn set_draft(
        &self,
        question: QuestionId,
        person: &str,
        draft: Option<crate::question::form::Draft>,
        at: i64,
    ) -> Result<(), StoreError> {
        self.run_command(SetDraft { question, person: person.to_owned(), draft, at }).await
    }

    /// Keeps a platform's note `value` under `key` (see [`Remember`]), replacing the one before.
    async fn remember(&self, key: &str, value: &str, at: i64) -> Result<(), StoreError> {
        self.run_command(Remember { key: key.to_owned(), value: value.to_owned(), at }).await
    }

    /// Records how many `say` messages a run has delivered.
    async fn set_says(&self, run: RunId, says: u32) -> Result<(), StoreError> {
        self.run_command(Says { run, says }).await
    }

    /// See [`Prune`].
    async fn prune(&self, ended_before: Option<i64>, seen_before: i64, limit: u32) -> Result<Pruned, StoreError> {
        self.run_command(Prune { ended_before, seen_before, limit }).await
    }

    /// Adds a person's credential; false when its name or its secret is taken.
    async fn add_login(&self, login: &Login) -> Result<bool, StoreError> {
        self.run_command(super::command::AddLogin(Box::new(login.clone()))).await
    }

    /// Deletes the credential `name`; false when there is none.
    async fn remove_login(&self, name: &str) -> Result<bool, StoreError> {
        self.run_command(super::command::RemoveLogin { name: name.to_owned() }).await
    }

    /// See [`UseLink`].
    async fn use_link(
        &self,
        digest: &str,
        now: i64,
        name: &str,
        session: &str,
        until: i64,
    ) -> Result<Option<Login>, StoreError> {
        let link =
            UseLink { digest: digest.to_owned(), now, name: name.to_owned(), session: session.to_owned(), until };
        Ok(self.run_command(link).await?.map(|login| *login))
    }

    /// See [`LoginFind::Secret`].
    async fn login(&self, digest: &str, now: i64) -> Result<Option<Login>, StoreError> {
        Ok(self.logins(LoginFind::Secret { digest, now }).await?.pop())
    }

    /// One question.
    async fn question(&self, id: QuestionId) -> Result<Option<Question>, StoreError> {
        Ok(self.questions(Find::Id(id)).await?.pop())
    }

    /// See [`Find::Prefix`].
    async fn questions_by_prefix(
        &self,
        conversation: Option<&Conversation>,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<Question>, StoreError> {
        self.questions(Find::Prefix { conversation, prefix, limit }).await
    }

    /// See [`Find::Pending`].
    async fn pending(&self, conversation: Option<&Conversation>, limit: u32) -> Result<Vec<Question>, StoreError> {
        self.questions(Find::Pending { conversation, limit }).await
    }

    /// See [`Find::Journal`].
    async fn journal(&self, run: RunId) -> Result<Vec<Question>, StoreError> {
        self.questions(Find::Journal(run)).await
    }

    /// See [`Find::Due`].
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError> {
        self.questions(Find::Due { now, limit }).await
    }

    /// See [`Find::Nudges`].
    async fn due_nudges(&self, now: i64, limit: u32) -> Result<Vec<Question>, StoreError> {
        self.questions(Find::Nudges { now, limit }).await
    }

    /// One run, without its journal.
    async fn run(&self, id: RunId) -> Result<Option<Run>, StoreError> {
        Ok(self.run_record(id, false).await?.map(|resume| resume.run))
    }

    /// One run with its questions by step, read together.
    async fn run_with_journal(&self, id: RunId) -> Result<Option<Resume>, StoreError> {
        self.run_record(id, true).await
    }

    /// A question's rendered cards.
    async fn deliveries(&self, question: QuestionId) -> Result<Vec<Delivery>, StoreError> {
        self.cards(CardFind::Of(&[question])).await
    }

    /// The rendered cards of several questions, in one read.
    async fn deliveries_of(&self, questions: &[QuestionId]) -> Result<Vec<Delivery>, StoreError> {
        self.cards(CardFind::Of(questions)).await
    }

    /// The question a recorded message (a card or a prompt) belongs to, and which it is,
    /// found by where the message is.
    async fn question_for_card(
        &self,
        surface: crate::question::Surface,
        chat: &str,
        message: &str,
    ) -> Result<Option<(QuestionId, super::DeliveryRole)>, StoreError> {
        let card = self.cards(CardFind::At { surface, chat, message }).await?.pop();
        Ok(card.map(|card| (card.question, card.role)))
    }

    /// See [`GrantFind::For`].
    async fn find_grant(
        &self,
        conversation: &Conversation,
        grantee: &str,
        action: &str,
        now: i64,
    ) -> Result<Option<Grant>, StoreError> {
        Ok(self.find_grants(GrantFind::For { conversation, grantee, action, now }).await?.into_iter().next())
    }

    /// See [`GrantFind::Live`].
    async fn grants(&self, conversation: Option<&Conversation>, now: i64) -> Result<Vec<Grant>, StoreError> {
        self.find_grants(GrantFind::Live { conversation, now }).await
    }

    /// See [`TakeOrphans`].
    async fn orphans(&self) -> Result<Orphans, StoreError> {
        self.run_command(TakeOrphans).await
    }

    /// Whether several askgates share this store.
    fn shared(&self) -> bool {
        self.sharing().is_some()
    }

    /// This askgate's id among those sharing the store (none for a store one askgate holds).
    fn instance(&self) -> Option<&str> {
        self.sharing().map(super::Shared::instance)
    }

    /// Waits for the lease `name` (see [`super::Shared::lease`]); a store one askgate holds
    /// grants it at once.
    async fn lease(&self, name: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<Lease>, StoreError> {
        match self.sharing() {
            Some(shared) => shared.lease(name, stop).await,
            None => Ok((!stop.is_cancelled()).then(Lease::sole)),
        }
    }

    /// Tells the other askgates (if any) what `run` did.
    fn announce_run(&self, event: RunEvent, run: &Run) {
        if let Some(shared) = self.sharing() {
            shared.announce_run(event, run);
        }
    }

    /// What the other askgates do, as they commit (none for a store one askgate holds).
    fn changes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<super::Change>> {
        self.sharing().and_then(super::Shared::changes)
    }
}

impl<S: Store + ?Sized> StoreExt for S {}
