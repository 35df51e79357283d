//! Cards asked faster than a channel shows them: the lanes hold a bounded number, the rest
//! wait in the store and are shown once each, in the order asked (on every store).

use askgate::clock::Clock;
use askgate::engine::Settings;
use askgate::question::{Answerers, Ask, QuestionId, Timeout};

use crate::backend::Place;
use crate::support::{Harness, T0, alice, builtins, eventually, room};

crate::backend::on_every_store!(
    cards_asked_faster_than_shown_wait_in_the_store_and_are_shown_once_in_order,
    a_restart_shows_the_cards_that_waited_once_in_order,
);

/// Over twice the cards a group's lanes hold (1,024).
const ASKED: usize = 2_500;

async fn ask_many(h: &Harness) -> Vec<QuestionId> {
    let mut asked = Vec::with_capacity(ASKED);
    for i in 0..ASKED {
        let ask =
            Ask::question(format!("Q{i}")).timeout(Timeout::Never).answerers(Answerers::Users { users: vec![alice()] });
        asked.push(h.engine.asks().ask_external(room(), ask, alice()).await.unwrap().id);
    }
    asked
}

async fn shown_all(h: &Harness) -> Vec<QuestionId> {
    eventually(|| async {
        let shown: Vec<QuestionId> = h.recorder.cards().iter().map(|q| q.id).collect();
        (shown.len() >= ASKED).then_some(shown)
    })
    .await
}

/// Checks that `shown` is `asked`, each once in order; says where it is not.
fn once_in_order(shown: &[QuestionId], asked: &[QuestionId]) {
    let distinct: std::collections::HashSet<_> = shown.iter().collect();
    let first_off = shown.iter().zip(asked).position(|(s, a)| s != a);
    assert!(
        shown == asked,
        "{} shown ({} distinct) of {} asked; the first out of order at {first_off:?}",
        shown.len(),
        distinct.len(),
        asked.len()
    );
}

async fn cards_asked_faster_than_shown_wait_in_the_store_and_are_shown_once_in_order(place: Place) {
    let h = Harness::on(place, builtins(), Settings::default(), Clock::manual(T0)).await;
    h.recorder.pause();
    let asked = ask_many(&h).await;
    let held = h.engine.delivery().cards_held();
    assert!((1..=1_024).contains(&held), "the lanes hold at most 1,024 cards, not {held}");
    assert!(h.recorder.cards().is_empty());

    h.recorder.resume();
    h.engine.delivery().outbound_idle().await;
    once_in_order(&shown_all(&h).await, &asked);
    assert_eq!(h.engine.delivery().cards_held(), 0);
    // Asked after the backlog: straight through the lanes again.
    let ask = Ask::question("after").timeout(Timeout::Never).answerers(Answerers::Users { users: vec![alice()] });
    let after = h.engine.asks().ask_external(room(), ask, alice()).await.unwrap();
    eventually(|| async { h.recorder.cards().iter().any(|q| q.id == after.id).then_some(()) }).await;
    assert_eq!(h.recorder.cards().len(), ASKED + 1);
    h.engine.shutdown().await;
}

async fn a_restart_shows_the_cards_that_waited_once_in_order(place: Place) {
    let h = Harness::on(place, builtins(), Settings::default(), Clock::manual(T0)).await;
    h.recorder.pause();
    let asked = ask_many(&h).await;
    let h = h.restart(builtins(), Settings::default(), Clock::manual(T0 + 1_000)).await;
    once_in_order(&shown_all(&h).await, &asked);
    h.engine.delivery().outbound_idle().await;
    assert_eq!(h.recorder.cards().len(), ASKED);
    h.engine.shutdown().await;
}
