//! What the Bot Framework posts to `/channels/teams`, read: an activity (a person's message, a
//! tap on a card's `Action.Submit`, the bot added to a conversation) as plain data.

use serde_json::Value;

use super::render::COMMAND;

/// One activity Teams sent, as askgate reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activity {
    /// Its id: the same activity delivered again has the same one.
    pub id: String,
    /// The Bot Connector that serves its conversation: replies go there.
    pub service_url: String,
    /// The conversation's id (`a:1…` a personal chat, `19:…@thread.v2` a group or channel).
    pub conversation: String,
    /// Whether it is a personal (1:1) chat with the bot.
    pub personal: bool,
    /// The Microsoft 365 tenant it is in.
    pub tenant: Option<String>,
    /// Who sent it.
    pub from: From,
    /// The sender's language tag (`en-US`), when Teams says.
    pub locale: Option<String>,
    /// What it is.
    pub said: Said,
}

/// Who sent an activity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct From {
    /// Their Teams id in this bot's conversations (`29:…`).
    pub id: String,
    /// Their name as Teams shows it.
    pub name: Option<String>,
    /// Their Microsoft Entra (AAD) object id: who they are across Teams.
    pub aad: Option<String>,
    /// Their user principal name (`megan@contoso.com`), where the activity gives it.
    pub upn: Option<String>,
}

/// What an activity is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// A message's text (mentions of the bot taken out).
    Text(String),
    /// A tap on a card's action: the command its data carries.
    Tap(String),
    /// The bot was added to the conversation, or someone joined it.
    Joined,
    /// Anything else: an edit, a reaction, a typing notice, a tap on another app's card.
    Other,
}

/// The envelope of an activity, which the token that came with it is checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// `msteams` from Teams (the key's endorsements must name it).
    pub channel: String,
    /// The connector's base URL (the token's `serviceurl` claim must be it).
    pub service_url: String,
}

fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The channel and service URL of an activity.
///
/// # Errors
/// When it is not an object with both.
pub fn envelope(activity: &Value) -> Result<Envelope, String> {
    let channel = string(activity, "channelId").ok_or("the activity has no channelId")?;
    let service_url = string(activity, "serviceUrl").ok_or("the activity has no serviceUrl")?;
    Ok(Envelope { channel, service_url })
}

/// Reads an activity.
///
/// # Errors
/// When a field every activity has is missing.
pub fn read(activity: &Value) -> Result<Activity, String> {
    let Envelope { service_url, .. } = envelope(activity)?;
    let id = string(activity, "id").ok_or("the activity has no id")?;
    let conversation = &activity["conversation"];
    let conversation_id = string(conversation, "id").ok_or("the activity has no conversation id")?;
    let sender = &activity["from"];
    let from = From {
        id: string(sender, "id").ok_or("the activity has no sender")?,
        name: string(sender, "name"),
        aad: string(sender, "aadObjectId"),
        upn: string(sender, "userPrincipalName"),
    };
    let tenant = string(conversation, "tenantId").or_else(|| string(&activity["channelData"]["tenant"], "id"));
    let said = match activity.get("type").and_then(Value::as_str) {
        Some("message") => match activity.get("value") {
            Some(value) if !value.is_null() => string(value, COMMAND).map_or(Said::Other, Said::Tap),
            _ => Said::Text(without_mentions(activity.get("text").and_then(Value::as_str).unwrap_or_default())),
        },
        Some("conversationUpdate" | "installationUpdate") => Said::Joined,
        _ => Said::Other,
    };
    Ok(Activity {
        id,
        service_url,
        personal: conversation.get("conversationType").and_then(Value::as_str) == Some("personal"),
        conversation: conversation_id,
        tenant,
        from,
        locale: string(activity, "locale"),
        said,
    })
}

/// `text` without its `<at>…</at>` mentions (in a channel, people write to the bot by
/// mentioning it), trimmed.
fn without_mentions(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<at>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</at>") {
            Some(end) => rest = &rest[start + end + "</at>".len()..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A message from Teams as the Bot Framework posts it (its reference's example, trimmed).
    fn message() -> Value {
        json!({
            "type": "message",
            "id": "1481567603816",
            "timestamp": "2016-12-12T18:33:23.8Z",
            "serviceUrl": "https://smba.trafficmanager.net/amer/",
            "channelId": "msteams",
            "from": {"id": "29:1XJKJMvc5GBtc2JwZq0oj8tHZmzrQgFmB39ATiQWA85gQtHieVkKilBZ9XHoq9j7Zaqt7CZ-NJWi7me2kHTL3Bw",
                "name": "Megan Bowen", "aadObjectId": "7faf3d4c-1a3c-4e6f-9b61-b55f3f3b8c11"},
            "conversation": {"conversationType": "personal", "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
                "id": "a:17I0kl9EkpE1O9PH5TWrzrLNwnWWcfrU7QZjKR0WSfOpzbfcAg2IaydGElSo10tVr4C7Fc6GtieTJX663WuJCc1uA83n4CSrHSgGBj5XNYLcVlJAs2ZX8DbYBPck201w-"},
            "recipient": {"id": "28:c9e8c047-2a74-40a2-b28a-b162d5f5327c", "name": "askgate"},
            "textFormat": "plain",
            "text": "<at>askgate</at> /run demo",
            "locale": "en-US",
            "channelData": {"tenant": {"id": "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
        })
    }

    #[test]
    fn a_message_is_its_text_without_the_mention() {
        let a = read(&message()).unwrap();
        assert_eq!(a.said, Said::Text("/run demo".into()));
        assert_eq!((a.id.as_str(), a.personal, a.locale.as_deref()), ("1481567603816", true, Some("en-US")));
        assert_eq!(a.from.aad.as_deref(), Some("7faf3d4c-1a3c-4e6f-9b61-b55f3f3b8c11"));
        assert_eq!(a.tenant.as_deref(), Some("72f988bf-86f1-41af-91ab-2d7cd011db47"));
        assert_eq!(a.service_url, "https://smba.trafficmanager.net/amer/");
    }

    #[test]
    fn a_tap_is_the_command_its_data_carries() {
        let mut tap = message();
        tap["text"] = Value::Null;
        tap["value"] = json!({COMMAND: "/answer 0b6f 2"});
        assert_eq!(read(&tap).unwrap().said, Said::Tap("/answer 0b6f 2".into()));
        tap["value"] = json!({"other": "app"});
        assert_eq!(read(&tap).unwrap().said, Said::Other);
    }

    #[test]
    fn an_activity_without_what_every_activity_has_is_refused() {
        let mut a = message();
        a.as_object_mut().unwrap().remove("serviceUrl");
        assert!(envelope(&a).unwrap_err().contains("serviceUrl"));
        let mut a = message();
        a["conversation"] = json!({});
        assert!(read(&a).unwrap_err().contains("conversation"));
        let mut a = message();
        a["type"] = json!("conversationUpdate");
        assert_eq!(read(&a).unwrap().said, Said::Joined);
    }
}
