//! What the benchmark does to a node, each phase one function that returns its figures: fill
//! it, time asks and answers, expire many questions in one minute, churn it, kill it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::node::{Api, Node, many};
use crate::store::Store;

/// How many questions are in flight while the benchmark fills a node or churns it.
const FILL_IN_FLIGHT: usize = 64;

/// Asks `count` questions that never expire, `FILL_IN_FLIGHT` at a time: how long it took.
/// Progress goes to stderr every tenth.
pub async fn fill(api: &Api, count: usize) -> Duration {
    let started = Instant::now();
    let api = api.clone();
    many(count, FILL_IN_FLIGHT, move |i| {
        let api = api.clone();
        async move {
            api.ask(i, json!("never")).await;
            if count >= 10 && (i + 1) % (count / 10) == 0 {
                eprintln!("  asked {} of {count} ({:.0} s)", i + 1, started.elapsed().as_secs_f64());
            }
        }
    })
    .await;
    started.elapsed()
}

/// Latencies, sorted, and their percentiles.
pub struct Latencies(Vec<Duration>);

impl Latencies {
    fn new(mut all: Vec<Duration>) -> Self {
        all.sort();
        Self(all)
    }

    /// The `p`-th fraction (0.5: the median), in milliseconds.
    pub fn ms(&self, p: f64) -> f64 {
        let i = ((self.0.len().saturating_sub(1)) as f64 * p).round() as usize;
        self.0.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// The figures of one kind of call: askgate's CPU per call over all of them, and their latency.
pub struct Cost {
    pub cpu_per_op: Duration,
    pub latency: Latencies,
}

/// `count` asks, then an answer to each, `in_flight` at a time: the cost of each kind.
pub async fn asks_and_answers(node: &Node, count: usize, in_flight: usize) -> (Cost, Cost) {
    let per = |spent: Duration| spent / u32::try_from(count).unwrap();
    let api = node.api.clone();
    let before = node.cpu();
    let asked = many(count, in_flight, move |i| {
        let api = api.clone();
        async move {
            let call = api.ask(i, json!("never")).await;
            (call.took, call.body["id"].as_str().expect("an id").to_owned())
        }
    })
    .await;
    let ask_cpu = node.cpu() - before;
    let (took, ids): (Vec<_>, Vec<_>) = asked.into_iter().unzip();
    let asks = Cost { cpu_per_op: per(ask_cpu), latency: Latencies::new(took) };
    let (api, ids) = (node.api.clone(), Arc::new(ids));
    let before = node.cpu();
    let answered = many(count, in_flight, move |i| {
        let (api, ids) = (api.clone(), ids.clone());
        async move { api.answer(&ids[i]).await.took }
    })
    .await;
    let answers = Cost { cpu_per_op: per(node.cpu() - before), latency: Latencies::new(answered) };
    (asks, answers)
}

/// How late askgate expired questions: the lateness of each (resolved at − expires at).
pub struct Expiry {
    pub asked: usize,
    pub expired: usize,
    pub asking: Duration,
    pub lateness: Latencies,
}

/// `count` questions set to expire within one minute that starts `lead` from now (spread
/// evenly over its seconds), asked `FILL_IN_FLIGHT` at a time; then, once the minute is over,
/// when each expired as the API tells.
pub async fn expiry(api: &Api, count: usize, lead: Duration) -> Expiry {
    let minute = now_ms() + i64::try_from(lead.as_millis()).unwrap();
    let started = Instant::now();
    let asker = api.clone();
    let ids = many(count, FILL_IN_FLIGHT, move |i| {
        let api = asker.clone();
        async move {
            let at = minute + i64::try_from(i % 60).unwrap() * 1000;
            // Whole seconds, as the API takes them; at least one.
            let timeout = ((at - now_ms()) / 1000).max(1);
            api.ask(i, json!(timeout)).await.body["id"].as_str().expect("an id").to_owned()
        }
    })
    .await;
    let asking = started.elapsed();
    let over = minute + 60_000;
    tokio::time::sleep(Duration::from_millis(u64::try_from((over - now_ms()).max(0)).unwrap())).await;
    // All should have expired by now; the list is read until they have, for at most 5 minutes.
    let ids: std::collections::HashSet<String> = ids.into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let expired: Vec<Value> =
            api.listed("expired").await.into_iter().filter(|q| ids.contains(q["id"].as_str().unwrap_or(""))).collect();
        if expired.len() == ids.len() || Instant::now() > deadline {
            let late = expired
                .iter()
                .map(|q| {
                    let (resolved, expires) = (q["resolved_at"].as_i64().unwrap(), q["expires_at"].as_i64().unwrap());
                    Duration::from_millis(u64::try_from((resolved - expires).max(0)).unwrap())
                })
                .collect();
            return Expiry { asked: ids.len(), expired: expired.len(), asking, lateness: Latencies::new(late) };
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The store after a number of ask + answer cycles.
pub struct Churn {
    pub cycles: usize,
    pub took: Duration,
    /// The largest the write-ahead log was, sampled every 100 ms (SQLite: the `-wal` file), or
    /// on PostgreSQL what the server wrote to its log over the churn.
    pub wal_peak: u64,
    pub wal_after: u64,
}

/// `cycles` cycles of an ask and its answer, `FILL_IN_FLIGHT` at a time.
pub async fn churn(node: &Node, store: &Arc<Store>, cycles: usize) -> Churn {
    let watch = WalWatch::start(store).await;
    let started = Instant::now();
    let api = node.api.clone();
    many(cycles, FILL_IN_FLIGHT, move |i| {
        let api = api.clone();
        async move {
            let asked = api.ask(i, json!("never")).await;
            api.answer(asked.body["id"].as_str().expect("an id")).await;
        }
    })
    .await;
    let took = started.elapsed();
    let (wal_peak, wal_after) = watch.stop().await;
    Churn { cycles, took, wal_peak, wal_after }
}

/// The write-ahead log watched while something runs: on SQLite the `-wal` file's size every
/// 100 ms; on PostgreSQL the server's log position at the start and the end.
pub struct WalWatch {
    store: Arc<Store>,
    start: u64,
    peak: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    sampler: tokio::task::JoinHandle<()>,
}

impl WalWatch {
    pub async fn start(store: &Arc<Store>) -> Self {
        let (peak, done) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let sampler = {
            let (store, peak, done) = (store.clone(), peak.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) && matches!(*store, Store::Sqlite { .. }) {
                    peak.fetch_max(store.wal().await, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Self { store: store.clone(), start: store.wal().await, peak, done, sampler }
    }

    /// The largest the log was and its size at the end (SQLite), or on PostgreSQL what the
    /// server wrote to its log meanwhile (both).
    pub async fn stop(self) -> (u64, u64) {
        self.done.store(true, Ordering::Relaxed);
        self.sampler.await.unwrap();
        let end = self.store.wal().await;
        match *self.store {
            Store::Sqlite { .. } => (self.peak.load(Ordering::Relaxed).max(end), end),
            Store::Postgres { .. } => (end - self.start, end - self.start),
        }
    }
}

/// What a SIGKILL in the middle of asking cost.
pub struct Crash {
    pub acknowledged: usize,
    pub ready: Duration,
    pub pending_before: u64,
    pub pending_after: u64,
    /// Acknowledged asks that askgate did not know, or not as pending, after the restart.
    pub lost: usize,
}

/// Asks `FILL_IN_FLIGHT` at a time for `load`, kills askgate with SIGKILL while they are in
/// flight, starts it again and checks that every acknowledged ask is there and pending.
pub async fn crash(node: &mut Node, load: Duration) -> Crash {
    let pending_before = node.api.pending().await;
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let askers: Vec<_> = (0..FILL_IN_FLIGHT)
        .map(|w| {
            let (api, acknowledged) = (node.api.clone(), acknowledged.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let Ok(id) = api.try_ask(w * 1_000_000 + i).await else { return };
                    acknowledged.lock().unwrap().push(id);
                }
            })
        })
        .collect();
    tokio::time::sleep(load).await;
    node.kill().await;
    for asker in askers {
        asker.await.unwrap();
    }
    let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());
    let ready = node.start_again().await;
    let pending_after = node.api.pending().await;
    let (api, ids) = (node.api.clone(), Arc::new(acknowledged));
    let kept = {
        let ids = ids.clone();
        many(ids.len(), 16, move |i| {
            let (api, ids) = (api.clone(), ids.clone());
            async move { api.question(&ids[i]).await.is_some_and(|q| q["status"] == "pending") }
        })
        .await
    };
    let lost = kept.iter().filter(|kept| !**kept).count();
    Crash { acknowledged: ids.len(), ready, pending_before, pending_after, lost }
}

fn now_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}
