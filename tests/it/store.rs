//! What only one backend does. SQLite on a real file: NUL bytes survive, a batch isolates a
//! bad write, one store per file, a locked file. PostgreSQL: what it cannot store is refused
//! clearly, and a batch isolates a bad write there too.
//! (What both do is in `conformance.rs`.)

use std::sync::Arc;

use askgate::question::{Outcome, Question, RunId, Surface};
use askgate::run::Run;
use askgate::store::{Claim, Resolution, SqliteStore, Store, StoreError, Synchronous};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{T0, db_path, waiting_run};
use askgate::store::StoreExt;

fn run(input: &str) -> Run {
    waiting_run("test:room", input)
}

/// The conformance suite's question, at step 0.
fn question(run: &Run, prompt: &str) -> Question {
    crate::conformance::question(run, 0, prompt)
}

async fn open(dir: &TempDir) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(db_path(dir.path()).to_str().unwrap(), Synchronous::Full).await.unwrap())
}

#[tokio::test]
async fn values_with_quotes_nul_bytes_or_sql_survive_exactly() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir).await;
    let r = run("o'clock\0 '); DELETE FROM runs; --");
    let q = question(&r, "Don't 'quote' me\0 — ünïcödé ✅");
    store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    assert_eq!(store.question(q.id).await.unwrap().unwrap(), q);
    assert_eq!(store.run(r.id).await.unwrap().unwrap(), r);

    let outcome = Outcome::Declined { feedback: Some("not '; now\0".into()) };
    let resolution = Resolution {
        question: q.clone(),
        outcome: outcome.clone(),
        by: Some("test:o'brien".into()),
        name: Some("O'Brien\0 ✅".into()),
        // A channel a program attached itself: any surface askgate knows is stored.
        via: Surface::OTHER,
        at: T0 + 5,
        grant: None,
        update: None,
        approvals: None,
    };
    let Claim::Won(won, _) = store.resolve(resolution.clone()).await.unwrap() else {
        panic!("the first claim must win")
    };
    assert_eq!(won.outcome, Some(outcome));
    assert_eq!(won.answered_by.as_deref(), Some("test:o'brien"));
    assert_eq!(won.answered_name.as_deref(), Some("O'Brien\0 ✅"));
    assert_eq!(won.answered_via, Some(Surface::OTHER));
    assert_eq!(store.question(q.id).await.unwrap().unwrap(), won, "the claim returned what was stored");
    store.close().await;
}

#[tokio::test]
async fn a_bad_write_in_a_batch_fails_only_its_caller() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir).await;
    let r = run("");
    let good = question(&r, "Good");
    let mut orphan = question(&r, "Orphan");
    orphan.run = RunId::new(); // no such run: the foreign key refuses it
    let mut duplicate_step = question(&r, "Same step");
    duplicate_step.step = good.step;
    let other = run("");
    let (good, orphan, duplicate_step) = (Arc::new(good), Arc::new(orphan), Arc::new(duplicate_step));
    let (a, b, c) = tokio::join!(store.ask(&r, &good), store.ask(&other, &orphan), store.ask(&r, &duplicate_step));
    // Which of `good` and `duplicate_step` lands first is up to the batch order: exactly one.
    assert!(b.is_err(), "a question of a missing run was stored");
    assert!(a.is_ok() != c.is_ok(), "{a:?} / {c:?}");
    assert_eq!(store.journal(r.id).await.unwrap().len(), 1);
    let stats = store.write_stats();
    assert_eq!((stats.writes, stats.failed), (3, 2), "{stats:?}");
    store.close().await;
}

#[tokio::test]
async fn a_database_is_open_in_one_store_at_a_time() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir).await;
    let path = db_path(dir.path());
    let second = SqliteStore::open(path.to_str().unwrap(), Synchronous::Normal).await;
    let Err(StoreError::InUse { holder, .. }) = &second else { panic!("a second store opened the database") };
    assert_eq!(holder, &format!("pid {}", std::process::id()));
    store.close().await;
    let reopened = SqliteStore::open(path.to_str().unwrap(), Synchronous::Normal).await.unwrap();
    reopened.close().await;
}

