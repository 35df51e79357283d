//! Claude Code's channel permission relay through the real binaries: a driver plays Claude
//! Code's side of the channel protocol over `askgate mcp --channel` (its `initialize`, then
//! `notifications/claude/channel/permission_request`), a person answers on the console, and the
//! decision comes back as `notifications/claude/channel/permission`. When the terminal answers
//! first, a `PostToolUse` hook from the same project retracts the card. A person's plain
//! message in the conversation goes into the session as `notifications/claude/channel`.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::binary::{BIN, Served, write_config};
use crate::support::{eventually, get_json};

const CONFIG: &str = "\n[mcp]\nconversation = \"console:local\"\n\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\", \"Edit\"]\nallow = [\"Read\"]\nmessages = true\n";

type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// The next message on the bridge's stdout that `wanted` picks.
async fn next(lines: &mut Lines, wanted: impl Fn(&Value) -> bool) -> Value {
    let read = async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the bridge is still serving");
            let message: Value = serde_json::from_str(&line).unwrap();
            if wanted(&message) {
                return message;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("a message")
}

fn prompt(id: &str, tool: &str, description: &str, input: &Value) -> String {
    let params = json!({"request_id": id, "tool_name": tool, "description": description,
                        "input_preview": input.to_string()});
    json!({"jsonrpc": "2.0", "method": "notifications/claude/channel/permission_request", "params": params}).to_string()
}

fn decision(message: &Value) -> bool {
    message["method"] == "notifications/claude/channel/permission"
}

#[tokio::test]
async fn the_channel_relay_answers_claude_codes_permission_prompts_from_the_console() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), CONFIG);
    let mut served = Served::start(&config);
    let (base, token) = served.agent(dir.path()).await;
    let project = dir.path().canonicalize().unwrap();
    let mut bridge = Command::new(BIN)
        .args(["mcp", "--channel", "--config"])
        .arg(&config)
        .args(["--url", &format!("{base}/mcp")])
        .current_dir(&project)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    let mut send = async |message: String| {
        stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };

    // Claude Code registers a channel that declares both capabilities in a revision it knows.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.1.90"}}});
    send(init.to_string()).await;
    let answer = next(&mut lines, |m| m["id"] == 1).await;
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25", "{answer}");
    let experimental = &answer["result"]["capabilities"]["experimental"];
    assert_eq!((&experimental["claude/channel"], &experimental["claude/channel/permission"]), (&json!({}), &json!({})));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()).await;

    // Allowed on the console: Claude Code is told `allow` for that request id.
    send(prompt("ABCDE", "Bash", "List the files", &json!({"command": "ls -la"}))).await;
    let id = served.card_id("Bash: ls -la").await;
    served.stdout_line("List the files").await;
    served.type_line(&format!("/approve {id}")).await;
    let allowed = next(&mut lines, decision).await;
    assert_eq!(allowed["params"], json!({"request_id": "abcde", "behavior": "allow"}), "{allowed}");

    // A plain message in the conversation goes into the session (once the bridge listens).
    for _ in 0..40 {
        served.type_line("please run the linter too").await;
        tokio::time::sleep(Duration::from_millis(250)).await;
        if served.stdout().contains("Passed on to the agent listening here.") {
            break;
        }
    }
    let pushed = next(&mut lines, |m| m["method"] == "notifications/claude/channel").await;
    assert_eq!(pushed["params"]["content"], "please run the linter too", "{pushed}");
    assert_eq!(pushed["params"]["meta"]["user"], "console:local", "{pushed}");

    // The terminal answers first: Claude Code says nothing to the channel, but the tool runs,
    // and its PostToolUse hook from the same project retracts the card.
    let edit = json!({"file_path": "/home/dev/app/src/main.rs", "old_string": "1", "new_string": "2"});
    send(prompt("fghij", "Edit", "Change the constant", &edit)).await;
    let (operator_base, operator) = served.api(dir.path()).await;
    let pending = eventually(|| async {
        let listed = get_json(&format!("{operator_base}/api/questions?status=pending"), &operator).await;
        listed["questions"].as_array().and_then(|q| q.first().cloned())
    })
    .await;
    assert!(pending["prompt"].as_str().unwrap().starts_with("Edit"), "{pending}");
    let ran = json!({"hook_event_name": "PostToolUse", "session_id": "s", "cwd": project.display().to_string(),
                     "tool_name": "Edit", "tool_input": edit, "tool_response": {"success": true}});
    let response = reqwest::Client::new()
        .post(format!("{base}/hooks/claude-code"))
        .bearer_auth(&token)
        .json(&ran)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = pending["id"].as_str().unwrap().to_owned();
    let retracted = eventually(|| async {
        let q = get_json(&format!("{operator_base}/api/questions/{id}"), &operator).await;
        Some(q).filter(|q| q["status"] == "cancelled")
    })
    .await;
    assert_eq!(retracted["outcome"]["reason"], "answered in Claude Code", "{retracted}");

    // Rejected on the console: `deny`; and the retracted prompt was never decided.
    send(prompt("kmnop", "Bash", "Delete the build", &json!({"command": "rm -rf build"}))).await;
    let id = served.card_id("Bash: rm -rf build").await;
    served.type_line(&format!("/deny {id} not now")).await;
    let denied = next(&mut lines, decision).await;
    assert_eq!(denied["params"], json!({"request_id": "kmnop", "behavior": "deny"}), "{denied}");

    // Ending the session retracts what it left waiting.
    send(prompt("qrstu", "Bash", "Deploy", &json!({"command": "make deploy"}))).await;
    let id = served.card_id("Bash: make deploy").await;
    drop(stdin);
    bridge.wait().await.unwrap();
    let full = eventually(|| async {
        let listed = get_json(&format!("{operator_base}/api/questions?status=cancelled"), &operator).await;
        let found = listed["questions"]
            .as_array()?
            .iter()
            .find(|q| q["id"].as_str().is_some_and(|q| q.starts_with(&id)))?
            .clone();
        Some(found)
    })
    .await;
    assert_eq!(full["outcome"]["reason"], "client", "{full}");
    served.close_input();
    served.terminate().await;
}
