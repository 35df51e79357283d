//! A stop ends what is under way: nothing it waits for is left running when the store closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use askgate::engine::{
    Channel, ChannelError, Context, ExternalAskError, Function, FunctionError, Functions, RunRequest,
};
use askgate::question::{Answerers, Ask, Conversation, Mode, Question, Surface};
use askgate::run::RunStatus;
use askgate::store::{Delivery, StoreExt};
use async_trait::async_trait;

use crate::support::{Harness, alice, eventually, room};

/// A platform that never answers: whatever is sent to it hangs.
struct Silent;

#[async_trait]
impl Channel for Silent {
    fn name(&self) -> &'static str {
        "test"
    }

    fn surface(&self) -> Surface {
        Surface::OTHER
    }

    async fn show_question(&self, _question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        std::future::pending().await
    }

    async fn retract(&self, _question: &Question, _cards: &[Delivery]) -> Result<(), ChannelError> {
        std::future::pending().await
    }

    async fn send_text(&self, _conversation: &Conversation, _text: &str) -> Result<(), ChannelError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_lane_whose_platform_never_answers_ends_when_its_grace_at_the_stop_runs_out() {
    let h = Harness::new(Functions::new()).await;
    h.engine.delivery().attach(Arc::new(Silent));
    let other = Conversation::parse("test:other").unwrap();
    for conversation in [room(), other] {
        h.engine.delivery().send_text(&conversation, "are you there?".into());
    }
    let tasks = h.engine.tasks().clone();
    h.engine.shutdown().await;
    // The lanes gave up what they held when their grace ran out, so that the tracker's drain
    // found nothing left; a lane still counted would be waited out, then left running.
    assert!(tasks.is_empty(), "{} tasks outlived the stop", tasks.len());
}

#[tokio::test]
async fn an_agents_ask_made_once_the_stop_has_begun_is_refused_with_nothing_stored() {
    let h = Harness::new(Functions::new()).await;
    h.engine.begin_shutdown().await;
    let ask = Ask::question("Still there?").answerers(Answerers::Users { users: vec![alice()] });
    let asked = h.engine.asks().ask_external(room(), ask, alice()).await;
    assert!(matches!(asked, Err(ExternalAskError::ShuttingDown)), "the ask was not refused: {asked:?}");
    assert_eq!(h.engine.records().pending_count().await.unwrap(), 0, "the refused ask was stored");
    assert!(h.recorder.cards().is_empty(), "the refused ask was shown");
}

/// A function that never returns: it says it started, then awaits forever.
struct Stuck {
    started: Arc<AtomicBool>,
}

#[async_trait]
impl Function for Stuck {
    async fn call(&self, _ctx: &mut Context, _input: &str) -> Result<String, FunctionError> {
        self.started.store(true, Ordering::SeqCst);
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_turn_that_never_returns_is_dropped_at_the_stop_leaving_its_run_running() {
    let started = Arc::new(AtomicBool::new(false));
    let mut functions = Functions::new();
    functions.insert("stuck", "never returns", Arc::new(Stuck { started: started.clone() }));
    let h = Harness::new(functions).await;
    // Stored before its turn starts, as the API starts a run: the store knows it is `running`.
    let request = RunRequest::new("stuck", Some(room()), alice());
    let run = h.engine.runner().start_stored_run(request, Mode::FollowUp, None).await.unwrap();
    eventually(|| async { started.load(Ordering::SeqCst).then_some(()) }).await;
    // The turn gets its grace, then is dropped: the stop does not wait on it for ever. (A
    // bound well above the grace, so that only a stop that hangs fails here.)
    let stopped = tokio::time::timeout(Duration::from_secs(60), h.engine.shutdown()).await;
    assert!(stopped.is_ok(), "the stop waited on a turn that never returns");
    // Dropped, not failed: the run is left `running`, so the next start replays it.
    let store = h.place.open().await;
    let stored = store.run(run).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Running, "{stored:?}");
}
