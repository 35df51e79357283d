//! Inbound routing and the command grammar, through `Router::handle`.

use std::sync::Arc;

use askgate::clock::Clock;
use askgate::engine::{Access, ChannelPolicy, Inbound, Settings};
use askgate::question::{Answerers, Conversation, Kind, Mode, Question, Receipt, RunId, Status, Surface};
use serde_json::json;
use tempfile::TempDir;

use crate::support::*;
use askgate::store::StoreExt;

async fn demo_waiting() -> (Harness, Question) {
    let h = Harness::new(builtins()).await;
    h.say(ALICE, "/run demo").await;
    let card = h.card(1).await;
    (h, card)
}

#[tokio::test]
async fn someone_who_is_not_an_answerer_changes_nothing() {
    let (h, card) = demo_waiting().await;
    let r = h.say(BOB, &format!("/answer {} 1", card.id.short())).await;
    assert_eq!(r.receipt, Some(Receipt::NotAuthorized { id: card.id }));
    assert_eq!(r.text.as_deref(), Some("Not yours to answer."));
    // A plain message from bob is not claimed by alice's question either.
    let r = h.say(BOB, "1").await;
    assert!(r.receipt.is_none(), "{r:?}");
    assert_eq!(h.question(&card).await.status, Status::Pending);
}

#[tokio::test]
async fn an_invalid_choice_keeps_the_question_pending_with_a_hint() {
    let h = Harness::new(builtins()).await;
    h.say(ALICE, "/run approve-demo").await;
    let card = h.card(1).await;
    let r = h.say(ALICE, &format!("/answer {} sometimes", card.id.short())).await;
    assert!(matches!(r.receipt, Some(Receipt::InvalidChoice { .. })), "{r:?}");
    assert!(r.text.unwrap().contains("once, always, reject [feedback], or edit <new action>"));
    assert_eq!(h.question(&card).await.status, Status::Pending);
}

#[tokio::test]
async fn a_duplicate_answer_gets_already_resolved_same() {
    let (h, card) = demo_waiting().await;
    let command = format!("/answer {} 2", card.id.short());
    assert!(matches!(h.say(ALICE, &command).await.receipt, Some(Receipt::Resolved { .. })));
    let r = h.say(ALICE, &command).await;
    assert_eq!(r.receipt, Some(Receipt::AlreadyResolvedSame { id: card.id, by: Some(ALICE.into()) }));
    let r = h.say(ALICE, &format!("/answer {} 3", card.id)).await;
    assert!(matches!(r.receipt, Some(Receipt::AlreadyResolvedConflict { .. })), "{r:?}");
    assert!(r.text.unwrap().contains("date-fns"));
}

#[tokio::test]
async fn an_id_that_names_nothing_is_reported_with_why() {
    let (h, card) = demo_waiting().await;
    let r = h.say(ALICE, "/answer ffff 1").await;
    let unknown_prefix = if card.id.to_string().starts_with("ffff") { "0000" } else { "ffff" };
    let r = if unknown_prefix == "ffff" { r } else { h.say(ALICE, "/answer 0000 1").await };
    assert_eq!(r.receipt, Some(Receipt::Unknown { reason: format!("No question {unknown_prefix} here") }));
    let r = h.say(ALICE, "/answer abc 1").await;
    assert!(r.text.unwrap().contains("at least 4 characters"));
    let r = h.say(ALICE, "/answer zzzzzz 1").await;
    assert!(r.text.unwrap().contains("is not a question id"));
    assert_eq!(h.question(&card).await.status, Status::Pending);
}

