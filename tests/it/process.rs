//! Process functions with real child processes (python3 and sh).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use askgate::clock::Clock;
use askgate::engine::{Entry, Functions};
use askgate::engine::{RunRequest, Settings};
use askgate::function::process::{MAX_LINE, Process, ProcessConfig};
use askgate::question::{Mode, Outcome, Status, UserRef};
use askgate::run::RunStatus;
use tempfile::TempDir;

use crate::support::*;

/// A script that asks three questions through the Python helper and logs each start and exit.
const THREE_ASKS: &str = r#"
import atexit, os, sys
log = open(os.environ["STEP_LOG"], "a")
log.write(f"start {os.getpid()}\n"); log.flush()
atexit.register(lambda: (log.write("exit\n"), log.flush()))
import askgate
def main(input, run):
    a = askgate.ask("First?", options=["a", "b"])
    b = askgate.ask("Second?")
    c = askgate.confirm("Third?")
    return f"{a} {b} {c}"
askgate.run(main)
"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn config(dir: &Path, command: &[&str], hold: bool, timeout: Duration) -> ProcessConfig {
    let mut set_env = BTreeMap::new();
    set_env.insert("PYTHONPATH".to_owned(), repo().join("clients/python").display().to_string());
    set_env.insert("STEP_LOG".to_owned(), dir.join("steps.log").display().to_string());
    ProcessConfig {
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        cwd: dir.to_path_buf(),
        pass_env: vec!["PATH".to_owned()],
        set_env,
        timeout,
        hold,
        show_stderr: false,
    }
}

/// Writes `script` to `name` in `dir` and registers it as function `name`.
fn add(
    functions: &mut Functions,
    dir: &Path,
    name: &str,
    interpreter: &str,
    script: &str,
    hold: bool,
    timeout: Duration,
) {
    let file = dir.join(name);
    std::fs::write(&file, script).unwrap();
    let config = config(dir, &[interpreter, file.to_str().unwrap()], hold, timeout);
    let mode = if hold { Mode::Blocking } else { Mode::FollowUp };
    functions.insert_entry(name, Entry { mode, ..Entry::new(Arc::new(Process::new(name, config)), "") });
}

fn log(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("steps.log")).unwrap_or_default().lines().map(str::to_owned).collect()
}

async fn harness(functions: Functions, dir: &Arc<TempDir>) -> Harness {
    Harness::open(functions, Settings::default(), dir.clone(), Clock::manual(T0)).await
}

async fn start(h: &Harness, name: &str) -> askgate::question::RunId {
    let mode = h.engine.functions().get(name).unwrap().mode;
    h.engine.runner().start_run(RunRequest::new(name, Some(room()), alice()), mode).await.unwrap()
}

#[tokio::test]
async fn a_follow_up_run_reruns_the_program_per_answer_with_none_left_waiting() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    add(&mut f, dir.path(), "three", "python3", THREE_ASKS, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "three").await;
    for (n, answer) in [(1, "2"), (2, "some text"), (3, "yes")] {
        let card = h.card(n).await;
        assert_eq!(card.step, n as u32 - 1);
        // While the question waits, no program is running: every start has its exit.
        let entries = eventually(|| async {
            let entries = log(dir.path());
            let starts = entries.iter().filter(|l| l.starts_with("start")).count();
            let exits = entries.iter().filter(|l| *l == "exit").count();
            (starts == n && exits == n).then_some(entries)
        })
        .await;
        assert_eq!(entries.len(), 2 * n);
        h.say(ALICE, answer).await;
    }
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Finished, "{:?}", done.result);
    assert_eq!(done.result.as_deref(), Some("b some text True"));
    let starts = log(dir.path()).iter().filter(|l| l.starts_with("start")).count();
    assert_eq!(starts, 4, "one invocation to ask each question, one to finish");
    assert_eq!(h.recorder.cards().len(), 3, "replayed asks were rendered again");
}

#[tokio::test]
async fn a_hold_program_gets_its_answers_on_stdin_in_one_process() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    add(&mut f, dir.path(), "three", "python3", THREE_ASKS, true, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "three").await;
    for (n, answer) in [(1, "a"), (2, "free"), (3, "no")] {
        let card = h.card(n).await;
        assert_eq!(card.mode, Mode::Blocking);
        h.say(ALICE, answer).await;
    }
    let done = h.finished(run).await;
    assert_eq!(done.result.as_deref(), Some("a free False"));
    let entries = log(dir.path());
    assert_eq!(entries.iter().filter(|l| l.starts_with("start")).count(), 1, "{entries:?}");
}

