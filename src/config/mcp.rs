//! `[mcp]`: where questions from AI agents (the MCP server at `/mcp`) go, and who answers them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytesize::ByteSize;

use super::raw::{RawMcp, RawUpstream};
use crate::question::{Conversation, EXAMPLE_USER, UserRef};
use crate::text::glob;

/// The MCP server's settings; `/mcp` is served when the file has an `[mcp]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// Where a tool call's question goes unless the call names another.
    pub conversation: Conversation,
    /// Who may answer; none: the target channel's `allowed_users`, as for API questions.
    pub answerers: Option<Vec<UserRef>>,
    /// Other conversations a call may name.
    pub allowed_conversations: Vec<Conversation>,
    /// How often a waiting tool call sends a progress notification (when the client asked), or
    /// else a ping: either keeps its session from being reaped as idle.
    pub progress_every: Duration,
    /// How long a session without requests or traffic lives: a held call's progress or pings
    /// keep it alive, so only a session nobody uses ends.
    pub session_timeout: Duration,
    /// How long a 2026-07-28 call whose client closed its stream may be called again (and so
    /// attach to its question) before the question is cancelled: that revision cancels a call
    /// by closing it, as a dropped connection does.
    pub reattach_grace: Duration,
    /// Also show a waiting question in the agent's client, as a form, when it can show one.
    pub elicitation: bool,
    /// MCP servers whose tools askgate offers as its own, behind approvals.
    pub upstreams: Vec<UpstreamConfig>,
}

/// `[[mcp.upstream]]`: an MCP server whose tools askgate offers as `<name>__<tool>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The prefix of its tools (letters, digits, `-`; no `__`).
    pub name: String,
    /// How askgate reaches it.
    pub transport: UpstreamTransport,
    /// Tool-name patterns (`*` matches any run of characters) whose calls need an approval.
    pub approve: Vec<String>,
    /// Patterns of tools that are never offered.
    pub deny: Vec<String>,
    /// Where its approvals are asked; none: `[mcp] conversation`.
    pub conversation: Option<Conversation>,
    /// What an "allow always" covers: the tool with any arguments, or these arguments only.
    pub grant: GrantScope,
    /// How long a call may wait for its result before it fails (and is cancelled upstream).
    pub call_timeout: Duration,
    /// The largest result a call may return; a larger one is a tool error.
    pub max_result: ByteSize,
}

/// The default of `call_timeout` in `[[mcp.upstream]]`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The default of `max_result` in `[[mcp.upstream]]`.
pub const MAX_RESULT: ByteSize = ByteSize::mb(8);

/// How askgate reaches an upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A program askgate starts, speaking MCP on stdin/stdout, with a clean environment.
    Stdio {
        /// The program and its arguments.
        command: Vec<String>,
        /// Its working directory.
        cwd: PathBuf,
        /// Variables passed through from askgate's environment.
        pass_env: Vec<String>,
        /// Variables set to fixed values.
        set_env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
    },
}

/// What an "allow always" on a gated call covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantScope {
    /// The tool, whatever the arguments.
    Tool,
    /// The tool with exactly these arguments.
    Arguments,
}

impl UpstreamConfig {
    /// Whether `tool` is offered at all.
    pub fn offers(&self, tool: &str) -> bool {
        !self.deny.iter().any(|p| glob(p, tool))
    }

    /// Whether a call of `tool` needs an approval.
    pub fn gates(&self, tool: &str) -> bool {
        self.approve.iter().any(|p| glob(p, tool))
    }

    /// A size as people write it: in decimal units (`8.0 MB`) when it is a round number of
    /// them, else in binary ones (`512.0 KiB`).
    pub fn size_text(size: ByteSize) -> String {
        if size.as_u64().is_multiple_of(1000) {
            size.display().si().to_string()
        } else {
            size.display().iec().to_string()
        }
    }
}

/// The default of `mcp.progress_every`.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// The default of `mcp.session_timeout`.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(300);
/// The default of `mcp.reattach_grace`: long enough for a client to come back over a network
/// that changed under it (a phone moving between Wi-Fi and cellular, a reconnect with backoff,
/// an agent whose call timed out calling again), short enough that a card nobody will hear
/// leaves people's screens within a minute.
pub const REATTACH_GRACE: Duration = Duration::from_secs(60);

impl McpConfig {
    /// Whether a tool call may send its question to `conversation`.
    pub fn allows(&self, conversation: &Conversation) -> bool {
        *conversation == self.conversation || self.allowed_conversations.contains(conversation)
    }
}

