//! `channels.toml`: the one configuration file. Parsed into typed settings; unknown keys are
//! errors that name the key. Secrets never live in it: channels name the environment
//! variable that holds their token.
//!
//! The parts: `raw` (the file as serde reads it), `channels` (the `[channels.*]` sections and
//! who may do what there), `functions` (the `[[functions]]` entries), `callbacks` (where
//! callbacks may go), `limits` (how fast people may act), `hooks` (what `[claude_code]` and
//! `[codex]` share), `agents` (`[[agents]]`).

mod a2a;
mod agents;
mod callbacks;
mod channels;
mod chats;
mod claude_code;
mod codex;
mod functions;
mod hooks;
mod limits;
mod mcp;
mod opencode;
mod overrides;
mod raw;
mod remote;

/// The default of `gateway.max_event_streams`.
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 1000;
/// The default of `gateway.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

pub use a2a::A2aConfig;
pub use agents::AgentConfig;
pub use callbacks::{CallbackTarget, CallbacksConfig};
pub use channels::{AccessReport, ChannelState, WebhookSpec};
pub use chats::ChatConfig;
pub use claude_code::ClaudeCodeConfig;
pub use codex::CodexConfig;
pub use functions::{FunctionKind, FunctionSpec};
pub use hooks::{HOOK_TIMEOUT, HookRules, ToolRule};
pub use limits::{LimitsConfig, PersonRate};
pub use mcp::{GrantScope, McpConfig, UpstreamConfig, UpstreamTransport};
pub use opencode::OpencodeConfig;
pub use overrides::{GatewayValue, Source};
pub use remote::RemoteAgent;

use crate::engine::Settings;
use crate::store::Synchronous;
use raw::RawConfig;

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// There is no file there: where askgate looked, and the `askgate init` that writes one.
    #[error(
        "no configuration file at {path}: `{init}` writes a commented channels.toml there, with the demo functions it names"
    )]
    Missing {
        /// The file, as an absolute path.
        path: String,
        /// The command that writes one into its folder.
        init: String,
    },
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

    /// The names of the variables set that start with `prefix`, sorted.
    pub fn names_starting(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = match &self.0 {
            None => std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect(),
            Some(map) => map.keys().cloned().collect(),
        };
        names.retain(|n| n.starts_with(prefix));
        names.sort();
        names
    }
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The database URL or path.
    pub database: String,
    /// SQLite durability.
    pub synchronous: Synchronous,
    /// The HTTP listen address (a name such as `localhost:8080` is resolved when the file is
    /// read).
    pub http: SocketAddr,
    /// The most event streams open at once.
    pub max_event_streams: usize,
    /// The most HTTP connections open at once.
    pub max_connections: usize,
    /// The environment variable holding the secret that signs callbacks without their own.
    pub callback_secret_env: Option<String>,
    /// How long one attempt to deliver a callback may take.
    pub callback_timeout: std::time::Duration,
    /// Engine settings: timeouts and per-channel rules.
    pub settings: Settings,
    /// Whether the console runs.
    pub console: bool,
    /// The chat platforms' sections the file has, by name.
    pub chats: Vec<ChatConfig>,
    /// Named webhook text channels.
    pub webhooks: Vec<WebhookSpec>,
    /// The functions, in file order.
    pub functions: Vec<FunctionSpec>,
    /// The MCP server at `/mcp`, when the file has an `[mcp]` table.
    pub mcp: Option<McpConfig>,
    /// Claude Code's hooks (`[claude_code]`).
    pub claude_code: Option<ClaudeCodeConfig>,
    /// askgate as an A2A agent (`[a2a]`).
    pub a2a: Option<A2aConfig>,
    /// Codex's hooks (`[codex]`).
    pub codex: Option<CodexConfig>,
    /// opencode servers whose prompts askgate asks (`[[opencode]]`).
    pub opencode: Vec<OpencodeConfig>,
    /// Agents with tokens of their own (`[[agents]]`), besides the default agent token.
    pub agents: Vec<AgentConfig>,
    /// Where callbacks may go besides `https` on public addresses (`[callbacks]`).
    pub callbacks: CallbacksConfig,
    /// How fast people may act through the API (`[limits]`).
    pub limits: LimitsConfig,
    /// Each `[gateway]` key's value and where it came from (default, file, environment).
    pub gateway_values: Vec<GatewayValue>,
}

