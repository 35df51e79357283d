//! Slack as a component: its section read, the adapter attached, its events received over
//! Socket Mode or askgate's own server.

use std::net::SocketAddr;

use super::{Slack, SlackConfig, events};
use crate::channel::{Context, PlatformError, Started};
use crate::config::ChatConfig;

/// The Slack platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        "slack"
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let off = || Ok(Started { serve: None, routes: Some(events::routes(None, cx.clock.clone())) });
        let Some(chat) = cx.section.filter(|c| c.unset(cx.env).is_none()) else { return off() };
        let Some(token) = chat.token(cx.env) else { return off() };
        let app_token = chat.app_token_env.as_ref().and_then(|name| cx.env.get(name));
        let secret = chat.signing_secret_env.as_ref().and_then(|name| cx.env.get(name));
        let adapter = Slack::new(&SlackConfig { token, app_token, api_url: chat.api_url.clone() }, cx.clock.clone())?;
        cx.engine.attach(adapter.clone());
        let door = secret.map(|secret| events::SlackEvents::new(adapter.clone(), secret));
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: Some(events::routes(door, cx.clock.clone())) })
    }

    fn advice(&self, section: &ChatConfig, http: SocketAddr) -> Option<String> {
        Some(super::app_needs(section.app_token_env.is_some(), http))
    }
}
