//! The one shape of an ask on the wire: what a program writes in an `ask`, `confirm` or
//! `approve` line, what an agent POSTs to `/api/questions`, and what MCP tools take. Each
//! surface reads its own keys (a line's `type`, the API's `conversation`) and hands the rest
//! here; a key that no one knows is refused, so a misspelt `"option"` never becomes a
//! free-text question.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::form::{Form, Subquestion};
use super::{Ask, Conversation, Kind, Nudges, Timeout, UserRef};

/// An ask as written on the wire.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskWire {
    /// What the human reads first (`action` for an approval says the same); may be left out
    /// when `questions` are given.
    #[serde(alias = "action", default)]
    pub prompt: String,
    /// More context, shown under the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The options to pick from (questions only), each a label or a label with one line about
    /// it; none: free text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<WireOption>,
    /// Pick many (questions only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multi: bool,
    /// Free text besides the options (questions only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_custom: bool,
    /// Forms only: the fields, as MCP elicitation's flat JSON Schema (an object of strings,
    /// numbers, integers, booleans and enums, with `required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "object_schema")]
    pub schema: Option<Value>,
    /// Questions only: 1 to 4 questions asked together, each with a short `header` (its key
    /// in the answer), its `prompt`, and its own `options`, `multi` and `allow_custom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4))]
    pub questions: Option<Vec<Subquestion>>,
    /// Applied on timeout: an option, a list for multi-select, a boolean for a confirm, an
    /// object for a form or several questions.
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
    /// A reminder this long before it expires: seconds, or `"5m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub remind_before: Option<Value>,
    /// A reminder every this long while it waits (at least a minute): seconds, or `"10m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub remind_every: Option<Value>,
    /// After this long, also shown in `escalate_to`: seconds, or `"10m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub escalate_after: Option<Value>,
    /// The conversation to escalate to (`telegram:-100123`); not from an agent's token (403
    /// `agent_answerers`: who answers an agent is the configuration's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<Conversation>,
    /// Who may answer there (default: anyone in it); not from an agent's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_answerers: Option<Vec<UserRef>>,
}

/// An option as the wire gives it: `"dayjs"`, or `{"label": "dayjs", "description": "2 kB"}`
/// (the shape of Claude Code's AskUserQuestion options).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum WireOption {
    /// Just the label.
    Label(String),
    /// A label with one line about it.
    Described {
        /// What is picked.
        #[schemars(length(min = 1, max = 100))]
        label: String,
        /// One line about it, shown under or beside the label.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        #[schemars(length(max = 200))]
        description: String,
    },
}

impl WireOption {
    /// The label.
    pub fn label(&self) -> &str {
        match self {
            Self::Label(label) | Self::Described { label, .. } => label,
        }
    }
}

impl From<&str> for WireOption {
    fn from(label: &str) -> Self {
        Self::Label(label.to_owned())
    }
}

impl<'de> Deserialize<'de> for WireOption {
    /// By hand, for a message that names the shapes an option may take (an untagged enum only
    /// says that nothing matched).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        const SHAPES: &str = r#"an option is a label ("dayjs") or {"label": "dayjs", "description": "one line"}"#;
        match Value::deserialize(deserializer)? {
            Value::String(label) => Ok(Self::Label(label)),
            Value::Object(mut map) => {
                let mut text = |key: &str| match map.remove(key) {
                    None | Some(Value::Null) => Ok(String::new()),
                    Some(Value::String(s)) => Ok(s),
                    Some(other) => Err(D::Error::custom(format!("option {key} {other} is not text; {SHAPES}"))),
                };
                let (label, description) = (text("label")?, text("description")?);
                if let Some(key) = map.keys().next() {
                    return Err(D::Error::custom(format!("unknown option key `{key}`; {SHAPES}")));
                }
                if label.is_empty() {
                    return Err(D::Error::custom(format!("an option without a label; {SHAPES}")));
                }
                Ok(Self::Described { label, description })
            }
            other => Err(D::Error::custom(format!("option {other} is neither; {SHAPES}"))),
        }
    }
}

