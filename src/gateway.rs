//! The running service: opens the store, builds the engine, attaches the enabled channels,
//! recovers from the last stop, and shuts everything down in order.

use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::channel::console::Console;
use crate::channel::telegram::{self, Telegram, TelegramConfig};
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
    inbound: Vec<JoinHandle<()>>,
}

impl Gateway {
    /// Starts everything `config` enables.
    ///
    /// # Errors
    /// When the database cannot be opened, migrated or read, or a channel's settings are
    /// unusable.
    pub async fn start(config: &Config, clock: Clock, console_io: Option<ConsoleIo>) -> Result<Self, GatewayError> {
        let store = SqliteStore::open(&config.database, config.synchronous).await?;
        let engine = Engine::new(Arc::new(store), config.function_registry(), config.settings.clone(), clock.clone());
        let console = match (config.console, console_io) {
            (true, Some(io)) => {
                let console = Console::new(io.output, clock.clone());
                engine.attach(console.clone());
                Some((console, io.input))
            }
            _ => None,
        };
        let telegram = telegram(config, &clock, &engine)?;
        engine.start().await?;
        let states = config.channel_states();
        for (name, state) in &states {
            tracing::info!(channel = name, "{state}");
        }
        let mut inbound = Vec::new();
        if let Some((console, input)) = console {
            inbound.push(tokio::spawn(console.read_loop(engine.clone(), input, engine.stopping())));
        }
        if let Some((telegram, updates)) = telegram {
            let (engine, stop) = (engine.clone(), engine.stopping());
            inbound.push(tokio::spawn(async move {
                if let Err(e) = telegram.serve(updates, engine, stop).await {
                    tracing::error!(error = %e, "telegram stopped: {e:#}");
                }
            }));
        }
        Ok(Self { engine, inbound })
    }

    /// The engine, for surfaces and tests.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops inbound channels (each finishes the message in hand), finishes in-flight work,
    /// delivers what is queued, and closes the store.
    pub async fn shutdown(self) {
        self.engine.stopping().cancel();
        for task in self.inbound {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "an inbound channel ended abnormally");
            }
        }
        self.engine.shutdown().await;
    }
}

/// The Telegram channel, attached, with how its updates arrive; none when it is disabled.
fn telegram(
    config: &Config,
    clock: &Clock,
    engine: &Engine,
) -> Result<Option<(Arc<Telegram>, telegram::Updates)>, GatewayError> {
    let Some(chat) = &config.telegram else { return Ok(None) };
    let Some(token) = chat.token() else { return Ok(None) };
    let updates = match &chat.webhook {
        None => telegram::Updates::Polling,
        Some(w) => match std::env::var(&w.secret_env).ok().filter(|s| !s.is_empty()) {
            Some(secret) => telegram::Updates::Webhook { url: w.url.clone(), listen: w.listen, secret },
            None => return Ok(None),
        },
    };
    let adapter = Telegram::new(
        &TelegramConfig { token, api_url: chat.api_url.clone(), updates: updates.clone() },
        clock.clone(),
    )?;
    engine.attach(adapter.clone());
    Ok(Some((adapter, updates)))
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Telegram channel's configuration is unusable.
    #[error("telegram: {0}")]
    Telegram(#[from] telegram::StartError),
}
