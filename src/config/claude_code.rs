//! `[claude_code]`: where Claude Code's hooks (`POST /hooks/claude-code`, `askgate hook
//! claude-code`) ask a person, which tools ask, and whether its channel hears plain messages.

use super::hooks::{HookRules, rules};
use super::raw::{RawClaudeCode, RawHooks};

/// The hooks' settings; the hook endpoint answers when the file has a `[claude_code]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeCodeConfig {
    /// Where its hooks ask, who answers, which tools ask, how long the hook waits.
    pub hooks: HookRules,
    /// A person's plain messages in the conversation (those that answer and start nothing) go
    /// into the Claude Code session of `askgate mcp --channel`.
    pub messages: bool,
}

pub(super) fn claude_code(raw: Option<RawClaudeCode>) -> Result<Option<ClaudeCodeConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let hooks = RawHooks {
        conversation: raw.conversation,
        answerers: raw.answerers,
        ask: raw.ask,
        allow: raw.allow,
        hook_timeout: raw.hook_timeout,
    };
    let hooks = rules("claude_code", "Claude Code", "Bash", hooks)?;
    Ok(Some(ClaudeCodeConfig { hooks, messages: raw.messages }))
}
