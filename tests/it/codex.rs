//! Codex's hooks through the real binary. The real Codex CLI (pinned in `.ci/run`) works in a
//! folder with a `build/` in it, its model a loopback double of the Responses API
//! ([`crate::fake_responses`]) that runs `rm -rf build`, and its hook is `askgate hook codex`,
//! which asks on askgate's console: `codex exec` (which never asks for approval) through its
//! `PreToolUse` hook, and Codex's app-server (approvals `on-request`, as its IDE extension and
//! TUI run) through its `PermissionRequest` hook. The answers in Codex's shapes are checked on
//! the payloads too, posted to `/hooks/codex` as Codex sends them.

mod app_server;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;

use crate::binary::{BIN, Served, write_config};
use crate::fake_responses::{COMMAND, FakeResponses};
use crate::support::post;
use app_server::AppServer;

const CODEX: &str = "\n[codex]\nconversation = \"console:local\"\nask = [\"Bash\"]\n";

/// The key the loopback provider takes (any: the double does not check it).
const MODEL_KEY: &str = "LOOPBACK_MODEL_KEY";

/// A Codex home whose model is `fake`'s and whose `event` hook for `Bash` is `askgate hook codex`
/// against the askgate at `base` (its agent token from `config`'s folder).
fn codex_home(fake: &FakeResponses, config: &Path, base: &str, event: &str) -> TempDir {
    let home = TempDir::new().unwrap();
    let hook = format!("'{BIN}' hook codex --config '{}' --url '{base}'", config.display());
    let settings = format!(
        "model = \"loopback-model\"\nmodel_provider = \"loopback\"\n\n\
         [model_providers.loopback]\nname = \"loopback\"\nbase_url = \"{}\"\nenv_key = \"{MODEL_KEY}\"\n\
         wire_api = \"responses\"\n\n\
         [[hooks.{event}]]\nmatcher = \"Bash\"\nhooks = [{{ type = \"command\", command = {} }}]\n",
        fake.base_url,
        toml_string(&hook),
    );
    std::fs::write(home.path().join("config.toml"), settings).unwrap();
    home
}

/// Lets `rm` run without Codex's approval: its own policy refuses `rm -rf` when nobody can
/// approve it (`codex exec`), and this rule leaves the decision to the hook, that is to the person.
/// (A file of its own: Codex empties `default.rules` in a home it starts for the first time.)
fn allow_rm(home: &Path) {
    std::fs::create_dir(home.join("rules")).unwrap();
    std::fs::write(home.join("rules/allow-rm.rules"), "prefix_rule(pattern=[\"rm\"], decision=\"allow\")\n").unwrap();
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// A folder to work in, with a `build/` holding a file.
fn workspace() -> TempDir {
    let work = TempDir::new().unwrap();
    std::fs::create_dir(work.path().join("build")).unwrap();
    std::fs::write(work.path().join("build/app.js"), "console.log(1)\n").unwrap();
    work
}

/// `codex exec` asked to clean up, in `work`, with nothing of this machine's environment but
/// the PATH (no login, no OpenAI key: the provider's key is the loopback one).
fn codex_exec(home: &Path, work: &Path) -> tokio::process::Child {
    let codex = crate::tools::node_bin("codex").expect("the Codex CLI (see the test's ignore reason)");
    tokio::process::Command::new(codex)
        .args(["exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", "-s", "workspace-write"])
        // The hook is this test's own file, which Codex has not been told to trust.
        .arg("--dangerously-bypass-hook-trust")
        .arg("-C")
        .arg(work)
        .arg("Remove the build folder.")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CODEX_HOME", home)
        .env(MODEL_KEY, "loopback-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Codex's output, once it has finished (two minutes at most).
async fn finished(codex: tokio::process::Child) -> (String, String) {
    let out = tokio::time::timeout(Duration::from_secs(120), codex.wait_with_output())
        .await
        .expect("codex exec finishes")
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "codex exec failed: {stdout}\n{stderr}");
    (stdout, stderr)
}

#[tokio::test]
#[cfg_attr(
    no_codex,
    ignore = "needs the Codex CLI 0.171.0: npm install --prefix ~/.cache/askgate-ci @openai/codex@0.171.0 (or run .ci/run)"
)]
async fn codex_denied_on_the_console_keeps_the_folder_with_the_persons_words() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), CODEX);
    let mut served = Served::start(&config);
    let (base, _) = served.agent(dir.path()).await;
    let fake = FakeResponses::start().await;
    let (home, work) = (codex_home(&fake, &config, &base, "PreToolUse"), workspace());
    allow_rm(home.path());

    let codex = codex_exec(home.path(), work.path());
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 1).await;
    served.type_line(&format!("/deny {id} keep build, the release is in it")).await;
    let (stdout, stderr) = finished(codex).await;

    assert!(work.path().join("build/app.js").exists(), "the folder is gone: {stdout}\n{stderr}");
    let outputs = fake.call_outputs();
    assert_eq!(outputs.len(), 1, "{:?}", fake.requests());
    assert!(outputs[0].contains("keep build, the release is in it"), "the model heard: {}", outputs[0]);
    assert!(stdout.contains("keep build, the release is in it"), "Codex said: {stdout}\n{stderr}");
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_codex,
    ignore = "needs the Codex CLI 0.171.0: npm install --prefix ~/.cache/askgate-ci @openai/codex@0.171.0 (or run .ci/run)"
)]
async fn codex_allowed_on_the_console_runs_the_command() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), CODEX);
    let mut served = Served::start(&config);
    let (base, _) = served.agent(dir.path()).await;
    let fake = FakeResponses::start().await;
    let (home, work) = (codex_home(&fake, &config, &base, "PreToolUse"), workspace());
    allow_rm(home.path());

    let codex = codex_exec(home.path(), work.path());
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 1).await;
    served.stdout_line(&format!("in {}", work.path().display())).await;
    served.type_line(&format!("/approve {id}")).await;
    let (stdout, stderr) = finished(codex).await;

    assert!(!work.path().join("build").exists(), "the folder is still there: {stdout}\n{stderr}");
    let outputs = fake.call_outputs();
    assert_eq!(outputs.len(), 1, "{:?}", fake.requests());
    assert!(!outputs[0].contains("blocked"), "the model heard: {}", outputs[0]);
    served.terminate().await;
}