#[tokio::test]
async fn a_pending_program_run_finishes_after_a_restart() {
    let dir = Arc::new(TempDir::new().unwrap());
    let functions = || {
        let mut f = Functions::new();
        add(&mut f, dir.path(), "three", "python3", THREE_ASKS, false, Duration::from_secs(30));
        f
    };
    let h = harness(functions(), &dir).await;
    let run = start(&h, "three").await;
    h.card(1).await;
    h.say(ALICE, "a").await;
    h.card(2).await;
    let h = h.restart(functions(), Settings::default(), Clock::manual(T0)).await;
    h.say(ALICE, "after restart").await;
    h.card(1).await;
    h.say(ALICE, "yes").await;
    assert_eq!(h.finished(run).await.result.as_deref(), Some("a after restart True"));
}

#[tokio::test]
async fn the_python_helpers_come_back_from_a_decline_as_the_seed_says() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = r#"
import askgate
def main(input, run):
    name = askgate.ask_user("Your name?")
    try:
        sure = askgate.confirm("Sure?")
    except askgate.Declined as declined:
        sure = f"declined: {declined.feedback}"
    return f"{name!r} {sure} {askgate.Timeout is askgate.Expired} {askgate.can_ask()}"
askgate.run(main)
"#;
    add(&mut f, dir.path(), "seed", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "seed").await;
    let card = h.card(1).await;
    h.say(ALICE, &format!("/decline {}", card.id.short())).await;
    let card = h.card(2).await;
    h.say(ALICE, &format!("/decline {} not today", card.id.short())).await;
    let done = h.finished(run).await;
    assert_eq!(done.result.as_deref(), Some("None declined: not today True True"), "{done:?}");
}

#[tokio::test]
async fn outside_a_run_the_python_helper_says_at_once_it_cannot_ask() {
    let code = "import askgate\nprint(askgate.can_ask(), flush=True)\n\
                try:\n    askgate.ask('x')\nexcept askgate.NotInRun as e:\n    print('askgate.Client' in str(e))";
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", code])
        .env("PYTHONPATH", repo().join("clients/python"))
        .env_remove("ASKGATE_PROTOCOL")
        // stdin stays open and silent: a read of it would hang.
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await.expect("it never hangs");
    assert_eq!(String::from_utf8_lossy(&out.unwrap().stdout), "False\nTrue\n");
}

#[tokio::test]
async fn a_programs_own_error_message_is_shown_to_the_person_without_its_stderr() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "read s; echo 'secret path /srv/keys' >&2; \
                  printf '%s\\n' '{\"type\":\"error\",\"message\":\"the disk is full,\\ntry later\\u0007\"}'";
    add(&mut f, dir.path(), "err", "sh", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "err").await;
    assert_eq!(h.finished(run).await.status, RunStatus::Failed);
    let told = eventually(|| async { h.recorder.texts().into_iter().find(|t| t.starts_with("⚠️ err failed")) }).await;
    assert_eq!(told, "⚠️ err failed: the disk is full, try later", "its own words, one line, no control characters");
    assert!(h.recorder.texts().iter().all(|t| !t.contains("/srv/keys")), "stderr reached the conversation");
}

