//! Channels: the surfaces where people talk to askgate.
//!
//! A channel adapter has two halves. Outbound, it implements [`crate::engine::Channel`]: render a question as
//! a card, retract cards after a resolution, send plain text. The engine calls it from its
//! lanes, one per conversation, so messages to a conversation keep their order. Inbound, the adapter
//! turns platform events into [`crate::engine::Inbound`] messages and hands them to
//! [`crate::engine::Engine::handle`].
//!
//! A chat platform is a [`Component`]: its folder holds its adapter, its start and its HTTP
//! routes, and it is registered in [`PLATFORMS`], the one list the gateway starts from.

pub mod console;
pub mod discord;
pub mod slack;
pub mod telegram;
pub mod web;
pub mod webhook;

use std::future::Future;
use std::pin::Pin;

use crate::clock::Clock;
use crate::config::{ChatConfig, Env};
use crate::engine::Engine;

/// Every chat platform askgate ships, in the order they start.
pub const PLATFORMS: &[&dyn Component] = &[&telegram::Platform, &discord::Platform, &slack::Platform];

/// A chat platform, as the gateway sees it: a name and a start.
pub trait Component: Sync {
    /// The platform's name: its `[channels.<name>]` section and the first part of its
    /// conversations and users.
    fn name(&self) -> &'static str;

    /// Builds the adapter from the platform's section and attaches it to `cx.engine`, when
    /// the section is there and its secrets are set; says what is left to run and serve.
    ///
    /// # Errors
    /// When the section's settings are unusable.
    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError>;

    /// What `askgate check` tells the operator about setting the platform up for `section`,
    /// with askgate listening on `http`.
    fn advice(&self, section: &ChatConfig, http: std::net::SocketAddr) -> Option<String> {
        let _ = (section, http);
        None
    }
}

/// What a platform starts with.
pub struct Context<'a> {
    /// Its `[channels.<name>]` section, when the file has one.
    pub section: Option<&'a ChatConfig>,
    /// Where its tokens and secrets are read.
    pub env: &'a Env,
    /// The clock.
    pub clock: &'a Clock,
    /// The engine it attaches to and hands what people do.
    pub engine: &'a Engine,
}

/// Why a platform's inbound half stopped.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// A platform's inbound half: it receives until the engine stops.
pub type Serve = Pin<Box<dyn Future<Output = Result<(), ServeError>> + Send>>;

/// What a started platform leaves to the gateway.
#[derive(Default)]
pub struct Started {
    /// Its inbound half (polling, a socket, a lease), run on a tracked task; none when it is
    /// disabled or receives only over HTTP.
    pub serve: Option<Serve>,
    /// Its routes on askgate's own HTTP server.
    pub routes: Option<axum::Router>,
}

/// A platform's settings are unusable.
pub type PlatformError = Box<dyn std::error::Error + Send + Sync>;
