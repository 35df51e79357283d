//! `askgate man`: one manual page that holds every command, so it refers to no other page
//! (clap_mangen's own page names an `askgate-serve(1)` per command, which `askgate man` does
//! not produce), with the environment and the files askgate reads and writes.

use std::path::Path;

use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

/// Stands in [`ENVIRONMENT`] for the variables the bundled `channels.toml` names for the chat
/// platforms, which [`platform_tokens`] lists.
const PLATFORM_TOKENS: &str = "";

/// The variables the bundled `channels.toml` gives the chat platforms, in their order.
fn platform_tokens() -> String {
    let bundled = askgate::config::Config::parse(include_str!("../../channels.toml"), "channels.toml", Path::new("."));
    let bundled = bundled.expect("the bundled channels.toml is valid");
    let sections = askgate::channel::PLATFORMS.iter().filter_map(|p| bundled.chat(p.name()).map(|s| p.variables(s)));
    sections.flatten().collect::<Vec<_>>().join(", ")
}

/// The variables askgate reads, each with what it does.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("ASKGATE_CONFIG", "The configuration file, for every command that takes --config (default channels.toml)."),
    (
        "ASKGATE_API_TOKEN",
        "The operator token of the HTTP API (at least 32 characters). Unset: askgate makes one and keeps it in askgate.token beside the database.",
    ),
    (
        "ASKGATE_AGENT_TOKEN",
        "The agents' token: they ask, and never answer. Unset: askgate makes one and keeps it in askgate-agent.token beside the database.",
    ),
    ("ASKGATE_TOKEN", "A person's own token, for askgate tui (made with askgate token add)."),
    ("ASKGATE_LOG_FORMAT", "text or json, as --log-format."),
    (
        "ASKGATE_GATEWAY_*",
        "Any [gateway] key of the configuration, such as ASKGATE_GATEWAY_HTTP or ASKGATE_GATEWAY_DATABASE; askgate check says where each value came from.",
    ),
    (
        PLATFORM_TOKENS,
        "The chat platforms' tokens, as the bundled channels.toml names them (each channel's token_env says which variable it reads). A channel whose variable is unset is disabled.",
    ),
    ("RUST_LOG", "What is logged (default info)."),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "Where askgate serve sends OpenTelemetry traces (OTLP over HTTP); unset, it sends none. The other OTEL_* variables of the exporter apply, such as OTEL_SERVICE_NAME.",
    ),
];

/// The files askgate reads and writes, each with what it holds.
const FILES: &[(&str, &str)] = &[
    (
        "channels.toml",
        "The configuration: the gateway, the channels and the functions. Read from the working directory unless --config or ASKGATE_CONFIG names another. askgate init writes one, with the demo functions it names.",
    ),
    (
        "askgate.db",
        "The SQLite database (gateway.database, default sqlite://askgate.db, relative to the working directory), with askgate.db-wal and askgate.db-shm beside it.",
    ),
    ("askgate.db.lock", "Held while askgate serves the database: a second askgate on it refuses to start."),
    (
        "askgate.token, askgate-agent.token",
        "The operator's and the agents' tokens that askgate made, beside the database (mode 0600). None is written where ASKGATE_API_TOKEN or ASKGATE_AGENT_TOKEN is set.",
    ),
];

/// The page, in roff.
pub fn page(mut cli: clap::Command) -> Vec<u8> {
    cli.build();
    let man = Man::new(cli.clone());
    let mut out = Vec::new();
    // Writing to a Vec does not fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    let mut roff = Roff::default();
    roff.control("SH", ["COMMANDS"]);
    out.extend(roff.render().into_bytes());
    for command in cli.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        commands(&mut out, "askgate", command);
    }
    let mut roff = Roff::default();
    for (heading, entries) in [("ENVIRONMENT", ENVIRONMENT), ("FILES", FILES)] {
        roff.control("SH", [heading]);
        for (name, what) in entries {
            let name = if *name == PLATFORM_TOKENS { platform_tokens() } else { (*name).to_owned() };
            roff.control("TP", []).text([bold(name)]).text([roman(*what)]);
        }
    }
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman(
        "0 on success (serve: after SIGINT or SIGTERM finished its work); 1 when a command fails; \
         2 for a configuration that cannot be used; 130 when a second signal cut a shutdown short.",
    )]);
    out.extend(roff.render().into_bytes());
    let _ = man.render_version_section(&mut out);
    out
}

/// `command` under its full name (`askgate token add`): its synopsis, what it does, its
/// options; then its own commands. The options every command takes are the page's.
fn commands(out: &mut Vec<u8>, parent: &str, command: &clap::Command) {
    let name = format!("{parent} {}", command.get_name());
    let own = command.clone().bin_name(&name).mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
    let man = Man::new(own);
    let mut roff = Roff::default();
    roff.control("SS", [name.as_str()]);
    out.extend(roff.render().into_bytes());
    let mut section = Vec::new();
    let _ = man.render_synopsis_section(&mut section);
    let _ = man.render_description_section(&mut section);
    let _ = man.render_options_section(&mut section);
    // Paragraphs under the command's heading, not sections of the page (and the apostrophes'
    // preamble once, at the top of the page).
    let text = String::from_utf8_lossy(&section);
    let preamble = |l: &str| l.starts_with(".ie \\n(.g") || l.starts_with(".el .ds Aq");
    for line in text.lines().filter(|l| !preamble(l)) {
        out.extend(if line.starts_with(".SH ") { ".PP" } else { line }.as_bytes());
        out.push(b'\n');
    }
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        commands(out, &name, sub);
    }
}
