//! `askgate mcp` when its input ends: every request read before the end is answered (also one
//! that waits for a person), then it exits 0.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binary::{BIN, Served, write_config};

const MCP: &str = "\n[mcp]\nconversation = \"console:local\"\n";

/// Starts the bridge to the askgate of `dir` at `base`, writes `messages` and ends its stdin.
fn bridge(dir: &std::path::Path, base: &str, messages: &[Value]) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(BIN)
        .args(["mcp", "--config"])
        .arg(dir.join("channels.toml"))
        .args(["--url", base])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
    tokio::spawn(async move {
        input.write_all(text.as_bytes()).await.unwrap();
        // Dropped here: the end of its input.
    });
    child
}

/// Waits for the bridge to exit; its status and what it wrote, one message a line.
async fn finished(mut child: tokio::process::Child) -> (std::process::ExitStatus, Vec<Value>) {
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let read = async {
        stdout.read_to_string(&mut out).await.unwrap();
        child.wait().await.unwrap()
    };
    let status =
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("the bridge exits once all is answered");
    (status, out.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

fn initialize() -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "eof", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

#[tokio::test]
async fn a_request_sent_just_before_the_end_of_stdin_is_answered_before_the_bridge_exits_0() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), MCP));
    let (base, _) = served.agent(dir.path()).await;

    // A quick request, several times over (the race lost answers one run in three).
    for _ in 0..5 {
        let [init, initialized] = initialize();
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let (status, out) = finished(bridge(dir.path(), &base, &[init, initialized, list])).await;
        assert!(status.success(), "{status}");
        let ids: Vec<&Value> = out.iter().map(|m| &m["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!(2)], "{out:?}");
        assert!(out[1]["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{out:?}");
    }

    // A call that waits for a person: answered after stdin ended, then the bridge exits.
    let [init, initialized] = initialize();
    let ask = json!({"jsonrpc": "2.0", "id": "last", "method": "tools/call",
        "params": {"name": "ask_user", "arguments": {"prompt": "Asked just before the end?"}}});
    let child = bridge(dir.path(), &base, &[init, initialized, ask]);
    let id = served.card_id("Asked just before the end?").await;
    served.type_line(&format!("/answer {id} yes")).await;
    let (status, out) = finished(child).await;
    assert!(status.success(), "{status}");
    let answer = out.iter().find(|m| m["id"] == "last").unwrap_or_else(|| panic!("no answer in {out:?}"));
    assert_eq!(answer["result"]["structuredContent"]["value"], "yes", "{answer}");
    served.terminate().await;
}
