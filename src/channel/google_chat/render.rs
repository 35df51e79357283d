//! Questions as Google Chat messages: a card (cards v2) with the prompt, the detail and the
//! footer as text paragraphs, and buttons whose action carries the text command in its
//! `command` parameter; the card once answered, with the outcome and no buttons; plain text.
//!
//! A single choice of at most ten options, a confirm and an approval get a button each (the
//! shared [`crate::channel::buttons`]); a multi-select, a form, several questions or a longer
//! list are shown as the text card lists them (each choice with its command), answered by a
//! typed command or a plain reply, with a Decline button.

use serde_json::{Value, json};

use crate::question::{Kind, Question};
use crate::say;
use crate::text::clip;
use crate::wording;

/// The parameter of a button's action that holds its command.
pub const COMMAND: &str = "command";
/// The action a button invokes (`actionMethodName` in the click's event).
pub const ACTION: &str = "answer";
/// Characters of detail a card shows; the rest is cut with a note saying where to read it (a
/// message holds 32,000 bytes, and four bytes a character must fit).
pub const MAX_DETAIL: usize = 4_000;
/// Characters of a message's text (Chat's limit is 4,096).
pub const MAX_TEXT: usize = 4_000;
/// Options shown as buttons at most; a longer list is the text card's.
pub const MAX_BUTTONS: usize = 10;
/// Characters of a button's label.
pub const MAX_LABEL: usize = 80;

/// Escapes text for a card's paragraph, whose text is Chat's small HTML, and keeps its line
/// breaks.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('\n', "<br>")
}

fn paragraph(text: &str) -> Value {
    json!({"textParagraph": {"text": text}})
}

fn button(label: &str, command: String) -> Value {
    json!({"text": clip(label, MAX_LABEL, "…"), "onClick": {"action": {
        "function": ACTION, "parameters": [{"key": COMMAND, "value": command}]}}})
}

/// The prompt (bold) and the detail, cut to [`MAX_DETAIL`] with a note where it was cut.
fn text_widgets(q: &Question) -> Vec<Value> {
    let title = match q.kind {
        Kind::Approval => format!("{} {}", say!(q.presentation.locale, "card.approve_title"), q.prompt),
        _ => q.prompt.clone(),
    };
    let mut widgets = vec![paragraph(&format!("<b>{}</b>", escape(&clip(&title, 1_000, "…"))))];
    if let Some(detail) = q.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        widgets.push(paragraph(&escape(&clip(detail, MAX_DETAIL, &wording::cut_mark(q)))));
    }
    widgets
}

/// Whether `q`'s choices are buttons (else it is answered as on a text surface).
fn has_buttons(q: &Question) -> bool {
    match q.kind {
        _ if q.form.is_some() => false,
        Kind::Confirm | Kind::Approval => true,
        Kind::Question => !q.multi && (1..=MAX_BUTTONS).contains(&q.options.len()),
        Kind::Form => false,
    }
}

/// The buttons of a pending question, each with its command ([`crate::channel::buttons`]);
/// a card answered as on text surfaces has Decline alone.
fn buttons(q: &Question) -> Vec<Value> {
    if !has_buttons(q) {
        return vec![button(&say!(q.presentation.locale, "button.decline"), format!("/decline {}", q.id))];
    }
    crate::channel::buttons::choices(q).into_iter().map(|(label, command)| button(&label, command)).collect()
}

/// What a pending question's card says besides its prompt and detail: the options'
/// descriptions and the own-answer command where its choices are buttons, else the text
/// card's choices with their commands.
fn choices_text(q: &Question, now_ms: i64) -> String {
    if has_buttons(q) {
        let mut lines: Vec<String> = (0..q.options.len())
            .filter_map(|i| q.description(i).map(|about| format!("{}. {} — {about}", i + 1, q.options[i])))
            .collect();
        if q.kind == Kind::Question && q.allow_custom {
            lines.push(say!(q.presentation.locale, "card.own_answer", id = q.id.short()));
        }
        return lines.join("\n");
    }
    // The text card's lines after its footer: each choice with its command, or the form's
    // fields and how to answer them.
    let card = wording::card(q, now_ms);
    let footer = wording::footer(q, now_ms);
    let rest = card.split_once(&footer).map_or(card.as_str(), |(_, rest)| rest);
    rest.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("\n")
}

