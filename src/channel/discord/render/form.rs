//! A form (or several questions asked together) as a Discord card: a string select for each
//! choice and yes-or-no field, and one modal, opened by "Fill in…", for the fields typed as
//! text (and for one's own words where a choice allows them). The controls' `custom_id` values
//! are this module's own grammar ([`Control`], [`Entry`]); a form that does not fit Discord's
//! limits gets no controls here, and the card lists its commands instead.

use serde_json::Value;
use serenity::all::{CreateActionRow, CreateInputText, CreateModal, InputTextStyle};
use std::fmt::Write;

use super::{Component, MAX_CUSTOM_ID, MAX_ROWS, MAX_SELECT_OPTIONS, MAX_SELECT_TEXT, SelectOption, Style, escape};
use crate::question::form::{Draft, Field, Fill, Form, Input};
use crate::question::{Locale, Question, QuestionId};
use crate::say;
use crate::text::clip;

/// Text inputs in a modal.
pub const MAX_INPUTS: usize = 5;
/// Characters in a modal's title and in a text input's label.
pub const MAX_INPUT_LABEL: usize = 45;
/// Characters in a text input's placeholder.
pub const MAX_INPUT_PLACEHOLDER: usize = 100;
/// Characters a text input holds (its value, its lengths).
pub const MAX_INPUT_TEXT: usize = 4000;
/// Characters in a select's placeholder.
pub const MAX_SELECT_PLACEHOLDER: usize = 150;

/// A form card's control, as its `custom_id` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// The select of field `n` (from 1): `/field <uuid> <n>`; the picks are its values.
    Field {
        /// The question.
        id: QuestionId,
        /// The field's number, from 1.
        n: usize,
    },
    /// "Fill in…", and the modal it opens: `/fill <uuid>`.
    Fill(QuestionId),
    /// "Send": the form as filled in so far, left-out fields taking their defaults: `/send <uuid>`.
    Send(QuestionId),
}

impl Control {
    /// The `custom_id` that names it: at most 47 characters.
    pub fn custom_id(self) -> String {
        match self {
            Self::Field { id, n } => format!("/field {id} {n}"),
            Self::Fill(id) => format!("/fill {id}"),
            Self::Send(id) => format!("/send {id}"),
        }
    }

    /// The control a `custom_id` names; none for anything else (another card's command, or a
    /// forged or garbled id, which the caller treats as not understood).
    pub fn parse(custom_id: &str) -> Option<Self> {
        let mut words = custom_id.split(' ');
        let verb = words.next()?;
        let id = words.next()?.parse::<QuestionId>().ok()?;
        let control = match verb {
            "/field" => Self::Field { id, n: words.next()?.parse::<usize>().ok().filter(|&n| n >= 1)? },
            "/fill" => Self::Fill(id),
            "/send" => Self::Send(id),
            _ => return None,
        };
        words.next().is_none().then_some(control)
    }
}

/// A text input of the modal, as its `custom_id` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The value of field `n` (from 1): `v<n>`.
    Value(usize),
    /// One's own words for choice field `n` (from 1), instead of its picks: `o<n>`.
    OwnWords(usize),
}

impl Entry {
    /// The `custom_id` that names it.
    pub fn custom_id(self) -> String {
        match self {
            Self::Value(n) => format!("v{n}"),
            Self::OwnWords(n) => format!("o{n}"),
        }
    }

    /// The entry a `custom_id` names; none for anything else.
    pub fn parse(custom_id: &str) -> Option<Self> {
        let n = |digits: &str| digits.parse::<usize>().ok().filter(|&n| n >= 1);
        match custom_id.split_at_checked(1)? {
            ("v", digits) => n(digits).map(Self::Value),
            ("o", digits) => n(digits).map(Self::OwnWords),
            _ => None,
        }
    }

    /// The field's number, from 1.
    pub fn field(self) -> usize {
        match self {
            Self::Value(n) | Self::OwnWords(n) => n,
        }
    }
}

