//! The real binary: the console demo over stdin/stdout, `check`, and signals.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::backend::Place;
use crate::support::eventually;

pub const BIN: &str = env!("CARGO_BIN_EXE_askgate");

pub fn write_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    write_config_on(dir, &dir.join("askgate.db").display().to_string(), extra)
}

/// A config in `dir` whose database is `database` (a file, or a PostgreSQL URL).
pub fn write_config_on(dir: &Path, database: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("channels.toml");
    let db = database;
    std::fs::write(
        &path,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n\n[[functions]]\nname = \"demo\"\nbuiltin = \"demo\"\n{extra}",
            db
        ),
    )
    .unwrap();
    path
}

/// A running `askgate serve` whose stdout and stderr lines are collected.
pub struct Served {
    pub child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<Vec<String>>>,
    /// The tasks reading stdout and stderr: each ends at its stream's end.
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Served {
    pub fn start(config: &Path) -> Self {
        Self::start_with_env(config, &[])
    }

    pub fn start_with_env(config: &Path, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BIN);
        command.args(["serve", "--config"]).arg(config);
        Self::spawn(command, env)
    }

    /// Runs `command` with its output collected, as askgate runs in a terminal.
    pub fn spawn(command: Command, env: &[(&str, &str)]) -> Self {
        Self::spawn_with_stdin(command, env, Stdio::piped())
    }

    /// Runs `command` with `stdin` and its output collected.
    pub fn spawn_with_stdin(mut command: Command, env: &[(&str, &str)], stdin: Stdio) -> Self {
        let mut child = command
            .env("RUST_LOG", std::env::var("ASKGATE_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .env_remove("TELEGRAM_BOT_TOKEN")
            .env_remove("DISCORD_BOT_TOKEN")
            .env_remove("SLACK_BOT_TOKEN")
            .env_remove("SLACK_APP_TOKEN")
            .envs(env.iter().copied())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), out.clone()),
            collect(child.stderr.take().unwrap(), err.clone()),
        ];
        Self { stdin: child.stdin.take(), child, out, err, readers }
    }

    /// The console's input, for a caller that types from elsewhere.
    pub fn take_input(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Ends the console's input, as the end of a pipe does.
    pub fn close_input(&mut self) {
        self.stdin = None;
    }

    pub async fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The short id of the card on stdout whose prompt contains `prompt` (the first, when
    /// several do: a newer one may not be printed yet).
    pub async fn card_id(&self, prompt: &str) -> String {
        self.nth_card_id(prompt, 1).await
    }

    /// As [`Self::nth_card_id`], waiting up to two minutes for the card: a real agent's CLI
    /// takes its time to start and to hear from its model, more so on a loaded machine.
    pub async fn agents_card_id(&self, prompt: &str, n: usize) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while self.cards(prompt) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no card {prompt:?} within two minutes:\n{}",
                self.stdout()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.nth_card_id(prompt, n).await
    }

    /// The short id of the `n`th card (from 1) on stdout whose prompt contains `prompt`.
    pub async fn nth_card_id(&self, prompt: &str, n: usize) -> String {
        eventually(|| async {
            let out = self.out.lock().unwrap();
            let at = out
                .iter()
                .enumerate()
                .filter(|(_, l)| ["❓", "❔", "🔐", "📝"].iter().any(|m| l.starts_with(m)) && l.contains(prompt))
                .nth(n - 1)?
                .0;
            let line = out[at..].iter().find(|l| l.trim_start().starts_with("id "))?;
            line.split_whitespace().nth(1).map(str::to_owned)
        })
        .await
    }

    /// How many cards on stdout so far have a prompt that contains `prompt`.
    pub fn cards(&self, prompt: &str) -> usize {
        let out = self.out.lock().unwrap();
        out.iter().filter(|l| ["❓", "❔", "🔐", "📝"].iter().any(|m| l.starts_with(m)) && l.contains(prompt)).count()
    }

    /// Waits for a stdout line containing `needle`.
    pub async fn stdout_line(&self, needle: &str) -> String {
        self.line(needle).await
    }

    /// Waits for a stdout line containing `needle`.
    async fn line(&self, needle: &str) -> String {
        eventually(|| async { self.out.lock().unwrap().iter().find(|l| l.contains(needle)).cloned() }).await
    }

    pub async fn log_line(&self, needle: &str) -> String {
        eventually(|| async { self.err.lock().unwrap().iter().find(|l| l.contains(needle)).cloned() }).await
    }

    pub fn stdout(&self) -> String {
        self.out.lock().unwrap().join("\n")
    }

    /// The log so far.
    pub fn stderr(&self) -> String {
        self.err.lock().unwrap().join("\n")
    }

    /// The HTTP API's base URL (from the start-up log) and the token kept in `dir`.
    pub async fn api(&self, dir: &Path) -> (String, String) {
        let line = self.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        let token = std::fs::read_to_string(dir.join("askgate.token")).unwrap().trim().to_owned();
        (base, token)
    }

    /// The HTTP API's base URL and the agents' default token kept in `dir`: what `/mcp` takes.
    pub async fn agent(&self, dir: &Path) -> (String, String) {
        let (base, _) = self.api(dir).await;
        let token = std::fs::read_to_string(dir.join("askgate-agent.token")).unwrap().trim().to_owned();
        (base, token)
    }

    /// Sends a signal to the process.
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap().success());
    }

    pub fn log(&self) -> String {
        self.err.lock().unwrap().join("\n")
    }

    pub async fn terminate(self) -> std::process::ExitStatus {
        self.terminate_logged().await.0
    }

    /// SIGTERM, then how the process exited and its whole log.
    pub async fn terminate_logged(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let status = match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!("no exit within 20 s of SIGTERM; its log:\n{}", self.log()),
        };
        // The last lines are read after the exit: the log is whole once both streams ended.
        for reader in std::mem::take(&mut self.readers) {
            let read = tokio::time::timeout(Duration::from_secs(20), reader).await;
            read.expect("stdout and stderr end within 20 s of the exit").unwrap();
        }
        let log = self.log();
        // Whatever a scenario left behind ends on the stop: none is waited out.
        assert!(!log.contains("tasks still running"), "the stop waited for tasks that should have ended:\n{log}");
        (status, log)
    }
}