/// Trusts `home`'s `PermissionRequest` hook as a person does when Codex lists it for review:
/// its key and hash, as `hooks/list` gives them, under `[hooks.state]` in its config.
async fn trust_permission_hook(codex: &Path, home: &Path, work: &Path) {
    let mut server = AppServer::start(codex, home, &[]).await;
    let listed = server.call("hooks/list", json!({"cwds": [work]})).await;
    server.stop().await;
    let hooks = listed["data"][0]["hooks"].as_array().cloned().unwrap_or_default();
    let hook = hooks.iter().find(|h| h["eventName"] == "permissionRequest").unwrap_or_else(|| panic!("{listed}"));
    let trust = format!(
        "\n[hooks.state.{}]\ntrusted_hash = {}\n",
        toml_string(hook["key"].as_str().unwrap()),
        toml_string(hook["currentHash"].as_str().unwrap())
    );
    let file = home.join("config.toml");
    let settings = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, settings + &trust).unwrap();
}

#[tokio::test]
#[cfg_attr(
    no_codex,
    ignore = "needs the Codex CLI 0.171.0: npm install --prefix ~/.cache/askgate-ci @openai/codex@0.171.0 (or run .ci/run)"
)]
async fn codexs_app_server_asks_its_permission_request_on_the_console() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), CODEX);
    let mut served = Served::start(&config);
    let (base, _) = served.agent(dir.path()).await;
    let fake = FakeResponses::start().await;
    let (home, work) = (codex_home(&fake, &config, &base, "PermissionRequest"), workspace());
    let codex = crate::tools::node_bin("codex").expect("the Codex CLI (see the test's ignore reason)");
    trust_permission_hook(&codex, home.path(), work.path()).await;

    let mut server = AppServer::start(&codex, home.path(), &[(MODEL_KEY, "loopback-key")]).await;
    let started = server
        .call("thread/start", json!({"approvalPolicy": "on-request", "sandbox": "workspace-write", "cwd": work.path()}))
        .await;
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    let turn = json!({"threadId": thread, "input": [{"type": "text", "text": "Remove the build folder."}]});

    // Denied: the command does not run, and the model reads the person's words. Codex asks its
    // client nothing (the hook decided).
    server.call("turn/start", turn.clone()).await;
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 1).await;
    served.type_line(&format!("/deny {id} not while the release builds")).await;
    server.turn_completed().await;
    assert!(work.path().join("build/app.js").exists());
    let outputs = fake.call_outputs();
    assert_eq!(outputs.len(), 1, "{:?}", fake.requests());
    assert!(outputs[0].contains("not while the release builds"), "the model heard: {}", outputs[0]);

    // Asked again and allowed: it runs.
    server.call("turn/start", turn).await;
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 2).await;
    served.type_line(&format!("/approve {id}")).await;
    server.turn_completed().await;
    assert!(!work.path().join("build").exists(), "the model heard: {:?}", fake.call_outputs());
    server.stop().await;
    served.terminate().await;
}

