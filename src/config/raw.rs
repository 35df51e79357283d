//! The file as written: serde's view of `channels.toml`, with unknown keys refused and
//! durations read as people write them. [`Config::parse`](super::Config::parse) validates it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::question::parse_duration;
use bytesize::ByteSize;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub channels: RawChannels,
    #[serde(default)]
    pub functions: Vec<RawFunction>,
    pub mcp: Option<RawMcp>,
    #[serde(default)]
    pub agents: Vec<RawAgent>,
    pub claude_code: Option<RawClaudeCode>,
    pub a2a: Option<RawA2a>,
    pub codex: Option<RawHooks>,
    #[serde(default)]
    pub opencode: Vec<RawOpencode>,
    pub callbacks: Option<RawCallbacks>,
    pub limits: Option<RawLimits>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCallbacks {
    #[serde(default)]
    pub allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub per_person: Option<String>,
    pub per_person_burst: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOpencode {
    pub name: String,
    pub url: String,
    pub username: Option<String>,
    pub password_env: Option<String>,
    pub conversation: Option<String>,
    pub answerers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClaudeCode {
    pub conversation: Option<String>,
    pub answerers: Option<Vec<String>>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub hook_timeout: Option<Duration>,
    #[serde(default)]
    pub messages: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawA2a {
    pub conversation: Option<String>,
    pub answerers: Option<Vec<String>>,
}

/// The keys of a hooks section (`[codex]`; `[claude_code]` has `messages` besides).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHooks {
    pub conversation: Option<String>,
    pub answerers: Option<Vec<String>>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub hook_timeout: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    pub name: String,
    pub token_env: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    pub conversation: Option<String>,
    pub answerers: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_conversations: Vec<String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub progress_every: Option<Duration>,
    #[serde(default, deserialize_with = "some_duration")]
    pub session_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "some_duration")]
    pub reattach_grace: Option<Duration>,
    #[serde(default)]
    pub elicitation: bool,
    #[serde(default)]
    pub upstream: Vec<RawUpstream>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub name: String,
    pub command: Option<Vec<String>>,
    pub url: Option<String>,
    #[serde(default)]
    pub approve: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub conversation: Option<String>,
    pub grant: Option<String>,
    pub cwd: Option<String>,
    pub env: Option<Vec<String>>,
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub call_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "some_size")]
    pub max_result: Option<ByteSize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawGateway {
    pub database: String,
    pub http: String,
    #[serde(deserialize_with = "duration")]
    pub default_timeout: Duration,
    pub synchronous: Option<String>,
    #[serde(deserialize_with = "duration_or_never")]
    pub retention: Option<Duration>,
    #[serde(deserialize_with = "duration_or_never")]
    pub grant_ttl: Option<Duration>,
    #[serde(deserialize_with = "duration_or_never")]
    pub remind_before: Option<Duration>,
    pub max_event_streams: usize,
    pub max_connections: usize,
    pub quorum_includes_requester: bool,
    pub callback_secret_env: Option<String>,
    #[serde(deserialize_with = "duration")]
    pub callback_timeout: Duration,
    pub public_url: Option<String>,
}

impl Default for RawGateway {
    fn default() -> Self {
        Self {
            database: "sqlite://askgate.db".to_owned(),
            http: "127.0.0.1:8080".to_owned(),
            default_timeout: Duration::from_secs(30 * 60),
            synchronous: None,
            retention: Some(Duration::from_secs(30 * 86_400)),
            grant_ttl: None,
            remind_before: None,
            max_event_streams: super::DEFAULT_MAX_EVENT_STREAMS,
            max_connections: super::DEFAULT_MAX_CONNECTIONS,
            quorum_includes_requester: false,
            callback_secret_env: None,
            callback_timeout: Duration::from_secs(10),
            public_url: None,
        }
    }
}

/// `[channels]`: the console and the webhooks. Every other section is a chat platform's, read
/// from the file's tree (see `chats`): its name is checked by whoever knows the platforms.
#[derive(Debug, Deserialize, Default)]
pub(super) struct RawChannels {
    pub console: Option<RawConsole>,
    #[serde(default)]
    pub webhook: BTreeMap<String, RawWebhook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConsole {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub default_function: Option<String>,
    /// askgate's language on cards here (`en`, `zh-CN`).
    #[serde(default)]
    pub locale: Option<String>,
    /// The time zone of times on cards here (an IANA name).
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Conversations whose cards read otherwise, by id.
    #[serde(default)]
    pub conversations: BTreeMap<String, RawSpeech>,
}

/// A conversation's own language and time zone.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpeech {
    #[serde(default)]
    pub locale: Option<String>,
    #[serde(default)]
    pub time_zone: Option<String>,
}

fn yes() -> bool {
    true
}

