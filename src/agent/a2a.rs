//! A2A (the Agent2Agent protocol, v1.0), as a component.
//!
//! - [`wire`]: the protocol's JSON types, shared by askgate as an A2A agent and as a client of
//!   remote agents.

pub mod wire;
