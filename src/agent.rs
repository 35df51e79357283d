//! The agents askgate asks for, each a component in a folder of its own: what the agent sends,
//! read as asks; the routes it calls; what it runs on its side; and the answers written back in
//! its own shape. Their config sections are `config`'s (`[claude_code]`, `[codex]`,
//! `[[opencode]]`, `[callbacks]`, `[a2a]`).
//!
//! - [`hook`]: what the hooks of coding agents share (Claude Code's and Codex's contract): the
//!   hook's JSON read as an ask, the outcome as an answer, the command form.
//! - [`claude_code`]: Claude Code's hooks and its channel relay.
//! - [`codex`]: Codex's hooks.
//! - [`opencode`]: a running opencode server's permission prompts and questions.
//! - [`a2a_remote`]: remote A2A agents run as functions, their `input-required` tasks asked of
//!   a person and answered on the same task.
//! - [`agui`]: AG-UI agents run as functions, their interrupts asked of a person and resumed
//!   with the answers.
//! - [`a2a`]: askgate as an A2A agent: a task is a question a person answers.
//! - [`callbacks`]: an agent's outcome POSTed where it asked, from the store's outbox.
//!
//! What has to be written inside the engine's own writes stays in the engine: a callback's
//! outbox row is written with the question or run it reports on (`engine::callbacks`), and the
//! plain messages Claude Code's channel hears come from the engine's listeners.

pub mod a2a;
pub mod a2a_remote;
pub mod agui;
pub mod callbacks;
pub mod claude_code;
pub mod codex;
pub mod hook;
pub mod opencode;

/// The most of a refusing answer's body read, to show its start.
const MAX_REFUSAL: usize = 4 * 1024;

/// The start of what a non-2xx `response` said, trimmed and clipped to 300 characters: at most
/// [`MAX_REFUSAL`] bytes are read, so an agent answering an error with a huge (or endless) body
/// costs no more than that.
async fn refusal(response: reqwest::Response) -> String {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < MAX_REFUSAL {
        let Some(Ok(chunk)) = chunks.next().await else { break };
        body.extend_from_slice(&chunk);
    }
    body.truncate(MAX_REFUSAL);
    crate::text::clip(String::from_utf8_lossy(&body).trim(), 300, "…")
}
