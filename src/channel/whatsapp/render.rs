//! What askgate sends to WhatsApp, as the Cloud API's message objects (their `type` and
//! content; the client adds the recipient): a card within WhatsApp's limits, the outcome as a
//! reply to it, plain text, and the template that reaches a person outside the 24-hour window.
//!
//! A card's body is the text card (every choice with the command that answers it, so anything
//! can be typed). Up to 3 choices are reply buttons, up to 10 a list; more, several at once, a
//! form, or words are the text card alone. A button's id (≤ 256 characters) and a row's
//! (≤ 200) is the very command its choice is (`/answer <question id> #2`, with the question's
//! whole id, so it never depends on a prefix); a title longer than WhatsApp shows (20
//! characters on a button, 24 on a row) is cut and ends with `…`, and the body has it whole.

use serde_json::{Value, json};

use crate::question::{Kind, Question};
use crate::say;
use crate::wording;

/// The most characters of an interactive message's body.
pub const MAX_BODY: usize = 1024;
/// The most characters of a text message.
pub const MAX_TEXT: usize = 4096;
/// The most reply buttons on a message.
const MAX_BUTTONS: usize = 3;
/// The most rows of a list.
const MAX_ROWS: usize = 10;
/// The most characters of a button's title, and of its id.
const BUTTON_TITLE: usize = 20;
const BUTTON_ID: usize = 256;
/// The most characters of a row's title, description and id.
const ROW_TITLE: usize = 24;
const ROW_DESCRIPTION: usize = 72;
const ROW_ID: usize = 200;
/// The most characters of a list's button and of a section's title.
const LIST_BUTTON: usize = 20;
const SECTION_TITLE: usize = 24;
/// The most characters of the question a template carries: its parameter, within the 1,024 of
/// a template's body (the template's own words take the rest).
pub const MAX_PARAMETER: usize = 900;

/// How a card offers its choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Reply buttons (up to 3).
    Buttons,
    /// A list message (up to 10 rows).
    List,
    /// The text card alone: choices typed.
    Text,
}

/// The choices a card's buttons or rows offer: each label and the command it is
/// ([`crate::channel::buttons`], the same as other platforms' buttons). A question's Decline is
/// left to the card's typed line, so that three options fit WhatsApp's three buttons. Empty when
/// the answer needs words (free text, several picks, a form, several questions).
pub fn choices(q: &Question) -> Vec<(String, String)> {
    let mut all = crate::channel::buttons::choices(q);
    if q.kind == Kind::Question {
        all.retain(|(_, command)| !command.starts_with("/decline "));
    }
    all
}

/// How `q`'s card offers its choices.
pub fn shape(q: &Question) -> Shape {
    match choices(q).len() {
        0 => Shape::Text,
        1..=MAX_BUTTONS => Shape::Buttons,
        n if n <= MAX_ROWS => Shape::List,
        _ => Shape::Text,
    }
}

/// The card of a pending question.
pub fn card(q: &Question, now_ms: i64) -> Value {
    let l = q.presentation.locale;
    match shape(q) {
        Shape::Text => text(&body(q, now_ms, MAX_TEXT)),
        Shape::Buttons => {
            let titles = titles(&choices(q), BUTTON_TITLE);
            let buttons: Vec<Value> = choices(q)
                .into_iter()
                .zip(titles)
                .map(|((_, command), title)| json!({"type": "reply", "reply": {"id": clipped_id(&command, BUTTON_ID), "title": title}}))
                .collect();
            json!({"type": "interactive", "interactive": {
                "type": "button",
                "body": {"text": body(q, now_ms, MAX_BODY)},
                "action": {"buttons": buttons},
            }})
        }
        Shape::List => {
            let titles = titles(&choices(q), ROW_TITLE);
            let rows: Vec<Value> = choices(q)
                .into_iter()
                .zip(titles)
                .enumerate()
                .map(|(i, ((_, command), title))| {
                    let mut row = json!({"id": clipped_id(&command, ROW_ID), "title": title});
                    if let Some(about) = q.description(i).map(crate::text::safe_line) {
                        row["description"] = json!(crate::text::clip(&about, ROW_DESCRIPTION, "…"));
                    }
                    row
                })
                .collect();
            let section = crate::text::clip(&say!(l, "whatsapp.options"), SECTION_TITLE, "…");
            json!({"type": "interactive", "interactive": {
                "type": "list",
                "body": {"text": body(q, now_ms, MAX_BODY)},
                "action": {
                    "button": crate::text::clip(&say!(l, "whatsapp.choose"), LIST_BUTTON, "…"),
                    "sections": [{"title": section, "rows": rows}],
                },
            }})
        }
    }
}

