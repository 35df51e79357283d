//! `[channels.google_chat]`'s own keys: the service account's variable, the audience Google
//! Chat signs its requests for, and where Google's keys are; and the service account's JSON
//! key itself, read from its variable at start.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// Where Google publishes the keys of the tokens Chat signs with a project number as their
/// audience.
pub const CHAT_KEYS: &str = "https://www.googleapis.com/service_accounts/v1/jwk/chat@system.gserviceaccount.com";
/// Where Google publishes the keys of its ID tokens (an endpoint URL as the audience).
pub const GOOGLE_KEYS: &str = "https://www.googleapis.com/oauth2/v3/certs";
/// The Chat API.
pub const CHAT_API: &str = "https://chat.googleapis.com";
/// Google's token endpoint, when a key does not name its own.
pub const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The keys only Google Chat's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    service_account_env: Option<String>,
    audience: Option<String>,
    jwks_url: Option<String>,
}

/// What the Chat app is and where its requests are checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoogleChatConfig {
    /// The variable holding the service account's JSON key.
    pub service_account_env: String,
    /// Whom Chat's requests are for.
    pub audience: Audience,
    /// Where the keys that sign Chat's requests are published.
    pub jwks_url: String,
    /// The Chat API's base (`https://chat.googleapis.com`).
    pub api_url: String,
}

/// The app's authentication audience, as set in its Chat API configuration: it decides which
/// token Chat sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Audience {
    /// The Cloud project's number: a token issued by `chat@system.gserviceaccount.com`.
    Project(String),
    /// The HTTP endpoint's URL: a Google ID token whose `email` is
    /// `chat@system.gserviceaccount.com`.
    Url(String),
}

impl Audience {
    /// The token's `aud`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Project(number) | Self::Url(number) => number,
        }
    }
}

/// The section's own keys.
///
/// # Errors
/// When a key is unknown, missing or its value unusable, naming the key.
pub fn read(section: &ChatConfig) -> Result<GoogleChatConfig, ConfigError> {
    if !section.token_env.is_empty() {
        return Err(section.fault(
            "token_env",
            "Google Chat has no token: set service_account_env, the variable holding the service account's JSON key",
        ));
    }
    let own: Own = section.read()?;
    let service_account_env = match own.service_account_env {
        None => {
            return Err(section.fault(
                "service_account_env",
                "set service_account_env, the variable holding the service account's JSON key",
            ));
        }
        Some(name) if name.is_empty() => return Err(section.fault("service_account_env", "is empty")),
        Some(name) => name,
    };
    let audience = match own.audience {
        None => {
            return Err(section.fault(
                "audience",
                "set audience: the Cloud project's number, or the endpoint's URL (as the Chat app's \
                 authentication audience says)",
            ));
        }
        Some(url) if is_url(&url) => Audience::Url(url),
        Some(number) if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) => Audience::Project(number),
        Some(other) => {
            return Err(section.fault("audience", format!("`{other}` is neither a project number nor an http(s) URL")));
        }
    };
    for (key, url) in [("jwks_url", &own.jwks_url), ("api_url", &section.api_url)] {
        if let Some(url) = url.as_deref().filter(|u| !is_url(u)) {
            return Err(section.fault(key, format!("`{url}` is not an http(s) URL")));
        }
    }
    let jwks_url = own.jwks_url.unwrap_or_else(|| match audience {
        Audience::Project(_) => CHAT_KEYS.to_owned(),
        Audience::Url(_) => GOOGLE_KEYS.to_owned(),
    });
    let api_url = section.api_url.clone().unwrap_or_else(|| CHAT_API.to_owned());
    Ok(GoogleChatConfig { service_account_env, audience, jwks_url, api_url })
}

