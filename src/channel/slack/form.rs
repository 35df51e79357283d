//! A form (or several questions asked together) filled in on Slack in a modal: one Block Kit
//! input per field, chosen by what the field takes, and the submission read back into one
//! answer object. Everything here is plain slack-morphism data, so that Slack's limits are kept
//! and tested without a network; what cannot be kept is said in the modal.

use std::collections::HashMap;

use serde_json::{Map, Value};
use slack_morphism::prelude::*;

use super::render::{MAX_INPUT, MAX_LABEL, MAX_SECTION, escape};
use crate::question::form::{Field, FieldError, Form, Input, TextFormat};
use crate::question::{Conversation, Locale, Question, QuestionId};
use crate::text::clip;

/// Characters in an input's label, and in its hint.
pub const MAX_INPUT_LABEL: usize = 2000;
/// Characters in a placeholder.
pub const MAX_PLACEHOLDER: usize = 150;
/// Characters in a modal's title and its buttons.
pub const MAX_TITLE: usize = 24;
/// Blocks in a modal.
pub const MAX_MODAL_BLOCKS: usize = 100;
/// Characters of a field's error shown under its input.
const MAX_ERROR: usize = 300;

/// A form modal's `callback_id` is this, then the question's id.
const CALLBACK: &str = "form:";
/// The `action_id` of every field's input (each is in a block of its own).
const ACTION: &str = "v";
/// Plain-text inputs of at most this many characters are one line; longer ones, and those with
/// no limit, are boxes.
const ONE_LINE: u32 = 150;

/// The block of field `i` (from 0): `f1`, `f2`…; Slack names a field that does not fit by it.
fn block_id(i: usize) -> String {
    format!("f{}", i + 1)
}

/// The block of field `i`'s own words, beside its options.
fn own_words_id(i: usize) -> String {
    format!("f{}o", i + 1)
}

/// The question a form modal's `callback_id` names; none for another modal.
pub fn question_of(callback_id: &str) -> Option<QuestionId> {
    callback_id.strip_prefix(CALLBACK)?.parse().ok()
}

fn plain(text: &str, max: usize) -> SlackBlockPlainTextOnly {
    SlackBlockPlainTextOnly::from(clip(text, max, "…"))
}

fn section(text: String) -> SlackBlock {
    SlackBlock::Section(SlackSectionBlock::new().with_text(SlackBlockText::MarkDown(SlackBlockMarkDownText::new(text))))
}

/// The modal that fills in `q`'s form in `conversation` (kept in `private_metadata`: a
/// submission names no channel of its own): the prompt, a note on what Slack cannot hold, and
/// an input per field.
pub fn modal(q: &Question, form: &Form, conversation: &Conversation) -> SlackView {
    let l = q.presentation.locale;
    let mut blocks = vec![section(format!("*{}*", escape(&clip(&q.prompt, MAX_SECTION - 20, "…"))))];
    let mut notes = Vec::new();
    let mut inputs = Vec::new();
    for (i, field) in form.fields.iter().enumerate() {
        inputs.extend(field_blocks(i, field, l, &mut notes));
    }
    if !notes.is_empty() {
        let text = format!("_{}_", escape(&notes.join("\n")));
        blocks.push(section(clip(&text, MAX_SECTION, "…_")));
    }
    blocks.extend(inputs);
    SlackView::Modal(
        SlackModalView::new(plain("Fill in", MAX_TITLE), blocks)
            .with_submit(plain("Send", MAX_TITLE))
            .with_close(plain("Cancel", MAX_TITLE))
            .with_callback_id(format!("{CALLBACK}{}", q.id).into())
            .with_private_metadata(conversation.to_string()),
    )
}

/// A modal that only says `text`: how the question ended, when a submission came too late.
pub fn closed(text: &str) -> SlackView {
    SlackView::Modal(
        SlackModalView::new(plain("Fill in", MAX_TITLE), vec![section(escape(&clip(text, MAX_SECTION, "…")))])
            .with_close(plain("Close", MAX_TITLE)),
    )
}

fn choice(label: &str, value: String) -> SlackBlockChoiceItem<SlackBlockPlainTextOnly> {
    SlackBlockChoiceItem::new(plain(label, MAX_LABEL), value)
}

