//! `[channels.slack]`'s own keys: how events come, over Socket Mode or the Events API.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// How Slack's events come: the variables of the app-level token (Socket Mode) and of the
/// signing secret (the Events API over HTTP); at least one is set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// The app-level token's variable; set, events come over Socket Mode.
    pub app_token_env: Option<String>,
    /// The signing secret's variable, for events over HTTP.
    pub signing_secret_env: Option<String>,
}

impl Transport {
    /// The section's transport.
    ///
    /// # Errors
    /// When a key is unknown or empty, or neither is set, naming the key.
    pub fn read(section: &ChatConfig) -> Result<Self, ConfigError> {
        let transport: Self = section.read()?;
        for (key, value) in
            [("app_token_env", &transport.app_token_env), ("signing_secret_env", &transport.signing_secret_env)]
        {
            if value.as_deref().is_some_and(str::is_empty) {
                return Err(section.fault(key, "is empty"));
            }
        }
        if transport.app_token_env.is_none() && transport.signing_secret_env.is_none() {
            return Err(section.fault(
                "app_token_env",
                "set app_token_env (Socket Mode, no public URL) or signing_secret_env (the Events API over HTTP)",
            ));
        }
        Ok(transport)
    }

    /// The variables this transport needs: the app-level token's, or (without one) the
    /// signing secret's.
    pub fn needs(&self) -> Option<&String> {
        self.app_token_env.as_ref().or(self.signing_secret_env.as_ref())
    }
}