#[tokio::test]
async fn a_database_locked_past_the_busy_timeout_fails_writes_visibly_until_it_is_free() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir).await;
    let engine = askgate::engine::Engine::new(
        store.clone(),
        askgate::engine::Functions::new(),
        askgate::engine::Settings::default(),
        askgate::clock::Clock::system(),
    );
    let token = askgate::http::ApiToken::new("t".repeat(32), "operator");
    let app =
        askgate::http::router(engine.clone(), token, Default::default(), askgate::http::HttpSettings::default(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health = format!("http://{}/healthz", listener.local_addr().unwrap());
    tokio::spawn(askgate::http::serve(listener, app, engine.stopping()));
    let healthz = || async {
        let r = reqwest::get(&health).await.unwrap();
        (r.status(), r.json::<serde_json::Value>().await.unwrap())
    };
    assert_eq!(healthz().await.0, reqwest::StatusCode::OK);

    // Another program (an operator's sqlite3 shell, say) holds SQLite's write lock for longer
    // than askgate's busy timeout of 10 s.
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(db_path(dir.path()));
    let mut other = sqlx::ConnectOptions::connect(&options).await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut other).await.unwrap();
    let r = run("");
    let locked = store.ask(&r, &Arc::new(question(&r, "Locked out?"))).await;
    let Err(e @ StoreError::Busy(message)) = &locked else { panic!("expected SQLite's refusal: {locked:?}") };
    assert!(e.is_transient(), "a locked database passes");
    assert!(message.contains("locked"), "{message}");
    // Until a write succeeds again, /healthz says writes fail, and why.
    let (status, body) = healthz().await;
    assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let said = body["store"].as_str().unwrap();
    assert!(said.starts_with("writes failing: ") && said.contains("locked"), "{body}");

    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    let q = question(&r, "And now?");
    store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    assert_eq!(store.journal(r.id).await.unwrap(), [q]);
    let (status, body) = healthz().await;
    assert_eq!((status, body["store"].as_str()), (reqwest::StatusCode::OK, Some("ok")), "{body}");
    engine.stopping().cancel();
    store.close().await;
}

#[tokio::test]
async fn a_tap_is_recorded_as_applied_in_its_claims_own_write() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir).await;
    let r = run("");
    let q = question(&r, "Tapped?");
    store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    let before = store.write_stats().batches;
    let resolution = Resolution {
        question: q.clone(),
        outcome: Outcome::Answered { value: json!("it's") },
        by: Some("test:alice".into()),
        name: None,
        via: askgate::question::Surface::platform("telegram"),
        at: T0,
        grant: None,
        update: Some("telegram:update:7".into()),
        approvals: None,
    };
    assert!(matches!(store.resolve(resolution.clone()).await.unwrap(), Claim::Won(..)));
    assert!(store.seen("telegram:update:7").await.unwrap(), "the update key is recorded with the claim");
    assert_eq!(store.write_stats().batches, before + 1, "one commit for the tap and its key");
    store.close().await;
}

#[tokio::test]
async fn postgres_refuses_a_nul_character_as_the_writes_own_fault() {
    let database = crate::backend::TestDatabase::create().await;
    let store = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let r = run("nul\0 inside");
    let refused = store.ask(&r, &Arc::new(question(&r, "Fine"))).await;
    let Err(e @ StoreError::Constraint(message)) = &refused else { panic!("{refused:?}") };
    assert!(!e.is_transient() && message.contains("PostgreSQL 22021"), "{message}");
    assert_eq!(store.run(r.id).await.unwrap(), None, "nothing of the refused write was kept");
    store.close().await;
}

/// Writes that arrive together are committed together (group commit); the bad ones among them
/// fail alone, each with its own reason, and every good one is stored.
#[tokio::test]
async fn a_bad_write_in_a_postgres_batch_fails_only_its_caller() {
    let database = crate::backend::TestDatabase::create().await;
    let store = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let runs: Vec<Run> = (0..24).map(|i| run(if i % 8 == 3 { "nul\0 inside" } else { "fine" })).collect();
    let mut asks: Vec<(Run, Arc<Question>)> =
        runs.iter().map(|r| (r.clone(), Arc::new(question(r, "Go on?")))).collect();
    let mut orphan = question(&runs[0], "Orphan");
    orphan.run = RunId::new(); // no such run: the foreign key refuses it
    asks.push((run("fine"), Arc::new(orphan)));
    // Queued in one poll, before the writers run: one batch with the bad writes inside it.
    let results = futures_util::future::join_all(asks.iter().map(|(r, q)| store.ask(r, q))).await;
    for ((r, q), result) in asks.iter().zip(&results) {
        let stored = store.question(q.id).await.unwrap();
        if r.input.contains('\0') || q.run != r.id {
            assert!(matches!(result, Err(StoreError::Constraint(_))), "{result:?}");
            assert_eq!(stored, None);
            assert_eq!(store.run(r.id).await.unwrap(), None, "nothing of a refused write is kept");
        } else {
            assert!(result.is_ok(), "{result:?}");
            assert!(stored.is_some());
        }
    }
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 4, "only the NUL runs and the orphan failed");
    store.close().await;
}

