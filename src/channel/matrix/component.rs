//! Matrix as a component: its section read, the adapter attached, its rooms synced.

use super::Matrix;
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Matrix platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Matrix reaction or message."
    }

    // Its secret is `token_env` or `password_env`, exactly one: its own section says which.
    fn has_token(&self) -> bool {
        false
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        super::config::read(section).map(|c| vec![c.secret.variable().to_owned()]).unwrap_or_default()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(chat) = cx.section else { return Ok(Started::default()) };
        let config = super::config::read(chat)?;
        let Some(secret) = cx.env.get(config.secret.variable()) else { return Ok(Started::default()) };
        let adapter = Matrix::new(&config, secret, cx.clock.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: None })
    }
}
