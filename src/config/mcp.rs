//! `[mcp]`: where questions from AI agents (the MCP server at `/mcp`) go, and who answers them.

use std::time::Duration;

use super::raw::RawMcp;
use crate::question::{Conversation, UserRef};

/// The MCP server's settings; `/mcp` is served when the file has an `[mcp]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// Where a tool call's question goes unless the call names another.
    pub conversation: Conversation,
    /// Who may answer; none: the target channel's `allowed_users`, as for API questions.
    pub answerers: Option<Vec<UserRef>>,
    /// Other conversations a call may name.
    pub allowed_conversations: Vec<Conversation>,
    /// How often a waiting tool call sends a progress notification (when the client asked).
    pub progress_every: Duration,
    /// Also show a waiting question in the agent's client, as a form, when it can show one.
    pub elicitation: bool,
}

/// The default of `mcp.progress_every`.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(15);

impl McpConfig {
    /// Whether a tool call may send its question to `conversation`.
    pub fn allows(&self, conversation: &Conversation) -> bool {
        *conversation == self.conversation || self.allowed_conversations.contains(conversation)
    }
}

pub(super) fn mcp(raw: Option<RawMcp>) -> Result<Option<McpConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let conversation = |key: String, text: &str| {
        Conversation::parse(text).map_err(|e| (key, format!("`{text}` is not a conversation like telegram:42: {e}")))
    };
    let Some(default) = raw.conversation.as_deref() else {
        return Err((
            "mcp.conversation".into(),
            "is required: where agents' questions go, e.g. \"telegram:42\" or \"console:local\"".into(),
        ));
    };
    let answerers = match raw.answerers {
        None => None,
        Some(list) if list.is_empty() => {
            return Err((
                "mcp.answerers".into(),
                "is empty: nobody could answer; leave it out to use the channel's allowed_users".into(),
            ));
        }
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, u)| {
                    UserRef::parse(u).map_err(|e| {
                        (format!("mcp.answerers[{i}]"), format!("`{u}` is not a user like telegram:42: {e}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let allowed_conversations = raw
        .allowed_conversations
        .iter()
        .enumerate()
        .map(|(i, c)| conversation(format!("mcp.allowed_conversations[{i}]"), c))
        .collect::<Result<Vec<_>, _>>()?;
    let progress_every = raw.progress_every.unwrap_or(PROGRESS_EVERY);
    if progress_every.is_zero() {
        return Err(("mcp.progress_every".into(), "must be at least 1s".into()));
    }
    Ok(Some(McpConfig {
        conversation: conversation("mcp.conversation".into(), default)?,
        answerers,
        allowed_conversations,
        progress_every,
        elicitation: raw.elicitation,
    }))
}
