//! Channels: the surfaces where people talk to askgate.
//!
//! A channel adapter has two halves. Outbound, it implements [`crate::engine::Channel`]: render a question as
//! a card, retract cards after a resolution, send plain text. The engine calls it from its
//! lanes, one per conversation, so messages to a conversation keep their order. Inbound, the adapter
//! turns platform events into [`crate::engine::Inbound`] messages and hands them to
//! [`crate::engine::Engine::handle`].

pub mod console;
pub mod discord;
pub mod slack;
pub mod telegram;
pub mod web;
pub mod webhook;
