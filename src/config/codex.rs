//! `[codex]`: where Codex's hooks (`POST /hooks/codex`, `askgate hook codex`) ask a person, and
//! which tools ask. The keys are `[claude_code]`'s but for `messages` (Codex has no channel to
//! push them into); a section of its own, because Codex runs in other places and names its tools
//! its own way (`Bash`, `apply_patch`, `mcp__<server>__<tool>`).

use super::hooks::{HookRules, rules};
use super::raw::RawHooks;

/// Codex's hook settings; the hook endpoint answers when the file has a `[codex]` table.
pub type CodexConfig = HookRules;

pub(super) fn codex(raw: Option<RawHooks>) -> Result<Option<CodexConfig>, (String, String)> {
    raw.map(|raw| rules("codex", "Codex", "Bash", raw)).transpose()
}
