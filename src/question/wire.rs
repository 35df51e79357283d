//! The one shape of an ask on the wire: what a program writes in an `ask`, `confirm` or
//! `approve` line, what an agent POSTs to `/api/questions`, and what MCP tools take. Each
//! surface reads its own keys (a line's `type`, the API's `conversation`) and hands the rest
//! here; a key that no one knows is refused, so a misspelt `"option"` never becomes a
//! free-text question.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Ask, Kind, Timeout};

/// An ask as written on the wire.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskWire {
    /// What the human reads first (`action` for an approval says the same).
    #[serde(alias = "action")]
    pub prompt: String,
    /// More context, shown under the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The options to pick from (questions only); none: free text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Pick many (questions only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multi: bool,
    /// Free text besides the options (questions only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_custom: bool,
    /// Applied on timeout: an option, a list for multi-select, a boolean for a confirm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Seconds, or `"never"`; none: the gateway's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "timeout_schema")]
    pub timeout: Option<Value>,
    /// Approvals only: the approver may allow it as edited (`edit <new action>`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub editable: bool,
    /// Approvals only: how many distinct people must approve (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 25))]
    pub quorum: Option<u32>,
}

/// A timeout as [`Timeout::from_json`] takes it.
fn timeout_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Seconds, or \"never\"; null or absent: the gateway's default.",
        "anyOf": [{"type": "integer", "minimum": 1}, {"const": "never"}, {"type": "null"}],
    })
}

/// The keys of an ask.
const KEYS: &[&str] =
    &["prompt", "action", "detail", "options", "multi", "allow_custom", "default", "timeout", "editable", "quorum"];

impl AskWire {
    /// Takes the keys of an ask out of `object`, leaving the surface's own.
    ///
    /// # Errors
    /// serde's message when a value has the wrong type or the prompt is missing.
    pub fn take(object: &mut Map<String, Value>) -> Result<Self, serde_json::Error> {
        let mut ask = Map::new();
        for key in KEYS {
            if let Some(value) = object.remove(*key) {
                ask.insert((*key).to_owned(), value);
            }
        }
        serde_json::from_value(Value::Object(ask))
    }

    /// The ask of `kind` this describes; who may answer is the caller's to add.
    ///
    /// # Errors
    /// A message when the timeout is not a positive number of seconds or `"never"`, or a
    /// confirm or approval carries keys only questions take.
    pub fn into_ask(self, kind: Kind) -> Result<Ask, String> {
        if kind != Kind::Question {
            let extra =
                [("options", !self.options.is_empty()), ("multi", self.multi), ("allow_custom", self.allow_custom)];
            if let Some((key, _)) = extra.iter().find(|(_, set)| *set) {
                return Err(format!("`{key}` is for questions; a {kind} has its own buttons"));
            }
        }
        if self.editable && kind != Kind::Approval {
            return Err(format!("`editable` is for approvals; a {kind} has nothing to edit"));
        }
        if self.quorum.is_some() && kind != Kind::Approval {
            return Err(format!("`quorum` is for approvals; a {kind} takes one answer"));
        }
        let timeout = Timeout::from_json(self.timeout.as_ref())?;
        Ok(Ask {
            kind: Some(kind),
            prompt: self.prompt,
            detail: self.detail,
            options: self.options,
            multi: self.multi,
            allow_custom: self.allow_custom,
            default: self.default,
            timeout,
            answerers: None,
            editable: self.editable,
            quorum: self.quorum,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else { panic!("not an object") };
        map
    }

    #[test]
    fn the_ask_keys_are_taken_and_the_surfaces_are_left() {
        let mut body = object(json!({"conversation": "console:local", "prompt": "Ship?", "options": ["a", "b"]}));
        let wire = AskWire::take(&mut body).unwrap();
        assert_eq!(wire.options, ["a", "b"]);
        assert_eq!(body, object(json!({"conversation": "console:local"})));
        let ask = wire.into_ask(Kind::Question).unwrap();
        assert_eq!((ask.prompt.as_str(), ask.timeout), ("Ship?", Timeout::Default));
    }

    #[test]
    fn wrong_types_and_misplaced_keys_are_refused() {
        assert!(AskWire::take(&mut object(json!({"prompt": "x", "options": "a,b"}))).is_err());
        assert!(AskWire::take(&mut object(json!({"options": ["a"]}))).is_err(), "no prompt");
        let confirm = AskWire { prompt: "Sure?".into(), options: vec!["a".into()], ..AskWire::default() };
        assert!(confirm.into_ask(Kind::Confirm).unwrap_err().contains("`options` is for questions"));
        let bad = AskWire { prompt: "x".into(), timeout: Some(json!(-1)), ..AskWire::default() };
        assert!(bad.into_ask(Kind::Question).is_err());
        let action = AskWire::take(&mut object(json!({"action": "rm -rf build/", "timeout": "never"}))).unwrap();
        assert_eq!(action.into_ask(Kind::Approval).unwrap().timeout, Timeout::Never);
    }
}
