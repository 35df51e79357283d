//! `[claude_code]`: where Claude Code's hooks (`POST /hooks/claude-code`, `askgate hook
//! claude-code`) ask a person, and which tools ask.

use std::time::Duration;

use super::raw::RawClaudeCode;
use crate::question::{Conversation, EXAMPLE_USER, UserRef};
use crate::text::glob;

/// The hooks' settings; the hook endpoint answers when the file has a `[claude_code]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeCodeConfig {
    /// Where the approvals go.
    pub conversation: Conversation,
    /// Who may answer; none: the conversation's channel rules, as for API questions.
    pub answerers: Option<Vec<UserRef>>,
    /// Tool-name patterns (`*` any run of characters) whose calls ask a person; empty: all.
    pub ask: Vec<String>,
    /// Tool-name patterns answered `allow` without asking anyone.
    pub allow: Vec<String>,
    /// The `timeout` of the hook in Claude Code's settings: askgate answers `ask` (Claude Code
    /// then asks in the terminal) and retracts the card a little before it.
    pub hook_timeout: Duration,
    /// A person's plain messages in the conversation (those that answer and start nothing) go
    /// into the Claude Code session of `askgate mcp --channel`.
    pub messages: bool,
}

/// Claude Code's own timeout of a hook when its settings give none.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// What a hook does with a tool's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolRule {
    /// Allowed without asking anyone.
    Allow,
    /// A person decides.
    Ask,
    /// No decision: Claude Code's own rules apply.
    Pass,
}

impl ClaudeCodeConfig {
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

pub(super) fn claude_code(raw: Option<RawClaudeCode>) -> Result<Option<ClaudeCodeConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let Some(text) = raw.conversation.as_deref() else {
        return Err((
            "claude_code.conversation".into(),
            format!("is required: where Claude Code's approvals go, e.g. \"{EXAMPLE_USER}\""),
        ));
    };
    let conversation = Conversation::parse(text).map_err(|e| {
        ("claude_code.conversation".to_owned(), format!("`{text}` is not a conversation like {EXAMPLE_USER}: {e}"))
    })?;
    let answerers = super::mcp::answerers("claude_code.answerers", raw.answerers)?;
    let hook_timeout = raw.hook_timeout.unwrap_or(HOOK_TIMEOUT);
    if hook_timeout < Duration::from_secs(5) {
        return Err(("claude_code.hook_timeout".into(), "must be at least 5s: a person needs time to answer".into()));
    }
    for (key, patterns) in [("ask", &raw.ask), ("allow", &raw.allow)] {
        if let Some(i) = patterns.iter().position(|p| p.trim().is_empty()) {
            return Err((
                format!("claude_code.{key}[{i}]"),
                "is empty: name a tool, like \"Bash\" or \"mcp__*\"".into(),
            ));
        }
    }
    let (ask, allow, messages) = (raw.ask, raw.allow, raw.messages);
    Ok(Some(ClaudeCodeConfig { conversation, answerers, ask, allow, hook_timeout, messages }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(ask: &[&str], allow: &[&str]) -> ClaudeCodeConfig {
        ClaudeCodeConfig {
            conversation: Conversation::parse("console:local").unwrap(),
            answerers: None,
            ask: ask.iter().map(|s| (*s).to_owned()).collect(),
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            hook_timeout: HOOK_TIMEOUT,
            messages: false,
        }
    }

    #[test]
    fn allow_comes_first_then_ask_and_the_rest_is_claude_codes() {
        let rules = config(&["Bash", "mcp__*"], &["Read", "mcp__docs__*"]);
        assert_eq!(rules.rule("Read"), ToolRule::Allow);
        assert_eq!(rules.rule("mcp__docs__search"), ToolRule::Allow);
        assert_eq!(rules.rule("mcp__files__delete"), ToolRule::Ask);
        assert_eq!(rules.rule("Bash"), ToolRule::Ask);
        assert_eq!(rules.rule("Edit"), ToolRule::Pass);
        assert_eq!(config(&[], &["Read"]).rule("Edit"), ToolRule::Ask, "no `ask`: every tool asks");
    }
}