/// Reads `stream` into `into` line by line, until it ends.
fn collect(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<String>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            into.lock().unwrap().push(line);
        }
    })
}

/// The short id from a card's `id 0b6f12ab · expires …` line.
fn short_id(line: &str) -> String {
    line.split_whitespace().nth(1).unwrap().to_owned()
}

/// The example program `name`, which `cargo test` builds with the tests.
pub fn example(name: &str) -> std::path::PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let path = deps.parent().unwrap().join("examples").join(name);
    assert!(path.exists(), "{} is missing: run `cargo test`, which builds the examples", path.display());
    path
}

#[tokio::test]
async fn the_embedding_example_runs_its_own_function_through_the_console() {
    let dir = TempDir::new().unwrap();
    let mut command = Command::new(example("embed"));
    command.arg(write_config(dir.path(), ""));
    let mut served = Served::spawn(command, &[]);
    served.log_line("ready: type /run release").await;
    served.type_line("/run release 1.4.2").await;
    served.line("Release 1.4.2 where?").await;
    let id = short_id(&served.line(" · expires in ").await);
    served.type_line(&format!("/answer {id} production")).await;
    served.line("release 1.4.2 to production").await;
    let approval = eventually(|| async {
        let out = served.out.lock().unwrap().clone();
        out.iter().filter(|l| l.contains(" · expires in ")).nth(1).map(|l| short_id(l))
    })
    .await;
    served.type_line(&format!("/approve {approval}")).await;
    served.line("Released 1.4.2 to production.").await;
    // The function's own error, raised with `?`, fails only its run, with its message.
    served.type_line("/run release soon").await;
    let failed = served.line("release failed").await;
    assert!(failed.contains("`soon` is not a version like 1.4.2"), "{failed}");
    // The built-ins from the file run beside it.
    served.type_line("/run demo").await;
    served.line("Which library for date formatting?").await;
    served.signal("INT");
    let status = tokio::time::timeout(Duration::from_secs(20), served.child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "{}", served.log());
}

