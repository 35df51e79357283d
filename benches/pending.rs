//! Pending approvals per node: what a million questions waiting costs askgate, against the
//! real (release) binary, on SQLite and on PostgreSQL. For each store it first times asks and
//! answers with 1,000 pending, then fills a fresh store with 1,000,000 questions that never
//! expire (through `POST /api/questions`, 64 in flight, with an agent's token, in the
//! console's conversation) and prints:
//!
//! - the fill's rate, askgate's memory after it, the write-ahead log's largest size meanwhile;
//! - bytes on disk per question after a clean stop (SQLite: the file and its log after a
//!   checkpoint, and `dbstat` by table and index; PostgreSQL: tables and indexes);
//! - start to ready after a restart (spawned → `/healthz` 200), memory then and 10 s later,
//!   and the CPU askgate spends idle;
//! - askgate's CPU per ask and per answer (over many) and their latency, one at a time and 16
//!   in flight, against the same with 1,000 pending;
//! - expiry punctuality: 10,000 questions set to expire within one minute, how late each was;
//! - the write-ahead log and the store after a day's worth of churn (ask + answer cycles);
//! - recovery after SIGKILL while asks are in flight: start to ready, and whether the pending
//!   count and every acknowledged ask survived.
//!
//! `cargo bench --bench pending` (`-- --quick` for 20,000 pending; `-- --pending N`, `--churn
//! N`; `-- --only sqlite` or `-- --only postgres`; `-- --channel-down` asks in a conversation
//! whose channel refuses every card, so every card waits). PostgreSQL at `ASKGATE_TEST_POSTGRES`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`), in a database of the benchmark's
//! own, dropped at the end. askgate runs pinned to CPU 0 (`taskset`), this process on the
//! others. `ASKGATE_BENCH_BIN` runs another askgate binary. Figures go to stdout, each section
//! with the machine's load when it began.

use std::sync::Arc;
use std::time::Duration;

#[path = "support/served.rs"]
mod served;

#[path = "pending/node.rs"]
mod node;
#[path = "pending/phases.rs"]
mod phases;
#[path = "pending/store.rs"]
mod store;

use node::Node;
use phases::{Cost, WalWatch};
use store::Store;

/// How big a run is.
struct Sizes {
    pending: usize,
    baseline: usize,
    ops: usize,
    expiring: usize,
    expiry_lead: Duration,
    churn: usize,
    crash_load: Duration,
}

impl Sizes {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| {
            args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(|v| v.parse().expect("a number"))
        };
        let quick = args.iter().any(|a| a == "--quick");
        let pending = value("--pending").unwrap_or(if quick { 20_000 } else { 1_000_000 });
        Self {
            pending,
            baseline: 1_000,
            ops: if quick { 500 } else { 2_000 },
            expiring: if quick { 1_000 } else { 10_000 },
            expiry_lead: Duration::from_secs(if quick { 20 } else { 60 }),
            churn: value("--churn").unwrap_or(if quick { 5_000 } else { 20_000 }),
            crash_load: Duration::from_secs(5),
        }
    }
}

/// Whether `--channel-down` asks every question where no card can be shown (a webhook
/// endpoint that refuses connections), so that the fill measures what cards waiting costs.
fn channel_down() -> bool {
    std::env::args().any(|a| a == "--channel-down")
}

/// The stores to measure on, as `--only` says (both unless it does).
fn stores() -> Vec<&'static str> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)) {
        Some(only) => vec![if only == "postgres" { "postgres" } else { "sqlite" }],
        None => vec!["sqlite", "postgres"],
    }
}

async fn fresh(kind: &str) -> Arc<Store> {
    Arc::new(match kind {
        "postgres" => {
            let admin = std::env::var("ASKGATE_TEST_POSTGRES")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
            Store::postgres(&admin).await
        }
        _ => Store::sqlite(),
    })
}

/// The machine: cores, memory, the temp directory's disk.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let df = std::process::Command::new("df").args(["-hT", &std::env::temp_dir().display().to_string()]).output();
    let disk =
        df.map(|o| String::from_utf8_lossy(&o.stdout).lines().nth(1).unwrap_or("").to_owned()).unwrap_or_default();
    let disk = disk.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    format!("{cores} cores, {:.1} GB memory, temp dir on {disk}", memory_kb / 1024.0 / 1024.0)
}

