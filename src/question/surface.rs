//! Where an answer came from: a surface's name, as stored and shown.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Where an answer came from, by name: one of the core surfaces below, or a chat platform's,
/// which the platform names in its own folder (`channel::telegram::SURFACE`), equal to its
/// component's name.
///
/// The question module cannot see the platforms, so reading a stored name
/// ([`Surface::from_stored`]) accepts the core names and any other name made of `a`–`z` and
/// inner `_` (`google_chat`), at most [`MAX_NAME`] long (a platform's); `channel` checks that
/// every platform's name is such a name and reads back as its own surface. A name read that
/// is not a core one is kept once for the life of the process, at most [`MAX_NAMES`] of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Surface(&'static str);

/// The longest name of a surface that is not a core one.
pub const MAX_NAME: usize = 32;
/// The most names of surfaces that are not core ones one process reads.
pub const MAX_NAMES: usize = 64;

/// The core surfaces, each with what it is (the API reference's words).
const CORE: [(Surface, &str); 8] = [
    (Surface::CONSOLE, "The local stdin/stdout channel."),
    (Surface::WEBHOOK, "A text channel reached through signed webhooks."),
    (Surface::WEB, "The web page."),
    (Surface::TUI, "The terminal UI, `askgate tui`."),
    (Surface::API, "The REST API."),
    (Surface::GATEWAY, "askgate itself: timeouts, cancellations, standing grants."),
    (Surface::OTHER, "A channel that a Rust program attached itself."),
    (Surface::MCP, "The agent's own MCP client (a form it showed its user)."),
];

/// The names read that are not core ones, each kept once.
static READ: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

impl Surface {
    /// The local stdin/stdout channel.
    pub const CONSOLE: Self = Self("console");
    /// A text channel reached through signed webhooks.
    pub const WEBHOOK: Self = Self("webhook");
    /// The web page.
    pub const WEB: Self = Self("web");
    /// The terminal UI, `askgate tui`.
    pub const TUI: Self = Self("tui");
    /// The REST API.
    pub const API: Self = Self("api");
    /// askgate itself: timeouts, cancellations, standing grants.
    pub const GATEWAY: Self = Self("gateway");
    /// A channel that a Rust program attached itself.
    pub const OTHER: Self = Self("other");
    /// The agent's own MCP client (a form it showed its user).
    pub const MCP: Self = Self("mcp");

    /// A chat platform's surface, named by the platform: its component's name.
    pub const fn platform(name: &'static str) -> Self {
        Self(name)
    }

    /// The stored and displayed name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The core surfaces, each with what it is.
    pub fn core() -> impl Iterator<Item = (Self, &'static str)> {
        CORE.into_iter()
    }

    /// Reads a stored name: a core surface's, or a platform's (see [`Surface`]).
    ///
    /// # Errors
    /// When the name is neither a core one nor made of `a`–`z` and inner `_`, or too many
    /// such were read.
    pub fn from_stored(s: &str) -> Result<Self, String> {
        if let Some((core, _)) = CORE.iter().find(|(c, _)| c.0 == s) {
            return Ok(*core);
        }
        let unknown = || format!("unknown Surface `{s}`");
        let letters = s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if s.is_empty() || s.len() > MAX_NAME || !letters || s.starts_with('_') || s.ends_with('_') {
            return Err(unknown());
        }
        let mut read = READ.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(name) = read.get(s) {
            return Ok(Self(name));
        }
        if read.len() >= MAX_NAMES {
            return Err(unknown());
        }
        let name: &'static str = Box::leak(s.to_owned().into_boxed_str());
        read.insert(name);
        Ok(Self(name))
    }
}

impl std::str::FromStr for Surface {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::from_stored(s)
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Surface {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Surface {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Self::from_stored(&s).map_err(serde::de::Error::custom)
    }
}

/// The core surfaces as alternatives; the API reference adds the platforms' before them.
impl schemars::JsonSchema for Surface {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Surface".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let alternatives: Vec<serde_json::Value> = CORE
            .iter()
            .map(|(s, said)| serde_json::json!({"type": "string", "const": s.0, "description": said}))
            .collect();
        schemars::json_schema!({"description": "Where an answer came from.", "oneOf": alternatives})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_name_reads_back_as_its_surface() {
        for (core, _) in Surface::core() {
            assert_eq!(Surface::from_stored(core.as_str()), Ok(core));
        }
        assert_eq!(Surface::from_stored("telegram"), Ok(Surface::platform("telegram")));
        assert_eq!(Surface::from_stored("google_chat"), Ok(Surface::platform("google_chat")));
        assert_eq!(serde_json::to_string(&Surface::WEB).unwrap(), "\"web\"");
        assert_eq!(serde_json::from_str::<Surface>("\"web\"").unwrap(), Surface::WEB);
    }

    #[test]
    fn a_name_not_made_of_letters_is_refused() {
        for bad in ["", "Telegram", "tele gram", "web2", "_chat", "chat_", "x".repeat(MAX_NAME + 1).as_str()] {
            assert!(Surface::from_stored(bad).is_err(), "{bad}");
        }
    }
}