#[tokio::test]
async fn the_console_demo_runs_end_to_end_until_sigterm() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    served.log_line("askgate is ready").await;
    served.type_line("/run demo").await;
    served.line("Which library for date formatting?").await;
    let id = short_id(&served.line(" · expires in ").await);
    let option = served.line("2. date-fns").await;
    assert!(option.ends_with(&format!("/answer {id} 2")), "{option}");
    served.type_line(&format!("/answer {id} 2")).await;
    served.line(&format!("[{id}] ✅ date-fns — console:local via console")).await;
    served.line("Archive all 87 emails?").await;
    served.type_line("yes").await;
    let reply = served.line("Using date-fns").await;
    assert_eq!(reply, "Using date-fns for dates; archived 87 emails.", "{}", served.stdout());
    let log = served.err.lock().unwrap().join("\n");
    assert!(!log.contains('\u{1b}'), "colour codes in a log that is not a terminal: {log}");
    let status = served.terminate().await;
    assert_eq!(status.code(), Some(0));
}

/// `gateway.database = "memory:"`: askgate runs on the memory store, writes no file, and says
/// at start that nothing survives a restart; `check` says so too; `migrate` refuses it in one
/// line.
/// The names of the files in `dir`.
fn files(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect()
}

#[tokio::test]
async fn an_askgate_on_memory_keeps_no_file() {
    let dir = TempDir::new().unwrap();
    let config = write_config_on(dir.path(), "memory:", "");
    let mut served = Served::start(&config);
    served.log_line("nothing survives a restart").await;
    served.log_line("askgate is ready").await;
    served.type_line("/run demo").await;
    let id = short_id(&served.line(" · expires in ").await);
    served.type_line(&format!("/answer {id} 2")).await;
    served.line(&format!("[{id}] ✅ date-fns")).await;
    assert_eq!(served.terminate().await.code(), Some(0));
    assert_eq!(files(dir.path()), ["channels.toml"], "no database file and no token file");
}

#[tokio::test]
async fn check_says_a_memory_store_keeps_nothing() {
    let dir = TempDir::new().unwrap();
    let config = write_config_on(dir.path(), "memory:", "");
    let check = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(report.contains("database: in memory (nothing survives a restart)"), "{report}");
}

#[tokio::test]
async fn migrate_refuses_a_memory_store_either_way() {
    let dir = TempDir::new().unwrap();
    write_config_on(dir.path(), "memory:", "");
    for (from, to) in [("memory:", "postgres://askgate@127.0.0.1:5432/askgate"), ("askgate.db", "memory:")] {
        let out = Command::new(BIN)
            .current_dir(dir.path())
            .args(["migrate", "--from", from, "--to", to])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.lines().count() == 1 && err.contains("`memory:` keeps nothing"), "{err}");
    }
    assert_eq!(files(dir.path()), ["channels.toml"], "a refused migrate created nothing");
}

#[tokio::test]
async fn end_of_input_stops_the_console_not_the_server() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let mut served = Served::start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run demo").await;
    let id = short_id(&served.line(" · expires in ").await);
    served.stdin.take();
    served.log_line("console input ended").await;
    assert!(served.child.try_wait().unwrap().is_none(), "the server stopped with its console");
    assert_eq!(served.terminate().await.code(), Some(0));

    finish_the_demo_in_a_new_askgate(&config, &id, "luxon", "no", "left the 87 emails where they are").await;
}

async fn a_killed_askgate_loses_no_question(place: Place) {
    let dir = TempDir::new().unwrap();
    let config = write_config_on(dir.path(), &place.database_url(), "");
    let mut served = Served::start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run demo").await;
    let id = short_id(&served.line(" · expires in ").await);
    // No shutdown at all: the question was committed before its card was printed.
    served.child.kill().await.unwrap();

    finish_the_demo_in_a_new_askgate(&config, &id, "dayjs", "yes", "archived 87 emails").await;
}

