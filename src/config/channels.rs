//! The `[channels.*]` sections: what each channel needs to connect, and who may start runs
//! and answer there.

use std::collections::HashMap;
use std::fmt;

use super::chats::ChatConfig;
use super::raw::{RawChannels, RawChat, RawSpeech, RawWebhook};
use super::{Config, Env, FunctionKind};
use crate::engine::{Access, AnswerersPolicy, ChannelPolicy, Speech, policy_key};
use crate::question::{Conversation, Nudges, UserRef, millis};

/// A named webhook text channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookSpec {
    /// The name in `/channels/webhook/<name>` and in conversations `webhook:<name>:…`.
    pub name: String,
    /// Where askgate POSTs messages.
    pub url: String,
    /// The environment variable holding the shared secret.
    pub secret_env: String,
}

impl WebhookSpec {
    /// The secret, when its variable is set and not empty.
    pub fn secret(&self, env: &Env) -> Option<String> {
        env.get(&self.secret_env)
    }
}

/// Whether a channel runs, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelState {
    /// It runs.
    Enabled,
    /// It does not; the reason says what to change.
    Disabled(String),
}

impl fmt::Display for ChannelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Enabled => f.write_str("enabled"),
            Self::Disabled(why) => write!(f, "disabled: {why}"),
        }
    }
}

/// The channels as validated: connections, and a policy per channel (`console`,
/// `telegram`, `webhook:<name>`, …).
pub(super) struct Channels {
    pub console: bool,
    pub chats: Vec<ChatConfig>,
    pub webhooks: Vec<WebhookSpec>,
    pub policies: HashMap<String, ChannelPolicy>,
}

/// A key at fault (relative to the file) and what is wrong with it.
pub(super) type Fault = (String, String);

/// Validates `[channels.*]`, the platforms' sections `chats` (their own keys are the
/// platforms' to read); `functions` are the names a `default_function` may take.
pub(super) fn channels(
    raw: &RawChannels,
    chats: Vec<(RawChat, ChatConfig)>,
    functions: &[&str],
) -> Result<Channels, Fault> {
    let mut policies = HashMap::new();
    let mut console = false;
    if let Some(c) = &raw.console {
        console = c.enabled;
        let default_function = check_function(functions, c.default_function.as_ref())
            .map_err(|m| ("channels.console.default_function".to_owned(), m))?;
        let (speech, conversations) = speeches(c.locale.as_deref(), c.time_zone.as_deref(), &c.conversations)
            .map_err(|(k, m)| (format!("channels.console.{k}"), m))?;
        policies.insert(
            "console".to_owned(),
            ChannelPolicy { default_function, speech, conversations, ..ChannelPolicy::default() },
        );
    }
    let mut configs = Vec::new();
    for (raw, config) in chats {
        policies.insert(config.name.clone(), chat(&config.name, &raw, functions)?);
        configs.push(config);
    }
    let mut webhooks = Vec::new();
    for (name, w) in &raw.webhook {
        let (spec, policy) = webhook(name, w, functions)?;
        policies.insert(format!("webhook:{name}"), policy);
        webhooks.push(spec);
    }
    for (key, policy) in &policies {
        let Some(to) = &policy.nudges.escalate_to else { continue };
        if !policies.contains_key(&policy_key(to)) {
            let section = format!("channels.{}", key.replace(':', "."));
            return Err((format!("{section}.escalate_to"), format!("no enabled channel here serves `{to}`")));
        }
    }
    Ok(Channels { console, chats: configs, webhooks, policies })
}

/// A platform's policy from the keys every platform has.
fn chat(name: &str, c: &RawChat, functions: &[&str]) -> Result<ChannelPolicy, Fault> {
    let key = |k: &str| format!("channels.{name}.{k}");
    if c.token_env.as_deref().is_some_and(str::is_empty) {
        return Err((key("token_env"), "is empty".to_owned()));
    }
    if let Some(url) = &c.api_url
        && !is_http_url(url)
    {
        return Err((key("api_url"), format!("`{url}` is not an http(s) URL")));
    }
    let rules = Rules {
        answerers: c.answerers.as_deref(),
        allowed_users: &c.allowed_users,
        default_function: c.default_function.as_ref(),
        escalate_after: c.escalate_after,
        escalate_to: c.escalate_to.as_deref(),
        escalate_answerers: c.escalate_answerers.as_deref(),
        locale: c.locale.as_deref(),
        time_zone: c.time_zone.as_deref(),
        conversations: &c.conversations,
    };
    rules.policy(&format!("{name}:"), functions).map_err(|(k, m)| (key(&k), m))
}

