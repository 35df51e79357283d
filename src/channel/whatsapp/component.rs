//! WhatsApp as a component: its section read, the adapter attached, and its webhook on
//! askgate's own server.

use std::net::SocketAddr;
use std::sync::Arc;

use super::WhatsApp;
use super::webhook::{self, Door};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The WhatsApp platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A WhatsApp button, list, reaction or message."
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        let own = super::config::read(section).map(|c| [c.app_secret_env, c.verify_token_env]);
        std::iter::once(section.token_env.clone()).chain(own.into_iter().flatten()).collect()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(section) = cx.section else { return Ok(Started::default()) };
        let config = super::config::read(section)?;
        let secrets = (section.token(cx.env), cx.env.get(&config.app_secret_env), cx.env.get(&config.verify_token_env));
        let (Some(token), Some(app_secret), Some(verify_token)) = secrets else { return Ok(Started::default()) };
        let adapter = WhatsApp::new(&config, token, cx.clock.clone(), cx.engine.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let door = Door {
            whatsapp: adapter.clone(),
            app_secret: app_secret.into(),
            verify_token: verify_token.into(),
            applying: Arc::default(),
        };
        Ok(Started { serve: Some(Box::pin(adapter.serve())), routes: Some(webhook::routes(door)) })
    }

    fn advice(&self, _section: &ChatConfig, http: SocketAddr) -> Option<String> {
        Some(format!(
            "  whatsapp: in the Meta app's WhatsApp Configuration, the webhook's callback URL \
             https://<your host>/channels/whatsapp (reaching askgate on http://{http}/), its verify token the value \
             of verify_token_env, and the field `messages` subscribed (docs/src/whatsapp.md)"
        ))
    }
}