/// A duration as the wire gives it.
fn duration_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Seconds, or a duration like \"90s\", \"5m\", \"1h30m\"; null or absent: none.",
        "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "minLength": 1}, {"type": "null"}],
    })
}

/// A duration as the wire gives it, in milliseconds.
fn wire_duration(key: &str, value: Option<&Value>) -> Result<Option<u64>, String> {
    let duration = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => match n.as_u64().filter(|&s| s > 0) {
            Some(secs) => std::time::Duration::from_secs(secs),
            None => return Err(format!("{key} {n} is not a positive number of seconds")),
        },
        Some(Value::String(text)) => super::parse_duration(text).map_err(|e| format!("{key}: {e}"))?,
        Some(other) => return Err(format!("{key} {other} is not a number of seconds or a duration like \"5m\"")),
    };
    Ok(Some(super::millis(duration)))
}

/// A form's schema: a JSON object (checked when the ask is).
fn object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "MCP elicitation's flat JSON Schema: {\"type\": \"object\", \"properties\": {…}, \"required\": […]}.",
        "type": ["object", "null"],
    })
}

/// A timeout as [`Timeout::from_json`] takes it.
fn timeout_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Seconds, or \"never\"; null or absent: the gateway's default.",
        "anyOf": [{"type": "integer", "minimum": 1}, {"const": "never"}, {"type": "null"}],
    })
}

