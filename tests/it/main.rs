//! askgate's integration tests, compiled into one binary.

mod binary;
mod browser;
mod discord;
mod engine;
mod fake_discord;
mod fake_telegram;
mod faults;
mod gate;
mod http;
mod mcp;
mod process;
mod routing;
mod security;
mod store;
mod support;
mod telegram;
