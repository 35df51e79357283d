//! Mattermost as a component: its section read, the adapter attached, its WebSocket listened
//! to, and the route its buttons' requests come to.

use super::Mattermost;
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Mattermost platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Mattermost button or message."
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        let secret = super::config::read(section).ok().and_then(|c| c.action_secret_env);
        std::iter::once(section.token_env.clone()).chain(secret).collect()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let off = || Ok(Started { serve: None, routes: Some(super::actions::routes(None)) });
        let Some(chat) = cx.section else { return off() };
        let config = super::config::read(chat)?;
        if self.variables(chat).iter().any(|name| cx.env.get(name).is_none()) {
            return off();
        }
        let Some(token) = chat.token(cx.env) else { return off() };
        let secret = config.action_secret_env.as_ref().and_then(|name| cx.env.get(name));
        let adapter = Mattermost::new(&config, token, secret, cx.clock.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let routes = super::actions::routes(Some((adapter.clone(), cx.engine.clone())));
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: Some(routes) })
    }

    fn advice(&self, section: &ChatConfig, _http: std::net::SocketAddr) -> Option<String> {
        let config = super::config::read(section).ok()?;
        Some(format!(
            "Mattermost's buttons send their clicks to {}{}: the Mattermost server must reach it (on an internal \
             address, list its host in the server's AllowedUntrustedInternalConnections)",
            config.public_url,
            super::render::ACTIONS_PATH
        ))
    }
}
