//! Callers waiting on other questions: the CPU one answer costs, and how fast a waiting caller
//! hears its own answer, with none and with 10,000 callers waiting (`Asks::wait_outcome`, the
//! wait behind API long-polls, MCP calls held open and `get_outcome`), on a temp-dir SQLite file.
//!
//! `cargo bench --bench waiters` (add `-- --quick` for 2,000 waiting). Figures go to stdout:
//! CPU per answer (process user + system time over the answers and the second after them, from
//! `/proc/self/stat`), the
//! ratio to none waiting, answer → waiting call returned (p50/p99 over 200 answers), and
//! resident memory per waiting call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use askgate::clock::Clock;
use askgate::engine::{Access, ChannelPolicy, Engine, Functions, Resolver, Settings};
use askgate::engine::{Channel, ChannelError};
use askgate::question::{Answerers, Ask, Conversation, Question, Surface, UserRef};
use askgate::store::{Delivery, SqliteStore, Synchronous};
use async_trait::async_trait;

/// The allocator the `askgate` binary runs with (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A channel that shows nothing: the figures are the engine's and the store's.
struct Quiet;

#[async_trait]
impl Channel for Quiet {
    fn name(&self) -> &'static str {
        "bench"
    }
    fn surface(&self) -> Surface {
        Surface::OTHER
    }
    async fn show_question(&self, _: &Question) -> Result<Vec<Delivery>, ChannelError> {
        Ok(Vec::new())
    }
    async fn retract(&self, _: &Question, _: &[Delivery]) -> Result<(), ChannelError> {
        Ok(())
    }
    async fn send_text(&self, _: &Conversation, _: &str) -> Result<(), ChannelError> {
        Ok(())
    }
}

/// This process's user and system CPU time so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports them in USER_HZ, 100 a second on every common build.
    Duration::from_millis(ticks * 10)
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn engine(dir: &std::path::Path) -> Engine {
    let db = dir.join("askgate.db");
    let store = SqliteStore::open(db.to_str().unwrap(), Synchronous::Normal).await.unwrap();
    let mut settings = Settings::default();
    settings
        .channels
        .insert("bench".into(), ChannelPolicy { allowed_users: Access::Anyone, ..ChannelPolicy::default() });
    let engine = Engine::new(Arc::new(store), Functions::new(), settings, Clock::system());
    engine.delivery().attach(Arc::new(Quiet));
    engine.start().await.unwrap();
    engine
}

async fn ask(engine: &Engine, n: usize) -> Vec<Question> {
    let room = Conversation::parse("bench:room").unwrap();
    let user = UserRef::parse("bench:user").unwrap();
    let mut asked = Vec::with_capacity(n);
    for i in 0..n {
        let ask = Ask::question(format!("q{i}")).answerers(Answerers::Users { users: vec![user.clone()] });
        asked.push(engine.asks().ask_external(room.clone(), ask, UserRef::parse("api:bench").unwrap()).await.unwrap());
    }
    asked
}

struct Figures {
    cpu_per_answer: Duration,
    p50: Duration,
    p99: Duration,
    kb_per_waiter: f64,
}

/// `waiting` callers wait on questions of their own (each waiting again whenever a wait returns
/// with its question still pending, as an MCP call held open does); `answers` other questions
/// are answered one after another (the CPU they cost), then 200 of the waited-on ones (how fast
/// each waiter hears).
async fn measure(waiting: usize, answers: usize) -> Figures {
    let dir = tempfile::TempDir::new().unwrap();
    let engine = engine(dir.path()).await;
    let resolver = Resolver::person(UserRef::parse("bench:user").unwrap(), Surface::API);
    let answered = ask(&engine, answers).await;
    let waited = ask(&engine, waiting).await;
    let before = rss_kb();
    let mut returned = std::collections::HashMap::new();
    for q in &waited {
        let (engine, id) = (engine.clone(), q.id);
        let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
        tokio::spawn(async move {
            // As an MCP call held open (or a client polling again) does: wait until it ends.
            while let Ok(Some(q)) = engine.asks().wait_outcome(id, Duration::from_secs(600)).await {
                if !q.is_pending() {
                    break;
                }
            }
            let _ = tx.send(Instant::now());
        });
        returned.insert(id, rx);
    }
    // Every waiter has read its question and is waiting.
    tokio::time::sleep(Duration::from_millis(500 + waiting as u64 / 10)).await;
    let kb_per_waiter = if waiting == 0 { 0.0 } else { (rss_kb().saturating_sub(before)) as f64 / waiting as f64 };
    let started = cpu();
    for q in &answered {
        engine.claims().resolve(q, "yes", &resolver).await.unwrap();
    }
    // What the answers woke runs on other threads, also after the last answer: counted too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_per_answer = (cpu() - started) / u32::try_from(answers).unwrap();
    let mut latencies = Vec::new();
    for q in waited.iter().take(200) {
        let rx: tokio::sync::oneshot::Receiver<Instant> = returned.remove(&q.id).unwrap();
        let at = Instant::now();
        engine.claims().resolve(q, "yes", &resolver).await.unwrap();
        latencies.push(rx.await.unwrap() - at);
    }
    latencies.sort();
    let pick = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).copied().unwrap_or_default();
    let figures = Figures { cpu_per_answer, p50: pick(0.5), p99: pick(0.99), kb_per_waiter };
    engine.shutdown().await;
    drop(returned);
    figures
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let waiting = if quick { 2_000 } else { 10_000 };
    let answers = 2_000;
    let none = measure(0, answers).await;
    println!("no callers waiting: CPU per answer {} µs", none.cpu_per_answer.as_micros());
    let many = measure(waiting, answers).await;
    let ratio = many.cpu_per_answer.as_secs_f64() / none.cpu_per_answer.as_secs_f64().max(1e-9);
    println!(
        "{waiting} callers waiting on other questions: CPU per answer {} µs ({ratio:.2}× none); \
         answer → waiting call returned p50 {:.2} ms, p99 {:.2} ms; {:.1} KB resident per waiting call",
        many.cpu_per_answer.as_micros(),
        many.p50.as_secs_f64() * 1000.0,
        many.p99.as_secs_f64() * 1000.0,
        many.kb_per_waiter
    );
}
