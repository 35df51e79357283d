//! What the hooks of coding agents share (`[claude_code]`, `[codex]`): where they ask a person,
//! who answers, which tools ask, and how long the agent waits for its hook.

use std::time::Duration;

use crate::question::{Conversation, EXAMPLE_USER, UserRef};
use crate::text::glob;

use super::raw::RawHooks;

/// A coding agent's hook settings: the same keys under `[claude_code]` and `[codex]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookRules {
    /// Where the approvals go.
    pub conversation: Conversation,
    /// Who may answer; none: the conversation's channel rules, as for API questions.
    pub answerers: Option<Vec<UserRef>>,
    /// Tool-name patterns (`*` any run of characters) whose calls ask a person; empty: all.
    pub ask: Vec<String>,
    /// Tool-name patterns answered `allow` without asking anyone.
    pub allow: Vec<String>,
    /// The `timeout` of the hook in the agent's settings: askgate answers a little before it
    /// (Claude Code then asks in the terminal) and retracts the card.
    pub hook_timeout: Duration,
}

/// The agents' own timeout of a hook when their settings give none (Claude Code's and Codex's
/// are both 600 seconds).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// What a hook does with a tool's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolRule {
    /// Allowed without asking anyone.
    Allow,
    /// A person decides.
    Ask,
    /// No decision: the agent's own rules apply.
    Pass,
}

impl HookRules {
    /// What a call of `tool` gets: `allow` patterns first, then `ask` ones.
    pub fn rule(&self, tool: &str) -> ToolRule {
        if self.allow.iter().any(|p| glob(p, tool)) {
            ToolRule::Allow
        } else if self.ask.is_empty() || self.ask.iter().any(|p| glob(p, tool)) {
            ToolRule::Ask
        } else {
            ToolRule::Pass
        }
    }
}

/// Reads the section `section` (`claude_code`, `codex`), naming `agent` in its errors; `example`
/// is a tool name to suggest.
pub(super) fn rules(section: &str, agent: &str, example: &str, raw: RawHooks) -> Result<HookRules, (String, String)> {
    let Some(text) = raw.conversation.as_deref() else {
        return Err((
            format!("{section}.conversation"),
            format!("is required: where {agent}'s approvals go, e.g. \"{EXAMPLE_USER}\""),
        ));
    };
    let conversation = Conversation::parse(text).map_err(|e| {
        (format!("{section}.conversation"), format!("`{text}` is not a conversation like {EXAMPLE_USER}: {e}"))
    })?;
    let answerers = super::mcp::answerers(&format!("{section}.answerers"), raw.answerers)?;
    let hook_timeout = raw.hook_timeout.unwrap_or(HOOK_TIMEOUT);
    if hook_timeout < Duration::from_secs(5) {
        return Err((format!("{section}.hook_timeout"), "must be at least 5s: a person needs time to answer".into()));
    }
    for (key, patterns) in [("ask", &raw.ask), ("allow", &raw.allow)] {
        if let Some(i) = patterns.iter().position(|p| p.trim().is_empty()) {
            return Err((
                format!("{section}.{key}[{i}]"),
                format!("is empty: name a tool, like \"{example}\" or \"mcp__*\""),
            ));
        }
    }
    Ok(HookRules { conversation, answerers, ask: raw.ask, allow: raw.allow, hook_timeout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(ask: &[&str], allow: &[&str]) -> HookRules {
        HookRules {
            conversation: Conversation::parse("console:local").unwrap(),
            answerers: None,
            ask: ask.iter().map(|s| (*s).to_owned()).collect(),
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            hook_timeout: HOOK_TIMEOUT,
        }
    }

    #[test]
    fn allow_comes_first_then_ask_and_the_rest_is_the_agents() {
        let rules_ = rules(&["Bash", "mcp__*"], &["Read", "mcp__docs__*"]);
        assert_eq!(rules_.rule("Read"), ToolRule::Allow);
        assert_eq!(rules_.rule("mcp__docs__search"), ToolRule::Allow);
        assert_eq!(rules_.rule("mcp__files__delete"), ToolRule::Ask);
        assert_eq!(rules_.rule("Bash"), ToolRule::Ask);
        assert_eq!(rules_.rule("Edit"), ToolRule::Pass);
        assert_eq!(rules(&[], &["Read"]).rule("Edit"), ToolRule::Ask, "no `ask`: every tool asks");
    }
}