/// The keys of an ask.
const KEYS: &[&str] = &[
    "prompt",
    "action",
    "detail",
    "options",
    "multi",
    "allow_custom",
    "schema",
    "questions",
    "default",
    "timeout",
    "editable",
    "quorum",
    "remind_before",
    "remind_every",
    "escalate_after",
    "escalate_to",
    "escalate_answerers",
];

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
        if self.schema.is_some() && kind != Kind::Form {
            return Err(format!("`schema` is for forms; a {kind} has none"));
        }
        if self.questions.is_some() && kind != Kind::Question {
            return Err(format!("`questions` are for questions; a {kind} asks one thing"));
        }
        let form = match (kind, self.schema, self.questions) {
            (Kind::Form, Some(schema), _) => Some(Form::from_schema(&schema).map_err(|e| e.to_string())?),
            (Kind::Form, None, _) => return Err("a form needs its `schema`".to_owned()),
            (_, _, Some(questions)) => {
                let extra =
                    [("options", !self.options.is_empty()), ("multi", self.multi), ("allow_custom", self.allow_custom)];
                if let Some((key, _)) = extra.iter().find(|(_, set)| *set) {
                    return Err(format!("`{key}` belongs to each of the `questions`"));
                }
                Some(Form::from_questions(questions).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
        // A prompt left out is refused here (blank ones when the ask is checked); several
        // questions need none.
        if self.prompt.is_empty() && form.as_ref().is_none_or(|_| kind != Kind::Question) {
            return Err("the prompt is empty".to_owned());
        }
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
        let nudges = Nudges {
            remind_before: wire_duration("remind_before", self.remind_before.as_ref())?,
            remind_every: wire_duration("remind_every", self.remind_every.as_ref())?,
            escalate_after: wire_duration("escalate_after", self.escalate_after.as_ref())?,
            escalate_to: self.escalate_to,
            escalate_answerers: self.escalate_answerers,
        };
        let descriptions = self
            .options
            .iter()
            .map(|o| match o {
                WireOption::Label(_) => String::new(),
                WireOption::Described { description, .. } => description.clone(),
            })
            .collect();
        Ok(Ask {
            kind: Some(kind),
            prompt: self.prompt,
            detail: self.detail,
            options: self.options.into_iter().map(|o| o.label().to_owned()).collect(),
            descriptions,
            multi: self.multi,
            allow_custom: self.allow_custom,
            form,
            default: self.default,
            timeout,
            answerers: None,
            editable: self.editable,
            quorum: self.quorum,
            nudges,
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
        assert_eq!(wire.options, [WireOption::from("a"), "b".into()]);
        assert_eq!(body, object(json!({"conversation": "console:local"})));
        let ask = wire.into_ask(Kind::Question).unwrap();
        assert_eq!((ask.prompt.as_str(), ask.timeout), ("Ship?", Timeout::Default));
    }

    #[test]
    fn options_are_labels_or_labels_with_a_line_about_them() {
        let mut body = object(json!({"prompt": "Which?", "options": ["dayjs", {"label": "luxon", "description":
                                     "time zones built in"}, {"label": "moment"}]}));
        let ask = AskWire::take(&mut body).unwrap().into_ask(Kind::Question).unwrap();
        assert_eq!(ask.options, ["dayjs", "luxon", "moment"]);
        assert_eq!(ask.descriptions, ["", "time zones built in", ""]);
        let stored = ask.validate().unwrap();
        assert_eq!(stored.descriptions, ["", "time zones built in", ""]);
    }

    #[test]
    fn reminders_and_escalation_take_seconds_or_durations() {
        let mut body = object(json!({"prompt": "Ship?", "remind_before": 300, "remind_every": "10m",
                                     "escalate_after": "1h", "escalate_to": "telegram:-1"}));
        let ask = AskWire::take(&mut body).unwrap().into_ask(Kind::Question).unwrap();
        assert_eq!((ask.nudges.remind_before, ask.nudges.remind_every), (Some(300_000), Some(600_000)));
        assert_eq!(ask.nudges.escalate_after, Some(3_600_000));
        for bad in [json!({"remind_every": 0}), json!({"remind_before": "soon"}), json!({"escalate_after": true})] {
            let mut body = object(json!({"prompt": "Ship?"}));
            body.extend(object(bad.clone()));
            assert!(AskWire::take(&mut body).unwrap().into_ask(Kind::Question).is_err(), "{bad}");
        }
        let early = AskWire::take(&mut object(json!({"prompt": "x", "remind_every": 30}))).unwrap();
        let refused = early.into_ask(Kind::Question).unwrap().validate().unwrap_err();
        assert!(refused.to_string().contains("at least a minute"), "{refused}");
        let nowhere = AskWire::take(&mut object(json!({"prompt": "x", "escalate_after": 60}))).unwrap();
        assert!(
            nowhere.into_ask(Kind::Question).unwrap().validate().unwrap_err().to_string().contains("need escalate_to")
        );
    }

    #[test]
    fn wrong_types_and_misplaced_keys_are_refused() {
        assert!(AskWire::take(&mut object(json!({"prompt": "x", "options": "a,b"}))).is_err());
        let unprompted = AskWire::take(&mut object(json!({"options": ["a"]}))).unwrap();
        assert!(unprompted.into_ask(Kind::Question).is_err(), "no prompt");
        let confirm = AskWire { prompt: "Sure?".into(), options: vec!["a".into()], ..AskWire::default() };
        for bad in [
            json!([1]),
            json!([{"label": "a", "note": "b"}]),
            json!([{"description": "b"}]),
            json!([{"label": "a", "description": 2}]),
        ] {
            let err = AskWire::take(&mut object(json!({"prompt": "x", "options": bad}))).unwrap_err();
            assert!(err.to_string().contains("an option is a label"), "{err}");
        }
        assert!(confirm.into_ask(Kind::Confirm).unwrap_err().contains("`options` is for questions"));
        let bad = AskWire { prompt: "x".into(), timeout: Some(json!(-1)), ..AskWire::default() };
        assert!(bad.into_ask(Kind::Question).is_err());
        let action = AskWire::take(&mut object(json!({"action": "rm -rf build/", "timeout": "never"}))).unwrap();
        assert_eq!(action.into_ask(Kind::Approval).unwrap().timeout, Timeout::Never);
    }
}