fn is_url(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

/// A service account's JSON key, the fields askgate uses.
#[derive(Clone, Deserialize)]
pub struct ServiceAccount {
    /// The account's address: the assertion's issuer.
    pub client_email: String,
    /// Its RSA private key (PEM, PKCS#8).
    pub private_key: String,
    /// The key's id, named in the assertion's header.
    #[serde(default)]
    pub private_key_id: Option<String>,
    /// Where the assertion is exchanged for an access token.
    #[serde(default = "default_token_uri")]
    pub token_uri: String,
}

fn default_token_uri() -> String {
    TOKEN_URI.to_owned()
}

impl std::fmt::Debug for ServiceAccount {
    // The private key never prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

impl ServiceAccount {
    /// The key in the variable `variable` (its JSON text).
    ///
    /// # Errors
    /// Saying what is wrong with it, naming the variable, never quoting the key.
    pub fn parse(variable: &str, json: &str) -> Result<Self, String> {
        let account: Self = serde_json::from_str(json).map_err(|e| {
            format!(
                "{variable} is not a service account's JSON key (client_email, private_key, token_uri): line {} column {}",
                e.line(),
                e.column()
            )
        })?;
        if !account.private_key.contains("PRIVATE KEY-----") {
            return Err(format!("{variable}: private_key is not a PEM private key"));
        }
        if !is_url(&account.token_uri) {
            return Err(format!("{variable}: token_uri `{}` is not an http(s) URL", account.token_uri));
        }
        Ok(account)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn read(own: &str) -> Result<GoogleChatConfig, String> {
        let text = format!("[channels.google_chat]\n{own}");
        let config = Config::parse(&text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        crate::channel::check(&config).map_err(|e| e.to_string())?;
        super::read(config.chat("google_chat").unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_audience_chooses_the_token_and_its_keys() {
        let project = read("service_account_env = \"G\"\naudience = \"1234567890\"\n").unwrap();
        assert_eq!(project.audience, Audience::Project("1234567890".into()));
        assert_eq!((project.jwks_url.as_str(), project.api_url.as_str()), (CHAT_KEYS, CHAT_API));
        let url =
            read("service_account_env = \"G\"\naudience = \"https://askgate.example.org/channels/google-chat\"\n")
                .unwrap();
        assert_eq!(url.audience.as_str(), "https://askgate.example.org/channels/google-chat");
        assert_eq!(url.jwks_url, GOOGLE_KEYS);
        let aimed = read(
            "service_account_env = \"G\"\naudience = \"1\"\njwks_url = \"http://127.0.0.1:9/k\"\napi_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        assert_eq!((aimed.jwks_url.as_str(), aimed.api_url.as_str()), ("http://127.0.0.1:9/k", "http://127.0.0.1:9"));
    }

    #[test]
    fn keys_missing_or_unusable_are_named() {
        for (own, says) in [
            ("audience = \"1\"\n", "`channels.google_chat.service_account_env`: set service_account_env"),
            ("service_account_env = \"\"\naudience = \"1\"\n", "`channels.google_chat.service_account_env`: is empty"),
            ("service_account_env = \"G\"\n", "`channels.google_chat.audience`: set audience"),
            ("service_account_env = \"G\"\naudience = \"my-project\"\n", "neither a project number nor"),
            (
                "service_account_env = \"G\"\naudience = \"1\"\njwks_url = \"ftp://x\"\n",
                "`channels.google_chat.jwks_url`",
            ),
            ("service_account_env = \"G\"\naudience = \"1\"\napi_url = \"chat\"\n", "`channels.google_chat.api_url`"),
            ("token_env = \"T\"\nservice_account_env = \"G\"\naudience = \"1\"\n", "Google Chat has no token"),
            ("service_account_env = \"G\"\naudience = \"1\"\nsecret = \"x\"\n", "unknown field `secret`"),
        ] {
            let err = read(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
    }

    #[test]
    fn a_service_account_key_is_read_without_printing_its_secret() {
        let json = r#"{"type": "service_account", "client_email": "askgate@p.iam.gserviceaccount.com",
            "private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n", "private_key_id": "k1"}"#;
        let account = ServiceAccount::parse("G", json).unwrap();
        assert_eq!((account.token_uri.as_str(), account.private_key_id.as_deref()), (TOKEN_URI, Some("k1")));
        assert!(!format!("{account:?}").contains("MII"));
        let err = ServiceAccount::parse("G", "{\"client_email\": \"a\"}").unwrap_err();
        assert!(err.starts_with("G is not a service account's JSON key"), "{err}");
        let bad = r#"{"client_email": "a", "private_key": "secret", "token_uri": "https://t"}"#;
        let err = ServiceAccount::parse("G", bad).unwrap_err();
        assert!(err.contains("not a PEM private key") && !err.contains("secret\""), "{err}");
    }
}