/// Two instances on one PostgreSQL database: each hears the other's asks and resolutions, a
/// run belongs to the instance that runs it, and what a dead one left goes to one survivor.
#[tokio::test]
async fn postgres_instances_hear_each_other_and_one_survivor_takes_over_what_a_dead_one_left() {
    use askgate::question::{Mode, Outcome, Surface};
    use askgate::run::RunStatus;
    use askgate::store::{Change, Claim, Resolution};

    let database = crate::backend::TestDatabase::create().await;
    let a = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let b = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let mut heard_by_b = b.changes().expect("a shared store tells of the others' changes");
    assert!(b.changes().is_none(), "taken once");
    // A heard B's hello (until then, alone, it announced nothing).
    crate::support::eventually(|| async { a.hears_others().then_some(()) }).await;

    // A asks; B hears it and answers it; the run is B's to resume, and A hears that.
    let r = run("");
    let q = question(&r, "Which?");
    a.ask(&r, &Arc::new(q.clone())).await.unwrap();
    assert_eq!(next_change(&mut heard_by_b).await, Some(Change::Asked(q.id)));
    let mut heard_by_a = a.changes().unwrap();
    let answer = Resolution {
        question: q.clone(),
        outcome: Outcome::Answered { value: serde_json::json!("it's") },
        by: Some("test:alice".into()),
        name: None,
        via: Surface::API,
        at: T0,
        grant: None,
        update: None,
        approvals: None,
    };
    assert!(matches!(b.resolve(answer).await.unwrap(), Claim::Won(..)));
    assert_eq!(next_change(&mut heard_by_a).await, Some(Change::Resolved(q.id)));
    assert_eq!(a.run(r.id).await.unwrap().unwrap().status, RunStatus::Running);
    assert_eq!(a.orphans().await.unwrap(), askgate::store::Orphans::default(), "B is alive and runs it");

    // A's listening connection drops (the server ended it): A is told it may have missed
    // changes, and hears the others again once it reconnects.
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url).await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() \
         AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(ended.len(), 2, "A's and B's listeners");
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), heard_by_a.recv()).await.unwrap();
    assert_eq!(heard, Some(Change::Missed));
    let other = run("");
    let again = question(&other, "Again?");
    b.ask(&other, &Arc::new(again.clone())).await.unwrap();
    assert_eq!(next_change(&mut heard_by_a).await, Some(Change::Asked(again.id)), "A listens again");

    // B signs off: its running run goes to A, once.
    b.close().await;
    let taken = a.orphans().await.unwrap();
    assert_eq!(taken.runs.iter().map(|r| r.id).collect::<Vec<_>>(), [r.id]);
    assert_eq!(a.orphans().await.unwrap().runs, [], "taken over once");

    // A blocking ask held by C; C dies: A cancels its question
    // and ends its run; a third instance finds nothing left.
    let c = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let mut held = run("");
    (held.mode, held.status) = (Mode::Blocking, RunStatus::Running);
    let mut blocking = question(&held, "Hold?");
    blocking.mode = Mode::Blocking;
    c.ask(&held, &Arc::new(blocking.clone())).await.unwrap();
    assert_eq!(a.orphans().await.unwrap(), askgate::store::Orphans::default(), "C is alive");
    // C dies without signing off (its heartbeat stops with it), and its last heartbeat is old.
    let dead = c.instance().unwrap().to_owned();
    drop(c);
    sqlx::query("UPDATE instances SET heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(&dead)
        .execute(&mut admin)
        .await
        .unwrap();
    let orphans = a.orphans().await.unwrap();
    assert_eq!(orphans.blocking.iter().map(|q| q.id).collect::<Vec<_>>(), [blocking.id]);
    assert_eq!(orphans.runs.iter().map(|r| r.id).collect::<Vec<_>>(), [held.id]);
    let d = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    assert_eq!(d.orphans().await.unwrap().runs, [], "the run went to A alone");
    for store in [a, d] {
        store.close().await;
    }
}

