//! `askgate check`: validates a configuration and reports what it enables, where each
//! `[gateway]` value came from, and what cannot work: a database folder askgate cannot write,
//! a database that does not answer, a program or a file it names that is not there (or not
//! executable), an upstream MCP server that does not answer.

use std::path::Path;

use askgate::config::{Config, Env};

macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `askgate check`: the report on stdout. Returns how many problems it found (a database
/// folder askgate cannot write, a PostgreSQL database that does not answer or refuses the
/// login, a function or an upstream whose program or files are missing, an HTTP upstream that
/// does not answer), which make the exit code 1.
pub fn check(config: &Config, path: &Path) -> usize {
    let mut out = String::new();
    let mut problems = 0;
    // askgate would not start at all.
    let mut database_fails = false;
    say!(out, "{}: ok", path.display());
    say!(out, "gateway:");
    for setting in &config.gateway_values {
        let value =
            if setting.key == "database" { askgate::store::redact(&setting.value) } else { setting.value.clone() };
        let from = match &setting.source {
            askgate::config::Source::Default => "default".to_owned(),
            askgate::config::Source::File => format!("from {}", path.display()),
            askgate::config::Source::Env(name) => format!("from {name}"),
        };
        say!(out, "  {} = {value} ({from})", setting.key);
    }
    if askgate::store::is_memory_url(&config.database) {
        say!(out, "database: in memory (nothing survives a restart)");
    } else if askgate::store::is_postgres_url(&config.database) {
        say!(
            out,
            "database: PostgreSQL, {} (several askgate instances may share it)",
            askgate::store::redact(&config.database)
        );
        database_fails = !postgres_instances(&mut out, &config.database);
    } else {
        match askgate::store::SqliteStore::holder(&config.database) {
            Ok(Some(holder)) => say!(out, "database: {} (in use by askgate, {holder})", config.database),
            Ok(None) => say!(out, "database: {} (not in use)", config.database),
            Err(e) => say!(out, "database: {} (cannot tell whether it is in use: {e})", config.database),
        }
        if let Err(e) = askgate::store::SqliteStore::check_folder(&config.database) {
            say!(out, "problem: database: {e}");
            database_fails = true;
        }
    }
    problems += usize::from(database_fails);
    say!(out, "channels:");
    for (name, state) in askgate::channel::states(config, &Env::process()) {
        say!(out, "  {name}: {state}");
    }
    let left_out = askgate::channel::LEFT_OUT;
    if !left_out.is_empty() {
        say!(out, "  not in this build: {} (build with --features <name>, or --features full)", left_out.join(", "));
    }
    for platform in askgate::channel::PLATFORMS {
        let advice = config.chat(platform.name()).and_then(|section| platform.advice(section, config.http));
        if let Some(advice) = advice {
            say!(out, "{advice}");
        }
    }
    let mut escalations: Vec<_> = config.settings.channels.iter().collect();
    escalations.sort_by(|a, b| a.0.cmp(b.0));
    for (name, policy) in escalations {
        let nudges = &policy.nudges;
        let Some(to) = &nudges.escalate_to else { continue };
        let after = std::time::Duration::from_millis(nudges.escalate_after.unwrap_or(0));
        let who = nudges.escalate_answerers.as_ref().map_or("anyone there".to_owned(), |users| join(users));
        say!(
            out,
            "  {name}: unanswered after {} escalates to {to} ({who} may answer)",
            humantime::format_duration(after)
        );
    }
    match &config.mcp {
        Some(mcp) => say!(
            out,
            "mcp: /mcp on http://{}/ and `askgate mcp`; questions go to {}{}",
            config.http,
            mcp.conversation,
            if mcp.allowed_conversations.is_empty() {
                String::new()
            } else {
                format!(" (calls may also name {})", join(&mcp.allowed_conversations))
            }
        ),
        None => say!(out, "mcp: off (add an [mcp] table with a conversation to serve /mcp)"),
    }
    let mut upstream_problems = Vec::new();
    for upstream in config.mcp.iter().flat_map(|m| &m.upstreams) {
        let faults = match &upstream.transport {
            askgate::config::UpstreamTransport::Stdio { command, cwd, .. } => command_faults(command, cwd),
            askgate::config::UpstreamTransport::Http { url } => http_fault(url).into_iter().collect(),
        };
        let reach = match &upstream.transport {
            askgate::config::UpstreamTransport::Stdio { command, .. } => format!("command `{}`", command.join(" ")),
            askgate::config::UpstreamTransport::Http { url } => format!("url {url}"),
        };
        upstream_problems.extend(faults.into_iter().map(|fault| format!("upstream `{}`: {fault}", upstream.name)));
        let list = |patterns: &[String]| if patterns.is_empty() { "none".to_owned() } else { patterns.join(", ") };
        say!(
            out,
            "  upstream {}: {reach}; approval for {}; never offered: {}; a call fails after {} (call_timeout) or with a result over {} (max_result)",
            upstream.name,
            list(&upstream.approve),
            list(&upstream.deny),
            humantime::format_duration(upstream.call_timeout),
            askgate::config::UpstreamConfig::size_text(upstream.max_result)
        );
    }
    for problem in &upstream_problems {
        say!(out, "problem: {problem}");
    }
    problems += upstream_problems.len();
    // Who may ask through /mcp and the API besides the operator: never answer.
    let mut agents = vec!["agent (ASKGATE_AGENT_TOKEN, else askgate-agent.token beside the database)".to_owned()];
    for agent in &config.agents {
        let set = if Env::process().get(&agent.token_env).is_some() { "set" } else { "not set: it cannot connect" };
        agents.push(format!("{} ({}: {set})", agent.name, agent.token_env));
    }
    say!(out, "agent tokens (ask, never answer): {}", agents.join(", "));
    say!(out, "functions:");
    for f in &config.functions {
        say!(out, "  {} ({}): {}", f.name, f.what(), f.description);
        if !f.pre_approved.is_empty() {
            say!(out, "    approvals allowed without asking: {}", f.pre_approved.join(", "));
        }
        match &f.kind {
            askgate::config::FunctionKind::Process(p) => {
                for fault in command_faults(&p.command, &p.cwd) {
                    problems += 1;
                    say!(out, "problem: function `{}`: {fault}", f.name);
                }
            }
            askgate::config::FunctionKind::Agui(agent) | askgate::config::FunctionKind::A2a(agent) => {
                if let Some(var) = agent.token_env.as_ref().filter(|v| Env::process().get(v).is_none()) {
                    problems += 1;
                    say!(out, "problem: function `{}`: {var} is not set, so its agent cannot be called", f.name);
                }
            }
            askgate::config::FunctionKind::Builtin(_) => {}
        }
    }
    let access = config.access_report();
    say!(out, "who may start runs:");
    for line in &access.lines {
        say!(out, "  {line}");
    }
    for warning in &access.warnings {
        say!(out, "warning: {warning}");
    }
    if database_fails {
        say!(out, "{problems} problem(s): askgate would not start; see the problems above");
    } else if problems > 0 {
        say!(out, "{problems} problem(s): askgate would start, but what is named above cannot run");
    }
    // Written at once, and quietly cut short when the reader goes (`askgate check | head`).
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    problems
}

/// What keeps `command` from starting in `cwd`: its program not found (a path from `cwd`, or a
/// name on `PATH`) or not executable, and arguments that name files (see [`names_a_file`])
/// that are not there.
fn command_faults(command: &[String], cwd: &Path) -> Vec<String> {
    let mut faults = Vec::new();
    let program = &command[0];
    let path = std::env::var_os("PATH");
    if which::which_in(program, path.as_ref(), cwd).is_err() {
        let from = if program.contains('/') { format!("from {}", cwd.display()) } else { "on PATH".to_owned() };
        if program.contains('/') && cwd.join(program).is_file() {
            faults.push(format!(
                "program `{program}` is not executable (from {}): `chmod +x` it, or start it with its interpreter",
                cwd.display()
            ));
        } else {
            faults.push(format!("program `{program}` not found ({from})"));
        }
    }
    for file in command[1..].iter().filter(|a| names_a_file(a)) {
        if !cwd.join(file).exists() {
            faults.push(format!("file `{file}` not found (from {}), given to `{program}`", cwd.display()));
        }
    }
    faults
}

/// Whether an argument of a command names a file the program will open, as the script of
/// `python3 examples/deploy.py` does: a path with a `/` in it (not at the end), not an option
/// (`-…`), a URL (`…://…`), or words with spaces (`sh -c "…"`). A bare name (`python3 -m
/// module`) is not checked.
fn names_a_file(argument: &str) -> bool {
    argument.contains('/')
        && !argument.ends_with('/')
        && !argument.starts_with('-')
        && !argument.contains("://")
        && !argument.contains(char::is_whitespace)
}

/// Whether the MCP server at `url` answers an HTTP request within 5 s: any answer but 404
/// (a wrong path) or a 5xx (a proxy in front of a server that is down) will do, as a request
/// without MCP's headers may well be refused.
fn http_fault(url: &str) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let answered = runtime.map_err(|e| e.to_string()).and_then(|r| {
        r.block_on(async {
            let client = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(5))
                .build()
                .map_err(|e| e.to_string())?;
            let response = client.get(url).send().await.map_err(|e| askgate::error_chain(&e))?;
            Ok(response.status())
        })
    });
    match answered {
        Ok(status) if status == reqwest::StatusCode::NOT_FOUND || status.is_server_error() => {
            Some(format!("{url} answers {status}"))
        }
        Ok(_) => None,
        Err(e) => Some(format!("{url} does not answer: {e}")),
    }
}

fn join(items: &[impl std::fmt::Display]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The instances signed on to a PostgreSQL database, for `check`; false (a problem) when the
/// database does not answer or refuses the login.
fn postgres_instances(out: &mut String, url: &str) -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let listed = runtime.map_err(|e| e.to_string()).and_then(|r| {
        r.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(10), askgate::store::instances(url)).await
        })
        .map_err(|_| "no answer within 10 s".to_owned())?
        .map_err(|e| askgate::error_chain(&e))
    });
    match listed {
        Ok(rows) if rows.is_empty() => say!(out, "instances: none running"),
        Ok(rows) => {
            say!(out, "instances:");
            for row in rows {
                let state = if row.alive { "alive" } else { "silent: taken for dead" };
                say!(out, "  {} (last heartbeat {:.0}s ago, {state})", row.id, row.silent_for);
            }
        }
        Err(e) => {
            say!(out, "problem: database: {e}");
            return false;
        }
    }
    true
}
