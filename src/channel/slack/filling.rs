//! Forms filled in on Slack: the card's "Fill in…" opens a modal with an input per field
//! ([`super::form`]), and its submission is answered in the reply Slack waits for (the Socket
//! Mode acknowledgement's payload, or the HTTP response's body): the fields that do not fit,
//! each under its input, with the modal kept open; or the modal closed and the question
//! answered; or, when it was answered first elsewhere, the modal saying so.

use slack_morphism::prelude::*;
use tokio::sync::oneshot;

use super::inbound::Handler;
use super::{Place, form, user_ref};
use crate::engine::{CardRefusal, Filling, FormStep, Resolver};
use crate::question::{Conversation, Question, QuestionId, Receipt, UserRef};
use crate::wording::{self, replies};

const NOT_UNDERSTOOD: &str = "That button is not understood.";

impl Handler<'_> {
    /// "Fill in…" on a form's card: the modal opens for a person who may answer it; anyone
    /// else is told why not, privately.
    pub(super) async fn open_form(
        &self,
        trigger: &SlackTriggerId,
        id: QuestionId,
        conversation: &Conversation,
        who: &UserRef,
        place: &Place,
        user: &str,
    ) {
        let question = match self.engine.records().open_card(id, conversation, who).await {
            Ok(q) => q,
            Err(refusal) => return self.slack.whisper(place, user, &refusal.to_string()).await,
        };
        let Some(fields) = &question.form else { return self.slack.whisper(place, user, NOT_UNDERSTOOD).await };
        let request = SlackApiViewsOpenRequest::new(trigger.clone(), form::modal(&question, fields, conversation));
        if let Err(e) = self.slack.session().views_open(&request).await {
            tracing::warn!(error = %e, "could not open a slack form");
        }
    }

    /// A form's modal submitted: what Slack is to answer goes to `reply`. When the reply was
    /// given up on (Slack waits 3 s), the person is told in a note instead.
    pub(super) async fn on_form(
        &self,
        event: SlackInteractionViewSubmissionEvent,
        reply: oneshot::Sender<SlackViewSubmissionResponse>,
    ) {
        let SlackView::Modal(modal) = &event.view.view else { return };
        let id = modal.callback_id.as_ref().and_then(|c| form::question_of(&c.0));
        let conversation = modal.private_metadata.as_deref().and_then(|m| Conversation::parse(m).ok());
        let (Some(id), Some(conversation), Some(who)) = (id, conversation, user_ref(&event.user.id.0)) else {
            let _ = reply.send(form::refused("This form is not understood."));
            return;
        };
        let mut resolver = Resolver::person(who, super::SURFACE);
        resolver.name = crate::question::display_name(&super::inbound::name(&event.user));
        resolver.update = Some(format!("slack:view:{}", event.view.state_params.id));
        resolver.conversation = Some(conversation.clone());
        let answer = self.fill(id, &conversation, &resolver, event.view.state_params.state.as_ref()).await;
        if let Err(answer) = reply.send(answer) {
            // Too late for the reply: Slack closed the modal, so what it would have said is a note.
            let text = match answer {
                SlackViewSubmissionResponse::Errors(errors) => {
                    let mut fields: Vec<String> = errors.errors.into_values().collect();
                    fields.sort();
                    Some(format!("Not accepted: {}", fields.join("; ")))
                }
                SlackViewSubmissionResponse::Update(_) | SlackViewSubmissionResponse::Push(_) => {
                    Some("This question was answered before your form arrived.".to_owned())
                }
                SlackViewSubmissionResponse::Clear(_) => None,
            };
            if let (Some(text), Ok(place)) = (text, Place::of(&conversation)) {
                self.slack.whisper(&place, &event.user.id.0, &text).await;
            }
        }
    }

    /// Checks every field of the submission, then answers the question with it: errors under
    /// the fields that do not fit; the modal cleared when it answered; the modal saying how the
    /// question ended when it had ended already.
    async fn fill(
        &self,
        id: QuestionId,
        conversation: &Conversation,
        resolver: &Resolver,
        state: Option<&SlackViewState>,
    ) -> SlackViewSubmissionResponse {
        let question = match self.engine.records().open_card(id, conversation, &resolver.user).await {
            Ok(q) => q,
            Err(CardRefusal::Closed(q)) => return ended(&q, None),
            Err(refusal) => return form::refused(&refusal.to_string()),
        };
        let l = question.presentation.locale;
        let Some(fields) = &question.form else { return form::refused(NOT_UNDERSTOOD) };
        let answer = match fields.check_each(&form::answer(fields, state)) {
            Ok(answer) => answer,
            Err(errors) => return form::errors(&errors, l),
        };
        match self.engine.forms().form_step(&question, resolver, Filling::Whole(answer)).await {
            Ok(FormStep::Done { receipt: Receipt::Resolved { .. }, .. }) => {
                SlackViewSubmissionResponse::Clear(SlackViewSubmissionClearResponse::new())
            }
            Ok(FormStep::Done { receipt, .. } | FormStep::Refused(receipt)) => match receipt {
                Receipt::InvalidChoice { hint, .. } => form::refused(&hint),
                Receipt::NotAuthorized { .. } => form::refused(&CardRefusal::NotYours.to_string()),
                receipt => ended(&question, Some(&receipt)),
            },
            Ok(FormStep::Invalid(e)) => form::refused(&e.describe(l)),
            Ok(FormStep::Next { .. }) => form::refused(NOT_UNDERSTOOD),
            Err(e) => {
                tracing::error!(error = %e, "could not answer a slack form");
                form::refused(&replies::failed(l))
            }
        }
    }
}

/// The modal, replaced by one that says how the question ended (and who answered first).
fn ended(question: &Question, receipt: Option<&Receipt>) -> SlackViewSubmissionResponse {
    let l = question.presentation.locale;
    let text = receipt
        .and_then(|r| wording::receipt(r, Some(question), l))
        .unwrap_or_else(|| format!("Already closed: {}", question.outcome_line_in(l)));
    SlackViewSubmissionResponse::Update(SlackViewSubmissionUpdateResponse::new(form::closed(&text)))
}