#[tokio::test]
async fn each_kind_of_misbehaviour_fails_only_its_own_run_with_a_specific_message() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let quick = Duration::from_secs(30);
    add(&mut f, dir.path(), "good", "python3", THREE_ASKS, false, quick);
    let flood = "import sys\nsys.stdin.readline()\nfor i in range(5000): print('{\"type\":\"say\",\"text\":\"x\"}', flush=True)";
    let cases: [(&str, &str, &str, Duration, &str); 9] = [
        ("malformed", "sh", "read s; echo '{\"type\": ask'", quick, "malformed line from the program"),
        ("unknown", "sh", "read s; echo '{\"type\":\"dance\"}'", quick, "unknown message type `dance`"),
        (
            "crash",
            "sh",
            "read s; echo 'something broke' >&2; exit 3",
            quick,
            "the program exited with exit code 3 before sending done",
        ),
        ("silent", "sh", "read s; exit 0", quick, "exited without sending done"),
        ("slow", "sh", "read s; sleep 30", Duration::from_secs(1), "ran longer than its timeout of 1s"),
        ("huge", "python3", "import sys; sys.stdin.readline(); print('x' * 70000)", quick, "longer than 65536 bytes"),
        ("flood", "python3", flood, quick, "more than 200 lines per second"),
        ("binary", "sh", "read s; printf '\\377\\376\\n'", quick, "a line that is not UTF-8"),
        (
            "typo",
            "sh",
            "read s; echo '{\"type\":\"ask\",\"prompt\":\"x\",\"option\":[\"a\"]}'",
            quick,
            "unknown field `option`",
        ),
    ];
    assert_eq!(MAX_LINE, 65536);
    for (name, interpreter, script, timeout, _) in &cases {
        add(&mut f, dir.path(), name, interpreter, script, false, *timeout);
    }
    let h = harness(f, &dir).await;
    let good = start(&h, "good").await;
    let waiting = h.card(1).await;
    for (name, _, _, _, expected) in &cases {
        let run = start(&h, name).await;
        let done = h.finished(run).await;
        assert_eq!(done.status, RunStatus::Failed, "{name}");
        // The run's record (operator-only, through the API) says what went wrong ...
        let message = done.result.unwrap();
        assert!(message.contains(expected), "{name}: {message}");
        // ... and the conversation only that it failed and where to look.
        let told = eventually(|| async {
            h.recorder.texts().into_iter().find(|t| t.starts_with(&format!("⚠️ {name} failed")))
        })
        .await;
        let short = run.short();
        assert_eq!(
            told,
            format!("⚠️ {name} failed: the program failed (run {short}; details are in askgate's log)"),
            "{name}"
        );
    }
    assert!(
        h.recorder.texts().iter().all(|t| !t.contains("something broke")),
        "a program's stderr reached the conversation"
    );
    // The good run is untouched: still waiting, and it still finishes.
    assert_eq!(h.question(&waiting).await.status, Status::Pending);
    assert_eq!(h.engine.records().run(good).await.unwrap().unwrap().status, RunStatus::Waiting);
    h.say(ALICE, "a").await;
    h.card(2).await;
    h.say(ALICE, "b").await;
    h.card(3).await;
    h.say(ALICE, "no").await;
    assert_eq!(h.finished(good).await.result.as_deref(), Some("a b False"));
}

#[tokio::test]
async fn a_hold_program_killed_while_waiting_fails_its_run_cancelling_its_question() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    add(&mut f, dir.path(), "three", "python3", THREE_ASKS, true, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "three").await;
    let card = h.card(1).await;
    let pid = log(dir.path())[0].strip_prefix("start ").unwrap().to_owned();
    assert!(std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert!(done.result.unwrap().contains("exited while waiting for the answer"));
    let q = h.question(&card).await;
    assert_eq!(
        q.outcome,
        Some(Outcome::Cancelled { reason: "the program exited while waiting for the answer".into() })
    );
    let retracted = eventually(|| async { h.recorder.retracted().into_iter().find(|r| r.id == card.id) }).await;
    assert_eq!(retracted.status, Status::Cancelled);
}

#[tokio::test]
async fn a_program_that_asks_something_else_on_replay_fails_naming_the_step() {
    let dir = Arc::new(TempDir::new().unwrap());
    let script = r#"
import os, askgate
def main(input, run):
    n = len(open(os.environ["STEP_LOG"]).read()) if os.path.exists(os.environ["STEP_LOG"]) else 0
    open(os.environ["STEP_LOG"], "a").write("x")
    askgate.ask("Question asked %d times before?" % n)
    return "unreachable"
askgate.run(main)
"#;
    let mut f = Functions::new();
    add(&mut f, dir.path(), "drifting", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "drifting").await;
    h.card(1).await;
    h.say(ALICE, "anything").await;
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert!(done.result.unwrap().contains("replay mismatch at step 0"));
}

/// A log that tests can read: everything logged on this thread while the guard lives.
fn capture_log() -> (Arc<std::sync::Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    #[derive(Clone)]
    struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = Buffer(buffer.clone());
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    (buffer, tracing::subscriber::set_default(subscriber))
}

// One thread, so that the log captured on it sees the program's stderr task too.
#[tokio::test(flavor = "current_thread")]
async fn a_failing_programs_stderr_goes_to_the_log_not_the_conversation() {
    let (log, _guard) = capture_log();
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "read s; echo 'password=hunter2 at /srv/secret' >&2; exit 3";
    add(&mut f, dir.path(), "leaky", "sh", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;

    let run = start(&h, "leaky").await;
    h.finished(run).await;
    let told = eventually(|| async { h.recorder.texts().into_iter().find(|t| t.contains("leaky failed")) }).await;
    assert!(!told.contains("hunter2"), "stderr reached the conversation: {told}");
    let logged = eventually(|| async {
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        text.contains("password=hunter2").then_some(text)
    })
    .await;
    assert!(logged.contains("exit code 3"), "the log says what happened: {logged}");
}

#[tokio::test]
async fn show_stderr_shows_a_failing_programs_stderr_in_the_conversation() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "read s; echo 'password=hunter2 at /srv/secret' >&2; exit 3";
    add(&mut f, dir.path(), "leaky", "sh", script, false, Duration::from_secs(30));
    let leaky = dir.path().join("leaky");
    let mut verbose = config(dir.path(), &["sh", leaky.to_str().unwrap()], false, Duration::from_secs(30));
    verbose.show_stderr = true;
    let function = Arc::new(Process::new("verbose", verbose));
    f.insert_entry("verbose", Entry::new(function, ""));
    let h = harness(f, &dir).await;

    // `show_stderr = true` (for development) shows the details in the conversation.
    let run = start(&h, "verbose").await;
    h.finished(run).await;
    let told = eventually(|| async { h.recorder.texts().into_iter().find(|t| t.contains("verbose failed")) }).await;
    assert!(told.contains("password=hunter2") && told.contains("exit code 3"), "{told}");
}