/// An expiry on PostgreSQL skips a question whose row another instance holds (it is claiming
/// it), rather than waiting on that lock; a person's answer waits, and loses with the winner's
/// outcome.
#[tokio::test]
async fn postgres_sweepers_skip_a_question_another_instance_is_claiming() {
    use askgate::question::{Outcome, Surface};
    use askgate::store::{Claim, Resolution};

    let database = crate::backend::TestDatabase::create().await;
    let store = askgate::store::PostgresStore::open(&database.url).await.unwrap();
    let r = run("");
    let q = question(&r, "Due?");
    store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    // Another instance's claim, in the middle of its transaction.
    let mut other = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("UPDATE questions SET status = 'answered', resolved_at = 1, outcome = '{\"status\":\"answered\",\"value\":\"it''s\"}' WHERE id = $1")
        .bind(q.id.to_string())
        .execute(&mut other)
        .await
        .unwrap();
    let due = tokio::time::timeout(std::time::Duration::from_secs(10), store.due(T0 + 10_000, 10)).await;
    assert_eq!(due.expect("the sweep does not wait on the other's lock").unwrap(), [], "a question being claimed");
    let expiry = Resolution {
        question: q.clone(),
        outcome: Outcome::Expired { value: None },
        by: None,
        name: None,
        via: Surface::GATEWAY,
        at: T0 + 10_000,
        grant: None,
        update: None,
        approvals: None,
    };
    let expired = tokio::time::timeout(std::time::Duration::from_secs(10), store.resolve(expiry)).await;
    assert!(matches!(expired.expect("the expiry does not wait either").unwrap(), Claim::Lost(_)));
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();
    assert_eq!(store.question(q.id).await.unwrap().unwrap().status, askgate::question::Status::Answered);
    store.close().await;
}

/// The next change a store heard, past the "look again" marks it gives as it starts.
async fn next_change(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<askgate::store::Change>,
) -> Option<askgate::store::Change> {
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await.unwrap() {
            Some(askgate::store::Change::Missed) => continue,
            other => return other,
        }
    }
}

/// `askgate migrate` copies every column, also those later migrations added: a quorum
/// approval's approvals, a question's nudges and escalation, a rule with an expiry.
#[tokio::test]
async fn a_copy_to_postgres_keeps_every_column() {
    use askgate::question::{Approver, Conversation, Kind, Nudges};
    use askgate::store::{Delivery, Grant, PostgresStore};
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path()).display().to_string();
    let store = open(&dir).await;
    let r = run("copy me");
    let ops = Conversation::parse("test:ops").unwrap();
    let mut waiting = question(&r, "deploy prod");
    waiting.kind = Kind::Approval;
    waiting.quorum = 2;
    waiting.approvals = vec![Approver {
        user: "test:alice".into(),
        name: Some("@alice".into()),
        via: askgate::question::Surface::platform("telegram"),
        at: T0,
    }];
    waiting.nudges = Nudges {
        remind_every: Some(600_000),
        escalate_after: Some(60_000),
        escalate_to: Some(ops.clone()),
        ..Nudges::default()
    };
    waiting.nudge_at = Some(T0 + 600_000);
    waiting.escalated_to = Some(ops);
    store.ask(&r, &Arc::new(waiting.clone())).await.unwrap();
    store.add_delivery(&Delivery::card(waiting.id, Surface::OTHER, "test:room", "m-1")).await.unwrap();
    let other = run("granted");
    let asked = question(&other, "git push");
    store.ask(&other, &Arc::new(asked.clone())).await.unwrap();
    let rule = Grant {
        id: "g-1".into(),
        conversation: Conversation::parse("test:room").unwrap(),
        action: "git push *".into(),
        pattern: true,
        grantee: "function:demo".into(),
        granted_by: "test:alice".into(),
        granted_name: Some("@alice".into()),
        question: asked.id,
        created_at: T0,
        expires_at: Some(T0 + 86_400_000),
    };
    let allowed = Resolution {
        question: asked.clone(),
        outcome: Outcome::Answered { value: json!("always") },
        by: Some("test:alice".into()),
        name: None,
        via: askgate::question::Surface::platform("telegram"),
        at: T0 + 1,
        grant: Some(rule.clone()),
        update: None,
        approvals: None,
    };
    let Claim::Won(answered, _) = store.resolve(allowed).await.unwrap() else { panic!("the claim must win") };
    store.close().await;
    drop(store);

    let database = crate::backend::TestDatabase::create().await;
    let copied = askgate::store::copy::sqlite_to_postgres(&path, &database.url).await.unwrap();
    assert!(copied.contains(&("questions", 2)) && copied.contains(&("grants", 1)), "{copied:?}");
    let pg = PostgresStore::open(&database.url).await.unwrap();
    assert_eq!(pg.question(waiting.id).await.unwrap().unwrap(), waiting);
    assert_eq!(pg.question(asked.id).await.unwrap().unwrap(), answered);
    assert_eq!(pg.grants(None, T0 + 2).await.unwrap(), [rule]);
    pg.close().await;
}
