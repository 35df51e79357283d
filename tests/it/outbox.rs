//! The callbacks' outbox, written once and run on every store (as `conformance.rs`): a
//! callback is due once its run has ended, taken by one sender at a time, paused between
//! attempts, never sent again once delivered, and kept across a restart. A sender reads it on
//! a resolution only while one of its callbacks may be open.

use std::sync::Arc;

use crate::backend::Place;
use crate::support::{T0, waiting_run};
use askgate::question::RunId;
use askgate::run::{Run, RunStatus};
use askgate::store::command::{AddCallback, CallbackTried, TakeCallback};
use askgate::store::{Callback, CallbackTry, Store, StoreError, StoreExt};

crate::backend::on_every_store!(
    a_callback_is_due_once_its_run_ended,
    each_sender_reads_only_the_callbacks_of_its_own_urls,
    one_sender_at_a_time_takes_a_due_callback,
    a_settled_callback_is_never_due_again,
    an_open_callback_survives_a_restart,
    pruning_deletes_only_settled_or_orphaned_callbacks,
);

fn callback(id: &str, run: RunId) -> Callback {
    Callback {
        id: id.to_owned(),
        run,
        question: None,
        url: "http://127.0.0.1:9/hook".into(),
        headers: vec![("Authorization".into(), "Bearer it's \"quoted\"".into())],
        secret: Some("s3cret".into()),
        created_at: T0,
        attempts: 0,
        ended_at: None,
    }
}

async fn add(store: &Arc<dyn Store>, callback: Callback) -> Result<(), StoreError> {
    store.run_command(AddCallback(Box::new(callback))).await
}

/// Takes it at `now` for a minute: the lease, when it was taken.
async fn take(store: &Arc<dyn Store>, id: &str, now: i64) -> Option<i64> {
    let take = TakeCallback { id: id.to_owned(), now, until: now + 60_000 };
    store.run_command(take).await.unwrap().then_some(now + 60_000)
}

/// Records an attempt under `lease`: whether it was recorded.
async fn tried(store: &Arc<dyn Store>, id: &str, at: i64, lease: Option<i64>, tried: CallbackTry) -> bool {
    let lease = lease.expect("taken");
    store.run_command(CallbackTried { id: id.to_owned(), at, lease, tried }).await.unwrap()
}

async fn due(store: &Arc<dyn Store>, now: i64) -> Vec<String> {
    store.due_callbacks(now, "http", 10).await.unwrap().into_iter().map(|c| c.id).collect()
}

/// A run that waits, stored with its question as an ask does.
async fn waiting(store: &Arc<dyn Store>) -> Run {
    let run = waiting_run("test:room", "");
    let question = crate::conformance::question(&run, 0, "Ship it?");
    store.ask(&run, &Arc::new(question)).await.unwrap();
    run
}

async fn a_callback_is_due_once_its_run_ended(place: Place) {
    let store = place.open().await;
    let run = waiting_run("test:room", "");
    add(&store, callback("cb-1", run.id)).await.unwrap();
    assert_eq!(due(&store, T0 + 10).await, Vec::<String>::new(), "its run is not written yet");
    let question = crate::conformance::question(&run, 0, "Ship it?");
    store.ask(&run, &Arc::new(question)).await.unwrap();
    assert_eq!(due(&store, T0 + 10).await, Vec::<String>::new(), "its run waits");
    store.finish_run(run.id, RunStatus::Finished, "done", T0 + 5).await.unwrap();
    let read = store.due_callbacks(T0 + 10, "http", 10).await.unwrap();
    assert_eq!(read, [Callback { ended_at: Some(T0 + 5), ..callback("cb-1", run.id) }], "read back exactly");
    store.close().await;
}

async fn each_sender_reads_only_the_callbacks_of_its_own_urls(place: Place) {
    let store = place.open().await;
    let run = waiting(&store).await;
    add(&store, callback("cb-1", run.id)).await.unwrap();
    store.finish_run(run.id, RunStatus::Finished, "done", T0 + 5).await.unwrap();
    // Each sender reads only the rows of its own URLs: an opencode server's replies are not
    // an agent's callbacks, nor another server's.
    let reply = Callback { url: "opencode://laptop/permission/per_1/reply".into(), ..callback("oc-1", run.id) };
    add(&store, reply).await.unwrap();
    let ids = |due: Vec<Callback>| due.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(store.due_callbacks(T0 + 10, "opencode://laptop/", 10).await.unwrap()), ["oc-1"]);
    assert_eq!(ids(store.due_callbacks(T0 + 10, "opencode://lap/", 10).await.unwrap()), Vec::<String>::new());
    assert_eq!(due(&store, T0 + 10).await, ["cb-1"], "an http sender reads no reply to opencode");
    store.close().await;
}

