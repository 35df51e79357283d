//! The `[[functions]]` entries: a built-in by name, a program speaking the process
//! protocol, or a remote agent (AG-UI or A2A) that askgate runs on a person's behalf, with who
//! may start it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::channels::{Fault, access};
use super::raw::RawFunction;
use super::remote::{self, RemoteAgent};
use crate::engine::Access;
use crate::function::{self, process::ProcessConfig};

/// What runs when a function is called.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionKind {
    /// A built-in, by its name.
    Builtin(String),
    /// A program speaking the process protocol.
    Process(ProcessConfig),
    /// An AG-UI agent: each run is a run of the agent, its interrupts asked of the person.
    Agui(RemoteAgent),
    /// An A2A agent: each run is a task of the agent, its `input-required` asked of the person.
    A2a(RemoteAgent),
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
    /// Rules of actions its approvals allow without asking (`*` matches any run of characters).
    pub pre_approved: Vec<String>,
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
            FunctionKind::Agui(agent) => format!("AG-UI agent at {}", agent.url),
            FunctionKind::A2a(agent) => format!("A2A agent at {}", agent.url),
        }
    }
}

/// Variables a program gets from askgate's environment unless `env` says otherwise.
const DEFAULT_PASS_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ"];
/// How long one invocation of a program may run unless `timeout` says otherwise.
const DEFAULT_PROCESS_TIMEOUT: Duration = Duration::from_secs(300);

/// Validates every `[[functions]]` entry; relative working directories are resolved against
/// `base`. Errors name the key.
pub(super) fn functions(raw: Vec<RawFunction>, base: &Path) -> Result<Vec<FunctionSpec>, Fault> {
    let mut functions: Vec<FunctionSpec> = Vec::new();
    for (i, f) in raw.into_iter().enumerate() {
        let spec = function_spec(i, f, base)?;
        if functions.iter().any(|g| g.name == spec.name) {
            return Err((format!("functions.{}.name", spec.name), format!("`{}` is defined twice", spec.name)));
        }
        functions.push(spec);
    }
    Ok(functions)
}

fn function_spec(i: usize, f: RawFunction, base: &Path) -> Result<FunctionSpec, Fault> {
    if f.name.is_empty() || f.name.chars().any(|c| c.is_whitespace() || c == '/' || c == '@') {
        // Named by its place: its name is what is wrong.
        let key = format!("functions[{i}].name");
        return Err((key, format!("`{}` is not a usable name (no spaces, slashes or @)", f.name)));
    }
    // Named by its name, as a person finds it in the file: `functions.deploy.command`.
    let name = f.name.clone();
    let key = |k: &str| format!("functions.{name}.{k}");
    let allowed_users = f
        .allowed_users
        .as_deref()
        .map(|users| access(users, None))
        .transpose()
        .map_err(|m| (key("allowed_users"), m))?;
    if let Some(rule) = f.pre_approved.iter().find(|r| crate::text::catches_all(r)) {
        return Err((key("pre_approved"), format!("`{rule}` would allow every action; a rule must name something")));
    }
    for rule in &f.pre_approved {
        if let Some(why) = crate::question::rule::never_fits(rule) {
            return Err((key("pre_approved"), format!("`{rule}` would allow nothing: {why}")));
        }
    }
    let pre_approved = f.pre_approved.clone();
    let (name, description) = (f.name.clone(), f.description.clone());
    let given = [f.builtin.is_some(), f.command.is_some(), f.agui.is_some(), f.a2a.is_some()];
    let (kind, default_description) = match given {
        [false, false, false, false] => {
            return Err((key("command"), "is required (or `builtin`, `agui`, `a2a`)".to_owned()));
        }
        [true, false, false, false] => builtin(f),
        [false, true, false, false] => process(f, base),
        [false, false, true, false] => remote::agui(f),
        [false, false, false, true] => remote::a2a(f),
        _ => return Err((key("command"), "give one of `builtin`, `command`, `agui` and `a2a`".to_owned())),
    }
    .map_err(|(k, m)| (key(k), m))?;
    let description = description.unwrap_or(default_description);
    Ok(FunctionSpec { name, description, kind, allowed_users, pre_approved })
}

/// A built-in by name, with its own description; it takes none of a program's keys.
fn builtin(f: RawFunction) -> Result<(FunctionKind, String), (&'static str, String)> {
    if f.token_env.is_some() {
        return Err(("token_env", "is for `agui` and `a2a` agents; a built-in takes none".to_owned()));
    }
    let process_keys = f.cwd.is_some()
        || f.env.is_some()
        || !f.set_env.is_empty()
        || f.timeout.is_some()
        || f.mode.is_some()
        || f.show_stderr.is_some();
    if process_keys {
        return Err(("builtin", "a built-in takes no cwd, env, set_env, timeout, mode or show_stderr".to_owned()));
    }
    let name = f.builtin.unwrap_or_default();
    let Some((_, description)) = function::builtin(&name) else {
        let known = function::builtin_names().join(", ");
        return Err(("builtin", format!("no built-in `{name}`; there are {known}")));
    };
    Ok((FunctionKind::Builtin(name), description.to_owned()))
}

/// A program and how it runs.
/// A program askgate starts: its command line, working directory and the variables it gets.
pub(super) struct Program {
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub pass_env: Vec<String>,
}

/// Checks a program's keys (shared by `[[functions]]` and `[[mcp.upstream]]`): a command
/// that names a program, `cwd` resolved against `base`, variable names without `=`.
pub(super) fn program(
    command: Option<Vec<String>>,
    cwd: Option<String>,
    env: Option<Vec<String>>,
    set_env: &BTreeMap<String, String>,
    base: &Path,
) -> Result<Program, (&'static str, String)> {
    let command = command.unwrap_or_default();
    if command.first().is_none_or(|program| program.trim().is_empty()) {
        return Err(("command", "needs at least the program to run".to_owned()));
    }
    let cwd = cwd.map_or_else(|| base.to_path_buf(), |dir| base.join(dir));
    let pass_env = env.unwrap_or_else(|| DEFAULT_PASS_ENV.iter().map(|s| (*s).to_owned()).collect());
    if let Some(bad) = pass_env.iter().chain(set_env.keys()).find(|v| v.is_empty() || v.contains('=')) {
        return Err(("env", format!("`{bad}` is not a variable name")));
    }
    Ok(Program { command, cwd, pass_env })
}

fn process(f: RawFunction, base: &Path) -> Result<(FunctionKind, String), (&'static str, String)> {
    if f.token_env.is_some() {
        return Err(("token_env", "is for `agui` and `a2a` agents; a program gets variables from `env`".to_owned()));
    }
    let Program { command, cwd, pass_env } = program(f.command, f.cwd, f.env, &f.set_env, base)?;
    let hold = match f.mode.as_deref() {
        None | Some("follow_up") => false,
        Some("hold") => true,
        Some(other) => return Err(("mode", format!("`{other}` is not `follow_up` or `hold`"))),
    };
    let description = format!("runs {}", command.join(" "));
    let config = ProcessConfig {
        command,
        cwd,
        pass_env,
        set_env: f.set_env,
        timeout: f.timeout.unwrap_or(DEFAULT_PROCESS_TIMEOUT),
        hold,
        show_stderr: f.show_stderr.unwrap_or(false),
    };
    Ok((FunctionKind::Process(config), description))
}
