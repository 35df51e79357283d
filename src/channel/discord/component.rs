//! Discord as a component: its section read, the adapter attached, its gateway session held.

use super::{Discord, DiscordConfig};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Discord platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Discord component or message."
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::check(section)
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(chat) = cx.section else { return Ok(Started::default()) };
        let Some(token) = chat.token(cx.env) else { return Ok(Started::default()) };
        let adapter = Discord::new(&DiscordConfig { token, api_url: chat.api_url.clone() }, cx.clock.clone());
        cx.engine.delivery().attach(adapter.clone());
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: None })
    }
}
