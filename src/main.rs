//! The `askgate` binary: `serve` runs the gateway, `check` validates a configuration, `init`
//! writes one to start from.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use askgate::channel::console::terminal::console_input;
use askgate::config::{Config, Env};
use askgate::gateway::{ConsoleIo, Gateway};
use clap::{Parser, Subcommand};

#[path = "cli/check.rs"]
mod check;
#[path = "cli/init.rs"]
mod init;
#[path = "cli/man.rs"]
mod man;
#[path = "cli/telemetry.rs"]
mod telemetry;

/// mimalloc rather than glibc's allocator: measured with 64 conversations at once (`cargo bench
/// --bench cycles`), a cycle costs a fifth less CPU, and the resident memory is the same, with
/// its arenas committed on demand (`MI_DEFAULT_ARENA_EAGER_COMMIT=0`, set for the build in
/// `.cargo/config.toml`; eagerly committed, an idle askgate kept twice the memory).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// askgate: let a running function pause to ask a human, and resume with the answer.
#[derive(Parser)]
#[command(version = VERSION, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as `text` (for people) or `json` (one object per line, with the run and
    /// question ids as fields).
    #[arg(long, global = true, env = "ASKGATE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// The configuration file.
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml")]
        config: PathBuf,
        /// Stop when the console's input ends (for piped input), as after Ctrl-C.
        #[arg(long)]
        exit_on_eof: bool,
    },
    /// Validate a configuration file, list channels and functions, and name what would not work
    /// (exit code 1): the database, programs and files the functions name, HTTP upstreams.
    Check {
        /// The configuration file.
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml")]
        config: PathBuf,
    },
    /// Write a commented channels.toml, the demo functions it names and their Python helper into
    /// FOLDER (made when missing); when any of these files is there, write nothing.
    Init {
        /// Where to write them.
        #[arg(default_value = ".")]
        folder: PathBuf,
    },
    /// Copy a SQLite database into an empty PostgreSQL database (stop askgate first; the copy
    /// lands whole or not at all). Then point gateway.database at the PostgreSQL URL.
    Migrate {
        /// The SQLite database: `sqlite://askgate.db` or a path.
        #[arg(long)]
        from: String,
        /// The PostgreSQL database: `postgres://user:password@host:5432/name`.
        #[arg(long)]
        to: String,
    },
    /// Print a shell completion script: `askgate completions bash > /etc/bash_completion.d/askgate`
    /// (or zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `askgate man > /usr/local/share/man/man1/askgate.1`.
    Man,
    /// Answer one Claude Code hook (a `type: "command"` hook): the hook's JSON on stdin, the
    /// decision on stdout, asked through a running askgate's /hooks/claude-code as an agent
    /// (the token as for `askgate mcp`).
    Hook {
        /// Whose hook: `claude-code` or `codex`.
        agent: HookAgent,
        /// The configuration file (for gateway.http and where the token file is).
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml")]
        config: PathBuf,
        /// askgate's address (http://127.0.0.1:8080); default: the configured gateway.http.
        #[arg(long)]
        url: Option<String>,
    },
    /// A terminal UI of a running askgate: answer the questions waiting for you, and talk in
    /// your own conversation. Your token from ASKGATE_TOKEN (`askgate token add`), else the
    /// operator's (ASKGATE_API_TOKEN, or askgate.token beside the database).
    Tui {
        /// The configuration file (for gateway.http and where the token file is).
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml")]
        config: PathBuf,
        /// askgate's address (http://127.0.0.1:8080); default: the configured gateway.http.
        #[arg(long)]
        url: Option<String>,
    },
    /// People's own tokens for the web page, the TUI and the API, made through the running
    /// askgate with the operator token (ASKGATE_API_TOKEN, or askgate.token beside the database).
    Token {
        #[command(subcommand)]
        action: TokenAction,
        /// The configuration file (for gateway.http and where the token file is).
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml", global = true)]
        config: PathBuf,
        /// askgate's address (http://127.0.0.1:8080); default: the configured gateway.http.
        #[arg(long, global = true)]
        url: Option<String>,
    },
    /// Serve MCP on stdin/stdout, bridged to a running askgate's /mcp (for MCP clients that
    /// start local processes). It asks as an agent: the token comes from ASKGATE_AGENT_TOKEN or
    /// askgate-agent.token beside the database.
    Mcp {
        /// The configuration file (for gateway.http and where the token file is).
        #[arg(long, env = "ASKGATE_CONFIG", default_value = "channels.toml")]
        config: PathBuf,
        /// askgate's address or its MCP endpoint (http://127.0.0.1:8080 or …/mcp); default: /mcp
        /// at the configured gateway.http.
        #[arg(long)]
        url: Option<String>,
        /// Also serve as a Claude Code channel that relays its permission prompts to askgate
        /// (`claude --dangerously-load-development-channels server:<name>`).
        #[arg(long)]
        channel: bool,
    },
}

