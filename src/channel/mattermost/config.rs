//! `[channels.mattermost]`'s own keys: the server, askgate's public address for the buttons'
//! requests, and (optionally) the secret their commands are signed with.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only Mattermost's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    url: Option<String>,
    public_url: Option<String>,
    action_secret_env: Option<String>,
}

/// Where the server is, and where it sends the buttons' requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MattermostConfig {
    /// The server's base URL (`https://chat.example.com`): REST under `/api/v4`, the WebSocket
    /// at `/api/v4/websocket`.
    pub url: String,
    /// askgate's public base URL, as the Mattermost server reaches it: a button's request goes
    /// to `<public_url>/channels/mattermost/actions`.
    pub public_url: String,
    /// The variable holding the key the buttons' commands are signed with; none: a key derived
    /// from the bot's token.
    pub action_secret_env: Option<String>,
}

/// The section's own keys.
///
/// # Errors
/// When a key is unknown, missing or its value unusable, naming the key.
pub fn read(section: &ChatConfig) -> Result<MattermostConfig, ConfigError> {
    let own: Own = section.read()?;
    let url = required(section, "url", own.url, "set url, the Mattermost server's base URL")?;
    let public_url = required(
        section,
        "public_url",
        own.public_url,
        "set public_url, askgate's base URL as the Mattermost server reaches it (its buttons' requests go there)",
    )?;
    if own.action_secret_env.as_deref().is_some_and(str::is_empty) {
        return Err(section.fault("action_secret_env", "is empty"));
    }
    Ok(MattermostConfig {
        url: url.trim_end_matches('/').to_owned(),
        public_url: public_url.trim_end_matches('/').to_owned(),
        action_secret_env: own.action_secret_env,
    })
}

/// The http(s) URL `value` of `key`, which must be set.
fn required(section: &ChatConfig, key: &str, value: Option<String>, missing: &str) -> Result<String, ConfigError> {
    let Some(value) = value else { return Err(section.fault(key, missing)) };
    let usable = url::Url::parse(&value).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
    if !usable {
        return Err(section.fault(key, format!("`{value}` is not an http(s) URL")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn read(own: &str) -> Result<super::MattermostConfig, String> {
        let text = format!("[channels.mattermost]\ntoken_env = \"M\"\n{own}");
        let config = Config::parse(&text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        crate::channel::check(&config).map_err(|e| e.to_string())?;
        super::read(config.chat("mattermost").unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn both_urls_are_required_with_errors_naming_their_key() {
        let ok = read("url = \"https://chat.example.com/\"\npublic_url = \"https://askgate.example.com\"\n").unwrap();
        assert_eq!((ok.url.as_str(), ok.action_secret_env), ("https://chat.example.com", None));
        let signed = "url = \"http://m\"\npublic_url = \"http://a\"\naction_secret_env = \"S\"\n";
        assert_eq!(read(signed).unwrap().action_secret_env.as_deref(), Some("S"));
        for (own, says) in [
            ("public_url = \"http://a\"\n", "`channels.mattermost.url`: set url"),
            ("url = \"chat.example.com\"\npublic_url = \"http://a\"\n", "is not an http(s) URL"),
            ("url = \"http://m\"\n", "`channels.mattermost.public_url`: set public_url"),
            ("url = \"http://m\"\npublic_url = \"ftp://a\"\n", "`channels.mattermost.public_url`: `ftp://a`"),
            (
                "url = \"http://m\"\npublic_url = \"http://a\"\naction_secret_env = \"\"\n",
                "action_secret_env`: is empty",
            ),
            ("url = \"http://m\"\npublic_url = \"http://a\"\nteam = \"x\"\n", "unknown field `team`"),
        ] {
            let err = read(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
    }
}
