//! Cards asked faster than a channel shows them: the lanes hold a bounded number, the rest
//! wait in the store and are shown once each, in the order asked (on every store).

use std::sync::Arc;

use askgate::clock::Clock;
use askgate::engine::Settings;
use askgate::question::{Answerers, Ask, QuestionId, Timeout};
use askgate::store::{StoreExt, Unshown};
use sqlx::Connection;

use crate::backend::Place;
use crate::support::{Harness, T0, alice, builtins, eventually, room, waiting_run};

crate::backend::on_every_store!(
    cards_asked_faster_than_shown_wait_in_the_store_to_be_shown_once_in_order,
    cards_asked_in_four_conversations_while_the_channel_catches_up_are_each_shown_once_in_order,
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
    shown_at_least(h, ASKED).await;
    h.recorder.cards().iter().map(|q| q.id).collect()
}

/// Waits until `n` cards were shown: thousands go through one lane, each recorded in the store
/// before the next, which on a busy machine takes longer than [`eventually`]'s 20 seconds.
async fn shown_at_least(h: &Harness, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while h.recorder.card_count() < n {
        assert!(std::time::Instant::now() < deadline, "{} of {n} cards shown in 3 minutes", h.recorder.card_count());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
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

async fn cards_asked_faster_than_shown_wait_in_the_store_to_be_shown_once_in_order(place: Place) {
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

/// Asks go on in four conversations (four lanes, as a conversation always takes one) while
/// the channel starts showing halfway: cards are turned away, read back and shown at once.
async fn cards_asked_in_four_conversations_while_the_channel_catches_up_are_each_shown_once_in_order(place: Place) {
    const EACH: usize = 700;
    let h = Arc::new(Harness::on(place, builtins(), Settings::default(), Clock::manual(T0)).await);
    h.recorder.pause();
    let asks = (0..4).map(|n| {
        let h = h.clone();
        tokio::spawn(async move {
            let conversation = askgate::question::Conversation::parse(&format!("test:room{n}")).unwrap();
            let mut asked = Vec::with_capacity(EACH);
            for i in 0..EACH {
                let ask = Ask::question(format!("Q{n}.{i}"))
                    .timeout(Timeout::Never)
                    .answerers(Answerers::Users { users: vec![alice()] });
                asked.push(h.engine.asks().ask_external(conversation.clone(), ask, alice()).await.unwrap().id);
                if n == 0 && i == EACH / 2 {
                    h.recorder.resume();
                }
            }
            (conversation, asked)
        })
    });
    let asked = futures_util::future::join_all(asks).await;
    shown_at_least(&h, 4 * EACH).await;
    h.engine.delivery().outbound_idle().await;
    let shown = h.recorder.cards();
    assert_eq!(shown.len(), 4 * EACH, "each card once");
    for asked in asked {
        let (conversation, asked) = asked.unwrap();
        let here: Vec<QuestionId> =
            shown.iter().filter(|q| q.conversation.as_ref() == Some(&conversation)).map(|q| q.id).collect();
        once_in_order(&here, &asked);
    }
    assert_eq!(h.engine.delivery().cards_held(), 0);
}

async fn a_restart_shows_the_cards_that_waited_once_in_order(place: Place) {
    let h = Harness::on(place.clone(), builtins(), Settings::default(), Clock::manual(T0)).await;
    h.recorder.pause();
    let mut asked = ask_many(&h).await;
    h.engine.shutdown().await;
    // Started again with a channel as slow: the cards of before the stop are shown again over
    // the bound, beside questions asked meanwhile.
    let recorder = Arc::new(crate::support::Recorder::default());
    recorder.pause();
    let h = Harness::showing_on(recorder, place, builtins(), Settings::default(), Clock::manual(T0 + 1_000)).await;
    for i in 0..500 {
        let ask = Ask::question(format!("Since {i}"))
            .timeout(Timeout::Never)
            .answerers(Answerers::Users { users: vec![alice()] });
        asked.push(h.engine.asks().ask_external(room(), ask, alice()).await.unwrap().id);
    }
    let held = h.engine.delivery().cards_held();
    assert!((1..=1_024).contains(&held), "the lanes hold at most 1,024 cards, not {held}");
    h.recorder.resume();
    shown_at_least(&h, asked.len()).await;
    h.engine.delivery().outbound_idle().await;
    let shown: Vec<QuestionId> = h.recorder.cards().iter().map(|q| q.id).collect();
    let (mut before, mut since) = (shown.clone(), shown);
    // The redelivery and the new asks race for the lanes: each part in its own order.
    let split = ASKED;
    before.retain(|id| asked[..split].contains(id));
    since.retain(|id| asked[split..].contains(id));
    once_in_order(&before, &asked[..split]);
    once_in_order(&since, &asked[split..]);
    assert_eq!(h.recorder.cards().len(), asked.len(), "each card once");
    h.engine.shutdown().await;
}

/// Two askgates on one PostgreSQL database, each asked faster than its channel shows: each
/// shows the cards of its own questions once, in order, and none of the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_askgates_on_one_database_each_show_only_their_own_cards_that_waited() {
    let place = Place::postgres().await;
    let a = Harness::on(place.clone(), builtins(), Settings::default(), Clock::manual(T0)).await;
    let b = Harness::on(place.clone(), builtins(), Settings::default(), Clock::manual(T0)).await;
    a.recorder.pause();
    b.recorder.pause();
    let (asked_a, asked_b) = tokio::join!(ask_many(&a), ask_many(&b));
    a.recorder.resume();
    b.recorder.resume();
    once_in_order(&shown_all(&a).await, &asked_a);
    once_in_order(&shown_all(&b).await, &asked_b);
    a.engine.delivery().outbound_idle().await;
    b.engine.delivery().outbound_idle().await;
    assert_eq!((a.recorder.cards().len(), b.recorder.cards().len()), (ASKED, ASKED), "none of the other's");
    a.engine.shutdown().await;
    b.engine.shutdown().await;
}

/// On PostgreSQL a reader, and a start's redelivery, leave the questions another askgate asked
/// while that one lives, and find them once it was killed (its liveness lock went with its
/// connection), before the others see its heartbeat lapse.
#[tokio::test]
async fn the_questions_of_an_askgate_that_was_killed_are_read_by_the_others() {
    let place = Place::postgres().await;
    let Place::Postgres(database) = &place else { unreachable!() };
    let (a, b) = (place.open().await, place.open().await);
    let r = waiting_run("test:room", "");
    let q = crate::conformance::question(&r, 0, "Left behind?");
    a.ask(&r, &Arc::new(q.clone())).await.unwrap();
    let find = Unshown { after: 0, before: i64::MAX, channel: Some("test"), limit: 10 };
    let ids = |found: Vec<askgate::store::Undelivered>| found.into_iter().map(|u| u.question.id).collect::<Vec<_>>();
    assert_eq!(ids(b.undelivered(find).await.unwrap()), [], "a lives: its question is its own to show");
    assert_eq!(ids(a.undelivered(find).await.unwrap()), [q.id]);
    assert_eq!(ids(b.undelivered(Unshown { channel: None, ..find }).await.unwrap()), [], "nor a start's");

    // As after a SIGKILL: a's row stays, nobody holds the lock it names.
    let instance = a.sharing().unwrap().instance().to_owned();
    let mut admin = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::query("UPDATE instances SET lock_key = -7 WHERE id = $1").bind(&instance).execute(&mut admin).await.unwrap();
    assert_eq!(ids(b.undelivered(find).await.unwrap()), [q.id], "a is gone: b shows it");
    assert_eq!(ids(b.undelivered(Unshown { channel: None, ..find }).await.unwrap()), [q.id]);
    a.close().await;
    b.close().await;
}
