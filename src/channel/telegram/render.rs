//! Questions as Telegram messages: HTML text and an inline keyboard whose `callback_data`
//! values are the text commands. Pure functions, tested without a network.

pub mod form;

use std::fmt::Write;

use teloxide::types::{InlineKeyboardButton, InlineKeyboardButtonKind, InlineKeyboardMarkup};

use crate::question::{Kind, Locale, Question, QuestionId};
use crate::say;
use crate::text::Piece;
use crate::wording;

/// Telegram's limit for `callback_data`, in bytes.
pub const MAX_CALLBACK_DATA: usize = 64;
/// Telegram's limit for a message's text, in characters after entity parsing.
pub const MAX_TEXT: usize = 4096;
/// What a shortened text ends with.
pub const SHORTENED: &str = "… [shortened]";
/// The most messages one reply is sent in (a question shown whole by `/show`: at most 16 KiB
/// of prompt and 16 KiB of detail, in 4,096-character messages).
pub const MAX_REPLY_PARTS: usize = 12;

/// A question's message.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    /// HTML text.
    pub text: String,
    /// The buttons; none when the payloads could not fit (the text then lists the commands).
    pub keyboard: Option<InlineKeyboardMarkup>,
}

/// Escapes text for Telegram's HTML parse mode (teloxide's own escaping).
pub use teloxide::utils::html::escape;

/// Shortens plain text to `max` characters with a clear marker.
pub fn shorten(text: &str, max: usize) -> String {
    crate::text::clip(text, max, SHORTENED)
}

/// The options with their descriptions, a line each (`2. luxon — time zones built in`), when any
/// has one: buttons show labels only. The list takes at most half of a message; each
/// description is shortened to fit its share.
fn described(q: &Question) -> String {
    if q.descriptions.is_empty() {
        return String::new();
    }
    let labels: usize = q.options.iter().map(|o| o.chars().count() + 8).sum();
    let share = (MAX_TEXT / 2).saturating_sub(labels) / q.options.len().max(1);
    let mut out = String::new();
    for (i, label) in q.options.iter().enumerate() {
        let _ = write!(out, "\n{}. {label}", i + 1);
        if let Some(about) = q.description(i).filter(|_| share > 1) {
            let _ = write!(out, " — {}", crate::text::clip(about, share, "…"));
        }
    }
    out
}

/// The visible text of a card before escaping: prompt, detail, what `described` lists (the
/// options' descriptions, a form's fields), id and expiry. Prompt and detail are shortened so
/// that the whole message stays under Telegram's limit, ending with where to read them whole
/// (`/show <id>`).
fn body(q: &Question, now_ms: i64, commands: Option<&str>, described: String) -> Body {
    let footer = wording::footer(q, now_ms);
    let reserved = footer.chars().count() + described.chars().count() + commands.map_or(0, |c| c.chars().count()) + 16;
    let budget = MAX_TEXT.saturating_sub(reserved);
    // Cut where it must be, saying where the whole is.
    let cut = wording::cut_mark(q);
    let shorten = |text: &str, max: usize| crate::text::clip(text, max, &cut);
    let title = match q.kind {
        Kind::Question | Kind::Confirm | Kind::Form => shorten(&q.prompt, budget / 2),
        Kind::Approval => {
            shorten(&say!(q.presentation.locale, "card.approve_prefix", action = q.prompt.as_str()), budget / 2)
        }
    };
    let detail = q.detail.as_deref().map(|d| shorten(d, budget - title.chars().count())).unwrap_or_default();
    Body { title, detail, described, footer }
}

/// A card's text before escaping, in the order it is shown.
struct Body {
    title: String,
    detail: String,
    /// The options with their descriptions (see [`described`]).
    described: String,
    footer: String,
}

fn html(body: &Body, tail: &str) -> String {
    let Body { title, detail, described, footer } = body;
    let mut out = format!("<b>{}</b>", escape(title));
    for piece in crate::text::pieces(detail) {
        match piece {
            Piece::Text(text) => _ = write!(out, "\n{}", escape(text)),
            Piece::Code(code) => _ = write!(out, "\n<pre>{}</pre>", escape(code)),
        }
    }
    out.push_str(&escape(described));
    let _ = write!(out, "\n\n<i>{}</i>", escape(footer));
    if !tail.is_empty() {
        let _ = write!(out, "\n{}", escape(tail));
    }
    out
}

