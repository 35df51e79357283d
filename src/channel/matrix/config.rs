//! `[channels.matrix]`'s own keys: the homeserver, the bot's account, and rooms to join.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only Matrix's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    homeserver: Option<String>,
    user_id: Option<String>,
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
    Ok(MatrixConfig { homeserver, user_id, rooms: own.rooms })
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

    fn checked(own: &str) -> Result<super::MatrixConfig, String> {
        let text = format!("[channels.matrix]\ntoken_env = \"M\"\n{own}");
        let config = Config::parse(&text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        super::read(config.chat("matrix").unwrap()).map_err(|e| e.to_string())
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
            ("homeserver = \"https://m\"\nuser_id = \"@a:x\"\npassword_env = \"P\"\n", "unknown field `password_env`"),
        ] {
            let err = checked(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
    }
}