fn stored_question(id: &str, conversation: &str, run: RunId, step: u32) -> Question {
    let ask = askgate::question::Ask::question("Stored?").options(["a", "b"]).validate().unwrap();
    Question {
        id: id.parse().unwrap(),
        conversation: Some(Conversation::parse(conversation).unwrap()),
        run,
        step,
        mode: Mode::FollowUp,
        kind: Kind::Question,
        fingerprint: ask.fingerprint(),
        prompt: ask.prompt,
        detail: None,
        options: ask.options,
        descriptions: ask.descriptions,
        multi: false,
        allow_custom: false,
        form: None,
        default: None,
        answerers: Answerers::Conversation,
        created_at: T0,
        expires_at: None,
        status: Status::Pending,
        outcome: None,
        answered_by: None,
        answered_via: None,
        resolved_at: None,
        answered_name: None,
        quorum: 1,
        approvals: Vec::new(),
        nudges: Default::default(),
        nudge_at: None,
        escalated_to: None,
        asked_by: "test".to_owned(),
        presentation: Default::default(),
    }
}

#[tokio::test]
async fn an_ambiguous_or_foreign_id_changes_nothing() {
    let h = Harness::new(builtins()).await;
    let run = waiting_run(ROOM, "");
    let a = stored_question("abcd1111-0000-4000-8000-000000000001", ROOM, run.id, 0);
    let b = stored_question("abcd2222-0000-4000-8000-000000000002", ROOM, run.id, 1);
    h.store.ask(&run, &Arc::new(a.clone())).await.unwrap();
    h.store.ask(&run, &Arc::new(b.clone())).await.unwrap();
    let r = h.say(ALICE, "/answer abcd 1").await;
    assert_eq!(r.receipt, Some(Receipt::Unknown { reason: "Ambiguous id, use more characters".into() }));
    let r = h.say(ALICE, "/answer ABCD1 1").await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?} (prefixes are case-insensitive)");

    let other = waiting_run("test:elsewhere", "");
    let foreign = stored_question("eeee3333-0000-4000-8000-000000000003", "test:elsewhere", other.id, 0);
    h.store.ask(&other, &Arc::new(foreign.clone())).await.unwrap();
    for id in ["eeee3333", "eeee3333-0000-4000-8000-000000000003"] {
        let r = h.say(ALICE, &format!("/answer {id} 1")).await;
        assert!(matches!(r.receipt, Some(Receipt::Unknown { .. })), "{id}: {r:?}");
    }
    assert_eq!(h.question(&foreign).await.status, Status::Pending);
}

#[tokio::test]
async fn a_plain_message_is_claimed_by_the_pending_question_before_a_new_turn() {
    let mut settings = Settings::default();
    settings.channels.insert("test".into(), ChannelPolicy { default_function: Some("demo".into()), ..anyone() });
    let h = Harness::open(builtins(), settings, Arc::new(TempDir::new().unwrap()), Clock::manual(T0)).await;
    // No question waits: a plain message starts the default function.
    h.say(ALICE, "hello").await;
    let first = h.card(1).await;
    // Now one waits: the next plain message is its answer, not a new run.
    let r = h.say(ALICE, "luxon").await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert_eq!(
        h.question(&first).await.outcome.unwrap(),
        askgate::question::Outcome::Answered { value: json!("luxon") }
    );
    let second = h.card(2).await;
    assert_eq!(second.kind, Kind::Confirm);
    // An answer that does not fit gets a hint and the question stays pending.
    let r = h.say(ALICE, "perhaps").await;
    assert_eq!(r.text.as_deref(), Some(format!("Not accepted ({}): reply yes or no.", second.id.short()).as_str()));
    assert_eq!(h.recorder.cards().len(), 2);
}

#[tokio::test]
async fn two_pending_questions_make_a_plain_message_ask_for_an_id() {
    let h = Harness::new(builtins()).await;
    h.say(ALICE, "/run demo").await;
    h.say(ALICE, "/run demo").await;
    h.card(2).await;
    let r = h.say(ALICE, "1").await;
    assert!(r.text.unwrap().starts_with("2 questions are waiting for you here"));
    let r = h.say(ALICE, "/pending").await;
    assert!(r.text.unwrap().starts_with("2 waiting:"));
}

