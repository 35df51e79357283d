//! The tools: their names, argument and result schemas, how a call's arguments become an ask,
//! and how a question's outcome becomes a result.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, ToolAnnotations};
use serde_json::{Map, Value, json};

use super::{MAX_WAIT, allowed_conversation, no_unknown};
use crate::config::McpConfig;
use crate::question::AskWire;
use crate::question::{Answerers, Ask, Conversation, Kind, Outcome, Question, QuestionId, Surface};

/// A tool askgate offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tool {
    AskUser,
    Confirm,
    RequestApproval,
    Notify,
    GetOutcome,
}

const ALL: [Tool; 5] = [Tool::AskUser, Tool::Confirm, Tool::RequestApproval, Tool::Notify, Tool::GetOutcome];

impl Tool {
    pub(super) fn named(name: &str) -> Option<Self> {
        ALL.into_iter().find(|t| t.name() == name)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::AskUser => "ask_user",
            Self::Confirm => "confirm",
            Self::RequestApproval => "request_approval",
            Self::Notify => "notify",
            Self::GetOutcome => "get_outcome",
        }
    }

    /// Its arguments, for a message about one it does not take.
    pub(super) fn arguments(self) -> String {
        let schema = self.input_schema();
        let keys: Vec<&String> = schema["properties"].as_object().map(|p| p.keys().collect()).unwrap_or_default();
        keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
    }

    /// Its title, for people reading a client's list of tools.
    fn title(self) -> &'static str {
        match self {
            Self::AskUser => "Ask a person",
            Self::Confirm => "Ask a person to confirm",
            Self::RequestApproval => "Ask a person to approve an action",
            Self::Notify => "Message a person",
            Self::GetOutcome => "Get the outcome of a question",
        }
    }

    /// What calling it does. The asks post a card to people (no read-only tool) but change
    /// nothing else, and the same call again is the same question (idempotent); an approval's
    /// "always" is a standing grant, which is why it is not idempotent. `get_outcome` only reads.
    fn annotations(self) -> ToolAnnotations {
        let hints = ToolAnnotations::with_title(self.title()).destructive(false);
        match self {
            Self::AskUser | Self::Confirm => hints.read_only(false).idempotent(true).open_world(true),
            Self::RequestApproval => hints.read_only(false).idempotent(false).open_world(true),
            Self::Notify => hints.read_only(false).idempotent(false).open_world(true),
            Self::GetOutcome => hints.read_only(true).idempotent(true).open_world(false),
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::AskUser => {
                "Ask a person a question and wait for the answer. With `options` they pick one (or several with \
                 `multi`); without, they type an answer. They may decline with feedback. On timeout the `default` \
                 applies (status `expired`)."
            }
            Self::Confirm => {
                "Ask a person a yes/no question and wait. On timeout the `default` applies (false unless given), \
                 so the result always has a boolean `value`."
            }
            Self::RequestApproval => {
                "Ask a person to approve an action before you take it. `decision` is `once`, `always` (a standing \
                 grant: the same action in the same conversation is approved without asking again), `granted` (an \
                 earlier `always` covered it), `edited` (with `editable`: run `action`, as the person edited it, \
                 instead) or `rejected` (with the person's `feedback`). Act only on once, always, granted or \
                 edited."
            }
            Self::Notify => "Send a message to the person; no answer is awaited.",
            Self::GetOutcome => {
                "The outcome of a question asked with `wait: false`; waits up to `wait` seconds (at most 60) while \
                 it is pending."
            }
        }
    }

    fn input_schema(self) -> Value {
        let conversation = json!({"type": "string", "description": format!("where to ask, e.g. {}; default: the configured conversation (others must be allowed by the operator)", crate::question::EXAMPLE_USER)});
        let wait = json!({"type": "boolean", "default": true, "description": "false: return {id, status: pending} at once and poll with get_outcome"});
        let timeout = json!({"oneOf": [{"type": "integer", "minimum": 1}, {"const": "never"}], "description": "seconds until it expires, or \"never\"; default: the gateway's"});
        let detail = json!({"type": "string", "description": "more context, shown under the prompt"});
        let (properties, required) = match self {
            Self::AskUser => (
                json!({
                    "prompt": {"type": "string", "description": "the question (with `questions` or `schema`: what they are about)"},
                    "options": {"type": "array", "maxItems": 25, "description": "choices to pick from, each a label or a label with one line about it; none: free text",
                                "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}, "required": ["label"], "additionalProperties": false}]}},
                    "multi": {"type": "boolean", "description": "pick several options"},
                    "allow_custom": {"type": "boolean", "description": "a typed answer besides the options"},
                    "questions": {"type": "array", "minItems": 1, "maxItems": 4, "description": "1 to 4 questions asked together, answered as one object keyed by their headers (instead of options)",
                                  "items": {"type": "object", "properties": {
                                      "header": {"type": "string", "maxLength": 30, "description": "a short unique name: its key in the answer"},
                                      "prompt": {"type": "string", "description": "the question"},
                                      "options": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}, "required": ["label"]}]}},
                                      "multi": {"type": "boolean"}, "allow_custom": {"type": "boolean"}},
                                    "required": ["header", "prompt"], "additionalProperties": false}},
                    "schema": {"type": "object", "description": "a form: MCP elicitation's flat JSON Schema (strings, numbers, integers, booleans, enums, with required); the answer is one object"},
                    "detail": detail, "default": {"description": "applied on timeout: an option, a list with multi, an object for a form or questions"},
                    "timeout": timeout, "conversation": conversation, "wait": wait,
                }),
                json!(["prompt"]),
            ),
            Self::Confirm => (
                json!({
                    "prompt": {"type": "string", "description": "the yes/no question"},
                    "detail": detail, "default": {"type": "boolean", "description": "applied on timeout (default false)"},
                    "timeout": timeout, "conversation": conversation, "wait": wait,
                }),
                json!(["prompt"]),
            ),
            Self::RequestApproval => (
                json!({
                    "action": {"type": "string", "description": "what you are about to do, e.g. the command"},
                    "editable": {"type": "boolean", "default": false, "description": "the person may edit the action before allowing it (decision `edited`)"},
                    "quorum": {"type": "integer", "minimum": 1, "maximum": crate::question::MAX_QUORUM, "default": 1, "description": "how many distinct people must approve; one rejection ends it"},
                    "detail": detail, "timeout": timeout, "conversation": conversation, "wait": wait,
                }),
                json!(["action"]),
            ),
            Self::Notify => (
                json!({"message": {"type": "string", "description": "the text to send"}, "conversation": conversation}),
                json!(["message"]),
            ),
            Self::GetOutcome => (
                json!({
                    "id": {"type": "string", "description": "the question's id, from a call with wait: false"},
                    "wait": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT, "default": 0, "description": "seconds to wait while it is pending"},
                }),
                json!(["id"]),
            ),
        };
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    fn output_schema(self) -> Value {
        let status = json!({"type": "string", "enum": ["pending", "answered", "declined", "expired", "cancelled"]});
        let common = |mut extra: Map<String, Value>| {
            extra.insert("id".into(), json!({"type": "string"}));
            extra.insert("status".into(), status.clone());
            extra.insert("answered_by".into(), json!({"type": ["string", "null"]}));
            extra.insert("answered_name".into(), json!({"type": ["string", "null"]}));
            json!({"type": "object", "properties": extra, "required": ["id", "status"]})
        };
        let object = |value: Value| match value {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let asked = |kinds: &[&str]| {
            json!({
                "kind": {"type": "string", "enum": kinds},
                "value": {"description": "the answer: text, a list with multi, an object for a form or several questions, a boolean for a confirm; the default on timeout"},
                "feedback": {"type": ["string", "null"], "description": "why they declined"},
                "timed_out": {"type": "boolean"},
                "reason": {"type": ["string", "null"], "description": "why it was cancelled"},
            })
        };
        let decided = json!({
            "decision": {"type": ["string", "null"], "enum": ["once", "always", "granted", "edited", "rejected", null]},
            "action": {"type": ["string", "null"], "description": "with `edited`: the action to take instead"},
            "feedback": {"type": ["string", "null"]},
        });
        match self {
            // What `ask_user` asks: a question (one, or several together) or a form.
            Self::AskUser => common(object(asked(&["question", "form"]))),
            // Any question a client asked, of every kind: an approval's also has its decision.
            Self::GetOutcome => {
                let mut fields = object(asked(&["question", "form", "confirm", "approval"]));
                fields.extend(object(decided));
                common(fields)
            }
            Self::Confirm => common(object(json!({
                "value": {"type": ["boolean", "null"], "description": "their answer, or the default on timeout; null while pending"},
                "timed_out": {"type": "boolean"},
            }))),
            Self::RequestApproval => common(object(decided)),
            Self::Notify => json!({
                "type": "object",
                "properties": {"sent": {"type": "boolean"}, "conversation": {"type": "string"}},
                "required": ["sent", "conversation"],
            }),
        }
    }
}

