//! What askgate sends to a Matrix room, as event contents: a card (the text card, with HTML
//! for clients that show it), its edit once answered, and notices.

use serde_json::{Value, json};

/// The most bytes of text and HTML together in one event: a homeserver refuses an event over
/// 64 KiB, and askgate's longest card (a question's 16 KiB of detail and its options) fits
/// twice with room to spare, but its HTML may not (every indent is `&nbsp;`s).
const MAX_BYTES: usize = 48 * 1024;

/// A message's content: `text` as its body, and as HTML with the first line bold (plain text
/// alone when both would not fit in one event).
pub fn message(msgtype: &str, text: &str) -> Value {
    let html = html(text);
    if text.len() + html.len() > MAX_BYTES {
        return json!({"msgtype": msgtype, "body": text});
    }
    json!({
        "msgtype": msgtype,
        "body": text,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
    })
}

/// The edit (`m.replace`) of the event `card` to read `text`.
pub fn edit(card: &str, text: &str) -> Value {
    let new = message("m.text", text);
    let mut content = message("m.text", &format!("* {text}"));
    content["m.new_content"] = new;
    content["m.relates_to"] = json!({"rel_type": "m.replace", "event_id": card});
    content
}

/// A notice answering the event `to`: in the thread of `thread` when the event was in one,
/// else as a reply.
pub fn answer(text: &str, to: &str, thread: Option<&str>) -> Value {
    let mut content = message("m.notice", text);
    content["m.relates_to"] = match thread {
        Some(root) => json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
            "m.in_reply_to": {"event_id": to}}),
        None => json!({"m.in_reply_to": {"event_id": to}}),
    };
    content
}

/// A reaction `key` on the event `card`.
pub fn reaction(card: &str, key: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": card, "key": key}})
}

/// `text` as HTML: escaped, its first line bold, its line breaks kept, its indents kept.
fn html(text: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push_str("<br>");
        }
        let indent = line.len() - line.trim_start().len();
        out.push_str(&"&nbsp;".repeat(indent));
        let line = escape(line.trim_start());
        if i == 0 {
            out.push_str(&format!("<b>{line}</b>"));
        } else {
            out.push_str(&line);
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_is_plain_text_and_escaped_html() {
        let m = message("m.text", "❓ <b>Which</b>?\n   1. a & b    /answer 0b6f 1");
        assert_eq!(m["body"], "❓ <b>Which</b>?\n   1. a & b    /answer 0b6f 1");
        assert_eq!(
            m["formatted_body"],
            "<b>❓ &lt;b&gt;Which&lt;/b&gt;?</b><br>&nbsp;&nbsp;&nbsp;1. a &amp; b    /answer 0b6f 1"
        );
    }

    #[test]
    fn a_card_too_long_for_both_is_plain_text_alone() {
        let code: String = "       let x = 1;\n".repeat(2_000);
        let m = message("m.text", &format!("❓ Read it?\n{code}"));
        assert!(m.get("formatted_body").is_none() && m["body"].as_str().unwrap().ends_with("let x = 1;\n"));
    }

    #[test]
    fn an_edit_replaces_the_card_and_a_reaction_annotates_it() {
        let e = edit("$card", "✅ done");
        assert_eq!(e["m.new_content"]["body"], "✅ done");
        assert_eq!(e["m.relates_to"], json!({"rel_type": "m.replace", "event_id": "$card"}));
        assert_eq!(reaction("$card", "1️⃣")["m.relates_to"]["key"], "1️⃣");
        assert_eq!(answer("x", "$m", Some("$card"))["m.relates_to"]["event_id"], "$card");
        assert_eq!(answer("x", "$m", None)["m.relates_to"]["m.in_reply_to"]["event_id"], "$m");
    }
}
