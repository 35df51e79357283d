//! Claude Code, as a component: its hooks, its channel relay, and the routes both call.
//!
//! - Hooks: the JSON of a `PreToolUse` or `PermissionRequest` hook, as Claude Code sends it,
//!   becomes an approval in the configured conversation (an `AskUserQuestion` becomes its
//!   questions; [`crate::agent::hook`], shared with Codex), and the outcome goes back in the
//!   shape the hook documents ([`reply`]). The HTTP door is `POST /hooks/claude-code`; `askgate
//!   hook claude-code` is the command form.
//! - The channel relay: a permission prompt Claude Code relays to `askgate mcp --channel`
//!   ([`relay`], what askgate reads; [`channel`], the bridge's side of it on stdin and stdout).
//! - [`routes()`]: `/hooks/claude-code` and the relay's two routes, which the HTTP surface serves
//!   behind an agent token.
//!
//! Its config section is `[claude_code]` ([`crate::config::ClaudeCodeConfig`]).

pub mod channel;
pub mod relay;
mod routes;

pub use routes::routes;

use serde_json::{Value, json};

use crate::agent::hook::{Answer, Event};

/// The hook's reply body for `answer`: `{}` (no decision) for [`Answer::Pass`], and for a
/// `PermissionRequest` also for [`Answer::Ask`] (Claude Code then shows its dialog).
pub fn reply(event: Event, answer: &Answer) -> Value {
    let mut output = match (event, answer) {
        (_, Answer::Pass) | (Event::PermissionRequest, Answer::Ask { .. }) => return json!({}),
        (Event::PreToolUse, Answer::Allow { input, .. }) => {
            let mut output = json!({"permissionDecision": "allow", "permissionDecisionReason": "allowed on askgate"});
            if let Some(input) = input {
                output["updatedInput"] = Value::Object(input.clone());
            }
            output
        }
        (Event::PreToolUse, Answer::Deny { reason }) => {
            json!({"permissionDecision": "deny", "permissionDecisionReason": reason})
        }
        (Event::PreToolUse, Answer::Ask { reason }) => {
            json!({"permissionDecision": "ask", "permissionDecisionReason": reason})
        }
        (Event::PermissionRequest, Answer::Allow { input, permissions }) => {
            let mut decision = json!({"behavior": "allow"});
            if let Some(input) = input {
                decision["updatedInput"] = Value::Object(input.clone());
            }
            if !permissions.is_empty() {
                decision["updatedPermissions"] = Value::Array(permissions.clone());
            }
            json!({"decision": decision})
        }
        (Event::PermissionRequest, Answer::Deny { reason }) => {
            json!({"decision": {"behavior": "deny", "message": reason}})
        }
    };
    output["hookEventName"] = json!(event.name());
    json!({"hookSpecificOutput": output})
}