/// A command as a button's or row's id. The commands askgate makes are far shorter than
/// WhatsApp's limits (a question id is 36 characters); the cut is never reached.
fn clipped_id(command: &str, max: usize) -> String {
    debug_assert!(command.chars().count() <= max, "{command}");
    crate::text::clip(command, max, "")
}

/// The choices' titles, each within `max` characters (a longer one cut, ending with `…`);
/// numbered when two would read the same, as WhatsApp wants them unique in a message.
pub fn titles(choices: &[(String, String)], max: usize) -> Vec<String> {
    let plain: Vec<String> =
        choices.iter().map(|(label, _)| crate::text::clip(&crate::text::safe_line(label), max, "…")).collect();
    let unique = plain.iter().collect::<std::collections::HashSet<_>>().len() == plain.len();
    if unique && plain.iter().all(|t| !t.trim().is_empty()) {
        return plain;
    }
    choices
        .iter()
        .enumerate()
        .map(|(i, (label, _))| crate::text::clip(&format!("{}. {}", i + 1, crate::text::safe_line(label)), max, "…"))
        .collect()
}

/// The text card within `max` characters: the detail cut first, then (rarely: a long prompt,
/// many long options) the whole, each cut ending with where to read it whole (`/show <id>`).
pub fn body(q: &Question, now_ms: i64, max: usize) -> String {
    let whole = wording::card(q, now_ms);
    if whole.chars().count() <= max {
        return whole;
    }
    let cut = wording::cut_mark(q);
    let mut shorter = q.clone();
    if let Some(detail) = &q.detail {
        let without = {
            let mut bare = q.clone();
            bare.detail = None;
            wording::card(&bare, now_ms).chars().count()
        };
        // The detail's lines are indented on the card: leave room for that.
        let room = max.saturating_sub(without + 8 + detail.lines().count().min(64) * 7);
        shorter.detail = (room > cut.chars().count()).then(|| crate::text::clip(detail, room, &cut));
        let card = wording::card(&shorter, now_ms);
        if card.chars().count() <= max {
            return card;
        }
    }
    crate::text::clip(&wording::card(&shorter, now_ms), max, &cut)
}

/// A text message.
pub fn text(body: &str) -> Value {
    json!({"type": "text", "text": {"body": crate::text::clip(body, MAX_TEXT, "…"), "preview_url": false}})
}

/// `message` as a reply to the message `to` (WhatsApp shows it quoted).
pub fn replying(mut message: Value, to: &str) -> Value {
    message["context"] = json!({"message_id": to});
    message
}

/// What the card of an ended question is answered with: the outcome and who gave it.
pub fn outcome(q: &Question) -> Value {
    text(&wording::resolved_line(q))
}

/// The template `name` in `language` that carries `q`'s prompt (its one body parameter) to a
/// person outside the 24-hour window, asking them to reply.
pub fn template(q: &Question, name: &str, language: &str) -> Value {
    json!({"type": "template", "template": {
        "name": name,
        "language": {"code": language},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": parameter(&q.prompt)}]}],
    }})
}

