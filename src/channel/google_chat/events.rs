//! What an interaction event of Google Chat means to askgate, read from its JSON: a message
//! (its mention of the app taken off), a click on a card's button, the app added to a space.
//! Pure functions, tested on recorded events.

use serde_json::Value;

/// Who did something, as the event names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    /// `users/123`.
    pub name: String,
    /// Their display name, when the event has it.
    pub display: Option<String>,
    /// Their address, lower case, when the event has it.
    pub email: Option<String>,
    /// The language their Chat is in (`en`, `zh-CN`), when the event says.
    pub locale: Option<String>,
}

/// Where something happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// `spaces/AAA`.
    pub space: String,
    /// A direct message between the person and the app.
    pub direct: bool,
    /// The thread (`spaces/AAA/threads/BBB`), when there is one.
    pub thread: Option<String>,
}

/// An event askgate acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A message to the app: in a direct message, or mentioning it in a space.
    Message {
        /// `spaces/AAA/messages/BBB`: its id, so a redelivery applies once.
        name: String,
        /// Who wrote it.
        person: Person,
        /// Where.
        place: Place,
        /// What they wrote, without the mention of the app.
        text: String,
    },
    /// A click on a card's button.
    Click {
        /// The card's message (`spaces/AAA/messages/BBB`).
        message: String,
        /// Who clicked.
        person: Person,
        /// Where.
        place: Place,
        /// The command the button carries (its `command` parameter).
        command: String,
    },
    /// The app was added to a space (by `person`).
    Added {
        /// Who added it.
        person: Person,
        /// Where.
        place: Place,
    },
}

/// Why an event is not one askgate acts on: said to the log and in the answer's status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// A field askgate needs is missing.
    #[error("the event has no {0}")]
    Missing(&'static str),
    /// A kind askgate takes no action on (`REMOVED_FROM_SPACE`, a bot's message): answered
    /// with nothing.
    #[error("an event of type {0} needs no answer")]
    Ignored(String),
}

/// The event `event` (an interaction event's JSON, as Chat posts it to the endpoint).
///
/// # Errors
/// [`Unread`] for an event askgate does not act on.
pub fn read(event: &Value) -> Result<Event, Unread> {
    let kind = event["type"].as_str().ok_or(Unread::Missing("type"))?;
    let mut person = person(&event["user"]).ok_or(Unread::Missing("user.name"))?;
    person.locale = event["common"]["userLocale"].as_str().filter(|l| !l.is_empty()).map(str::to_owned);
    let space =
        event["space"]["name"].as_str().filter(|s| s.starts_with("spaces/")).ok_or(Unread::Missing("space.name"))?;
    let direct = matches!(event["space"]["type"].as_str(), Some("DM"))
        || matches!(event["space"]["spaceType"].as_str(), Some("DIRECT_MESSAGE"))
        || event["space"]["singleUserBotDm"] == true;
    let message = &event["message"];
    let thread = message["thread"]["name"].as_str().map(str::to_owned);
    let place = Place { space: space.to_owned(), direct, thread };
    match kind {
        "MESSAGE" => {
            if event["user"]["type"] == "BOT" {
                return Err(Unread::Ignored("MESSAGE from a bot".into()));
            }
            let name = message["name"].as_str().ok_or(Unread::Missing("message.name"))?.to_owned();
            Ok(Event::Message { name, person, place, text: typed(message) })
        }
        "CARD_CLICKED" => {
            let name = message["name"].as_str().ok_or(Unread::Missing("message.name"))?.to_owned();
            let command = command(event).ok_or(Unread::Missing("command parameter"))?;
            Ok(Event::Click { message: name, person, place, command })
        }
        "ADDED_TO_SPACE" => Ok(Event::Added { person, place }),
        other => Err(Unread::Ignored(other.to_owned())),
    }
}

fn person(user: &Value) -> Option<Person> {
    let name = user["name"].as_str().filter(|n| n.starts_with("users/") && n.len() > "users/".len())?;
    Some(Person {
        name: name.to_owned(),
        display: user["displayName"].as_str().filter(|d| !d.is_empty()).map(str::to_owned),
        email: user["email"].as_str().filter(|e| e.contains('@')).map(str::to_ascii_lowercase),
        locale: None,
    })
}

/// A message's words as askgate reads them: a slash command whole (`/answer 1a2b 2`: Chat
/// keeps the command out of `argumentText`), else `argumentText` (the text without the
/// mention of the app), else the text.
fn typed(message: &Value) -> String {
    let text = message["text"].as_str().unwrap_or_default();
    if message.get("slashCommand").is_some_and(Value::is_object) {
        // `@askgate /answer …` in a space: the command starts at the slash.
        return text.find('/').map_or(text, |at| &text[at..]).trim().to_owned();
    }
    message["argumentText"].as_str().unwrap_or(text).trim().to_owned()
}

