//! The engine's settings: timeouts, retention, and the rules per channel.

use std::collections::HashMap;
use std::time::Duration;

use super::access::ChannelPolicy;

/// The engine's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The timeout of asks that do not set one.
    pub default_timeout: Duration,
    /// Rules per channel name, or per `channel:chat` for a named webhook endpoint.
    pub channels: HashMap<String, ChannelPolicy>,
    /// How long ended runs, their questions and cards are kept; none: forever.
    pub retention: Option<Duration>,
    /// How long an allow-always grant stands; none: until revoked.
    pub grant_ttl: Option<Duration>,
    /// A reminder this long before a question expires; none: no reminder.
    pub remind_before: Option<Duration>,
    /// Whether the person who asked for a quorum approval (who started the run, or the agent)
    /// counts toward its quorum; by default they do not.
    pub quorum_includes_requester: bool,
    /// Where people's browsers reach askgate's web page (`gateway.public_url`; the gateway sets
    /// the address it listens on otherwise), for `/web` sign-in links; none: no page is served.
    pub page_url: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(30 * 60),
            channels: HashMap::new(),
            retention: Some(Duration::from_secs(30 * 86_400)),
            grant_ttl: None,
            remind_before: None,
            quorum_includes_requester: false,
            page_url: None,
        }
    }
}
