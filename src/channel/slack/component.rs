//! Slack as a component: its section read, the adapter attached, its events received over
//! Socket Mode or askgate's own server.

use std::net::SocketAddr;

use super::config::Transport;
use super::{Slack, SlackConfig, events};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Slack platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Slack button, form or message."
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        Transport::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        let transport = Transport::read(section).unwrap_or_default();
        [Some(&section.token_env), transport.needs()].into_iter().flatten().cloned().collect()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let off = || Ok(Started { serve: None, routes: Some(events::routes(None, cx.clock.clone())) });
        let Some(chat) = cx.section else { return off() };
        let transport = Transport::read(chat)?;
        if self.variables(chat).iter().any(|name| cx.env.get(name).is_none()) {
            return off();
        }
        let Some(token) = chat.token(cx.env) else { return off() };
        let app_token = transport.app_token_env.as_ref().and_then(|name| cx.env.get(name));
        let secret = transport.signing_secret_env.as_ref().and_then(|name| cx.env.get(name));
        let adapter = Slack::new(&SlackConfig { token, app_token, api_url: chat.api_url.clone() }, cx.clock.clone())?;
        cx.engine.delivery().attach(adapter.clone());
        let door = secret.map(|secret| events::SlackEvents::new(adapter.clone(), secret));
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: Some(events::routes(door, cx.clock.clone())) })
    }

    fn advice(&self, section: &ChatConfig, http: SocketAddr) -> Option<String> {
        let transport = Transport::read(section).ok()?;
        Some(super::app_needs(transport.app_token_env.is_some(), http))
    }
}