/// What `askgate token` does.
#[derive(Subcommand)]
enum TokenAction {
    /// Make a token for the person `web:<name>` and print it (once: only its hash is kept).
    Add {
        /// The person's name: lower-case letters, digits, `.`, `_`, `-`.
        name: String,
        /// What it may do: `answer`, `ask`, `admin`, comma-separated.
        #[arg(long, default_value = "answer", conflicts_with = "agent")]
        may: String,
        /// A token for the agent `agent:<name>` instead (asks and never answers; listed and
        /// revoked as `agent:<name>`).
        #[arg(long)]
        agent: bool,
    },
    /// Print the agents' default token (ASKGATE_AGENT_TOKEN, else askgate-agent.token beside the
    /// database, created if it is not there yet): what `/mcp` and `askgate mcp` take. Needs no
    /// running askgate: `--header "Authorization: Bearer $(askgate token agent)"`.
    Agent,
    /// List the tokens, the browser sessions signed in by `/web` links, and unused links.
    List,
    /// Revoke a token or a session: it is refused from then on, and what it holds open (event
    /// streams, long-polls, MCP sessions, the TUI) ends.
    Revoke {
        /// Its name, as `list` shows it.
        name: String,
    },
}

/// The agents whose hooks `askgate hook` answers.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum HookAgent {
    /// Claude Code's `PreToolUse` and `PermissionRequest` hooks.
    ClaudeCode,
    /// Codex's `PreToolUse` and `PermissionRequest` hooks.
    Codex,
}

impl HookAgent {
    /// Where its hooks are posted.
    fn route(self) -> &'static str {
        match self {
            Self::ClaudeCode => "/hooks/claude-code",
            Self::Codex => "/hooks/codex",
        }
    }
}

/// `0.1.0 (commit 1a2b3c4d5e6f)`.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("ASKGATE_COMMIT"), ")");

