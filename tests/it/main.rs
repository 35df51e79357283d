//! askgate's integration tests, compiled into one binary.

mod a2a;
mod a2a_remote;
mod agui;
mod backend;
mod binary;
mod browser;
mod buttons;
mod callbacks;
mod channel_relay;
mod claude_code;
mod claude_code_cli;
mod codex;
mod conformance;
mod console;
mod contract;
#[cfg(feature = "discord")]
mod discord;
mod disk;
mod docs;
#[cfg(feature = "email")]
mod email;
mod engine;
mod fake_agui;
mod fake_anthropic;
#[cfg(feature = "discord")]
mod fake_discord;
mod fake_google_chat;
mod fake_mattermost;
mod fake_openai;
mod fake_responses;
#[cfg(feature = "slack")]
mod fake_slack;
mod fake_teams;
#[cfg(feature = "telegram")]
mod fake_telegram;
mod fake_whatsapp;
mod faults;
mod forms;
mod gate;
mod generated_clients;
mod google_chat;
mod http;
mod init;
mod instances;
mod layout;
#[cfg(feature = "email")]
mod mail_server;
mod matrix;
mod mattermost;
mod mcp;
mod nudges;
mod openapi;
mod opencode;
mod opencode_cli;
mod outbox;
mod packaging;
mod people;
mod process;
mod python_client;
mod python_mcp;
mod quickstart;
mod quorum;
mod revisions;
mod revocation;
mod routing;
mod security;
mod seed;
mod sessions;
mod shown;
mod signing;
#[cfg(feature = "slack")]
mod slack;
#[cfg(feature = "slack")]
mod slack_forms;
mod spill;
mod startup;
mod stdio_bridge;
mod stop;
mod store;
mod support;
mod synapse;
mod teams;
#[cfg(feature = "telegram")]
mod telegram;
mod tools;
mod traces;
mod trust;
mod tui;
mod typescript_client;
mod whatsapp;
