//! `channels.toml`: the one configuration file. Parsed into typed settings; unknown keys are
//! errors that name the key. Secrets never live in it: channels name the environment
//! variable that holds their token.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::engine::{Access, AnswerersPolicy, ChannelPolicy, Settings};
use crate::function::{self, process::ProcessConfig};
use crate::question::UserRef;
use crate::store::Synchronous;

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has wrong or unknown keys.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// A value is well-formed TOML but not acceptable.
    #[error("{path}: `{key}`: {message}")]
    Value {
        /// The file.
        path: String,
        /// The dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    gateway: RawGateway,
    #[serde(default)]
    channels: RawChannels,
    #[serde(default)]
    functions: Vec<RawFunction>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    #[serde(default = "default_database")]
    database: String,
    #[serde(default = "default_http")]
    http: String,
    #[serde(default = "default_timeout")]
    default_timeout: String,
    #[serde(default)]
    synchronous: Option<String>,
    #[serde(default = "default_retention")]
    retention: String,
    #[serde(default = "default_max_event_streams")]
    max_event_streams: usize,
    #[serde(default = "default_max_connections")]
    max_connections: usize,
}

impl Default for RawGateway {
    fn default() -> Self {
        Self {
            database: default_database(),
            http: default_http(),
            default_timeout: default_timeout(),
            synchronous: None,
            retention: default_retention(),
            max_event_streams: default_max_event_streams(),
            max_connections: default_max_connections(),
        }
    }
}

fn default_database() -> String {
    "sqlite://askgate.db".to_owned()
}
fn default_http() -> String {
    "127.0.0.1:8080".to_owned()
}
fn default_timeout() -> String {
    "30m".to_owned()
}
fn default_max_connections() -> usize {
    crate::http::DEFAULT_MAX_CONNECTIONS
}
fn default_max_event_streams() -> usize {
    crate::http::DEFAULT_MAX_EVENT_STREAMS
}
fn default_retention() -> String {
    "30d".to_owned()
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawChannels {
    console: Option<RawConsole>,
    telegram: Option<RawChat>,
    discord: Option<RawChat>,
    #[serde(default)]
    webhook: BTreeMap<String, RawWebhook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url: String,
    secret_env: String,
    #[serde(default)]
    allowed_users: Vec<String>,
    #[serde(default)]
    answerers: Option<String>,
    #[serde(default)]
    default_function: Option<String>,
}

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

/// The environment secrets are read from: the process's, or a given map (tests, embedding).
#[derive(Clone, Debug, Default)]
pub struct Env(Option<HashMap<String, String>>);

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self(None)
    }

    /// Exactly these variables.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self(Some(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect()))
    }

    /// A variable's value, when set and not empty.
    pub fn get(&self, name: &str) -> Option<String> {
        let value = match &self.0 {
            None => std::env::var(name).ok(),
            Some(map) => map.get(name).cloned(),
        };
        value.filter(|v| !v.trim().is_empty())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConsole {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    default_function: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChat {
    token_env: String,
    #[serde(default)]
    api_url: Option<String>,
    #[serde(default)]
    allowed_users: Vec<String>,
    #[serde(default)]
    answerers: Option<String>,
    #[serde(default)]
    default_function: Option<String>,
    #[serde(default)]
    webhook_url: Option<String>,
    #[serde(default)]
    webhook_listen: Option<String>,
    #[serde(default)]
    webhook_secret_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFunction {
    name: String,
    #[serde(default)]
    builtin: Option<String>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    set_env: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    allowed_users: Option<Vec<String>>,
    #[serde(default)]
    show_stderr: Option<bool>,
}

/// What runs when a function is called.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionKind {
    /// A built-in, by its name.
    Builtin(String),
    /// A program speaking the process protocol.
    Process(ProcessConfig),
}

/// A configured function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    /// The name `/run` takes.
    pub name: String,
    /// One line for `/help`.
    pub description: String,
    /// What runs.
    pub kind: FunctionKind,
    /// Who may start it, narrowing each channel's `allowed_users`; none: the channel's rule.
    pub allowed_users: Option<Access>,
}

impl FunctionSpec {
    /// How `askgate check` describes what runs.
    pub fn what(&self) -> String {
        match &self.kind {
            FunctionKind::Builtin(b) => format!("built-in {b}"),
            FunctionKind::Process(p) => {
                let mode = if p.hold { "hold" } else { "follow_up" };
                format!("command `{}`, {mode}, timeout {}s", p.command.join(" "), p.timeout.as_secs())
            }
        }
    }
}

/// Variables a program gets from askgate's environment unless `env` says otherwise.
const DEFAULT_PASS_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ"];
/// How long one invocation of a program may run unless `timeout` says otherwise.
const DEFAULT_PROCESS_TIMEOUT: Duration = Duration::from_secs(300);

/// A chat channel's configuration (Telegram, Discord).
#[derive(Clone, Debug)]
pub struct ChatConfig {
    /// The environment variable holding the token.
    pub token_env: String,
    /// A different API base URL (a self-hosted server, or a test double).
    pub api_url: Option<String>,
    /// Telegram only: receive updates by webhook instead of long polling.
    pub webhook: Option<WebhookConfig>,
}

/// Where Telegram delivers updates in webhook mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The public HTTPS URL Telegram POSTs to.
    pub url: String,
    /// The local address askgate listens on.
    pub listen: std::net::SocketAddr,
    /// The environment variable holding the secret token Telegram sends with each update.
    pub secret_env: String,
}