/// Renders a pending question (a form as nobody filled it yet: see [`form::card`]).
pub fn card(q: &Question, now_ms: i64) -> Card {
    if let Some(fields) = &q.form {
        return form::card(q, fields, &Default::default(), now_ms);
    }
    let rows = buttons(q);
    if fits(&rows) {
        let text = html(&body(q, now_ms, None, described(q)), "");
        return Card { text, keyboard: Some(InlineKeyboardMarkup::new(rows)) };
    }
    // A keyboard is never sent with a payload silently dropped: the commands go in the text.
    let commands = text_commands(q);
    Card { text: html(&body(q, now_ms, Some(&commands), described(q)), &commands), keyboard: None }
}

/// The card of a resolved question: the same text with its outcome (a form's fields as they
/// were answered), and no buttons.
pub fn resolved(q: &Question, now_ms: i64) -> String {
    let described = match &q.form {
        Some(fields) => form::answered(q, fields),
        None => described(q),
    };
    // An answer may be long (a form's holds every field): its line is shortened, and the
    // prompt and detail make room for it.
    let outcome = shorten(&q.outcome_line(), MAX_OUTCOME);
    let mut body = body(q, now_ms, Some(&outcome), described);
    body.footer = body.footer.split(" · ").next().unwrap_or_default().to_owned();
    html(&body, &outcome)
}

/// The longest outcome line a resolved card shows, in characters.
const MAX_OUTCOME: usize = 1_000;

/// Whether Telegram takes every payload of these rows (1 to 64 bytes each).
fn fits(rows: &[Vec<InlineKeyboardButton>]) -> bool {
    rows.iter().flatten().all(|b| match &b.kind {
        InlineKeyboardButtonKind::CallbackData(data) => !data.is_empty() && data.len() <= MAX_CALLBACK_DATA,
        _ => true,
    })
}

fn text_commands(q: &Question) -> String {
    let card = wording::card(q, 0);
    // The text surface's card without its first lines (prompt, detail, id): its commands.
    card.lines().filter(|l| l.contains('/')).map(str::trim).collect::<Vec<_>>().join("\n")
}

fn button(label: impl Into<String>, data: String) -> InlineKeyboardButton {
    InlineKeyboardButton::callback(label, data)
}

/// The keyboard rows. Options get a row each (labels can be long); actions share rows.
pub fn buttons(q: &Question) -> Vec<Vec<InlineKeyboardButton>> {
    let (id, l) = (q.id, q.presentation.locale);
    if let Some(fields) = &q.form {
        return form::keyboard(q, fields, &Default::default());
    }
    let decline = || button(say!(l, "button.decline"), format!("/decline {id}"));
    let reject = || {
        vec![
            button(say!(l, "button.reject"), format!("/deny {id}")),
            button(say!(l, "button.reject_with_note"), format!("/note {id}")),
        ]
    };
    match q.kind {
        Kind::Form => vec![vec![decline()]],
        Kind::Question if q.multi => {
            let mut rows: Vec<_> = q
                .options
                .iter()
                .enumerate()
                .map(|(i, label)| vec![button(format!("{UNCHECKED} {label}"), format!("/toggle {id} {}", i + 1))])
                .collect();
            rows.push(vec![button(say!(l, "button.submit"), format!("/submit {id}")), decline()]);
            rows
        }
        Kind::Question => {
            let mut rows: Vec<_> = q
                .options
                .iter()
                .enumerate()
                .map(|(i, label)| vec![button(format!("{}. {label}", i + 1), format!("/answer {id} #{}", i + 1))])
                .collect();
            let mut actions = Vec::new();
            if q.allow_custom {
                let label = if q.options.is_empty() { say!(l, "button.answer") } else { say!(l, "button.other") };
                actions.push(button(label, format!("/other {id}")));
            }
            actions.push(decline());
            rows.push(actions);
            rows
        }
        Kind::Confirm => vec![vec![
            button(say!(l, "button.yes"), format!("/answer {id} yes")),
            button(say!(l, "button.no"), format!("/answer {id} no")),
        ]],
        Kind::Approval if q.needs_quorum() => {
            vec![vec![button(say!(l, "button.approve"), format!("/approve {id}"))], reject()]
        }
        Kind::Approval => {
            let mut rows = vec![
                vec![
                    button(say!(l, "button.allow_once"), format!("/approve {id}")),
                    button(say!(l, "button.allow_always"), format!("/approve {id} always")),
                ],
                reject(),
            ];
            if q.allow_custom {
                // An editable approval: the next message is the action to allow instead.
                rows.push(vec![button(say!(l, "button.edit"), format!("/other {id}"))]);
            }
            rows
        }
    }
}

