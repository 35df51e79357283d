//! A delivery of the WhatsApp webhook read: what people sent the business number (text, a
//! tapped reply button or list row, a reaction, a template's quick reply) and the statuses of
//! what askgate sent (read for their errors). A delivery may batch several of each, and
//! several numbers' (a shared Meta app): only this number's are read.

use serde_json::Value;

/// Something a delivery carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A person's message.
    Message {
        /// Its id (`wamid.…`): a redelivery carries the same.
        id: String,
        /// The sender's number in E.164 (`+15551234567`, from the `wa_id`, which has no `+`).
        from: String,
        /// Their profile name, when WhatsApp says it.
        name: Option<String>,
        /// The message it replies to (the quoted message's id), when it is a reply.
        context: Option<String>,
        /// What they sent.
        what: What,
    },
    /// What became of a message askgate sent.
    Status {
        /// The message's id.
        id: String,
        /// Its recipient's number in E.164.
        recipient: String,
        /// `sent`, `delivered`, `read` or `failed`.
        status: String,
        /// Why it failed: each error's code and words.
        errors: Vec<(i64, String)>,
    },
}

/// What a person's message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// Typed text, or a template's quick-reply button (its text).
    Text(String),
    /// A reply button or a list row tapped: its id (the command askgate gave it), and its title.
    Choice {
        /// The id askgate gave the button or row.
        id: String,
        /// Its title.
        title: String,
    },
    /// A reaction on a message: the message's id, and the emoji (none when it was taken away).
    Reaction {
        /// The message reacted to.
        on: String,
        /// The emoji; none when the reaction was removed.
        emoji: Option<String>,
    },
    /// Anything else (an image, a voice note, a location): its type.
    Other(String),
}

/// The events of a delivery to the business number `phone_number_id`, in order.
///
/// # Errors
/// When the body is not a WhatsApp Business Account delivery.
pub fn read(body: &Value, phone_number_id: &str) -> Result<Vec<Event>, String> {
    if body["object"] != "whatsapp_business_account" {
        return Err(format!("not a WhatsApp delivery: `object` is {}", body["object"]));
    }
    let entries = body["entry"].as_array().ok_or("a delivery without `entry`")?;
    let mut events = Vec::new();
    for change in entries.iter().flat_map(|e| e["changes"].as_array().into_iter().flatten()) {
        let value = &change["value"];
        if change["field"] != "messages" || value["metadata"]["phone_number_id"] != phone_number_id {
            continue;
        }
        let name_of = |wa_id: &str| {
            value["contacts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["wa_id"] == wa_id)
                .and_then(|c| c["profile"]["name"].as_str().filter(|n| !n.trim().is_empty()).map(str::to_owned))
        };
        for message in value["messages"].as_array().into_iter().flatten() {
            let (Some(id), Some(wa_id)) = (message["id"].as_str(), message["from"].as_str()) else { continue };
            let Some(from) = super::number_of(wa_id) else { continue };
            events.push(Event::Message {
                id: id.to_owned(),
                from,
                name: name_of(wa_id),
                context: message["context"]["id"].as_str().map(str::to_owned),
                what: what(message),
            });
        }
        for status in value["statuses"].as_array().into_iter().flatten() {
            let (Some(id), Some(to)) = (status["id"].as_str(), status["recipient_id"].as_str()) else { continue };
            let Some(recipient) = super::number_of(to) else { continue };
            let errors = status["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let words = [&e["title"], &e["message"], &e["error_data"]["details"]]
                        .iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(": ");
                    (e["code"].as_i64().unwrap_or_default(), words)
                })
                .collect();
            let status = status["status"].as_str().unwrap_or_default().to_owned();
            events.push(Event::Status { id: id.to_owned(), recipient, status, errors });
        }
    }
    Ok(events)
}

