//! What a `/sync` batch means to askgate, read from its JSON: people's messages, replies and
//! reactions, invites and who sent them, rooms that are encrypted. Pure functions, so they are
//! tested on recorded events.

use serde_json::Value;

/// A room event askgate acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A text message; `replying_to` is the event it replies to (or the root of the thread it
    /// is in).
    Message {
        /// The event's id.
        id: String,
        /// Who sent it.
        sender: String,
        /// What they wrote, without a reply's quoted fallback.
        text: String,
        /// The event replied to, or the thread's root.
        replying_to: Option<String>,
        /// Whether it is in a thread (whose root is `replying_to`).
        in_thread: bool,
    },
    /// A reaction (`m.annotation`) `key` on the event `on`.
    Reaction {
        /// The reaction's event id.
        id: String,
        /// Who reacted.
        sender: String,
        /// The event reacted to.
        on: String,
        /// The emoji.
        key: String,
    },
    /// A message askgate cannot read: the room is encrypted.
    Encrypted,
}

/// The event askgate acts on in `event` (one of a room's timeline), if any; askgate's own
/// events (`me`), edits and other kinds are none.
pub fn read(event: &Value, me: &str) -> Option<Event> {
    let id = event["event_id"].as_str()?.to_owned();
    let sender = event["sender"].as_str()?.to_owned();
    if sender == me {
        return None;
    }
    let content = &event["content"];
    let relates = &content["m.relates_to"];
    match event["type"].as_str()? {
        "m.room.message" => {
            let kind = content["msgtype"].as_str()?;
            // An edit changes a message already handled; a notice is a bot's.
            if relates["rel_type"] == "m.replace" || !matches!(kind, "m.text" | "m.emote") {
                return None;
            }
            let body = content["body"].as_str()?;
            let in_thread = relates["rel_type"] == "m.thread";
            let replying_to = match in_thread {
                true => relates["event_id"].as_str(),
                false => relates["m.in_reply_to"]["event_id"].as_str(),
            };
            let text = match replying_to {
                Some(_) => without_fallback(body),
                None => body,
            };
            let replying_to = replying_to.map(str::to_owned);
            Some(Event::Message { id, sender, text: text.to_owned(), replying_to, in_thread })
        }
        "m.reaction" if relates["rel_type"] == "m.annotation" => {
            let on = relates["event_id"].as_str()?.to_owned();
            let key = relates["key"].as_str()?.to_owned();
            Some(Event::Reaction { id, sender, on, key })
        }
        "m.room.encrypted" => Some(Event::Encrypted),
        _ => None,
    }
}

/// A reply's body without the quote of the message it replies to that older clients put
/// first (`> <@bot:x> …` lines, then an empty line).
fn without_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    let mut rest = body;
    while let Some(line_end) = rest.find('\n') {
        let line = &rest[..line_end];
        rest = &rest[line_end + 1..];
        if !line.starts_with('>') {
            return if line.trim().is_empty() { rest } else { body };
        }
    }
    body
}

/// Who invited `me` to a room, from the room's `invite_state`.
pub fn inviter<'a>(invited: &'a Value, me: &str) -> Option<&'a str> {
    state(invited, "invite_state")
        .find(|e| e["type"] == "m.room.member" && e["state_key"] == me && e["content"]["membership"] == "invite")
        .and_then(|e| e["sender"].as_str())
}

/// Whether a room of a sync batch (joined or invited) says it is encrypted.
pub fn encrypted(room: &Value) -> bool {
    ["invite_state", "state", "timeline"]
        .into_iter()
        .flat_map(|section| state(room, section))
        .any(|e| e["type"] == "m.room.encryption")
}

fn state<'a>(room: &'a Value, section: &str) -> impl Iterator<Item = &'a Value> {
    room[section]["events"].as_array().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ME: &str = "@askgate:example.org";

    fn message(content: Value) -> Value {
        json!({"type": "m.room.message", "event_id": "$m", "sender": "@alice:example.org", "content": content})
    }

    #[test]
    fn a_message_a_reply_and_a_thread_reply_are_read_with_what_they_answer() {
        let plain = message(json!({"msgtype": "m.text", "body": "/run demo"}));
        assert_eq!(
            read(&plain, ME),
            Some(Event::Message {
                id: "$m".into(),
                sender: "@alice:example.org".into(),
                text: "/run demo".into(),
                replying_to: None,
                in_thread: false
            })
        );
        let reply = message(json!({"msgtype": "m.text", "body": "> <@askgate:example.org> Which?\n> 1. a\n\nmy words",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$card"}}}));
        let Some(Event::Message { text, replying_to, .. }) = read(&reply, ME) else { panic!() };
        assert_eq!((text.as_str(), replying_to.as_deref()), ("my words", Some("$card")));
        let thread = message(json!({"msgtype": "m.text", "body": "in the thread",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$card", "is_falling_back": true,
                "m.in_reply_to": {"event_id": "$latest"}}}));
        let Some(Event::Message { text, replying_to, in_thread, .. }) = read(&thread, ME) else { panic!() };
        assert_eq!((text.as_str(), replying_to.as_deref(), in_thread), ("in the thread", Some("$card"), true));
    }

    #[test]
    fn a_quote_typed_without_a_reply_is_kept() {
        let quoted = message(json!({"msgtype": "m.text", "body": "> not a fallback\nmine",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$card"}}}));
        let Some(Event::Message { text, .. }) = read(&quoted, ME) else { panic!() };
        assert_eq!(text, "> not a fallback\nmine");
    }

    #[test]
    fn edits_notices_and_askgates_own_events_are_not_acted_on() {
        let edit = message(
            json!({"msgtype": "m.text", "body": "* x", "m.relates_to": {"rel_type": "m.replace", "event_id": "$m0"}}),
        );
        assert_eq!(read(&edit, ME), None);
        assert_eq!(read(&message(json!({"msgtype": "m.notice", "body": "bot"})), ME), None);
        let mut own = message(json!({"msgtype": "m.text", "body": "x"}));
        own["sender"] = json!(ME);
        assert_eq!(read(&own, ME), None);
    }

    #[test]
    fn a_reaction_names_the_event_and_its_key() {
        let reaction = json!({"type": "m.reaction", "event_id": "$r", "sender": "@bob:example.org",
            "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$card", "key": "2️⃣"}}});
        assert_eq!(
            read(&reaction, ME),
            Some(Event::Reaction {
                id: "$r".into(),
                sender: "@bob:example.org".into(),
                on: "$card".into(),
                key: "2️⃣".into()
            })
        );
    }

    #[test]
    fn an_invite_names_its_sender_and_an_encrypted_room_says_so() {
        let invited = json!({"invite_state": {"events": [
            {"type": "m.room.encryption", "state_key": "", "sender": "@alice:example.org", "content": {"algorithm": "m.megolm.v1.aes-sha2"}},
            {"type": "m.room.member", "state_key": ME, "sender": "@alice:example.org", "content": {"membership": "invite"}}
        ]}});
        assert_eq!(inviter(&invited, ME), Some("@alice:example.org"));
        assert!(encrypted(&invited));
        assert!(!encrypted(&json!({"timeline": {"events": []}})));
        let m = json!({"type": "m.room.encrypted", "event_id": "$e", "sender": "@alice:example.org", "content": {}});
        assert_eq!(read(&m, ME), Some(Event::Encrypted));
    }
}