/// The mark of an unchecked multi-select option.
pub const UNCHECKED: &str = "☐";
/// The mark of a checked multi-select option.
pub const CHECKED: &str = "☑";

/// Flips option `n` (from 1) of a multi-select keyboard.
pub fn toggle(markup: &InlineKeyboardMarkup, n: usize) -> InlineKeyboardMarkup {
    let mut markup = markup.clone();
    if let Some(b) = markup.inline_keyboard.get_mut(n - 1).and_then(|row| row.first_mut()) {
        b.text = if let Some(rest) = b.text.strip_prefix(UNCHECKED) {
            format!("{CHECKED}{rest}")
        } else if let Some(rest) = b.text.strip_prefix(CHECKED) {
            format!("{UNCHECKED}{rest}")
        } else {
            b.text.clone()
        };
    }
    markup
}

/// The option numbers (from 1) checked on a multi-select keyboard.
pub fn checked(markup: &InlineKeyboardMarkup) -> Vec<usize> {
    markup
        .inline_keyboard
        .iter()
        .enumerate()
        .filter(|(_, row)| row.first().is_some_and(|b| b.text.starts_with(CHECKED)))
        .map(|(i, _)| i + 1)
        .collect()
}

/// The prompt sent after "Other…": a reply to it is the answer.
pub fn other_prompt(id: QuestionId, l: Locale) -> String {
    say!(l, "tg.your_answer", id = id.short())
}

/// The prompt sent after an editable approval's "Edit…": a reply to it is the edited action.
pub fn edit_prompt(id: QuestionId, l: Locale) -> String {
    say!(l, "tg.edited_action", id = id.short())
}

/// The prompt sent after "Reject with note…": a reply to it is the rejection's feedback.
pub fn note_prompt(id: QuestionId, l: Locale) -> String {
    say!(l, "tg.why_reject", id = id.short())
}