async fn one_sender_at_a_time_takes_a_due_callback(place: Place) {
    let store = place.open().await;
    let run = waiting(&store).await;
    add(&store, callback("cb-1", run.id)).await.unwrap();
    store.finish_run(run.id, RunStatus::Finished, "done", T0 + 5).await.unwrap();
    let (a, b) = tokio::join!(take(&store, "cb-1", T0 + 10), take(&store, "cb-1", T0 + 10));
    assert!(a.is_some() ^ b.is_some(), "one sender takes it: {a:?} {b:?}");
    assert_eq!(due(&store, T0 + 11).await, Vec::<String>::new(), "nobody else sends it while it is held");
    assert_eq!(due(&store, T0 + 10 + 60_000).await, ["cb-1"], "a sender that died lets go when its lease ends");
    // The next sender takes it; the first one, late, can no longer record anything.
    let late = a.or(b);
    let next = take(&store, "cb-1", T0 + 10 + 60_000).await;
    assert!(next.is_some());
    let undo = CallbackTry::Retry { next_at: T0 + 1_000_000, error: "timed out".into() };
    assert!(!tried(&store, "cb-1", T0 + 60_020, late, undo).await, "a lease that ran out records nothing");

    let retry = CallbackTry::Retry { next_at: T0 + 61_000, error: "503".into() };
    assert!(tried(&store, "cb-1", T0 + 60_020, next, retry).await);
    assert_eq!(due(&store, T0 + 60_999).await, Vec::<String>::new(), "it pauses between attempts");
    assert_eq!(take(&store, "cb-1", T0 + 60_999).await, None, "nor is it taken during the pause");
    let again = store.due_callbacks(T0 + 61_000, "http", 10).await.unwrap();
    assert_eq!(again.iter().map(|c| c.attempts).collect::<Vec<_>>(), [2], "each attempt was counted");
    store.close().await;
}

async fn a_settled_callback_is_never_due_again(place: Place) {
    let store = place.open().await;
    let open = |to: &'static str| {
        let store = store.clone();
        async move { store.callbacks_open(to).await.unwrap() }
    };
    assert!(!open("http").await, "an empty outbox has nothing open");
    let (one, two) = (waiting(&store).await, waiting(&store).await);
    add(&store, callback("cb-delivered", one.id)).await.unwrap();
    add(&store, callback("cb-open", two.id)).await.unwrap();
    assert!(open("http").await, "open while its run waits");
    assert!(!open("opencode://").await, "only the route's own rows count");
    for run in [&one, &two] {
        store.finish_run(run.id, RunStatus::Cancelled, "", T0 + 5).await.unwrap();
    }
    let lease = take(&store, "cb-delivered", T0 + 10).await;
    assert!(tried(&store, "cb-delivered", T0 + 11, lease, CallbackTry::Delivered).await);
    assert_eq!(take(&store, "cb-delivered", T0 + 86_400_000).await, None, "a delivered callback is not taken again");
    assert_eq!(due(&store, T0 + 86_400_000).await, ["cb-open"]);
    let lease = take(&store, "cb-open", T0 + 13).await;
    assert!(tried(&store, "cb-open", T0 + 14, lease, CallbackTry::GaveUp { error: "gone".into() }).await);
    assert_eq!(due(&store, T0 + 86_400_000).await, Vec::<String>::new(), "given up: not tried again");
    assert!(!open("http").await, "delivered or given up, nothing is open");
    store.close().await;
}

async fn an_open_callback_survives_a_restart(place: Place) {
    let store = place.open().await;
    let three = waiting(&store).await;
    add(&store, callback("cb-later", three.id)).await.unwrap();
    store.finish_run(three.id, RunStatus::Failed, "", T0 + 20).await.unwrap();
    store.close().await;
    let store = place.open().await;
    assert_eq!(due(&store, T0 + 30).await, ["cb-later"], "the outbox is kept across a restart");
    store.close().await;
}

async fn pruning_deletes_only_settled_or_orphaned_callbacks(place: Place) {
    let store = place.open().await;
    let (ended, open) = (waiting(&store).await, waiting(&store).await);
    add(&store, callback("settled", ended.id)).await.unwrap();
    add(&store, callback("orphan", RunId::new())).await.unwrap();
    add(&store, callback("open", open.id)).await.unwrap();
    store.finish_run(ended.id, RunStatus::Finished, "", T0 + 1).await.unwrap();
    let lease = take(&store, "settled", T0 + 2).await;
    assert!(tried(&store, "settled", T0 + 3, lease, CallbackTry::Delivered).await);

    let (waited, _) = (waiting(&store).await, ());
    add(&store, callback("still-open", waited.id)).await.unwrap();
    store.finish_run(waited.id, RunStatus::Finished, "", T0 + 1).await.unwrap();
    store.prune(Some(T0 + 10), T0, 100).await.unwrap();
    assert!(store.run(waited.id).await.unwrap().is_some(), "an ended run is kept while its callback is open");
    assert_eq!(store.run(ended.id).await.unwrap(), None);
    // A pruned row's id is free again; a kept one's is not.
    for gone in ["settled", "orphan"] {
        add(&store, callback(gone, RunId::new())).await.unwrap_or_else(|e| panic!("{gone} was kept: {e}"));
    }
    let kept = add(&store, callback("open", RunId::new())).await;
    assert!(matches!(kept, Err(StoreError::Constraint(_))), "an open callback of a waiting run is kept: {kept:?}");
    store.close().await;
}