#[tokio::test]
async fn a_program_that_forks_leaves_nothing_behind() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let pids = dir.path().join("pids");
    let done =
        format!("read s; sleep 120 & echo $! >> {0}; echo '{{\"type\":\"done\",\"reply\":\"ok\"}}'", pids.display());
    let slow = format!("read s; sleep 120 & echo $! >> {0}; sleep 120", pids.display());
    add(&mut f, dir.path(), "forks", "sh", &done, false, Duration::from_secs(30));
    add(&mut f, dir.path(), "hangs", "sh", &slow, false, Duration::from_secs(1));
    let h = harness(f, &dir).await;
    for name in ["forks", "hangs"] {
        let run = start(&h, name).await;
        h.finished(run).await;
    }
    let pids: Vec<String> = std::fs::read_to_string(&pids).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        eventually(|| async {
            let alive = std::process::Command::new("kill").args(["-0", &pid]).status().unwrap().success();
            (!alive).then_some(())
        })
        .await;
    }
}

/// Whether process `pid` still runs: it has an entry in `/proc` that is not a zombie (one that
/// ended and waits for whoever adopted it to reap it).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

#[tokio::test]
async fn a_setsid_child_does_not_outlive_its_run() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let pids = dir.path().join("pids");
    // `setsid` leaves the program's process group (and session): the group's kill misses it.
    let escape = format!("setsid sleep 300 & echo $! >> {0}; while [ ! -s {0} ]; do :; done", pids.display());
    let done = format!("read s; {escape}; echo '{{\"type\":\"done\",\"reply\":\"ok\"}}'");
    let hangs = format!("read s; {escape}; sleep 300");
    add(&mut f, dir.path(), "escapes", "sh", &done, false, Duration::from_secs(30));
    add(&mut f, dir.path(), "hangs", "sh", &hangs, false, Duration::from_secs(1));
    let h = harness(f, &dir).await;
    for (name, status) in [("escapes", RunStatus::Finished), ("hangs", RunStatus::Failed)] {
        std::fs::remove_file(&pids).ok();
        let run = start(&h, name).await;
        let pid = eventually(|| async {
            std::fs::read_to_string(&pids).ok().and_then(|p| p.lines().next().map(str::to_owned))
        })
        .await;
        assert_eq!(h.finished(run).await.status, status, "{name}");
        eventually(|| async { (!running(&pid)).then_some(()) }).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_program_flooding_stderr_is_logged_within_limits() {
    let (log, _guard) = capture_log();
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let flood = "import sys\nsys.stdin.readline()\nsys.stderr.write('y' * 20000 + '\\n')\n\
                 for i in range(100000): sys.stderr.write('x' * 50 + '\\n')\n\
                 sys.stderr.flush()\nprint('{\"type\":\"done\",\"reply\":\"ok\"}', flush=True)";
    add(&mut f, dir.path(), "flood", "python3", flood, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "flood").await;
    assert_eq!(h.finished(run).await.status, RunStatus::Finished, "a program's stderr never blocks it");
    let text = eventually(|| async {
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        text.contains("dropped").then_some(text)
    })
    .await;
    let logged = text.lines().filter(|l| l.contains("stderr: ")).count();
    assert!(logged < 5_000, "{logged} stderr lines were logged");
    assert!(text.contains("[11808 more bytes dropped]"), "a long line is cut at 8 KiB");
    assert!(
        text.contains("stderr lines (") && text.contains("bytes) over the limits"),
        "one line says what was dropped"
    );
}

#[tokio::test]
async fn the_python_helper_keeps_stray_prints_out_of_the_protocol() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "import askgate\n\
                  def main(input, run):\n    \
                      print('a stray line a library printed')\n    \
                      if not askgate.can_ask():\n        return 'nobody to ask'\n    \
                      return 'picked ' + askgate.ask('Which?', options=['a', 'b'])\n\
                  askgate.run(main)\n";
    add(&mut f, dir.path(), "chatty", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "chatty").await;
    h.card(1).await;
    h.say(ALICE, "b").await;
    let done = h.finished(run).await;
    assert_eq!((done.status, done.result.as_deref()), (RunStatus::Finished, Some("picked b")), "{done:?}");
}