/// The card of a pending question, as a message's `cardsV2`.
pub fn card(q: &Question, now_ms: i64) -> Value {
    let mut widgets = text_widgets(q);
    let choices = choices_text(q, now_ms);
    if !choices.is_empty() {
        widgets.push(paragraph(&escape(&clip(&choices, MAX_DETAIL, "…"))));
    }
    widgets.push(paragraph(&format!("<i>{}</i>", escape(&wording::footer(q, now_ms)))));
    widgets.push(json!({"buttonList": {"buttons": buttons(q)}}));
    cards(q, widgets)
}

/// The card of a resolved question: its text and the outcome, no buttons.
pub fn resolved(q: &Question) -> Value {
    let mut widgets = text_widgets(q);
    widgets.push(paragraph(&format!("<b>{}</b>", escape(&q.outcome_line()))));
    cards(q, widgets)
}

fn cards(q: &Question, widgets: Vec<Value>) -> Value {
    json!([{"cardId": format!("askgate-{}", q.id), "card": {"sections": [{"widgets": widgets}]}}])
}

/// A plain message's text, within Chat's limit.
pub fn text(text: &str) -> String {
    clip(text, MAX_TEXT, "… [shortened]")
}

/// The commands of a card's buttons, in order (for tests and the log).
pub fn commands(cards: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let widgets = cards[0]["card"]["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["widgets"].as_array().into_iter().flatten());
    for widget in widgets {
        for b in widget["buttonList"]["buttons"].as_array().into_iter().flatten() {
            let parameters = b["onClick"]["action"]["parameters"].as_array();
            if let Some(value) =
                parameters.into_iter().flatten().find(|p| p["key"] == COMMAND).and_then(|p| p["value"].as_str())
            {
                found.push(value.to_owned());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Ask, test_question};

    fn texts(cards: &Value) -> String {
        let widgets = cards[0]["card"]["sections"][0]["widgets"].as_array().unwrap();
        widgets.iter().filter_map(|w| w["textParagraph"]["text"].as_str()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn a_choice_is_a_button_per_option_carrying_its_command() {
        let q = test_question(Ask::question("Which <lib>?").options(["dayjs", "date-fns"]));
        let card = card(&q, 0);
        let id = q.id;
        assert_eq!(commands(&card), [format!("/answer {id} #1"), format!("/answer {id} #2"), format!("/decline {id}")]);
        let button =
            &card[0]["card"]["sections"][0]["widgets"].as_array().unwrap().last().unwrap()["buttonList"]["buttons"][0];
        assert_eq!(button["text"], "dayjs");
        assert_eq!(button["onClick"]["action"]["function"], ACTION);
        assert!(texts(&card).contains("<b>Which &lt;lib&gt;?</b>"), "{}", texts(&card));
    }

    #[test]
    fn a_confirm_and_an_approval_have_their_buttons() {
        let q = test_question(Ask::confirm("Archive?"));
        let id = q.id;
        assert_eq!(commands(&card(&q, 0)), [format!("/answer {id} yes"), format!("/answer {id} no")]);
        let q = test_question(Ask::approval("rm -rf build/"));
        let id = q.id;
        assert_eq!(
            commands(&card(&q, 0)),
            [format!("/approve {id}"), format!("/approve {id} always"), format!("/deny {id}")]
        );
    }

    #[test]
    fn a_multi_select_is_the_text_cards_with_a_decline_button() {
        let q = test_question(Ask::question("Which?").options(["a", "b", "c"]).multi(true));
        let card = card(&q, 0);
        assert_eq!(commands(&card), [format!("/decline {}", q.id)]);
        assert!(texts(&card).contains(&format!("/answer {} ", q.id.short())), "{}", texts(&card));
    }

    #[test]
    fn a_long_detail_is_cut_and_says_where_to_read_it() {
        let q = test_question(Ask::question("Read?").detail("word ".repeat(2_000) + "the end").options(["ok"]));
        let text = texts(&card(&q, 0));
        assert!(text.contains(&format!("/show {}", q.id.short())) && !text.contains("the end"), "{text}");
    }

    #[test]
    fn the_answered_card_has_the_outcome_and_no_buttons() {
        let q = test_question(Ask::question("Which?").options(["a", "b"]));
        let done = resolved(&q);
        assert!(commands(&done).is_empty());
        assert!(texts(&done).contains(&escape(&q.outcome_line())));
    }
}
