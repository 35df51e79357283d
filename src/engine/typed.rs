//! A card's own buttons typed where there are none ([`OnCard`]): what the tap does, said in
//! text. "Other…" and "Reject with note…" take their words at once (or say how to give them);
//! a form's buttons fill the person's draft through [`Forms::form_step`](super::Forms::form_step)
//! as the taps do; and the ticks a card keeps on its buttons (a multi-select's, a form's multi
//! choice's) are kept per person in the store, in a draft row of their own beside the form's
//! draft.

use std::fmt::Write;

use super::Resolver;
use super::forms::Filling;
use super::router::Router;
use super::router::{Inbound, Response};
use crate::command::{FormAction, OnCard};
use crate::question::form::{Draft, Fill, Form, Input};
use crate::question::{Choice, Kind, Locale, Question, QuestionRef, UserRef};
use crate::say;
use crate::store::{StoreError, StoreExt};
use crate::wording;

/// The ticks of a multi-select's own options, in a person's ticks row (a form's fields are
/// keyed by their keys).
const OWN_OPTIONS: &str = "";

impl Router {
    /// A card's button typed as a command about the question `id` names.
    pub(super) async fn typed_card(
        &self,
        inbound: &Inbound,
        resolver: &Resolver,
        id: &QuestionRef,
        action: OnCard,
        l: Locale,
    ) -> Result<Response, StoreError> {
        let Some(q) = self.named(inbound, id).await? else {
            return self.unknown(&inbound.conversation, id, l).await;
        };
        let resolver = &*super::board::answering(inbound, resolver, &q);
        if !resolver.may_answer(&q) || !q.is_pending() {
            // Not theirs, or over: the attempt says which, as it would for an answer.
            let attempt = self.claims.attempt_choice(&q, None, resolver).await?;
            return Ok(Response::attempt(attempt, Some(&q), l));
        }
        let short = q.id.short();
        let say = |text: String| Ok(Response::say(text));
        match (action, &q.form) {
            (OnCard::Other(None), _) if q.kind == Kind::Approval => say(say!(l, "typed.edit", id = short)),
            (OnCard::Other(None), _) => say(say!(l, "typed.other", id = short)),
            (OnCard::Other(Some(words)), _) => {
                let attempt = self.claims.attempt(&q, q.own_words(&words), resolver).await?;
                Ok(Response::attempt(attempt, Some(&q), l))
            }
            (OnCard::Note(None), _) => say(say!(l, "typed.note", id = short)),
            (OnCard::Note(Some(note)), _) => {
                let attempt = self.claims.attempt_choice(&q, Some(Choice::Decline(Some(note))), resolver).await?;
                Ok(Response::attempt(attempt, Some(&q), l))
            }
            (OnCard::Toggle(_) | OnCard::Submit, _) if !q.multi || q.form.is_some() => {
                say(say!(l, "typed.one_choice", id = short))
            }
            (OnCard::Toggle(n), _) => {
                if n > q.options.len() {
                    return say(say!(l, "typed.no_option", id = short, n = n, count = q.options.len()));
                }
                let ticked = self.flip_tick(&q, &resolver.user, OWN_OPTIONS, n).await?;
                say(match ticked.as_slice() {
                    [] => say!(l, "typed.none_ticked", id = short),
                    ticked => say!(l, "typed.ticked", id = short, list = listed(ticked, &q.options)),
                })
            }
            (OnCard::Submit, _) => {
                let mut ticks = self.ticks(&q, &resolver.user).await?;
                let ticked = ticked(&ticks, OWN_OPTIONS);
                if ticked.is_empty() {
                    return say(say!(l, "typed.none_ticked", id = short));
                }
                let attempt = self.claims.attempt(&q, q.ticked(&ticked), resolver).await?;
                if attempt.resolved.is_some() {
                    ticks.remove(OWN_OPTIONS);
                    self.set_ticks(&q, &resolver.user, ticks).await?;
                }
                Ok(Response::attempt(attempt, Some(&q), l))
            }
            (_, None) => say(say!(l, "typed.not_a_form", id = short)),
            (action, Some(form)) => self.typed_form(&q, form, resolver, action, l).await,
        }
    }