/// What one message is.
fn what(message: &Value) -> What {
    let kind = message["type"].as_str().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match kind {
        "text" => What::Text(text(&message["text"]["body"])),
        "button" => What::Text(text(&message["button"]["text"])),
        "interactive" => {
            let interactive = &message["interactive"];
            let reply = match interactive["type"].as_str() {
                Some("button_reply") => &interactive["button_reply"],
                Some("list_reply") => &interactive["list_reply"],
                _ => return What::Other(format!("interactive {}", interactive["type"])),
            };
            What::Choice { id: text(&reply["id"]), title: text(&reply["title"]) }
        }
        "reaction" => What::Reaction {
            on: text(&message["reaction"]["message_id"]),
            emoji: message["reaction"]["emoji"].as_str().filter(|e| !e.is_empty()).map(str::to_owned),
        },
        other => What::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A delivery as Meta sends it, of `messages` (and `statuses`) to number `1065`.
    fn delivery(messages: Value, statuses: Value) -> Value {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "WABA1", "changes": [{"field": "messages",
            "value": {"messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550001111", "phone_number_id": "1065"},
                "contacts": [{"profile": {"name": "Alice"}, "wa_id": "15551234567"}],
                "messages": messages, "statuses": statuses}}]}]})
    }

    #[test]
    fn text_buttons_rows_or_reactions_are_read_with_their_sender() {
        let body = delivery(
            json!([
                {"from": "15551234567", "id": "wamid.1", "timestamp": "1700000000", "type": "text", "text": {"body": "/run demo"}},
                {"from": "15551234567", "id": "wamid.2", "timestamp": "1700000001", "type": "interactive",
                 "context": {"from": "15550001111", "id": "wamid.card"},
                 "interactive": {"type": "button_reply", "button_reply": {"id": "/answer abc 2", "title": "date-fns"}}},
                {"from": "15551234567", "id": "wamid.3", "timestamp": "1700000002", "type": "interactive",
                 "interactive": {"type": "list_reply", "list_reply": {"id": "/answer abc 5", "title": "five", "description": "d"}}},
                {"from": "15551234567", "id": "wamid.4", "timestamp": "1700000003", "type": "reaction",
                 "reaction": {"message_id": "wamid.card", "emoji": "👍"}},
                {"from": "15551234567", "id": "wamid.5", "timestamp": "1700000004", "type": "reaction",
                 "reaction": {"message_id": "wamid.card"}},
                {"from": "15551234567", "id": "wamid.6", "timestamp": "1700000005", "type": "image", "image": {"id": "m1"}},
                {"from": "15551234567", "id": "wamid.7", "timestamp": "1700000006", "type": "button",
                 "context": {"from": "15550001111", "id": "wamid.template"}, "button": {"payload": "p", "text": "Show me"}}
            ]),
            json!(null),
        );
        let events = read(&body, "1065").unwrap();
        let whats: Vec<&What> = events
            .iter()
            .map(|e| match e {
                Event::Message { from, name, what, .. } => {
                    assert_eq!((from.as_str(), name.as_deref()), ("+15551234567", Some("Alice")));
                    what
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(whats[0], &What::Text("/run demo".into()));
        assert_eq!(whats[1], &What::Choice { id: "/answer abc 2".into(), title: "date-fns".into() });
        assert_eq!(whats[2], &What::Choice { id: "/answer abc 5".into(), title: "five".into() });
        assert_eq!(whats[3], &What::Reaction { on: "wamid.card".into(), emoji: Some("👍".into()) });
        assert_eq!(whats[4], &What::Reaction { on: "wamid.card".into(), emoji: None }, "taken away");
        assert_eq!(whats[5], &What::Other("image".into()));
        assert_eq!(whats[6], &What::Text("Show me".into()));
        assert!(matches!(&events[1], Event::Message { context: Some(c), .. } if c == "wamid.card"));
    }

    #[test]
    fn statuses_carry_their_errors_while_other_numbers_are_left_alone() {
        let failed = json!([{"id": "wamid.card", "status": "failed", "timestamp": "1700000000", "recipient_id": "15551234567",
            "errors": [{"code": 131047, "title": "Re-engagement message", "message": "Re-engagement message",
                "error_data": {"details": "more than 24 hours have passed"}}]}]);
        let events = read(&delivery(json!(null), failed.clone()), "1065").unwrap();
        let Event::Status { id, recipient, status, errors } = &events[0] else { panic!("{events:?}") };
        assert_eq!((id.as_str(), recipient.as_str(), status.as_str()), ("wamid.card", "+15551234567", "failed"));
        assert_eq!(errors[0].0, 131_047);
        assert!(errors[0].1.contains("24 hours"), "{errors:?}");
        assert!(read(&delivery(json!(null), failed), "9999").unwrap().is_empty(), "another number's");
        assert!(read(&json!({"object": "page", "entry": []}), "1065").is_err());
        let bad_sender =
            delivery(json!([{"from": "not-a-number", "id": "w", "type": "text", "text": {"body": "x"}}]), json!(null));
        assert!(read(&bad_sender, "1065").unwrap().is_empty());
    }
}
