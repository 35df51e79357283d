//! The real Claude Code CLI (pinned in `.ci/run`) asks askgate through its hooks: `claude -p`
//! headless, its model a loopback double of the Messages API ([`FakeAnthropic`]) that has it run
//! `rm -rf build` in a project with a `build/` folder, askgate the real binary answering on
//! its console. Denied with words: the folder stays and the tool result Claude Code gives the
//! model carries them; allowed: the folder is gone.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{BIN, Served, write_config};
use crate::fake_anthropic::{FakeAnthropic, result_text};

const COMMAND: &str = "rm -rf build";

/// askgate asks about Bash, and waits as long as the hooks below do.
const HOOKS: &str = "\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\"]\nhook_timeout = \"120s\"\n";

/// The Claude Code program `.ci/run` installs.
fn claude() -> PathBuf {
    crate::tools::node_bin("claude").expect(
        "claude is missing: npm install --prefix ~/.cache/askgate-ci @anthropic-ai/claude-code@2.1.332 (.ci/run does)",
    )
}

/// A project with a `build/` folder (and a file in it), in `dir`.
fn project(dir: &Path, name: &str) -> PathBuf {
    let project = dir.join(name);
    std::fs::create_dir_all(project.join("build/cache")).unwrap();
    std::fs::write(project.join("build/cache/app.o"), "object").unwrap();
    project
}

/// Runs `claude -p` in `project` with `settings` (its hooks), against `model`, offline: its
/// home is `dir`, its only key a dummy, its nonessential traffic (updates, telemetry, error
/// reports) off. Ends with the stream-json lines it printed.
fn run_claude(dir: &Path, project: &Path, settings: &Value, model: &FakeAnthropic, env: &[(&str, &str)]) -> Child {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let settings_file = dir.join("settings.json");
    std::fs::write(&settings_file, settings.to_string()).unwrap();
    let child = tokio::process::Command::new(claude())
        .args(["-p", "Remove the build folder.", "--output-format", "stream-json", "--verbose", "--settings"])
        .arg(&settings_file)
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Child(child)
}

/// A running `claude -p`.
struct Child(tokio::process::Child);

impl Child {
    /// Waits for it to end (two minutes at most) and reads what it printed: the stream-json
    /// messages.
    async fn finished(self) -> Vec<Value> {
        let out = tokio::time::timeout(Duration::from_secs(120), self.0.wait_with_output())
            .await
            .expect("claude -p ends within two minutes")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "claude -p failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }
}

/// The tool results in Claude Code's output (the `user` messages it sent the model).
fn tool_results(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["type"] == "user")
        .flat_map(|m| m["message"]["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .collect()
}

/// The result line Claude Code ends with.
fn result(messages: &[Value]) -> &Value {
    messages.iter().rfind(|m| m["type"] == "result").expect("claude -p ends with its result")
}

#[tokio::test]
#[cfg_attr(
    no_claude_code,
    ignore = "needs Claude Code 2.1.332: npm install --prefix ~/.cache/askgate-ci @anthropic-ai/claude-code@2.1.332 \
              (or run .ci/run)"
)]
async fn claude_codes_http_hook_asks_the_person_before_bash_runs() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), HOOKS));
    let (base, token) = served.agent(dir.path()).await;
    let model = FakeAnthropic::start(COMMAND).await;
    // As the docs write it: the token from the environment, which the hook may read.
    let hook = json!({"type": "http", "url": format!("{base}/hooks/claude-code"), "timeout": 120,
        "headers": {"Authorization": "Bearer $ASKGATE_AGENT_TOKEN"}, "allowedEnvVars": ["ASKGATE_AGENT_TOKEN"]});
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}});
    let env = [("ASKGATE_AGENT_TOKEN", token.as_str())];

    // Denied with words: the folder stays, and the model reads why.
    let denied = project(dir.path(), "denied");
    let claude = run_claude(dir.path(), &denied, &settings, &model, &env);
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 1).await;
    served.stdout_line(&format!("in {}", denied.display())).await;
    served.type_line(&format!("/deny {id} keep the build, the release needs it")).await;
    let messages = claude.finished().await;
    assert!(denied.join("build/cache/app.o").exists(), "a denied rm -rf build ran");
    let results = tool_results(&messages);
    assert_eq!(results.len(), 1, "{messages:?}");
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(result_text(&results[0]).contains("keep the build, the release needs it"), "{results:?}");
    let told = model.tool_results();
    assert!(result_text(&told[0]).contains("keep the build, the release needs it"), "the model was told {told:?}");
    assert_eq!(result(&messages)["permission_denials"][0]["tool_input"]["command"], COMMAND, "{messages:?}");

    // Allowed: it runs.
    let allowed = project(dir.path(), "allowed");
    let claude = run_claude(dir.path(), &allowed, &settings, &model, &env);
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 2).await;
    served.type_line(&format!("/approve {id}")).await;
    let messages = claude.finished().await;
    assert!(!allowed.join("build").exists(), "an allowed rm -rf build did not run: {messages:?}");
    assert_eq!(tool_results(&messages)[0]["is_error"], false, "{messages:?}");

    // Edited: the command the person wrote runs instead.
    let edited = project(dir.path(), "edited");
    let claude = run_claude(dir.path(), &edited, &settings, &model, &env);
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 3).await;
    served.type_line(&format!("/approve {id} edit rm -rf build/cache")).await;
    claude.finished().await;
    assert!(edited.join("build").exists() && !edited.join("build/cache").exists(), "the edited command ran");
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_claude_code,
    ignore = "needs Claude Code 2.1.332: npm install --prefix ~/.cache/askgate-ci @anthropic-ai/claude-code@2.1.332 \
              (or run .ci/run)"
)]
async fn claude_codes_command_hook_asks_the_person_for_its_permission_dialog() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), HOOKS);
    let mut served = Served::start(&config);
    let (base, _) = served.agent(dir.path()).await;
    let model = FakeAnthropic::start(COMMAND).await;
    // As the docs write it, with the address of this askgate (its port is the system's pick).
    let command = format!("{BIN} hook claude-code --config {} --url {base}", config.display());
    let hook = json!({"type": "command", "command": command, "timeout": 120});
    let settings = json!({"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [hook]}]}});

    let denied = project(dir.path(), "denied");
    let claude = run_claude(dir.path(), &denied, &settings, &model, &[]);
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 1).await;
    served.type_line(&format!("/deny {id} not today, the release needs it")).await;
    let messages = claude.finished().await;
    assert!(denied.join("build/cache/app.o").exists(), "a denied rm -rf build ran");
    let results = tool_results(&messages);
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(result_text(&results[0]).contains("not today, the release needs it"), "{results:?}");

    // Allowed always: it runs, and in this project it runs again without a card.
    let allowed = project(dir.path(), "allowed");
    let claude = run_claude(dir.path(), &allowed, &settings, &model, &[]);
    let id = served.agents_card_id(&format!("Bash: {COMMAND}"), 2).await;
    served.type_line(&format!("/approve {id} always")).await;
    let messages = claude.finished().await;
    assert!(!allowed.join("build").exists(), "an allowed rm -rf build did not run: {messages:?}");
    project(dir.path(), "allowed");
    let messages = run_claude(dir.path(), &allowed, &settings, &model, &[]).finished().await;
    assert!(!allowed.join("build").exists(), "the granted rm -rf build did not run: {messages:?}");
    assert_eq!(served.cards(&format!("Bash: {COMMAND}")), 2, "a granted command is not asked again");
    served.terminate().await;
}
