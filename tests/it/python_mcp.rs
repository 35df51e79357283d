//! The official Python MCP SDK (PyPI `mcp`, 2.3.0 in CI) against the real binary, in both
//! revisions: every result it reads is valid against the tool's own `outputSchema` (the SDK
//! checks, and raises when one is not), and a 2026-07-28 call its cancel scope ends is cancelled
//! once the reattach grace has passed.
//!
//! The SDK is not on a bare machine: these tests then report themselves ignored, with the
//! install command (build.rs sets `no_python_mcp`); under CI they always run.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::binary::{Served, write_config};
use crate::mcp::question_status;

const MCP: &str = "\n[mcp]\nconversation = \"console:local\"\n";

/// Every kind of ask, each with `wait: false` and `get_outcome` while it is pending, then the
/// same asks held until the test answers them, and `get_outcome` once they are answered.
const EVERY_KIND: &str = r#"
import asyncio, json, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, token, mode, tag = sys.argv[1:5]

def say(**fields):
    print(json.dumps(fields), flush=True)

ASKS = {
    "question": ("ask_user", {"prompt": f"Colour {tag}?", "options": ["red", "blue"]}),
    "several": ("ask_user", {"prompt": f"Several {tag}", "questions": [
        {"header": "size", "prompt": "Which size?", "options": ["S", "M"]},
        {"header": "note", "prompt": "Anything else?"}]}),
    "form": ("ask_user", {"prompt": f"Form {tag}", "schema": {"type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}}),
    "confirm": ("confirm", {"prompt": f"Confirm {tag}?"}),
    "approval": ("request_approval", {"action": f"deploy {tag}"}),
}

async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        ids = {}
        for kind, (tool, arguments) in ASKS.items():
            result = await client.call_tool(tool, {**arguments, "wait": False})
            ids[kind] = result.structured_content["id"]
            polled = await client.call_tool("get_outcome", {"id": ids[kind]})
            assert polled.structured_content["status"] == "pending", polled
        say(version=client.protocol_version, ids=ids)
        held = await asyncio.gather(*(client.call_tool(tool, args) for tool, args in ASKS.values()))
        for kind, result in zip(ASKS, held):
            polled = await client.call_tool("get_outcome", {"id": ids[kind]})
            say(kind=kind, held=result.structured_content, polled=polled.structured_content)

asyncio.run(main())
"#;

/// One 2026-07-28 call that its cancel scope ends after `after` seconds; the client then stays
/// until stdin closes.
const CANCELLED: &str = r#"
import asyncio, sys
import anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, token, prompt = sys.argv[1:4]

async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
        with anyio.move_on_after(3) as scope:
            await client.call_tool("ask_user", {"prompt": prompt})
        print("cancelled" if scope.cancelled_caught else "answered", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)

asyncio.run(main())
"#;

/// `python3` running `script` with `args`, its stdout read line by line.
fn python(
    dir: &std::path::Path,
    script: &str,
    args: &[&str],
) -> (tokio::process::Child, tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) {
    let path = dir.join("client.py");
    std::fs::write(&path, script).unwrap();
    let mut child = tokio::process::Command::new("python3")
        .arg(&path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

async fn line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    let next = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    next.expect("the Python client says something within 60 s").unwrap().expect("the Python client ended early")
}

#[tokio::test]
#[cfg_attr(
    no_python_mcp,
    ignore = "needs the Python MCP SDK 2.3.0 in python3: pip install mcp==2.3.0 (or run .ci/run)"
)]
async fn the_python_sdk_reads_every_kind_of_result_in_both_revisions() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), MCP));
    let (base, agent) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let http = reqwest::Client::new();
    for (mode, revision) in [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")] {
        let (mut child, mut lines) = python(dir.path(), EVERY_KIND, &[&format!("{base}/mcp"), &agent, mode, revision]);
        let asked: Value = serde_json::from_str(&line(&mut lines).await).unwrap();
        assert_eq!(asked["version"], revision);
        let answers = [
            ("question", json!("blue")),
            ("several", json!({"size": "M", "note": "thanks"})),
            ("form", json!({"name": "Ada", "age": 36})),
            ("confirm", json!(true)),
            ("approval", json!("once")),
        ];
        for (kind, value) in &answers {
            let id = asked["ids"][kind].as_str().unwrap();
            let reply = http
                .post(format!("{base}/api/questions/{id}/reply"))
                .bearer_auth(&operator)
                .json(&json!({"value": value}))
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 200, "{kind}: {}", reply.text().await.unwrap());
        }
        for (kind, value) in &answers {
            let said: Value = serde_json::from_str(&line(&mut lines).await).unwrap();
            assert_eq!(said["kind"], *kind, "{revision}: {said}");
            for result in [&said["held"], &said["polled"]] {
                assert_eq!(result["status"], "answered", "{revision} {kind}: {result}");
            }
            match *kind {
                "approval" => assert_eq!(said["held"]["decision"], "once", "{revision}: {said}"),
                _ => assert_eq!(said["held"]["value"], *value, "{revision} {kind}: {said}"),
            }
            assert_eq!(said["polled"]["value"], *value, "{revision} {kind}: {said}");
        }
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "{revision}: the SDK raised (see its stderr)");
    }
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_python_mcp,
    ignore = "needs the Python MCP SDK 2.3.0 in python3: pip install mcp==2.3.0 (or run .ci/run)"
)]
async fn a_2026_call_its_cancel_scope_ends_is_cancelled_once_the_grace_has_passed() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{MCP}reattach_grace = \"6s\"\n")));
    let (base, agent) = served.agent(dir.path()).await;
    let prompt = "Cancelled by its scope?";
    let (_child, mut lines) = python(dir.path(), CANCELLED, &[&format!("{base}/mcp"), &agent, prompt]);
    let id = served.card_id(prompt).await;
    assert_eq!(line(&mut lines).await, "cancelled");
    // Within the grace the same call could come back to it; none does.
    served.log_line("an MCP call went away; its question waits for it to come back").await;
    let cancelled = served.stdout_line(&format!("[{id}]")).await;
    assert!(cancelled.contains("cancelled (client gone)"), "{cancelled}");
    assert_eq!(question_status(&dir.path().join("askgate.db"), &id).await, "cancelled");
    served.terminate().await;
}
