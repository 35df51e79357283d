//! askgate's benchmark: full follow-up cycles through the real engine and SQLite store,
//! compared with the raw sqlx ceiling measured in the same run, plus memory and start-up with
//! 100,000 pending questions, and resolve-to-resume latency.
//!
//! `cargo bench --bench cycles` (add `-- --quick` for a short run; to profile, `-- --single-only`
//! runs 5,000 one-conversation cycles alone and `-- --many-only` 64 × 200 concurrent ones).
//! With `ASKGATE_BENCH_POSTGRES=postgres://…` (a server where it may create databases) it
//! measures the same cycles on PostgreSQL instead, each beside the raw sqlx-postgres ceiling
//! measured just before it (the ceiling moves with the machine's load), and a
//! blocking ask held by one instance answered through another. Figures go to stdout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use askgate::clock::Clock;
use askgate::engine::{Access, ChannelPolicy, Context, Engine, Resolver, RunRequest, Settings};
use askgate::engine::{Channel, ChannelError};
use askgate::engine::{Function, FunctionError, Functions};
use askgate::question::{Ask, Conversation, Mode, Question, Surface, UserRef};
use askgate::store::{Delivery, PostgresStore, SqliteStore, Store, Synchronous};
use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::mpsc;

/// The allocator the `askgate` binary runs with (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What a conversation's driver hears back.
enum Signal {
    Card(Box<Question>),
    Resumed(Instant),
    Reply,
}

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Signal>>>>;

fn signal(routes: &Routes, conversation: &str, s: Signal) {
    if let Some(tx) = routes.lock().unwrap().get(conversation) {
        let _ = tx.send(s);
    }
}

/// A channel that hands cards and replies to the driver of their conversation. With `record`
/// it returns a card for each question, as every real channel does (a question without one
/// is shown again at the next start); the cycle figures leave it off, as they always did.
struct Wire {
    routes: Routes,
    record: bool,
}

#[async_trait]
impl Channel for Wire {
    fn name(&self) -> &'static str {
        "bench"
    }
    fn surface(&self) -> Surface {
        Surface::OTHER
    }
    async fn show_question(&self, q: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let conversation = q.conversation.as_ref().map(|c| c.to_string()).unwrap_or_default();
        signal(&self.routes, &conversation, Signal::Card(Box::new(q.clone())));
        Ok(if self.record {
            vec![Delivery::card(q.id, Surface::OTHER, conversation, q.id.short())]
        } else {
            Vec::new()
        })
    }
    async fn retract(&self, _: &Question, _: &[Delivery]) -> Result<(), ChannelError> {
        Ok(())
    }
    async fn send_text(&self, c: &Conversation, _: &str) -> Result<(), ChannelError> {
        signal(&self.routes, c.as_str(), Signal::Reply);
        Ok(())
    }
}

/// Asks one question; after the answer, tells the driver when it resumed.
struct OneAsk {
    routes: Routes,
}

#[async_trait]
impl Function for OneAsk {
    async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
        let answer = ctx.ask(Ask::question("Pick one").options(["a", "b"])).await?;
        let conversation = ctx.run().conversation.as_ref().map(|c| c.to_string()).unwrap_or_default();
        signal(&self.routes, &conversation, Signal::Resumed(Instant::now()));
        Ok(answer.text())
    }
}

async fn engine(db: &Path, routes: &Routes, sync: Synchronous, record: bool) -> Engine {
    let store = SqliteStore::open(db.to_str().unwrap(), sync).await.unwrap();
    engine_on(Arc::new(store), routes, record).await
}

async fn engine_on(store: Arc<dyn Store>, routes: &Routes, record: bool) -> Engine {
    let mut functions = Functions::new();
    functions.insert("one", "", Arc::new(OneAsk { routes: routes.clone() }));
    let mut settings = Settings::default();
    let anyone = ChannelPolicy { allowed_users: Access::Anyone, ..ChannelPolicy::default() };
    settings.channels.insert("bench".into(), anyone);
    let engine = Engine::new(store, functions, settings, Clock::system());
    engine.delivery().attach(Arc::new(Wire { routes: routes.clone(), record }));
    engine.start().await.unwrap();
    engine
}