fn webhook(name: &str, w: &RawWebhook, functions: &[&str]) -> Result<(WebhookSpec, ChannelPolicy), Fault> {
    let key = |k: &str| format!("channels.webhook.{name}.{k}");
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err((format!("channels.webhook.{name}"), "a name takes letters, digits, - and _".to_owned()));
    }
    if !is_http_url(&w.url) {
        return Err((key("url"), format!("`{}` is not an http(s) URL", w.url)));
    }
    if w.secret_env.is_empty() {
        return Err((key("secret_env"), "is empty".to_owned()));
    }
    let rules = Rules {
        answerers: w.answerers.as_deref(),
        allowed_users: &w.allowed_users,
        default_function: w.default_function.as_ref(),
        escalate_after: w.escalate_after,
        escalate_to: w.escalate_to.as_deref(),
        escalate_answerers: w.escalate_answerers.as_deref(),
        locale: w.locale.as_deref(),
        time_zone: w.time_zone.as_deref(),
        conversations: &w.conversations,
    };
    let policy = rules.policy(&format!("webhook:{name}:"), functions).map_err(|(k, m)| (key(&k), m))?;
    Ok((WebhookSpec { name: name.to_owned(), url: w.url.clone(), secret_env: w.secret_env.clone() }, policy))
}

fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// The rule keys every chat channel shares.
struct Rules<'a> {
    answerers: Option<&'a str>,
    allowed_users: &'a [String],
    default_function: Option<&'a String>,
    escalate_after: Option<std::time::Duration>,
    escalate_to: Option<&'a str>,
    escalate_answerers: Option<&'a [String]>,
    locale: Option<&'a str>,
    time_zone: Option<&'a str>,
    conversations: &'a std::collections::BTreeMap<String, RawSpeech>,
}

/// A channel's language and time zone, and its conversations' own; errors name the key.
fn speeches(
    locale: Option<&str>,
    time_zone: Option<&str>,
    conversations: &std::collections::BTreeMap<String, RawSpeech>,
) -> Result<(Speech, HashMap<Conversation, Speech>), (String, String)> {
    let one = |locale: Option<&str>, time_zone: Option<&str>, at: &str| -> Result<Speech, (String, String)> {
        let locale = locale
            .map(|l| {
                crate::question::Locale::from_tag(l)
                    .ok_or_else(|| (format!("{at}locale"), format!("`{l}`: askgate speaks \"en\" and \"zh-CN\"")))
            })
            .transpose()?;
        let time_zone = time_zone.map(str::parse).transpose().map_err(|m| (format!("{at}time_zone"), m))?;
        Ok(Speech { locale, time_zone })
    };
    let speech = one(locale, time_zone, "")?;
    let mut own = HashMap::new();
    for (id, s) in conversations {
        let at = format!("conversations.\"{id}\".");
        let conversation = Conversation::parse(id).map_err(|e| (format!("conversations.\"{id}\""), e.to_string()))?;
        own.insert(conversation, one(s.locale.as_deref(), s.time_zone.as_deref(), &at)?);
    }
    Ok((speech, own))
}

impl Rules<'_> {
    /// The channel's policy; user ids without a channel get `user_prefix`. Errors name the key.
    fn policy(&self, user_prefix: &str, names: &[&str]) -> Result<ChannelPolicy, (String, String)> {
        let (speech, conversations) = speeches(self.locale, self.time_zone, self.conversations)?;
        let policy = self.policy_of(user_prefix, names).map_err(|(k, m)| (k.to_owned(), m))?;
        Ok(ChannelPolicy { speech, conversations, ..policy })
    }

    fn policy_of(&self, user_prefix: &str, names: &[&str]) -> Result<ChannelPolicy, (&'static str, String)> {
        let answerers = match self.answerers {
            None | Some("initiator") => AnswerersPolicy::Initiator,
            Some("conversation") => AnswerersPolicy::Conversation,
            Some(other) => return Err(("answerers", format!("`{other}` is not `initiator` or `conversation`"))),
        };
        let allowed_users = access(self.allowed_users, Some(user_prefix)).map_err(|m| ("allowed_users", m))?;
        let default_function = check_function(names, self.default_function).map_err(|m| ("default_function", m))?;
        Ok(ChannelPolicy {
            answerers,
            allowed_users,
            default_function,
            nudges: self.escalation()?,
            ..ChannelPolicy::default()
        })
    }

    /// Where and when its questions that nobody answers are escalated, and who answers there.
    fn escalation(&self) -> Result<Nudges, (&'static str, String)> {
        let escalate_to =
            self.escalate_to.map(Conversation::parse).transpose().map_err(|e| ("escalate_to", e.to_string()))?;
        let escalate_answerers = self
            .escalate_answerers
            .map(|users| users.iter().map(|u| UserRef::parse(u)).collect::<Result<Vec<_>, _>>())
            .transpose()
            .map_err(|e| ("escalate_answerers", e.to_string()))?;
        let nudges = Nudges {
            escalate_after: self.escalate_after.map(millis),
            escalate_to,
            escalate_answerers,
            ..Nudges::default()
        };
        nudges.check()?;
        Ok(nudges)
    }
}