/// A sender of the outbox's rows to loopback: records the ids it was given.
struct Recorded(std::sync::Mutex<Vec<String>>);

#[async_trait::async_trait]
impl askgate::engine::Courier for Recorded {
    fn route(&self) -> &str {
        "http://127.0.0.1:9/"
    }

    async fn send(&self, callback: &Callback) -> askgate::engine::Sent {
        self.0.lock().unwrap().push(callback.id.clone());
        askgate::engine::Sent::Delivered
    }
}

/// An engine on `store` whose outbox's `http://127.0.0.1:9/` rows a [`Recorded`] sends.
async fn sending(store: Arc<dyn Store>) -> (askgate::engine::Engine, Arc<Recorded>) {
    let mut settings = askgate::engine::Settings::default();
    settings.channels.insert("test".into(), crate::support::anyone());
    let functions = crate::support::builtins();
    let engine = askgate::engine::Engine::new(store, functions, settings, askgate::clock::Clock::manual(T0));
    engine.delivery().attach(Arc::new(crate::support::Recorder::default()));
    engine.start().await.unwrap();
    let courier = Arc::new(Recorded(std::sync::Mutex::default()));
    engine.callbacks().deliver(courier.clone());
    (engine, courier)
}

/// Asks an agent's question (calling back as `callback` says) and answers it: a resolution.
async fn resolved(engine: &askgate::engine::Engine, callback: Option<askgate::engine::CallbackSpec>) {
    use crate::support::{alice, room};
    use askgate::question::{Answerers, Ask};
    let ask = Ask::question("Ship it?").options(["yes", "no"]).answerers(Answerers::Users { users: vec![alice()] });
    let question = engine.asks().ask_external_with(room(), ask, alice(), callback).await.unwrap();
    let resolver = askgate::engine::Resolver::person(alice(), askgate::question::Surface::API);
    engine.claims().resolve(&question, "yes", &resolver).await.unwrap();
    // Read back through the store, which hands the sender its turn on the way.
    engine.records().question(question.id).await.unwrap();
}

#[tokio::test]
async fn a_resolution_reads_the_outbox_only_while_a_callback_may_be_open() {
    use crate::support::eventually;
    let dir = tempfile::TempDir::new().unwrap();
    let path = crate::support::db_path(dir.path());
    let sqlite = askgate::store::SqliteStore::open(path.to_str().unwrap(), askgate::store::Synchronous::Normal);
    let store = Arc::new(crate::support::reads::Counting::new(Arc::new(sqlite.await.unwrap())));
    let (engine, courier) = sending(store.clone()).await;
    // The sender's first look: nothing open, nothing read.
    eventually(|| async { (store.outbox_reads().1 == 1).then_some(()) }).await;

    for _ in 0..5 {
        resolved(&engine, None).await;
    }
    assert_eq!(store.outbox_reads(), (0, 1), "no callback was asked for: the resolutions read no outbox");

    let spec = askgate::engine::CallbackSpec { url: "http://127.0.0.1:9/hook".into(), headers: vec![], secret: None };
    resolved(&engine, Some(spec)).await;
    eventually(|| async { (courier.0.lock().unwrap().len() == 1).then_some(()) }).await;
    let (due, open) = store.outbox_reads();
    assert!(due >= 1, "the callback's resolution read the due rows");
    assert_eq!(open, 1, "sent on its resolution, not at the next periodic look");
    engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_row_another_instance_left_is_sent_at_the_next_look_while_events_keep_coming() {
    let store: Arc<dyn Store> = Arc::new(askgate::store::MemoryStore::new());
    let (engine, courier) = sending(store.clone()).await;
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    // A row this instance did not write (another left it), due now: only a look finds it.
    let run = waiting(&store).await;
    add(&store, callback("left", run.id)).await.unwrap();
    store.finish_run(run.id, RunStatus::Finished, "done", T0 + 1).await.unwrap();
    // A resolution every second, for longer than two looks apart.
    for _ in 0..12 {
        resolved(&engine, None).await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert_eq!(*courier.0.lock().unwrap(), ["left"], "the look came at its time, events or not");
    engine.shutdown().await;
}
