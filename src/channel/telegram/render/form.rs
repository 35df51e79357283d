//! A form (or several questions asked together) as one Telegram card, filled field by field:
//! the text lists every field with what the person gave so far and says what the current one
//! takes; the keyboard holds the current field's controls only. Pure functions, like the rest
//! of `render`.

use std::fmt::Write;

use serde_json::Value;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardButtonKind, InlineKeyboardMarkup};

use super::{CHECKED, Card, UNCHECKED, body, button, fits, html, text_commands};
use crate::command::{CardAction, FormAction, Tap};
use crate::question::Locale;
use crate::question::form::{Draft, Field, Form, Input};
use crate::question::{Outcome, Question};
use crate::say;
use crate::text::clip;
use crate::wording;

/// The mark of a filled field.
const FILLED: &str = "✓";
/// The mark of a field left out.
const LEFT_OUT: &str = "–";
/// The mark of the field asked now.
const CURRENT: &str = "▸";
/// The mark of a field not reached yet.
const LATER: &str = "·";

/// What the lines of the fields other than the current one take together, at most.
const OTHERS_SHARE: usize = 1_000;
/// What the current field's options with their descriptions take, at most.
const OPTIONS_SHARE: usize = 1_600;

/// The card of `q`, a form, as `draft` (one person's) fills it: the field asked next has its
/// controls on the keyboard. When a payload would not fit (it always does with a full
/// question id), the text lists the commands instead, as for every card.
pub fn card(q: &Question, form: &Form, draft: &Draft, now_ms: i64) -> Card {
    let rows = keyboard(q, form, draft);
    let fields = fields(form, draft, true, q.presentation.locale);
    if fits(&rows) {
        let text = html(&body(q, now_ms, None, fields), "");
        return Card { text, keyboard: Some(InlineKeyboardMarkup::new(rows)) };
    }
    let commands = text_commands(q);
    Card { text: html(&body(q, now_ms, Some(&commands), fields), &commands), keyboard: None }
}

/// The fields of a resolved form as the answer holds them (none when it was not answered).
pub(super) fn answered(q: &Question, form: &Form) -> String {
    match &q.outcome {
        Some(Outcome::Answered { value: Value::Object(answer) }) => {
            // Fields left out are neither in the answer nor waiting any more.
            let mut shown = answer.clone();
            for field in &form.fields {
                shown.entry(field.key.clone()).or_insert(Value::Null);
            }
            fields(form, &shown, false, q.presentation.locale)
        }
        _ => String::new(),
    }
}

/// The fields, a line each, after a blank line: filled, left out, the current one (with what it
/// takes, when `current` is asked for) and those still to come.
fn fields(form: &Form, draft: &Draft, current: bool, l: Locale) -> String {
    let next = form.next_field(draft).map(|f| f.key.as_str()).filter(|_| current);
    let line_share = (OTHERS_SHARE / form.fields.len().max(1)).max(30);
    let mut out = String::from("\n");
    for field in &form.fields {
        if Some(field.key.as_str()) == next {
            out.push_str(&asked(field, l));
            continue;
        }
        let line = match draft.get(&field.key) {
            Some(Value::Null) => format!("{LEFT_OUT} {}: {}", field.label(), say!(l, "form.left_out")),
            Some(value) => format!("{FILLED} {}: {}", field.label(), shown(field, value, l)),
            None => format!("{LATER} {}", field.label()),
        };
        // A line a field: a value typed over several lines reads on one.
        let _ = write!(out, "\n{}", clip(&line.replace(['\r', '\n'], " "), line_share, "…"));
    }
    out
}

/// The field asked now: its name, its description, and what it takes (for a choice, the
/// options with their descriptions, when any has one: the buttons show labels only).
fn asked(field: &Field, l: Locale) -> String {
    let optional = if field.required { String::new() } else { say!(l, "form.optional") };
    let mut out = format!("\n{CURRENT} {}{optional}", clip(field.label(), 150, "…"));
    if let Some(about) = &field.description {
        let _ = write!(out, "\n   {}", clip(about, 400, "…"));
    }
    match &field.input {
        Input::Choice { options, multi, other, .. } => {
            let mut list = String::new();
            if options.iter().any(|o| o.description.is_some()) {
                let labels: usize = options.iter().map(|o| o.label().chars().count() + 8).sum();
                let share = OPTIONS_SHARE.saturating_sub(labels) / options.len().max(1);
                for (i, option) in options.iter().enumerate() {
                    let _ = write!(list, "\n   {}. {}", i + 1, option.label());
                    if let Some(about) = option.description.as_deref().filter(|_| share > 1) {
                        let _ = write!(list, " — {}", clip(about, share, "…"));
                    }
                }
            }
            out.push_str(&clip(&list, OPTIONS_SHARE, "…"));
            match (multi, other) {
                (true, true) => out.push_str(&format!("\n   {}", say!(l, "form.tick_done_other"))),
                (true, false) => out.push_str(&format!("\n   {}", say!(l, "form.tick_done"))),
                (false, true) => out.push_str(&format!("\n   {}", say!(l, "form.or_other"))),
                (false, false) => {}
            }
        }
        Input::Boolean { .. } => {}
        Input::Text { .. } | Input::Number { .. } => {
            let takes = wording::capitalise(&clip(&field.takes(l), 300, "…"));
            let _ = write!(out, "\n   {}", say!(l, "form.type_it", takes = takes));
        }
    }
    out
}

