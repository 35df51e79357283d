//! `[[agents]]`: agents with tokens of their own, besides the default agent token.

use super::raw::RawAgent;

/// `[[agents]]`: an agent with a token of its own. It asks as `agent:<name>` through the API
/// and `/mcp`, and never answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// Its name (letters, digits, `-`, `_`): no `.`, which separates it from the client's
    /// name in `mcp:<agent>.<client>`, so that no two agents' clients can share an identity.
    pub name: String,
    /// The environment variable that holds its token (at least 32 characters).
    pub token_env: String,
}

pub(super) fn agents(raw: Vec<RawAgent>) -> Result<Vec<AgentConfig>, (String, String)> {
    let mut agents: Vec<AgentConfig> = Vec::new();
    for (i, agent) in raw.into_iter().enumerate() {
        let usable = !agent.name.is_empty()
            && agent.name.len() <= 64
            && agent.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !usable {
            return Err((
                format!("agents[{i}].name"),
                format!("`{}` is not a name of letters, digits, - and _", agent.name),
            ));
        }
        if agent.name == "agent" || agents.iter().any(|a| a.name == agent.name) {
            return Err((
                format!("agents[{i}].name"),
                format!("`{}` is taken (`agent` is the default agent token's)", agent.name),
            ));
        }
        if agent.token_env.trim().is_empty() {
            return Err((
                format!("agents[{i}].token_env"),
                "is required: the variable that holds its token".to_owned(),
            ));
        }
        agents.push(AgentConfig { name: agent.name, token_env: agent.token_env });
    }
    Ok(agents)
}
