//! A typed method for each of the store's commands and filters, over any [`Store`]: what the
//! rest of askgate calls. A store implements only the trait's few methods.

use std::sync::Arc;

use super::{
    Claim, Delivery, Find, Grant, GrantFind, Lease, Login, LoginFind, Pruned, Resolution, Resume, RunEvent, Store,
    StoreError, Write, Written,
};
use crate::question::{Approver, Conversation, Question, QuestionId, RunId};
use crate::run::{Run, RunStatus};

/// A store's answer to a write that does not fit the write: a broken store, never a person's
/// fault.
fn unexpected(write: &str, written: &Written) -> StoreError {
    StoreError::Database(format!("the store answered a {write} with {written:?}"))
}

fn done(write: &str, written: Written) -> Result<(), StoreError> {
    match written {
        Written::Done => Ok(()),
        other => Err(unexpected(write, &other)),
    }
}

fn changed(write: &str, written: Written) -> Result<bool, StoreError> {
    match written {
        Written::Changed(changed) => Ok(changed),
        other => Err(unexpected(write, &other)),
    }
}

/// The store's commands and reads, typed.
///
/// Its futures are the callers' own (not boxed, as a `dyn` trait's must be): only [`Store`]'s
/// methods cross the `dyn` boundary. Every caller holds a concrete store (`dyn Store`, or one
/// of the stores), whose futures are `Send` when the store's are.
#[allow(async_fn_in_trait)]
pub trait StoreExt: Store {
    /// Inserts or updates a run.
    async fn save_run(&self, run: &Run) -> Result<(), StoreError> {
        done("run", self.write(Write::SaveRun(Box::new(run.clone()))).await?)
    }

    /// Ends a stored run without reading it; false when there is no such run.
    async fn finish_run(&self, id: RunId, status: RunStatus, result: &str, at: i64) -> Result<bool, StoreError> {
        changed("finish", self.write(Write::FinishRun { id, status, result: result.to_owned(), at }).await?)
    }

    /// Saves the run and inserts its new question, in one transaction.
    async fn ask(&self, run: &Run, question: &Arc<Question>) -> Result<(), StoreError> {
        done("ask", self.write(Write::Ask { run: Box::new(run.clone()), question: question.clone() }).await?)
    }

    /// The claim-once write (see [`Write::Resolve`]).
    async fn resolve(&self, resolution: Resolution) -> Result<Claim, StoreError> {
        match self.write(Write::Resolve(Box::new(resolution))).await? {
            Written::Claim(claim) => Ok(*claim),
            other => Err(unexpected("claim", &other)),
        }
    }

    /// See [`Write::Vote`].
    async fn vote(
        &self,
        question: QuestionId,
        seen: &[Approver],
        approvals: &[Approver],
        update: Option<&str>,
    ) -> Result<bool, StoreError> {
        let write = Write::Vote {
            question,
            seen: seen.to_vec(),
            approvals: approvals.to_vec(),
            update: update.map(str::to_owned),
        };
        changed("vote", self.write(write).await?)
    }

    /// See [`Write::Nudge`].
    async fn advance_nudge(
        &self,
        question: QuestionId,
        seen: i64,
        next: Option<i64>,
        escalated_to: Option<&Conversation>,
    ) -> Result<bool, StoreError> {
        let write = Write::Nudge { question, seen, next, escalated_to: escalated_to.cloned() };
        changed("nudge", self.write(write).await?)
    }

    /// Records a rendered card.
    async fn add_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        done("card", self.write(Write::Deliver(delivery.clone())).await?)
    }

    /// Revokes a grant; false when there was no live grant with that id.
    async fn revoke_grant(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        changed("revocation", self.write(Write::RevokeGrant { id: id.to_owned(), at }).await?)
    }

    /// Records an inbound update key; false when it was seen before.
    async fn first_seen(&self, key: &str, at: i64) -> Result<bool, StoreError> {
        changed("update key", self.write(Write::Seen { key: key.to_owned(), at }).await?)
    }

    /// Keeps what `person` has filled in so far of the form `question` (none: forgets it).
    async fn set_draft(
        &self,
        question: QuestionId,
        person: &str,
        draft: Option<crate::question::form::Draft>,
        at: i64,
    ) -> Result<(), StoreError> {
        done("draft", self.write(Write::Draft { question, person: person.to_owned(), draft, at }).await?)
    }

    /// Records how many `say` messages a run has delivered.
    async fn set_says(&self, run: RunId, says: u32) -> Result<(), StoreError> {
        done("says", self.write(Write::Says { run, says }).await?)
    }

    /// See [`Write::Prune`].
    async fn prune(&self, ended_before: Option<i64>, seen_before: i64, limit: u32) -> Result<Pruned, StoreError> {
        match self.write(Write::Prune { ended_before, seen_before, limit }).await? {
            Written::Pruned(pruned) => Ok(pruned),
            other => Err(unexpected("prune", &other)),
        }
    }

    /// Adds a person's credential; false when its name or its secret is taken.
    async fn add_login(&self, login: &Login) -> Result<bool, StoreError> {
        changed("login", self.write(Write::AddLogin(Box::new(login.clone()))).await?)
    }

    /// Deletes the credential `name`; false when there is none.
    async fn remove_login(&self, name: &str) -> Result<bool, StoreError> {
        changed("logout", self.write(Write::RemoveLogin { name: name.to_owned() }).await?)
    }

    /// See [`Write::UseLink`].
    async fn use_link(
        &self,
        digest: &str,
        now: i64,
        name: &str,
        session: &str,
        until: i64,
    ) -> Result<Option<Login>, StoreError> {
        let write = Write::UseLink {
            digest: digest.to_owned(),
            now,
            name: name.to_owned(),
            session: session.to_owned(),
            until,
        };
        match self.write(write).await? {
            Written::Login(login) => Ok(login.map(|l| *l)),
            other => Err(unexpected("sign-in", &other)),
        }
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
        self.cards(&[question]).await
    }

    /// The rendered cards of several questions, in one read.
    async fn deliveries_of(&self, questions: &[QuestionId]) -> Result<Vec<Delivery>, StoreError> {
        self.cards(questions).await
    }

    /// The question a recorded message belongs to, and which it is (see [`Store::card_at`]).
    async fn question_for_card(
        &self,
        surface: crate::question::Surface,
        chat: &str,
        message: &str,
    ) -> Result<Option<(QuestionId, super::DeliveryRole)>, StoreError> {
        self.card_at(surface, chat, message).await
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
