//! The agents askgate asks for, each a component in a folder of its own: what the agent sends,
//! read as asks; the routes it calls; what it runs on its side; and the answers written back in
//! its own shape. Their config sections are `config`'s (`[claude_code]`, `[[opencode]]`,
//! `[callbacks]`).
//!
//! - [`claude_code`]: Claude Code's hooks and its channel relay.
//! - [`opencode`]: a running opencode server's permission prompts and questions.

pub mod claude_code;
pub mod opencode;
