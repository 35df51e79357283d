//! Several `askgate serve` processes on one PostgreSQL database (a database of the test's own):
//! a run started through one instance and answered through another finishes; a blocking ask
//! held by one is answered through another; one instance's event stream carries what the
//! others did; an instance killed between ask and answer loses nothing.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::backend::TestDatabase;
use crate::binary::{Served, write_config_on};
use crate::support::eventually;

const TOKEN: &str = "0123456789abcdef0123456789abcdef-instances";

/// An instance: its own directory and config, the shared database, the shared API token.
struct Instance {
    served: Served,
    base: String,
    config: PathBuf,
    _dir: TempDir,
}

impl Instance {
    async fn start(database: &TestDatabase) -> Self {
        let dir = TempDir::new().unwrap();
        let config: PathBuf = write_config_on(dir.path(), &database.url, "");
        let served = Served::start_with_env(&config, &[("ASKGATE_API_TOKEN", TOKEN)]);
        let line = served.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        Self { served, base, config, _dir: dir }
    }

    async fn get(&self, path: &str) -> Value {
        let r = reqwest::Client::new().get(format!("{}{path}", self.base)).bearer_auth(TOKEN).send().await.unwrap();
        r.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> (reqwest::StatusCode, Value) {
        let r = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status(), r.json().await.unwrap_or(Value::Null))
    }

    /// The id of the pending question with this prompt (the database is shared: any instance
    /// lists every instance's questions).
    async fn pending(&self, prompt: &str) -> String {
        eventually(|| async {
            let page = self.get("/api/questions?status=pending").await;
            let found =
                page["questions"].as_array()?.iter().find(|q| q["prompt"] == prompt)?["id"].as_str()?.to_owned();
            Some(found)
        })
        .await
    }
}

/// The event names and question ids a stream sends, collected in the background.
fn stream(instance: &Instance) -> std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>> {
    use futures_util::StreamExt;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (url, into) = (format!("{}/api/events", instance.base), seen.clone());
    tokio::spawn(async move {
        let response = reqwest::Client::new().get(url).bearer_auth(TOKEN).send().await.unwrap();
        let mut body = response.bytes_stream();
        let (mut buffer, mut event) = (String::new(), String::new());
        while let Some(Ok(chunk)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find('\n') {
                let line: String = buffer.drain(..=end).collect();
                if let Some(name) = line.trim().strip_prefix("event:") {
                    event = name.trim().to_owned();
                } else if let Some(data) = line.trim().strip_prefix("data:") {
                    let id = serde_json::from_str::<Value>(data.trim())
                        .ok()
                        .and_then(|v| v["id"].as_str().map(str::to_owned));
                    into.lock().unwrap().push((event.clone(), id.unwrap_or_default()));
                }
            }
        }
    });
    seen
}

async fn saw(events: &std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>, name: &str, id: &str) {
    eventually(|| async { events.lock().unwrap().iter().any(|(n, i)| n == name && i == id).then_some(()) }).await;
}