/// The tools, as `tools/list` shows them.
pub(super) fn list() -> Vec<rmcp::model::Tool> {
    ALL.into_iter()
        .map(|tool| {
            let object = |value: Value| match value {
                Value::Object(map) => Arc::new(map),
                _ => Arc::new(Map::new()),
            };
            rmcp::model::Tool::new(tool.name(), tool.description(), object(tool.input_schema()))
                .with_title(tool.title())
                .with_annotations(tool.annotations())
                .with_raw_output_schema(object(tool.output_schema()))
        })
        .collect()
}

/// A call, its arguments checked.
pub(super) enum Call {
    Ask { tool: Tool, conversation: Conversation, ask: Box<Ask>, wait: bool },
    Notify { conversation: Conversation, message: String },
    Outcome { id: QuestionId, wait: Duration },
}

impl Call {
    /// Reads a call's arguments; the message names the argument at fault.
    pub(super) fn parse(tool: Tool, mut arguments: Map<String, Value>, config: &McpConfig) -> Result<Self, String> {
        let call = match tool {
            Tool::AskUser | Tool::Confirm | Tool::RequestApproval => {
                let conversation = allowed_conversation(arguments.remove("conversation"), config)?;
                let wait = match arguments.remove("wait") {
                    None => true,
                    Some(Value::Bool(wait)) => wait,
                    Some(_) => return Err("`wait` must be true or false".to_owned()),
                };
                // Each tool takes its own keys of an ask: an approval's `action`, a question's
                // `prompt`.
                let (kind, misplaced) = match tool {
                    // `ask_user` with a `schema` is a form.
                    Tool::AskUser if arguments.contains_key("schema") => (Kind::Form, "action"),
                    Tool::AskUser => (Kind::Question, "action"),
                    Tool::Confirm => (Kind::Confirm, "action"),
                    _ => (Kind::Approval, "prompt"),
                };
                if arguments.contains_key(misplaced) {
                    return Err(format!(
                        "`{misplaced}` is not an argument of {}; it takes {}",
                        tool.name(),
                        tool.arguments()
                    ));
                }
                if tool == Tool::RequestApproval && arguments.contains_key("default") {
                    return Err(
                        "`default` is not an argument of request_approval: an approval that expires is rejected"
                            .to_owned(),
                    );
                }
                let wire = AskWire::take(&mut arguments).map_err(|e| format!("invalid arguments: {e}"))?;
                no_unknown(&arguments, tool)?;
                let mut ask = wire.into_ask(kind)?;
                if kind == Kind::Confirm && ask.default.is_none() {
                    // A confirm always ends with a boolean: no answer means no.
                    ask.default = Some(Value::Bool(false));
                }
                ask.answerers = config.answerers.clone().map(|users| Answerers::Users { users });
                Self::Ask { tool, conversation, ask: Box::new(ask), wait }
            }
            Tool::Notify => {
                let conversation = allowed_conversation(arguments.remove("conversation"), config)?;
                let message = match arguments.remove("message") {
                    Some(Value::String(m)) if !m.trim().is_empty() => m,
                    Some(Value::String(_)) => return Err("`message` is empty".to_owned()),
                    Some(_) => return Err("`message` must be a string".to_owned()),
                    None => return Err("`message` is required".to_owned()),
                };
                no_unknown(&arguments, tool)?;
                Self::Notify { conversation, message }
            }
            Tool::GetOutcome => {
                let id = match arguments.remove("id") {
                    Some(Value::String(id)) => {
                        id.parse::<QuestionId>().map_err(|_| format!("`id`: `{id}` is not a question id"))?
                    }
                    Some(_) => return Err("`id` must be a string".to_owned()),
                    None => return Err("`id` is required".to_owned()),
                };
                let wait = match arguments.remove("wait") {
                    None => 0,
                    Some(Value::Number(n)) => n
                        .as_u64()
                        .filter(|w| *w <= MAX_WAIT)
                        .ok_or_else(|| format!("`wait` must be a whole number of seconds from 0 to {MAX_WAIT}"))?,
                    Some(_) => return Err(format!("`wait` must be a whole number of seconds from 0 to {MAX_WAIT}")),
                };
                no_unknown(&arguments, tool)?;
                Self::Outcome { id, wait: Duration::from_secs(wait) }
            }
        };
        Ok(call)
    }
}