/// A value as people read it: an option's label, yes or no, a list joined.
fn shown(field: &Field, value: &Value, l: Locale) -> String {
    let label = |v: &Value| match v {
        Value::String(s) => {
            field.options().iter().find(|o| &o.value == s).map_or_else(|| s.clone(), |o| o.label().to_owned())
        }
        Value::Bool(true) => say!(l, "button.yes"),
        Value::Bool(false) => say!(l, "button.no"),
        other => other.to_string(),
    };
    match value {
        Value::Array(items) if items.is_empty() => say!(l, "form.none"),
        Value::Array(items) => items.iter().map(label).collect::<Vec<_>>().join(", "),
        other => label(other),
    }
}

/// The controls of the field `draft` asks next, then "Start over" and "Decline".
pub fn keyboard(q: &Question, form: &Form, draft: &Draft) -> Vec<Vec<InlineKeyboardButton>> {
    let (id, l) = (q.id, q.presentation.locale);
    let data = |action| Tap::Card { id, action: CardAction::Form(action) }.to_string();
    let mut rows = Vec::new();
    if let Some((i, field)) = form.fields.iter().enumerate().find(|(_, f)| !draft.contains_key(&f.key)) {
        let field_n = i + 1;
        let mut actions = Vec::new();
        match &field.input {
            Input::Choice { options, multi, other, .. } => {
                for (j, option) in options.iter().enumerate() {
                    let option_n = j + 1;
                    let row = match multi {
                        true => button(
                            format!("{UNCHECKED} {}", option.label()),
                            data(FormAction::Toggle { field: field_n, option: option_n }),
                        ),
                        false => button(option.label(), data(FormAction::Set { field: field_n, option: option_n })),
                    };
                    rows.push(vec![row]);
                }
                if *other {
                    actions.push(button(say!(l, "button.other"), data(FormAction::Type { field: field_n })));
                }
                if *multi {
                    actions.push(button(say!(l, "button.done"), data(FormAction::Done { field: field_n })));
                }
            }
            Input::Boolean { .. } => rows.push(vec![
                button(say!(l, "button.yes"), data(FormAction::Set { field: field_n, option: 1 })),
                button(say!(l, "button.no"), data(FormAction::Set { field: field_n, option: 2 })),
            ]),
            Input::Text { .. } | Input::Number { .. } => {
                actions.push(button(say!(l, "button.type_it"), data(FormAction::Type { field: field_n })));
            }
        }
        if !field.required {
            actions.push(button(say!(l, "button.skip"), data(FormAction::Skip { field: field_n })));
        }
        if !actions.is_empty() {
            rows.push(actions);
        }
    }
    rows.push(vec![
        button(say!(l, "button.start_over"), data(FormAction::Restart)),
        button(say!(l, "button.decline"), format!("/decline {id}")),
    ]);
    rows
}

/// Flips the tick of the button that carries `data` (a multi choice's option); none when the
/// keyboard has no such button (the card moved on to another field).
pub fn toggle(markup: &InlineKeyboardMarkup, data: &str) -> Option<InlineKeyboardMarkup> {
    let mut markup = markup.clone();
    let b = markup.inline_keyboard.iter_mut().flatten().find(|b| carries(b, data))?;
    b.text = if let Some(rest) = b.text.strip_prefix(UNCHECKED) {
        format!("{CHECKED}{rest}")
    } else {
        format!("{UNCHECKED}{}", b.text.strip_prefix(CHECKED)?)
    };
    Some(markup)
}

/// The options (numbers from 1) ticked on the keyboard for field `field` of `q`.
pub fn ticked(markup: &InlineKeyboardMarkup, q: &Question, field: usize) -> Vec<usize> {
    let prefix = format!("/ftoggle {} {field} ", q.id);
    markup
        .inline_keyboard
        .iter()
        .flatten()
        .filter(|b| b.text.starts_with(CHECKED))
        .filter_map(|b| match &b.kind {
            InlineKeyboardButtonKind::CallbackData(d) => d.strip_prefix(&prefix)?.parse().ok(),
            _ => None,
        })
        .collect()
}

fn carries(b: &InlineKeyboardButton, data: &str) -> bool {
    matches!(&b.kind, InlineKeyboardButtonKind::CallbackData(d) if d == data)
}

/// The prompt sent after "✍️ Type it…" (or a choice's "Other…"): a reply to it is the value of
/// the person's next field, `field`.
pub fn prompt(q: &Question, field: &Field) -> String {
    let takes = clip(&field.takes(q.presentation.locale), 300, "…");
    format!("✍️ {} ({}): {takes}", clip(field.label(), 100, "…"), q.id.short())
}

#[cfg(test)]
mod tests;