/// `/pending` lists the ten oldest and says that more wait, rather than one message of every card.
#[tokio::test]
async fn pending_lists_the_oldest_ten_saying_more_wait() {
    let h = Harness::new(builtins()).await;
    // One run at a time: twelve started together ask in whatever order their tasks run, which
    // need not be the order their cards are recorded in.
    for n in 1..=12 {
        h.say(ALICE, "/run demo").await;
        h.card(n).await;
    }
    let newest = h.card(12).await;
    let r = h.say(ALICE, "/pending").await.text.unwrap();
    assert!(r.starts_with("More than 10 waiting; the 10 oldest"), "{r}");
    let listed = h.recorder.cards().iter().filter(|q| r.contains(&format!("/answer {} ", q.id.short()))).count();
    assert_eq!(listed, 10, "{r}");
    assert!(!r.contains(&format!("/answer {} ", newest.id.short())), "the newest is left out: {r}");
}

#[tokio::test]
async fn a_reply_to_a_card_answers_that_question() {
    let h = Harness::new(builtins()).await;
    h.say(ALICE, "/run demo").await;
    h.say(ALICE, "/run demo").await;
    let second = h.card(2).await;
    h.engine.delivery().outbound_idle().await;
    // The test channel records each card as message `m-<id>` in the conversation's chat.
    let reply = |text: &str, to: String| {
        Inbound::text(room(), alice(), Surface::OTHER, text).replying_to(room().to_string(), to)
    };
    let r = h.engine.router().handle(reply("my own library", format!("m-{}", second.id))).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert_eq!(
        h.question(&second).await.outcome.unwrap(),
        askgate::question::Outcome::Answered { value: json!("my own library") }
    );
    // A reply to the prompt "Reject with note…" sent is the reason: known by the recorded
    // prompt, whatever its words.
    let first = h.card(1).await;
    // Stored once the call returns: the reply right after it is read as one.
    h.engine
        .delivery()
        .record_delivery(&first, askgate::store::Delivery::note(first.id, Surface::OTHER, room().to_string(), "p-1"))
        .await;
    let r = h.engine.router().handle(reply("not today", "p-1".to_owned())).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert_eq!(
        h.question(&first).await.outcome.unwrap(),
        askgate::question::Outcome::Declined { feedback: Some("not today".to_owned()) }
    );
}

#[tokio::test]
async fn a_redelivered_update_is_applied_once_also_after_a_restart() {
    let (h, card) = demo_waiting().await;
    let mut inbound = Inbound::text(room(), alice(), Surface::CONSOLE, format!("/answer {} 1", card.id));
    inbound.key = Some("test:update:7".into());
    let first = h.engine.router().handle(inbound.clone()).await;
    assert!(matches!(first.receipt, Some(Receipt::Resolved { .. })));
    let h = h.restart(builtins(), Settings::default(), Clock::manual(T0)).await;
    let again = h.engine.router().handle(inbound).await;
    assert_eq!(again, Default::default(), "a redelivery must be silent and change nothing");
}

#[tokio::test]
async fn run_refusals_say_what_to_do() {
    let mut settings = Settings::default();
    settings.channels.insert(
        "test".into(),
        ChannelPolicy { allowed_users: Access::Only(vec![alice()]), ..ChannelPolicy::default() },
    );
    let h = Harness::open(builtins(), settings, Arc::new(TempDir::new().unwrap()), Clock::manual(T0)).await;
    let r = h.say(ALICE, "/run nothing").await;
    assert_eq!(r.text.as_deref(), Some("No function named `nothing`. /help lists the functions."));
    let r = h.say(BOB, "/run demo").await;
    assert_eq!(
        r.text.as_deref(),
        Some(
            "You may not start runs here. An operator can allow you with allowed_users = [\"test:bob\"] in [channels.test]."
        )
    );
    let r = h.say(ALICE, "/frobnicate").await;
    assert_eq!(r.text.as_deref(), Some("Unknown command /frobnicate: /help lists the commands."));
    h.engine.delivery().outbound_idle().await;
    assert!(h.recorder.cards().is_empty());
}