/// A question's outcome as `tool` returns it: structured, with a line for people.
pub(super) fn outcome(tool: Tool, question: &Question) -> CallToolResult {
    let mut result = json!({
        "id": question.id,
        "status": question.status,
        "answered_by": question.answered_by,
        "answered_name": question.answered_name,
    });
    let fields = result.as_object_mut().expect("an object");
    let (value, feedback, timed_out, reason) = match &question.outcome {
        None => (Value::Null, None, false, None),
        Some(Outcome::Answered { value }) => (value.clone(), None, false, None),
        Some(Outcome::Declined { feedback }) => (Value::Null, feedback.clone(), false, None),
        Some(Outcome::Expired { value }) => (value.clone().unwrap_or(Value::Null), None, true, None),
        Some(Outcome::Cancelled { reason }) => (Value::Null, None, false, Some(reason.clone())),
    };
    let asked = |fields: &mut Map<String, Value>| {
        fields.insert("kind".into(), json!(question.kind));
        fields.insert("value".into(), value.clone());
        fields.insert("feedback".into(), json!(feedback));
        fields.insert("timed_out".into(), json!(timed_out));
        fields.insert("reason".into(), json!(reason));
    };
    let decided = |fields: &mut Map<String, Value>| {
        let edited = crate::question::edited_action(&value).map(str::to_owned);
        fields.insert("decision".into(), json!(decision(question, edited.is_some())));
        fields.insert("action".into(), json!(edited));
        fields.insert("feedback".into(), json!(feedback));
    };
    match tool {
        Tool::AskUser | Tool::Notify => asked(fields),
        // Every field its kind has, under the one schema `get_outcome` declares.
        Tool::GetOutcome => {
            asked(fields);
            if question.kind == Kind::Approval {
                decided(fields);
            }
        }
        Tool::Confirm => {
            fields.insert("value".into(), value.clone());
            fields.insert("timed_out".into(), json!(timed_out));
        }
        Tool::RequestApproval => decided(fields),
    }
    let line = if question.is_pending() {
        format!("pending: question {} waits for an answer; call get_outcome with its id", question.id)
    } else {
        question.outcome_line_in(crate::question::Locale::En)
    };
    let mut result = CallToolResult::structured(result);
    result.content = vec![ContentBlock::text(line)];
    result
}

/// An approval's decision: none while it is pending.
fn decision(question: &Question, edited: bool) -> Option<&'static str> {
    let value = match &question.outcome {
        None => return None,
        Some(Outcome::Answered { value }) => value,
        Some(_) => return Some("rejected"),
    };
    Some(match value.as_str() {
        _ if edited => "edited",
        Some("always") if question.answered_via == Some(Surface::GATEWAY) => "granted",
        Some("always") => "always",
        _ => "once",
    })
}

/// The result of `notify`.
pub(super) fn notified(conversation: &Conversation) -> CallToolResult {
    let mut result = CallToolResult::structured(json!({"sent": true, "conversation": conversation}));
    result.content = vec![ContentBlock::text(format!("sent to {conversation}"))];
    result
}
