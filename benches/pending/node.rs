//! One askgate node of the benchmark: the release binary serving a config of its own, started,
//! stopped (SIGTERM), killed (SIGKILL) and started again on the same store, and the API calls
//! the benchmark makes of it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::served::{Start, cpu, launch, memory_mb};

/// The operator's token, given to every start (`ASKGATE_API_TOKEN`): the same across restarts
/// and on either store.
const OPERATOR: &str = "0123456789abcdef0123456789abcdef-pending";
/// The conversation every question is asked in: the console's, whose cards go to a stdout that
/// is dropped, so no slow channel holds them back; with `--channel-down`, a webhook endpoint's
/// that refuses every connection, so every card waits to be shown.
fn conversation() -> &'static str {
    if crate::channel_down() { "webhook:down:ops" } else { "console:local" }
}

/// A running askgate: its config, its process and its API.
pub struct Node {
    config: PathBuf,
    child: tokio::process::Child,
    pub api: Api,
}

/// Where askgate's API is and the agent's token: cloned into every worker.
#[derive(Clone)]
pub struct Api {
    base: String,
    /// An agent's token: it asks.
    agent: String,
    client: reqwest::Client,
}

/// What a timed API call gives back: how long it took and the JSON askgate answered with.
pub struct Call {
    pub took: Duration,
    pub body: Value,
}

impl Node {
    /// askgate on `config`, once `/healthz` answers 200, with an agent token made for it, and
    /// how long from spawning it to that 200.
    pub async fn start(config: PathBuf) -> (Self, Duration) {
        let (child, base, ready) = spawn(&config).await;
        let client = reqwest::Client::builder().pool_max_idle_per_host(512).build().unwrap();
        let mut api = Api { base, agent: String::new(), client };
        let made = api.post("/api/tokens", OPERATOR, json!({"name": "pending", "agent": true})).await;
        api.agent = made.body["token"].as_str().expect("the agent's token").to_owned();
        (Self { config, child, api }, ready)
    }

    /// Kills askgate with SIGKILL, as a crash or an OOM killer would.
    pub async fn kill(&mut self) {
        self.signal("KILL");
        let _ = self.child.wait().await;
    }

    /// Stops askgate with SIGTERM and waits for it to exit (its store stays).
    pub async fn stop(&mut self) {
        self.signal("TERM");
        let _ = tokio::time::timeout(Duration::from_secs(300), self.child.wait()).await;
    }

    /// Starts askgate on the same config after [`Node::kill`] or [`Node::stop`]: the time to ready.
    pub async fn start_again(&mut self) -> Duration {
        let (child, base, ready) = spawn(&self.config).await;
        (self.child, self.api.base) = (child, base);
        ready
    }

    fn signal(&self, name: &str) {
        let pid = self.pid().to_string();
        let _ = std::process::Command::new("kill").args([&format!("-{name}"), &pid]).status();
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("askgate runs")
    }

    /// askgate's user + system CPU time so far.
    pub fn cpu(&self) -> Duration {
        cpu(self.pid())
    }

    /// askgate's resident and peak resident memory, in MB.
    pub fn memory_mb(&self) -> (f64, f64) {
        memory_mb(self.pid())
    }
}

impl Api {
    /// How many questions are pending, as `/healthz` counts them. It shows a count up to two
    /// seconds old and, when its count is older, counts again in the background: so this waits
    /// the count out, has it counted again, and reads the new count once it is there.
    pub async fn pending(&self) -> u64 {
        let health = || async {
            let url = format!("{}/healthz", self.base);
            let health: Value = self.client.get(url).send().await.unwrap().json().await.unwrap();
            health["pending"].as_u64().expect("the store answers")
        };
        tokio::time::sleep(Duration::from_millis(2_100)).await;
        health().await;
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        health().await
    }

    /// `body` POSTed to `path` with `token`: the time it took and the JSON (any failure ends
    /// the run).
    async fn post(&self, path: &str, token: &str, body: Value) -> Call {
        let started = Instant::now();
        let response = self.client.post(format!("{}{path}", self.base)).bearer_auth(token).json(&body).send().await;
        let body = response.unwrap().error_for_status().unwrap().json().await.unwrap();
        Call { took: started.elapsed(), body }
    }

    /// An agent asks a yes/no question that waits `timeout` (`"never"` or seconds).
    pub async fn ask(&self, i: usize, timeout: Value) -> Call {
        let ask = json!({"conversation": conversation(), "kind": "confirm", "prompt": format!("Deploy {i}?"), "timeout": timeout});
        self.post("/api/questions", &self.agent, ask).await
    }

    /// An agent asks a question that never expires: its id once askgate acknowledged it (201),
    /// or an error when the call failed (askgate was killed under it).
    pub async fn try_ask(&self, i: usize) -> Result<String, reqwest::Error> {
        let ask = json!({"conversation": conversation(), "kind": "confirm", "prompt": format!("Deploy {i}?"), "timeout": "never"});
        let url = format!("{}/api/questions", self.base);
        let response = self.client.post(url).bearer_auth(&self.agent).json(&ask).send().await?;
        let asked: Value = response.error_for_status()?.json().await?;
        Ok(asked["id"].as_str().expect("an id").to_owned())
    }

    /// The operator answers question `id` yes.
    pub async fn answer(&self, id: &str) -> Call {
        self.post(&format!("/api/questions/{id}/reply"), OPERATOR, json!({"value": true})).await
    }

    /// Question `id` as the API shows it, or `None` when askgate does not know it.
    pub async fn question(&self, id: &str) -> Option<Value> {
        let url = format!("{}/api/questions/{id}", self.base);
        let response = self.client.get(url).bearer_auth(OPERATOR).send().await.unwrap();
        if response.status() == 404 {
            return None;
        }
        Some(response.error_for_status().unwrap().json().await.unwrap())
    }

    /// Every question in `status`, page by page.
    pub async fn listed(&self, status: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/api/questions?status={status}&limit=1000", self.base);
            if let Some(cursor) = &cursor {
                url.push_str(&format!("&cursor={cursor}"));
            }
            let response = self.client.get(url).bearer_auth(OPERATOR).send().await.unwrap();
            let page: Value = response.error_for_status().unwrap().json().await.unwrap();
            all.extend(page["questions"].as_array().cloned().unwrap_or_default());
            match page["next"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return all,
            }
        }
    }
}

/// askgate on `config`, pinned to CPU 0, and how long from spawning it to `/healthz` 200.
async fn spawn(config: &std::path::Path) -> (tokio::process::Child, String, Duration) {
    let started = Instant::now();
    let env = vec![("ASKGATE_API_TOKEN", OPERATOR.to_owned()), (crate::store::WEBHOOK_SECRET, "s3cret".to_owned())];
    let start = Start { env, cpu: Some(0), ..Start::default() };
    let (child, base) = launch(config, &start).await;
    let client = reqwest::Client::new();
    loop {
        let health = client.get(format!("{base}/healthz")).send().await;
        if health.is_ok_and(|r| r.status() == 200) {
            return (child, base, started.elapsed());
        }
        assert!(started.elapsed() < Duration::from_secs(600), "askgate became ready within 10 minutes");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `count` jobs `0..count` run by `in_flight` workers, each taking the next: what each gave, in
/// no particular order.
pub async fn many<T, F, Fut>(count: usize, in_flight: usize, job: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let (next, job) = (Arc::new(AtomicUsize::new(0)), Arc::new(job));
    let workers: Vec<_> = (0..in_flight)
        .map(|_| {
            let (next, job) = (next.clone(), job.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return done;
                    }
                    done.push(job(i).await);
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(count);
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    all
}
