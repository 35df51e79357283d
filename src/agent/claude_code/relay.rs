//! Claude Code's channel permission relay: `askgate mcp --channel` declares
//! `claude/channel/permission`, and each `notifications/claude/channel/permission_request`
//! Claude Code sends it ({request_id, tool_name, description, input_preview}) is posted to
//! `POST /hooks/claude-code/permission` as a [`PermissionRequest`]: an approval in the
//! configured conversation, whose outcome goes back as `notifications/claude/channel/permission`
//! {request_id, behavior}. The terminal's dialog stays open meanwhile and may answer first;
//! Claude Code tells a channel nothing then, so a `PostToolUse` or `Stop` hook from the same
//! project ([`Settled`]) retracts the card.

use serde::Deserialize;
use serde_json::Value;

use crate::question::{Ask, Outcome, Question, Timeout};

/// A permission prompt Claude Code relays, with where the relay runs.
#[derive(Clone, Debug, Deserialize)]
pub struct PermissionRequest {
    /// Claude Code's id of the prompt: five letters from a–z without `l`.
    pub request_id: String,
    /// The tool it would run.
    pub tool_name: String,
    /// What the tool call does, in Claude's words.
    #[serde(default)]
    pub description: String,
    /// The tool's input as JSON text, shortened by Claude Code.
    #[serde(default)]
    pub input_preview: String,
    /// The relay's working directory: the project Claude Code started it in.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The Claude Code session that started the relay (`CLAUDE_CODE_SESSION_ID` in its
    /// environment), when it said.
    #[serde(default)]
    pub session_id: Option<String>,
}

impl PermissionRequest {
    /// Reads a relayed prompt; the message says what is wrong with it.
    ///
    /// # Errors
    /// Not JSON of this shape, an id that is not Claude Code's, or no tool.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let mut request: Self =
            serde_json::from_slice(body).map_err(|e| format!("not a relayed permission request: {e}"))?;
        request.request_id = request.request_id.to_ascii_lowercase();
        let id_ok =
            request.request_id.len() == 5 && request.request_id.bytes().all(|b| b.is_ascii_lowercase() && b != b'l');
        if !id_ok {
            return Err(format!("`request_id` `{}` is not five letters a–z without l", request.request_id));
        }
        if request.tool_name.trim().is_empty() {
            return Err("`tool_name` is empty".to_owned());
        }
        Ok(request)
    }

    /// The approval a person answers: the tool and its command when the preview shows one,
    /// Claude's description, the input as Claude Code previewed it, and the project.
    pub fn approval(&self, wait_seconds: u64) -> Ask {
        let input: Option<serde_json::Map<String, Value>> = serde_json::from_str(&self.input_preview).ok();
        let command = input.as_ref().and_then(|i| i.get("command")).and_then(Value::as_str);
        let action = match command {
            Some(command) => format!("{}: {command}", self.tool_name),
            None => self.tool_name.clone(),
        };
        let mut detail = Vec::new();
        if !self.description.trim().is_empty() {
            detail.push(self.description.trim().to_owned());
        }
        if command.is_none() && !self.input_preview.trim().is_empty() {
            detail.push(crate::agent::hook::code(&self.input_preview));
        }
        let place = self.cwd.as_deref().map(|cwd| format!("in {cwd} · ")).unwrap_or_default();
        detail.push(format!("{place}Claude Code asks in its terminal too ({})", self.request_id));
        Ask::approval(action).detail(detail.join("\n")).timeout(Timeout::Seconds(wait_seconds))
    }

    /// What Claude Code is told: `allow` for an approval (once, always or as edited: the relay
    /// has no edited input), `deny` for a rejection; none when nobody decided (expired,
    /// cancelled), and the terminal's dialog decides.
    pub fn behavior(question: &Question) -> Option<&'static str> {
        match question.outcome {
            Some(Outcome::Answered { .. }) => Some("allow"),
            Some(Outcome::Declined { .. }) => Some("deny"),
            _ => None,
        }
    }

    /// Whether `settled` says this prompt was answered in the terminal: a `Stop` (the turn
    /// ended, so no prompt of it waits) or a `PostToolUse` of the same tool, in its project and,
    /// where both name one, its Claude Code session. (That both come from the same agent is
    /// for the caller to check: see [`Settled`].)
    ///
    /// A `PostToolUse` of another call of the same tool (an allowed `ls` beside a waiting
    /// `rm`) does not: where both show a command, the commands must be the same. Without a
    /// project on both sides nothing matches.
    pub fn settled_by(&self, settled: &Settled) -> bool {
        let same_session = match (&self.session_id, &settled.session_id) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        };
        let same_place =
            same_session && matches!((&self.cwd, &settled.cwd), (Some(mine), Some(theirs)) if mine == theirs);
        let Some((tool, command)) = &settled.tool else { return same_place };
        let mine: Option<String> = serde_json::from_str::<Value>(&self.input_preview)
            .ok()
            .and_then(|input| input.get("command")?.as_str().map(str::to_owned));
        let same_call = match (mine, command) {
            (Some(mine), Some(theirs)) => mine == *theirs,
            _ => true,
        };
        same_place && *tool == self.tool_name && same_call
    }
}