/// One text input of a modal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextInput {
    /// Its [`Entry`].
    pub custom_id: String,
    /// What it asks for.
    pub label: String,
    /// Shown while it is empty: what it takes.
    pub placeholder: String,
    /// Fewest characters.
    pub min: Option<u16>,
    /// Most characters.
    pub max: u16,
    /// Whether it must be filled in to submit.
    pub required: bool,
    /// A paragraph rather than one line.
    pub long: bool,
    /// What it holds when it opens: what this person gave before, or the field's default.
    pub value: Option<String>,
}

/// The modal "Fill in…" opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Modal {
    /// [`Control::Fill`].
    pub custom_id: String,
    /// The question's prompt, shortened.
    pub title: String,
    /// The inputs, in the form's order.
    pub inputs: Vec<TextInput>,
}

/// Whether a field is filled with a select (else it is typed in the modal).
pub fn is_select(field: &Field) -> bool {
    matches!(field.input, Input::Choice { .. } | Input::Boolean { .. })
}

/// Whether a field must be given before the form is complete: required, with no default.
fn needed(field: &Field) -> bool {
    field.required && field.default_value().is_none()
}

/// The action rows of a form's card; none when the form does not fit Discord's limits (more
/// selects than rows, more inputs than a modal holds), and the card lists commands instead.
pub(super) fn rows(q: &Question, form: &Form) -> Option<Vec<Vec<Component>>> {
    let mut rows = Vec::new();
    let l = q.presentation.locale;
    for (i, field) in form.fields.iter().enumerate().filter(|(_, f)| is_select(f)) {
        rows.push(vec![select(q.id, i + 1, field, l)?]);
    }
    let mut buttons = Vec::new();
    let modal = modal(q, form, &Draft::new());
    if !modal.inputs.is_empty() {
        if !modal_fits(&modal) {
            return None;
        }
        buttons.push(super::button(&say!(l, "button.fill_in"), Control::Fill(q.id).custom_id(), Style::Primary));
    }
    if form.fields.iter().any(|f| !needed(f)) {
        buttons.push(super::button(&say!(l, "button.send"), Control::Send(q.id).custom_id(), Style::Secondary));
    }
    buttons.push(super::button(&say!(l, "button.decline"), format!("/decline {}", q.id), Style::Danger));
    rows.push(buttons);
    (rows.len() <= MAX_ROWS).then_some(rows)
}

/// The select of field `n`: its options (or Yes and No), their values `#1`, `#2`… (`yes`, `no`).
fn select(id: QuestionId, n: usize, field: &Field, l: Locale) -> Option<Component> {
    let optional = if needed(field) { String::new() } else { say!(l, "form.optional") };
    let placeholder = clip(&format!("{}{optional}", field.label()), MAX_SELECT_PLACEHOLDER, "…");
    let custom_id = Control::Field { id, n }.custom_id();
    let (options, min, max) = match &field.input {
        Input::Boolean { .. } => {
            let option =
                |label: String, value: &str| SelectOption { label, value: value.to_owned(), description: None };
            (vec![option(say!(l, "button.yes"), "yes"), option(say!(l, "button.no"), "no")], 1, 1)
        }
        Input::Choice { options, multi, min_items, max_items, .. } => {
            let options: Vec<SelectOption> = (options.iter().enumerate())
                .map(|(i, o)| SelectOption {
                    label: clip(o.label(), MAX_SELECT_TEXT, "…"),
                    value: format!("#{}", i + 1),
                    description: o
                        .description
                        .as_deref()
                        .filter(|d| !d.trim().is_empty())
                        .map(|d| clip(d, MAX_SELECT_TEXT, "…")),
                })
                .collect();
            let count = u32::try_from(options.len()).ok().filter(|&c| c as usize <= MAX_SELECT_OPTIONS)?;
            let (min, max) = match multi {
                true => (min_items.unwrap_or(1).max(1), max_items.unwrap_or(count).min(count)),
                false => (1, 1),
            };
            (options, u8::try_from(min).ok()?, u8::try_from(max).ok()?)
        }
        Input::Text { .. } | Input::Number { .. } => return None,
    };
    Some(Component::Select { custom_id, options, min, max, placeholder })
}

