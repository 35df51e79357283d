//! What askgate sends to Teams, as Bot Framework activities: a card is an Adaptive Card
//! (schema 1.2, which Teams renders on mobile too) of the text card's lines, with one
//! `Action.Submit` per choice whose `data` carries the text command (`/answer <id> 2`); Teams
//! sends a tap back as a message activity with that `data` as its `value`. An answered card
//! is the same card with the outcome and no actions.

use serde_json::{Value, json};

use crate::question::Question;
use crate::wording;

/// The content type of an Adaptive Card attachment.
pub const ADAPTIVE: &str = "application/vnd.microsoft.card.adaptive";

/// The key of an `Action.Submit`'s `data` that holds its command.
pub const COMMAND: &str = "askgate";

/// The card version Teams renders on every client.
const VERSION: &str = "1.2";

/// A message activity of `text`.
pub fn text(text: &str) -> Value {
    json!({"type": "message", "textFormat": "plain", "text": text})
}

/// The message activity of `question`'s card while it waits: its words, and its choices.
pub fn card(question: &Question, now_ms: i64) -> Value {
    let actions: Vec<Value> = crate::channel::buttons::choices(question)
        .into_iter()
        .map(|(title, command)| json!({"type": "Action.Submit", "title": title, "data": {COMMAND: command}}))
        .collect();
    message(&wording::card(question, now_ms), actions)
}

/// The message activity of `question`'s card once it ended: the outcome, nothing to tap.
pub fn resolved(question: &Question, now_ms: i64) -> Value {
    message(&wording::whole(question, now_ms), Vec::new())
}

/// A message activity holding one Adaptive Card: a text block per line of `text` (the first
/// one bold), then `actions`.
fn message(text: &str, actions: Vec<Value>) -> Value {
    let body: Vec<Value> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let mut block = json!({"type": "TextBlock", "text": escape(line.trim()), "wrap": true});
            if i == 0 {
                block["weight"] = json!("bolder");
            }
            block
        })
        .collect();
    let mut card = json!({
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": VERSION,
        "body": body,
    });
    if !actions.is_empty() {
        card["actions"] = json!(actions);
    }
    json!({"type": "message", "attachments": [{"contentType": ADAPTIVE, "content": card}]})
}

/// `line` with the characters Teams' card Markdown reads as formatting escaped, and a line
/// that would read as a list item kept as it is written.
fn escape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(c, '\\' | '*' | '_' | '[' | ']' | '`' | '~' | '<' | '>' | '#') {
            out.push('\\');
        }
        out.push(c);
    }
    // `1. red` is a numbered list item and `- x` a bullet in Markdown.
    let digits = out.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && out[digits..].starts_with(". ") {
        out.insert(digits, '\\');
    } else if out.starts_with("- ") || out.starts_with("+ ") {
        out.insert(0, '\\');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Ask;

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    #[test]
    fn a_choice_is_a_submit_action_whose_data_is_the_command() {
        let q = question(Ask::question("Which library?").options(["dayjs", "date-fns"]));
        let activity = card(&q, 0);
        let card = &activity["attachments"][0];
        assert_eq!(card["contentType"], ADAPTIVE);
        assert_eq!(card["content"]["version"], "1.2");
        let actions = card["content"]["actions"].as_array().unwrap();
        assert_eq!(actions[1]["type"], "Action.Submit");
        assert_eq!(actions[1]["title"], "date-fns");
        assert_eq!(actions[1]["data"][COMMAND], format!("/answer {} #2", q.id));
        assert_eq!(actions[2]["data"][COMMAND], format!("/decline {}", q.id));
        let first = &card["content"]["body"][0];
        assert_eq!((first["weight"].as_str(), first["wrap"].as_bool()), (Some("bolder"), Some(true)));
        assert!(first["text"].as_str().unwrap().contains("Which library?"));
    }

    #[test]
    fn an_approval_offers_allow_once_allow_always_reject() {
        let q = question(Ask::approval("rm -rf build/"));
        let activity = card(&q, 0);
        let titles: Vec<&str> = activity["attachments"][0]["content"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["Allow once", "Allow always", "Reject"]);
    }

    #[test]
    fn a_multi_select_is_answered_by_typed_commands() {
        let q = question(Ask::question("Which?").options(["a", "b", "c"]).multi(true));
        assert!(card(&q, 0)["attachments"][0]["content"].get("actions").is_none());
    }

    #[test]
    fn an_ended_card_has_no_actions() {
        let q = question(Ask::question("Which?").options(["a", "b"]));
        let activity = resolved(&q, 0);
        assert!(activity["attachments"][0]["content"].get("actions").is_none());
    }

    #[test]
    fn markdown_is_escaped_where_teams_would_read_it() {
        assert_eq!(escape("**bold** _it_ [x](y)"), "\\*\\*bold\\*\\* \\_it\\_ \\[x\\](y)");
        assert_eq!(escape("1. red"), "1\\. red");
        assert_eq!(escape("- item"), "\\- item");
        assert_eq!(escape("date-fns"), "date-fns");
    }
}