/// A hook that tells askgate a prompt was settled in Claude Code: `PostToolUse` (the tool ran,
/// so its prompt was answered) and `PostToolUseFailure` for one tool, `Stop` and `SessionEnd`
/// for every prompt of the project. It settles only prompts relayed with the same agent token
/// as it came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The project it came from.
    pub cwd: Option<String>,
    /// Its Claude Code session.
    pub session_id: Option<String>,
    /// The tool that ran, with its command when it has one; none: every tool.
    pub tool: Option<(String, Option<String>)>,
}

impl Settled {
    /// Reads such a hook; none for the others.
    ///
    /// Only the fields it needs are read: every hook's body passes here first, and a `Write`'s
    /// carries a whole file, which is skipped rather than built into a JSON tree.
    pub fn parse(body: &[u8]) -> Option<Self> {
        #[derive(Deserialize)]
        struct Input {
            command: Option<Value>,
        }
        #[derive(Deserialize)]
        struct Hook {
            hook_event_name: String,
            cwd: Option<String>,
            session_id: Option<String>,
            tool_name: Option<String>,
            tool_input: Option<Input>,
        }
        let hook: Hook = serde_json::from_slice(body).ok()?;
        let tool = match hook.hook_event_name.as_str() {
            "PostToolUse" | "PostToolUseFailure" => {
                let command = hook.tool_input.and_then(|i| i.command?.as_str().map(str::to_owned));
                Some((hook.tool_name?, command))
            }
            "Stop" | "SessionEnd" => None,
            _ => return None,
        };
        Some(Self { cwd: hook.cwd, session_id: hook.session_id.filter(|s| !s.is_empty()), tool })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cwd: Option<&str>) -> PermissionRequest {
        let body = serde_json::json!({"request_id": "ABCDE", "tool_name": "Bash", "description": "List files",
            "input_preview": "{\"command\":\"ls -la\"}", "cwd": cwd});
        PermissionRequest::parse(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_request_reads_as_claude_code_sends_it() {
        let r = request(Some("/home/dev/app"));
        assert_eq!(r.request_id, "abcde", "Claude Code lower-cases ids");
        let ask = r.approval(60);
        assert_eq!(ask.prompt, "Bash: ls -la");
        assert!(ask.detail.as_deref().unwrap().contains("List files"));
        for bad in [r#"{"request_id":"abcdl","tool_name":"Bash"}"#, r#"{"request_id":"abcde","tool_name":" "}"#, "[]"] {
            assert!(PermissionRequest::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tool_that_ran_or_a_stop_in_the_same_project_settles_it() {
        let r = request(Some("/home/dev/app"));
        let hook = |event: &str, tool: &str, cwd: &str| {
            let body = serde_json::json!({"hook_event_name": event, "tool_name": tool, "cwd": cwd});
            Settled::parse(body.to_string().as_bytes())
        };
        assert!(r.settled_by(&hook("PostToolUse", "Bash", "/home/dev/app").unwrap()));
        let other_call = serde_json::json!({"hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": "/home/dev/app",
            "tool_input": {"command": "rm -rf build"}});
        assert!(!r.settled_by(&Settled::parse(other_call.to_string().as_bytes()).unwrap()), "another command");
        assert!(!request(None).settled_by(&hook("Stop", "", "/home/dev/app").unwrap()), "no project: no match");
        assert!(r.settled_by(&hook("Stop", "", "/home/dev/app").unwrap()));
        assert!(!r.settled_by(&hook("PostToolUse", "Edit", "/home/dev/app").unwrap()), "another tool");
        assert!(!r.settled_by(&hook("Stop", "", "/home/dev/other").unwrap()), "another project");
        assert_eq!(hook("PreToolUse", "Bash", "/home/dev/app"), None, "not a settling hook");
        let mut in_session = r.clone();
        in_session.session_id = Some("ses-a".into());
        let stop = |session: &str| {
            let body = serde_json::json!({"hook_event_name": "Stop", "cwd": "/home/dev/app", "session_id": session});
            Settled::parse(body.to_string().as_bytes()).unwrap()
        };
        assert!(in_session.settled_by(&stop("ses-a")));
        assert!(!in_session.settled_by(&stop("ses-b")), "another session of the same project");
    }
}