/// Starts askgate on `config` and finishes the demo whose first question is `id`: picks
/// `library`, answers the archive question, and sees the reply; SIGTERM then exits 0.
async fn finish_the_demo_in_a_new_askgate(config: &Path, id: &str, library: &str, archive: &str, done: &str) {
    let mut served = Served::start(config);
    served.log_line("askgate is ready").await;
    // The console shows what still waits, as /pending would.
    served.line("1 question still waits for your answer:").await;
    served.line(&format!("id {id} · expires in")).await;
    served.type_line(&format!("/answer {id} {library}")).await;
    served.line("Archive all 87 emails?").await;
    served.type_line(archive).await;
    served.line(&format!("Using {library} for dates; {done}.")).await;
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn a_second_askgate_on_the_same_database_is_refused_naming_the_first() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let first = Served::start(&config);
    first.log_line("askgate is ready").await;
    // Killed if the test fails while it is still running (when the lock did not stop it).
    let second =
        Command::new(BIN).args(["serve", "--config"]).arg(&config).stdin(Stdio::null()).kill_on_drop(true).output();
    let second = tokio::time::timeout(Duration::from_secs(20), second).await.expect("the second one exits").unwrap();
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    let pid = first.child.id().unwrap();
    assert!(err.contains(&format!("another askgate (pid {pid}) is using the database")), "{err}");
    let check = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(report.contains(&format!("(in use by askgate, pid {pid})")), "{report}");
    assert_eq!(first.terminate().await.code(), Some(0));
    let check = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(report.contains("askgate.db (not in use)"), "{report}");
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn check_exits_2_naming_the_bad_key() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[channels.telegram]\ntoken_env = \"TG\"\nanswerers = \"everyone\"\n");
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("channels.telegram.answerers"), "{err}");

    std::fs::write(&config, "[gateway]\nport = 8080\n").unwrap();
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `port`"));

    let out =
        Command::new(BIN).args(["check", "--config"]).arg(dir.path().join("missing.toml")).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A build without a platform (here the default build, without Discord) refuses its section
/// in `check` and in `serve`, naming the feature and the command that builds it in.
#[cfg(not(feature = "discord"))]
#[tokio::test]
async fn a_section_of_a_platform_left_out_of_the_build_is_refused_naming_its_feature() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[channels.discord]\ntoken_env = \"DC\"\n");
    for command in ["check", "serve"] {
        let mut run = Command::new(BIN);
        run.args([command, "--config"]).arg(&config).stdin(Stdio::null()).kill_on_drop(true);
        // A serve that started would not exit: the deadline ends the test instead of hanging it.
        let out = tokio::time::timeout(Duration::from_secs(120), run.output()).await;
        let out = out.unwrap_or_else(|_| panic!("{command} started with a section it cannot run")).unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        for says in [
            "line 12",
            "built without the `discord` platform",
            "`cargo build --release --features discord`",
            "`--features full`",
        ] {
            assert!(err.contains(says), "{command}: {err}");
        }
    }
    assert!(!dir.path().join("askgate.db").exists(), "a refused serve opened no database");
}

#[tokio::test]
async fn check_lists_channels_with_why_they_are_disabled() {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("channels.toml");
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&bundled)
        .env_remove("TELEGRAM_BOT_TOKEN")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("console: enabled"), "{text}");
    assert!(text.contains("telegram: disabled: TELEGRAM_BOT_TOKEN is unset"), "{text}");
    assert!(text.contains("demo (built-in demo)"), "{text}");
    // The platforms the build leaves out are named, with how to build them in.
    assert_eq!(
        text.contains("  not in this build: discord, slack, email (build with --features"),
        cfg!(not(any(feature = "discord", feature = "slack", feature = "email")))
    );
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn check_describes_each_channels_reminders_with_its_escalation() {
    let dir = TempDir::new().unwrap();
    let config = dir.path().join("channels.toml");
    std::fs::write(
        &config,
        "[gateway]\ndatabase = \"sqlite://a.db\"\nremind_before = \"5m\"\n[channels.console]\nenabled = true\n\
         [channels.telegram]\ntoken_env = \"NOPE\"\nescalate_after = \"10m\"\nescalate_to = \"console:local\"\n",
    )
    .unwrap();
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("remind_before = 5m (from "), "{text}");
    assert!(
        text.contains("telegram: unanswered after 10m escalates to console:local (anyone there may answer)"),
        "{text}"
    );
}

