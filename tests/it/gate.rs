//! Gating an agent's tools: an upstream MCP server (`examples/files_server.rs`, started by
//! askgate over stdio) whose tools askgate offers as `files__<tool>`, some behind approvals on
//! the console.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use crate::binary::{BIN, Served, example, write_config};
use crate::mcp::{call, call_in_background, http_client, text};
use crate::support::eventually;

pub fn gated_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    gated_config_with(dir, r#"["delete_*"]"#, extra)
}

fn gated_config_with(dir: &Path, approve: &str, extra: &str) -> std::path::PathBuf {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let upstream = format!(
        "\n[mcp]\nconversation = \"console:local\"\n\n[[mcp.upstream]]\nname = \"files\"\ncommand = [\"{}\", \"{}\"]\napprove = {approve}\ndeny = [\"format_*\"]\n{extra}",
        example("files_server").display(),
        files.display()
    );
    write_config(dir, &upstream)
}

async fn tool_names(client: &rmcp::Peer<rmcp::RoleClient>) -> Vec<String> {
    client.list_tools(None).await.unwrap().tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// Waits until the upstream's tools are offered.
async fn ready(client: &rmcp::Peer<rmcp::RoleClient>) -> Vec<String> {
    eventually(|| async {
        let names = tool_names(client).await;
        names.iter().any(|n| n.starts_with("files__")).then_some(names)
    })
    .await
}

/// Waits until the upstream wrote `marker` in its directory (`waiting`, `cancelled`).
async fn upstream_saw(dir: &Path, marker: &str) {
    let path = dir.join("files").join(marker);
    eventually(|| async { path.exists().then_some(()) }).await;
}

#[tokio::test]
async fn only_gated_calls_wait_for_approval() {
    let dir = TempDir::new().unwrap();
    // A second upstream that cannot start takes nothing else down.
    let broken = "\n[[mcp.upstream]]\nname = \"broken\"\ncommand = [\"/nonexistent/program\"]\n";
    let mut served = Served::start(&gated_config(dir.path(), broken));
    let (base, token) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    let names = ready(&client).await;
    let health = eventually(|| async {
        let body: serde_json::Value = reqwest::get(format!("{base}/healthz")).await.ok()?.json().await.ok()?;
        body["channels"]["mcp:broken"].as_str().filter(|s| s.contains("cannot start")).map(|_| body.clone())
    })
    .await;
    assert_eq!(health["channels"]["mcp:files"], "up", "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    let down = client.call_tool(call("broken__anything", json!({}))).await.unwrap();
    assert!(text(&down).contains("`broken` is not running"), "{}", text(&down));
    for expected in ["ask_user", "files__read_file", "files__delete_file", "files__wait"] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("format_disk")), "denied tools are not offered: {names:?}");

    // Ungated: straight through, nobody asked.
    let files = dir.path().join("files");
    std::fs::write(files.join("a.txt"), "hello").unwrap();
    std::fs::write(files.join("b.txt"), "world").unwrap();
    let read = client.call_tool(call("files__read_file", json!({"path": "a.txt"}))).await.unwrap();
    assert_eq!(text(&read), "hello");

    // Gated, rejected with feedback: the agent reads the feedback; nothing happened.
    let pending = call_in_background(&client, call("files__delete_file", json!({"path": "a.txt"})));
    let id = served.nth_card_id("files__delete_file", 1).await;
    served.stdout_line(r#""path": "a.txt""#).await;
    served.type_line(&format!("/deny {id} keep a.txt, it is the only copy")).await;
    let rejected = pending.await.unwrap();
    assert_eq!(rejected.is_error, Some(true));
    assert!(text(&rejected).contains("keep a.txt, it is the only copy"), "{}", text(&rejected));
    assert!(files.join("a.txt").exists());

    // Allowed always: the call is made, and the next call of the tool is not asked again.
    let pending = call_in_background(&client, call("files__delete_file", json!({"path": "a.txt"})));
    let id = served.nth_card_id("files__delete_file", 2).await;
    served.type_line(&format!("/approve {id} always")).await;
    let deleted = pending.await.unwrap();
    assert!(text(&deleted).starts_with("deleted"), "{}", text(&deleted));
    assert!(!files.join("a.txt").exists());
    let again = tokio::time::timeout(
        Duration::from_secs(15),
        client.call_tool(call("files__delete_file", json!({"path": "b.txt"}))),
    )
    .await
    .expect("a granted call is not asked again")
    .unwrap();
    assert!(text(&again).starts_with("deleted"), "{}", text(&again));

    // The audit: each gated call is an approval with its outcome and its arguments.
    let audit = crate::support::get_json(&format!("{base}/api/questions?kind=approval&status=all"), &operator).await;
    let audit = audit["questions"].as_array().unwrap();
    assert_eq!(audit.len(), 3, "rejected, allowed always, granted: {audit:?}");
    assert!(audit.iter().all(|q| q["prompt"] == "files__delete_file"), "{audit:?}");
    assert!(audit.iter().any(|q| q["detail"].as_str().unwrap().contains(r#""path": "b.txt""#)), "{audit:?}");
    assert!(audit.iter().any(|q| q["status"] == "declined"), "{audit:?}");
    let bad = reqwest::Client::new()
        .get(format!("{base}/api/questions?kind=approvals"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), reqwest::StatusCode::BAD_REQUEST);

    // Denied and unknown tools are protocol errors.
    assert!(client.call_tool(call("files__format_disk", json!({}))).await.is_err());
    assert!(client.call_tool(call("nowhere__read_file", json!({}))).await.is_err());

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_upstream_killed_mid_call_fails_that_call_clearly_then_restarts() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&gated_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;
    let pid_file = dir.path().join("files").join("files_server.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();

    let pending = call_in_background(&client, call("files__wait", json!({"seconds": 60})));
    upstream_saw(dir.path(), "waiting").await;
    assert!(std::process::Command::new("kill").args(["-KILL", pid.trim()]).status().unwrap().success());
    let failed = tokio::time::timeout(Duration::from_secs(15), pending).await.expect("the call ends").unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(text(&failed).contains("upstream `files`"), "{}", text(&failed));

    // Restarted: a new process, and its tools work again.
    std::fs::write(dir.path().join("files").join("c.txt"), "back").unwrap();
    let read = eventually(|| async {
        let now = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if now == pid {
            return None;
        }
        let result = client.call_tool(call("files__read_file", json!({"path": "c.txt"}))).await.ok()?;
        (result.is_error != Some(true)).then(|| text(&result))
    })
    .await;
    assert_eq!(read, "back");
    assert!(served.log().contains("restarting it"), "{}", served.log());

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_gated_call_from_a_client_with_tasks_is_a_task_that_ends_with_the_upstreams_result() {
    use rmcp::model::{CallToolResponse, GetTaskParams, TaskPayload};

    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&gated_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let plain = http_client(&format!("{base}/mcp"), &token).await;
    ready(&plain).await;
    let client = crate::mcp::client_with(&format!("{base}/mcp"), &token, crate::mcp::Tasks).await;
    std::fs::write(dir.path().join("files").join("t.txt"), "x").unwrap();

    let response = client.call_tool_once(call("files__delete_file", json!({"path": "t.txt"}))).await.unwrap();
    let CallToolResponse::Task(created) = response else { panic!("not a task: {response:?}") };
    let id = served.card_id("files__delete_file").await;
    served.type_line(&format!("/approve {id}")).await;
    let result = eventually(|| async {
        match client.get_task(GetTaskParams::new(created.task.task_id.clone())).await.unwrap().task.payload {
            TaskPayload::Completed { result } => Some(result),
            _ => None,
        }
    })
    .await;
    let text = result["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("deleted"), "{result:?}");
    assert!(!dir.path().join("files").join("t.txt").exists());

    client.cancel().await.unwrap();
    plain.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_http_upstream_is_reached_at_its_url() {
    use tokio::io::AsyncBufReadExt;

    let dir = TempDir::new().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("h.txt"), "over http").unwrap();
    let mut upstream = tokio::process::Command::new(example("files_server"))
        .args(["--http", "127.0.0.1:0"])
        .arg(&files)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(upstream.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().unwrap().trim_start_matches("listening on ").to_owned();
    let extra = format!(
        "\n[mcp]\nconversation = \"console:local\"\n\n[[mcp.upstream]]\nname = \"remote\"\nurl = \"{url}\"\napprove = [\"delete_*\"]\nmax_result = \"1KB\"\n"
    );
    let mut served = Served::start(&write_config(dir.path(), &extra));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    eventually(|| async {
        let names = tool_names(&client).await;
        names.iter().any(|n| n == "remote__read_file").then_some(())
    })
    .await;
    let read = client.call_tool(call("remote__read_file", json!({"path": "h.txt"}))).await.unwrap();
    assert_eq!(text(&read), "over http");
    let pending = call_in_background(&client, call("remote__delete_file", json!({"path": "h.txt"})));
    let id = served.card_id("remote__delete_file").await;
    served.type_line(&format!("/approve {id}")).await;
    assert!(text(&pending.await.unwrap()).starts_with("deleted"));
    assert!(!files.join("h.txt").exists());
    // Over HTTP the result is measured when it has arrived: over `max_result`, a tool error.
    let big = client.call_tool(call("remote__big", json!({"bytes": 5000}))).await.unwrap();
    assert_eq!(big.is_error, Some(true));
    assert!(
        text(&big).contains("the upstream `remote` sent a result of 5.1 kB, over its limit of 1.0 kB"),
        "{}",
        text(&big)
    );
    // A change of its tools (it speaks 2026-07-28, without sessions) reaches askgate.
    assert_eq!(text(&client.call_tool(call("remote__grow", json!({}))).await.unwrap()), "echo is offered now");
    eventually(|| async { tool_names(&client).await.iter().any(|n| n == "remote__echo").then_some(()) }).await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_grant_for_arguments_covers_those_arguments_only() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&gated_config_with(dir.path(), r#"["read_*"]"#, "grant = \"arguments\"\n"));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;
    let files = dir.path().join("files");
    std::fs::write(files.join("a.txt"), "A").unwrap();
    std::fs::write(files.join("b.txt"), "B").unwrap();

    let pending = call_in_background(&client, call("files__read_file", json!({"path": "a.txt"})));
    let id = served.nth_card_id("files__read_file", 1).await;
    served.type_line(&format!("/approve {id} always")).await;
    assert_eq!(text(&pending.await.unwrap()), "A");
    // The same arguments: granted. Others: asked again.
    let again = tokio::time::timeout(
        Duration::from_secs(15),
        client.call_tool(call("files__read_file", json!({"path": "a.txt"}))),
    )
    .await
    .expect("the same arguments are not asked again")
    .unwrap();
    assert_eq!(text(&again), "A");
    let other = call_in_background(&client, call("files__read_file", json!({"path": "b.txt"})));
    let id = served.nth_card_id("files__read_file", 2).await;
    served.type_line(&format!("/approve {id}")).await;
    assert_eq!(text(&other.await.unwrap()), "B");

    client.cancel().await.unwrap();
    served.terminate().await;
}

/// An agent that relists the tools each time it is told the list changed, keeping each list.
#[derive(Clone, Default)]
struct Relists(Arc<Mutex<Vec<Vec<String>>>>);

impl rmcp::ClientHandler for Relists {
    async fn on_tool_list_changed(&self, context: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        if let Ok(tools) = context.peer.list_all_tools().await {
            self.0.lock().unwrap().push(tools.into_iter().map(|t| t.name.to_string()).collect());
        }
    }
}

#[tokio::test]
async fn an_upstreams_tool_list_change_reaches_the_agent() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&gated_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let relists = Relists::default();
    let client = crate::mcp::client_with(&format!("{base}/mcp"), &token, relists.clone()).await;
    let names = ready(&client).await;
    assert!(!names.iter().any(|n| n == "files__echo"), "{names:?}");

    let grown = client.call_tool(call("files__grow", json!({}))).await.unwrap();
    assert_eq!(text(&grown), "echo is offered now");
    // Told, the agent relists and finds the upstream's new tool under its prefixed name.
    eventually(|| async {
        relists.0.lock().unwrap().iter().any(|l| l.iter().any(|n| n == "files__echo")).then_some(())
    })
    .await;
    let echoed = client.call_tool(call("files__echo", json!({"a": 1}))).await.unwrap();
    assert_eq!(text(&echoed), r#"{"a":1}"#);

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_call_cancelled_while_its_approval_waits_retracts_it() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&gated_config_with(dir.path(), r#"["wait"]"#, ""));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;
    // Cancelled while the approval waits: the question is cancelled and its card retracted.
    let pending = call_in_background(&client, call("files__wait", json!({"seconds": 60})));
    let id = served.nth_card_id("files__wait", 1).await;
    pending.abort();
    let line = served.stdout_line("cancelled (client)").await;
    assert!(line.starts_with(&format!("[{id}]")), "{line}");
    assert!(!dir.path().join("files").join("waiting").exists(), "the call never went upstream");

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_call_cancelled_after_approval_is_cancelled_upstream() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&gated_config_with(dir.path(), r#"["wait"]"#, ""));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;
    // Cancelled after approval: the upstream is told, and its call ends.
    let pending = call_in_background(&client, call("files__wait", json!({"seconds": 60})));
    let id = served.nth_card_id("files__wait", 1).await;
    served.type_line(&format!("/approve {id}")).await;
    upstream_saw(dir.path(), "waiting").await;
    pending.abort();
    upstream_saw(dir.path(), "cancelled").await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_hanging_upstream_call_is_cancelled_there_at_its_call_timeout() {
    let dir = TempDir::new().unwrap();
    let config = gated_config(dir.path(), "call_timeout = \"2s\"\n");
    let check = tokio::process::Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    let bounds = "a call fails after 2s (call_timeout) or with a result over 8.0 MB (max_result)";
    assert!(report.contains("upstream files: command `") && report.contains(bounds), "{report}");
    let served = Served::start(&config);
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;

    let failed =
        tokio::time::timeout(Duration::from_secs(60), client.call_tool(call("files__wait", json!({"seconds": 600}))))
            .await
            .expect("the call ends at its timeout")
            .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(
        text(&failed).contains("the upstream `files` did not answer within 2s; the call was cancelled there"),
        "{}",
        text(&failed)
    );
    upstream_saw(dir.path(), "cancelled").await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_stdio_result_over_max_result_is_a_clear_error_at_once_for_that_call_only() {
    let dir = TempDir::new().unwrap();
    // The defaults: 8 MB, and a call timeout of 10 minutes that this must not wait for.
    let served = Served::start(&gated_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    ready(&client).await;
    let pid_file = dir.path().join("files").join("files_server.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();

    // 20 MB: over rmcp's own 16 MiB line limit too, which would drop it without a word.
    let big = tokio::time::timeout(
        Duration::from_secs(60),
        client.call_tool(call("files__big", json!({"bytes": 20_000_000}))),
    )
    .await
    .expect("the call ends, long before its timeout")
    .unwrap();
    assert_eq!(big.is_error, Some(true));
    let said = text(&big);
    assert!(said.contains("the upstream `files` sent a result of 20.0 MB, over its limit of 8.0 MB"), "{said}");

    // The same upstream process goes on serving.
    std::fs::write(dir.path().join("files").join("after.txt"), "still here").unwrap();
    let read = client.call_tool(call("files__read_file", json!({"path": "after.txt"}))).await.unwrap();
    assert_eq!(text(&read), "still here");
    assert_eq!(std::fs::read_to_string(&pid_file).unwrap(), pid, "not restarted");

    client.cancel().await.unwrap();
    served.terminate().await;
}