impl Config {
    /// Reads and validates a file, with the process environment's `ASKGATE_GATEWAY_<KEY>`
    /// values in place of the file's `[gateway]` keys.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, and the key where one is at fault.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, &Env::process())
    }

    /// [`Config::load`] with the `ASKGATE_GATEWAY_*` values of `env`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, and the key where one is at fault.
    pub fn load_with(path: &Path, env: &Env) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => ConfigError::Missing {
                path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string(),
                init: match path.parent().filter(|p| !p.as_os_str().is_empty() && *p != Path::new(".")) {
                    Some(folder) => format!("askgate init {}", folder.display()),
                    None => "askgate init".to_owned(),
                },
            },
            _ => ConfigError::Read { path: shown.clone(), source },
        })?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Self::parse_with(&text, &shown, base, env)
    }

    /// Validates configuration text (the environment is not read); `path` is used in messages,
    /// and relative working directories of programs are resolved against `base` (the file's
    /// directory).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn parse(text: &str, path: &str, base: &Path) -> Result<Self, ConfigError> {
        Self::parse_with(text, path, base, &Env::from_pairs(std::iter::empty::<(String, String)>()))
    }

    /// [`Config::parse`] with the `ASKGATE_GATEWAY_*` values of `env` in place of the file's.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault (and the variable, when its value came from one).
    pub fn parse_with(text: &str, path: &str, base: &Path, env: &Env) -> Result<Self, ConfigError> {
        let mut raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let value = |(key, message): (String, String)| ConfigError::Value { path: path.to_owned(), key, message };
        let gateway_values = overrides::apply(&mut raw.gateway, text, env).map_err(value)?;
        // A value from the environment is wrong there, not in the file: say which variable.
        let bad = |(key, message): (String, String)| {
            let from = gateway_values.iter().find_map(|v| match &v.source {
                Source::Env(name) if key == format!("gateway.{}", v.key) && !message.contains(name) => Some(name),
                _ => None,
            });
            match from {
                Some(name) => value((key, format!("{message} (from {name})"))),
                None => value((key, message)),
            }
        };
        let gateway = &raw.gateway;
        let synchronous = match gateway.synchronous.as_deref() {
            None | Some("normal") => Synchronous::Normal,
            Some("full") => Synchronous::Full,
            Some(other) => {
                return Err(bad(("gateway.synchronous".into(), format!("`{other}` is not `normal` or `full`"))));
            }
        };
        let http = listen_address(&gateway.http).map_err(|m| bad(("gateway.http".into(), m)))?;
        for (key, value) in
            [("max_connections", gateway.max_connections), ("max_event_streams", gateway.max_event_streams)]
        {
            if value == 0 {
                return Err(bad((format!("gateway.{key}"), "must be at least 1".to_owned())));
            }
        }
        // An attempt must end well within the 2 minutes a sender holds a callback.
        if !(std::time::Duration::from_secs(1)..=std::time::Duration::from_secs(60)).contains(&gateway.callback_timeout)
        {
            return Err(bad(("gateway.callback_timeout".into(), "must be from 1s to 60s".to_owned())));
        }
        // Without one, the gateway names the address it listens on.
        let page_url = match gateway.public_url.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) if url.contains(['?', '#']) => {
                return Err(bad((
                    "gateway.public_url".into(),
                    format!("`{url}` has a query or a fragment; give the page's address alone"),
                )));
            }
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => Some(url.to_owned()),
            Some(url) => {
                return Err(bad(("gateway.public_url".into(), format!("`{url}` is not an http:// or https:// URL"))));
            }
        };
        if gateway.database.trim().is_empty() {
            return Err(bad(("gateway.database".into(), "is empty".to_owned())));
        }
        let functions = functions::functions(raw.functions, base).map_err(bad)?;
        let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
        let chats = chats::chats(text, path)?;
        let channels = channels::channels(&raw.channels, chats, &names).map_err(bad)?;
        let mcp = mcp::mcp(raw.mcp, base).map_err(bad)?;
        let claude_code = claude_code::claude_code(raw.claude_code).map_err(bad)?;
        let a2a = a2a::a2a(raw.a2a).map_err(bad)?;
        let codex = codex::codex(raw.codex).map_err(bad)?;
        let opencode = opencode::opencode(raw.opencode).map_err(bad)?;
        let agents = agents::agents(raw.agents).map_err(bad)?;
        let callbacks = callbacks::callbacks(raw.callbacks).map_err(bad)?;
        let limits = limits::limits(raw.limits).map_err(bad)?;
        let gateway = raw.gateway;
        Ok(Self {
            database: gateway.database,
            synchronous,
            http,
            max_event_streams: gateway.max_event_streams,
            max_connections: gateway.max_connections,
            callback_secret_env: gateway.callback_secret_env,
            callback_timeout: gateway.callback_timeout,
            settings: Settings {
                default_timeout: gateway.default_timeout,
                channels: channels.policies,
                retention: gateway.retention,
                grant_ttl: gateway.grant_ttl,
                remind_before: gateway.remind_before,
                quorum_includes_requester: gateway.quorum_includes_requester,
                page_url,
            },
            console: channels.console,
            chats: channels.chats,
            webhooks: channels.webhooks,
            functions,
            agents,
            callbacks,
            limits,
            mcp,
            claude_code,
            a2a,
            codex,
            opencode,
            gateway_values,
        })
    }
}

