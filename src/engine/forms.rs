//! Forms answered one field at a time: what each person has filled in so far is kept in the
//! store (a draft per question and person), each message or tap fills the next field (or a
//! named one), and the field that completes the form sends the whole answer to the claim.
//! A form answered all at once (`/answer <id> name=Ada age=36`, a JSON object, a client's
//! form) goes to the claim directly and never has a draft. A tap or a modal hands its value
//! as it is ([`Fill`]); only text typed in a message is read.

use std::sync::Arc;

use super::claim::Attempt;
use super::{Claims, Resolver};
use crate::clock::Clock;
use crate::question::form::{Draft, FieldError, Fill, Hint};
use crate::question::{Choice, Question, Receipt};
use crate::store::{Store, StoreError, StoreExt};

/// What one step of filling a form gives.
#[derive(Clone, Debug, PartialEq)]
pub enum Filling<'a> {
    /// Text typed in a message: the next field's value, or every field at once (`key=value`
    /// pairs, a JSON object).
    Typed(&'a str),
    /// A value for the field with this key.
    Field(&'a str, Fill),
    /// Every field at once: an object of values by key (what is filled in, sent as it is).
    Whole(serde_json::Value),
}

/// Where a form stands after one step of filling it.
#[derive(Debug)]
pub enum FormStep {
    /// The field was filled (or left out); `next` is the key of the field asked now.
    Next {
        /// What this person has filled in so far.
        draft: Draft,
        /// The field asked next.
        next: String,
    },
    /// The step completed the form; its answer went to the claim, which says how it went.
    Done {
        /// What the claim's sender is told.
        receipt: Receipt,
        /// The question as stored once this step resolved it.
        resolved: Option<Arc<Question>>,
    },
    /// What was given does not fit the field; nothing changed.
    Invalid(FieldError),
    /// The step was refused before anything was read: not this person's to answer, or the
    /// question is no form.
    Refused(Receipt),
}

/// Forms, the service that fills a form a field at a time: over the store's drafts, the clock,
/// and the claims the completed form goes to.
#[derive(Clone)]
pub struct Forms(Arc<FormsParts>);

/// The parts of [`Forms`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct FormsParts {
    store: Arc<dyn Store>,
    clock: Clock,
    claims: Claims,
}

super::parts!(Forms, FormsParts);

impl Forms {
    /// Forms over the store's drafts, the clock and the claims.
    pub(super) fn new(store: Arc<dyn Store>, clock: Clock, claims: Claims) -> Self {
        Self(Arc::new(FormsParts { store, clock, claims }))
    }

    /// One step of filling `question` (a form, or several questions) as `resolver` with
    /// `filling`: a field's value, typed text for the next field (a dash leaves a field that is
    /// not required out), or every field at once.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn form_step(
        &self,
        question: &Question,
        resolver: &Resolver,
        filling: Filling<'_>,
    ) -> Result<FormStep, StoreError> {
        let Some(form) = &question.form else {
            let hint = "this question has no fields".to_owned();
            return Ok(FormStep::Refused(Receipt::InvalidChoice { id: question.id, hint }));
        };
        if !resolver.may_answer(question) {
            return Ok(FormStep::Refused(Receipt::NotAuthorized { id: question.id }));
        }
        if !question.is_pending() {
            // The claim says how it ended.
            return Ok(self.claims.claim_choice(question, None, resolver).await?.into());
        }
        // A field's value, or the whole form's answer checked.
        let one_field = match filling {
            Filling::Field(key, fill) => Ok((Some(key), fill)),
            Filling::Typed(text) if looks_whole(form, text) => Err(form.parse_text(text)),
            Filling::Typed(text) => Ok((None, Fill::Typed(text.to_owned()))),
            Filling::Whole(answer) => Err(form.check(&answer)),
        };
        let (field, fill) = match one_field {
            Ok(one) => one,
            Err(Ok(answer)) => return Ok(self.finish_form(question, resolver, answer).await?.into()),
            Err(Err(e)) => return Ok(FormStep::Invalid(e)),
        };
        let person = resolver.user.to_string();
        let mut draft = self.store.draft(question.id, &person).await?.unwrap_or_default();
        let target = match field {
            Some(key) => form.field(key),
            None => form.next_field(&draft),
        };
        let Some(target) = target else {
            let key = crate::text::clip(field.unwrap_or_default(), 40, "…");
            let hint = Hint::NoSuchField(form.fields.iter().map(|f| f.key.clone()).collect());
            return Ok(FormStep::Invalid(FieldError { key, hint }));
        };
        if let Err(e) = form.put(&mut draft, target, &fill) {
            return Ok(FormStep::Invalid(e));
        }
        if let Some(next) = form.next_field(&draft) {
            let next = next.key.clone();
            self.store.set_draft(question.id, &person, Some(draft.clone()), self.clock.now_ms()).await?;
            return Ok(FormStep::Next { draft, next });
        }
        match form.finish(&draft) {
            Ok(answer) => Ok(self.finish_form(question, resolver, answer).await?.into()),
            Err(e) => Ok(FormStep::Invalid(e)),
        }
    }

    /// What `user` has filled in so far of the form `question`.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn form_draft(&self, question: &Question, user: &crate::question::UserRef) -> Result<Draft, StoreError> {
        Ok(self.store.draft(question.id, user.as_str()).await?.unwrap_or_default())
    }

    /// Starts `user`'s filling of `question` over: their draft is forgotten.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn forget_draft(&self, question: &Question, user: &crate::question::UserRef) -> Result<(), StoreError> {
        self.store.set_draft(question.id, user.as_str(), None, self.clock.now_ms()).await
    }

    /// Sends the whole `answer` to the claim as `resolver`; a won claim forgets the draft.
    async fn finish_form(
        &self,
        question: &Question,
        resolver: &Resolver,
        answer: serde_json::Value,
    ) -> Result<Attempt, StoreError> {
        let attempt = self.claims.claim_choice(question, Some(Choice::Answer(answer)), resolver).await?;
        if matches!(attempt.receipt, Receipt::Resolved { .. }) {
            // The draft has served; a lost claim keeps it (the person may read what they gave).
            self.store.set_draft(question.id, resolver.user.as_str(), None, self.clock.now_ms()).await?;
        }
        Ok(attempt)
    }
}

impl From<Attempt> for FormStep {
    fn from(attempt: Attempt) -> Self {
        Self::Done { receipt: attempt.receipt, resolved: attempt.resolved }
    }
}

/// Whether a message gives the whole form at once: a JSON object, or text that starts with
/// `key=` for one of its fields.
fn looks_whole(form: &crate::question::form::Form, text: &str) -> bool {
    let text = text.trim();
    if text.starts_with('{') {
        return true;
    }
    let first = text.split(' ').next().unwrap_or_default();
    first.split_once('=').is_some_and(|(key, _)| !key.is_empty() && form.named(key).is_some())
}