/// An `answerers` list: none when left out; an empty one is refused (nobody could answer).
pub(super) fn answerers(key: &str, list: Option<Vec<String>>) -> Result<Option<Vec<UserRef>>, (String, String)> {
    match list {
        None => Ok(None),
        Some(list) if list.is_empty() => Err((
            key.to_owned(),
            "is empty: nobody could answer; leave it out to use the channel's allowed_users".into(),
        )),
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, u)| {
                UserRef::parse(u)
                    .map_err(|e| (format!("{key}[{i}]"), format!("`{u}` is not a user like {EXAMPLE_USER}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
    }
}

pub(super) fn mcp(raw: Option<RawMcp>, base: &Path) -> Result<Option<McpConfig>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let conversation = |key: String, text: &str| {
        Conversation::parse(text).map_err(|e| (key, format!("`{text}` is not a conversation like {EXAMPLE_USER}: {e}")))
    };
    let Some(default) = raw.conversation.as_deref() else {
        return Err((
            "mcp.conversation".into(),
            format!("is required: where agents' questions go, e.g. \"{EXAMPLE_USER}\" or \"console:local\""),
        ));
    };
    let answerers = answerers("mcp.answerers", raw.answerers)?;
    let allowed_conversations = raw
        .allowed_conversations
        .iter()
        .enumerate()
        .map(|(i, c)| conversation(format!("mcp.allowed_conversations[{i}]"), c))
        .collect::<Result<Vec<_>, _>>()?;
    let progress_every = raw.progress_every.unwrap_or(PROGRESS_EVERY);
    if progress_every.is_zero() {
        return Err(("mcp.progress_every".into(), "must be at least 1s".into()));
    }
    let session_timeout = raw.session_timeout.unwrap_or(SESSION_TIMEOUT);
    if session_timeout <= progress_every {
        return Err((
            "mcp.session_timeout".into(),
            "must be longer than progress_every: a held call's traffic keeps its session alive".into(),
        ));
    }
    let reattach_grace = raw.reattach_grace.unwrap_or(REATTACH_GRACE);
    if reattach_grace.is_zero() {
        return Err(("mcp.reattach_grace".into(), "must be at least 1s: a call may come back".into()));
    }
    let mut upstreams: Vec<UpstreamConfig> = Vec::new();
    for (i, raw) in raw.upstream.into_iter().enumerate() {
        let upstream = upstream(i, raw, base)?;
        if upstreams.iter().any(|u| u.name == upstream.name) {
            return Err((format!("mcp.upstream[{i}].name"), format!("`{}` is used twice", upstream.name)));
        }
        upstreams.push(upstream);
    }
    Ok(Some(McpConfig {
        conversation: conversation("mcp.conversation".into(), default)?,
        answerers,
        allowed_conversations,
        progress_every,
        session_timeout,
        reattach_grace,
        elicitation: raw.elicitation,
        upstreams,
    }))
}

fn upstream(i: usize, raw: RawUpstream, base: &Path) -> Result<UpstreamConfig, (String, String)> {
    let key = |k: &str| format!("mcp.upstream[{i}].{k}");
    let name = raw.name;
    // `<name>__<tool>` must split back at its first `__`: no `__` in the name, and no `_` at
    // its end (or start) to run into the separator.
    let usable = !name.is_empty()
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !usable {
        return Err((
            key("name"),
            format!("`{name}` is not a usable prefix (letters, digits, - and _, not at either end; no __)"),
        ));
    }
    let transport = match (raw.command, raw.url) {
        (Some(_), Some(_)) => return Err((key("url"), "give either `command` or `url`, not both".to_owned())),
        (None, None) => return Err((key("command"), "is required (or `url`)".to_owned())),
        (Some(command), None) => {
            let program = super::functions::program(Some(command), raw.cwd, raw.env, &raw.set_env, base)
                .map_err(|(k, message)| (key(k), message))?;
            let super::functions::Program { command, cwd, pass_env } = program;
            UpstreamTransport::Stdio { command, cwd, pass_env, set_env: raw.set_env }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err((key("url"), format!("`{url}` is not an http:// or https:// URL")));
            }
            UpstreamTransport::Http { url }
        }
    };
    let conversation = raw
        .conversation
        .map(|c| Conversation::parse(&c).map_err(|e| (key("conversation"), format!("`{c}`: {e}"))))
        .transpose()?;
    let grant = match raw.grant.as_deref() {
        None | Some("tool") => GrantScope::Tool,
        Some("arguments") => GrantScope::Arguments,
        Some(other) => return Err((key("grant"), format!("`{other}` is not `tool` or `arguments`"))),
    };
    Ok(UpstreamConfig {
        name,
        transport,
        approve: raw.approve,
        deny: raw.deny,
        conversation,
        grant,
        call_timeout: raw.call_timeout.unwrap_or(CALL_TIMEOUT),
        max_result: raw.max_result.unwrap_or(MAX_RESULT),
    })
}
