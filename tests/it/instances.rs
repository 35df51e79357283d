//! Several `askgate serve` processes on one PostgreSQL database (a database of the test's own):
//! a run started through one instance and answered through another finishes; a blocking ask
//! held by one is answered through another; one instance's event stream carries what the
//! others did; an instance killed between ask and answer loses nothing; a blocking run whose
//! instance was killed ends `cancelled(instance_lost)`, as on SQLite at the next start.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::backend::TestDatabase;
use crate::binary::{Served, write_config, write_config_on};
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
        Self::start_with(database, "", &[]).await
    }

    async fn start_with(database: &TestDatabase, extra: &str, env: &[(&str, &str)]) -> Self {
        let dir = TempDir::new().unwrap();
        let config: PathBuf = write_config_on(dir.path(), &database.url, extra);
        let env: Vec<(&str, &str)> = env.iter().copied().chain([("ASKGATE_API_TOKEN", TOKEN)]).collect();
        let served = Served::start_with_env(&config, &env);
        let line = served.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        Self { served, base, config, _dir: dir }
    }

    async fn get(&self, path: &str) -> Value {
        let r = reqwest::Client::new().get(format!("{}{path}", self.base)).bearer_auth(TOKEN).send().await.unwrap();
        r.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> (reqwest::StatusCode, Value) {
        crate::support::post(&self.base, TOKEN, path, body).await
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

/// The event names and question ids a stream sends, collected in the background once it
/// answered (askgate subscribes it before it answers: it misses nothing that happens after).
async fn stream(instance: &Instance) -> std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>> {
    use futures_util::StreamExt;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = format!("{}/api/events", instance.base);
    let response = reqwest::Client::new().get(url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let into = seen.clone();
    tokio::spawn(async move {
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
async fn a_run_started_through_one_instance_is_answered_through_another_in_every_stream() {
    let database = TestDatabase::create().await;
    let (a, b, c) =
        (Instance::start(&database).await, Instance::start(&database).await, Instance::start(&database).await);
    let config_of_a = a.config.clone();
    let events = stream(&c).await;

    let (status, started) = a.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{started}");
    let run = started["id"].as_str().unwrap().to_owned();
    saw(&events, "run.started", &run).await;
    let first = b.pending("Which library for date formatting?").await;
    saw(&events, "question.asked", &first).await;
    saw(&events, "run.waiting", &run).await;
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
    // Run events cross instances as question events do: C ran none of it.
    saw(&events, "run.resumed", &run).await;
    saw(&events, "run.finished", &run).await;
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
async fn an_instance_killed_while_a_question_waits_loses_nothing() {
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

#[tokio::test]
async fn with_three_instances_sweeping_each_question_expires_once() {
    let database = TestDatabase::create().await;
    let (a, b, c) =
        (Instance::start(&database).await, Instance::start(&database).await, Instance::start(&database).await);
    let events = stream(&c).await;
    let mut ids = Vec::new();
    for (i, instance) in [&a, &b, &c].iter().cycle().take(30).enumerate() {
        let (status, asked) = instance
            .post(
                "/api/questions",
                json!({"conversation": "console:local", "prompt": format!("Short {i}?"), "options": ["x", "y"],
                       "default": "y", "timeout": 1}),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
        ids.push(asked["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        saw(&events, "question.expired", id).await;
        let question = a.get(&format!("/api/questions/{id}")).await;
        assert_eq!(question["status"], "expired", "{question}");
    }
    // Every instance swept; each expiry was applied once, so each was announced once.
    let seen = events.lock().unwrap().clone();
    for id in &ids {
        let expired = seen.iter().filter(|(name, i)| name == "question.expired" && i == id).count();
        assert_eq!(expired, 1, "{id}: {seen:?}");
    }
    for instance in [a, b, c] {
        assert_eq!(instance.served.terminate().await.code(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_questions_answered_at_once_through_two_instances_have_one_winner_each() {
    use futures_util::StreamExt;
    const QUESTIONS: usize = 2_000;
    let database = TestDatabase::create().await;
    let (a, b) = (Instance::start(&database).await, Instance::start(&database).await);
    let ids: Vec<String> = futures_util::stream::iter(0..QUESTIONS)
        .map(|i| {
            let a = &a;
            async move {
                let body =
                    json!({"conversation": "console:local", "prompt": format!("Race {i}?"), "options": ["a", "b"]});
                let (status, asked) = a.post("/api/questions", body).await;
                assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
                asked["id"].as_str().unwrap().to_owned()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    // Each question answered through A ("a") and through B ("b") at the same moment.
    let outcomes: Vec<(String, Value, Value)> = futures_util::stream::iter(ids)
        .map(|id| {
            let (a, b) = (&a, &b);
            async move {
                let path = format!("/api/questions/{id}/reply");
                let (through_a, through_b) =
                    tokio::join!(a.post(&path, json!({"value": "a"})), b.post(&path, json!({"value": "b"})));
                (id, json!([through_a.0.as_u16(), through_a.1]), json!([through_b.0.as_u16(), through_b.1]))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for (id, through_a, through_b) in &outcomes {
        let codes = [through_a[0].as_u64().unwrap(), through_b[0].as_u64().unwrap()];
        assert!(codes == [200, 409] || codes == [409, 200], "{id}: {through_a} / {through_b}");
        let (won, lost) = if codes[0] == 200 { (through_a, through_b) } else { (through_b, through_a) };
        // The loser's receipt names the answer that won.
        let winner = if codes[0] == 200 { "a" } else { "b" };
        assert!(lost[1].to_string().contains(&format!("\"{winner}\"")), "{id}: won {won}, lost {lost}");
        let question = a.get(&format!("/api/questions/{id}")).await;
        assert_eq!(question["outcome"]["value"], winner, "{question}");
    }
    for instance in [a, b] {
        assert_eq!(instance.served.terminate().await.code(), Some(0));
    }
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn on_telegram_one_instance_holds_the_polling_lease_until_it_is_killed() {
    use crate::fake_telegram::FakeTelegram;
    const ALICE: i64 = 42;
    let database = TestDatabase::create().await;
    let (fake, url) = FakeTelegram::start().await;
    let extra = format!(
        "\n[channels.telegram]\ntoken_env = \"TELEGRAM_BOT_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"telegram:{ALICE}\"]\n"
    );
    let env = [("TELEGRAM_BOT_TOKEN", "123:test")];
    let mut a = Instance::start_with(&database, &extra, &env).await;
    let leases = |instance: &Instance| {
        let url = format!("{}/healthz", instance.base);
        async move {
            let health: Value = reqwest::get(url).await.ok()?.json().await.ok()?;
            Some(health["leases"].as_array()?.iter().filter_map(|l| l.as_str().map(str::to_owned)).collect::<Vec<_>>())
        }
    };
    eventually(|| async { (leases(&a).await? == ["telegram:polling"]).then_some(()) }).await;
    let b = Instance::start_with(&database, &extra, &env).await;
    b.served.log_line("askgate is ready").await;
    assert_eq!(leases(&b).await, Some(vec![]), "one instance polls at a time");
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library for date formatting?", 1).await;
    // A card A rendered is retracted by B when the answer comes through B.
    let asked = json!({"conversation": format!("telegram:{ALICE}"), "prompt": "Ship it?", "options": ["yes", "no"],
                       "answerers": [format!("telegram:{ALICE}"), "api:operator".to_owned()]});
    let (status, question) = a.post("/api/questions", asked).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{question}");
    let card = fake.sent("Ship it?", 1).await;
    let id = question["id"].as_str().unwrap();
    // The operator token answers: the question lists the operator.
    let (status, _) = b.post(&format!("/api/questions/{id}/reply"), json!({"value": "yes"})).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let message = card["message_id"].as_i64().unwrap();
    eventually(|| async {
        let shown = fake.message(ALICE, message);
        (shown["text"].as_str()?.contains("✅ yes") && shown.get("reply_markup").is_none()).then_some(())
    })
    .await;

    // A dies without a word: its connection ends, so does its lock, and B (trying every 2 s)
    // holds the lease and polls.
    a.served.child.kill().await.unwrap();
    eventually(|| async { (leases(&b).await? == ["telegram:polling"]).then_some(()) }).await;
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library for date formatting?", 2).await;
    assert_eq!(b.served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn a_sqlite_database_moves_to_postgres_with_its_waiting_runs() {
    use crate::binary::{BIN, write_config};
    let dir = TempDir::new().unwrap();
    let sqlite = dir.path().join("askgate.db").display().to_string();
    // A run left waiting on SQLite, one answer in its journal.
    let mut served = Served::start(&write_config(dir.path(), ""));
    served.log_line("askgate is ready").await;
    served.type_line("/run demo").await;
    let id = served.nth_card_id("Which library for date formatting?", 1).await;
    served.type_line(&format!("/answer {id} dayjs")).await;
    let archive = served.nth_card_id("Archive all 87 emails?", 1).await;
    let migrate = |from: String, to: String| async move {
        let out =
            tokio::process::Command::new(BIN).args(["migrate", "--from", &from, "--to", &to]).output().await.unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let database = TestDatabase::create().await;
    let (code, _, err) = migrate(sqlite.clone(), database.url.clone()).await;
    assert_eq!(code, Some(1), "a database askgate serves is not copied: {err}");
    assert!(err.contains("another askgate"), "{err}");
    assert_eq!(served.terminate().await.code(), Some(0));

    let (code, out, err) = migrate(sqlite.clone(), database.url.clone()).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("1 runs, 2 questions, 2 deliveries"), "{out}");
    let (code, _, err) = migrate(sqlite.clone(), database.url.clone()).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("already holds 1 runs; migrate into an empty database"), "{err}");

    // askgate on PostgreSQL finishes the run where SQLite left it.
    let pg = TempDir::new().unwrap();
    let mut served = Served::start(&write_config_on(pg.path(), &database.url, ""));
    served.log_line("askgate is ready").await;
    served.type_line(&format!("/answer {archive} yes")).await;
    served.stdout_line("Using dayjs for dates; archived 87 emails.").await;
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn a_run_a_killed_instance_was_in_the_middle_of_is_replayed_once_by_a_survivor() {
    let database = TestDatabase::create().await;
    let scripts = TempDir::new().unwrap();
    // A follow-up program whose second turn is slow the first time it runs (a marker file says
    // it ran), and counts its second turns.
    let script = scripts.path().join("slow.sh");
    std::fs::write(
        &script,
        "read -r start\n\
         echo '{\"type\":\"confirm\",\"prompt\":\"Go on?\",\"default\":false}'\n\
         read -r outcome\n\
         case \"$outcome\" in *'\"status\":\"pending\"'*) exit 0 ;; esac\n\
         echo turn >> \"$1/turns\"\n\
         if [ ! -e \"$1/mark\" ]; then : > \"$1/mark\"; sleep 30; fi\n\
         echo '{\"type\":\"done\",\"reply\":\"Went on.\"}'\n",
    )
    .unwrap();
    let function = format!(
        "\n[[functions]]\nname = \"slow\"\ncommand = [\"sh\", \"{}\", \"{}\"]\n",
        script.display(),
        scripts.path().display()
    );
    let (mut a, b) =
        (Instance::start_with(&database, &function, &[]).await, Instance::start_with(&database, &function, &[]).await);
    let (_, started) = a.post("/api/runs", json!({"function": "slow", "conversation": "console:local"})).await;
    let run = started["id"].as_str().unwrap().to_owned();
    let question = a.pending("Go on?").await;
    a.post(&format!("/api/questions/{question}/reply"), json!({"value": true})).await;
    // A won the claim and runs the slow turn; it dies in the middle of it.
    let mark = scripts.path().join("mark");
    eventually(|| async { mark.exists().then_some(()) }).await;
    a.served.child.kill().await.unwrap();
    let done = eventually(|| async {
        let run = b.get(&format!("/api/runs/{run}")).await;
        (run["run"]["status"] == "finished").then_some(run)
    })
    .await;
    assert_eq!(done["run"]["result"], "Went on.");
    let turns = std::fs::read_to_string(scripts.path().join("turns")).unwrap();
    assert_eq!(turns.lines().count(), 2, "the turn A was in, then B's replay of it, once: {turns}");
    assert!(b.served.log().contains("resuming a run interrupted mid-turn"), "{}", b.served.log());
    assert_eq!(b.served.terminate().await.code(), Some(0));
}

/// Starts the demo as a blocking run through `base` (the caller waits in the background) and
/// returns its question's id once it is pending.
async fn block_on_the_demo(base: &str, token: &str) -> String {
    let (url, bearer) = (format!("{base}/api/runs"), token.to_owned());
    tokio::spawn(async move {
        let body = json!({"function": "demo", "conversation": "console:local", "wait": true});
        // The caller loses its askgate: its request fails, as it should.
        let _ = reqwest::Client::new().post(url).bearer_auth(bearer).json(&body).send().await;
    });
    let prompt = "Which library for date formatting?";
    eventually(|| async {
        let client = reqwest::Client::new();
        let page: Value = client
            .get(format!("{base}/api/questions?status=pending"))
            .bearer_auth(token)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        Some(page["questions"].as_array()?.iter().find(|q| q["prompt"] == prompt)?["id"].as_str()?.to_owned())
    })
    .await
}

/// The question `id` and its run, once neither is pending or running any more, through `base`
/// (a survivor closes the question, then ends the run, while it serves).
async fn ended(base: &str, token: &str, id: &str) -> (Value, Value) {
    let get = |path: String| async move {
        let r = reqwest::Client::new().get(format!("{base}{path}")).bearer_auth(token).send().await.unwrap();
        r.json::<Value>().await.unwrap()
    };
    eventually(|| async {
        let question = get(format!("/api/questions/{id}")).await;
        let run = get(format!("/api/runs/{}", question["run"].as_str()?)).await;
        (question["status"] != "pending" && run["run"]["status"] != "running").then_some((question, run))
    })
    .await
}

/// What a stop that ends a blocking run itself says (`shutdown`), a lost instance says too,
/// with what happened: the run ends `cancelled`, not `failed`, and nobody claims a restart.
fn assert_lost(question: &Value, run: &Value) {
    assert_eq!(question["status"], "cancelled", "{question}");
    assert_eq!(question["outcome"]["reason"], "instance_lost", "{question}");
    assert_eq!(run["run"]["status"], "cancelled", "{run}");
    assert_eq!(run["run"]["result"], "instance_lost", "{run}");
}

#[tokio::test]
async fn a_blocking_run_whose_instance_was_killed_ends_cancelled_by_a_survivor() {
    let database = TestDatabase::create().await;
    let (mut a, b) = (Instance::start(&database).await, Instance::start(&database).await);
    let id = block_on_the_demo(&a.base, TOKEN).await;
    a.served.child.kill().await.unwrap();
    let (question, run) = ended(&b.base, TOKEN, &id).await;
    assert_lost(&question, &run);
    assert!(b.served.log().contains("cancelling a blocking run whose askgate is gone"), "{}", b.served.log());
    assert_eq!(b.served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn a_blocking_run_whose_sqlite_askgate_was_killed_ends_cancelled_at_the_next_start() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let mut served = Served::start(&config);
    let (base, token) = served.api(dir.path()).await;
    let id = block_on_the_demo(&base, &token).await;
    served.signal("KILL");
    served.child.wait().await.unwrap();
    let served = Served::start(&config);
    let (base, token) = served.api(dir.path()).await;
    let (question, run) = ended(&base, &token, &id).await;
    assert_lost(&question, &run);
    assert_eq!(served.terminate().await.code(), Some(0));
}

/// Regression (issue #27, finding 9): a run whose owner was killed waited for the owner's
/// heartbeat to lapse (10 s, then the next takeover tick), and as long again each time the
/// instance that took it over was killed in turn. A killed instance's connection ends, and
/// with it the lock it held: the survivors take its runs over without waiting for the lapse.
/// Here the dead instances' heartbeats are held at 6 s old, past the 5 s a silent instance
/// without its lock is given but short of the lapse, so only the lock can tell they died.
#[tokio::test]
async fn a_run_orphaned_a_second_time_is_taken_over_again_without_waiting_for_the_lapse() {
    use sqlx::{ConnectOptions, Connection};
    let database = TestDatabase::create().await;
    let scripts = TempDir::new().unwrap();
    // A follow-up program whose second turn hangs the first two times it runs (each logs the
    // pid of its process group), and ends the third time.
    let script = scripts.path().join("hangs.sh");
    std::fs::write(
        &script,
        "read -r start\n\
         echo '{\"type\":\"confirm\",\"prompt\":\"Go on?\",\"default\":false}'\n\
         read -r outcome\n\
         case \"$outcome\" in *'\"status\":\"pending\"'*) exit 0 ;; esac\n\
         echo $$ >> \"$1/turns\"\n\
         if [ \"$(wc -l < \"$1/turns\")\" -le 2 ]; then sleep 60; fi\n\
         echo '{\"type\":\"done\",\"reply\":\"Went on.\"}'\n",
    )
    .unwrap();
    let function = format!(
        "\n[[functions]]\nname = \"hangs\"\ncommand = [\"sh\", \"{}\", \"{}\"]\n",
        script.display(),
        scripts.path().display()
    );
    let mut instances = Vec::new();
    for _ in 0..3 {
        let instance = Instance::start_with(&database, &function, &[]).await;
        let health = instance.get("/healthz").await;
        instances.push((health["instance"].as_str().unwrap().to_owned(), instance));
    }
    let options: sqlx::postgres::PgConnectOptions = database.url.parse().unwrap();
    let mut db = options.disable_statement_logging().connect().await.unwrap();
    let dead = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (url, held) = (database.url.clone(), dead.clone());
    let holder = tokio::spawn(async move {
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let mut db = options.disable_statement_logging().connect().await.unwrap();
        loop {
            let ids = held.lock().unwrap().clone();
            sqlx::query("UPDATE instances SET heartbeat_at = now() - interval '6 seconds' WHERE id = ANY($1)")
                .bind(ids)
                .execute(&mut db)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    let first = &instances[0].1;
    let (_, started) = first.post("/api/runs", json!({"function": "hangs", "conversation": "console:local"})).await;
    let run = started["id"].as_str().unwrap().to_owned();
    let question = first.pending("Go on?").await;
    first.post(&format!("/api/questions/{question}/reply"), json!({"value": true})).await;
    let turns = scripts.path().join("turns");
    let turns_seen = |n: usize| {
        let turns = &turns;
        eventually(move || async move { (std::fs::read_to_string(turns).ok()?.lines().count() >= n).then_some(()) })
    };
    // The first instance won the claim and hangs in the turn; it dies, then the one that took
    // the run over hangs in the replay and dies too.
    for turn in 1..=2 {
        turns_seen(turn).await;
        let owner: String =
            sqlx::query_scalar("SELECT owner FROM runs WHERE id = $1").bind(&run).fetch_one(&mut db).await.unwrap();
        let at = instances.iter().position(|(id, _)| *id == owner).expect("a live instance owns the run");
        let (id, mut killed) = instances.remove(at);
        killed.served.child.kill().await.unwrap();
        dead.lock().unwrap().push(id);
    }
    let (_, survivor) = &instances[0];
    let done = eventually(|| async {
        let run = survivor.get(&format!("/api/runs/{run}")).await;
        (run["run"]["status"] == "finished").then_some(run)
    })
    .await;
    assert_eq!(done["run"]["result"], "Went on.");
    holder.abort();
    let groups = std::fs::read_to_string(&turns).unwrap();
    assert_eq!(groups.lines().count(), 3, "the turn, one replay per takeover: {groups}");
    // The dead instances' programs still hang; end their groups.
    for group in groups.lines().take(2) {
        let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{group}")]).status();
    }
    let _ = db.close().await;
    let (_, survivor) = instances.remove(0);
    assert_eq!(survivor.served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn an_instance_that_cannot_take_its_port_leaves_no_instance_behind() {
    let database = TestDatabase::create().await;
    let dir = TempDir::new().unwrap();
    let config = write_config_on(dir.path(), &database.url, "");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = taken.local_addr().unwrap().to_string();
    let out = tokio::process::Command::new(crate::binary::BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("ASKGATE_GATEWAY_HTTP", &http)
        .env("ASKGATE_API_TOKEN", TOKEN)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out).await.expect("it exits").unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("cannot listen on {http}")), "{said}");
    let check = tokio::process::Command::new(crate::binary::BIN).args(["check", "--config"]).arg(&config).output();
    let report = String::from_utf8_lossy(&check.await.unwrap().stdout).into_owned();
    assert!(report.contains("instances: none running"), "{report}");
    drop(taken);
}