/// What `askgate check` says of Telegram open to anyone, Discord to nobody, a function with a
/// pre-approved action and one narrowed to a person (a warning is not an error).
#[cfg(all(feature = "telegram", feature = "discord"))]
async fn check_of_open_channels() -> String {
    let dir = TempDir::new().unwrap();
    let extra = "\n[channels.telegram]\ntoken_env = \"TG\"\nallowed_users = [\"*\"]\n\
                 \n[channels.discord]\ntoken_env = \"DC\"\n\
                 \n[[functions]]\nname = \"deploy\"\ncommand = [\"true\"]\npre_approved = [\"git push *\"]\n\
                 \n[[functions]]\nname = \"wipe\"\ncommand = [\"true\"]\nallowed_users = [\"telegram:42\"]\n";
    let out =
        Command::new(BIN).args(["check", "--config"]).arg(write_config(dir.path(), extra)).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "a warning is not an error");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(all(feature = "telegram", feature = "discord"))]
#[tokio::test]
async fn check_lists_who_may_run_what() {
    let text = check_of_open_channels().await;
    assert!(text.contains("who may start runs:"), "{text}");
    assert!(text.contains("  discord: nobody"), "{text}");
    assert!(text.contains("  telegram: anyone (\"*\")"), "{text}");
    assert!(text.contains("  function wipe: only telegram:42"), "{text}");
    assert!(text.contains("    approvals allowed without asking: git push *"), "{text}");
}

#[cfg(all(feature = "telegram", feature = "discord"))]
#[tokio::test]
async fn check_warns_of_a_channel_open_to_anyone_with_programs() {
    let text = check_of_open_channels().await;
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("channels.telegram.allowed_users") && warnings[0].contains("start deploy,"), "{text}");
    assert!(!warnings[0].contains("wipe"), "a function narrowed to people is not open: {text}");
}