impl ChatConfig {
    /// The token, when its variable is set and not empty.
    pub fn token(&self, env: &Env) -> Option<String> {
        env.get(&self.token_env)
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

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The database URL or path.
    pub database: String,
    /// SQLite durability.
    pub synchronous: Synchronous,
    /// The HTTP listen address.
    pub http: String,
    /// The most event streams open at once.
    pub max_event_streams: usize,
    /// The most HTTP connections open at once.
    pub max_connections: usize,
    /// Engine settings: timeouts and per-channel rules.
    pub settings: Settings,
    /// Whether the console runs.
    pub console: bool,
    /// Telegram, when configured.
    pub telegram: Option<ChatConfig>,
    /// Discord, when configured.
    pub discord: Option<ChatConfig>,
    /// Named webhook text channels.
    pub webhooks: Vec<WebhookSpec>,
    /// The functions, in file order.
    pub functions: Vec<FunctionSpec>,
}

impl Config {
    /// Reads and validates a file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, and the key where one is at fault.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Self::parse(&text, &shown, base)
    }

    /// Validates configuration text; `path` is used in messages, and relative working
    /// directories of programs are resolved against `base` (the file's directory).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn parse(text: &str, path: &str, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let bad =
            |key: &str, message: String| ConfigError::Value { path: path.to_owned(), key: key.to_owned(), message };

        let default_timeout =
            parse_duration(&raw.gateway.default_timeout).map_err(|m| bad("gateway.default_timeout", m))?;
        let retention = match raw.gateway.retention.trim() {
            "never" => None,
            other => Some(parse_duration(other).map_err(|m| bad("gateway.retention", format!("{m}, or `never`")))?),
        };
        let synchronous = match raw.gateway.synchronous.as_deref() {
            None | Some("normal") => Synchronous::Normal,
            Some("full") => Synchronous::Full,
            Some(other) => return Err(bad("gateway.synchronous", format!("`{other}` is not `normal` or `full`"))),
        };
        if raw.gateway.http.parse::<std::net::SocketAddr>().is_err() {
            return Err(bad("gateway.http", format!("`{}` is not an address like 127.0.0.1:8080", raw.gateway.http)));
        }
        if raw.gateway.max_connections == 0 {
            return Err(bad("gateway.max_connections", "must be at least 1".to_owned()));
        }
        if raw.gateway.max_event_streams == 0 {
            return Err(bad("gateway.max_event_streams", "must be at least 1".to_owned()));
        }
        if raw.gateway.database.trim().is_empty() {
            return Err(bad("gateway.database", "is empty".to_owned()));
        }

        let mut functions: Vec<FunctionSpec> = Vec::new();
        for (i, f) in raw.functions.into_iter().enumerate() {
            let spec = function_spec(i, f, base).map_err(|(key, message): (String, String)| bad(&key, message))?;
            if functions.iter().any(|g| g.name == spec.name) {
                return Err(bad(&format!("functions[{i}].name"), format!("`{}` is defined twice", spec.name)));
            }
            functions.push(spec);
        }
        let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();

