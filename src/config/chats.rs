//! The chat platforms' `[channels.<name>]` sections. The keys every platform shares (its
//! token, its API's address, who may do what there) are read here; the rest of the section is
//! kept as written, and the platform reads it (`crate::channel`), with errors that name the key
//! and where it is in the file.

use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, MapAccess, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::raw::{CHAT_KEYS, RawChat};
use super::{ConfigError, Env};

/// A chat platform's section: what every platform has, and the platform's own keys.
#[derive(Clone, Debug)]
pub struct ChatConfig {
    /// The section's name: the platform it is for (`[channels.<name>]`).
    pub name: String,
    /// The environment variable holding the token; empty when the section names none (a
    /// platform whose secrets have keys of their own).
    pub token_env: String,
    /// A different API base URL (a self-hosted server, or a test double).
    pub api_url: Option<String>,
    /// `allowed_users` as written, for a platform that checks the form of its ids.
    pub allowed_users: Vec<String>,
    /// The file's name and text: the platform's own keys are read from it, with errors that
    /// point into it.
    file: Arc<(String, String)>,
}

impl ChatConfig {
    /// The token, when its variable is set and not empty.
    pub fn token(&self, env: &Env) -> Option<String> {
        env.get(&self.token_env)
    }

    /// The platform's own keys as `T`, which refuses the keys it does not know.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key, with its line and column.
    pub fn read<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let own = self.own().map_err(|e| self.located(e))?;
        T::deserialize(ValueDeserializer::from(own)).map_err(|e| self.located(e))
    }

    /// The section's keys but those every platform has, where they are in the file.
    fn own(&self) -> Result<Spanned<DeValue<'_>>, toml::de::Error> {
        let sections = sections(&self.file.1)?;
        let section = sections.into_iter().find(|(name, _)| *name == self.name).map(|(_, section)| section);
        Ok(split(section.unwrap_or_else(|| Spanned::new(0..0, DeValue::Table(DeTable::new())))).1)
    }

    /// The platform's key `key` is not acceptable: a [`ConfigError::Value`] naming
    /// `channels.<name>.<key>`.
    pub fn fault(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let key = format!("channels.{}.{key}", self.name);
        ConfigError::Value { path: self.file.0.clone(), key, message: message.into() }
    }

    /// The section itself is refused (no platform has its name): an error pointing at it.
    pub fn refuse(&self, message: &str) -> ConfigError {
        struct Refuse<'a>(&'a str);
        impl<'de> Visitor<'de> for Refuse<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
                Err(de::Error::custom(self.0))
            }
        }
        let refused =
            self.own().and_then(|own| de::Deserializer::deserialize_any(ValueDeserializer::from(own), Refuse(message)));
        refused.err().map_or_else(|| self.fault("", message), |e| self.located(e))
    }

    fn located(&self, mut e: toml::de::Error) -> ConfigError {
        e.set_input(Some(&self.file.1));
        ConfigError::Invalid { path: self.file.0.clone(), message: e.to_string().trim_end().to_owned() }
    }
}

/// The sections of `[channels]` besides the console's and the webhooks': the chat platforms',
/// with the keys they share read.
pub(super) fn chats(text: &str, path: &str) -> Result<Vec<(RawChat, ChatConfig)>, ConfigError> {
    let file = Arc::new((path.to_owned(), text.to_owned()));
    let located = |mut e: toml::de::Error| {
        e.set_input(Some(text));
        ConfigError::Invalid { path: path.to_owned(), message: e.to_string().trim_end().to_owned() }
    };
    let mut chats = Vec::new();
    for (name, section) in sections(text).map_err(located)? {
        let raw = RawChat::deserialize(ValueDeserializer::from(split(section).0)).map_err(located)?;
        let (token_env, api_url) = (raw.token_env.clone().unwrap_or_default(), raw.api_url.clone());
        let allowed_users = raw.allowed_users.clone();
        chats.push((raw, ChatConfig { name, token_env, api_url, allowed_users, file: file.clone() }));
    }
    Ok(chats)
}

/// The platforms' sections in the file `text`, by name.
fn sections(text: &str) -> Result<Vec<(String, Spanned<DeValue<'_>>)>, toml::de::Error> {
    let root = DeTable::parse(text)?.into_inner();
    let channels = root.into_iter().find(|(k, _)| *k.get_ref() == "channels").map(|(_, v)| v.into_inner());
    let Some(DeValue::Table(channels)) = channels else { return Ok(Vec::new()) };
    let platforms = channels.into_iter().map(|(name, section)| (name.into_inner().into_owned(), section));
    Ok(platforms.filter(|(name, _)| name != "console" && name != "webhook").collect())
}

/// A section's keys every platform has, and the platform's own, each where the section is.
fn split(section: Spanned<DeValue<'_>>) -> (Spanned<DeValue<'_>>, Spanned<DeValue<'_>>) {
    let span = section.span();
    match section.into_inner() {
        DeValue::Table(keys) => {
            let (shared, own): (DeTable<'_>, DeTable<'_>) =
                keys.into_iter().partition(|(k, _)| CHAT_KEYS.contains(&&**k.get_ref()));
            (Spanned::new(span.clone(), DeValue::Table(shared)), Spanned::new(span, DeValue::Table(own)))
        }
        // Not a table: what every platform has refuses it.
        other => (Spanned::new(span.clone(), other), Spanned::new(span, DeValue::Table(DeTable::new()))),
    }
}
