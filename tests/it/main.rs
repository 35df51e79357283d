//! askgate's integration tests, compiled into one binary.

mod backend;
mod binary;
mod browser;
mod conformance;
mod discord;
mod engine;
mod fake_discord;
mod fake_telegram;
mod faults;
mod gate;
mod http;
mod instances;
mod layout;
mod mcp;
mod nudges;
mod openapi;
mod packaging;
mod process;
mod python_client;
mod quorum;
mod routing;
mod security;
mod store;
mod support;
mod telegram;
mod trust;
