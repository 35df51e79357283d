//! The README's quickstarts as a newcomer types them: askgate in the background of a terminal
//! keeps serving, and Quickstart 3 works pasted line by line.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::Command;

use crate::binary::{BIN, Served, write_config};
use crate::support::eventually;

/// Sends SIGKILL to a process when dropped (a test that failed leaves nothing running).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let kill =
            std::process::Command::new("kill").args(["-KILL", &self.0.to_string()]).stderr(Stdio::null()).status();
        drop(kill);
    }
}

/// The HTTP address in a start-up log, once it is there.
async fn address_in(log: &Path) -> String {
    eventually(|| async {
        let text = std::fs::read_to_string(log).ok()?;
        let line = text.lines().find(|l| l.contains("web page on http://"))?.to_owned();
        Some(line.split("web page on ").nth(1)?.trim().trim_end_matches('/').to_owned())
    })
    .await
}

/// A terminal whose foreground is a shell, and askgate started by it as a background job
/// (`askgate serve &`): a session of its own (`pty.fork`), and askgate in a process group that
/// is not the terminal's foreground group. `/help` waits typed on the terminal. Exits with
/// askgate's exit code.
const BACKGROUND_JOB: &str = r#"
import os, pty, sys
binary, config, log = sys.argv[1:4]
pid, terminal = pty.fork()
if pid == 0:
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)
        err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.execv(binary, [binary, "serve", "--config", config])
    try:
        os.setpgid(job, job)
    except PermissionError:
        pass  # the job set its own group and started askgate first (EACCES after its exec)
    with open(log + ".tmp", "w") as f:
        f.write(str(job))
    os.rename(log + ".tmp", log + ".pid")
    _, status = os.waitpid(job, 0)
    os._exit(os.waitstatus_to_exitcode(status))
os.write(terminal, b"/help\n")
while True:
    try:
        if not os.read(terminal, 4096):
            break
    except OSError:
        break
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

#[tokio::test]
async fn a_background_job_of_a_terminal_keeps_serving_saying_once_the_console_is_off() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let log = dir.path().join("askgate.log");
    let mut terminal = Command::new("python3")
        .args(["-c", BACKGROUND_JOB, BIN])
        .arg(&config)
        .arg(&log)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid_file = dir.path().join("askgate.log.pid");
    let pid: u32 = eventually(|| async { std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok() }).await;
    let _guard = KillOnDrop(pid);
    // Stopped by SIGTTIN, askgate would never answer.
    let base = address_in(&log).await;
    let live = eventually(|| async { reqwest::get(format!("{base}/livez")).await.ok() }).await;
    assert!(live.status().is_success());
    let said = eventually(|| async {
        let text = std::fs::read_to_string(&log).ok()?;
        text.contains("console off: askgate is not in the terminal's foreground (a background job)").then_some(text)
    })
    .await;
    assert!(said.contains("questions are on the page and the API"), "{said}");
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(20), terminal.wait()).await.expect("askgate stops").unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    assert_eq!(log.matches("console off").count(), 1, "{log}");
    assert!(!log.contains("could not read input"), "{log}");
}

#[tokio::test]
async fn with_stdin_on_dev_null_askgate_serves_without_the_console() {
    let dir = TempDir::new().unwrap();
    let mut command = Command::new(BIN);
    command.args(["serve", "--exit-on-eof", "--config"]).arg(write_config(dir.path(), ""));
    let served = Served::spawn_with_stdin(command, &[], Stdio::null());
    served.log_line("console off: stdin is /dev/null").await;
    let (base, _) = served.api(dir.path()).await;
    assert!(reqwest::get(format!("{base}/livez")).await.unwrap().status().is_success());
    // Nothing to read is not an end of input: `--exit-on-eof` does not stop it.
    assert!(!served.log().contains("console input ended"), "{}", served.log());
    assert_eq!(served.terminate().await.code(), Some(0));
}

/// The lines of the README's Quickstart 3 (its first `sh` block).
fn quickstart_3() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme.split("## Quickstart 3").nth(1).expect("README has a Quickstart 3");
    let block = section.split("```sh\n").nth(1).expect("Quickstart 3 has a sh block");
    block.split("```").next().unwrap().to_owned()
}

#[tokio::test]
async fn quickstart_3_works_pasted_line_by_line() {
    let lines = quickstart_3();
    assert!(!lines.contains("cat askgate-agent.token"), "{lines}");
    let dir = TempDir::new().unwrap();
    // The bundled configuration, as the newcomer has it; the database beside it.
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("channels.toml"), dir.path().join("channels.toml"))
        .unwrap();
    // `cargo run … -- <args>` runs the binary under test with <args>; `claude` notes its
    // arguments. askgate's port: one that is free (the README's 8080 may not be).
    let stubs = dir.path().join("bin");
    std::fs::create_dir(&stubs).unwrap();
    let stub = |name: &str, script: &str| {
        let path = stubs.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    stub(
        "cargo",
        "while [ \"$1\" != -- ]; do shift; done; shift\n[ \"$1\" = serve ] && echo $$ > \"$ASKGATE_PID_FILE\"\nexec \"$ASKGATE_BIN\" \"$@\"\n",
    );
    stub("claude", "printf '%s\\n' \"$@\" > \"$CLAUDE_ARGS\"\n");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = lines.replace("8080", &port.to_string());
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    let (pid_file, claude_args) = (dir.path().join("askgate.pid"), dir.path().join("claude.args"));
    let shell = Command::new("bash")
        .args(["-e", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("ASKGATE_BIN", BIN)
        .env("ASKGATE_PID_FILE", &pid_file)
        .env("CLAUDE_ARGS", &claude_args)
        .env("ASKGATE_GATEWAY_HTTP", format!("127.0.0.1:{port}"))
        .env_remove("ASKGATE_AGENT_TOKEN")
        .env_remove("ASKGATE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let shell = tokio::time::timeout(Duration::from_secs(60), shell).await;
    let pid: Option<u32> = std::fs::read_to_string(&pid_file).ok().and_then(|p| p.trim().parse().ok());
    let _guard = pid.map(KillOnDrop);
    assert!(shell.expect("the lines finish").unwrap().success());
    let pid = pid.expect("askgate was started");
    let args = std::fs::read_to_string(&claude_args).unwrap();
    let kept = std::fs::read_to_string(dir.path().join("askgate-agent.token")).unwrap().trim().to_owned();
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        ["mcp", "add", "--transport", "http", "askgate", &url, "--header", &format!("Authorization: Bearer {kept}")]
    );
    // The token the line gave Claude Code is the one askgate serves /mcp with.
    let client = crate::mcp::http_client(&url, &kept).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "ask_user"), "{tools:?}");
    client.cancel().await.unwrap();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
}
