//! `askgate mcp --channel`: the bridge as a Claude Code channel that relays permission
//! prompts. It declares `claude/channel` and `claude/channel/permission` in its `initialize`
//! answer; each `notifications/claude/channel/permission_request` goes to the running
//! askgate's `POST /hooks/claude-code/permission` (see [`super::relay`]), and a decision
//! comes back to Claude Code as `notifications/claude/channel/permission`. Nothing is sent when
//! nobody decided on askgate: the terminal's dialog, open all along, decides. When Claude Code
//! ends the bridge, its waiting requests end with it, and askgate retracts their cards. With
//! `[claude_code] messages = true`, a person's plain messages in the conversation are pushed
//! into the session as `notifications/claude/channel`.

use rmcp::model::ServerJsonRpcMessage;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::mcp::bridge::Channel;

/// The method of a prompt Claude Code relays.
const REQUEST: &str = "notifications/claude/channel/permission_request";
/// The method of a decision sent back.
const DECISION: &str = "notifications/claude/channel/permission";
/// The method of a person's message pushed into the session.
const CHANNEL: &str = "notifications/claude/channel";

/// Where relayed prompts go.
pub struct Relay {
    http: reqwest::Client,
    /// `…/hooks/claude-code/permission` of the askgate the bridge talks to.
    url: String,
    /// `…/hooks/claude-code/messages`.
    messages: String,
    token: String,
    /// The project Claude Code started the bridge in.
    cwd: Option<String>,
    /// The Claude Code session that started the bridge, as its environment says.
    session: Option<String>,
}

impl Relay {
    /// For the askgate whose `/mcp` is `mcp_url`.
    pub fn new(mcp_url: &str, token: &str) -> Self {
        let base = mcp_url.trim_end_matches('/');
        let base = base.strip_suffix("/mcp").unwrap_or(base);
        let cwd = std::env::current_dir().ok().map(|d| d.display().to_string());
        let session = std::env::var("CLAUDE_CODE_SESSION_ID").ok().filter(|s| !s.trim().is_empty());
        Self {
            http: reqwest::Client::new(),
            url: format!("{base}/hooks/claude-code/permission"),
            messages: format!("{base}/hooks/claude-code/messages"),
            token: token.to_owned(),
            cwd,
            session,
        }
    }

    /// Asks askgate about the prompt `params`; its decision, if a person made one, goes to
    /// `decided` as the notification to write.
    fn ask(&self, mut params: Value, decided: UnboundedSender<Value>) {
        if let Some(object) = params.as_object_mut() {
            if let Some(cwd) = &self.cwd {
                object.insert("cwd".into(), json!(cwd));
            }
            if let Some(session) = &self.session {
                object.insert("session_id".into(), json!(session));
            }
        }
        let request = self.http.post(&self.url).bearer_auth(&self.token).json(&params);
        tokio::spawn(async move {
            // Claude Code's ids are lower-case; it reads them so, whatever the prompt said.
            let id = params.get("request_id").and_then(Value::as_str).unwrap_or_default().to_ascii_lowercase();
            let answer = match request.send().await {
                Ok(response) if response.status().is_success() => response.json::<Value>().await,
                Ok(response) => {
                    let status = response.status();
                    let body = response.text().await.unwrap_or_default();
                    tracing::warn!(request = %id, %status, body = %body, "askgate did not take a relayed permission prompt");
                    return;
                }
                Err(e) => Err(e),
            };
            match answer {
                Ok(answer) => match answer.get("behavior").and_then(Value::as_str) {
                    Some(behavior) => {
                        let params = json!({"request_id": id, "behavior": behavior});
                        let _ = decided.send(json!({"jsonrpc": "2.0", "method": DECISION, "params": params}));
                    }
                    None => tracing::info!(request = %id, "nobody decided on askgate: the terminal's dialog decides"),
                },
                Err(e) => tracing::warn!(request = %id, error = %e, "a relayed permission prompt got no answer"),
            }
        });
    }
}

impl Relay {
    /// Pushes the conversation's plain messages into the session as
    /// `notifications/claude/channel` (`content`, and `meta` with who wrote it), for as long
    /// as the bridge runs; nothing when askgate passes none on (`messages` is off).
    fn follow_messages(&self, out: UnboundedSender<Value>) {
        let request = self.http.get(&self.messages).bearer_auth(&self.token);
        tokio::spawn(async move {
            loop {
                let Some(request) = request.try_clone() else { return };
                match request.send().await {
                    Ok(response) if response.status() == reqwest::StatusCode::NOT_FOUND => {
                        tracing::debug!("askgate passes no messages on ([claude_code] messages is off)");
                        return;
                    }
                    Ok(response) if response.status().is_success() => {
                        if pushed(response, &out).await.is_err() {
                            return; // The bridge is gone.
                        }
                    }
                    Ok(response) => tracing::warn!(status = %response.status(), "askgate refused to pass messages on"),
                    Err(e) => tracing::warn!(error = %e, "could not follow the conversation's messages"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        });
    }
}

/// Writes each message line of `response` as a channel notification, until it ends; an error
/// when the bridge's output is gone.
async fn pushed(response: reqwest::Response, out: &UnboundedSender<Value>) -> Result<(), ()> {
    use futures_util::StreamExt;
    let mut body = response.bytes_stream();
    let mut buffer = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let Ok(message) = serde_json::from_slice::<Value>(&line) else { continue };
            let text = |key: &str| message.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            // Meta keys are identifiers and values strings, or Claude Code drops them.
            let mut meta = json!({"user": text("user")});
            if let Some(name) = message.get("name").and_then(Value::as_str) {
                meta["name"] = json!(name);
            }
            let params = json!({"content": text("text"), "meta": meta});
            out.send(json!({"jsonrpc": "2.0", "method": CHANNEL, "params": params})).map_err(|_| ())?;
        }
    }
    Ok(())
}

/// The params of a line that is a relayed permission prompt.
fn relayed(line: &[u8]) -> Option<Value> {
    let value: Value = serde_json::from_slice(line).ok()?;
    if value.get("method")?.as_str()? != REQUEST || value.get("id").is_some() {
        return None;
    }
    Some(value.get("params").cloned().unwrap_or(Value::Null))
}

/// An `initialize` answer with the channel's capabilities added, and what they mean to Claude.
fn as_channel(message: &ServerJsonRpcMessage) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or_default();
    if let Some(capabilities) = value.pointer_mut("/result/capabilities").and_then(Value::as_object_mut) {
        let experimental = capabilities.entry("experimental").or_insert_with(|| json!({}));
        if let Some(experimental) = experimental.as_object_mut() {
            experimental.insert("claude/channel".into(), json!({}));
            experimental.insert("claude/channel/permission".into(), json!({}));
        }
    }
    value
}

impl Channel for Relay {
    fn claim(&self, line: &[u8]) -> Option<Value> {
        relayed(line)
    }

    fn take(&self, params: Value, out: UnboundedSender<Value>) {
        self.ask(params, out);
    }

    fn initialized(&self, answer: &ServerJsonRpcMessage, out: UnboundedSender<Value>) -> Value {
        self.follow_messages(out);
        as_channel(answer)
    }
}
