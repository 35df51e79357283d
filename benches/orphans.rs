//! Orphaned mid-turn runs on PostgreSQL, against the real (release) binary: three `askgate
//! serve` processes share a fresh database of the benchmark's own; runs of a process function
//! whose every turn works ~3 s cycle through ask → answer → turn; every 4–6 s one instance is
//! SIGKILLed (round robin) and started again. For every run its killed owner was in the middle
//! of, the benchmark records from the database which instance took it over and how long after
//! the kill, and when the program's turn began again there; then prints p50/p90/max and the
//! takeover chains (a run taken over, then orphaned again by a later kill).
//!
//! `cargo bench --bench orphans` (`-- --kills N`, default 30; `-- --quick` for 10). PostgreSQL
//! at `ASKGATE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/postgres`); the
//! database it creates there is dropped at the end. `ASKGATE_BENCH_BIN=<path>` measures another
//! build of askgate (an earlier one, to compare in one sitting). Figures go to stdout.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sqlx::{ConnectOptions, Connection};

#[path = "support/served.rs"]
mod served;

const TOKEN: &str = "0123456789abcdef0123456789abcdef-orphans";
const INSTANCES: usize = 3;
const RUNS: usize = 6;
const KILL_EVERY: Duration = Duration::from_secs(5);

/// A follow-up program that never ends: each turn replays the answered steps, works ~3 s on
/// the first step it has not finished (a marker per step, written only while its askgate
/// lives, so an interrupted step is worked again), and asks the next step. Each step's work
/// is logged as `<run> <step> <epoch ms> <askgate pid>`.
const PROGRAM: &str = r#"read -r start
run=$(printf '%s\n' "$start" | sed 's/.*"run":"\([^"]*\)".*/\1/')
i=0
while :; do
  printf '{"type":"confirm","prompt":"Step %s?","default":false}\n' "$i"
  read -r outcome || exit 0
  case "$outcome" in *'"status":"pending"'*) exit 0 ;; esac
  if [ ! -e "$1/$run.$i" ]; then
    echo "$run $i $(date +%s%3N) $PPID" >> "$1/turns"
    sleep 3
    kill -0 "$PPID" 2>/dev/null && : > "$1/$run.$i"
  fi
  i=$((i+1))
done
"#;

fn admin_url() -> String {
    std::env::var("ASKGATE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

async fn admin() -> sqlx::PgConnection {
    let options: sqlx::postgres::PgConnectOptions = admin_url().parse().expect("a PostgreSQL URL");
    options.disable_statement_logging().connect().await.expect("PostgreSQL answers")
}

/// A database of the benchmark's own, dropped when this is.
struct Database {
    url: String,
    name: String,
}

impl Database {
    async fn create() -> Self {
        let name = format!("askgate_orphans_{}", uuid::Uuid::new_v4().simple());
        let mut connection = admin().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut connection).await.unwrap();
        let _ = connection.close().await;
        let admin = admin_url();
        let (base, query) = admin.split_once('?').map_or((admin.as_str(), None), |(b, q)| (b, Some(q)));
        let (server, _) = base.rsplit_once('/').expect("the URL names a database");
        let query = query.map_or_else(String::new, |q| format!("?{q}"));
        Self { url: format!("{server}/{name}{query}"), name }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let name = self.name.clone();
        // On a thread of its own: the benchmark's runtime may be the one that is ending.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let mut connection = admin().await;
                let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&mut connection).await
            })
        })
        .join();
    }
}

/// One `askgate serve`: its process, its address, its instance id.
struct Instance {
    child: tokio::process::Child,
    pid: u32,
    base: String,
    id: String,
}

async fn start(config: &Path) -> Instance {
    let start = served::Start { env: vec![("ASKGATE_API_TOKEN", TOKEN.to_owned())], ..served::Start::default() };
    let (child, base) = served::launch(config, &start).await;
    let pid = child.id().unwrap();
    let health: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
    let id = health["instance"].as_str().expect("an instance id").to_owned();
    Instance { child, pid, base, id }
}

fn epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A run's owner or status changed, as the database said at `at` (epoch ms).
#[derive(Clone, Debug)]
struct Seen {
    at: i64,
    run: String,
    owner: String,
    status: String,
}

