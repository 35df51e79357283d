//! askgate's integration tests, compiled into one binary.

mod binary;
mod engine;
mod fake_telegram;
mod process;
mod routing;
mod store;
mod support;
mod telegram;
