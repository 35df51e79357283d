//! `[channels.matrix]`'s own keys: the homeserver, the bot's account and how askgate signs in
//! as it (an access token, or the account's password), and rooms to join.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only Matrix's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    homeserver: Option<String>,
    user_id: Option<String>,
    password_env: Option<String>,
    #[serde(default)]
    rooms: Vec<String>,
}

/// Where the bot's account lives and what it joins at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixConfig {
    /// The homeserver's client-server API (`https://matrix.example.org`).
    pub homeserver: String,
    /// The bot's Matrix id (`@askgate:example.org`): the token must be this account's.
    pub user_id: String,
    /// Room ids or aliases joined at start (`!abc:example.org`, `#ops:example.org`).
    pub rooms: Vec<String>,
    /// How askgate signs in as the bot.
    pub secret: Secret,
}

/// How askgate signs in as the bot: the variable holding its secret, one of two kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Secret {
    /// `token_env`: an access token, used as it is.
    Token(String),
    /// `password_env`: the account's password, to log in with at start.
    Password(String),
}

impl Secret {
    /// The environment variable holding it.
    pub fn variable(&self) -> &str {
        match self {
            Self::Token(name) | Self::Password(name) => name,
        }
    }
}

/// The section's own keys.
///
/// # Errors
/// When a key is unknown, missing or its value unusable, naming the key.
pub fn read(section: &ChatConfig) -> Result<MatrixConfig, ConfigError> {
    let own: Own = section.read()?;
    let Some(homeserver) = own.homeserver else {
        return Err(section.fault("homeserver", "set homeserver, the URL of the bot's homeserver"));
    };
    if !(homeserver.starts_with("http://") || homeserver.starts_with("https://")) {
        return Err(section.fault("homeserver", format!("`{homeserver}` is not an http(s) URL")));
    }
    let Some(user_id) = own.user_id else {
        return Err(section.fault("user_id", "set user_id, the bot's Matrix id (@askgate:example.org)"));
    };
    if !is_id(&user_id, '@') {
        return Err(section.fault("user_id", format!("`{user_id}` is not a Matrix id like @askgate:example.org")));
    }
    if let Some(room) = own.rooms.iter().find(|r| !is_id(r, '!') && !is_id(r, '#')) {
        return Err(
            section.fault("rooms", format!("`{room}` is not a room id (!abc:example.org) or alias (#ops:example.org)"))
        );
    }
    let secret = match (section.token_env.is_empty(), own.password_env) {
        (true, None) => {
            return Err(section.fault(
                "token_env",
                "set token_env (the variable holding the bot's access token) or password_env (the variable \
                 holding its password)",
            ));
        }
        (false, Some(_)) => {
            return Err(section.fault(
                "password_env",
                "set token_env or password_env, not both: token_env for an access token, password_env for \
                 the account's password",
            ));
        }
        (true, Some(name)) if name.is_empty() => return Err(section.fault("password_env", "is empty")),
        (true, Some(name)) => Secret::Password(name),
        (false, None) => Secret::Token(section.token_env.clone()),
    };
    Ok(MatrixConfig { homeserver, user_id, rooms: own.rooms, secret })
}

/// Whether `id` is `<sigil>localpart:server`.
fn is_id(id: &str, sigil: char) -> bool {
    id.strip_prefix(sigil)
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(local, server)| !local.is_empty() && !server.is_empty() && !id.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    use super::Secret;

    fn checked(own: &str) -> Result<super::MatrixConfig, String> {
        read(&format!("[channels.matrix]\ntoken_env = \"M\"\n{own}"))
    }

    fn read(text: &str) -> Result<super::MatrixConfig, String> {
        let config = Config::parse(text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        crate::channel::check(&config).map_err(|e| e.to_string())?;
        super::read(config.chat("matrix").unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_bot_signs_in_with_a_token_or_a_password_exactly_one() {
        let account = "homeserver = \"https://m\"\nuser_id = \"@a:x\"\n";
        let token = read(&format!("[channels.matrix]\n{account}token_env = \"T\"\n")).unwrap();
        assert_eq!(token.secret, Secret::Token("T".into()));
        let password = read(&format!("[channels.matrix]\n{account}password_env = \"P\"\n")).unwrap();
        assert_eq!((&password.secret, password.secret.variable()), (&Secret::Password("P".into()), "P"));
        for (keys, says) in [
            (
                "token_env = \"T\"\npassword_env = \"P\"\n",
                "`channels.matrix.password_env`: set token_env or password_env, not both",
            ),
            (
                "",
                "`channels.matrix.token_env`: set token_env (the variable holding the bot's access token) or password_env",
            ),
            ("password_env = \"\"\n", "`channels.matrix.password_env`: is empty"),
        ] {
            let err = read(&format!("[channels.matrix]\n{account}{keys}")).unwrap_err();
            assert!(err.contains(says), "{keys}: {err}");
        }
    }

    #[test]
    fn the_homeserver_and_the_bots_id_are_required_and_checked_where_they_are() {
        let ok = checked(
            "homeserver = \"https://m.example.org\"\nuser_id = \"@askgate:example.org\"\nrooms = [\"#ops:example.org\"]\n",
        );
        assert_eq!(ok.unwrap().rooms, ["#ops:example.org"]);
        for (own, says) in [
            ("user_id = \"@a:x\"\n", "`channels.matrix.homeserver`: set homeserver"),
            ("homeserver = \"m.example.org\"\nuser_id = \"@a:x\"\n", "is not an http(s) URL"),
            ("homeserver = \"https://m\"\n", "`channels.matrix.user_id`: set user_id"),
            ("homeserver = \"https://m\"\nuser_id = \"askgate\"\n", "is not a Matrix id"),
            ("homeserver = \"https://m\"\nuser_id = \"@a:x\"\nrooms = [\"ops\"]\n", "`channels.matrix.rooms`"),
            ("homeserver = \"https://m\"\nuser_id = \"@a:x\"\npasword_env = \"P\"\n", "unknown field `pasword_env`"),
        ] {
            let err = checked(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
    }
}
