//! Codex, as a component: its `PreToolUse` and `PermissionRequest` hooks.
//!
//! Codex runs command hooks only (`[hooks]` in its `config.toml`, or `hooks.json`): the hook is
//! `askgate hook codex`, which hands the JSON Codex pipes in to `POST /hooks/codex` ([`routes()`],
//! behind an agent token). The input is Claude Code's contract (`tool_name`, `tool_input`, `cwd`,
//! `session_id`; a shell command is `Bash` with `tool_input.command`), so it is read by
//! [`crate::agent::hook`], and the outcome is written back in Codex's shapes ([`reply`]), which
//! differ from Claude Code's where Codex refuses a field:
//!
//! - `PreToolUse` has no `allow` of its own (only with `updatedInput`) and no `ask`: an allowed
//!   call gets no decision and runs as Codex's own rules say, an edited one `allow` with the
//!   edited command, and a call nobody answered in time is denied (Codex would not ask anyone).
//! - `PermissionRequest` takes `allow` or `deny` and fails closed on `updatedInput` and
//!   `updatedPermissions`: a person cannot edit the command there, and an "allow always" is
//!   askgate's own grant (Codex has no rule a hook may add). Unanswered, Codex shows its own
//!   approval prompt.
//!
//! Its config section is `[codex]` ([`crate::config::CodexConfig`]).

mod routes;

pub use routes::routes;

use serde_json::{Value, json};

use crate::agent::hook::{Answer, Event};

/// The hook's output for `answer`, in the shape Codex reads for `event`: `{}` is no decision.
pub fn reply(event: Event, answer: &Answer) -> Value {
    let mut output = match (event, answer) {
        (_, Answer::Pass)
        | (Event::PreToolUse, Answer::Allow { input: None, .. })
        | (Event::PermissionRequest, Answer::Ask { .. }) => return json!({}),
        (Event::PreToolUse, Answer::Allow { input: Some(input), .. }) => {
            json!({"permissionDecision": "allow", "updatedInput": input})
        }
        (Event::PreToolUse, Answer::Deny { reason }) => {
            json!({"permissionDecision": "deny", "permissionDecisionReason": reason})
        }
        (Event::PreToolUse, Answer::Ask { reason }) => {
            json!({"permissionDecision": "deny", "permissionDecisionReason": format!("{reason}, so it did not run")})
        }
        (Event::PermissionRequest, Answer::Allow { .. }) => json!({"decision": {"behavior": "allow"}}),
        (Event::PermissionRequest, Answer::Deny { reason }) => {
            json!({"decision": {"behavior": "deny", "message": reason}})
        }
    };
    output["hookEventName"] = json!(event.name());
    json!({"hookSpecificOutput": output})
}

/// Whether a hook whose body is `body` must block the call when askgate cannot answer it: a
/// `PreToolUse`, where no answer lets Codex run the call under its own rules, which may ask
/// nobody (`codex exec`). A `PermissionRequest` without an answer gets Codex's own prompt.
pub fn fails_closed(body: &[u8]) -> bool {
    let event = serde_json::from_slice::<Value>(body).ok().and_then(|v| v.get("hook_event_name").cloned());
    event.is_none_or(|name| name != "PermissionRequest")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(input: Option<Value>) -> Answer {
        Answer::Allow { input: input.and_then(|i| i.as_object().cloned()), permissions: vec![json!({"rule": "x"})] }
    }

    #[test]
    fn codex_gets_only_the_fields_its_hooks_accept() {
        // PreToolUse: no bare allow (Codex refuses it), an edit as allow with the new input.
        assert_eq!(reply(Event::PreToolUse, &allow(None)), json!({}));
        let edited = reply(Event::PreToolUse, &allow(Some(json!({"command": "ls"}))));
        assert_eq!(edited["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(edited["hookSpecificOutput"]["updatedInput"], json!({"command": "ls"}));
        // Nobody answered: denied, with a reason (Codex refuses a deny without one, and has no ask).
        let unanswered = reply(Event::PreToolUse, &Answer::Ask { reason: "nobody answered".into() });
        assert_eq!(unanswered["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(unanswered["hookSpecificOutput"]["permissionDecisionReason"], "nobody answered, so it did not run");

        // PermissionRequest: never updatedInput or updatedPermissions (Codex fails closed on them).
        let allowed = reply(Event::PermissionRequest, &allow(Some(json!({"command": "ls"}))));
        assert_eq!(
            allowed,
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
        );
        let denied = reply(Event::PermissionRequest, &Answer::Deny { reason: "not today".into() });
        assert_eq!(denied["hookSpecificOutput"]["decision"], json!({"behavior": "deny", "message": "not today"}));
        assert_eq!(reply(Event::PermissionRequest, &Answer::Ask { reason: "later".into() }), json!({}));
    }
}
