//! `[channels.teams]`'s own keys: the variables holding the bot's Microsoft app id and its
//! password (client secret), the tenant of a single-tenant bot, and the two Microsoft
//! endpoints askgate talks to (tests aim them at loopback doubles).

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// Where the Bot Framework publishes the keys that sign the activities it sends.
pub const OPENID_URL: &str = "https://login.botframework.com/v1/.well-known/openidconfiguration";

/// Where a multi-tenant bot gets its tokens; a single-tenant bot's `tenant` takes the place of
/// `botframework.com` in it.
pub const TOKEN_URL: &str = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token";

/// The keys only Teams' section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    app_id_env: Option<String>,
    app_password_env: Option<String>,
    tenant: Option<String>,
    openid_url: Option<String>,
    token_url: Option<String>,
}

/// How askgate is the bot, and where it checks and gets tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamsConfig {
    /// The variable holding the bot's Microsoft app id (the audience of the activities' tokens).
    pub app_id_env: String,
    /// The variable holding the app's password (its client secret).
    pub app_password_env: String,
    /// The tenant of a single-tenant bot (its id or domain); none for a multi-tenant bot.
    pub tenant: Option<String>,
    /// The Bot Framework's OpenID metadata, naming the keys that sign activities.
    pub openid_url: String,
    /// The token endpoint of the client-credentials grant.
    pub token_url: String,
}

/// The section's own keys. `token_url` given is used as it is; otherwise it is
/// [`TOKEN_URL`], with `tenant` in place of `botframework.com` when set.
///
/// # Errors
/// When a key is unknown, missing or its value unusable, naming the key.
pub fn read(section: &ChatConfig) -> Result<TeamsConfig, ConfigError> {
    let own: Own = section.read()?;
    if !section.token_env.is_empty() {
        return Err(section.fault(
            "token_env",
            "Teams has no token of its own: set app_id_env and app_password_env (the bot's app id and password)",
        ));
    }
    let variable = |key: &str, value: Option<String>, what: &str| match value {
        None => Err(section.fault(key, format!("set {key}, the variable holding {what}"))),
        Some(name) if name.is_empty() => Err(section.fault(key, "is empty")),
        Some(name) => Ok(name),
    };
    let app_id_env = variable("app_id_env", own.app_id_env, "the bot's Microsoft app id")?;
    let app_password_env = variable("app_password_env", own.app_password_env, "the app's password")?;
    let tenant = match own.tenant {
        Some(t) if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c)) => {
            return Err(section.fault("tenant", format!("`{t}` is not a tenant id or domain")));
        }
        other => other,
    };
    let url = |key: &str, value: Option<String>, default: String| {
        let url = value.unwrap_or(default);
        if url.starts_with("http://") || url.starts_with("https://") {
            Ok(url)
        } else {
            Err(section.fault(key, format!("`{url}` is not an http(s) URL")))
        }
    };
    let default_token_url = match &tenant {
        Some(tenant) => TOKEN_URL.replace("botframework.com", tenant),
        None => TOKEN_URL.to_owned(),
    };
    let openid_url = url("openid_url", own.openid_url, OPENID_URL.to_owned())?;
    let token_url = url("token_url", own.token_url, default_token_url)?;
    Ok(TeamsConfig { app_id_env, app_password_env, tenant, openid_url, token_url })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn read(own: &str) -> Result<super::TeamsConfig, String> {
        let text = format!("[channels.teams]\n{own}");
        let config = Config::parse(&text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        crate::channel::check(&config).map_err(|e| e.to_string())?;
        super::read(config.chat("teams").unwrap()).map_err(|e| e.to_string())
    }

    const APP: &str = "app_id_env = \"I\"\napp_password_env = \"P\"\n";

    #[test]
    fn a_multi_tenant_bot_gets_the_bot_frameworks_endpoints() {
        let c = read(APP).unwrap();
        assert_eq!((c.app_id_env.as_str(), c.app_password_env.as_str(), c.tenant), ("I", "P", None));
        assert_eq!((c.openid_url.as_str(), c.token_url.as_str()), (super::OPENID_URL, super::TOKEN_URL));
    }

    #[test]
    fn a_single_tenant_bot_gets_its_tokens_from_its_tenant_unless_token_url_says_otherwise() {
        let c = read(&format!("{APP}tenant = \"contoso.onmicrosoft.com\"\n")).unwrap();
        assert_eq!(c.token_url, "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token");
        let c = read(&format!("{APP}tenant = \"contoso.onmicrosoft.com\"\ntoken_url = \"http://127.0.0.1:9/t\"\n"));
        assert_eq!(c.unwrap().token_url, "http://127.0.0.1:9/t");
    }

    #[test]
    fn keys_that_do_not_fit_are_named() {
        for (own, says) in [
            ("app_password_env = \"P\"\n", "`channels.teams.app_id_env`: set app_id_env"),
            ("app_id_env = \"I\"\n", "`channels.teams.app_password_env`: set app_password_env"),
            ("app_id_env = \"\"\napp_password_env = \"P\"\n", "`channels.teams.app_id_env`: is empty"),
            (&format!("{APP}token_env = \"T\"\n"), "`channels.teams.token_env`: Teams has no token"),
            (&format!("{APP}tenant = \"a b\"\n"), "`channels.teams.tenant`: `a b` is not a tenant"),
            (&format!("{APP}openid_url = \"login\"\n"), "`channels.teams.openid_url`: `login` is not an http(s) URL"),
            (&format!("{APP}tokn_url = \"x\"\n"), "unknown field `tokn_url`"),
        ] {
            let err = read(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
    }
}