/// The modal of a form, holding what `draft` (this person's) has: an input for each field
/// typed as text or a number, and one for one's own words where a choice allows them.
pub fn modal(q: &Question, form: &Form, draft: &Draft) -> Modal {
    let l = q.presentation.locale;
    let mut inputs = Vec::new();
    for (i, field) in form.fields.iter().enumerate() {
        let label = |text: &str| clip(text, MAX_INPUT_LABEL, "…");
        let placeholder = |text: &str| clip(text, MAX_INPUT_PLACEHOLDER, "…");
        let given = draft.get(&field.key).filter(|v| !v.is_null());
        match &field.input {
            Input::Text { min_length, max_length, format, .. } => {
                // The question itself says more than "text" (several questions asked together).
                let takes = match (format, &field.description) {
                    (None, Some(about)) => about.clone(),
                    _ => field.takes(l),
                };
                let max = max_length.map_or(MAX_INPUT_TEXT, |m| m as usize).min(MAX_INPUT_TEXT);
                let value = given.or(field.default_value().as_ref()).and_then(Value::as_str).map(|s| clip(s, max, ""));
                inputs.push(TextInput {
                    custom_id: Entry::Value(i + 1).custom_id(),
                    label: label(field.label()),
                    placeholder: placeholder(&takes),
                    min: min_length.map(|m| u16::try_from(m).unwrap_or(u16::MAX)),
                    max: u16::try_from(max).unwrap_or(u16::MAX),
                    required: field.required,
                    long: format.is_none() && max > 200,
                    value,
                });
            }
            Input::Number { .. } => inputs.push(TextInput {
                custom_id: Entry::Value(i + 1).custom_id(),
                label: label(field.label()),
                placeholder: placeholder(&field.takes(l)),
                min: None,
                max: 40,
                required: field.required,
                long: false,
                value: given.cloned().or_else(|| field.default_value()).map(|n| n.to_string()),
            }),
            Input::Choice { options, multi, other: true, .. } => {
                let own = |v: &Value| v.as_str().filter(|s| !options.iter().any(|o| o.value == *s)).map(str::to_owned);
                let words: Vec<String> = match given {
                    Some(Value::Array(items)) => items.iter().filter_map(own).collect(),
                    Some(v) => own(v).into_iter().collect(),
                    None => Vec::new(),
                };
                let several = if *multi { "; several: a, b" } else { "" };
                inputs.push(TextInput {
                    custom_id: Entry::OwnWords(i + 1).custom_id(),
                    label: label(&format!("{}: your own words", field.label())),
                    placeholder: placeholder(&format!("instead of picking from the menu{several}")),
                    min: None,
                    max: MAX_INPUT_TEXT as u16,
                    required: false,
                    long: false,
                    value: (!words.is_empty()).then(|| words.join(", ")),
                });
            }
            Input::Choice { .. } | Input::Boolean { .. } => {}
        }
    }
    Modal { custom_id: Control::Fill(q.id).custom_id(), title: clip(&q.prompt, MAX_INPUT_LABEL, "…"), inputs }
}

/// Whether a modal keeps every Discord limit.
pub fn modal_fits(modal: &Modal) -> bool {
    let within = |text: &str, max: usize| !text.trim().is_empty() && text.chars().count() <= max;
    modal.custom_id.len() <= MAX_CUSTOM_ID
        && within(&modal.title, MAX_INPUT_LABEL)
        && (1..=MAX_INPUTS).contains(&modal.inputs.len())
        && modal.inputs.iter().all(|input| {
            let max = usize::from(input.max);
            let min = input.min.map_or(0, usize::from);
            within(&input.custom_id, MAX_CUSTOM_ID)
                && within(&input.label, MAX_INPUT_LABEL)
                && input.placeholder.chars().count() <= MAX_INPUT_PLACEHOLDER
                && (1..=MAX_INPUT_TEXT).contains(&max)
                && min <= max
                && input.value.as_ref().is_none_or(|v| v.chars().count() <= max)
        })
}

/// The modal as serenity's builder.
pub fn create_modal(modal: &Modal) -> CreateModal {
    let rows = (modal.inputs.iter())
        .map(|input| {
            let style = if input.long { InputTextStyle::Paragraph } else { InputTextStyle::Short };
            let mut text = CreateInputText::new(style, &input.label, &input.custom_id)
                .placeholder(&input.placeholder)
                .max_length(input.max)
                .required(input.required);
            if let Some(min) = input.min {
                text = text.min_length(min);
            }
            if let Some(value) = &input.value {
                text = text.value(value);
            }
            CreateActionRow::InputText(text)
        })
        .collect();
    CreateModal::new(&modal.custom_id, &modal.title).components(rows)
}