#[tokio::test]
async fn help_lists_the_commands_with_the_functions() {
    let mut settings = Settings::default();
    settings.channels.insert(
        "test".into(),
        ChannelPolicy { allowed_users: Access::Only(vec![alice()]), ..ChannelPolicy::default() },
    );
    let h = Harness::open(builtins(), settings, Arc::new(TempDir::new().unwrap()), Clock::manual(T0)).await;
    let help = h.say(BOB, "/help").await.text.unwrap();
    assert!(help.contains("/answer <id> <choice>") && help.contains("approve-demo"), "{help}");
}

/// Asks which of three numbered options, then reports the pick.
struct Ranks;

#[async_trait::async_trait]
impl askgate::engine::Function for Ranks {
    async fn call(
        &self,
        ctx: &mut askgate::engine::Context,
        _: &str,
    ) -> Result<String, askgate::engine::FunctionError> {
        let ask = askgate::question::Ask::question("Which rank?").options(["3", "2", "1"]).allow_custom(true);
        Ok(format!("Picked {}.", ctx.ask(ask).await?.text()))
    }
}

#[tokio::test]
async fn labels_that_are_numbers_mean_the_label_while_positions_need_a_hash() {
    let mut f = builtins();
    f.insert("ranks", "", Arc::new(Ranks));
    let h = Harness::new(f).await;
    h.run("ranks", "").await;
    let card = h.card(1).await;
    // A plain "1" is the option labelled 1, not the first one.
    h.say(ALICE, "1").await;
    assert_eq!(h.question(&card).await.outcome.unwrap(), askgate::question::Outcome::Answered { value: json!("1") });
    h.run("ranks", "").await;
    let card = h.card(2).await;
    // A bare number that fits no option is not free text, even where free text is allowed.
    let r = h.say(ALICE, &format!("/answer {} 7", card.id)).await;
    assert!(r.text.as_deref().unwrap().contains("in quotes"), "{r:?}");
    assert_eq!(h.question(&card).await.status, Status::Pending);
    h.say(ALICE, &format!("/answer {} #1", card.id)).await;
    assert_eq!(h.question(&card).await.outcome.unwrap(), askgate::question::Outcome::Answered { value: json!("3") });
}

#[tokio::test]
async fn someone_who_may_not_answer_the_waiting_question_is_told_so() {
    let h = Harness::new(builtins()).await;
    h.run("demo", "").await;
    let card = h.card(1).await;
    let r = h.say(BOB, "2").await;
    assert_eq!(r.text.as_deref(), Some("The question waiting here is not yours to answer."));
    assert_eq!(h.question(&card).await.status, Status::Pending);
}

#[tokio::test]
async fn a_tap_on_an_opened_card_does_not_read_its_question_again() {
    init_log();
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let sqlite = askgate::store::SqliteStore::open(path.to_str().unwrap(), askgate::store::Synchronous::Normal);
    let store = Arc::new(reads::Counting::new(Arc::new(sqlite.await.unwrap())));
    let mut settings = Settings::default();
    settings.channels.insert("test".into(), anyone());
    let engine = askgate::engine::Engine::new(store.clone(), builtins(), settings, Clock::manual(T0));
    let recorder = Arc::new(Recorder::default());
    engine.delivery().attach(recorder.clone());
    engine.start().await.unwrap();
    engine.router().handle(Inbound::text(room(), alice(), Surface::CONSOLE, "/run demo")).await;
    let card = eventually(|| async { recorder.cards().first().cloned() }).await;

    // The adapter opens the card's question once, as a button's tap does.
    let opened = engine.records().open_card(card.id, &room(), &alice()).await.unwrap();
    let before = store.reads_of(card.id);
    let choice = askgate::command::Given::Text("2".into());
    let command = askgate::command::Command::Answer { id: card.id.into(), choice };
    let r = engine.router().handle(Inbound::on_card(room(), alice(), Surface::CONSOLE, opened, command)).await;

    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert_eq!(store.reads_of(card.id), before, "the tap read its question again");
    engine.shutdown().await;
}