#[tokio::test]
async fn the_example_programs_run_end_to_end_through_the_console() {
    let dir = TempDir::new().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let functions = format!(
        "\n[[functions]]\nname = \"deploy\"\ncommand = [\"python3\", \"examples/deploy.py\"]\ncwd = \"{0}\"\n\
         \n[[functions]]\nname = \"archive\"\ncommand = [\"python3\", \"examples/archive.py\"]\ncwd = \"{0}\"\n\
         \n[[functions]]\nname = \"restart\"\ncommand = [\"sh\", \"examples/confirm.sh\"]\ncwd = \"{0}\"\n",
        repo.display()
    );
    let mut served = Served::start(&write_config(dir.path(), &functions));
    served.log_line("askgate is ready").await;

    served.type_line("/run deploy v9").await;
    served.line("Deploy where?").await;
    served.type_line("production").await;
    served.line("Deploy v9 to production now?").await;
    served.type_line("yes").await;
    served.line("Deploying v9 to production...").await;
    served.line("Deployed v9 to production.").await;
    // A decline is an answer: the run says so, it does not fail.
    served.type_line("/run deploy v10").await;
    let id = served.nth_card_id("Deploy where?", 2).await;
    served.type_line(&format!("/decline {id} not on a Friday")).await;
    served.line("Not deployed v10: not on a Friday.").await;

    served.type_line("/run archive").await;
    let id = short_id(
        &eventually(|| async {
            let out = served.out.lock().unwrap().clone();
            let at = out.iter().position(|l| l.contains("Approve: archive 87 emails"))?;
            out[at..].iter().find(|l| l.contains(" · expires in ")).cloned()
        })
        .await,
    );
    served.type_line(&format!("/approve {id} always")).await;
    served.line("Archived 87 emails (and will from now on without asking).").await;
    served.type_line("/run archive").await;
    let again = eventually(|| async {
        Some(served.out.lock().unwrap().iter().filter(|l| l.starts_with("Archived 87 emails")).count())
            .filter(|&n| n == 2)
    })
    .await;
    assert_eq!(again, 2, "the standing grant let the second archive through");

    served.type_line("/run restart").await;
    served.line("Restart the web server?").await;
    served.type_line("yes").await;
    served.line("Restarted the web server.").await;
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn the_binary_serves_telegram_when_its_token_is_set() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = crate::fake_telegram::FakeTelegram::start().await;
    let telegram = format!(
        "\n[channels.telegram]\ntoken_env = \"ASKGATE_TEST_TG_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"42\"]\n"
    );
    let config = write_config(dir.path(), &telegram);
    let served = Served::start_with_env(&config, &[("ASKGATE_TEST_TG_TOKEN", "123:fake")]);
    served.log_line("telegram connected").await;
    fake.text(42, 42, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert!(card["reply_markup"]["inline_keyboard"].is_array());
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn the_binary_serves_discord_when_its_token_is_set() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = crate::fake_discord::FakeDiscord::start().await;
    let discord = format!(
        "\n[channels.discord]\ntoken_env = \"ASKGATE_TEST_DC_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"100\"]\n"
    );
    let config = write_config(dir.path(), &discord);
    let served = Served::start_with_env(&config, &[("ASKGATE_TEST_DC_TOKEN", "fake-token")]);
    served.log_line("discord connected").await;
    fake.connected().await;
    fake.message(100, 555, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert!(!card["components"].as_array().unwrap().is_empty());
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn piped_input_answers_the_questions_it_follows() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    // Everything at once, before askgate has asked anything: each line waits for the turn
    // the line before it started.
    served.type_line("/run demo\n2\nyes").await;
    served.line("Using date-fns for dates; archived 87 emails.").await;
    assert!(!served.stdout().contains("Nothing is waiting"), "{}", served.stdout());
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn version_names_the_commit_it_was_built_from() {
    let out = Command::new(BIN).arg("--version").output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.starts_with(&format!("askgate {} (commit ", env!("CARGO_PKG_VERSION"))), "{text}");
    assert!(!text.contains("(commit )"), "{text}");
}

#[tokio::test]
async fn the_ready_line_suggests_a_function_that_exists() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("channels.toml");
    let db = dir.path().join("askgate.db");
    std::fs::write(
        &path,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[[functions]]\nname = \"hello\"\nbuiltin = \"demo\"\n",
            db.display()
        ),
    )
    .unwrap();
    let served = Served::start(&path);
    served.log_line("askgate is ready; type /run hello (or /help)").await;
    served.terminate().await;
}

#[tokio::test]
async fn piped_input_with_exit_on_eof_runs_the_demo_then_exits() {
    let dir = TempDir::new().unwrap();
    let mut command = Command::new(BIN);
    command.args(["serve", "--exit-on-eof", "--config"]).arg(write_config(dir.path(), ""));
    let mut served = Served::spawn(command, &[]);
    for line in ["/run demo", "2", "yes"] {
        served.type_line(line).await;
    }
    served.close_input();
    let status = tokio::time::timeout(Duration::from_secs(20), served.child.wait()).await.expect("it exits").unwrap();
    assert!(status.success(), "{status:?}");
    served.line("Using date-fns for dates; archived 87 emails.").await;
    assert!(served.log().contains("console input ended; stopping (--exit-on-eof)"), "{}", served.log());
}

#[tokio::test]
async fn the_config_file_can_be_named_by_the_environment() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    // ASKGATE_CONFIG names the file when --config does not.
    let out = std::process::Command::new(BIN).arg("check").env("ASKGATE_CONFIG", &config).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("{}: ok", config.display())));
}