/// Reads every run's owner and status every 100 ms, and records each change.
async fn watch(url: String, log: Arc<Mutex<Vec<Seen>>>, stop: tokio_util::sync::CancellationToken) {
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let mut connection = options.disable_statement_logging().connect().await.unwrap();
    let mut last: HashMap<String, (String, String)> = HashMap::new();
    while !stop.is_cancelled() {
        let rows: Vec<(String, Option<String>, String)> =
            sqlx::query_as("SELECT id, owner, status FROM runs").fetch_all(&mut connection).await.unwrap_or_default();
        let at = epoch_ms();
        for (run, owner, status) in rows {
            let now = (owner.unwrap_or_default(), status);
            if last.get(&run) != Some(&now) {
                log.lock().unwrap().push(Seen { at, run: run.clone(), owner: now.0.clone(), status: now.1.clone() });
                last.insert(run, now);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Answers every pending question through a live instance (a different one each round), so
/// the runs keep cycling; the claim makes that instance the run's owner.
async fn answer(bases: Arc<Mutex<Vec<String>>>, stop: tokio_util::sync::CancellationToken) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
    let mut round = 0usize;
    while !stop.is_cancelled() {
        round += 1;
        let base = {
            let bases = bases.lock().unwrap();
            bases[round % bases.len()].clone()
        };
        let page = client.get(format!("{base}/api/questions?status=pending")).bearer_auth(TOKEN).send().await;
        if let Ok(page) = page
            && let Ok(page) = page.json::<Value>().await
        {
            for q in page["questions"].as_array().into_iter().flatten() {
                if let Some(id) = q["id"].as_str() {
                    let reply = format!("{base}/api/questions/{id}/reply");
                    let _ = client.post(reply).bearer_auth(TOKEN).json(&json!({"value": true})).send().await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A run its owner was in the middle of when the owner was killed.
struct Interrupted {
    run: String,
    killed_at: i64,
    victim: String,
}

/// What became of an interrupted run: who took it over, when, and when its turn began again.
struct Takeover {
    by: Option<String>,
    after_ms: Option<i64>,
    turn_after_ms: Option<i64>,
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(label: &str, mut values: Vec<i64>, of: usize) {
    values.sort_unstable();
    println!(
        "{label}: {} of {of}, p50 {:.1} s, p90 {:.1} s, max {:.1} s",
        values.len(),
        percentile(&values, 0.5) as f64 / 1e3,
        percentile(&values, 0.9) as f64 / 1e3,
        values.last().copied().unwrap_or(0) as f64 / 1e3
    );
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kills = args
        .iter()
        .position(|a| a == "--kills")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(if args.iter().any(|a| a == "--quick") { 10 } else { 30 });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bench(kills));
}

async fn bench(kills: usize) {
    let database = Database::create().await;
    let dir = tempfile::TempDir::new().unwrap();
    let script = dir.path().join("work.sh");
    std::fs::write(&script, PROGRAM).unwrap();
    let config = dir.path().join("channels.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n\n\
             [[functions]]\nname = \"work\"\ncommand = [\"sh\", \"{}\", \"{}\"]\n",
            database.url,
            script.display(),
            dir.path().display()
        ),
    )
    .unwrap();

    let mut instances = Vec::new();
    let mut pids: HashMap<u32, String> = HashMap::new();
    for _ in 0..INSTANCES {
        let instance = start(&config).await;
        pids.insert(instance.pid, instance.id.clone());
        instances.push(instance);
    }
    let bases = Arc::new(Mutex::new(instances.iter().map(|i| i.base.clone()).collect::<Vec<_>>()));
    let stop = tokio_util::sync::CancellationToken::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let watcher = tokio::spawn(watch(database.url.clone(), log.clone(), stop.clone()));
    let answerer = tokio::spawn(answer(bases.clone(), stop.clone()));
    let client = reqwest::Client::new();
    for i in 0..RUNS {
        let base = &instances[i % INSTANCES].base;
        let started = client
            .post(format!("{base}/api/runs"))
            .bearer_auth(TOKEN)
            .json(&json!({"function": "work", "conversation": "console:local"}))
            .send()
            .await
            .unwrap();
        assert!(started.status().is_success(), "{:?}", started.text().await);
    }
    println!(
        "askgate orphans benchmark: {INSTANCES} instances on one PostgreSQL database, {RUNS} runs of a program \
         working ~3 s per turn, a SIGKILL every {}±1 s ({kills} kills), release binary",
        KILL_EVERY.as_secs()
    );
    tokio::time::sleep(Duration::from_secs(6)).await;

    let options: sqlx::postgres::PgConnectOptions = database.url.parse().unwrap();
    let mut db = options.disable_statement_logging().connect().await.unwrap();
    let mut interrupted = Vec::new();
    let began = Instant::now();
    for k in 0..kills {
        // 4-6 s apart, at random: kills in step with the heartbeat would measure one phase only.
        let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * 2000 / 255;
        tokio::time::sleep(KILL_EVERY - Duration::from_secs(1) + Duration::from_millis(jitter)).await;
        let slot = k % INSTANCES;
        let victim = instances[slot].id.clone();
        instances[slot].child.start_kill().unwrap();
        let _ = instances[slot].child.wait().await;
        let killed_at = epoch_ms();
        // Dead now, so what it owned mid-turn stays as it left it until someone takes it over.
        let owned: Vec<String> = sqlx::query_scalar("SELECT id FROM runs WHERE status = 'running' AND owner = $1")
            .bind(&victim)
            .fetch_all(&mut db)
            .await
            .unwrap();
        for run in owned {
            interrupted.push(Interrupted { run, killed_at, victim: victim.clone() });
        }
        let restarted = start(&config).await;
        pids.insert(restarted.pid, restarted.id.clone());
        bases.lock().unwrap()[slot] = restarted.base.clone();
        instances[slot] = restarted;
    }
    let killing = began.elapsed();
    // Every run interrupted is taken over before the end (or 60 s pass).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stuck: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE status = 'running' AND owner <> ALL($1)")
            .bind(instances.iter().map(|i| i.id.clone()).collect::<Vec<_>>())
            .fetch_one(&mut db)
            .await
            .unwrap();
        if stuck == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let _ = watcher.await;
    let _ = answerer.await;
    for mut instance in instances {
        let _ = instance.child.start_kill();
        let _ = instance.child.wait().await;
    }
    let _ = db.close().await;
    report(&interrupted, &log.lock().unwrap(), &turns(dir.path()), &pids, kills, killing);
}

/// The program's work log: `(run, step, epoch ms, askgate pid)`.
fn turns(dir: &Path) -> Vec<(String, u64, i64, u32)> {
    std::fs::read_to_string(dir.join("turns"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut p = l.split(' ');
            Some((p.next()?.to_owned(), p.next()?.parse().ok()?, p.next()?.parse().ok()?, p.next()?.parse().ok()?))
        })
        .collect()
}

fn report(
    interrupted: &[Interrupted],
    log: &[Seen],
    turns: &[(String, u64, i64, u32)],
    pids: &HashMap<u32, String>,
    kills: usize,
    killing: Duration,
) {
    let takeovers: Vec<Takeover> = interrupted
        .iter()
        .map(|i| {
            let taken = log.iter().find(|s| s.run == i.run && s.at >= i.killed_at && s.owner != i.victim);
            let by = taken.map(|s| s.owner.clone());
            let turn = by.as_ref().and_then(|by| {
                turns.iter().find(|(run, _, at, pid)| *run == i.run && *at >= i.killed_at && pids.get(pid) == Some(by))
            });
            Takeover { after_ms: taken.map(|s| s.at - i.killed_at), turn_after_ms: turn.map(|t| t.2 - i.killed_at), by }
        })
        .collect();
    let n = interrupted.len();
    println!("{kills} kills in {:.0} s; {n} runs were mid-turn on the instance killed", killing.as_secs_f64());
    summary("taken over (owner changed, from the kill)   ", takeovers.iter().filter_map(|t| t.after_ms).collect(), n);
    summary(
        "turn began again there (from the kill)      ",
        takeovers.iter().filter_map(|t| t.turn_after_ms).collect(),
        n,
    );
    let lost = takeovers.iter().filter(|t| t.by.is_none()).count();
    if lost > 0 {
        println!("NOT taken over by the end: {lost}");
    }
    // Chains: a run taken over by an instance that was killed before the run left `running`.
    let mut by_run: BTreeMap<&str, Vec<(&Interrupted, &Takeover)>> = BTreeMap::new();
    for (i, t) in interrupted.iter().zip(&takeovers) {
        by_run.entry(i.run.as_str()).or_default().push((i, t));
    }
    let first = interrupted.iter().map(|i| i.killed_at).min().unwrap_or(0);
    let mut chains = Vec::new();
    for (run, links) in &by_run {
        let mut chain: Vec<(&Interrupted, &Takeover)> = Vec::new();
        for &(i, t) in links {
            let continues = chain.last().is_some_and(|(prev, pt): &(&Interrupted, &Takeover)| {
                pt.by.as_deref() == Some(i.victim.as_str())
                    && !log
                        .iter()
                        .any(|s| s.run == *run && s.at > prev.killed_at && s.at <= i.killed_at && s.status != "running")
            });
            if !continues && !chain.is_empty() {
                chains.push(std::mem::take(&mut chain));
            }
            chain.push((i, t));
        }
        chains.push(chain);
    }
    let long: Vec<_> = chains.iter().filter(|c| c.len() > 1).collect();
    let spans: Vec<i64> = chains
        .iter()
        .filter_map(|c| Some(c.last()?.1.after_ms? + c.last()?.0.killed_at - c.first()?.0.killed_at))
        .collect();
    summary("first kill of a chain to its last takeover ", spans, chains.len());
    println!("takeover chains (a run orphaned again by a later kill before its turn ended): {}", long.len());
    for chain in chains.iter().filter(|c| c.len() > 1).chain(chains.iter().filter(|c| c.len() == 1).take(3)) {
        let run = &chain[0].0.run;
        let mut line = format!("  run {}:", short(run));
        for (i, t) in chain {
            line.push_str(&format!(
                " [{:>6.1} s] {} killed → {} after {}",
                (i.killed_at - first) as f64 / 1e3,
                short_instance(&i.victim),
                t.by.as_deref().map_or("nobody", short_instance),
                t.after_ms.map_or_else(|| "—".to_owned(), |ms| format!("{:.1} s", ms as f64 / 1e3)),
            ));
        }
        println!("{line}");
    }
}

/// `<host>:<pid>:<random>` as `<pid>:<random>`.
fn short_instance(id: &str) -> &str {
    id.split_once(':').map_or(id, |(_, rest)| rest)
}