#[tokio::test]
async fn without_a_conversation_the_python_helper_says_it_cannot_ask() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "import askgate\n\
                  def main(input, run):\n    \
                      print('a stray line a library printed')\n    \
                      if not askgate.can_ask():\n        return 'nobody to ask'\n    \
                      return 'picked ' + askgate.ask('Which?', options=['a', 'b'])\n\
                  askgate.run(main)\n";
    add(&mut f, dir.path(), "chatty", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    // Without a conversation, the helper says so before asking.
    let alone = h.engine.runner().run_to_end(RunRequest::new("chatty", None, alice())).await.unwrap();
    assert_eq!(alone.result.as_deref(), Some("nobody to ask"), "{alone:?}");
}

#[tokio::test]
async fn the_python_helper_gets_the_edit_of_an_editable_approval() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "import askgate\n\
                  def main(input, run):\n    \
                      decision = askgate.approve('deploy prod', editable=True)\n    \
                      if isinstance(decision, askgate.Edited):\n        return 'ran ' + decision.action\n    \
                      return 'ran deploy prod (' + decision + ')'\n\
                  askgate.run(main)\n";
    add(&mut f, dir.path(), "deploy", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    let run = start(&h, "deploy").await;
    let card = h.card(1).await;
    assert!(card.allow_custom, "the protocol's `editable` reaches the question");
    h.say(ALICE, &format!("/approve {} edit deploy staging", card.id.short())).await;
    let done = h.finished(run).await;
    assert_eq!((done.status, done.result.as_deref()), (RunStatus::Finished, Some("ran deploy staging")), "{done:?}");
}

#[tokio::test]
async fn the_python_helper_asks_for_two_approvers() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "import askgate\n\
                  def main(input, run):\n    \
                      return 'ran drop table (' + askgate.approve('drop table', quorum=2) + ')'\n\
                  askgate.run(main)\n";
    add(&mut f, dir.path(), "drop", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    // Only the initiator answers this run: two approvers can never be found, and it says so.
    let alone = h.finished(start(&h, "drop").await).await;
    assert_eq!(alone.status, RunStatus::Failed, "{alone:?}");
    assert!(
        alone.result.unwrap().contains("a quorum of 2 needs that many people who may answer, and only test:alice may")
    );
    let team = askgate::question::Answerers::Users { users: vec![alice(), UserRef::parse(BOB).unwrap()] };
    // Carol asks; alice and bob approve (a requester's own approval would not count).
    let carol = UserRef::parse("test:carol").unwrap();
    let request = RunRequest::new("drop", Some(room()), carol).answerers(team);
    let run = h.engine.runner().start_run(request, Mode::FollowUp).await.unwrap();
    let card = h.card(1).await;
    assert_eq!(card.quorum, 2, "the protocol's `quorum` reaches the question");
    let id = card.id.short();
    let first = h.say(ALICE, &format!("/approve {id}")).await;
    assert!(matches!(first.receipt, Some(askgate::question::Receipt::Counted { .. })), "{first:?}");
    h.say(BOB, &format!("/approve {id}")).await;
    let done = h.finished(run).await;
    assert_eq!((done.status, done.result.as_deref()), (RunStatus::Finished, Some("ran drop table (once)")), "{done:?}");
}

#[tokio::test]
async fn the_python_helper_passes_its_nudges_to_the_question() {
    let dir = Arc::new(TempDir::new().unwrap());
    let mut f = Functions::new();
    let script = "import askgate\n\
                  def main(input, run):\n    \
                      return askgate.ask('Ship?', options=['yes', 'no'], remind_before='5m', remind_every=600, \
                      escalate_after='1h', escalate_to='test:ops')\n\
                  askgate.run(main)\n";
    add(&mut f, dir.path(), "ship", "python3", script, false, Duration::from_secs(30));
    let h = harness(f, &dir).await;
    start(&h, "ship").await;
    let card = h.card(1).await;
    let n = &card.nudges;
    assert_eq!((n.remind_before, n.remind_every, n.escalate_after), (Some(300_000), Some(600_000), Some(3_600_000)));
    assert_eq!(n.escalate_to.as_ref().map(|c| c.as_str()), Some("test:ops"));
}