        let mut channels = HashMap::new();
        let mut console = false;
        if let Some(c) = &raw.channels.console {
            console = c.enabled;
            let default_function = check_function(&names, c.default_function.as_ref())
                .map_err(|m| bad("channels.console.default_function", m))?;
            channels.insert("console".to_owned(), ChannelPolicy { default_function, ..ChannelPolicy::default() });
        }
        let mut chat = |name: &str, raw: &Option<RawChat>| -> Result<Option<ChatConfig>, ConfigError> {
            let Some(c) = raw else { return Ok(None) };
            let key = |k: &str| format!("channels.{name}.{k}");
            if c.token_env.is_empty() {
                return Err(bad(&key("token_env"), "is empty".to_owned()));
            }
            if let Some(url) = &c.api_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(bad(&key("api_url"), format!("`{url}` is not an http(s) URL")));
            }
            let rules = Rules {
                answerers: c.answerers.as_deref(),
                allowed_users: &c.allowed_users,
                default_function: c.default_function.as_ref(),
            };
            let policy = rules.policy(&format!("{name}:"), &names).map_err(|(k, m)| bad(&key(k), m))?;
            channels.insert(name.to_owned(), policy);
            let webhook = match (&c.webhook_url, &c.webhook_listen, &c.webhook_secret_env) {
                (None, None, None) => None,
                _ if name != "telegram" => {
                    return Err(bad(&key("webhook_url"), "webhooks are for Telegram only".to_owned()));
                }
                (Some(url), Some(listen), Some(secret_env)) => {
                    if !url.starts_with("https://") && !url.starts_with("http://") {
                        return Err(bad(&key("webhook_url"), format!("`{url}` is not an http(s) URL")));
                    }
                    let listen = listen.parse().map_err(|_| {
                        bad(&key("webhook_listen"), format!("`{listen}` is not an address like 0.0.0.0:8443"))
                    })?;
                    Some(WebhookConfig { url: url.clone(), listen, secret_env: secret_env.clone() })
                }
                _ => {
                    return Err(bad(
                        &key("webhook_url"),
                        "webhook mode needs webhook_url, webhook_listen and webhook_secret_env together".to_owned(),
                    ));
                }
            };
            Ok(Some(ChatConfig { token_env: c.token_env.clone(), api_url: c.api_url.clone(), webhook }))
        };
        let telegram = chat("telegram", &raw.channels.telegram)?;
        let discord = chat("discord", &raw.channels.discord)?;
        let mut webhooks = Vec::new();
        for (name, w) in &raw.channels.webhook {
            let key = |k: &str| format!("channels.webhook.{name}.{k}");
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(bad(
                    &format!("channels.webhook.{name}"),
                    "a name takes letters, digits, - and _".to_owned(),
                ));
            }
            if !w.url.starts_with("http://") && !w.url.starts_with("https://") {
                return Err(bad(&key("url"), format!("`{}` is not an http(s) URL", w.url)));
            }
            if w.secret_env.is_empty() {
                return Err(bad(&key("secret_env"), "is empty".to_owned()));
            }
            let rules = Rules {
                answerers: w.answerers.as_deref(),
                allowed_users: &w.allowed_users,
                default_function: w.default_function.as_ref(),
            };
            let policy = rules.policy(&format!("webhook:{name}:"), &names).map_err(|(k, m)| bad(&key(k), m))?;
            channels.insert(format!("webhook:{name}"), policy);
            webhooks.push(WebhookSpec { name: name.clone(), url: w.url.clone(), secret_env: w.secret_env.clone() });
        }

        drop(names);
        Ok(Self {
            database: raw.gateway.database,
            synchronous,
            http: raw.gateway.http,
            max_event_streams: raw.gateway.max_event_streams,
            max_connections: raw.gateway.max_connections,
            settings: Settings { default_timeout, channels, retention },
            console,
            telegram,
            discord,
            webhooks,
            functions,
        })
    }

    /// Each channel with whether it runs and why not.
    pub fn channel_states(&self, env: &Env) -> Vec<(String, ChannelState)> {
        let mut states = vec![(
            "console".to_owned(),
            if self.console { ChannelState::Enabled } else { ChannelState::Disabled("enabled = false".to_owned()) },
        )];
        for (name, chat) in [("telegram", &self.telegram), ("discord", &self.discord)] {
            let state = match chat {
                None => ChannelState::Disabled("not configured".to_owned()),
                Some(c) if c.token(env).is_none() => ChannelState::Disabled(format!("{} is unset", c.token_env)),
                Some(ChatConfig { webhook: Some(w), .. }) if env.get(&w.secret_env).is_none() => {
                    ChannelState::Disabled(format!("{} is unset", w.secret_env))
                }
                Some(_) => ChannelState::Enabled,
            };
            states.push((name.to_owned(), state));
        }
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

/// The rule keys every chat channel shares.
struct Rules<'a> {
    answerers: Option<&'a str>,
    allowed_users: &'a [String],
    default_function: Option<&'a String>,
}

