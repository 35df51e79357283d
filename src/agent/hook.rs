//! The hooks coding agents call before a tool runs (Claude Code's and Codex's share one
//! contract): the hook's JSON read as an approval in the configured conversation (or, for
//! Claude Code's `AskUserQuestion`, as its questions), and the outcome read as what the hook
//! answers ([`Answer`]); each agent writes that answer in its own shape.
//!
//! - [`forward`]: `askgate hook <agent>`, the command form, which hands the hook's JSON to a
//!   running askgate.
//! - [`wait`]: the ask, waited for until a person answers or the hook's time runs out.

pub mod forward;
pub mod wait;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::question::{Ask, Kind, Outcome, Question, Timeout, edited_action};

/// A hook's event, as far as askgate answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Before a tool runs: allow, deny or ask, and the input to run with.
    PreToolUse,
    /// When Claude Code is about to show its permission dialog.
    PermissionRequest,
}

impl Event {
    /// As the hook's JSON names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PermissionRequest => "PermissionRequest",
        }
    }
}

/// What askgate reads of a hook's input; the other fields the agent sends are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct HookInput {
    hook_event_name: String,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    cwd: Option<String>,
    /// The tool Claude Code is about to use.
    pub tool_name: String,
    #[serde(default)]
    tool_input: Map<String, Value>,
    #[serde(default)]
    permission_suggestions: Vec<Value>,
}

/// What the hook answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Run it (with this input instead, when a person edited it or answered its questions;
    /// with these permission rules added, for an "always").
    Allow { input: Option<Map<String, Value>>, permissions: Vec<Value> },
    /// Do not run it; the model reads why.
    Deny { reason: String },
    /// Nobody decided here: the agent asks in its own way, as it would without the hook.
    Ask { reason: String },
    /// No decision at all: the agent's own rules apply.
    Pass,
}

/// Longest `tool_input` rendering on a card (surfaces shorten further).
const MAX_SHOWN: usize = 3000;

impl HookInput {
    /// Reads the JSON of `agent`'s hook; the message says what is wrong with it (`also` adds
    /// the other hooks askgate reads, for the agent's own route).
    ///
    /// # Errors
    /// Not JSON, not an object of a hook askgate answers, or no `tool_name`.
    pub fn parse(body: &[u8], agent: &str, also: &str) -> Result<(Event, Self), String> {
        let input: Self = serde_json::from_slice(body).map_err(|e| format!("not a {agent} hook's JSON: {e}"))?;
        let event = match input.hook_event_name.as_str() {
            "PreToolUse" => Event::PreToolUse,
            "PermissionRequest" => Event::PermissionRequest,
            other => {
                return Err(format!(
                    "askgate answers {agent}'s PreToolUse and PermissionRequest hooks{also}, not `{other}`"
                ));
            }
        };
        if input.tool_name.trim().is_empty() {
            return Err("`tool_name` is empty".to_owned());
        }
        Ok((event, input))
    }

    /// The project it comes from (`cwd`), whose approvals an allow-always covers.
    pub fn project(&self) -> Option<&str> {
        self.cwd.as_deref().filter(|cwd| !cwd.is_empty())
    }

    /// Whether it is Claude's question to the person (`AskUserQuestion`), not a tool to allow.
    pub fn is_question(&self) -> bool {
        self.tool_name == "AskUserQuestion"
    }

