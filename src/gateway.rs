//! The running service: opens the store, builds the engine, attaches the enabled channels,
//! recovers from the last stop, and shuts everything down in order.

use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::channel::console::Console;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::Engine;
use crate::store::{SqliteStore, StoreError};

/// The console's input and output, when the console channel is enabled.
pub struct ConsoleIo {
    /// Lines typed by the person.
    pub input: Box<dyn AsyncBufRead + Send + Unpin>,
    /// Where cards and replies are printed.
    pub output: Box<dyn AsyncWrite + Send + Unpin>,
}

/// A started gateway.
pub struct Gateway {
    engine: Engine,
    console: Option<JoinHandle<()>>,
}

impl Gateway {
    /// Starts everything `config` enables.
    ///
    /// # Errors
    /// When the database cannot be opened, migrated or read.
    pub async fn start(config: &Config, clock: Clock, console_io: Option<ConsoleIo>) -> Result<Self, StoreError> {
        let store = SqliteStore::open(&config.database, config.synchronous).await?;
        let engine = Engine::new(Arc::new(store), config.function_registry(), config.settings.clone(), clock.clone());
        let console = match (config.console, console_io) {
            (true, Some(io)) => {
                let console = Console::new(io.output, clock);
                engine.attach(console.clone());
                Some((console, io.input))
            }
            _ => None,
        };
        engine.start().await?;
        for (name, state) in config.channel_states() {
            tracing::info!(channel = name, "{state}");
        }
        let console =
            console.map(|(console, input)| tokio::spawn(console.read_loop(engine.clone(), input, engine.stopping())));
        Ok(Self { engine, console })
    }

    /// The engine, for surfaces and tests.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops inbound channels, finishes in-flight work, and closes the store.
    pub async fn shutdown(self) {
        self.engine.shutdown().await;
        if let Some(console) = self.console
            && let Err(e) = console.await
        {
            tracing::warn!(error = %e, "the console task ended abnormally");
        }
    }
}
