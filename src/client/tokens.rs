//! `askgate token add|list|revoke`: people's personal tokens (and agents' tokens that can be
//! revoked), made through the running askgate's `/api/tokens` with the operator token. askgate
//! keeps only their hashes and reads them at each request, so a token added or revoked counts
//! at once, on every instance; a revocation ends what the token holds open.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::{Api, error_message};
use crate::store::Powers;

/// What a token command did, for its caller to print; or what went wrong.
pub type Outcome = Result<String, String>;

/// `askgate token add <name>`: a new token for `web:<name>`, printed once.
pub async fn add(api: &Api, name: &str, may: Powers) -> Outcome {
    let request =
        api.request(reqwest::Method::POST, "/api/tokens").json(&json!({"name": name, "may": may.to_string()}));
    let answer = api.send(request).await?;
    if answer.0 != reqwest::StatusCode::CREATED {
        return Err(error_message(&answer));
    }
    let (token, person) =
        (answer.1["token"].as_str().unwrap_or_default(), answer.1["user"].as_str().unwrap_or_default());
    Ok(format!(
        "{token}\n\nThat is the token of {person} (may {may}). It is shown this once: askgate keeps only its hash.\n\
         Sign in with it on the web page, give it to `askgate tui` (ASKGATE_TOKEN), or send it as \
         Authorization: Bearer <token>.\nName {person} in answerers (channels.toml, the API) to let them answer."
    ))
}

/// `askgate token add <name> --agent`: a new token for `agent:<name>`, printed once.
pub async fn add_agent(api: &Api, name: &str) -> Outcome {
    let request = api.request(reqwest::Method::POST, "/api/tokens").json(&json!({"name": name, "agent": true}));
    let answer = api.send(request).await?;
    if answer.0 != reqwest::StatusCode::CREATED {
        return Err(error_message(&answer));
    }
    let (token, kept) = (answer.1["token"].as_str().unwrap_or_default(), answer.1["name"].as_str().unwrap_or_default());
    Ok(format!(
        "{token}\n\nThat is the token of the agent agent:{name}. It is shown this once: askgate keeps only its hash.\n\
         Give it to the agent as ASKGATE_AGENT_TOKEN (askgate mcp) or Authorization: Bearer <token>; \
         `askgate token revoke {kept}` takes it back."
    ))
}

fn when(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "never".to_owned() };
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or_default());
    humantime::format_rfc3339_seconds(at).to_string()
}

fn powers(value: &Value) -> String {
    serde_json::from_value::<Powers>(value.clone()).map(|p| p.to_string()).unwrap_or_default()
}

/// `askgate token list`: the live tokens, sessions and unused links, by name, with how many
/// requests each holds open on the askgate asked (`OPEN`).
pub async fn list(api: &Api) -> Outcome {
    let answer = api.send(api.request(reqwest::Method::GET, "/api/tokens")).await?;
    if !answer.0.is_success() {
        return Err(error_message(&answer));
    }
    let tokens = answer.1["tokens"].as_array().cloned().unwrap_or_default();
    if tokens.is_empty() {
        return Ok("No personal tokens: `askgate token add <name>` makes one.".to_owned());
    }
    let mut out =
        format!("{:<24} {:<24} {:<18} {:<5} {:<21} {}", "NAME", "PERSON", "MAY", "OPEN", "CREATED", "EXPIRES");
    for t in tokens {
        let note = if t["link"].as_bool() == Some(true) { " (a link not used yet)" } else { "" };
        out.push_str(&format!(
            "\n{:<24} {:<24} {:<18} {:<5} {:<21} {}{note}",
            t["name"].as_str().unwrap_or_default(),
            t["user"].as_str().unwrap_or_default(),
            powers(&t["may"]),
            t["open"].as_u64().unwrap_or_default(),
            when(t["created_at"].as_i64()),
            when(t["expires_at"].as_i64()),
        ));
    }
    Ok(out)
}

/// `askgate token revoke <name>`: the token (or a session) is refused from its next request
/// on, and what it holds open ends.
pub async fn revoke(api: &Api, name: &str) -> Outcome {
    let answer = api.send(api.request(reqwest::Method::DELETE, &token_path(name))).await?;
    if answer.0 == reqwest::StatusCode::NO_CONTENT {
        return Ok(format!("revoked `{name}`: it is refused from now on, and what it held open has ended"));
    }
    Err(error_message(&answer))
}

/// `/api/tokens/<name>`, the name percent-encoded as one path segment.
fn token_path(name: &str) -> String {
    let mut url = reqwest::Url::parse("http://askgate/api/tokens").unwrap_or_else(|_| unreachable!("a valid URL"));
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.push(name);
    }
    url.path().to_owned()
}