/// A `PermissionRequest` hook's input as Codex sends it.
fn permission_request(command: &str) -> Value {
    json!({
        "session_id": "01a24e0e-0f91-7dd0-92e0-0595843eec2e",
        "turn_id": "01a24e0e-0fad-77a3-bb8b-ec6af9242981",
        "transcript_path": null,
        "cwd": "/home/dev/app",
        "hook_event_name": "PermissionRequest",
        "model": "gpt-5.5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Remove the build output?"},
    })
}

#[tokio::test]
async fn a_permission_request_is_answered_in_codexs_shape_with_always_as_askgates_grant() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), CODEX));
    let (base, token) = served.agent(dir.path()).await;
    let posted = |body: Value| {
        let (base, token) = (base.clone(), token.clone());
        tokio::spawn(async move { post(&base, &token, "/hooks/codex", &body).await })
    };

    // Denied with words: Codex's `deny` with the words as its message.
    let pending = posted(permission_request("rm -rf build"));
    let id = served.card_id("Bash: rm -rf build").await;
    served.stdout_line("Remove the build output?").await;
    served.type_line(&format!("/deny {id} not before the release")).await;
    let (status, answer) = pending.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    let decision = &answer["hookSpecificOutput"]["decision"];
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "PermissionRequest");
    assert_eq!(decision["behavior"], "deny", "{answer}");
    assert!(decision["message"].as_str().unwrap().contains("not before the release"), "{answer}");

    // Allowed always: Codex's `allow`, nothing it would refuse, and askgate's grant answers the
    // same request next time without a card.
    let pending = posted(permission_request("make release"));
    let id = served.card_id("Bash: make release").await;
    served.type_line(&format!("/approve {id} always")).await;
    let (_, answer) = pending.await.unwrap();
    assert_eq!(
        answer,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
    );
    let (_, again) = post(&base, &token, "/hooks/codex", &permission_request("make release")).await;
    assert_eq!(again["hookSpecificOutput"]["decision"]["behavior"], "allow", "{again}");
    assert_eq!(served.cards("Bash: make release"), 1);
    served.terminate().await;
}

#[tokio::test]
async fn the_codex_hook_blocks_a_tool_call_when_askgate_cannot_answer() {
    let dir = TempDir::new().unwrap();
    // No [codex] table: askgate says what to add.
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let (status, answer) = post(&base, &token, "/hooks/codex", &permission_request("ls")).await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("[codex]"), "{answer}");
    served.terminate().await;

    // Nothing at the address: a PreToolUse is blocked (exit 2, the reason on stderr, as Codex
    // reads a block); a PermissionRequest falls back to Codex's own prompt (exit 1).
    let mut pre_tool_use = permission_request("ls");
    pre_tool_use["hook_event_name"] = json!("PreToolUse");
    pre_tool_use["tool_use_id"] = json!("call-1");
    for (body, code) in [(pre_tool_use, 2), (permission_request("ls"), 1)] {
        let mut child = tokio::process::Command::new(BIN)
            .args(["hook", "codex", "--config"])
            .arg(dir.path().join("channels.toml"))
            .args(["--url", "http://127.0.0.1:9"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(body.to_string().as_bytes()).await.unwrap();
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", body["hook_event_name"]);
        assert!(String::from_utf8_lossy(&out.stderr).contains("no askgate answers at http://127.0.0.1:9"));
        assert!(out.stdout.is_empty());
    }
}