#[tokio::test]
async fn logs_can_be_json_lines() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let mut command = Command::new(BIN);
    command.args(["serve", "--log-format", "json", "--config"]).arg(&config);
    let mut served = Served::spawn(command, &[]);
    let ready = served.log_line("askgate is ready").await;
    // A service's log (JSON, no terminal) holds no hints for a person at the console.
    assert!(!ready.contains("type /run"), "{ready}");
    served.type_line("/run demo").await;
    served.line("Which library for date formatting?").await;
    // One line per question asked, with its ids as fields; one per request, with its route.
    let asked = served.log_line("question asked").await;
    let line = served.log_line("web page on http://").await;
    let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
    let base = entry["message"].as_str().unwrap().split("web page on ").nth(1).unwrap().trim().to_owned();
    // The first scrape is counted once it is answered: the second one sees it.
    reqwest::get(format!("{base}metrics")).await.unwrap();
    let metrics = reqwest::get(format!("{base}metrics")).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("askgate_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("askgate_http_request_duration_seconds_count{method=\"GET\",route=\"/metrics\"} 1"),
        "{metrics}"
    );
    let request = served.log_line("GET /metrics 200").await;
    let log = served.log();
    for line in log.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        // The message at the top level, as log shippers expect.
        assert!(entry["message"].is_string() && entry.get("fields").is_none(), "{line}");
    }
    let asked: serde_json::Value = serde_json::from_str(&asked).unwrap();
    assert_eq!(asked["kind"], "question");
    assert_eq!(asked["conversation"], "console:local");
    assert_eq!(asked["question"].as_str().unwrap().len(), 36, "{asked}");
    assert_eq!(asked["run"].as_str().unwrap().len(), 36, "{asked}");
    let request: serde_json::Value = serde_json::from_str(&request).unwrap();
    assert_eq!((request["target"].as_str(), request["route"].as_str()), (Some("askgate::access"), Some("/metrics")));
    assert_eq!((request["method"].as_str(), request["status"].as_u64()), (Some("GET"), Some(200)));
    assert!(request["ms"].as_f64().is_some(), "{request}");
    // And one line when it is answered.
    served.type_line("2").await;
    let answered: serde_json::Value = serde_json::from_str(&served.log_line("question answered").await).unwrap();
    assert_eq!((answered["status"].as_str(), answered["via"].as_str()), (Some("answered"), Some("console")));
    assert_eq!(answered["question"], asked["question"]);
    served.terminate().await;
}

#[tokio::test]
async fn gateway_keys_can_come_from_the_environment() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let http = format!("127.0.0.1:{port}");
    let env = [("ASKGATE_GATEWAY_HTTP", http.as_str()), ("ASKGATE_GATEWAY_DEFAULT_TIMEOUT", "5m")];
    let out = std::process::Command::new(BIN).arg("check").arg("--config").arg(&config).envs(env).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in [
        format!("  http = {http} (from ASKGATE_GATEWAY_HTTP)"),
        "  default_timeout = 5m (from ASKGATE_GATEWAY_DEFAULT_TIMEOUT)".to_owned(),
        format!("  database = {} (from {})", dir.path().join("askgate.db").display(), config.display()),
        "  retention = 30d (default)".to_owned(),
    ] {
        assert!(report.lines().any(|l| l == line), "{line:?} in\n{report}");
    }

    // serve listens where the environment says, not where the file does.
    let mut command = Command::new(BIN);
    command.args(["serve", "--config"]).arg(&config);
    let served = Served::spawn(command, &env);
    served.log_line(&format!("web page on http://{http}/")).await;
    let live = reqwest::get(format!("http://{http}/livez")).await.unwrap();
    assert_eq!(live.status(), reqwest::StatusCode::OK);
    served.terminate().await;

    // A bad value is refused, naming the key and the variable it came from.
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg("--config")
        .arg(&config)
        .env("ASKGATE_GATEWAY_MAX_CONNECTIONS", "lots")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("`gateway.max_connections`") && said.contains("ASKGATE_GATEWAY_MAX_CONNECTIONS"), "{said}");

    // A misspelt variable is refused too, as an unknown key in the file is.
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&config)
        .env("ASKGATE_GATEWAY_HTTPP", "0.0.0.0:8080")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("`ASKGATE_GATEWAY_HTTPP` is not a [gateway] key's variable"), "{said}");
}

crate::backend::on_both_backends!(a_killed_askgate_loses_no_question);