/// The inputs of field `i`: one, and for a choice that takes one's own words a second, a box
/// for them. What Slack cannot hold is added to `notes`.
fn field_blocks(i: usize, field: &Field, l: Locale, notes: &mut Vec<String>) -> Vec<SlackBlock> {
    let label = field.label();
    let placeholder = plain(&field.takes(l), MAX_PLACEHOLDER);
    let action = SlackActionId::from(ACTION);
    let element: SlackInputBlockElement = match &field.input {
        Input::Text { format: Some(TextFormat::Email), default, .. } => {
            let mut input = SlackBlockEmailInputElement::new().with_action_id(action).with_placeholder(placeholder);
            input.initial_value = default.clone().map(EmailAddress);
            input.into()
        }
        Input::Text { format: Some(TextFormat::Uri), default, .. } => {
            let mut input = SlackBlockUrlInputElement::new().with_action_id(action).with_placeholder(placeholder);
            input.initial_value = default.clone();
            input.into()
        }
        Input::Text { format: Some(TextFormat::Date), default, .. } => {
            let mut input = SlackBlockDatePickerElement::new().with_action_id(action).with_placeholder(placeholder);
            input.initial_date = default.clone();
            input.into()
        }
        Input::Text { format: Some(TextFormat::DateTime), default, .. } => {
            let mut input = SlackBlockDateTimePickerElement::new().with_action_id(action);
            input.initial_date_time = default.as_deref().and_then(|d| d.parse().ok()).map(SlackDateTime);
            input.into()
        }
        Input::Text { min_length, max_length, default, format: None } => {
            let mut input = SlackBlockPlainTextInputElement::new()
                .with_action_id(action)
                .with_placeholder(placeholder)
                .with_multiline(max_length.is_none_or(|m| m > ONE_LINE));
            let most = MAX_INPUT as u32;
            if let Some(max) = max_length {
                input.max_length = Some(u64::from((*max).min(most)));
                if *max > most {
                    notes.push(format!("“{label}” takes up to {max} characters; Slack's box holds {most}."));
                }
            }
            match min_length {
                Some(min) if *min > most => {
                    notes.push(format!(
                        "“{label}” needs at least {min} characters; Slack's box holds {most}: answer it by command."
                    ));
                }
                Some(min) => input.min_length = Some(u64::from(*min)),
                None => {}
            }
            input.initial_value = default.clone().filter(|d| d.chars().count() <= MAX_INPUT);
            input.into()
        }
        Input::Number { integer, minimum, maximum, default } => {
            let mut input =
                SlackBlockNumberInputElement::new(!integer).with_action_id(action).with_placeholder(placeholder);
            input.min_value = minimum.map(|n| n.to_string());
            input.max_value = maximum.map(|n| n.to_string());
            input.initial_value = default.map(|n| n.to_string());
            input.into()
        }
        Input::Boolean { default } => {
            let yes_no = |label: &str, value: &str| {
                SlackBlockChoiceItem::new(SlackBlockText::Plain(label.into()), value.to_owned())
            };
            let options = vec![yes_no("Yes", "yes"), yes_no("No", "no")];
            let mut input = SlackBlockRadioButtonsElement::new(options.clone()).with_action_id(action);
            input.initial_option = default.map(|yes| options[usize::from(!yes)].clone());
            input.into()
        }
        Input::Choice { options, multi, max_items, default, .. } => {
            if options.iter().any(|o| o.label().chars().count() > MAX_LABEL) {
                notes.push(format!("Options of “{label}” longer than {MAX_LABEL} characters are cut short."));
            }
            let items: Vec<SlackBlockChoiceItem<SlackBlockPlainTextOnly>> =
                options.iter().enumerate().map(|(n, o)| choice(o.label(), (n + 1).to_string())).collect();
            let given = |value: &Value| {
                let picked = |v: &Value| options.iter().position(|o| Some(o.value.as_str()) == v.as_str());
                match value {
                    Value::Array(values) => values.iter().filter_map(picked).collect(),
                    value => picked(value).into_iter().collect::<Vec<_>>(),
                }
            };
            let initial: Vec<_> = default.as_ref().map(given).unwrap_or_default();
            let initial: Vec<_> = initial.into_iter().map(|n| items[n].clone()).collect();
            if *multi {
                let mut input = SlackBlockMultiStaticSelectElement::new()
                    .with_action_id(action)
                    .with_placeholder(placeholder)
                    .with_options(items);
                input.max_selected_items = max_items.map(u64::from);
                input.initial_options = (!initial.is_empty()).then_some(initial);
                input.into()
            } else {
                let mut input = SlackBlockStaticSelectElement::new()
                    .with_action_id(action)
                    .with_placeholder(placeholder)
                    .with_options(items);
                input.initial_option = initial.into_iter().next();
                input.into()
            }
        }
    };
    let optional = !field.required || field.default_value().is_some();
    let own_words = matches!(field.input, Input::Choice { other: true, .. });
    let mut block = SlackInputBlock::new(plain(label, MAX_INPUT_LABEL), element)
        .with_block_id(block_id(i).into())
        // With own words beside it, a choice may be left empty: the check says when it must not.
        .with_optional(optional || own_words);
    if let Some(about) = &field.description {
        block = block.with_hint(plain(about, MAX_INPUT_LABEL));
    }
    let mut blocks = vec![SlackBlock::Input(block)];
    if own_words {
        let input =
            SlackBlockPlainTextInputElement::new().with_action_id(ACTION.into()).with_max_length(MAX_INPUT as u64);
        let own = SlackInputBlock::new(plain(&format!("{label}: or in your own words"), MAX_INPUT_LABEL), input.into())
            .with_block_id(own_words_id(i).into())
            .with_optional(true);
        blocks.push(SlackBlock::Input(own));
    }
    blocks
}

