//! Reminders and escalation, through the real engine on a manual clock: each reminder once at
//! its time, one after a restart for what was missed, none after the question ended; an
//! unanswered question shown in the escalation conversation, answered there by its people,
//! and retracted everywhere.

use std::sync::Arc;
use std::time::Duration;

use askgate::clock::Clock;
use askgate::engine::{Context, Function, FunctionError, Functions, Inbound, Settings};
use askgate::question::{Ask, Conversation, Nudges, Receipt, Status, Surface, Timeout, UserRef};
use async_trait::async_trait;

use crate::backend::Place;
use crate::support::*;
use askgate::store::StoreExt;

const MIN: i64 = 60_000;
const OPS: &str = "test:ops";
const CAROL: &str = "test:carol";

/// Asks one question with a 30-minute timeout; with input `nudged`, reminders every 10
/// minutes and 5 minutes before it expires.
struct Asks;

#[async_trait]
impl Function for Asks {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let mut ask = Ask::question("Ship it?").options(["yes", "no"]).timeout(Timeout::Seconds(1800));
        if input == "nudged" {
            ask = ask.remind_every(Duration::from_secs(600)).remind_before(Duration::from_secs(300));
        }
        let answer = ctx.ask(ask).await?;
        Ok(format!("answered {}", answer.text()))
    }
}

fn functions() -> Functions {
    let mut f = Functions::new();
    f.insert("asks", "one question", Arc::new(Asks));
    f.insert_entry("approve-demo", builtins().get("approve-demo").unwrap().clone());
    f
}

/// The test channel escalating what nobody answered for 10 minutes to `OPS`, where
/// `answerers` (or anyone) may answer.
fn escalating(answerers: Option<Vec<UserRef>>) -> Settings {
    let mut settings = Settings::default();
    let escalation = Nudges {
        escalate_after: Some(10 * 60_000),
        escalate_to: Some(Conversation::parse(OPS).unwrap()),
        escalate_answerers: answerers,
        ..Nudges::default()
    };
    settings.channels.insert("test".into(), askgate::engine::ChannelPolicy { nudges: escalation, ..anyone() });
    settings
}

fn reminders(h: &Harness) -> Vec<String> {
    h.recorder.texts().into_iter().filter(|t| t.starts_with("⏰ Reminder")).collect()
}

/// Moves the manual clock forward to `at`.
fn set_clock(h: &Harness, at: i64) {
    h.clock.advance(at - h.clock.now_ms());
}

/// Moves the clock to `T0 + minutes` and waits until `n` reminders were sent.
async fn at(h: &Harness, minutes: i64, n: usize) -> Vec<String> {
    set_clock(h, T0 + minutes * MIN);
    eventually(|| async { Some(reminders(h)).filter(|r| r.len() >= n) }).await
}

/// Waits until the sweeper looked at the clock's time (it wakes when the clock moves) and the
/// lanes delivered what it sent: anything due by then has been sent.
async fn settle(h: &Harness) {
    h.engine.swept(h.clock.now_ms()).await;
    h.engine.delivery().outbound_idle().await;
}

async fn each_reminder_comes_once_when_it_is_due(place: Place) {
    let h = Harness::on(place, functions(), Settings::default(), Clock::manual(T0)).await;
    let run = h.run("asks", "nudged").await;
    let card = h.card(1).await;
    let id = card.id.short();
    set_clock(&h, T0 + 9 * MIN);
    settle(&h).await;
    assert!(reminders(&h).is_empty(), "none before its time");
    let first = at(&h, 10, 1).await;
    assert!(first[0].starts_with(&format!("⏰ Reminder {ALICE}: this still waits for an answer.")), "{}", first[0]);
    assert!(first[0].contains(&format!("/answer {id} 1")), "the card's commands: {}", first[0]);
    assert!(first[0].contains("expires in 20m"), "{}", first[0]);
    at(&h, 20, 2).await;
    at(&h, 25, 3).await;
    set_clock(&h, T0 + 28 * MIN);
    settle(&h).await;
    assert_eq!(reminders(&h).len(), 3, "each reminder once");
    h.say(ALICE, "yes").await;
    h.finished(run).await;
    set_clock(&h, T0 + 60 * MIN);
    settle(&h).await;
    assert_eq!(reminders(&h).len(), 3, "none after it ended");
}

