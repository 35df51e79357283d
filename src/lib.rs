//! askgate lets a running function pause to ask a human and resume with the answer, through
//! the chat channels where people already are.
//!
//! The modules, each using only modules above it (a test, `layout`, keeps this map true):
//!
//! ```text
//! text      ->
//! clock     ->
//! question  -> text
//! run       -> question
//! store     -> question, run
//! command   -> question, text
//! wording   -> question, store, text
//! engine    -> clock, command, question, run, store, text, wording
//! function  -> engine, question, text
//! config    -> engine, function, question, store, text
//! channel   -> clock, command, config, engine, question, store, text, wording
//! mcp       -> channel, config, engine, function, question, text, wording
//! http      -> channel, command, config, engine, mcp, question, run, store, text
//! agent     -> channel, config, engine, http, mcp, question, run, store, text
//! gateway   -> agent, channel, clock, config, engine, function, http, mcp, question, store
//! client    -> config, http, question, store, text
//! ```
//!
//! - [`text`]: asker text made safe to show, clipping and splitting text, and the one markup a
//!   detail may carry.
//! - [`clock`]: wall-clock time, with a manual clock for tests.
//! - [`question`]: the domain — ids, conversations, people and the operator, kinds, options,
//!   outcomes, receipts, validating an ask, matching a typed choice, durations, and
//!   [`question::AskWire`], the one wire form of an ask (process protocol and HTTP API).
//! - [`run`]: the record of one invocation of a function across its replays.
//! - [`store`]: persistence behind one trait; [`store::SqliteStore`] is SQLite opened and read
//!   through sqlx, with one group-committing writer that steps prepared statements on its own
//!   thread (the crate's only `unsafe`, in `store::sqlite::raw`); [`store::PostgresStore`] is
//!   PostgreSQL, which several askgate instances share (heartbeats, LISTEN/NOTIFY, group commit);
//!   [`store::MemoryStore`] keeps the same tables in the process, and nothing across a restart.
//! - [`command`]: the text command grammar every surface shares, and typed taps.
//! - [`wording`]: what people read — the text card, reminders, lists, receipts, ages.
//! - [`engine`]: runs functions, persists and resolves questions (claim-once), replays
//!   follow-up runs from their journal, expires questions, and tells channels what to show
//!   through its port, [`engine::Channel`]. The extension point lives here:
//!   [`engine::Function`], [`engine::Context`] (what a function asks through) and the registry.
//!   The engine is the only door to the store.
//! - [`function`]: the functions askgate ships — the built-ins and programs in any language
//!   over the process protocol ([`function::process`]).
//! - [`config`]: `channels.toml` — the raw file, channel rules, function entries, and
//!   `ASKGATE_GATEWAY_*` from the environment — parsed into typed settings.
//! - [`channel`]: the adapters that implement [`engine::Channel`]: console, Telegram, Discord,
//!   Slack and the webhook bridge.
//! - [`mcp`]: the MCP server at `/mcp` (tools that ask a person), the gate in front of
//!   upstream MCP servers, and `askgate mcp`, its stdio bridge.
//! - [`http`]: the REST API, the live event stream, the web page, the webhook endpoints, and
//!   the routes agents bring, behind a token.
//! - [`agent`]: the agents askgate asks for, a component each, with the routes it serves:
//!   Claude Code's hooks (read as approvals and questions, answered in the hooks' shape) and
//!   its channel relay; opencode's permission prompts and questions, and the answers sent back;
//!   callbacks, an agent's outcome POSTed where it asked.
//! - [`gateway`]: assembles all of the above into the running service (a builder for programs
//!   that embed it).
//! - [`client`]: the commands that talk to a running askgate over its API: `askgate token` and
//!   the terminal UI, `askgate tui`.

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

// askgate's own texts in every language it speaks (`locales/askgate.yml`), compiled in.
rust_i18n::i18n!("locales", fallback = "en");

pub mod agent;
pub mod channel;
pub mod client;
pub mod clock;
pub mod command;
pub mod config;
pub mod engine;
pub mod function;
pub mod gateway;
pub mod http;
pub mod mcp;
pub mod question;
pub mod run;
pub mod store;
pub mod text;
pub mod wording;

/// An error with its causes, as one line: `database error: disk I/O error (SQLite code 10)`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