impl Rules<'_> {
    /// The channel's policy; user ids without a channel get `user_prefix`. Errors name the key.
    fn policy(&self, user_prefix: &str, names: &[&str]) -> Result<ChannelPolicy, (&'static str, String)> {
        let answerers = match self.answerers {
            None | Some("initiator") => AnswerersPolicy::Initiator,
            Some("conversation") => AnswerersPolicy::Conversation,
            Some(other) => return Err(("answerers", format!("`{other}` is not `initiator` or `conversation`"))),
        };
        let allowed_users = access(self.allowed_users, Some(user_prefix)).map_err(|m| ("allowed_users", m))?;
        let default_function = check_function(names, self.default_function).map_err(|m| ("default_function", m))?;
        Ok(ChannelPolicy { answerers, allowed_users, default_function })
    }
}

/// Who a list of `allowed_users` lets in: `"*"` alone opens to anyone, empty is nobody. Ids
/// without a channel get `prefix` (`42` in `[channels.telegram]` is `telegram:42`); without
/// a prefix (a function's list spans channels) every id must name its channel.
fn access(users: &[String], prefix: Option<&str>) -> Result<Access, String> {
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

/// Validates one `[[functions]]` entry; errors name the key.
fn function_spec(i: usize, f: RawFunction, base: &Path) -> Result<FunctionSpec, (String, String)> {
    let key = |k: &str| format!("functions[{i}].{k}");
    if f.name.is_empty() || f.name.chars().any(|c| c.is_whitespace() || c == '/' || c == '@') {
        return Err((key("name"), format!("`{}` is not a usable name (no spaces, slashes or @)", f.name)));
    }
    let process_keys = f.cwd.is_some()
        || f.env.is_some()
        || !f.set_env.is_empty()
        || f.timeout.is_some()
        || f.mode.is_some()
        || f.show_stderr.is_some();
    let allowed_users = f
        .allowed_users
        .as_deref()
        .map(|users| access(users, None))
        .transpose()
        .map_err(|m| (key("allowed_users"), m))?;
    let (kind, default_description) = match (f.builtin, f.command) {
        (Some(_), Some(_)) => return Err((key("command"), "give either `builtin` or `command`, not both".to_owned())),
        (None, None) => return Err((key("command"), "is required (or `builtin`)".to_owned())),
        (Some(_), None) if process_keys => {
            return Err((
                key("builtin"),
                "a built-in takes no cwd, env, set_env, timeout, mode or show_stderr".to_owned(),
            ));
        }
        (Some(builtin), None) => {
            let Some((_, description)) = function::builtin(&builtin) else {
                let known = function::builtin_names().join(", ");
                return Err((key("builtin"), format!("no built-in `{builtin}`; there are {known}")));
            };
            (FunctionKind::Builtin(builtin), description.to_owned())
        }
        (None, Some(command)) => {
            if command.first().is_none_or(|program| program.trim().is_empty()) {
                return Err((key("command"), "needs at least the program to run".to_owned()));
            }
            let cwd = match f.cwd {
                Some(dir) => base.join(dir),
                None => base.to_path_buf(),
            };
            let pass_env = f.env.unwrap_or_else(|| DEFAULT_PASS_ENV.iter().map(|s| (*s).to_owned()).collect());
            if let Some(bad) = pass_env.iter().chain(f.set_env.keys()).find(|v| v.is_empty() || v.contains('=')) {
                return Err((key("env"), format!("`{bad}` is not a variable name")));
            }
            let timeout = match f.timeout {
                Some(t) => parse_duration(&t).map_err(|m| (key("timeout"), m))?,
                None => DEFAULT_PROCESS_TIMEOUT,
            };
            let hold = match f.mode.as_deref() {
                None | Some("follow_up") => false,
                Some("hold") => true,
                Some(other) => return Err((key("mode"), format!("`{other}` is not `follow_up` or `hold`"))),
            };
            let description = format!("runs {}", command.join(" "));
            (
                FunctionKind::Process(ProcessConfig {
                    command,
                    cwd,
                    pass_env,
                    set_env: f.set_env,
                    timeout,
                    hold,
                    show_stderr: f.show_stderr.unwrap_or(false),
                }),
                description,
            )
        }
    };
    Ok(FunctionSpec { name: f.name, description: f.description.unwrap_or(default_description), kind, allowed_users })
}

/// Parses `90s`, `30m`, `2h`, `1d`, or a plain number of seconds.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = digits.parse().map_err(|_| format!("`{text}` is not a duration like 90s, 30m, 2h or 1d"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3_600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("`{text}` is not a duration like 90s, 30m, 2h or 1d")),
    };
    if secs == 0 {
        return Err("must be longer than zero".to_owned());
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_is_a_duration_or_never() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        assert_eq!(parse("").unwrap().settings.retention, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse("[gateway]\nretention = \"never\"\n").unwrap().settings.retention, None);
        assert_eq!(
            parse("[gateway]\nretention = \"2d\"\n").unwrap().settings.retention,
            Some(Duration::from_secs(172_800))
        );
        let err = parse("[gateway]\nretention = \"soon\"\n").unwrap_err().to_string();
        assert!(err.contains("gateway.retention") && err.contains("never"), "{err}");
    }

    #[test]
    fn the_bundled_file_is_valid() {
        let config = Config::parse(include_str!("../channels.toml"), "channels.toml", Path::new(".")).unwrap();
        assert!(config.console);
        assert!(config.functions.iter().any(|f| f.name == "demo"));
    }

    #[test]
    fn an_unknown_key_is_named() {
        let err = Config::parse("[gateway]\ndatabse = \"x\"\n", "c.toml", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("databse"), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let err =
            Config::parse("[gateway]\ndefault_timeout = \"soon\"\n", "c.toml", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("gateway.default_timeout"), "{err}");
        let err = Config::parse("[[functions]]\nname = \"x\"\nbuiltin = \"nope\"\n", "c.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("functions[0].builtin"), "{err}");
    }

    #[test]
    fn a_process_function_resolves_its_cwd_against_the_file() {
        let text = "[[functions]]\nname = \"deploy\"\ncommand = [\"python3\", \"deploy.py\"]\nmode = \"hold\"\ntimeout = \"2m\"\n";
        let config = Config::parse(text, "c.toml", Path::new("/etc/askgate")).unwrap();
        let FunctionKind::Process(p) = &config.functions[0].kind else { panic!("not a process") };
        assert_eq!(p.cwd, Path::new("/etc/askgate"));
        assert!(p.hold);
        assert_eq!(p.timeout, Duration::from_secs(120));
        assert!(p.pass_env.contains(&"PATH".to_owned()));
    }

    #[test]
    fn a_function_needs_exactly_one_of_builtin_and_command() {
        let both = "[[functions]]\nname = \"x\"\nbuiltin = \"demo\"\ncommand = [\"true\"]\n";
        let err = Config::parse(both, "c.toml", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("functions[0].command"), "{err}");
        let neither = "[[functions]]\nname = \"x\"\n";
        assert!(Config::parse(neither, "c.toml", Path::new(".")).is_err());
        let bad_mode = "[[functions]]\nname = \"x\"\ncommand = [\"true\"]\nmode = \"wait\"\n";
        let err = Config::parse(bad_mode, "c.toml", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("functions[0].mode"), "{err}");
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3w").is_err());
    }
}
