//! `[a2a]`: askgate as an A2A agent (`/.well-known/agent-card.json`, JSON-RPC at `/a2a`): where
//! the questions its tasks ask are shown, and who answers them.

use super::raw::RawA2a;
use crate::question::{Conversation, EXAMPLE_USER, UserRef};

/// The A2A agent's settings; askgate serves A2A when the file has an `[a2a]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct A2aConfig {
    /// Where every task's question is shown. One conversation, as for `[mcp]` and
    /// `[claude_code]`: an A2A client names no chat of askgate's, and should not be able to
    /// reach any other.
    pub conversation: Conversation,
    /// Who may answer; none: the conversation's channel rules, as for API questions.
    pub answerers: Option<Vec<UserRef>>,
}

pub(super) fn a2a(raw: Option<RawA2a>) -> Result<Option<A2aConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let Some(text) = raw.conversation.as_deref() else {
        return Err((
            "a2a.conversation".into(),
            format!("is required: where the questions of A2A tasks are shown, e.g. \"{EXAMPLE_USER}\""),
        ));
    };
    let conversation = Conversation::parse(text).map_err(|e| {
        ("a2a.conversation".to_owned(), format!("`{text}` is not a conversation like {EXAMPLE_USER}: {e}"))
    })?;
    let answerers = super::mcp::answerers("a2a.answerers", raw.answerers)?;
    Ok(Some(A2aConfig { conversation, answerers }))
}