#[tokio::test]
async fn check_into_a_closed_pipe_exits_quietly() {
    // `askgate check | head -1`: the reader is gone before askgate writes.
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let mut child = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[tokio::test]
async fn check_fails_naming_each_function_whose_program_is_missing() {
    let dir = TempDir::new().unwrap();
    let extra = "\n[[functions]]\nname = \"deploy\"\ncommand = [\"./nothere.sh\"]\n\
                 \n[[functions]]\nname = \"ship\"\ncommand = [\"no-such-program-anywhere\"]\n\
                 \n[[functions]]\nname = \"fine\"\ncommand = [\"sh\", \"-c\", \"true\"]\n";
    let out =
        Command::new(BIN).args(["check", "--config"]).arg(write_config(dir.path(), extra)).output().await.unwrap();
    // A function that cannot run is a problem a deployment script must see: exit code 1 (a
    // configuration askgate refuses is 2).
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let problems: Vec<&str> = text.lines().filter(|l| l.starts_with("problem: function")).collect();
    assert_eq!(problems.len(), 2, "{text}");
    assert!(problems[0].starts_with("problem: function `deploy`: program `./nothere.sh` not found"), "{text}");
    assert!(
        problems[1].starts_with("problem: function `ship`: program `no-such-program-anywhere` not found"),
        "{text}"
    );
    assert!(text.ends_with("2 problem(s): askgate would start, but what is named above cannot run\n"), "{text}");
}

#[tokio::test]
async fn check_refuses_a_function_without_a_command_naming_it() {
    let dir = TempDir::new().unwrap();
    let bad = "\n[[functions]]\nname = \"deploy\"\ncommand = []\n";
    let out = Command::new(BIN).args(["check", "--config"]).arg(write_config(dir.path(), bad)).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`functions.deploy.command`: needs at least the program to run"), "{err}");
}

#[tokio::test]
async fn a_port_in_use_is_named_as_gateway_http() {
    let dir = TempDir::new().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = write_config(dir.path(), "");
    let text =
        std::fs::read_to_string(&config).unwrap().replace("127.0.0.1:0", &taken.local_addr().unwrap().to_string());
    std::fs::write(&config, text).unwrap();
    let out = Command::new(BIN).args(["serve", "--config"]).arg(&config).stdin(Stdio::null()).output();
    let out = tokio::time::timeout(Duration::from_secs(20), out).await.expect("it stops").unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(gateway.http; another program may be using the port)"), "{err}");
}

#[tokio::test]
async fn completions_cover_every_command() {
    for (shell, marker) in [("bash", "_askgate()"), ("zsh", "#compdef askgate"), ("fish", "complete -c askgate")] {
        let out = Command::new(BIN).args(["completions", shell]).output().await.unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["serve", "check", "migrate", "mcp", "completions"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
    }
    let out = Command::new(BIN).args(["completions", "tcsh"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"), "the error lists the shells");
}

#[tokio::test]
async fn a_grant_at_the_console_is_listed_until_revoked() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[[functions]]\nname = \"approve-demo\"\nbuiltin = \"approve-demo\"\n");
    let mut served = Served::start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/grants").await;
    served.line("No standing grants here").await;
    served.type_line("/run approve-demo").await;
    let id = served.card_id("rm -rf build/").await;
    served.type_line(&format!("/approve {id} always")).await;
    served.line("Allowed always").await;
    served.type_line("/grants").await;
    let listed = served.line("] \"rm -rf build/\" — set by console:local").await;
    let short = listed.trim_start_matches('[').split(']').next().unwrap().to_owned();
    served.type_line(&format!("/revoke {short}")).await;
    served.line(&format!("Revoked {short}: \"rm -rf build/\" will be asked again.")).await;
    assert_eq!(served.terminate().await.code(), Some(0));
}

/// `askgate serve 2>&1 | tee log`, then Ctrl-C: the terminal stops tee too, so askgate's log has
/// no reader while it stops. It still stops, though its stdin stays open and silent.
#[tokio::test]
async fn ctrl_c_stops_askgate_when_its_log_has_lost_its_reader() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let mut log = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = log.next_line().await.unwrap() {
        if line.contains("askgate is ready") {
            break;
        }
    }
    // The reader goes, then the signal comes: the next log line meets a closed pipe.
    drop(log);
    drop(child.stdout.take());
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.expect("askgate stops").unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}
