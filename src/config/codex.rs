//! `[codex]`: where Codex's hooks (`POST /hooks/codex`, `askgate hook codex`) ask a person, and
//! which tools ask. The keys are `[claude_code]`'s but for `messages` (Codex has no channel to
//! push them into); a section of its own, because Codex runs in other places and names its tools
//! its own way (`Bash`, `apply_patch`, `mcp__<server>__<tool>`).

use super::hooks::{HookRules, RawHooks, rules};
use super::raw::RawCodex;

/// Codex's hook settings; the hook endpoint answers when the file has a `[codex]` table.
pub type CodexConfig = HookRules;

pub(super) fn codex(raw: Option<RawCodex>) -> Result<Option<CodexConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let hooks = RawHooks {
        conversation: raw.conversation,
        answerers: raw.answerers,
        ask: raw.ask,
        allow: raw.allow,
        hook_timeout: raw.hook_timeout,
    };
    rules("codex", "Codex", "Bash", hooks).map(Some)
}
