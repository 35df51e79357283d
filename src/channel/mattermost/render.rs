//! What askgate posts to Mattermost, as REST v4 bodies: a card (the text card, with its
//! choices as message buttons whose `integration.context` carries the command and its
//! signature), the card once answered (no buttons left), and plain messages. Text is escaped
//! for Mattermost's Markdown, and mentions in it notify nobody.

use serde_json::{Value, json};

/// The most characters of a post's message (Mattermost's `MaxPostSize` by default is 16,383).
pub const MAX_MESSAGE: usize = 16_000;

/// The buttons' request goes here, under askgate's public URL.
pub const ACTIONS_PATH: &str = "/channels/mattermost/actions";

/// One button: its label, and the command it sends.
pub struct Button<'a> {
    /// What the person reads.
    pub label: &'a str,
    /// The text command (`/answer <id> #2`).
    pub command: &'a str,
    /// The command's signature (hex), checked when the request comes back.
    pub mac: String,
}

/// The card's post in `channel`: its `text` (already cut to fit), and `buttons` as actions
/// that send their command to `actions_url`.
pub fn card(channel: &str, text: &str, buttons: &[Button<'_>], actions_url: &str) -> Value {
    let mut post = message(channel, text);
    if buttons.is_empty() {
        return post;
    }
    let actions: Vec<Value> = buttons
        .iter()
        .enumerate()
        .map(|(n, b)| {
            json!({
                // Action ids are letters and digits only: Mattermost routes the click by it.
                "id": format!("choice{n}"),
                "type": "button",
                "name": b.label,
                "style": style(b.command),
                "integration": {"url": actions_url, "context": {"command": b.command, "mac": b.mac}},
            })
        })
        .collect();
    post["props"] = json!({"attachments": [{"text": "", "actions": actions}]});
    post
}

/// The card's post `id` in `channel` as it stands once over: `text`, and no buttons.
pub fn settled(id: &str, channel: &str, text: &str) -> Value {
    let mut post = message(channel, text);
    post["id"] = json!(id);
    post["props"] = json!({});
    post
}

/// A plain post of `text` in `channel`.
pub fn message(channel: &str, text: &str) -> Value {
    json!({"channel_id": channel, "message": escape(text)})
}

/// A plain post of `text` in `channel`, in the thread of `root` when there is one.
pub fn reply(channel: &str, text: &str, root: Option<&str>) -> Value {
    let mut post = message(channel, text);
    if let Some(root) = root {
        post["root_id"] = json!(root);
    }
    post
}

/// Decline and reject read as dangerous, the first choice as the main one.
fn style(command: &str) -> &'static str {
    match command.split_whitespace().next() {
        Some("/decline" | "/deny") => "danger",
        _ => "default",
    }
}

/// `text` as Mattermost shows it literally: Markdown's marks escaped, and every `@` followed
/// by a zero-width space, so that `@channel` in a prompt notifies nobody.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '*' | '_' | '~' | '`' | '[' | ']' | '<' | '>' | '|' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '@' => out.push_str("@\u{200b}"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_carries_its_signed_commands_in_the_buttons_context() {
        let buttons = [
            Button { label: "date-fns", command: "/answer 0b6f #2", mac: "ab".into() },
            Button { label: "Decline", command: "/decline 0b6f", mac: "cd".into() },
        ];
        let post = card("c1", "Which?", &buttons, "https://askgate.example.com/channels/mattermost/actions");
        assert_eq!(post["channel_id"], "c1");
        let actions = &post["props"]["attachments"][0]["actions"];
        assert_eq!(actions[0]["name"], "date-fns");
        assert_eq!(actions[0]["id"], "choice0");
        assert_eq!(actions[0]["integration"]["context"], json!({"command": "/answer 0b6f #2", "mac": "ab"}));
        assert_eq!(actions[0]["integration"]["url"], "https://askgate.example.com/channels/mattermost/actions");
        assert_eq!(actions[1]["style"], "danger");
        assert!(card("c1", "Who are you?", &[], "u").get("props").is_none());
    }

    #[test]
    fn a_settled_card_keeps_no_buttons() {
        let post = settled("p1", "c1", "✅ green");
        assert_eq!((post["id"].as_str(), post["props"].clone()), (Some("p1"), json!({})));
        assert_eq!(reply("c1", "hi", Some("r1"))["root_id"], "r1");
        assert!(reply("c1", "hi", None).get("root_id").is_none());
    }

    #[test]
    fn markdown_marks_or_mentions_are_shown_as_typed() {
        assert_eq!(
            escape("*bold* _x_ `c` #1 <a> [l](u) a|b \\"),
            "\\*bold\\* \\_x\\_ \\`c\\` \\#1 \\<a\\> \\[l\\](u) a\\|b \\\\"
        );
        assert_eq!(escape("hi @channel"), "hi @\u{200b}channel");
        assert_eq!(escape("date-fns 1. ok"), "date-fns 1. ok");
    }
}