/// Exit code for an unusable configuration.
const BAD_CONFIG: u8 = 2;
/// Exit code when a second signal cuts a shutdown short (as shells report SIGINT).
const EXIT_INTERRUPTED: i32 = 130;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The bridge's stdout is the MCP stream and its stderr the client's log: only problems.
    // The TUI's terminal is its screen: logs there would draw over it.
    let quiet = matches!(cli.command, Command::Mcp { .. } | Command::Hook { .. } | Command::Tui { .. });
    let default_filter = if quiet { "warn" } else { "info,sqlx=warn,rmcp=warn" };
    let serving = matches!(cli.command, Command::Serve { .. });
    let telemetry = telemetry::init(cli.log_format == "json", default_filter, serving);
    // Hints for a person at the console (what to type, how to stop); not in a service's JSON log.
    let for_a_person = cli.log_format == "text" || std::io::IsTerminal::is_terminal(&std::io::stdin());
    let config_path = match &cli.command {
        Command::Serve { config, .. }
        | Command::Check { config }
        | Command::Mcp { config, .. }
        | Command::Hook { config, .. }
        | Command::Token { config, .. }
        | Command::Tui { config, .. } => config.clone(),
        Command::Migrate { from, to } => return migrate(from, to),
        Command::Init { folder } => return finish("init", init::init(folder).map(|report| print!("{report}"))),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut command, "askgate", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Command::Man => {
            let page = man::page(<Cli as clap::CommandFactory>::command());
            return if std::io::Write::write_all(&mut std::io::stdout(), &page).is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let config = match Config::load(&config_path).and_then(|c| askgate::channel::check(&c).map(|()| c)) {
        Ok(c) => c,
        Err(e @ askgate::config::ConfigError::Missing { .. }) => {
            eprintln!("askgate: {e}");
            return ExitCode::from(BAD_CONFIG);
        }
        Err(e) => {
            eprintln!("askgate: invalid configuration: {e}");
            return ExitCode::from(BAD_CONFIG);
        }
    };
    match cli.command {
        Command::Check { .. } => {
            if check::check(&config, &config_path) == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Migrate { .. } | Command::Init { .. } | Command::Completions { .. } | Command::Man => {
            unreachable!("handled before the configuration is read")
        }
        Command::Hook { agent, url, .. } => match hook(&config, agent, url) {
            Ok(()) => ExitCode::SUCCESS,
            Err((e, blocks)) => {
                // Exit 2 blocks the call with the reason on stderr; any other exit lets the
                // agent go on as without the hook (Claude Code asks in the terminal, Codex shows
                // its own approval prompt). The reason goes to the agent's log.
                eprintln!("askgate hook: {e:#}");
                if blocks { ExitCode::from(2) } else { ExitCode::FAILURE }
            }
        },
        Command::Token { action, url, .. } => token(&config, action, url),
        Command::Tui { url, .. } => tui(&config, url),
        Command::Mcp { url, channel, .. } => match mcp(&config, url, channel) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("askgate mcp: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve { exit_on_eof, .. } => {
            let served = serve(config, exit_on_eof, for_a_person);
            telemetry.flush();
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("askgate: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn token(config: &Config, action: TokenAction, url: Option<String>) -> ExitCode {
    use askgate::client::{self, tokens};
    if let TokenAction::Agent = action {
        let secret = askgate::http::token::agent_secret(Env::process().get("ASKGATE_AGENT_TOKEN"), &config.database);
        return finish("token agent", secret.map(|(secret, _)| println!("{secret}")).map_err(|e| e.to_string()));
    }
    let done = client::with_operator(config, url).and_then(|api| {
        client::block_on(async move {
            match action {
                TokenAction::Add { name, agent: true, .. } => tokens::add_agent(&api, &name).await,
                TokenAction::Add { name, may, agent: false } => match askgate::store::Powers::parse(&may) {
                    Ok(may) => tokens::add(&api, &name, may).await,
                    Err(e) => Err(format!("--may: {e}")),
                },
                TokenAction::List => tokens::list(&api).await,
                TokenAction::Agent => unreachable!("answered above without the API"),
                TokenAction::Revoke { name } => tokens::revoke(&api, &name).await,
            }
        })
    });
    finish("token", done.map(|report| println!("{report}")))
}

fn tui(config: &Config, url: Option<String>) -> ExitCode {
    use askgate::client;
    finish("tui", client::with_own_token(config, url).and_then(|api| client::block_on(client::tui::run(api))))
}

/// Exits 0, or 1 saying what went wrong as `askgate <command>: …`.
fn finish(command: &str, done: Result<(), String>) -> ExitCode {
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("askgate {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(config: Config, exit_on_eof: bool, for_a_person: bool) -> anyhow::Result<()> {
    if let Some(limit) = askgate::http::server::raise_open_files_limit() {
        tracing::debug!(limit, "open files");
    }
    ignore_terminal_stops();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let result = runtime.block_on(async {
        let io = ConsoleIo { input: console_input(), output: Box::new(tokio::io::stdout()) };
        // Suggest a function that exists: `demo` when there is one.
        let hint = match config.functions.iter().find(|f| f.name == "demo").or(config.functions.first()) {
            Some(f) => format!("type /run {} (or /help)", f.name),
            None => "type /help".to_owned(),
        };
        // Listened for from here on: a signal that comes while nothing awaits it is kept, not lost.
        let mut signals = Signals::new()?;
        let gateway = Gateway::builder(config).console(io).start().await.context("starting askgate")?;
        if for_a_person {
            tracing::info!("askgate is ready; {hint}");
        } else {
            tracing::info!("askgate is ready");
        }
        let mut console_open = true;
        loop {
            tokio::select! {
                () = signals.next() => break,
                () = gateway.console_ended(), if console_open => {
                    if exit_on_eof {
                        tracing::info!("console input ended; stopping (--exit-on-eof)");
                        break;
                    }
                    let how = if for_a_person { " (Ctrl-C stops it)" } else { "" };
                    tracing::info!("console input ended; askgate keeps running{how}");
                    console_open = false;
                }
            }
        }
        tracing::info!("stopping: finishing in-flight work (a second Ctrl-C or SIGTERM stops at once)");
        tokio::select! {
            () = gateway.shutdown() => {}
            () = signals.next() => {
                eprintln!("askgate: stopped at once by a second signal; runs in flight resume at the next start");
                std::process::exit(EXIT_INTERRUPTED);
            }
        }
        tracing::info!("stopped");
        Ok(())
    });
    // A read of stdin may still be parked in a blocking thread; it holds nothing.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

/// Ignores SIGTTIN and SIGTTOU: a background job that reads its terminal (or writes to one set
/// to `tostop`) is stopped by them, the whole gateway with it. Ignored, the read fails with EIO,
/// which the console takes as "not in the foreground" (and the write goes through).
#[allow(unsafe_code)]
fn ignore_terminal_stops() {
    for signal in [libc::SIGTTIN, libc::SIGTTOU] {
        // SAFETY: `SIG_IGN` installs no handler, so no code of ours runs in a signal context;
        // it is set before the runtime starts any thread. Programs askgate starts inherit it,
        // which only spares them the same stop.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// `askgate hook <agent>`: the hook's JSON from stdin to the agent's hook route, and its answer
/// to stdout. An error says whether the call must be blocked for it: a Codex `PreToolUse`, which
/// Codex would otherwise run without asking anyone.
fn hook(config: &Config, agent: HookAgent, url: Option<String>) -> Result<(), (anyhow::Error, bool)> {
    use std::io::{Read, Write};

    let mut body = Vec::new();
    let read = std::io::stdin().take(64 * 1024 * 1024).read_to_end(&mut body).context("reading stdin");
    let blocks = matches!(agent, HookAgent::Codex) && askgate::agent::codex::fails_closed(&body);
    let forwarded = read.and_then(|_| {
        let address = askgate::client::address(config, url);
        let token = askgate::http::token::client_token(Env::process().get("ASKGATE_AGENT_TOKEN"), &config.database)
            .map_err(anyhow::Error::msg)?;
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
        let answer = runtime.block_on(askgate::agent::hook::forward::forward(&address, agent.route(), &token, body))?;
        let mut stdout = std::io::stdout();
        stdout.write_all(answer.as_bytes()).and_then(|()| stdout.flush()).context("writing stdout")
    });
    forwarded.map_err(|e| (e, blocks))
}

/// askgate's `/mcp` for `--url`, which takes askgate's address (`http://127.0.0.1:8080`) or the
/// full `/mcp` URL.
fn mcp_url(url: String) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", &url));
    if scheme.is_empty() || rest.trim_end_matches('/').contains('/') {
        return url;
    }
    format!("{}/mcp", url.trim_end_matches('/'))
}

/// `askgate mcp`: stdin/stdout bridged to `/mcp` of the askgate that `config` describes.
fn mcp(config: &Config, url: Option<String>, channel: bool) -> anyhow::Result<()> {
    let url = mcp_url(url.unwrap_or_else(|| format!("{}/mcp", askgate::client::address(config, None))));
    let token = askgate::http::token::client_token(Env::process().get("ASKGATE_AGENT_TOKEN"), &config.database)
        .map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    // With --channel, the bridge is also Claude Code's channel, relaying its permission prompts.
    let relay = channel.then(|| askgate::agent::claude_code::channel::Relay::new(&url, &token));
    let channel = relay.as_ref().map(|r| r as &dyn askgate::mcp::bridge::Channel);
    let result = runtime.block_on(askgate::mcp::bridge::run(&url, &token, channel));
    // stdin may still be read by a blocking thread.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(result?)
}

/// SIGTERM and SIGINT, listened for once for the whole run. Listeners made anew at each wait
/// would lose a signal that comes between two waits: tokio's handler, once installed, keeps
/// the default action from ending the process, and a signal with no listener is dropped.
struct Signals {
    term: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("listening for SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("listening for SIGINT")?,
        })
    }

    /// The next SIGTERM or SIGINT.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// `askgate migrate`: copies a SQLite database into an empty PostgreSQL one.
fn migrate(from: &str, to: &str) -> ExitCode {
    if askgate::store::is_memory_url(from) || askgate::store::is_memory_url(to) {
        eprintln!(
            "askgate migrate: `memory:` keeps nothing to copy from or into; give a SQLite database and a PostgreSQL URL"
        );
        return ExitCode::from(BAD_CONFIG);
    }
    if !askgate::store::is_postgres_url(to) {
        eprintln!("askgate migrate: --to must be a PostgreSQL URL (postgres://…), not `{to}`");
        return ExitCode::from(BAD_CONFIG);
    }
    if askgate::store::is_postgres_url(from) {
        eprintln!("askgate migrate: --from must be a SQLite database (sqlite://… or a path)");
        return ExitCode::from(BAD_CONFIG);
    }
    let copied = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|r| r.block_on(askgate::store::copy::sqlite_to_postgres(from, to)).map_err(|e| e.to_string()));
    match copied {
        Ok(tables) => {
            let counts: Vec<String> = tables.iter().map(|(table, n)| format!("{n} {table}")).collect();
            println!("copied {} into {}: {}", from, askgate::store::redact(to), counts.join(", "));
            println!("now set gateway.database = \"{}\" and start askgate", askgate::store::redact(to));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("askgate migrate: {e}");
            ExitCode::FAILURE
        }
    }
}