/// One conversation's loop: `cycles` full follow-up cycles; returns resolve→resume latencies.
async fn drive(engine: Engine, routes: Routes, conversation: String, cycles: usize) -> Vec<Duration> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    routes.lock().unwrap().insert(conversation.clone(), tx);
    let user = UserRef::parse("bench:user").unwrap();
    let resolver = Resolver::person(user.clone(), Surface::API);
    let conv = Conversation::parse(&conversation).unwrap();
    let mut latencies = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        engine
            .runner()
            .start_run(RunRequest::new("one", Some(conv.clone()), user.clone()), Mode::FollowUp)
            .await
            .unwrap();
        let Some(Signal::Card(q)) = rx.recv().await else { panic!("expected a card") };
        let asked = Instant::now();
        engine.claims().resolve(&q, "1", &resolver).await.unwrap();
        let Some(Signal::Resumed(at)) = rx.recv().await else { panic!("expected a resume") };
        latencies.push(at - asked);
        let Some(Signal::Reply) = rx.recv().await else { panic!("expected a reply") };
    }
    latencies
}

/// Full cycles with `conversations` drivers at once; cycles per second and latencies.
async fn cycles(dir: &Path, conversations: usize, per_conversation: usize, sync: Synchronous) -> (f64, Vec<Duration>) {
    let db = dir.join(format!("cycles-{conversations}-{sync:?}.db"));
    let store = SqliteStore::open(db.to_str().unwrap(), sync).await.unwrap();
    cycles_on(Arc::new(store), conversations, per_conversation).await
}

/// The same on any store.
async fn cycles_on(store: Arc<dyn Store>, conversations: usize, per_conversation: usize) -> (f64, Vec<Duration>) {
    let routes: Routes = Arc::default();
    let engine = engine_on(store.clone(), &routes, false).await;
    let writes_before = store.write_stats();
    let started = Instant::now();
    let cpu_before = process_cpu_seconds();
    let drivers: Vec<_> = (0..conversations)
        .map(|i| tokio::spawn(drive(engine.clone(), routes.clone(), format!("bench:c{i}"), per_conversation)))
        .collect();
    let mut latencies = Vec::new();
    for d in drivers {
        latencies.extend(d.await.unwrap());
    }
    // The last writes (runs marked finished) are part of the work: shutdown drains them.
    engine.shutdown().await;
    let elapsed = started.elapsed();
    let cycles = (conversations * per_conversation) as f64;
    LAST_CPU_PER_CYCLE_US
        .store(((process_cpu_seconds() - cpu_before) / cycles * 1e6) as u64, std::sync::atomic::Ordering::SeqCst);
    let writes = store.write_stats();
    let (batches, written) = (writes.batches - writes_before.batches, writes.writes - writes_before.writes);
    if batches > 0 {
        LAST_WRITES.store(
            ((written as f64 / cycles * 100.0) as u64) << 32 | (written as f64 / batches as f64 * 100.0) as u64,
            std::sync::atomic::Ordering::SeqCst,
        );
    }
    (cycles / elapsed.as_secs_f64(), latencies)
}

/// The last `cycles` run's writes per cycle (high half) and per commit (low half), × 100.
static LAST_WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The last run's writes per cycle and per commit, as text.
fn last_writes() -> String {
    let w = LAST_WRITES.load(std::sync::atomic::Ordering::SeqCst);
    format!("{:.2} writes per cycle, {:.1} per commit", (w >> 32) as f64 / 100.0, (w & 0xffff_ffff) as f64 / 100.0)
}

/// The CPU time of the last `cycles` run, per cycle, in microseconds.
static LAST_CPU_PER_CYCLE_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// CPU time this process has used (user + system, every thread), from `/proc/self/stat`.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) start at state (field 3).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15: 12 and 13 after the state.
    (ticks(11) + ticks(12)) / 100.0
}