/// The load average over the last minute, five and fifteen.
fn load() -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!("load {}", loadavg.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn section(title: &str) {
    println!("\n-- {title} ({})", load());
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

/// Asks and answers one at a time and 16 in flight; the figures printed and returned.
async fn time_ops(node: &Node, count: usize, against: Option<&[(Cost, Cost)]>) -> Vec<(Cost, Cost)> {
    let mut levels = Vec::new();
    for (level, in_flight) in [1, 16].into_iter().enumerate() {
        let (asks, answers) = phases::asks_and_answers(node, count, in_flight).await;
        for (name, cost, was) in
            [("ask   ", &asks, against.map(|a| &a[level].0)), ("answer", &answers, against.map(|a| &a[level].1))]
        {
            let ratio = was.map_or(String::new(), |was| {
                format!(
                    ", {:.2}× the CPU with 1,000 pending",
                    cost.cpu_per_op.as_secs_f64() / was.cpu_per_op.as_secs_f64()
                )
            });
            println!(
                "  {name} {in_flight:>2} in flight: {:>5} µs askgate CPU each (over {count}), p50 {:.2} ms, p99 {:.2} ms{ratio}",
                cost.cpu_per_op.as_micros(),
                cost.latency.ms(0.5),
                cost.latency.ms(0.99)
            );
        }
        levels.push((asks, answers));
    }
    levels
}

/// The table and index sizes, the largest first.
fn print_disk(disk: &store::Disk, questions: u64) {
    println!(
        "  {:.1} MB on disk ({:.1} MB of it write-ahead log): {:.0} bytes per question",
        mb(disk.total),
        mb(disk.wal),
        disk.total as f64 / questions.max(1) as f64
    );
    // The parts of at least 1 % of the whole, then the rest together.
    let (large, small): (Vec<_>, Vec<_>) = disk.parts.iter().partition(|p| p.bytes * 100 >= disk.total);
    let rest = (format!("({} others)", small.len()), small.iter().map(|p| p.bytes).sum::<u64>());
    for (name, bytes) in large.iter().map(|p| (p.name.clone(), p.bytes)).chain([rest]) {
        println!("    {name:<36} {:>9.1} MB {:>6.0} B/question", mb(bytes), bytes as f64 / questions.max(1) as f64);
    }
}

/// With `--channel-down`: the fill and a restart, every card waiting to be shown (the
/// operator answers nowhere there, so nothing is answered).
async fn cards_waiting(kind: &str, label: &str, sizes: &Sizes) {
    section(&format!("{label}: filling with {} pending, no card shown", sizes.pending));
    let store = fresh(kind).await;
    let (mut node, _) = Node::start(store.config()).await;
    let took = phases::fill(&node.api, sizes.pending).await;
    let (rss, peak) = node.memory_mb();
    println!(
        "  asked {} in {:.0} s ({:.0} asks/s, 64 in flight); askgate resident {rss:.1} MB (peak {peak:.1} MB)",
        sizes.pending,
        took.as_secs_f64(),
        sizes.pending as f64 / took.as_secs_f64()
    );
    let pending = node.api.pending().await;
    node.stop().await;
    section(&format!("{label}: restart with {pending} pending, no card shown"));
    let ready = node.start_again().await;
    let cpu = node.cpu();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let busy = (node.cpu() - cpu).as_secs_f64() / 30.0 * 100.0;
    let (rss, peak) = node.memory_mb();
    println!(
        "  start to ready {:.0} ms; 30 s later resident {rss:.1} MB (peak {peak:.1} MB), {busy:.2} % of a core meanwhile",
        ready.as_secs_f64() * 1000.0
    );
    node.stop().await;
}

/// Every figure on one store.
async fn bench(kind: &str, sizes: &Sizes) {
    let label = if kind == "postgres" { "PostgreSQL" } else { "SQLite" };

    if channel_down() {
        return cards_waiting(kind, label, sizes).await;
    }
    section(&format!("{label}: asks and answers with {} pending", sizes.baseline));
    let baseline = {
        let store = fresh(kind).await;
        let (mut node, _) = Node::start(store.config()).await;
        phases::fill(&node.api, sizes.baseline).await;
        let levels = time_ops(&node, sizes.ops, None).await;
        node.stop().await;
        levels
    };

    section(&format!("{label}: filling with {} pending", sizes.pending));
    let store = fresh(kind).await;
    let (mut node, _) = Node::start(store.config()).await;
    let watch = WalWatch::start(&store).await;
    let took = phases::fill(&node.api, sizes.pending).await;
    let (wal_peak, _) = watch.stop().await;
    let (rss, peak) = node.memory_mb();
    println!(
        "  asked {} in {:.0} s ({:.0} asks/s, 64 in flight); askgate resident {rss:.1} MB (peak {peak:.1} MB); write-ahead log {} {:.1} MB",
        sizes.pending,
        took.as_secs_f64(),
        sizes.pending as f64 / took.as_secs_f64(),
        if kind == "postgres" { "written" } else { "at most" },
        mb(wal_peak)
    );
    let pending = node.api.pending().await;

    section(&format!("{label}: on disk with {pending} pending, askgate stopped"));
    node.stop().await;
    print_disk(&store.disk().await, pending);

    section(&format!("{label}: restart with {pending} pending"));
    let ready = node.start_again().await;
    let (at_ready, _) = node.memory_mb();
    let cpu = node.cpu();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (node.cpu() - cpu).as_secs_f64() / 10.0 * 100.0;
    println!(
        "  start to ready {:.0} ms; resident {at_ready:.1} MB at ready, {:.1} MB 10 s later; idle meanwhile {idle:.2} % of a core",
        ready.as_secs_f64() * 1000.0,
        node.memory_mb().0
    );

    section(&format!("{label}: asks and answers with {pending} pending"));
    time_ops(&node, sizes.ops, Some(baseline.as_slice())).await;

    section(&format!(
        "{label}: {} questions expiring within one minute, {pending} pending beside them",
        sizes.expiring
    ));
    let expiry = phases::expiry(&node.api, sizes.expiring, sizes.expiry_lead).await;
    println!(
        "  asked in {:.0} s; {} of {} expired; lateness p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        expiry.asking.as_secs_f64(),
        expiry.expired,
        expiry.asked,
        expiry.lateness.ms(0.5),
        expiry.lateness.ms(0.99),
        expiry.lateness.ms(1.0)
    );

    section(&format!("{label}: churn, {} ask + answer cycles with {pending} pending", sizes.churn));
    let churn = phases::churn(&node, &store, sizes.churn).await;
    println!(
        "  {} cycles in {:.0} s ({:.0}/s, 64 in flight); write-ahead log {}",
        churn.cycles,
        churn.took.as_secs_f64(),
        churn.cycles as f64 / churn.took.as_secs_f64(),
        if kind == "postgres" {
            format!("written {:.1} MB", mb(churn.wal_after))
        } else {
            format!("at most {:.1} MB, {:.1} MB at the end", mb(churn.wal_peak), mb(churn.wal_after))
        }
    );
    let after = node.api.pending().await;
    node.stop().await;
    print_disk(&store.disk().await, after);
    node.start_again().await;

    section(&format!("{label}: SIGKILL while asking, {pending} pending"));
    let crash = phases::crash(&mut node, sizes.crash_load).await;
    println!(
        "  {} asks acknowledged before the kill; start to ready {:.0} ms; pending {} before, {} after \
         (expected {} to {}); acknowledged asks lost: {}",
        crash.acknowledged,
        crash.ready.as_secs_f64() * 1000.0,
        crash.pending_before,
        crash.pending_after,
        crash.pending_before + crash.acknowledged as u64,
        crash.pending_before + crash.acknowledged as u64 + 64,
        crash.lost
    );
    node.stop().await;
}

fn main() {
    let sizes = Sizes::from_args();
    // Before the pinning, which would narrow the cores this process sees.
    let machine = machine();
    served::pin_client();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("askgate pending approvals per node (release binary, askgate on CPU 0)");
    println!("machine: {machine}; {}", load());
    for kind in stores() {
        runtime.block_on(bench(kind, &sizes));
    }
}
