//! Remote A2A agents as functions, through the real binary, against a remote agent on the
//! official JS SDK's server side (`a2a_remote/agent.mjs`, `@a2a-js/sdk` 1.3.0): `/run` on the
//! console sends the text, the task's `input-required` is a card, and the answer typed on the
//! console is the next message on the same task.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::binary::{Served, write_config};
use crate::tools::node_bin;

const AGENT: &str = include_str!("a2a_remote/agent.mjs");
const TOKEN: &str = "remote-agent-secret";

/// The agent, running under node, and the lines it printed (one JSON object each).
struct RemoteAgent {
    _child: tokio::process::Child,
    said: mpsc::UnboundedReceiver<Value>,
    url: String,
}

impl RemoteAgent {
    /// Starts the agent on loopback, cleaning `workdir`.
    async fn start(dir: &Path, workdir: &Path) -> Self {
        let program = node_bin("a2a-db").unwrap_or_else(|| {
            panic!("@a2a-js/sdk is missing: npm install --prefix ~/.cache/askgate-ci @a2a-js/sdk@1.3.0 express@5.3.0")
        });
        // `node_modules/.bin/a2a-db`
        let modules = program.parent().and_then(Path::parent).unwrap();
        std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
        std::fs::write(dir.join("package.json"), r#"{"type": "module", "private": true}"#).unwrap();
        std::fs::write(dir.join("agent.mjs"), AGENT).unwrap();
        let mut child = tokio::process::Command::new("node")
            .arg("agent.mjs")
            .arg(workdir)
            .arg(TOKEN)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let (tx, mut said) = mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(value);
                }
            }
        });
        let first = said.recv().await.expect("the agent says its port");
        let url = format!("http://127.0.0.1:{}", first["port"]);
        Self { _child: child, said, url }
    }

    /// The next line it printed.
    async fn next(&mut self) -> Value {
        let next = tokio::time::timeout(std::time::Duration::from_secs(30), self.said.recv());
        next.await.expect("the agent says something within 30 s").expect("the agent runs")
    }
}

async fn setup() -> (TempDir, RemoteAgent, PathBuf) {
    let dir = TempDir::new().unwrap();
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(workdir.join("build")).unwrap();
    std::fs::create_dir_all(dir.path().join("agent")).unwrap();
    let agent = RemoteAgent::start(&dir.path().join("agent"), &workdir).await;
    let extra =
        format!("\n[[functions]]\nname = \"cleaner\"\na2a = \"{}\"\ntoken_env = \"CLEANER_TOKEN\"\n", agent.url);
    let config = write_config(dir.path(), &extra);
    (dir, agent, config)
}

#[tokio::test]
#[cfg_attr(
    no_a2a_js_server,
    ignore = "needs node and the A2A JS SDK 1.3.0 with express 5.3.0: npm install --prefix ~/.cache/askgate-ci \
              @a2a-js/sdk@1.3.0 express@5.3.0 (or run .ci/run)"
)]
async fn a_remote_a2a_task_in_input_required_is_answered_by_a_person_on_the_same_task() {
    let (dir, mut agent, config) = setup().await;
    let mut served = Served::start_with_env(&config, &[("CLEANER_TOKEN", TOKEN)]);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up the repository").await;
    let first = agent.next().await;
    assert_eq!(first["text"], "tidy up the repository");
    let id = served.card_id("May I run rm -rf build?").await;
    served.type_line(&format!("/answer {id} yes")).await;
    let second = agent.next().await;
    assert_eq!(second["text"], "yes");
    assert_eq!(second["task"], first["task"], "the answer goes on the same task");
    assert_eq!(second["contextId"], first["contextId"]);
    served.stdout_line("Deleted build/.").await;
    assert!(!dir.path().join("work/build").exists(), "allowed: the folder is gone");
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_a2a_js_server,
    ignore = "needs node and the A2A JS SDK 1.3.0 with express 5.3.0: npm install --prefix ~/.cache/askgate-ci \
              @a2a-js/sdk@1.3.0 express@5.3.0 (or run .ci/run)"
)]
async fn a_remote_a2a_task_the_agent_rejects_fails_the_run_with_its_reason() {
    let (dir, mut agent, config) = setup().await;
    let mut served = Served::start_with_env(&config, &[("CLEANER_TOKEN", TOKEN)]);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up").await;
    let first = agent.next().await;
    let id = served.card_id("May I run rm -rf build?").await;
    served.type_line(&format!("/answer {id} no, the release needs it")).await;
    assert_eq!(agent.next().await["task"], first["task"]);
    let failed = served.stdout_line("Left build/ alone").await;
    assert!(failed.contains("rejected") && failed.contains("no, the release needs it"), "{failed}");
    assert!(dir.path().join("work/build").exists(), "denied: the folder is still there");
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_a2a_js_server,
    ignore = "needs node and the A2A JS SDK 1.3.0 with express 5.3.0: npm install --prefix ~/.cache/askgate-ci \
              @a2a-js/sdk@1.3.0 express@5.3.0 (or run .ci/run)"
)]
async fn a_remote_a2a_task_waits_across_a_restart_without_sending_again() {
    let (dir, mut agent, config) = setup().await;
    let env = [("CLEANER_TOKEN", TOKEN)];
    let mut served = Served::start_with_env(&config, &env);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up").await;
    let first = agent.next().await;
    let id = served.card_id("May I run rm -rf build?").await;
    assert_eq!(served.terminate().await.code(), Some(0));

    let mut served = Served::start_with_env(&config, &env);
    served.log_line("askgate is ready").await;
    served.type_line(&format!("/answer {id} yes")).await;
    // The replay read the waiting task back from the store: the next message the agent gets is
    // the answer, on the same task, not the first text again.
    let second = agent.next().await;
    assert_eq!((&second["text"], &second["task"]), (&Value::from("yes"), &first["task"]));
    served.stdout_line("Deleted build/.").await;
    assert!(!dir.path().join("work/build").exists());
    served.terminate().await;
}
