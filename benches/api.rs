//! An agent's question cycle over HTTP, against the real (release) binary, the way an agent
//! integration does it: `POST /api/questions` with an agent's token, a long-poll `GET
//! /api/questions/{id}/outcome?wait=30` held open, a person's answer through `POST
//! /api/questions/{id}/reply` with the operator's token, and the long-poll returning with the
//! outcome. One cycle at a time, then 16, 64 and 256 in flight.
//!
//! `cargo bench --bench api` (add `-- --quick` for fewer cycles). askgate runs pinned to CPU 0
//! (`taskset`), this process on the others, so the server's CPU is its own. Figures go to
//! stdout, for each level: cycles/s, the server's CPU per cycle (its user + system time over the
//! cycles), p50/p99 answer → outcome (from sending the answer to the long-poll's return), and the
//! server's resident memory. Then the server's CPU over 10 idle seconds with the questions
//! pending. `ASKGATE_BENCH_BIN` runs another askgate binary (an earlier build, to compare).
//! Traffic stays on 127.0.0.1.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/served.rs"]
mod served;
use served::{Served, Start, cpu, memory_mb, serve};

/// Where the API is, and the two tokens a cycle uses.
#[derive(Clone)]
struct Api {
    base: String,
    /// The operator's: a person's answer.
    operator: String,
    /// An agent's: it asks and reads the outcome.
    agent: String,
}

/// `body` POSTed to `url` with `token`: the JSON askgate answered with (any failure ends the run).
async fn posted(client: &reqwest::Client, url: &str, token: &str, body: Value) -> Value {
    let response = client.post(url).bearer_auth(token).json(&body).send().await.unwrap();
    response.error_for_status().unwrap().json().await.unwrap()
}

/// One cycle: ask, hold the long-poll open, answer, hear the outcome. Returns answer → outcome.
async fn cycle(client: &reqwest::Client, api: &Api, i: usize) -> Duration {
    let (base, agent) = (&api.base, &api.agent);
    let ask = json!({"conversation": "console:local", "kind": "confirm", "prompt": format!("Deploy {i}?")});
    let asked = posted(client, &format!("{base}/api/questions"), agent, ask).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    let poll = {
        let (client, url, agent) =
            (client.clone(), format!("{base}/api/questions/{id}/outcome?wait=30"), agent.to_owned());
        tokio::spawn(async move {
            let response = client.get(url).bearer_auth(agent).send().await.unwrap();
            assert_eq!(response.status(), 200, "the outcome came within the wait");
            Instant::now()
        })
    };
    // The long-poll's request goes out before the answer's, as an agent's would.
    tokio::task::yield_now().await;
    let answered = Instant::now();
    client
        .post(format!("{base}/api/questions/{id}/reply"))
        .bearer_auth(&api.operator)
        .json(&json!({"value": true}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    poll.await.unwrap().saturating_duration_since(answered)
}

struct Level {
    cycles_per_s: f64,
    cpu_per_cycle: Duration,
    p50: Duration,
    p99: Duration,
    rss_mb: f64,
}

/// `in_flight` agents each doing `each` cycles one after another.
async fn level(served: &Served, api: &Api, in_flight: usize, each: usize) -> Level {
    let pid = served.child.id().unwrap();
    let client = reqwest::Client::builder().pool_max_idle_per_host(in_flight * 2 + 4).build().unwrap();
    let (started, cpu_before) = (Instant::now(), cpu(pid));
    let agents: Vec<_> = (0..in_flight)
        .map(|a| {
            let (client, api) = (client.clone(), api.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(each);
                for i in 0..each {
                    latencies.push(cycle(&client, &api, a * each + i).await);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for agent in agents {
        latencies.extend(agent.await.unwrap());
    }
    let (elapsed, spent) = (started.elapsed(), cpu(pid) - cpu_before);
    latencies.sort();
    let pick = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    let cycles = in_flight * each;
    Level {
        cycles_per_s: cycles as f64 / elapsed.as_secs_f64(),
        cpu_per_cycle: spent / u32::try_from(cycles).unwrap(),
        p50: pick(0.5),
        p99: pick(0.99),
        rss_mb: memory_mb(pid).0,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    served::pin_client();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::TempDir::new().unwrap();
        let served = serve(dir.path(), Start { cpu: Some(0), ..Start::default() }).await;
        let client = reqwest::Client::new();
        let url = format!("{}/api/tokens", served.base);
        let made = posted(&client, &url, &served.token, json!({"name": "bench", "agent": true})).await;
        let agent = made["token"].as_str().expect("the agent's token").to_owned();
        let api = Api { base: served.base.clone(), operator: served.token.clone(), agent };
        println!("askgate API benchmark: ask, long-poll, answer, outcome (release binary, server on CPU 0)");
        // A first round warms the connections, the database file and the caches.
        level(&served, &api, 16, if quick { 10 } else { 50 }).await;
        let total = if quick { 1_000 } else { 5_000 };
        for in_flight in [1, 16, 64, 256] {
            let each = (total / in_flight).max(if quick { 2 } else { 10 });
            let figures = level(&served, &api, in_flight, each).await;
            println!(
                "{in_flight:>3} in flight: {:>6.0} cycles/s, {:>5} µs server CPU per cycle, answer → outcome p50 {:.2} ms, p99 {:.2} ms, {:.1} MB resident",
                figures.cycles_per_s,
                figures.cpu_per_cycle.as_micros(),
                figures.p50.as_secs_f64() * 1000.0,
                figures.p99.as_secs_f64() * 1000.0,
                figures.rss_mb
            );
        }
        let pid = served.child.id().unwrap();
        let before = cpu(pid);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = (cpu(pid) - before).as_secs_f64() / 10.0 * 100.0;
        println!("idle for 10 s: {idle:.2} % of a core");
    });
}
