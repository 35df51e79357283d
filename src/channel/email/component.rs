//! Email as a component: its section read, the adapter attached, its mailbox watched, and
//! with `link_base` the routes of its one-click links.

use std::sync::Arc;

use super::Email;
use super::mailbox::{ImapUrl, watch};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The email platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A reply by email."
    }

    fn has_token(&self) -> bool {
        false
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        super::config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        super::config::read(section).map(|c| vec![c.smtp_url_env, c.imap_url_env]).unwrap_or_default()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let Some(section) = cx.section else { return Ok(Started::default()) };
        let config = super::config::read(section)?;
        let (Some(smtp), Some(imap)) = (cx.env.get(&config.smtp_url_env), cx.env.get(&config.imap_url_env)) else {
            return Ok(Started::default());
        };
        let url = ImapUrl::parse(&imap).map_err(|e| format!("{}: {e}", config.imap_url_env))?;
        let adapter = Arc::new(
            Email::new(&config.from, config.link_base.as_deref(), &smtp, cx.clock.clone())
                .map_err(|e| format!("{}: {e}", config.smtp_url_env))?,
        );
        cx.engine.delivery().attach(adapter.clone());
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let routes = config.link_base.is_some().then(|| super::links::routes(cx.engine.clone(), cx.clock.clone()));
        Ok(Started { serve: Some(Box::pin(watch(adapter, url, engine, stop))), routes })
    }
}
