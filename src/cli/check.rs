//! `askgate check`: validates a configuration and reports what it enables, where each
//! `[gateway]` value came from, and what cannot work (a program that is not there).

use askgate::config::{Config, Env};

macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `askgate check`: the report on stdout. Returns how many problems it found (a function or an
/// upstream whose program is missing, a PostgreSQL database that does not answer or refuses
/// the login), which make the exit code 1.
pub fn check(config: &Config, path: &std::path::Path) -> usize {
    let mut out = String::new();
    let mut problems = 0;
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
        problems += postgres_instances(&mut out, &config.database);
    } else {
        match askgate::store::SqliteStore::holder(&config.database) {
            Ok(Some(holder)) => say!(out, "database: {} (in use by askgate, {holder})", config.database),
            Ok(None) => say!(out, "database: {} (not in use)", config.database),
            Err(e) => say!(out, "database: {} (cannot tell whether it is in use: {e})", config.database),
        }
    }
    say!(out, "channels:");
    for (name, state) in config.channel_states(&Env::process()) {
        say!(out, "  {name}: {state}");
    }
    if let Some(slack) = &config.slack {
        say!(out, "{}", askgate::channel::slack::app_needs(slack.app_token_env.is_some(), config.http));
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
    for upstream in config.mcp.iter().flat_map(|m| &m.upstreams) {
        let reach = match &upstream.transport {
            askgate::config::UpstreamTransport::Stdio { command, cwd, .. } => {
                let found = program_found(&command[0], Some(cwd));
                problems += usize::from(!found);
                format!("command `{}`{}", command.join(" "), if found { "" } else { " (program not found)" })
            }
            askgate::config::UpstreamTransport::Http { url } => format!("url {url}"),
        };
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
        if let askgate::config::FunctionKind::Process(p) = &f.kind
            && !program_found(&p.command[0], Some(&p.cwd))
        {
            problems += 1;
            say!(
                out,
                "problem: function `{}`: program `{}` not found (from {})",
                f.name,
                p.command[0],
                p.cwd.display()
            );
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
    if problems > 0 {
        say!(out, "{problems} problem(s): askgate would start, but what is named above cannot run");
    }
    // Written at once, and quietly cut short when the reader goes (`askgate check | head`).
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    problems
}

/// Whether a program can be started: a path (relative to `cwd`) that exists, or a name found
/// on `PATH`.
fn program_found(program: &str, cwd: Option<&std::path::Path>) -> bool {
    if program.contains('/') {
        let path = std::path::Path::new(program);
        return match cwd {
            Some(cwd) if path.is_relative() => cwd.join(path).exists(),
            _ => path.exists(),
        };
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn join(items: &[impl std::fmt::Display]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The instances signed on to a PostgreSQL database, for `check`; 1 (a problem) when the
/// database does not answer or refuses the login.
fn postgres_instances(out: &mut String, url: &str) -> usize {
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
            return 1;
        }
    }
    0
}