/// The answer a submitted modal gives, before it is checked: each field's input as an answer
/// holds it; an input left empty leaves its field out; one's own words stand in for the option
/// picked (or join the ones picked).
pub fn answer(form: &Form, state: Option<&SlackViewState>) -> Value {
    let value = |block: String| state?.values.get(&block.into())?.get(&ACTION.into());
    let mut answer = Map::new();
    for (i, field) in form.fields.iter().enumerate() {
        let input = value(block_id(i));
        let text = |v: Option<&SlackViewStateValue>| v?.value.clone().filter(|t| !t.trim().is_empty());
        let own = text(value(own_words_id(i))).map(|t| t.trim().to_owned());
        let option = |picked: &str| {
            let n = picked.parse::<usize>().ok()?.checked_sub(1)?;
            field.options().get(n).map(|o| o.value.clone())
        };
        let given = match &field.input {
            Input::Text { format: Some(TextFormat::Date), .. } => {
                input.and_then(|v| v.selected_date.clone()).map(Value::String)
            }
            Input::Text { format: Some(TextFormat::DateTime), .. } => {
                input.and_then(|v| v.selected_date_time.as_ref()).map(|t| Value::String(t.0.to_string()))
            }
            Input::Text { .. } => text(input).map(Value::String),
            // A number Slack let through is a number; anything else is refused by the check.
            Input::Number { .. } => text(input).map(|t| match t.trim().parse::<f64>() {
                Ok(n) => serde_json::Number::from_f64(n).map_or(Value::String(t), Value::Number),
                Err(_) => Value::String(t),
            }),
            Input::Boolean { .. } => {
                input.and_then(|v| v.selected_option.as_ref()).map(|o| Value::Bool(o.value == "yes"))
            }
            Input::Choice { multi: false, .. } => own.clone().map(Value::String).or_else(|| {
                let picked = input.and_then(|v| v.selected_option.as_ref())?;
                option(&picked.value).map(Value::String)
            }),
            Input::Choice { multi: true, .. } => {
                let picked = input.and_then(|v| v.selected_options.as_ref()).into_iter().flatten();
                let mut values: Vec<Value> = picked.filter_map(|o| option(&o.value)).map(Value::String).collect();
                values.extend(own.clone().map(Value::String));
                (!values.is_empty()).then_some(Value::Array(values))
            }
        };
        if let Some(given) = given {
            answer.insert(field.key.clone(), given);
        }
    }
    Value::Object(answer)
}

/// The reply that keeps the modal open and says, under each field that does not fit, what
/// would (an error that names no field goes under the first).
pub fn errors(errors: &[(Option<usize>, FieldError)], l: Locale) -> SlackViewSubmissionResponse {
    let mut by_block: HashMap<String, String> = HashMap::new();
    for (i, error) in errors {
        let (block, text) = match i {
            Some(i) => (block_id(*i), error.hint.text(l)),
            None => (block_id(0), error.describe(l)),
        };
        let entry = by_block.entry(block).or_default();
        if !entry.is_empty() {
            entry.push_str("; ");
        }
        entry.push_str(&text);
    }
    let by_block = by_block.into_iter().map(|(block, text)| (block, clip(&text, MAX_ERROR, "…"))).collect();
    SlackViewSubmissionResponse::Errors(SlackViewSubmissionErrorsResponse::new(by_block))
}

/// The reply that keeps the modal open with `text` under its first field.
pub fn refused(text: &str) -> SlackViewSubmissionResponse {
    let errors = HashMap::from([(block_id(0), clip(text, MAX_ERROR, "…"))]);
    SlackViewSubmissionResponse::Errors(SlackViewSubmissionErrorsResponse::new(errors))
}

#[cfg(test)]
mod tests;
