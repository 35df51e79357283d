//! A `[[functions]]` entry that is a remote agent: `agui = "<url>"` (an AG-UI agent's endpoint)
//! or `a2a = "<url>"` (an A2A agent's card), with `token_env` naming the variable that holds the
//! bearer token it takes.

use std::time::Duration;

use super::functions::FunctionKind;
use super::raw::RawFunction;

/// A remote agent askgate runs on a person's behalf.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteAgent {
    /// Where it is reached: the AG-UI endpoint askgate POSTs a run to, or the A2A agent card's
    /// URL (or the agent's base URL, under which askgate reads `/.well-known/agent-card.json`).
    pub url: String,
    /// The environment variable with the bearer token the agent takes, when it takes one.
    pub token_env: Option<String>,
    /// How long one exchange with the agent may take (one AG-UI run up to its end, one A2A
    /// call, or the wait for a task to move), before the run fails saying so.
    pub timeout: Duration,
}

/// How long one exchange with a remote agent may take unless `timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// `agui = "<url>"`: an AG-UI agent.
pub(super) fn agui(f: RawFunction) -> Result<(FunctionKind, String), (&'static str, String)> {
    let url = f.agui.clone().unwrap_or_default();
    let agent = remote(f, "agui", url)?;
    let description = format!("runs the AG-UI agent at {}", agent.url);
    Ok((FunctionKind::Agui(agent), description))
}

/// `a2a = "<url>"`: an A2A agent.
pub(super) fn a2a(f: RawFunction) -> Result<(FunctionKind, String), (&'static str, String)> {
    let url = f.a2a.clone().unwrap_or_default();
    let agent = remote(f, "a2a", url)?;
    let description = format!("sends the text to the A2A agent at {}", agent.url);
    Ok((FunctionKind::A2a(agent), description))
}

fn remote(f: RawFunction, key: &'static str, url: String) -> Result<RemoteAgent, (&'static str, String)> {
    let program_keys = f.cwd.is_some() || f.env.is_some() || !f.set_env.is_empty() || f.mode.is_some();
    if program_keys || f.show_stderr.is_some() {
        return Err((key, "a remote agent takes no cwd, env, set_env, mode or show_stderr".to_owned()));
    }
    let url = url.trim().to_owned();
    if !is_web_address(&url) {
        return Err((key, format!("`{url}` is not an http:// or https:// address")));
    }
    if f.token_env.as_deref().is_some_and(|v| v.trim().is_empty() || v.contains('=')) {
        return Err(("token_env", "is not a variable name: name the variable that holds the agent's token".into()));
    }
    let timeout = f.timeout.unwrap_or(DEFAULT_TIMEOUT);
    if timeout.is_zero() {
        return Err(("timeout", "must be more than 0s".to_owned()));
    }
    Ok(RemoteAgent { url, token_env: f.token_env, timeout })
}

/// Whether `url` is an http:// or https:// address with a host.
fn is_web_address(url: &str) -> bool {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace))
}
