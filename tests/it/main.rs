//! askgate's integration tests, compiled into one binary.

mod binary;
mod engine;
mod process;
mod routing;
mod store;
mod support;
