//! `[channels.telegram]`'s own keys: webhook mode, instead of long polling.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only Telegram's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    webhook_url: Option<String>,
    webhook_listen: Option<String>,
    webhook_secret_env: Option<String>,
}

/// Where Telegram delivers updates in webhook mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The public HTTPS URL Telegram POSTs to.
    pub url: String,
    /// The local address askgate listens on.
    pub listen: std::net::SocketAddr,
    /// The environment variable holding the secret token Telegram sends with each update.
    pub secret_env: String,
}

/// The section's webhook mode, when it sets one.
///
/// # Errors
/// When a key is unknown or its value unusable, naming the key.
pub fn webhook(section: &ChatConfig) -> Result<Option<WebhookConfig>, ConfigError> {
    let own: Own = section.read()?;
    match (own.webhook_url, own.webhook_listen, own.webhook_secret_env) {
        (None, None, None) => Ok(None),
        (Some(url), Some(listen), Some(secret_env)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(section.fault("webhook_url", format!("`{url}` is not an http(s) URL")));
            }
            let listen = listen.parse().map_err(|_| {
                section.fault("webhook_listen", format!("`{listen}` is not an address like 0.0.0.0:8443"))
            })?;
            Ok(Some(WebhookConfig { url, listen, secret_env }))
        }
        _ => Err(section
            .fault("webhook_url", "webhook mode needs webhook_url, webhook_listen and webhook_secret_env together")),
    }
}
