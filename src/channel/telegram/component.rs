//! Telegram as a component: its section read, the adapter attached, its updates received.

use super::{Telegram, TelegramConfig, Timeouts, Updates};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Telegram platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Telegram button or message."
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::webhook(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        let webhook = super::config::webhook(section).ok().flatten();
        [Some(section.token_env.clone()), webhook.map(|w| w.secret_env)].into_iter().flatten().collect()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(chat) = cx.section else { return Ok(Started::default()) };
        let webhook = super::config::webhook(chat)?;
        let Some(token) = chat.token(cx.env) else { return Ok(Started::default()) };
        let updates = match webhook {
            None => Updates::Polling,
            Some(w) => match cx.env.get(&w.secret_env) {
                Some(secret) => Updates::Webhook { url: w.url, listen: w.listen, secret },
                None => return Ok(Started::default()),
            },
        };
        let config = TelegramConfig {
            token,
            api_url: chat.api_url.clone(),
            updates: updates.clone(),
            timeouts: Timeouts::default(),
        };
        let adapter = Telegram::new(&config, cx.clock.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(updates, engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: None })
    }
}
