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
//!
//! `cargo bench --bench api -- --waiting 10000,50000` measures waiting agents instead: in a
//! fresh askgate for each number, that many questions are asked and each outcome read once, then
//! each is long-polled (`GET …/outcome?wait=60`) on a connection of its own, from a raw socket
//! that holds its request open, 500 agents at a time a moment apart; askgate's resident memory
//! before and after, over the agents, is what each one waiting costs it (the kernel's buffers of
//! a socket are not in it). Then every question is answered
//! and each connection must bring its outcome. More connections than the source ports of one
//! address leave from 127.0.0.2, 127.0.0.3, …; both processes raise their open-files limit to
//! the hard limit, and a number of agents it cannot hold is said and skipped.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// Connections kept from one source address: fewer than its ephemeral ports (32,768–60,999 by
/// default).
const PER_SOURCE: usize = 20_000;

/// A long-poll of question `id` on a socket of its own (from the `source`th address), its
/// request sent; the response is read once the question is answered.
async fn long_poll(api: &Api, id: &str, source: usize) -> tokio::net::TcpStream {
    let server: std::net::SocketAddr = api.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1 + u8::try_from(source).unwrap()], 0))).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    let request = format!(
        "GET /api/questions/{id}/outcome?wait=60 HTTP/1.1\r\nhost: {server}\r\nauthorization: Bearer {}\r\n\
         connection: close\r\n\r\n",
        api.agent
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// `agents` waiting agents in a fresh askgate, which may open `open_files` files (the hard
/// limit: a process cannot raise its own beyond it): what each costs it.
async fn waiting(agents: usize, open_files: u64) {
    use futures_util::StreamExt;
    let dir = tempfile::TempDir::new().unwrap();
    // Room for every connection: askgate serves at most ¾ of its open files over HTTP.
    if u64::try_from(agents + 1_024).unwrap() > open_files / 4 * 3 {
        println!(
            "{agents:>6} agents waiting: not measured, more than ¾ of the {open_files} open files a process may have here"
        );
        return;
    }
    let env = vec![("ASKGATE_GATEWAY_MAX_CONNECTIONS", (agents + 1_024).to_string())];
    let served = serve(dir.path(), Start { cpu: Some(0), open_files: Some(open_files), env, ..Start::default() }).await;
    let pid = served.child.id().unwrap();
    let client = reqwest::Client::new();
    let made =
        posted(&client, &format!("{}/api/tokens", served.base), &served.token, json!({"name": "bench", "agent": true}))
            .await;
    let api = Api {
        base: served.base.clone(),
        operator: served.token.clone(),
        agent: made["token"].as_str().unwrap().to_owned(),
    };
    let ask = |i: usize| {
        let (client, api) = (client.clone(), api.clone());
        async move {
            let ask = json!({"conversation": "console:local", "kind": "confirm", "prompt": format!("Deploy {i}?")});
            let asked = posted(&client, &format!("{}/api/questions", api.base), &api.agent, ask).await;
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let ids: Vec<String> = futures_util::stream::iter(0..agents).map(ask).buffered(64).collect().await;
    // The first long-polls pay for what every later one shares (the route's first use).
    let warm: Vec<_> =
        futures_util::stream::iter(ids.iter().take(100)).map(|id| long_poll(&api, id, 0)).buffered(64).collect().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let asked = memory_mb(pid).0;
    let peek = |id: &String| {
        let (client, api) = (client.clone(), api.clone());
        let url = format!("{}/api/questions/{id}/outcome?wait=0", api.base);
        async move {
            let response = client.get(url).bearer_auth(&api.agent).send().await.unwrap();
            assert_eq!(response.status(), 202);
        }
    };
    // Every outcome read once first (`wait=0`): what a request takes and gives back along the
    // way (the allocator keeps it) is then in the figure before, and the difference is what the
    // waiting holds.
    futures_util::stream::iter(&ids).map(peek).buffer_unordered(64).collect::<Vec<()>>().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (before, cpu_before) = (memory_mb(pid).0, cpu(pid));
    println!("{agents:>6} questions asked: {asked:.1} MB resident; {before:.1} MB once each outcome was read");
    // 500 at a time, a moment apart, as agents arrive: not a burst whose reads queue up.
    let mut polls = Vec::with_capacity(agents);
    for batch in ids.iter().enumerate().skip(100).collect::<Vec<_>>().chunks(500) {
        let batch = batch.iter().map(|&(i, id)| long_poll(&api, id, i / PER_SOURCE));
        polls.extend(futures_util::stream::iter(batch).buffered(64).collect::<Vec<_>>().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (after, peak) = memory_mb(pid);
    let held = polls.len();
    println!(
        "{held:>6} agents waiting: {before:.1} → {after:.1} MB resident (peak {peak:.1} MB), {:.2} KiB each; \
         askgate's CPU {:.0} µs per long-poll begun",
        (after - before) * 1024.0 / held as f64,
        (cpu(pid) - cpu_before).as_secs_f64() * 1e6 / held as f64
    );
    // Every one of them was waiting: each answer reaches its connection.
    let reply = |id: &String| {
        let (client, api) = (client.clone(), api.clone());
        let url = format!("{}/api/questions/{id}/reply", api.base);
        async move {
            let response =
                client.post(url).bearer_auth(&api.operator).json(&json!({"value": true})).send().await.unwrap();
            assert!(response.status().is_success(), "the reply: {}", response.status());
        }
    };
    futures_util::stream::iter(&ids).map(reply).buffer_unordered(64).collect::<Vec<()>>().await;
    let read = |mut stream: tokio::net::TcpStream| async move {
        let mut response = String::new();
        tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut response)).await.unwrap().unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains("\"answered\""), "{response}");
    };
    let streams = warm.into_iter().chain(polls);
    futures_util::stream::iter(streams).map(read).buffer_unordered(256).collect::<Vec<()>>().await;
    println!("{agents:>6} agents each heard their answer");
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    served::pin_client();
    let waiting_for = std::env::args().skip_while(|a| a != "--waiting").nth(1);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if let Some(numbers) = waiting_for {
        let numbers: Vec<usize> = numbers.split(',').map(|n| n.parse().expect("--waiting N[,N…]")).collect();
        let limit = askgate::http::server::raise_open_files_limit().unwrap_or(1_024);
        println!(
            "askgate API benchmark: waiting agents (release binary, server on CPU 0; {limit} open files a process)"
        );
        for agents in numbers {
            runtime.block_on(waiting(agents, limit));
        }
        return;
    }
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