/// The callback data of a keyboard's buttons, in order (for tests here and in `form`).
#[cfg(test)]
fn callback_data(rows: &[Vec<InlineKeyboardButton>]) -> Vec<String> {
    rows.iter()
        .flatten()
        .filter_map(|b| match &b.kind {
            InlineKeyboardButtonKind::CallbackData(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Ask;

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    #[test]
    fn every_callback_data_fits_in_64_bytes_whatever_the_options() {
        let long = "ü".repeat(100);
        let many: Vec<String> = (0..crate::question::MAX_OPTIONS).map(|i| format!("{i}{}", &long[..60])).collect();
        let asks = [
            Ask::question("Pick").options(many.clone()),
            Ask::question("Pick").options(many.clone()).multi(true),
            Ask::question("Pick").options(many).allow_custom(true),
            Ask::question("Free"),
            Ask::confirm(long.clone()),
            Ask::approval(long),
        ];
        for ask in asks {
            let q = question(ask);
            let card = card(&q, 0);
            let keyboard = card.keyboard.expect("a keyboard");
            let data = callback_data(&keyboard.inline_keyboard);
            assert!(!data.is_empty());
            for d in data {
                assert!(d.len() <= MAX_CALLBACK_DATA, "{d} is {} bytes", d.len());
                assert!(d.starts_with('/'), "{d}");
            }
        }
    }

    #[test]
    fn option_buttons_are_answer_commands_with_the_full_id() {
        let q = question(Ask::question("Which?").options(["dayjs", "date-fns"]).allow_custom(true));
        let data = callback_data(&buttons(&q));
        assert_eq!(data[0], format!("/answer {} #1", q.id));
        assert_eq!(data[1], format!("/answer {} #2", q.id));
        assert!(data.contains(&format!("/decline {}", q.id)));
        assert!(data.contains(&format!("/other {}", q.id)));
    }

    #[test]
    fn prompt_and_detail_are_escaped_and_long_text_is_shortened() {
        let q = question(Ask::question("Use <b> & co?").detail("x".repeat(10_000)));
        let card = card(&q, 0);
        assert!(card.text.starts_with("<b>Use &lt;b&gt; &amp; co?</b>"), "{}", card.text);
        let cut = format!("x… [cut to fit: /show {} shows it all]\n", q.id.short());
        assert!(card.text.contains(&cut), "the cut says where the whole is: {}", card.text);
        let visible = card.text.replace("<b>", "").replace("</b>", "").replace("<i>", "").replace("</i>", "");
        assert!(visible.chars().count() <= MAX_TEXT, "{}", visible.chars().count());
    }

    #[test]
    fn fenced_code_in_a_detail_is_preformatted_and_a_long_block_stays_one() {
        let q = question(Ask::approval("files__write").detail("alice wants:\n```json\n{\"a\": \"<x>\"}\n```\nok?"));
        let card = super::card(&q, 0);
        assert!(card.text.contains("\nalice wants:\n<pre>{\"a\": \"&lt;x&gt;\"}</pre>\nok?"), "{}", card.text);

        let long = format!("see:\n```\n{}\n```", "y".repeat(10_000));
        let card = super::card(&question(Ask::approval("x").detail(long)), 0);
        assert_eq!(card.text.matches("<pre>").count(), 1, "{}", card.text);
        assert!(card.text.contains("shows it all]</pre>"), "the cut stays inside the block");
    }

    #[test]
    fn option_descriptions_are_listed_and_the_card_stays_within_telegrams_limit() {
        let q = question(Ask::question("Which?").option("dayjs", "2 kB <tiny>").option("luxon", "").detail("d"));
        let text = card(&q, 0).text;
        assert!(text.contains("\nd\n1. dayjs — 2 kB &lt;tiny&gt;\n2. luxon\n\n<i>id "), "{text}");
        let long = "ü".repeat(crate::question::MAX_OPTION_LEN);
        let all = (0..crate::question::MAX_OPTIONS)
            .fold(Ask::question("x".repeat(5_000)).detail("y".repeat(5_000)), |ask, i| {
                ask.option(format!("{i}{}", &long[..150]), "z".repeat(crate::question::MAX_DESCRIPTION_LEN))
            });
        let card = card(&question(all), 0);
        let visible = card.text.replace("<b>", "").replace("</b>", "").replace("<i>", "").replace("</i>", "");
        assert!(visible.chars().count() <= MAX_TEXT, "{}", visible.chars().count());
        assert!(visible.contains("\n25. 24"), "every option is listed: {visible}");
    }

    #[test]
    fn a_payload_over_64_bytes_or_an_empty_one_does_not_fit() {
        let row = |data: &str| vec![vec![button("x", data.to_owned())]];
        assert!(fits(&row(&"a".repeat(MAX_CALLBACK_DATA))));
        assert!(!fits(&row(&"a".repeat(MAX_CALLBACK_DATA + 1))));
        assert!(!fits(&row("")));
    }

    #[test]
    fn toggling_flips_one_option_and_checked_lists_them() {
        let q = question(Ask::question("Pick").options(["a", "b", "c"]).multi(true));
        let markup = InlineKeyboardMarkup::new(buttons(&q));
        let markup = toggle(&toggle(&markup, 1), 3);
        assert_eq!(checked(&markup), [1, 3]);
        assert_eq!(checked(&toggle(&markup, 1)), [3]);
    }
}
