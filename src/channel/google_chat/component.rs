//! Google Chat as a component: its section read, the service account's key read from its
//! variable, the adapter attached, its endpoint served on askgate's own server.

use std::net::SocketAddr;
use std::sync::Arc;

use super::config::{self, ServiceAccount};
use super::{GoogleChat, door};
use crate::channel::jwt::Keys;
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Google Chat platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Google Chat button or message."
    }

    fn title(&self) -> String {
        "Google Chat".to_owned()
    }

    // Its secret is the service account's key, named by `service_account_env`.
    fn has_token(&self) -> bool {
        false
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        config::read(section).map(|c| vec![c.service_account_env]).unwrap_or_default()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(chat) = cx.section else { return Ok(Started::default()) };
        let config = config::read(chat)?;
        let Some(key) = cx.env.get(&config.service_account_env) else { return Ok(Started::default()) };
        let account = ServiceAccount::parse(&config.service_account_env, &key)?;
        let http = reqwest::Client::builder().build()?;
        let adapter = GoogleChat::new(&config, account, http.clone(), cx.clock.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let keys = Arc::new(Keys::jwks(http, config.jwks_url.clone()).with_clock(cx.clock.clone()));
        let door = door::Door::new(adapter.clone(), cx.engine.clone(), keys.clone(), &config.audience);
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move {
            adapter.serve(engine, keys, stop).await;
            Ok(())
        };
        Ok(Started { serve: Some(Box::pin(serve)), routes: Some(door::routes(door)) })
    }

    fn advice(&self, section: &ChatConfig, http: SocketAddr) -> Option<String> {
        let config = config::read(section).ok()?;
        Some(format!(
            "  google chat app: the Chat API enabled in the Cloud project, an HTTP endpoint app whose URL is \
             https://<your host>{} (reaching askgate on http://{http}/), authentication audience {} \
             (docs/src/google-chat.md)",
            door::PATH,
            config.audience.as_str()
        ))
    }
}
