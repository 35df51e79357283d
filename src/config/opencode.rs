//! `[[opencode]]`: a running opencode server whose permission prompts and questions askgate
//! asks a person.

use super::raw::RawOpencode;
use crate::question::{Conversation, EXAMPLE_USER, UserRef};

/// One opencode server to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpencodeConfig {
    /// Its name: `opencode:<name>` asks, and is its line in `/healthz`.
    pub name: String,
    /// Where it serves (`http://127.0.0.1:4096`).
    pub url: String,
    /// Its basic-auth user (`opencode` unless said).
    pub username: String,
    /// The environment variable with its password (`OPENCODE_SERVER_PASSWORD` on its side),
    /// when it has one.
    pub password_env: Option<String>,
    /// Where its prompts go.
    pub conversation: Conversation,
    /// Who may answer; none: the conversation's channel rules.
    pub answerers: Option<Vec<UserRef>>,
}

pub(super) fn opencode(raws: Vec<RawOpencode>) -> Result<Vec<OpencodeConfig>, (String, String)> {
    let mut servers: Vec<OpencodeConfig> = Vec::new();
    for (i, raw) in raws.into_iter().enumerate() {
        let key = |field: &str| format!("opencode[{i}].{field}");
        let name = raw.name.trim().to_owned();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err((key("name"), format!("`{name}` is not a name of letters, digits, `-` and `_`")));
        }
        if servers.iter().any(|s| s.name == name) {
            return Err((key("name"), format!("`{name}` is used twice")));
        }
        let url = raw.url.trim().trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err((key("url"), format!("`{url}` is not an http:// or https:// address")));
        }
        if raw.password_env.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err((key("password_env"), "is empty: name the variable that holds the password".into()));
        }
        let username = raw.username.unwrap_or_else(|| "opencode".to_owned());
        let Some(text) = raw.conversation.as_deref() else {
            return Err((key("conversation"), format!("is required: where its prompts go, e.g. \"{EXAMPLE_USER}\"")));
        };
        let conversation = Conversation::parse(text)
            .map_err(|e| (key("conversation"), format!("`{text}` is not a conversation like {EXAMPLE_USER}: {e}")))?;
        let answerers = super::mcp::answerers(&key("answerers"), raw.answerers)?;
        servers.push(OpencodeConfig { name, url, username, password_env: raw.password_env, conversation, answerers });
    }
    Ok(servers)
}