/// Who a list of `allowed_users` lets in: `"*"` alone opens to anyone, empty is nobody. Ids
/// without a channel get `prefix` (`42` in `[channels.telegram]` is `telegram:42`); without
/// a prefix (a function's list spans channels) every id must name its channel.
pub(super) fn access(users: &[String], prefix: Option<&str>) -> Result<Access, String> {
    if users.iter().any(|u| u.trim() == "*") {
        if users.len() > 1 {
            return Err("\"*\" opens to anyone; list it alone".to_owned());
        }
        return Ok(Access::Anyone);
    }
    let users = users
        .iter()
        .map(|u| {
            let full = match prefix {
                Some(p) if !u.starts_with(p) => format!("{p}{u}"),
                _ => u.clone(),
            };
            UserRef::parse(&full).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Access::from_users(users, false))
}

fn check_function(names: &[&str], name: Option<&String>) -> Result<Option<String>, String> {
    match name {
        None => Ok(None),
        Some(n) if names.contains(&n.as_str()) => Ok(Some(n.clone())),
        Some(n) => Err(format!("no function named `{n}` in [[functions]]")),
    }
}

/// Who may start what, as `askgate check` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessReport {
    /// One line per channel and per function that narrows it: `telegram: nobody`.
    pub lines: Vec<String>,
    /// What an operator should look at: a channel open to anyone that can start a program.
    pub warnings: Vec<String>,
}

impl Config {
    /// The `[channels.<name>]` section of the chat platform `name`, when the file has one.
    pub fn chat(&self, name: &str) -> Option<&ChatConfig> {
        self.chats.iter().find(|chat| chat.name == name)
    }

    /// Each channel but the chat platforms with whether it runs and why not: the console
    /// first, then the webhooks (the platforms say theirs, between the two).
    pub fn channel_states(&self, env: &Env) -> Vec<(String, ChannelState)> {
        let mut states = vec![(
            "console".to_owned(),
            if self.console { ChannelState::Enabled } else { ChannelState::Disabled("enabled = false".to_owned()) },
        )];
        for w in &self.webhooks {
            let state = if w.secret(env).is_some() {
                ChannelState::Enabled
            } else {
                ChannelState::Disabled(format!("{} is unset", w.secret_env))
            };
            states.push((format!("webhook:{}", w.name), state));
        }
        states
    }

    /// Who may start runs on each channel, which functions narrow that, and a warning for each
    /// channel open to anyone (`"*"`) where a function that runs a program can be started.
    pub fn access_report(&self) -> AccessReport {
        let mut report = AccessReport::default();
        if self.console {
            report.lines.push("console: console:local (the operator at the terminal may run everything)".to_owned());
        }
        let mut keys: Vec<&String> = self.settings.channels.keys().filter(|k| k.as_str() != "console").collect();
        keys.sort();
        for key in keys {
            let access = &self.settings.channels[key].allowed_users;
            report.lines.push(format!("{key}: {access}"));
            if *access != Access::Anyone {
                continue;
            }
            let programs: Vec<&str> = self
                .functions
                .iter()
                .filter(|f| matches!(f.kind, FunctionKind::Process(_)))
                .filter(|f| f.allowed_users.as_ref().is_none_or(|a| *a == Access::Anyone))
                .map(|f| f.name.as_str())
                .collect();
            if !programs.is_empty() {
                report.warnings.push(format!(
                    "channels.{}.allowed_users is [\"*\"]: anyone there may start {}, which run programs; list people \
                     instead, or set allowed_users on those [[functions]]",
                    key.replace(':', "."),
                    programs.join(", ")
                ));
            }
        }
        for f in &self.functions {
            if let Some(access) = &f.allowed_users {
                report.lines.push(format!("function {}: only {access}, where the channel also allows them", f.name));
            }
        }
        report
    }
}
