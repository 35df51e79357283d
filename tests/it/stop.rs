//! A stop ends what is under way: nothing it waits for is left running when the store closes.

use std::sync::Arc;

use askgate::engine::{Channel, ChannelError, ExternalAskError, Functions};
use askgate::question::{Answerers, Ask, Conversation, Question, Surface};
use askgate::store::Delivery;
use async_trait::async_trait;

use crate::support::{Harness, alice, room};

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