#[tokio::test]
async fn a_run_started_through_one_instance_is_answered_through_another_and_every_stream_sees_it() {
    let database = TestDatabase::create().await;
    let (a, b, c) =
        (Instance::start(&database).await, Instance::start(&database).await, Instance::start(&database).await);
    let config_of_a = a.config.clone();
    let events = stream(&c);
    // The stream is open once its first comment or event arrives; give it the ask to carry.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, started) = a.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{started}");
    let run = started["id"].as_str().unwrap().to_owned();
    let first = b.pending("Which library for date formatting?").await;
    saw(&events, "question.asked", &first).await;
    let (status, receipt) = b.post(&format!("/api/questions/{first}/reply"), json!({"value": "dayjs"})).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{receipt}");
    saw(&events, "question.replied", &first).await;

    // B's claim won, so B resumed the run and asked the next question; A answers that one.
    let second = a.pending("Archive all 87 emails?").await;
    let (status, receipt) = a.post(&format!("/api/questions/{second}/reply"), json!({"value": true})).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{receipt}");
    let done = eventually(|| async {
        let run = c.get(&format!("/api/runs/{run}")).await;
        (run["run"]["status"] == "finished").then_some(run)
    })
    .await;
    assert_eq!(done["run"]["result"], "Using dayjs for dates; archived 87 emails.");
    // The loser of a race on another instance gets the winner's receipt.
    let (status, late) = c.post(&format!("/api/questions/{first}/reply"), json!({"value": "luxon"})).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{late}");

    // Each instance names itself in /healthz; `check` lists all three, alive.
    let health: Value = reqwest::get(format!("{}/healthz", a.base)).await.unwrap().json().await.unwrap();
    let me = health["instance"].as_str().expect("an instance id").to_owned();
    let check = tokio::process::Command::new(crate::binary::BIN).args(["check", "--config"]).arg(&a.config).output();
    let report = String::from_utf8_lossy(&check.await.unwrap().stdout).into_owned();
    assert_eq!(report.matches(", alive)").count(), 3, "{report}");
    assert!(report.contains(&format!("  {me} (last heartbeat")), "{report}");

    let mut kept = Vec::new();
    for Instance { served, _dir: dir, .. } in [a, b, c] {
        assert_eq!(served.terminate().await.code(), Some(0));
        kept.push(dir);
    }
    // Signed off: nothing is left running.
    let check = tokio::process::Command::new(crate::binary::BIN).args(["check", "--config"]).arg(&config_of_a).output();
    let report = String::from_utf8_lossy(&check.await.unwrap().stdout).into_owned();
    assert!(report.contains("instances: none running"), "{report}");
}

#[tokio::test]
async fn a_blocking_ask_held_by_one_instance_is_answered_through_another() {
    let database = TestDatabase::create().await;
    let (a, b) = (Instance::start(&database).await, Instance::start(&database).await);
    let base = a.base.clone();
    let caller = tokio::spawn(async move {
        let r = reqwest::Client::new()
            .post(format!("{base}/api/runs"))
            .bearer_auth(TOKEN)
            .json(&json!({"function": "demo", "conversation": "console:local", "wait": true}))
            .send()
            .await
            .unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    });
    let first = b.pending("Which library for date formatting?").await;
    b.post(&format!("/api/questions/{first}/reply"), json!({"value": "luxon"})).await;
    // A's run heard the answer and went on to its next question, still held by A.
    let second = b.pending("Archive all 87 emails?").await;
    b.post(&format!("/api/questions/{second}/reply"), json!({"value": false})).await;
    let (status, run) =
        tokio::time::timeout(Duration::from_secs(30), caller).await.expect("A's caller is answered").unwrap();
    assert_eq!(status, reqwest::StatusCode::OK, "{run}");
    assert_eq!(run["run"]["status"], "finished", "{run}");
    assert_eq!(run["run"]["result"], "Using luxon for dates; left the 87 emails where they are.");
    for instance in [a, b] {
        assert_eq!(instance.served.terminate().await.code(), Some(0));
    }
}

#[tokio::test]
async fn an_instance_killed_between_ask_and_answer_loses_nothing() {
    let database = TestDatabase::create().await;
    let (mut a, b) = (Instance::start(&database).await, Instance::start(&database).await);
    let (_, started) = a.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    let run = started["id"].as_str().unwrap().to_owned();
    let first = b.pending("Which library for date formatting?").await;
    a.served.child.kill().await.unwrap();
    b.post(&format!("/api/questions/{first}/reply"), json!({"value": "date-fns"})).await;
    let second = b.pending("Archive all 87 emails?").await;
    b.post(&format!("/api/questions/{second}/reply"), json!({"value": true})).await;
    let done = eventually(|| async {
        let run = b.get(&format!("/api/runs/{run}")).await;
        (run["run"]["status"] == "finished").then_some(run)
    })
    .await;
    assert_eq!(done["run"]["result"], "Using date-fns for dates; archived 87 emails.");
    assert_eq!(b.served.terminate().await.code(), Some(0));
}