/// Where a client on this machine reaches askgate listening on `addr`: a wildcard bind
/// (`0.0.0.0`, `[::]`) through loopback.
pub fn reachable(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    addr
}

/// The address to listen on: `127.0.0.1:8080`, `[::1]:8080`, or a name that resolves
/// (`localhost:8080`, its first address).
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let resolved = text.to_socket_addrs().ok().and_then(|mut addrs| addrs.next());
    resolved.ok_or_else(|| format!("`{text}` is not an address like 127.0.0.1:8080 or localhost:8080"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::question::parse_duration;

    #[test]
    fn reminders_and_escalation_are_read_and_checked() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        let chat = "[channels.telegram]\ntoken_env = \"T\"\n[channels.discord]\ntoken_env = \"D\"\n";
        let ok = parse(&format!(
            "[gateway]\nremind_before = \"5m\"\n{chat}escalate_after = \"10m\"\nescalate_to = \"telegram:-100\"\n\
             escalate_answerers = [\"telegram:7\"]\n"
        ))
        .unwrap();
        assert_eq!(ok.settings.remind_before, Some(Duration::from_secs(300)));
        let nudges = &ok.settings.channels["discord"].nudges;
        assert_eq!(
            (nudges.escalate_after, nudges.escalate_to.as_ref().map(|c| c.as_str())),
            (Some(600_000), Some("telegram:-100"))
        );
        for (extra, says) in [
            ("escalate_to = \"telegram:-100\"\n", "channels.discord.escalate_to"),
            ("escalate_after = \"10m\"\n", "channels.discord.escalate_after"),
            ("escalate_after = \"10m\"\nescalate_to = \"webhook:sms:1\"\n", "no enabled channel here serves"),
            ("escalate_after = \"10m\"\nescalate_to = \"telegram:-1\"\nescalate_answerers = []\n", "is empty"),
        ] {
            let err = parse(&format!("{chat}{extra}")).unwrap_err().to_string();
            assert!(err.contains(says), "{extra}: {err}");
        }
    }

    #[test]
    fn a_session_timeout_outlasts_progress_and_agents_have_names_of_their_own() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        let mcp = "[mcp]\nconversation = \"console:local\"\nprogress_every = \"10s\"\n";
        assert_eq!(parse(mcp).unwrap().mcp.unwrap().session_timeout, std::time::Duration::from_secs(300));
        let short = parse(&format!("{mcp}session_timeout = \"10s\"\n")).unwrap_err().to_string();
        assert!(short.contains("mcp.session_timeout") && short.contains("longer than progress_every"), "{short}");
        let agents = parse("[[agents]]\nname = \"ci\"\ntoken_env = \"CI_TOKEN\"\n").unwrap().agents;
        assert_eq!(agents, [AgentConfig { name: "ci".into(), token_env: "CI_TOKEN".into() }]);
        // `ci.prod` with a client `bot` would be `mcp:ci.prod.bot`, as agent `ci`'s client `prod.bot`.
        for (name, says) in [("agent", "taken"), ("c i", "not a name"), ("ci.prod", "not a name")] {
            let text = format!("[[agents]]\nname = \"{name}\"\ntoken_env = \"X\"\n");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains("agents[0].name") && e.contains(says), "{e}");
        }
        assert!(!parse("").unwrap().settings.quorum_includes_requester);
        assert!(parse("[gateway]\nquorum_includes_requester = true\n").unwrap().settings.quorum_includes_requester);
    }

    #[test]
    fn grant_ttl_is_a_duration_or_never_by_default() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        assert_eq!(parse("").unwrap().settings.grant_ttl, None);
        assert_eq!(parse("[gateway]\ngrant_ttl = \"never\"\n").unwrap().settings.grant_ttl, None);
        assert_eq!(
            parse("[gateway]\ngrant_ttl = \"7d\"\n").unwrap().settings.grant_ttl,
            Some(Duration::from_secs(7 * 86_400))
        );
        assert!(parse("[gateway]\ngrant_ttl = \"soon\"\n").unwrap_err().to_string().contains("grant_ttl"));
    }

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
        assert!(err.contains("line 2") && err.contains("retention = \"soon\"") && err.contains("never"), "{err}");
    }

    #[test]
    fn the_bundled_file_is_valid() {
        let config = Config::parse(include_str!("../channels.toml"), "channels.toml", Path::new(".")).unwrap();
        assert!(config.console);
        assert!(config.functions.iter().any(|f| f.name == "demo"));
    }

    #[test]
    fn the_mcp_table_names_what_is_wrong() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        let mcp = parse("[mcp]\nconversation = \"telegram:42\"\nallowed_conversations = [\"discord:7\"]\n")
            .unwrap()
            .mcp
            .unwrap();
        assert!(mcp.allows(&crate::question::Conversation::parse("discord:7").unwrap()));
        assert!(!mcp.allows(&crate::question::Conversation::parse("discord:8").unwrap()));
        assert_eq!((mcp.progress_every.as_secs(), mcp.elicitation), (15, false));
        assert!(parse("").unwrap().mcp.is_none());
        for (text, key) in [
            ("[mcp]\n", "mcp.conversation"),
            ("[mcp]\nconversation = \"nowhere\"\n", "mcp.conversation"),
            ("[mcp]\nconversation = \"telegram:1\"\nanswerers = []\n", "mcp.answerers"),
            ("[mcp]\nconversation = \"telegram:1\"\nanswerers = [\"bob\"]\n", "mcp.answerers[0]"),
            ("[mcp]\nconversation = \"telegram:1\"\nprogress_every = 0\n", "progress_every = 0"),
            ("[mcp]\nconversation = \"telegram:1\"\nallowed_conversations = [\"x\"]\n", "mcp.allowed_conversations[0]"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let upstream = |body: &str| format!("[mcp]\nconversation = \"telegram:1\"\n[[mcp.upstream]]\n{body}\n");
        for (body, key) in [
            ("name = \"a__b\"\ncommand = [\"x\"]", "mcp.upstream[0].name"),
            ("name = \"files_\"\ncommand = [\"x\"]", "mcp.upstream[0].name"),
            ("name = \"files\"", "mcp.upstream[0].command"),
            ("name = \"files\"\ncommand = [\"x\"]\nurl = \"http://h\"", "mcp.upstream[0].url"),
            ("name = \"files\"\nurl = \"ftp://h\"", "mcp.upstream[0].url"),
            ("name = \"files\"\ncommand = [\"x\"]\ngrant = \"all\"", "mcp.upstream[0].grant"),
            ("name = \"files\"\ncommand = [\"x\"]\nenv = [\"A=B\"]", "mcp.upstream[0].env"),
            ("name = \"files\"\ncommand = [\" \"]", "mcp.upstream[0].command"),
            ("name = \"files\"\ncommand = [\"x\"]\ncall_timeout = 0", "a duration must be longer than zero"),
            ("name = \"files\"\ncommand = [\"x\"]\nmax_result = \"lots\"", "`lots` is not a size like 8MB"),
            ("name = \"files\"\ncommand = [\"x\"]\nmax_result = 0", "a size must be larger than zero"),
        ] {
            let err = parse(&upstream(body)).unwrap_err().to_string();
            assert!(err.contains(key), "{body}: {err}");
        }
        let twice = format!(
            "{}[[mcp.upstream]]\nname = \"f\"\nurl = \"http://h\"\n",
            upstream("name = \"f\"\nurl = \"http://h\"")
        );
        assert!(parse(&twice).unwrap_err().to_string().contains("used twice"));
        let ok =
            parse(&upstream("name = \"files\"\ncommand = [\"x\"]\napprove = [\"delete_*\"]\ndeny = [\"format_*\"]"))
                .unwrap();
        let files = &ok.mcp.unwrap().upstreams[0];
        assert!(files.gates("delete_file") && !files.gates("read_file"));
        assert!(!files.offers("format_disk") && files.offers("read_file"));
        assert_eq!((files.call_timeout, files.max_result.as_u64()), (Duration::from_secs(600), 8_000_000));
        let bounded =
            parse(&upstream("name = \"f\"\nurl = \"http://h\"\ncall_timeout = \"90s\"\nmax_result = \"512KiB\""));
        let bounded = &bounded.unwrap().mcp.unwrap().upstreams[0];
        assert_eq!((bounded.call_timeout, bounded.max_result.as_u64()), (Duration::from_secs(90), 512 * 1024));
        let err = parse("[mcp]\nconversation = \"telegram:1\"\nelicitaton = true\n").unwrap_err().to_string();
        assert!(err.contains("elicitaton"), "{err}");
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
        assert!(err.contains("line 2") && err.contains("`soon` is not a duration"), "{err}");
        let err = Config::parse("[[functions]]\nname = \"x\"\nbuiltin = \"nope\"\n", "c.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("functions.x.builtin"), "{err}");
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
        assert!(err.contains("functions.x.command"), "{err}");
        let neither = "[[functions]]\nname = \"x\"\n";
        assert!(Config::parse(neither, "c.toml", Path::new(".")).is_err());
        let bad_mode = "[[functions]]\nname = \"x\"\ncommand = [\"true\"]\nmode = \"wait\"\n";
        let err = Config::parse(bad_mode, "c.toml", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("functions.x.mode"), "{err}");
    }

    #[test]
    fn a_pre_approved_rule_must_name_something() {
        let parse = |rules: &str| {
            let text = format!("[[functions]]\nname = \"x\"\nbuiltin = \"approve-demo\"\npre_approved = {rules}\n");
            Config::parse(&text, "c.toml", Path::new("."))
        };
        assert_eq!(parse("[\"git push *\"]").unwrap().functions[0].pre_approved, ["git push *"]);
        let err = parse("[\"deploy\", \" * \"]").unwrap_err().to_string();
        assert!(err.contains("functions.x.pre_approved") && err.contains("every action"), "{err}");
        let err = parse("[\"git push --*\"]").unwrap_err().to_string();
        assert!(err.contains("`git push --*` would allow nothing: an option must be named"), "{err}");
    }

    #[test]
    fn durations_take_units_combinations_and_plain_seconds() {
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5").is_err());
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        let timeout = |text: &str| parse(text).map(|c| c.settings.default_timeout);
        assert_eq!(timeout("[gateway]\ndefault_timeout = 90\n").unwrap(), Duration::from_secs(90));
        assert_eq!(timeout("[gateway]\ndefault_timeout = \"1h30m\"\n").unwrap(), Duration::from_secs(5400));
        for bad in ["0", "-3", "true", "\"never\"", "\"3 fortnights\""] {
            let err = timeout(&format!("[gateway]\ndefault_timeout = {bad}\n")).unwrap_err().to_string();
            assert!(err.contains("default_timeout"), "{bad}: {err}");
        }
        let text = "[[functions]]\nname = \"x\"\ncommand = [\"true\"]\ntimeout = 120\n";
        let FunctionKind::Process(p) = &parse(text).unwrap().functions[0].kind else { panic!("not a process") };
        assert_eq!(p.timeout, Duration::from_secs(120));
    }

    #[test]
    fn the_http_address_is_resolved_when_the_file_is_read() {
        let parse = |text: &str| Config::parse(text, "c.toml", Path::new("."));
        assert_eq!(parse("").unwrap().http, "127.0.0.1:8080".parse().unwrap());
        let local = parse("[gateway]\nhttp = \"localhost:9090\"\n").unwrap().http;
        assert!(local.ip().is_loopback() && local.port() == 9090, "{local}");
        let err = parse("[gateway]\nhttp = \"8080\"\n").unwrap_err().to_string();
        assert!(err.contains("gateway.http"), "{err}");
    }
}