async fn a_reminder_missed_while_askgate_was_down_is_sent_once_after_the_restart(place: Place) {
    let settings = || Settings { remind_before: Some(Duration::from_secs(300)), ..Settings::default() };
    let h = Harness::on(place, functions(), settings(), Clock::manual(T0)).await;
    h.run("asks", "").await;
    let card = h.card(1).await;
    assert!(reminders(&h).is_empty());
    // Down from minute 1 to minute 27: the reminder due at 25 comes once, at the start.
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 27 * MIN)).await;
    let sent = eventually(|| async { Some(reminders(&h)).filter(|r| !r.is_empty()) }).await;
    assert!(sent[0].contains(&card.id.short()), "{}", sent[0]);
    settle(&h).await;
    assert_eq!(reminders(&h).len(), 1);
    // Another restart sends nothing again.
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 28 * MIN)).await;
    settle(&h).await;
    assert!(reminders(&h).is_empty(), "{:?}", reminders(&h));
}

async fn an_unanswered_question_is_escalated_answered_there_and_retracted_everywhere(place: Place) {
    let settings = escalating(Some(vec![UserRef::parse(CAROL).unwrap()]));
    let h = Harness::on(place, functions(), settings, Clock::manual(T0)).await;
    let run = h.run("approve-demo", "").await;
    let card = h.card(1).await;
    let id = card.id.short();
    let in_ops = |user: &str, text: String| {
        let inbound =
            Inbound::text(Conversation::parse(OPS).unwrap(), UserRef::parse(user).unwrap(), Surface::CONSOLE, text);
        h.engine.router().handle(inbound)
    };
    let early = in_ops(CAROL, format!("/approve {id}")).await;
    assert!(matches!(early.receipt, Some(Receipt::Unknown { .. })), "not escalated yet: {early:?}");

    set_clock(&h, T0 + 10 * MIN);
    let escalated = h.card(2).await;
    assert_eq!((escalated.id, escalated.conversation.as_ref().map(Conversation::as_str)), (card.id, Some(OPS)));
    // Its delivery is recorded after it was shown (on PostgreSQL in a later batch); answered
    // before that, the late card is retracted on its own, a second retraction.
    eventually(|| async { (h.store.deliveries(card.id).await.unwrap().len() == 2).then_some(()) }).await;
    // And the escalation's lane is done with it: right after recording the card it checks whether
    // the question ended meanwhile (a resolution now would have that lane retract its card too).
    h.engine.delivery().outbound_idle().await;
    assert_eq!(h.question(&card).await.escalated_to.as_ref().map(Conversation::as_str), Some(OPS));
    assert!(
        h.recorder.texts().contains(&format!("⬆️ Nobody answered this in {ROOM} for 10m:")),
        "{:?}",
        h.recorder.texts()
    );
    let bob = in_ops(BOB, format!("/approve {id}")).await;
    assert!(matches!(bob.receipt, Some(Receipt::NotAuthorized { .. })), "escalate_answerers names carol: {bob:?}");
    let listed = in_ops(CAROL, "/pending".to_owned()).await.text.unwrap();
    assert!(listed.contains(&format!("/approve {id}")), "escalated questions are listed there: {listed}");
    // A plain reply there answers it, as in its own conversation.
    let carol = in_ops(CAROL, "once".to_owned()).await;
    assert!(matches!(carol.receipt, Some(Receipt::Resolved { .. })), "{carol:?}");
    assert!(h.finished(run).await.result.unwrap().starts_with("Allowed once"));
    h.engine.delivery().outbound_idle().await;
    let cards = h.store.deliveries(card.id).await.unwrap();
    let mut chats: Vec<&str> = cards.iter().map(|d| d.chat.as_str()).collect();
    chats.sort_unstable();
    assert_eq!(chats, [OPS, ROOM]);
    let retracted = h.recorder.retracted();
    assert_eq!(retracted.len(), 1, "one retraction of both cards on the one channel");
    assert_eq!(retracted[0].status, Status::Answered);
    let mut gone: Vec<String> = h.recorder.retracted_cards().into_iter().map(|d| d.chat).collect();
    gone.sort_unstable();
    assert_eq!(gone, [OPS, ROOM], "the card in each conversation was retracted");
    // Escalated once.
    set_clock(&h, T0 + 40 * MIN);
    settle(&h).await;
    assert_eq!(h.recorder.cards().len(), 2);
}