    /// Where it comes from: `in /home/me/app · session 1a2b3c4d`.
    fn origin(&self) -> String {
        let session: String = self.session_id.chars().take(8).collect();
        match (&self.cwd, session.is_empty()) {
            (Some(cwd), false) => format!("in {cwd} · session {session}"),
            (Some(cwd), true) => format!("in {cwd}"),
            (None, false) => format!("session {session}"),
            (None, true) => String::new(),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.tool_input.get(key).and_then(Value::as_str)
    }

    /// The approval a person answers: the tool and what it would do (the command for `Bash`,
    /// the path and a diff-like preview for `Edit` and `Write`, the files and the patch for
    /// Codex's `apply_patch`), where, and for how long it waits. A `Bash` command may be edited before it is allowed.
    pub fn approval(&self, wait_seconds: u64) -> Ask {
        let tool = &self.tool_name;
        let (action, preview) = match (tool.as_str(), self.text("command"), self.text("file_path")) {
            ("Bash" | "PowerShell", Some(command), _) => {
                (format!("{tool}: {command}"), self.text("description").map(str::to_owned))
            }
            ("Edit", _, Some(path)) => {
                let old = self.text("old_string").unwrap_or_default();
                let new = self.text("new_string").unwrap_or_default();
                let diff: Vec<String> =
                    old.lines().map(|l| format!("- {l}")).chain(new.lines().map(|l| format!("+ {l}"))).collect();
                (format!("{tool}: {path}"), Some(code(&diff.join("\n"))))
            }
            ("Write", _, Some(path)) => {
                (format!("{tool}: {path}"), Some(code(self.text("content").unwrap_or_default())))
            }
            // Codex's edits: the patch as its `command`, each file named on a `*** … File:` line
            // with what is done to it, since an "always" is kept for the action as written:
            // allowing updates to a file never allows deleting it or moving it elsewhere.
            ("apply_patch", Some(patch), _) if !patch_changes(patch).is_empty() => {
                (format!("{tool}: {}", patch_changes(patch).join(", ")), Some(code(patch)))
            }
            _ => {
                let pretty = serde_json::to_string_pretty(&self.tool_input).unwrap_or_default();
                (tool.clone(), Some(code(&pretty)))
            }
        };
        let detail = [preview, Some(self.origin()).filter(|o| !o.is_empty())].into_iter().flatten().collect::<Vec<_>>();
        let mut ask = Ask::approval(action).timeout(Timeout::Seconds(wait_seconds));
        if !detail.is_empty() {
            ask = ask.detail(detail.join("\n"));
        }
        ask.editable(matches!(tool.as_str(), "Bash" | "PowerShell") && self.text("command").is_some())
    }

    /// `AskUserQuestion`'s questions as one ask (1–4 of them, answered together; one alone is
    /// an ordinary question), waiting at most `wait_seconds`.
    ///
    /// # Errors
    /// Its `questions` are missing or malformed.
    pub fn questions(&self, wait_seconds: u64) -> Result<Ask, String> {
        let questions =
            self.tool_input.get("questions").and_then(Value::as_array).ok_or("AskUserQuestion has no `questions`")?;
        if questions.is_empty() || questions.len() > 4 {
            return Err(format!("AskUserQuestion asks 1 to 4 questions, not {}", questions.len()));
        }
        let origin = self.origin();
        let ask = match questions.as_slice() {
            [one] => {
                let multi = one.get("multiSelect").and_then(Value::as_bool).unwrap_or(false);
                let header = one.get("header").and_then(Value::as_str).map(|h| format!("{h} · ")).unwrap_or_default();
                choices(one, multi, true, Some(format!("{header}{origin}"))).ok_or("the question has no `question`")?
            }
            many => {
                let ask = together(many, "multiSelect", true)?;
                if origin.is_empty() { ask } else { ask.detail(origin) }
            }
        };
        Ok(ask.timeout(Timeout::Seconds(wait_seconds)))
    }

    /// The rule an "Allow always" hands back to Claude Code: the command the card showed, as an
    /// exact allow rule in the project's local settings, and only where Claude Code offered to
    /// add an allow rule for this tool (Codex offers none). Claude Code's own suggestions are
    /// never passed through: for `rm -rf build` it offers widening the session (`setMode`
    /// `acceptEdits`, `addDirectories`), and a rule may be a prefix (`npm run:*`), a wildcard, the
    /// whole tool or the user's settings for every project: far more than the person allowed.
    /// Commands a rule would read as a pattern (a `*` anywhere) get askgate's grant alone.
    fn rules_offered(&self) -> Vec<Value> {
        let tool = self.tool_name.as_str();
        let offered = self.permission_suggestions.iter().any(|s| {
            s["type"] == "addRules"
                && s["behavior"] == "allow"
                && s["rules"].as_array().is_some_and(|rules| rules.iter().any(|r| r["toolName"] == tool))
        });
        match (tool, self.text("command")) {
            ("Bash" | "PowerShell", Some(command))
                if offered && !command.contains('*') && !command.trim().is_empty() =>
            {
                vec![json!({"type": "addRules", "rules": [{"toolName": tool, "ruleContent": command}],
                    "behavior": "allow", "destination": "localSettings"})]
            }
            _ => Vec::new(),
        }
    }

    /// The answer an approval's outcome gives.
    pub fn decided(&self, question: &Question) -> Answer {
        let who = question.answered_name.clone().or_else(|| question.answered_by.clone()).unwrap_or_default();
        match &question.outcome {
            Some(Outcome::Answered { value }) => {
                let input = edited_action(value).map(|action| {
                    let mut input = self.tool_input.clone();
                    let command = action.strip_prefix(&format!("{}: ", self.tool_name)).unwrap_or(action);
                    input.insert("command".into(), json!(command));
                    input
                });
                // "Always": askgate keeps its own grant; Claude Code adds the rule it offered
                // for this tool, and nothing broader (see `rules_offered`; Codex offers none).
                let permissions = match value.as_str() {
                    Some("always") => self.rules_offered(),
                    _ => Vec::new(),
                };
                Answer::Allow { input, permissions }
            }
            Some(Outcome::Declined { feedback }) => Answer::Deny {
                reason: match feedback {
                    Some(feedback) => format!("{who} rejected it: {feedback}"),
                    None => format!("{who} rejected it"),
                },
            },
            Some(Outcome::Expired { .. }) => Answer::Ask { reason: "nobody answered on askgate in time".to_owned() },
            Some(Outcome::Cancelled { reason }) => {
                Answer::Ask { reason: format!("the approval was cancelled ({reason})") }
            }
            None => Answer::Ask { reason: "the approval has no outcome".to_owned() },
        }
    }

    /// The answer `AskUserQuestion`'s answered question gives: its input with `answers`, each
    /// question's text to the chosen label (several joined with `, `), as Claude Code documents.
    pub fn answered(&self, question: &Question) -> Answer {
        let value = match &question.outcome {
            Some(Outcome::Answered { value }) => value,
            Some(Outcome::Declined { feedback }) => {
                let reason = feedback.clone().unwrap_or_else(|| "no reason given".to_owned());
                return Answer::Deny {
                    reason: format!("the person declined to answer \"{}\": {reason}", question.prompt),
                };
            }
            _ => return Answer::Ask { reason: "nobody answered on askgate in time".to_owned() },
        };
        // Keyed by each question's text as Claude Code sent it: the card shows it made safe.
        let asked: Vec<&str> = self
            .tool_input
            .get("questions")
            .and_then(Value::as_array)
            .map(|questions| {
                questions.iter().map(|q| q.get("question").and_then(Value::as_str).unwrap_or("")).collect()
            })
            .unwrap_or_default();
        let answered: Vec<(&str, Value)> = match &question.form {
            Some(form) => form
                .fields
                .iter()
                .zip(&asked)
                .filter_map(|(field, text)| Some((*text, value.get(&field.key)?.clone())))
                .collect(),
            None => asked.first().map(|text| vec![(*text, value.clone())]).unwrap_or_default(),
        };
        let mut answers = Map::new();
        for (text, value) in answered {
            // Several labels are joined with `, `, as Claude Code reads them.
            answers.insert(text.to_owned(), json!(crate::question::display_value(Kind::Question, &value)));
        }
        let mut input = self.tool_input.clone();
        input.insert("answers".into(), Value::Object(answers));
        Answer::Allow { input: Some(input), permissions: Vec::new() }
    }
}

/// Several questions as coding agents ask them (`{question, header, options: [{label,
/// description}]}`, with `multi` naming their multi-select key) as one ask answered together,
/// each keyed by its header (or `Question n`; a repeated header gets its number).
///
/// # Errors
/// A question without text, or one askgate cannot ask (named).
pub fn together(questions: &[Value], multi: &str, custom: bool) -> Result<Ask, String> {
    use crate::question::form::{SubOption, Subquestion};
    let mut subquestions: Vec<Subquestion> = Vec::with_capacity(questions.len());
    for (i, q) in questions.iter().enumerate() {
        let prompt =
            q.get("question").and_then(Value::as_str).ok_or(format!("question {} has no `question`", i + 1))?;
        let header = q.get("header").and_then(Value::as_str).map(str::trim).filter(|h| !h.is_empty());
        let mut header = crate::text::clip(
            header.unwrap_or(&format!("Question {}", i + 1)),
            crate::question::form::MAX_HEADER_LEN - 3,
            "…",
        );
        if subquestions.iter().any(|s| s.header.eq_ignore_ascii_case(&header)) {
            header = format!("{header} {}", i + 1);
        }
        let options = q.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let options = options
            .iter()
            .filter_map(|o| {
                let label = o.get("label").and_then(Value::as_str)?.to_owned();
                let about = o.get("description").and_then(Value::as_str).filter(|d| !d.is_empty());
                let description = about.map(|d| crate::text::clip(d, crate::question::MAX_DESCRIPTION_LEN, "…"));
                Some(SubOption::Described { label, description })
            })
            .collect();
        subquestions.push(Subquestion {
            header,
            prompt: prompt.to_owned(),
            options,
            multi: q.get(multi).and_then(Value::as_bool).unwrap_or(false),
            allow_custom: q.get("custom").and_then(Value::as_bool).unwrap_or(custom),
        });
    }
    Ask::questions("", subquestions).map_err(|e| e.to_string())
}

/// The answer of a question asked by a coding agent, by the agent's own question text, in its
/// order: one for a single question, each of several asked together.
pub fn by_question(question: &Question, value: &Value) -> Vec<(String, Value)> {
    match &question.form {
        Some(form) => form
            .fields
            .iter()
            .filter_map(|f| Some((f.description.clone().unwrap_or_else(|| f.key.clone()), value.get(&f.key)?.clone())))
            .collect(),
        None => vec![(question.prompt.clone(), value.clone())],
    }
}

/// A question whose options carry a description, as coding agents ask them (`{question,
/// options: [{label, description}]}`): each option with its description (shortened to what
/// askgate keeps: an agent's long line never fails the ask), and `footer` as its detail. None
/// without `question`.
pub fn choices(question: &Value, multi: bool, custom: bool, footer: Option<String>) -> Option<Ask> {
    let text = question.get("question")?.as_str()?;
    let options = question.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut ask = Ask::question(text).multi(multi).allow_custom(custom);
    for option in options {
        let Some(label) = option.get("label").and_then(Value::as_str) else { continue };
        let about = option.get("description").and_then(Value::as_str).unwrap_or_default();
        ask = ask.option(label, crate::text::clip(about, crate::question::MAX_DESCRIPTION_LEN, "…"));
    }
    Some(match footer.filter(|f| !f.is_empty()) {
        Some(footer) => ask.detail(footer),
        None => ask,
    })
}

/// `text` as a code block, shortened to what a card shows.
pub(crate) fn code(text: &str) -> String {
    let shown = crate::text::clip(text, MAX_SHOWN, "…");
    format!("```\n{shown}\n```")
}

/// What a Codex patch does, file by file: `add a.rs`, `update b.rs`, `update c.rs, move to
/// d.rs`, `delete e.rs`.
fn patch_changes(patch: &str) -> Vec<String> {
    let mut changes: Vec<String> = Vec::new();
    for line in patch.lines() {
        let verbs = [("*** Add File: ", "add"), ("*** Update File: ", "update"), ("*** Delete File: ", "delete")];
        if let Some((verb, file)) = verbs.iter().find_map(|(p, verb)| line.strip_prefix(p).map(|f| (verb, f))) {
            changes.push(format!("{verb} {file}"));
        } else if let (Some(to), Some(last)) = (line.strip_prefix("*** Move to: "), changes.last_mut()) {
            last.push_str(&format!(" → {to}"));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Status;

    fn answered(input: &HookInput, value: Value) -> Answer {
        let mut q = crate::question::test_question(input.questions(60).unwrap());
        (q.status, q.outcome) = (Status::Answered, Some(Outcome::Answered { value }));
        input.answered(&q)
    }

    #[test]
    fn claude_codes_questions_are_answered_under_the_texts_it_sent_not_as_the_card_showed_them() {
        let hook = |questions: Value| {
            let body = json!({"hook_event_name": "PreToolUse", "tool_name": "AskUserQuestion",
                              "tool_input": {"questions": questions}});
            HookInput::parse(body.to_string().as_bytes(), "Claude Code", "").unwrap().1
        };
        let one = hook(json!([{"question": "Which\r one?", "options": [{"label": "a"}, {"label": "b"}]}]));
        let Answer::Allow { input: Some(input), .. } = answered(&one, json!("b")) else { panic!() };
        assert_eq!(input["answers"], json!({"Which\r one?": "b"}));

        let two =
            hook(json!([{"question": "First\u{200B}?", "header": "One"}, {"question": "Second?", "header": "Two"}]));
        let Answer::Allow { input: Some(input), .. } = answered(&two, json!({"One": "x", "Two": "y"})) else {
            panic!()
        };
        assert_eq!(input["answers"], json!({"First\u{200B}?": "x", "Second?": "y"}));
    }

    #[test]
    fn a_patchs_card_names_what_it_does_to_each_file() {
        let patch = "*** Begin Patch\n*** Update File: a.rs\n@@\n-x\n+y\n*** Update File: b.rs\n*** Move to: c.rs\n\
                     *** Delete File: d.rs\n*** Add File: e.rs\n+z\n*** End Patch";
        let body =
            json!({"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": patch}});
        let input = HookInput::parse(body.to_string().as_bytes(), "Codex", "").unwrap().1;
        assert_eq!(
            input.approval(60).prompt,
            "apply_patch: update a.rs, update b.rs → c.rs, delete d.rs, add e.rs",
            "an \"always\" for updating a file must not read as deleting or moving it"
        );
    }
}