/// Asks which ports to open, several at once, whose labels are numbers (for the ticks).
struct Ports;

#[async_trait::async_trait]
impl askgate::engine::Function for Ports {
    async fn call(
        &self,
        ctx: &mut askgate::engine::Context,
        _: &str,
    ) -> Result<String, askgate::engine::FunctionError> {
        let ask = askgate::question::Ask::question("Which ports?").options(["443", "80", "1"]).multi(true);
        let picked = ctx.ask(ask).await?;
        Ok(format!("Opened {}.", picked.list().join(" + ")))
    }
}

#[tokio::test]
async fn words_given_after_other_are_recorded_exactly_as_typed() {
    for words in ["#1", "2", "\"quoted\"", "edit staging", "1, 3"] {
        let (h, card) = demo_waiting().await;
        let r = h.say(ALICE, &format!("/other {} {words}", card.id.short())).await;
        assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{words}: {r:?}");
        let outcome = h.question(&card).await.outcome.unwrap();
        assert_eq!(outcome, askgate::question::Outcome::Answered { value: json!(words) }, "{words}");
    }
}

#[tokio::test]
async fn a_reply_to_the_other_prompt_is_recorded_exactly_as_typed() {
    let (h, card) = demo_waiting().await;
    h.engine
        .delivery()
        .record_delivery(&card, askgate::store::Delivery::prompt(card.id, Surface::OTHER, ROOM, "p-1"))
        .await;
    let reply = Inbound::text(room(), alice(), Surface::OTHER, "#1").replying_to(ROOM.to_owned(), "p-1".to_owned());
    let r = h.engine.router().handle(reply).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    let outcome = h.question(&card).await.outcome.unwrap();
    assert_eq!(outcome, askgate::question::Outcome::Answered { value: json!("#1") }, "one's own words, not option 1");
}

#[tokio::test]
async fn an_edit_typed_after_other_is_the_action_as_written() {
    let h = Harness::new(builtins()).await;
    h.say(ALICE, "/run approve-demo").await;
    let card = h.card(1).await;
    let r = h.say(ALICE, &format!("/other {} edit \"#1\"", card.id.short())).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    let value = json!({"decision": "edited", "action": "edit \"#1\""});
    assert_eq!(h.question(&card).await.outcome.unwrap(), askgate::question::Outcome::Answered { value });
}

#[tokio::test]
async fn a_multi_select_submitted_records_the_options_ticked() {
    let mut functions = builtins();
    functions.insert("ports", "a multi-select with numbers for labels", Arc::new(Ports));
    let h = Harness::new(functions).await;
    h.say(ALICE, "/run ports").await;
    let card = h.card(1).await;
    let short = card.id.short();
    h.say(ALICE, &format!("/toggle {short} 3")).await;
    h.say(ALICE, &format!("/toggle {short} 1")).await;
    let r = h.say(ALICE, &format!("/submit {short}")).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    // Option 3 is labelled `1`: ticks are positions, never read as labels.
    let outcome = h.question(&card).await.outcome.unwrap();
    assert_eq!(outcome, askgate::question::Outcome::Answered { value: json!(["443", "1"]) });
}

#[tokio::test]
async fn words_given_in_an_other_form_are_recorded_exactly_as_typed() {
    let (h, card) = demo_waiting().await;
    // What Discord's and Slack's "Other…" modal submits: the person's words, typed.
    let (command, _) = askgate::command::form_command(&format!("/answer {}", card.id), "#1").unwrap();
    let r = h.engine.router().handle(Inbound::tap(room(), alice(), Surface::OTHER, command)).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    let outcome = h.question(&card).await.outcome.unwrap();
    assert_eq!(outcome, askgate::question::Outcome::Answered { value: json!("#1") }, "one's own words, not option 1");
}
