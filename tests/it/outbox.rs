//! The callbacks' outbox, written once and run on every store (as `conformance.rs`): a
//! callback is due once its run has ended, taken by one sender at a time, paused between
//! attempts, never sent again once delivered, and kept across a restart.

use std::sync::Arc;

use crate::backend::Place;
use crate::support::{T0, waiting_run};
use askgate::question::RunId;
use askgate::run::{Run, RunStatus};
use askgate::store::{Callback, CallbackTry, Store, StoreError, StoreExt, Write, Written};

crate::backend::on_every_store!(
    a_callback_is_due_once_its_run_ended_and_one_sender_takes_it,
    a_delivered_callback_is_never_due_again_and_an_open_one_survives_a_restart,
    pruning_deletes_settled_and_orphaned_callbacks_only,
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

async fn add(store: &Arc<dyn Store>, callback: Callback) -> Result<Written, StoreError> {
    store.write(Write::Callback(Box::new(callback))).await
}

async fn take(store: &Arc<dyn Store>, id: &str, now: i64) -> bool {
    let take = Write::TakeCallback { id: id.to_owned(), now, until: now + 60_000 };
    matches!(store.write(take).await.unwrap(), Written::Changed(true))
}

async fn tried(store: &Arc<dyn Store>, id: &str, at: i64, tried: CallbackTry) {
    store.write(Write::CallbackTried { id: id.to_owned(), at, tried }).await.unwrap();
}

async fn due(store: &Arc<dyn Store>, now: i64) -> Vec<String> {
    store.due_callbacks(now, 10).await.unwrap().into_iter().map(|c| c.id).collect()
}

/// A run that waits, stored with its question as an ask does.
async fn waiting(store: &Arc<dyn Store>) -> Run {
    let run = waiting_run("test:room", "");
    let question = crate::conformance::question(&run, 0, "Ship it?");
    store.ask(&run, &Arc::new(question)).await.unwrap();
    run
}

async fn a_callback_is_due_once_its_run_ended_and_one_sender_takes_it(place: Place) {
    let store = place.open().await;
    let run = waiting_run("test:room", "");
    add(&store, callback("cb-1", run.id)).await.unwrap();
    assert_eq!(due(&store, T0 + 10).await, Vec::<String>::new(), "its run is not written yet");
    let question = crate::conformance::question(&run, 0, "Ship it?");
    store.ask(&run, &Arc::new(question)).await.unwrap();
    assert_eq!(due(&store, T0 + 10).await, Vec::<String>::new(), "its run waits");
    store.finish_run(run.id, RunStatus::Finished, "done", T0 + 5).await.unwrap();
    let read = store.due_callbacks(T0 + 10, 10).await.unwrap();
    assert_eq!(read, [Callback { ended_at: Some(T0 + 5), ..callback("cb-1", run.id) }], "read back exactly");

    let (a, b) = tokio::join!(take(&store, "cb-1", T0 + 10), take(&store, "cb-1", T0 + 10));
    assert!(a ^ b, "one sender takes it: {a} {b}");
    assert_eq!(due(&store, T0 + 11).await, Vec::<String>::new(), "nobody else sends it while it is held");
    assert_eq!(due(&store, T0 + 10 + 60_000).await, ["cb-1"], "a sender that died lets go when its lease ends");

    tried(&store, "cb-1", T0 + 20, CallbackTry::Retry { next_at: T0 + 1_000, error: "503".into() }).await;
    assert_eq!(due(&store, T0 + 999).await, Vec::<String>::new(), "it pauses between attempts");
    let again = store.due_callbacks(T0 + 1_000, 10).await.unwrap();
    assert_eq!(again.iter().map(|c| c.attempts).collect::<Vec<_>>(), [1], "the attempt was counted");
    store.close().await;
}

async fn a_delivered_callback_is_never_due_again_and_an_open_one_survives_a_restart(place: Place) {
    let store = place.open().await;
    let (one, two) = (waiting(&store).await, waiting(&store).await);
    add(&store, callback("cb-delivered", one.id)).await.unwrap();
    add(&store, callback("cb-open", two.id)).await.unwrap();
    for run in [&one, &two] {
        store.finish_run(run.id, RunStatus::Cancelled, "", T0 + 5).await.unwrap();
    }
    assert!(take(&store, "cb-delivered", T0 + 10).await);
    tried(&store, "cb-delivered", T0 + 11, CallbackTry::Delivered).await;
    assert!(!take(&store, "cb-delivered", T0 + 12).await, "a delivered callback is not taken again");
    assert_eq!(due(&store, T0 + 86_400_000).await, ["cb-open"]);
    assert!(take(&store, "cb-open", T0 + 13).await);
    tried(&store, "cb-open", T0 + 14, CallbackTry::GaveUp { error: "gone".into() }).await;
    assert_eq!(due(&store, T0 + 86_400_000).await, Vec::<String>::new(), "given up: not tried again");

    let three = waiting(&store).await;
    add(&store, callback("cb-later", three.id)).await.unwrap();
    store.finish_run(three.id, RunStatus::Failed, "", T0 + 20).await.unwrap();
    store.close().await;
    let store = place.open().await;
    assert_eq!(due(&store, T0 + 30).await, ["cb-later"], "the outbox is kept across a restart");
    store.close().await;
}

async fn pruning_deletes_settled_and_orphaned_callbacks_only(place: Place) {
    let store = place.open().await;
    let (ended, open) = (waiting(&store).await, waiting(&store).await);
    add(&store, callback("settled", ended.id)).await.unwrap();
    add(&store, callback("orphan", RunId::new())).await.unwrap();
    add(&store, callback("open", open.id)).await.unwrap();
    store.finish_run(ended.id, RunStatus::Finished, "", T0 + 1).await.unwrap();
    assert!(take(&store, "settled", T0 + 2).await);
    tried(&store, "settled", T0 + 3, CallbackTry::Delivered).await;

    store.prune(Some(T0 + 10), T0, 100).await.unwrap();
    // A pruned row's id is free again; a kept one's is not.
    for gone in ["settled", "orphan"] {
        add(&store, callback(gone, RunId::new())).await.unwrap_or_else(|e| panic!("{gone} was kept: {e}"));
    }
    let kept = add(&store, callback("open", RunId::new())).await;
    assert!(matches!(kept, Err(StoreError::Constraint(_))), "an open callback of a waiting run is kept: {kept:?}");
    store.close().await;
}