/// The keys of [`RawChat`]: a platform's section holds these and its own keys, which the
/// platform reads.
pub(super) const CHAT_KEYS: &[&str] = &[
    "token_env",
    "api_url",
    "allowed_users",
    "answerers",
    "default_function",
    "escalate_after",
    "escalate_to",
    "escalate_answerers",
    "locale",
    "time_zone",
    "conversations",
];

/// The keys every chat platform's section has.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChat {
    // Required by every platform that reads its token from one variable (see
    // `Component::has_token`).
    #[serde(default)]
    pub token_env: Option<String>,
    #[serde(default)]
    pub api_url: Option<String>,
    // The rule keys every chat channel shares (serde's `flatten` would lose
    // `deny_unknown_fields`, so they are written out).
    #[serde(default)]
    pub allowed_users: Vec<String>,
    #[serde(default)]
    pub answerers: Option<String>,
    #[serde(default)]
    pub default_function: Option<String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub escalate_after: Option<Duration>,
    #[serde(default)]
    pub escalate_to: Option<String>,
    #[serde(default)]
    pub escalate_answerers: Option<Vec<String>>,
    /// askgate's language on cards here (`en`, `zh-CN`).
    #[serde(default)]
    pub locale: Option<String>,
    /// The time zone of times on cards here (an IANA name).
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Conversations whose cards read otherwise, by id.
    #[serde(default)]
    pub conversations: BTreeMap<String, RawSpeech>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    pub url: String,
    pub secret_env: String,
    // The rule keys every chat channel shares (serde's `flatten` would lose
    // `deny_unknown_fields`, so they are written out).
    #[serde(default)]
    pub allowed_users: Vec<String>,
    #[serde(default)]
    pub answerers: Option<String>,
    #[serde(default)]
    pub default_function: Option<String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub escalate_after: Option<Duration>,
    #[serde(default)]
    pub escalate_to: Option<String>,
    #[serde(default)]
    pub escalate_answerers: Option<Vec<String>>,
    /// askgate's language on cards here (`en`, `zh-CN`).
    #[serde(default)]
    pub locale: Option<String>,
    /// The time zone of times on cards here (an IANA name).
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Conversations whose cards read otherwise, by id.
    #[serde(default)]
    pub conversations: BTreeMap<String, RawSpeech>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFunction {
    pub name: String,
    #[serde(default)]
    pub builtin: Option<String>,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub agui: Option<String>,
    #[serde(default)]
    pub a2a: Option<String>,
    #[serde(default)]
    pub token_env: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: Option<Vec<String>>,
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "some_duration")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub allowed_users: Option<Vec<String>>,
    #[serde(default)]
    pub pre_approved: Vec<String>,
    #[serde(default)]
    pub show_stderr: Option<bool>,
}

fn some_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
    d.deserialize_any(SizeVisitor).map(Some)
}

/// Reads a size from a string (`8MB`, `512KiB`) or an integer of bytes.
struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size like \"8MB\", \"512KiB\" or \"1GB\", or a number of bytes")
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<Self::Value, E> {
        match bytes {
            0 => Err(E::custom("a size must be larger than zero")),
            bytes => Ok(ByteSize(bytes)),
        }
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<Self::Value, E> {
        match u64::try_from(bytes) {
            Ok(bytes) => self.visit_u64(bytes),
            Err(_) => Err(E::custom("a size cannot be negative")),
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        match text.trim().parse::<ByteSize>() {
            Ok(size) => self.visit_u64(size.as_u64()),
            Err(_) => Err(E::custom(format!("`{text}` is not a size like 8MB, 512KiB or 1GB"))),
        }
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor { never: false })?.ok_or_else(|| de::Error::custom("`never` is not allowed here"))
}

fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

fn duration_or_never<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    d.deserialize_any(DurationVisitor { never: true })
}

/// Reads a duration from a string or an integer of seconds; `never` is none when allowed.
struct DurationVisitor {
    never: bool,
}

impl Visitor<'_> for DurationVisitor {
    type Value = Option<Duration>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration like \"90s\", \"30m\", \"1h30m\" or \"2d\", or a number of seconds")?;
        if self.never {
            f.write_str(", or \"never\"")?;
        }
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, secs: u64) -> Result<Self::Value, E> {
        match secs {
            0 => Err(E::custom("a duration must be longer than zero")),
            secs => Ok(Some(Duration::from_secs(secs))),
        }
    }

    fn visit_i64<E: de::Error>(self, secs: i64) -> Result<Self::Value, E> {
        match u64::try_from(secs) {
            Ok(secs) => self.visit_u64(secs),
            Err(_) => Err(E::custom("a duration cannot be negative")),
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        if self.never && text.trim() == "never" {
            return Ok(None);
        }
        let suffix = if self.never { ", or `never`" } else { "" };
        parse_duration(text).map(Some).map_err(|m| E::custom(format!("{m}{suffix}")))
    }
}