/// A channel's escalation does not apply in the conversation it escalates to: questions
/// asked there are asked as usual, and stay there.
#[tokio::test]
async fn a_question_asked_where_its_channel_escalates_to_stays_there() {
    let h = Harness::on(Place::sqlite(), functions(), escalating(None), Clock::manual(T0)).await;
    let ops = Conversation::parse(OPS).unwrap();
    let request = askgate::engine::RunRequest::new("asks", Some(ops.clone()), UserRef::parse(CAROL).unwrap());
    h.engine.runner().start_run(request, askgate::question::Mode::FollowUp).await.unwrap();
    let card = h.card(1).await;
    assert_eq!(card.conversation.as_ref(), Some(&ops));
    assert_eq!(card.nudges.escalate_to, None, "{:?}", card.nudges);
    set_clock(&h, T0 + 20 * MIN);
    settle(&h).await;
    assert_eq!(h.recorder.cards().len(), 1, "not escalated to itself");
}

async fn a_question_left_waiting_across_a_restart_is_escalated_after_it(place: Place) {
    let settings = || escalating(None);
    let h = Harness::on(place, functions(), settings(), Clock::manual(T0)).await;
    h.run("approve-demo", "").await;
    let card = h.card(1).await;
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 12 * MIN)).await;
    let escalated = h.card(1).await;
    assert_eq!((escalated.id, escalated.conversation.as_ref().map(Conversation::as_str)), (card.id, Some(OPS)));
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 13 * MIN)).await;
    settle(&h).await;
    assert!(h.recorder.cards().is_empty(), "escalated once: {:?}", h.recorder.cards());
}

/// An escalation card that could not be delivered before a stop is shown after the restart,
/// once, with the line that says why; the question's own card is not shown again.
async fn an_escalation_card_not_delivered_before_a_stop_is_shown_after_it(place: Place) {
    let settings = || escalating(None);
    let h = Harness::on(place, functions(), settings(), Clock::manual(T0)).await;
    h.run("approve-demo", "").await;
    let card = h.card(1).await;
    h.recorder.down_in(OPS);
    set_clock(&h, T0 + 11 * MIN);
    eventually(|| async { h.question(&card).await.escalated_to }).await;
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 12 * MIN)).await;
    let shown = h.card(1).await;
    assert_eq!((shown.id, shown.conversation.as_ref().map(Conversation::as_str)), (card.id, Some(OPS)));
    let why: Vec<String> = h.recorder.texts().into_iter().filter(|t| t.starts_with("⬆️")).collect();
    assert_eq!(why.len(), 1, "{why:?}");
    settle(&h).await;
    assert_eq!(h.recorder.cards().len(), 1, "only the missing card: {:?}", h.recorder.cards());
    let h = h.restart(functions(), settings(), Clock::manual(T0 + 13 * MIN)).await;
    settle(&h).await;
    assert!(h.recorder.cards().is_empty(), "shown once: {:?}", h.recorder.cards());
}

