//! A client of Codex's app-server (`codex app-server`: JSON-RPC 2.0 as one JSON object a line
//! on stdin and stdout, without the `jsonrpc` member), enough for a test to start a thread,
//! run a turn and see what the server asks of its client. Written from the app-server protocol
//! of Codex's source (`initialize`, `initialized`, `hooks/list`, `thread/start`, `turn/start`,
//! `turn/completed`, and server requests such as `item/commandExecution/requestApproval`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// A running app-server.
pub struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next: u64,
    /// The server's requests to its client seen so far (`method`s).
    asked: Vec<String>,
}

impl AppServer {
    /// Starts `codex app-server` with `home` as its home (and `CODEX_HOME`), `env` added, and
    /// nothing else of this machine's environment but the PATH; initialized.
    pub async fn start(codex: &Path, home: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(codex)
            .arg("app-server")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("CODEX_HOME", home)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Self { child, stdin, lines, next: 0, asked: Vec::new() };
        server.call("initialize", json!({"clientInfo": {"name": "askgate-tests", "version": "1"}})).await;
        server.send(json!({"method": "initialized"})).await;
        server
    }

    async fn send(&mut self, message: Value) {
        self.stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message from the server (two minutes at most).
    async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
            .await
            .expect("the app-server says something within two minutes")
            .unwrap()
            .expect("the app-server is still running");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message.get("id").is_some() && message.get("method").is_some() {
            self.asked.push(message["method"].as_str().unwrap_or_default().to_owned());
        }
        message
    }

    /// Calls `method` and returns its result; notifications meanwhile are passed over.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"method": method, "id": id, "params": params})).await;
        loop {
            let message = self.next_message().await;
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// Waits for the turn under way to complete, and returns it; a request of the server to its
    /// client meanwhile (an approval its hooks left undecided) fails the test.
    pub async fn turn_completed(&mut self) -> Value {
        loop {
            let message = self.next_message().await;
            assert!(!self.asked.iter().any(|m| !m.is_empty()), "Codex asked its client: {message}");
            if message["method"] == "turn/completed" {
                return message["params"]["turn"].clone();
            }
        }
    }

    /// Stops it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