/// The card's list of the fields, each with what it takes when it is typed; and a line on how
/// to fill them in (Discord markdown, escaped).
pub(super) fn fields_text(form: &Form, l: Locale) -> (String, String) {
    let mut out = String::new();
    for field in &form.fields {
        let optional = if needed(field) { String::new() } else { say!(l, "form.optional") };
        let _ = write!(out, "\n**{}**{optional}", escape(field.label()));
        if let Some(about) = &field.description {
            let _ = write!(out, ": {}", escape(&clip(about, 200, "…")));
        }
        if !is_select(field) {
            let _ = write!(out, " · {}", escape(&clip(&field.takes(l), 120, "…")));
        }
    }
    let selects = form.fields.iter().any(is_select);
    let typed = form.fields.iter().any(|f| !is_select(f));
    let how = match (selects, typed) {
        (true, true) => say!(l, "discord.pick_and_fill"),
        (true, false) => say!(l, "discord.pick"),
        _ => say!(l, "discord.press_fill"),
    };
    let send = match form.fields.iter().any(|f| !needed(f)) {
        true => say!(l, "discord.send_as_is"),
        false => String::new(),
    };
    (out, format!("{how}{send}"))
}

/// What a field's select sent, as its field takes it: an option's position, the positions
/// ticked, or yes or no; none when the values are no options of it (forged).
pub fn select_fill(field: &Field, values: &[String]) -> Option<Fill> {
    match (&field.input, values) {
        (Input::Boolean { .. }, [one]) if one == "yes" || one == "no" => Some(Fill::YesNo(one == "yes")),
        (Input::Choice { options, multi, .. }, values) if !values.is_empty() && (*multi || values.len() == 1) => {
            let numbers = (values.iter())
                .map(|v| v.strip_prefix('#')?.parse::<usize>().ok().filter(|n| (1..=options.len()).contains(n)))
                .collect::<Option<Vec<usize>>>()?;
            match multi {
                true => Some(Fill::Ticked(numbers)),
                false => numbers.first().copied().map(Fill::Option),
            }
        }
        _ => None,
    }
}

/// A select field's value as this person gave it, as what gives it again: option positions,
/// yes or no, own words, or the field left out.
pub fn restate(field: &Field, value: &Value) -> Option<Fill> {
    let options = field.options();
    let position = |v: &Value| Some(options.iter().position(|o| Some(o.value.as_str()) == v.as_str())? + 1);
    match (&field.input, value) {
        (_, Value::Null) => Some(Fill::Cleared),
        (Input::Boolean { .. }, Value::Bool(b)) => Some(Fill::YesNo(*b)),
        (Input::Choice { multi: true, .. }, Value::Array(items)) => match items.iter().map(position).collect() {
            Some(ticked) => Some(Fill::Ticked(ticked)),
            // Own words among them: each is given again by its words (an option by its name).
            None => Some(Fill::Words(items.iter().map(Value::as_str).collect::<Option<Vec<_>>>()?.join(","))),
        },
        (Input::Choice { multi: false, .. }, Value::String(s)) => {
            Some(position(value).map_or_else(|| Fill::Words(s.clone()), Fill::Option))
        }
        _ => None,
    }
}

/// Where a person filling the form in stands: what is still needed, or that it may be sent.
pub fn progress(form: &Form, draft: &Draft, l: Locale) -> String {
    let missing: Vec<&str> =
        form.fields.iter().filter(|f| needed(f) && !draft.contains_key(&f.key)).map(Field::label).collect();
    if !missing.is_empty() {
        return say!(l, "form.saved_missing", fields = missing.join(", "));
    }
    let open: Vec<&str> = form.fields.iter().filter(|f| !draft.contains_key(&f.key)).map(Field::label).collect();
    if open.is_empty() {
        return say!(l, "form.saved");
    }
    say!(l, "form.saved_send", fields = open.join(", "))
}

#[cfg(test)]
mod tests;