/// A question escalated to a conversation on a webhook endpoint: that conversation gets the
/// card with its commands, then the outcome line, as the question's own conversation does;
/// from another webhook conversation (the same channel) and from another channel alike.
#[tokio::test]
async fn a_conversation_on_a_webhook_a_question_was_escalated_to_hears_its_outcome() {
    use askgate::config::Env;
    use serde_json::json;

    use crate::http::{App, receiver};

    let (out, got) = {
        let (out, got, _) = receiver("hush").await;
        (out, got)
    };
    let extra = format!("\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"SMS_SECRET\"\n");
    let app = App::start(&extra, Env::from_pairs([("SMS_SECRET", "hush")])).await;
    // What the ops conversation received, as (text) in order.
    let in_ops = || -> Vec<String> {
        got.lock().unwrap().iter().filter(|m| m.conversation == "ops").map(|m| m.text.clone()).collect()
    };
    for own in ["webhook:sms:+15550001", "console:local"] {
        let prompt = format!("Ship it from {own}?");
        let body = json!({"conversation": own, "prompt": prompt, "options": ["yes", "no"],
            "answerers": ["api:operator"], "escalate_after": 1, "escalate_to": "webhook:sms:ops"});
        let (status, asked) = app.post("/api/questions", body).await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
        let id = asked["id"].as_str().unwrap().to_owned();
        let short = &id[..8];
        let card = eventually(|| async { in_ops().into_iter().find(|t| t.contains(&prompt)) }).await;
        assert!(card.contains(&format!("/answer {short} 1")), "the card lists its commands: {card}");
        // Answered once the escalated card is recorded, as a person could only answer it then:
        // a card recorded after its question ended is retracted on its own, a second line.
        eventually(|| async {
            let (_, q) = app.get(&format!("/api/questions/{id}")).await;
            q["deliveries"].as_array()?.iter().any(|d| d["conversation"] == "webhook:sms:ops").then_some(())
        })
        .await;
        let (status, receipt) = app.post(&format!("/api/questions/{id}/reply"), json!({"value": "yes"})).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{receipt}");
        let outcome =
            eventually(|| async { in_ops().into_iter().find(|t| t.starts_with(&format!("[{short}] ✅"))) }).await;
        assert!(outcome.contains("yes"), "{outcome}");
        if own.starts_with("webhook:") {
            // Its own conversation hears it too, once.
            let own_lines = || -> usize {
                got.lock()
                    .unwrap()
                    .iter()
                    .filter(|m| m.conversation == "+15550001" && m.text.starts_with(&format!("[{short}]")))
                    .count()
            };
            eventually(|| async { (own_lines() == 1).then_some(()) }).await;
        }
        let told: Vec<String> = in_ops().into_iter().filter(|t| t.starts_with(&format!("[{short}]"))).collect();
        assert_eq!(told.len(), 1, "once: {told:?}");
    }
    app.stop().await;
}

/// Two instances on one PostgreSQL database sweep the same questions: each reminder is sent
/// by one of them, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_instances_sweeping_each_reminder_is_sent_once() {
    const QUESTIONS: usize = 20;
    let place = Place::postgres().await;
    let a = Harness::on(place.clone(), functions(), Settings::default(), Clock::manual(T0)).await;
    let b = Harness::on(place.clone(), functions(), Settings::default(), Clock::manual(T0)).await;
    for _ in 0..QUESTIONS {
        a.run("asks", "nudged").await;
    }
    a.card(QUESTIONS).await;
    let total = || reminders(&a).len() + reminders(&b).len();
    for (minute, expected) in [(10, QUESTIONS), (20, 2 * QUESTIONS)] {
        set_clock(&a, T0 + minute * MIN);
        set_clock(&b, T0 + minute * MIN);
        eventually(|| async { (total() >= expected).then_some(()) }).await;
        settle(&a).await;
        settle(&b).await;
        assert_eq!(total(), expected, "minute {minute}: {} by a, {} by b", reminders(&a).len(), reminders(&b).len());
    }
    b.engine.shutdown().await;
}

crate::backend::on_every_store!(
    each_reminder_comes_once_when_it_is_due,
    a_reminder_missed_while_askgate_was_down_is_sent_once_after_the_restart,
    an_unanswered_question_is_escalated_answered_there_and_retracted_everywhere,
    a_question_left_waiting_across_a_restart_is_escalated_after_it,
    an_escalation_card_not_delivered_before_a_stop_is_shown_after_it,
);