/// The raw sqlx ceiling: per cycle one INSERT and one conditional UPDATE, each its own
/// transaction, on one connection with the same pragmas.
async fn raw_ceiling(dir: &Path, n: usize) -> f64 {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.join("raw.db").display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .disable_statement_logging();
    let mut conn = options.connect().await.unwrap();
    sqlx::query(
        "CREATE TABLE q (id TEXT PRIMARY KEY NOT NULL, status TEXT NOT NULL, outcome TEXT, created_at INTEGER NOT NULL)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let started = Instant::now();
    for i in 0..n {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query("INSERT INTO q (id, status, created_at) VALUES (?, 'pending', ?)")
            .bind(&id)
            .bind(i as i64)
            .execute(&mut conn)
            .await
            .unwrap();
        let done = sqlx::query("UPDATE q SET status = 'answered', outcome = ? WHERE id = ? AND status = 'pending'")
            .bind("{\"status\":\"answered\",\"value\":\"a\"}")
            .bind(&id)
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    conn.close().await.unwrap();
    rate
}

/// Fills a database with `n` pending follow-up questions through the real engine.
async fn fill(db: &Path, n: usize) {
    let routes: Routes = Arc::default();
    let engine = engine(db, &routes, Synchronous::Normal, true).await;
    let user = UserRef::parse("bench:user").unwrap();
    let workers = 64;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let engine = engine.clone();
            let user = user.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(workers) {
                    let conv = Conversation::parse(&format!("bench:p{i}")).unwrap();
                    engine
                        .runner()
                        .start_run(RunRequest::new("one", Some(conv), user.clone()), Mode::FollowUp)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    // Every run ends its first turn with a pending question: wait until every run's is stored
    // (not the last run's alone: the others' first turns may still be running, and a shutdown
    // then would leave them to be replayed at the probe's start, after it counted).
    let want = u64::try_from(n).unwrap();
    while engine.records().pending_count().await.unwrap() < want {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    engine.shutdown().await;
}

fn rss_kb() -> u64 {
    status_kb("VmRSS:")
}

/// A memory figure of this process from `/proc/self/status`, in KiB.
fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Child process: start an engine on `db`, report time to ready and resident memory.
async fn startup_probe(db: &Path) {
    let routes: Routes = Arc::default();
    let started = Instant::now();
    let engine = engine(db, &routes, Synchronous::Normal, true).await;
    let ready = started.elapsed();
    // Let the sweeper and the pool settle, then measure.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_kb();
    let (anon, file) = (status_kb("RssAnon:"), status_kb("RssFile:") + status_kb("RssShmem:"));
    let pending = engine.records().pending_count().await.unwrap_or(0);
    println!("ready_ms={} rss_kb={rss} pending={pending} anon_kb={anon} file_kb={file}", ready.as_millis());
    engine.shutdown().await;
}

fn probe(db: &Path) -> (u64, u64, usize) {
    let out = Command::new(std::env::current_exe().unwrap()).arg("--probe").arg(db).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> u64 {
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("probe printed no {k}: {text}"))
    };
    (field("ready_ms="), field("rss_kb="), field("pending=") as usize)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // One case alone, to profile it.
    for (flag, conversations, per_conversation) in [("--single-only", 1, 5000), ("--many-only", 64, 200)] {
        if let Some(at) = args.iter().position(|a| a == flag) {
            // A count after the flag runs that many cycles per conversation instead.
            let per_conversation = args.get(at + 1).and_then(|n| n.parse().ok()).unwrap_or(per_conversation);
            let dir = tempfile::TempDir::new().unwrap();
            let (rate, _) = runtime.block_on(cycles(dir.path(), conversations, per_conversation, Synchronous::Normal));
            let cpu = LAST_CPU_PER_CYCLE_US.load(std::sync::atomic::Ordering::SeqCst);
            println!("{conversations} conversation(s): {rate:.0} cycles/s, {cpu} µs CPU per cycle; {}", last_writes());
            return;
        }
    }
    // `--fill DB N` leaves a database with N pending questions, to probe (or profile) a start.
    if let Some(i) = args.iter().position(|a| a == "--fill") {
        runtime.block_on(fill(&PathBuf::from(&args[i + 1]), args[i + 2].parse().unwrap()));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--probe") {
        runtime.block_on(startup_probe(&PathBuf::from(&args[i + 1])));
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    if let Ok(admin) = std::env::var("ASKGATE_BENCH_POSTGRES") {
        runtime.block_on(postgres::run(&admin, quick));
        return;
    }
    let (single, per_concurrent, raw_n, pending_n) =
        if quick { (500, 40, 2_000, 10_000) } else { (3_000, 200, 20_000, 100_000) };
    let dir = tempfile::TempDir::new().unwrap();
    println!("askgate benchmark (SQLite WAL, synchronous=NORMAL, temp dir, {} cores)", num_cpus());

    runtime.block_on(async {
        let raw = raw_ceiling(dir.path(), raw_n).await;
        println!("raw sqlx ceiling:            {raw:>9.0} cycles/s  (INSERT + conditional UPDATE, one tx each)");
        let (one, mut lat1) = cycles(dir.path(), 1, single, Synchronous::Normal).await;
        println!("engine, 1 conversation:      {one:>9.0} cycles/s  = {:>5.1}% of raw", 100.0 * one / raw);
        let (many, mut lat64) = cycles(dir.path(), 64, per_concurrent, Synchronous::Normal).await;
        println!("engine, 64 conversations:    {many:>9.0} cycles/s  = {:>5.1}% of raw", 100.0 * many / raw);
        println!(
            "CPU per cycle, 64 conversations: {} µs (process CPU / cycles); {}",
            LAST_CPU_PER_CYCLE_US.load(std::sync::atomic::Ordering::SeqCst),
            last_writes()
        );
        // What the durable setting costs: every commit waits for an fsync.
        let (one_full, _) = cycles(dir.path(), 1, single / 10, Synchronous::Full).await;
        let (many_full, _) = cycles(dir.path(), 64, per_concurrent, Synchronous::Full).await;
        println!(
            "with synchronous=FULL:       {one_full:>9.0} cycles/s (1 conversation), {many_full:.0} cycles/s (64)"
        );
        lat1.sort();
        lat64.sort();
        for (label, lat) in [("1 conversation", &lat1), ("64 conversations", &lat64)] {
            println!(
                "resolve -> resumed step, {label:<17} p50 {:>7.2} ms   p99 {:>7.2} ms",
                percentile(lat, 0.50).as_secs_f64() * 1e3,
                percentile(lat, 0.99).as_secs_f64() * 1e3
            );
        }
    });

    let empty = dir.path().join("empty.db");
    let full = dir.path().join("pending.db");
    let filling = Instant::now();
    runtime.block_on(fill(&full, pending_n));
    println!("stored {pending_n} pending follow-up questions in {:.1} s", filling.elapsed().as_secs_f64());
    let (_, idle_kb, _) = probe(&empty);
    let (ready_ms, loaded_kb, pending) = probe(&full);
    assert_eq!(pending, pending_n, "the probe did not see every pending question");
    println!("idle askgate (empty store):  {:>7.1} MB resident", idle_kb as f64 / 1024.0);
    println!(
        "with {pending} pending:      {:>7.1} MB resident, +{:.1} MB over idle; start to ready {ready_ms} ms",
        loaded_kb as f64 / 1024.0,
        loaded_kb.saturating_sub(idle_kb) as f64 / 1024.0
    );
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The PostgreSQL mode: each case on a database of its own, created and dropped here.
mod postgres {
    use super::*;

    /// A new database on the server at `admin`; its URL and name.
    async fn create(admin: &str) -> (String, String) {
        let name = format!("askgate_bench_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(admin).await.expect("PostgreSQL answers at ASKGATE_BENCH_POSTGRES");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
        let (base, query) = admin.split_once('?').map_or((admin, None), |(b, q)| (b, Some(q)));
        let server = base.rsplit_once('/').expect("the URL names a database").0;
        (format!("{server}/{name}{}", query.map_or_else(String::new, |q| format!("?{q}"))), name)
    }

    async fn drop(admin: &str, name: &str) {
        let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut conn)
            .await
            .unwrap();
    }

    /// The raw ceiling: per cycle one INSERT and one conditional UPDATE, each its own
    /// transaction, on one connection.
    async fn raw_ceiling(url: &str, n: usize) -> f64 {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(
            "CREATE TABLE q (id TEXT PRIMARY KEY, status TEXT NOT NULL, outcome TEXT, created_at BIGINT NOT NULL)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        let started = Instant::now();
        for i in 0..n {
            let id = uuid::Uuid::new_v4().to_string();
            sqlx::query("INSERT INTO q (id, status, created_at) VALUES ($1, 'pending', $2)")
                .bind(&id)
                .bind(i as i64)
                .execute(&mut conn)
                .await
                .unwrap();
            let done =
                sqlx::query("UPDATE q SET status = 'answered', outcome = $1 WHERE id = $2 AND status = 'pending'")
                    .bind("{\"status\":\"answered\",\"value\":\"a\"}")
                    .bind(&id)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            assert_eq!(done.rows_affected(), 1);
        }
        n as f64 / started.elapsed().as_secs_f64()
    }

    /// Blocking asks held by instance A, each answered through instance B: from B's resolve to
    /// A's function going on (B's commit, NOTIFY, A's read of the question, A's waiter).
    async fn across_instances(url: &str, n: usize) -> Vec<Duration> {
        let routes: Routes = Arc::default();
        let a = engine_on(Arc::new(PostgresStore::open(url).await.unwrap()), &routes, false).await;
        let b = engine_on(Arc::new(PostgresStore::open(url).await.unwrap()), &Arc::default(), false).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        routes.lock().unwrap().insert("bench:across".to_owned(), tx);
        let user = UserRef::parse("bench:user").unwrap();
        let resolver = Resolver::person(user.clone(), Surface::API);
        let conv = Conversation::parse("bench:across").unwrap();
        let mut latencies = Vec::with_capacity(n);
        for _ in 0..n {
            let held = a.clone();
            let request = RunRequest::new("one", Some(conv.clone()), user.clone());
            let run = tokio::spawn(async move { held.runner().run_to_end(request).await });
            let Some(Signal::Card(q)) = rx.recv().await else { panic!("expected a card") };
            let answered = Instant::now();
            b.claims().resolve(&q, "1", &resolver).await.unwrap();
            let Some(Signal::Resumed(at)) = rx.recv().await else { panic!("expected a resume") };
            latencies.push(at - answered);
            let Some(Signal::Reply) = rx.recv().await else { panic!("expected a reply") };
            run.await.unwrap().unwrap();
        }
        a.shutdown().await;
        b.shutdown().await;
        latencies
    }

    pub(super) async fn run(admin: &str, quick: bool) {
        let (single, per_concurrent, raw_n, across_n) =
            if quick { (300, 20, 1_000, 100) } else { (2_000, 100, 10_000, 1_000) };
        let version: String = {
            let mut conn =
                sqlx::PgConnection::connect(admin).await.expect("PostgreSQL answers at ASKGATE_BENCH_POSTGRES");
            sqlx::query_scalar("SHOW server_version").fetch_one(&mut conn).await.unwrap()
        };
        println!("askgate benchmark on PostgreSQL {version} ({} cores)", num_cpus());
        // The ceiling moves with the machine's load: it is measured before each case and the
        // case is compared with that measurement.
        let raw_now = async || {
            let (url, name) = create(admin).await;
            let raw = raw_ceiling(&url, raw_n).await;
            drop(admin, &name).await;
            println!("raw sqlx-postgres ceiling:   {raw:>9.0} cycles/s  (INSERT + conditional UPDATE, one tx each)");
            raw
        };
        // Alone, an instance announces nothing; with another instance listening, every ask and
        // claim is also a NOTIFY (which PostgreSQL serializes at commit).
        for (conversations, listening) in [(1, false), (64, false), (1, true), (64, true)] {
            let raw = raw_now().await;
            let per = if conversations == 1 { single } else { per_concurrent };
            let (url, name) = create(admin).await;
            let other = if listening { Some(PostgresStore::open(&url).await.unwrap()) } else { None };
            let store = Arc::new(PostgresStore::open(&url).await.unwrap());
            while listening && !store.hears_others() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let (rate, mut latencies) = cycles_on(store, conversations, per).await;
            if let Some(other) = other {
                other.close().await;
            }
            drop(admin, &name).await;
            latencies.sort();
            let cpu = LAST_CPU_PER_CYCLE_US.load(std::sync::atomic::Ordering::SeqCst);
            let with = if listening { "another instance listening" } else { "alone" };
            println!(
                "engine, {conversations:>2} conversation(s), {with:<26} {rate:>6.0} cycles/s = {:>5.1}% of raw; \
                 {cpu} µs askgate CPU per cycle; resolve -> resumed p50 {:.2} ms p99 {:.2} ms",
                100.0 * rate / raw,
                percentile(&latencies, 0.50).as_secs_f64() * 1e3,
                percentile(&latencies, 0.99).as_secs_f64() * 1e3
            );
        }
        let (url, name) = create(admin).await;
        let mut latencies = across_instances(&url, across_n).await;
        drop(admin, &name).await;
        latencies.sort();
        println!(
            "blocking ask on A answered through B -> A goes on: p50 {:.2} ms  p99 {:.2} ms  ({across_n} asks)",
            percentile(&latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3
        );
    }
}