    /// A form's button typed: fills, ticks, asks for, shows or sends the person's draft.
    async fn typed_form(
        &self,
        q: &Question,
        form: &Form,
        resolver: &Resolver,
        action: OnCard,
        l: Locale,
    ) -> Result<Response, StoreError> {
        let short = q.id.short();
        let field_number = match &action {
            OnCard::Form(action) => action.field(),
            OnCard::Value { field, .. } => Some(*field),
            _ => None,
        };
        let field = match field_number {
            Some(n) => match n.checked_sub(1).and_then(|i| form.fields.get(i)) {
                Some(field) => Some((n, field)),
                None => {
                    let count = form.fields.len();
                    return Ok(Response::say(say!(l, "typed.no_field", id = short, n = n, count = count)));
                }
            },
            None => None,
        };
        let user = &resolver.user;
        match &action {
            OnCard::Form(FormAction::Restart) => {
                self.forms.forget_draft(q, user).await?;
                self.set_ticks(q, user, Draft::new()).await?;
                let first = form.fields.first().map(|f| f.key.as_str()).unwrap_or_default();
                let next = wording::next_field(q, &Draft::new(), first, l).unwrap_or_default();
                return Ok(Response::say(format!("{}\n{next}", say!(l, "tg.started_over"))));
            }
            OnCard::Show => return Ok(Response::say(shown(q, form, &self.forms.form_draft(q, user).await?, l))),
            OnCard::Send => {
                // What is filled in, as one object: left-out fields take their defaults.
                let draft = self.forms.form_draft(q, user).await?;
                let given: Draft = draft.into_iter().filter(|(_, v)| !v.is_null()).collect();
                let whole = Filling::Whole(serde_json::Value::Object(given));
                return self.form_reply(q, resolver, whole, false, l).await;
            }
            _ => {}
        }
        let does_not_fit = |n: usize| Ok(Response::say(say!(l, "typed.does_not_fit", id = short, n = n)));
        let Some((n, field)) = field else { return does_not_fit(0) };
        let action = match action {
            OnCard::Value { value, .. } => {
                let typed = Filling::Field(&field.key, Fill::Typed(value));
                return self.form_reply(q, resolver, typed, false, l).await;
            }
            OnCard::Form(action) => action,
            _ => return does_not_fit(n),
        };
        match action {
            FormAction::Toggle { option, .. } => {
                if !matches!(field.input, Input::Choice { multi: true, .. }) || option > field.options().len() {
                    return does_not_fit(n);
                }
                let ticked = self.flip_tick(q, user, &field.key, option).await?;
                let labels: Vec<String> = field.options().iter().map(|o| o.label().to_owned()).collect();
                let list = if ticked.is_empty() { "—".to_owned() } else { listed(&ticked, &labels) };
                let (label, id) = (field.label(), short);
                Ok(Response::say(say!(l, "typed.field_ticked", field = label, list = list, id = id, n = n)))
            }
            FormAction::Type { .. } => {
                let draft = self.forms.form_draft(q, user).await?;
                let about = wording::next_field(q, &draft, &field.key, l).unwrap_or_default();
                Ok(Response::say(format!("{about}\n{}", say!(l, "typed.field_value", id = short, n = n))))
            }
            action => {
                let mut ticks = self.ticks(q, user).await?;
                let Some(fill) = action.fill(field, &ticked(&ticks, &field.key)) else { return does_not_fit(n) };
                let response = self.form_reply(q, resolver, Filling::Field(&field.key, fill), false, l).await?;
                if matches!(action, FormAction::Done { .. }) && ticks.remove(&field.key).is_some() {
                    self.set_ticks(q, user, ticks).await?;
                }
                Ok(response)
            }
        }
    }

    /// The row a person's ticks are kept in: `<person> ticks`, which no person's own draft
    /// row can be (a person's id has no white space).
    fn ticks_row(user: &UserRef) -> String {
        format!("{user} ticks")
    }

    async fn ticks(&self, q: &Question, user: &UserRef) -> Result<Draft, StoreError> {
        Ok(self.store.draft(q.id, &Self::ticks_row(user)).await?.unwrap_or_default())
    }

    async fn set_ticks(&self, q: &Question, user: &UserRef, ticks: Draft) -> Result<(), StoreError> {
        let ticks = (!ticks.is_empty()).then_some(ticks);
        self.store.set_draft(q.id, &Self::ticks_row(user), ticks, self.clock.now_ms()).await
    }

    /// Ticks option `n` of `key` (a field's key, or [`OWN_OPTIONS`]) when it is not, else
    /// unticks it; returns what is ticked now, in order.
    async fn flip_tick(&self, q: &Question, user: &UserRef, key: &str, n: usize) -> Result<Vec<usize>, StoreError> {
        let mut ticks = self.ticks(q, user).await?;
        let mut ticked = ticked(&ticks, key);
        match ticked.iter().position(|&t| t == n) {
            Some(at) => {
                ticked.remove(at);
            }
            None => ticked.push(n),
        }
        ticked.sort_unstable();
        if ticked.is_empty() {
            ticks.remove(key);
        } else {
            ticks.insert(key.to_owned(), serde_json::json!(ticked));
        }
        self.set_ticks(q, user, ticks).await?;
        Ok(ticked)
    }
}

/// The options ticked for `key` in a person's ticks row.
fn ticked(ticks: &Draft, key: &str) -> Vec<usize> {
    let numbers = ticks.get(key).and_then(serde_json::Value::as_array);
    numbers.into_iter().flatten().filter_map(|n| usize::try_from(n.as_u64()?).ok()).collect()
}

/// `1) dayjs, 3) luxon`.
fn listed(ticked: &[usize], labels: &[String]) -> String {
    let label = |n: usize| labels.get(n - 1).map_or("?", String::as_str);
    ticked.iter().map(|&n| format!("{n}) {}", label(n))).collect::<Vec<_>>().join(", ")
}

/// `/fill`: each field with what the person gave for it, then what comes next.
fn shown(q: &Question, form: &Form, draft: &Draft, l: Locale) -> String {
    let mut out = format!("📝 {} [{}]", crate::text::clip(&q.prompt, 200, "…"), q.id.short());
    for (i, field) in form.fields.iter().enumerate() {
        let given = match draft.get(&field.key) {
            None => "…".to_owned(),
            Some(serde_json::Value::Null) => say!(l, "form.left_out"),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(value) => value.to_string(),
        };
        let _ = write!(out, "\n   {}. {}: {given}", i + 1, field.label());
    }
    let next = form.next_field(draft).and_then(|f| wording::next_field(q, draft, &f.key, l));
    let _ = write!(out, "\n{}", next.unwrap_or_else(|| say!(l, "typed.all_filled", id = q.id.short())));
    out
}