/// A template's text parameter: one line (Meta refuses line breaks, tabs and more than four
/// spaces in a row), within [`MAX_PARAMETER`] characters.
pub fn parameter(text: &str) -> String {
    let line = crate::text::safe_line(text).split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::clip(&line, MAX_PARAMETER, "…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Ask;

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    #[test]
    fn three_options_are_reply_buttons_whose_ids_are_the_commands() {
        let q = question(Ask::question("Which library?").options(["dayjs", "date-fns", "luxon"]));
        let card = card(&q, 0);
        assert_eq!(card["interactive"]["type"], "button");
        let buttons = card["interactive"]["action"]["buttons"].as_array().unwrap();
        assert_eq!(buttons.len(), 3);
        assert_eq!(buttons[1]["reply"]["id"], format!("/answer {} #2", q.id));
        assert_eq!(buttons[1]["reply"]["title"], "date-fns");
        let body = card["interactive"]["body"]["text"].as_str().unwrap();
        assert!(body.contains("Which library?") && body.contains("/decline"), "{body}");
    }

    #[test]
    fn a_long_title_is_cut_while_the_body_has_it_whole() {
        let long = "An option far longer than twenty characters";
        let q = question(Ask::question("Which?").options([long, "short"]));
        let card = card(&q, 0);
        let title = card["interactive"]["action"]["buttons"][0]["reply"]["title"].as_str().unwrap();
        assert_eq!((title.chars().count(), title.ends_with('…')), (20, true), "{title}");
        assert!(card["interactive"]["body"]["text"].as_str().unwrap().contains(long));
        let same = titles(&[("x".repeat(30), "a".into()), ("x".repeat(31), "b".into())], 20);
        assert!(same[0].starts_with("1. ") && same[1].starts_with("2. ") && same[0] != same[1], "{same:?}");
    }

    #[test]
    fn five_options_are_a_list_while_twelve_are_the_text_card() {
        let five: Vec<String> = (1..=5).map(|n| format!("option {n}")).collect();
        let q = question(Ask::question("Which?").options(five));
        let list = card(&q, 0);
        assert_eq!(list["interactive"]["type"], "list");
        let rows = list["interactive"]["action"]["sections"][0]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[4]["id"], format!("/answer {} #5", q.id));
        assert!(rows.iter().all(|r| r["id"].as_str().unwrap().len() <= ROW_ID));
        let twelve: Vec<String> = (1..=12).map(|n| format!("option {n}")).collect();
        let q = question(Ask::question("Which?").options(twelve));
        let numbered = card(&q, 0);
        assert_eq!(numbered["type"], "text");
        let text = numbered["text"]["body"].as_str().unwrap();
        assert!(text.contains(&format!("/answer {} 12", q.id.short())), "{text}");
    }

    #[test]
    fn a_confirm_is_yes_no_while_an_approval_is_once_always_reject() {
        let q = question(Ask::confirm("Archive?"));
        let titles: Vec<Value> = card(&q, 0)["interactive"]["action"]["buttons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["reply"]["title"].clone())
            .collect();
        assert_eq!(titles, [json!("Yes"), json!("No")]);
        let q = question(Ask::approval("rm -rf build/"));
        let buttons = card(&q, 0)["interactive"]["action"]["buttons"].clone();
        assert_eq!(buttons[0]["reply"], json!({"id": format!("/approve {}", q.id), "title": "Allow once"}));
        assert_eq!(buttons[1]["reply"]["id"], format!("/approve {} always", q.id));
        assert_eq!(buttons[2]["reply"]["id"], format!("/deny {}", q.id));
        assert_eq!(shape(&question(Ask::question("Why?"))), Shape::Text, "free text");
        assert_eq!(shape(&question(Ask::question("Which?").options(["a", "b"]).multi(true))), Shape::Text);
    }

    #[test]
    fn a_long_detail_is_cut_to_the_body_saying_where_the_whole_is() {
        let detail = "word ".repeat(2_000) + "the end";
        let q = question(Ask::question("Read it?").options(["ok"]).detail(detail));
        let body = card(&q, 0)["interactive"]["body"]["text"].as_str().unwrap().to_owned();
        assert!(body.chars().count() <= MAX_BODY, "{}", body.chars().count());
        assert!(body.contains(&format!("[cut to fit: /show {}", q.id.short())) && !body.contains("the end"), "{body}");
        assert!(body.contains("/decline"), "the commands stay: {body}");
    }

    #[test]
    fn a_template_carries_the_prompt_on_one_line_while_a_reply_quotes_the_card() {
        let q = question(Ask::question("Deploy\tnow?\n\nSay      so").options(["yes"]));
        let t = template(&q, "askgate_question", "en_US");
        assert_eq!(t["template"]["language"]["code"], "en_US");
        assert_eq!(t["template"]["components"][0]["parameters"][0]["text"], "Deploy now? Say so");
        assert_eq!(parameter(&"x".repeat(2_000)).chars().count(), MAX_PARAMETER);
        let reply = replying(text("✅ yes"), "wamid.card");
        assert_eq!(
            (reply["context"]["message_id"].as_str(), reply["type"].as_str()),
            (Some("wamid.card"), Some("text"))
        );
    }
}