/// The command a clicked button carries: its action's `command` parameter.
fn command(event: &Value) -> Option<String> {
    let from_action = event["action"]["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["key"] == super::render::COMMAND)
        .and_then(|p| p["value"].as_str());
    let from_common = event["common"]["parameters"][super::render::COMMAND].as_str();
    from_action.or(from_common).map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn alice() -> Value {
        json!({"name": "users/111", "displayName": "Alice", "email": "Alice@Example.com", "type": "HUMAN"})
    }

    #[test]
    fn a_mention_in_a_space_is_read_without_the_mention() {
        let event = json!({"type": "MESSAGE", "eventTime": "2026-12-06T22:00:00Z",
            "space": {"name": "spaces/AAA", "type": "ROOM", "spaceType": "SPACE"},
            "message": {"name": "spaces/AAA/messages/M1", "sender": alice(), "text": "@askgate /run demo",
                "argumentText": " /run demo", "thread": {"name": "spaces/AAA/threads/T1"}},
            "user": alice(), "common": {"userLocale": "zh-CN"}});
        let Ok(Event::Message { name, person, place, text }) = read(&event) else { panic!() };
        assert_eq!(person.locale.as_deref(), Some("zh-CN"));
        assert_eq!((name.as_str(), text.as_str()), ("spaces/AAA/messages/M1", "/run demo"));
        assert_eq!((person.name.as_str(), person.email.as_deref()), ("users/111", Some("alice@example.com")));
        assert_eq!(
            place,
            Place { space: "spaces/AAA".into(), direct: false, thread: Some("spaces/AAA/threads/T1".into()) }
        );
    }

    #[test]
    fn a_direct_message_and_a_slash_command_keep_their_words() {
        let dm = json!({"type": "MESSAGE", "space": {"name": "spaces/DM1", "type": "DM"},
            "message": {"name": "spaces/DM1/messages/M2", "text": "green"}, "user": alice()});
        let Ok(Event::Message { text, place, .. }) = read(&dm) else { panic!() };
        assert_eq!((text.as_str(), place.direct), ("green", true));
        let slash = json!({"type": "MESSAGE", "space": {"name": "spaces/AAA", "spaceType": "SPACE"},
            "message": {"name": "spaces/AAA/messages/M3", "text": "@askgate /answer 1a2b 2", "argumentText": " 1a2b 2",
                "slashCommand": {"commandId": "1"}}, "user": alice()});
        let Ok(Event::Message { text, .. }) = read(&slash) else { panic!() };
        assert_eq!(text, "/answer 1a2b 2");
    }

    #[test]
    fn a_click_carries_its_buttons_command() {
        let event = json!({"type": "CARD_CLICKED", "space": {"name": "spaces/AAA", "type": "ROOM"},
            "message": {"name": "spaces/AAA/messages/CARD"}, "user": alice(),
            "action": {"actionMethodName": "answer", "parameters": [{"key": "command", "value": "/answer 0b6f 2"}]},
            "common": {"invokedFunction": "answer", "parameters": {"command": "/answer 0b6f 2"}}});
        let Ok(Event::Click { message, command, .. }) = read(&event) else { panic!() };
        assert_eq!((message.as_str(), command.as_str()), ("spaces/AAA/messages/CARD", "/answer 0b6f 2"));
        let only_common = json!({"type": "CARD_CLICKED", "space": {"name": "spaces/AAA"},
            "message": {"name": "spaces/AAA/messages/CARD"}, "user": alice(),
            "common": {"parameters": {"command": "/decline 0b6f"}}});
        assert!(matches!(read(&only_common), Ok(Event::Click { command, .. }) if command == "/decline 0b6f"));
    }

    #[test]
    fn events_without_what_askgate_needs_are_not_acted_on() {
        let no_user = json!({"type": "MESSAGE", "space": {"name": "spaces/AAA"}, "message": {"name": "m"}});
        assert_eq!(read(&no_user), Err(Unread::Missing("user.name")));
        let no_command = json!({"type": "CARD_CLICKED", "space": {"name": "spaces/AAA"},
            "message": {"name": "spaces/AAA/messages/CARD"}, "user": alice(), "action": {"parameters": []}});
        assert_eq!(read(&no_command), Err(Unread::Missing("command parameter")));
        let removed = json!({"type": "REMOVED_FROM_SPACE", "space": {"name": "spaces/AAA"}, "user": alice()});
        assert_eq!(read(&removed), Err(Unread::Ignored("REMOVED_FROM_SPACE".into())));
        let mut bot =
            json!({"type": "MESSAGE", "space": {"name": "spaces/AAA"}, "message": {"name": "m"}, "user": alice()});
        bot["user"]["type"] = json!("BOT");
        assert!(matches!(read(&bot), Err(Unread::Ignored(_))));
    }
}
