//! Teams as a component: its section read, the adapter attached, its messaging endpoint
//! served on askgate's own server.

use std::net::SocketAddr;
use std::sync::Arc;

use super::auth::Door;
use super::connector::Connector;
use super::{Teams, config};
use crate::channel::{Context, PlatformError, Started};
use crate::config::{ChatConfig, ConfigError};

/// The Teams platform.
pub struct Platform;

impl crate::channel::Component for Platform {
    fn name(&self) -> &'static str {
        super::SURFACE.as_str()
    }

    fn answered_on(&self) -> &'static str {
        "A Microsoft Teams card button or message."
    }

    fn title(&self) -> String {
        "Microsoft Teams".to_owned()
    }

    // Its secrets are the app's id and password, each with a key of its own.
    fn has_token(&self) -> bool {
        false
    }

    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError> {
        config::read(section).map(|_| ())
    }

    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        config::read(section).map(|c| vec![c.app_id_env, c.app_password_env]).unwrap_or_default()
    }

    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError> {
        let off = || Ok(Started { serve: None, routes: Some(super::routes::routes(None)) });
        let Some(chat) = cx.section else { return off() };
        let config = config::read(chat)?;
        let (Some(app_id), Some(password)) = (cx.env.get(&config.app_id_env), cx.env.get(&config.app_password_env))
        else {
            return off();
        };
        let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(15)).build()?;
        let connector =
            Connector::new(http.clone(), config.token_url.clone(), app_id.clone(), password, cx.clock.clone());
        let (records, claims) = (cx.engine.records().clone(), cx.engine.claims().clone());
        let adapter = Teams::new(app_id.clone(), connector, records, claims, cx.clock.clone());
        cx.engine.delivery().attach(adapter.clone());
        let door = Arc::new(Door::new(http, config.openid_url.clone(), app_id));
        let routes = super::routes::routes(Some((adapter.clone(), door.clone(), cx.engine.clone())));
        let (engine, stop) = (cx.engine.clone(), cx.engine.stopping());
        let serve = async move { adapter.serve(door, engine, stop).await.map_err(Into::into) };
        Ok(Started { serve: Some(Box::pin(serve)), routes: Some(routes) })
    }

    fn advice(&self, section: &ChatConfig, http: SocketAddr) -> Option<String> {
        config::read(section).ok()?;
        Some(format!(
            "  teams: an Azure Bot with the Microsoft Teams channel on; its messaging endpoint \
             https://<your host>/channels/teams, reaching askgate on http://{http}/ (docs/src/teams.md)"
        ))
    }
}
