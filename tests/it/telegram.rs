//! The Telegram adapter: the real teloxide client inside the real engine, against a loopback
//! server that speaks the Bot API's JSON.

use std::net::SocketAddr;
use std::sync::Arc;

use askgate::channel::telegram::{Telegram, TelegramConfig, Timeouts, Updates};
use askgate::clock::Clock;
use askgate::engine::ChannelState;
use askgate::engine::{Access, ChannelPolicy, Engine, Resolver, Settings};
use askgate::question::{Conversation, QuestionId, Status, Surface, UserRef};
use askgate::run::RunStatus;
use askgate::store::{SqliteStore, Synchronous};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::task::JoinHandle;

use crate::fake_telegram::FakeTelegram;
use crate::support::{anyone, channel_functions, db_path, eventually, init_log};

mod forms;
mod language;
mod show;

const ALICE: i64 = 42;
const BOB: i64 = 43;
const GROUP: i64 = -100_123;

/// askgate with only the Telegram channel, aimed at the fake.
struct Tg {
    engine: Engine,
    serving: JoinHandle<()>,
}

impl Tg {
    async fn start(dir: &TempDir, api: &str, updates: Updates, settings: Settings) -> Self {
        Self::start_with_clock(dir, api, updates, settings, Clock::system()).await
    }

    async fn start_with_clock(dir: &TempDir, api: &str, updates: Updates, settings: Settings, clock: Clock) -> Self {
        Self::start_with(dir, api, updates, settings, clock, Timeouts::default()).await.0
    }

    async fn start_with(
        dir: &TempDir,
        api: &str,
        updates: Updates,
        settings: Settings,
        clock: Clock,
        timeouts: Timeouts,
    ) -> (Self, Arc<Telegram>) {
        Self::launch(dir, api, updates, settings, clock, timeouts, channel_functions()).await
    }

    async fn launch(
        dir: &TempDir,
        api: &str,
        updates: Updates,
        settings: Settings,
        clock: Clock,
        timeouts: Timeouts,
        functions: askgate::engine::Functions,
    ) -> (Self, Arc<Telegram>) {
        init_log();
        let mut settings = settings;
        settings.channels.entry("telegram".into()).or_insert_with(anyone);
        let store = SqliteStore::open(db_path(dir.path()).to_str().unwrap(), Synchronous::Normal).await.unwrap();
        let engine = Engine::new(Arc::new(store), functions, settings, clock.clone());
        let config = TelegramConfig {
            token: "123:fake".into(),
            api_url: Some(api.to_owned()),
            updates: updates.clone(),
            timeouts,
        };
        let telegram = Telegram::new(&config, clock).unwrap();
        engine.delivery().attach(telegram.clone());
        engine.start().await.unwrap();
        let (e, stop, t) = (engine.clone(), engine.stopping(), telegram.clone());
        let serving = tokio::spawn(async move { t.serve(updates, e, stop).await.unwrap() });
        (Self { engine, serving }, telegram)
    }

    async fn stop(self) {
        self.engine.stopping().cancel();
        self.serving.await.unwrap();
        self.engine.shutdown().await;
    }
}

async fn setup() -> (TempDir, FakeTelegram, String, Tg) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let tg = Tg::start(&dir, &url, Updates::Polling, Settings::default()).await;
    (dir, fake, url, tg)
}

fn buttons(message: &Value) -> Vec<(String, String)> {
    message["reply_markup"]["inline_keyboard"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                .map(|b| (b["text"].as_str().unwrap().to_owned(), b["callback_data"].as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn data(message: &Value, label: &str) -> String {
    buttons(message).into_iter().find(|(l, _)| l.contains(label)).unwrap_or_else(|| panic!("no {label} in {message}")).1
}

fn id_of(message: &Value) -> i64 {
    message["message_id"].as_i64().unwrap()
}

fn question_id(message: &Value) -> QuestionId {
    let any = &buttons(message)[0].1;
    any.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits until the card message has been edited to show its outcome.
async fn edited(fake: &FakeTelegram, chat: i64, message: i64, needle: &str) -> Value {
    eventually(|| async {
        let m = fake.message(chat, message);
        (m["text"].as_str().unwrap().contains(needle) && m.get("reply_markup").is_none()).then_some(m)
    })
    .await
}

/// askgate with Telegram and a page to sign in to.
async fn with_a_page() -> (TempDir, FakeTelegram, Tg) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let settings = Settings { page_url: Some("http://127.0.0.1:9/".into()), ..Settings::default() };
    let tg = Tg::start(&dir, &url, Updates::Polling, settings).await;
    (dir, fake, tg)
}

#[tokio::test]
async fn web_in_a_group_is_refused_without_a_link() {
    let (_dir, fake, tg) = with_a_page().await;
    fake.text(ALICE, GROUP, "/web", None);
    let refused = fake.sent("Send /web to me in a private chat", 1).await;
    assert!(!refused["text"].as_str().unwrap().contains("#signin="), "{refused}");
    tg.stop().await;
}

#[tokio::test]
async fn web_in_a_private_chat_sends_a_sign_in_link_that_works_once() {
    let (_dir, fake, tg) = with_a_page().await;
    fake.text(ALICE, ALICE, "/web", None);
    let sent = fake.sent("#signin=", 1).await;
    let text = sent["text"].as_str().unwrap();
    assert!(text.contains(&format!("as telegram:{ALICE}")), "{text}");
    let secret = text.split("#signin=").nth(1).unwrap().trim();
    let (_, session) = tg.engine.people().use_sign_in_link(secret).await.unwrap().expect("the link signs in once");
    assert_eq!(session.person.as_str(), format!("telegram:{ALICE}"));
    assert!(tg.engine.people().use_sign_in_link(secret).await.unwrap().is_none(), "and only once");
    tg.stop().await;
}

#[tokio::test]
async fn the_demo_runs_by_tapping_buttons() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(tg.engine.delivery().channel_states(), [("telegram", ChannelState::Up)]);
    let labels: Vec<String> = buttons(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["1. dayjs", "2. date-fns", "3. luxon", "Other…", "Decline"]);
    let tap = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "date-fns"));
    assert_eq!(fake.callback_answer(tap).await["text"], "Recorded.");
    let done = edited(&fake, ALICE, id_of(&card), "✅ date-fns — @user42 via telegram").await;
    assert!(done["text"].as_str().unwrap().starts_with("Which library for date formatting?"));
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    fake.press(ALICE, ALICE, id_of(&confirm), &data(&confirm, "Yes"));
    fake.sent("Using date-fns for dates; archived 87 emails.", 1).await;
    edited(&fake, ALICE, id_of(&confirm), "✅ Yes").await;
    tg.stop().await;
}

#[tokio::test]
async fn a_typed_answer_names_its_question_by_a_short_prefix() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let prefix = &question_id(&card).to_string()[..6];
    fake.text(ALICE, ALICE, &format!("/answer {prefix} 2"), None);
    edited(&fake, ALICE, id_of(&card), "✅ date-fns").await;
    tg.stop().await;
}

#[tokio::test]
async fn a_plain_message_answers_the_one_waiting_question() {
    let (_dir, fake, _, tg) = setup().await;
    // A plain "2", then a plain "yes".
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    fake.text(ALICE, ALICE, "2", None);
    edited(&fake, ALICE, id_of(&card), "✅ date-fns").await;
    fake.sent("Archive all 87 emails?", 1).await;
    fake.text(ALICE, ALICE, "yes", None);
    fake.sent("Using date-fns for dates; archived 87 emails.", 1).await;
    // A plain "no".
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 2).await;
    fake.text(ALICE, ALICE, "2", None);
    edited(&fake, ALICE, id_of(&card), "✅ date-fns").await;
    fake.text(ALICE, ALICE, "no", None);
    fake.sent("left the 87 emails where they are", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn free_text_in_reply_to_a_card_answers_it() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    fake.text(ALICE, ALICE, "moment.js, honestly", Some(id_of(&card)));
    edited(&fake, ALICE, id_of(&card), "✅ moment.js, honestly").await;
    tg.stop().await;
}

#[tokio::test]
async fn multi_select_submits_the_options_toggled_on() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run multi", None);
    let card = fake.sent("Which days?", 1).await;
    let labels: Vec<String> = buttons(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["☐ Mon", "☐ Tue", "☐ Wed", "Submit", "Decline"]);
    let none = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Submit"));
    assert_eq!(fake.callback_answer(none).await["text"], "Pick at least one option first.");
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Mon"));
    eventually(|| async { buttons(&fake.message(ALICE, id_of(&card)))[0].0.starts_with('☑').then_some(()) }).await;
    let card_now = fake.message(ALICE, id_of(&card));
    fake.press(ALICE, ALICE, id_of(&card), &data(&card_now, "Wed"));
    eventually(|| async { buttons(&fake.message(ALICE, id_of(&card)))[2].0.starts_with('☑').then_some(()) }).await;
    let card_now = fake.message(ALICE, id_of(&card));
    fake.press(ALICE, ALICE, id_of(&card), &data(&card_now, "Submit"));
    fake.sent("Picked Mon + Wed.", 1).await;
    edited(&fake, ALICE, id_of(&card), "✅ Mon, Wed").await;
    tg.stop().await;
}

#[tokio::test]
async fn a_stale_toggle_on_a_closed_card_changes_nothing_but_says_how_it_ended() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run multi", None);
    let card = fake.sent("Which days?", 1).await;
    fake.text(ALICE, ALICE, &format!("/answer {} 1,3", question_id(&card)), None);
    edited(&fake, ALICE, id_of(&card), "✅ Mon, Wed").await;
    let stale = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Tue"));
    let answer = fake.callback_answer(stale).await;
    assert!(answer["text"].as_str().unwrap().starts_with("Already closed: ✅ Mon, Wed"), "{answer}");
    tg.stop().await;
}

#[tokio::test]
async fn a_typed_multi_select_answer_picks_several_positions() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run multi", None);
    let card = fake.sent("Which days?", 1).await;
    fake.text(ALICE, ALICE, &format!("/answer {} 1,3", question_id(&card)), None);
    fake.sent("Picked Mon + Wed.", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn reject_with_a_note_takes_the_next_message_as_feedback() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    let labels: Vec<String> = buttons(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Allow once", "Allow always", "Reject", "Reject with note…", "Edit…"]);
    // A message that only reads like the prompt (here the bot's own, as a function may say
    // anything) asks for nothing: a reply to it is a plain message, and the approval waits.
    let short = question_id(&card).short();
    let chat = askgate::question::Conversation::parse(&format!("telegram:{ALICE}")).unwrap();
    tg.engine.delivery().send_text(&chat, format!("✍️ Why reject {short}?"));
    let lookalike = fake.sent("✍️ Why reject", 1).await;
    fake.text(ALICE, ALICE, "not on a Friday", Some(id_of(&lookalike)));
    fake.sent("Not accepted", 1).await;
    assert!(fake.message(ALICE, id_of(&card)).get("reply_markup").is_some(), "the approval still waits");
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Reject with note"));
    let prompt = fake.sent("✍️ Why reject", 2).await;
    assert_eq!(fake.calls("sendmessage").last().unwrap().body["reply_markup"]["force_reply"], true);
    fake.text(ALICE, ALICE, "not on a Friday", Some(id_of(&prompt)));
    fake.sent("Rejected: did not run `rm -rf build/` (not on a Friday).", 1).await;
    edited(&fake, ALICE, id_of(&card), "❌ rejected: not on a Friday").await;
    // The outcome shows once, on the card: the prompt that asked for the note is gone.
    eventually(|| async { fake.deleted(ALICE, id_of(&prompt)).then_some(()) }).await;
    let outcomes = fake
        .calls("editmessagetext")
        .iter()
        .filter(|c| c.body["text"].as_str().unwrap_or_default().contains("rejected: not on a Friday"))
        .count();
    assert_eq!(outcomes, 1, "the outcome was shown on more than the card");
    tg.stop().await;
}

#[tokio::test]
async fn edit_takes_the_next_message_as_the_action_to_allow() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Edit…"));
    let prompt = fake.sent("✍️ Edited action for", 1).await;
    assert_eq!(fake.calls("sendmessage").last().unwrap().body["reply_markup"]["force_reply"], true);
    fake.text(ALICE, ALICE, "rm -rf build/cache", Some(id_of(&prompt)));
    fake.sent("Allowed as edited: ran `rm -rf build/cache` instead of `rm -rf build/`.", 1).await;
    edited(&fake, ALICE, id_of(&card), "allowed as edited: rm -rf build/cache").await;
    eventually(|| async { fake.deleted(ALICE, id_of(&prompt)).then_some(()) }).await;
    tg.stop().await;
}

#[tokio::test]
async fn a_quorum_approval_counts_each_approvers_tap_once_until_it_has_enough() {
    let (_dir, fake, _, tg) = setup().await;
    // Carol asks; her own approval does not count toward it.
    let carol = 44;
    fake.text(carol, GROUP, "/run two-approvers", None);
    let card = fake.sent("Approve: deploy prod", 1).await;
    let labels: Vec<String> = buttons(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Approve", "Reject", "Reject with note…"], "no allow-always for a quorum");
    assert!(card["text"].as_str().unwrap().contains("0 of 2 approvals"), "{card}");
    let own = fake.callback_answer(fake.press(carol, GROUP, id_of(&card), &data(&card, "Approve"))).await;
    assert!(own["text"].as_str().unwrap().starts_with("You asked for this approval"), "{own}");
    let tap = fake.press(ALICE, GROUP, id_of(&card), &data(&card, "Approve"));
    let told = fake.callback_answer(tap).await;
    assert!(told["text"].as_str().unwrap().starts_with("Approval 1 of 2 recorded"), "{told}");
    // The card shows the count and keeps its buttons.
    let counted = eventually(|| async {
        let m = fake.message(GROUP, id_of(&card));
        m["text"].as_str().unwrap().contains("1 of 2 approvals: @user42").then_some(m)
    })
    .await;
    assert_eq!(buttons(&counted), buttons(&card));
    let again = fake.press(ALICE, GROUP, id_of(&card), &data(&card, "Approve"));
    assert!(fake.callback_answer(again).await["text"].as_str().unwrap().contains("each person counts once"));
    let second = fake.press(BOB, GROUP, id_of(&card), &data(&card, "Approve"));
    assert_eq!(fake.callback_answer(second).await["text"], "Recorded.");
    fake.sent("Deployed.", 1).await;
    edited(&fake, GROUP, id_of(&card), "allowed once — 2 of 2 approvals: @user42, @user43").await;
    tg.stop().await;
}

#[tokio::test]
async fn a_reminder_mentions_the_answerer_with_the_cards_commands() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let settings = Settings { remind_before: Some(std::time::Duration::from_secs(25 * 60)), ..Settings::default() };
    let clock = Clock::manual(1_800_000_000_000);
    let tg = Tg::start_with_clock(&dir, &url, Updates::Polling, settings, clock.clone()).await;
    fake.text(ALICE, GROUP, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    let id = question_id(&card).short();
    clock.advance(5 * 60_000);
    fake.sent("⏰ Reminder", 1).await;
    let sent = fake.calls("sendmessage");
    let reminder = sent.iter().map(|c| c.body["text"].as_str().unwrap_or("")).find(|t| t.starts_with("⏰")).unwrap();
    assert!(
        reminder
            .starts_with(&format!("⏰ Reminder <a href=\"tg://user?id={ALICE}\">user {ALICE}</a>: this still waits")),
        "{reminder}"
    );
    assert!(reminder.contains(&format!("/approve {id} always")) && reminder.contains("expires in 25m"), "{reminder}");
    tg.stop().await;
}

const OPS: i64 = -100_456;

/// An approval asked in the group and escalated to the ops chat after 10 minutes unanswered:
/// the group's card and the ops chat's.
async fn escalated() -> (TempDir, FakeTelegram, Tg, Value, Value) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let mut settings = Settings::default();
    let nudges = askgate::question::Nudges {
        escalate_after: Some(10 * 60_000),
        escalate_to: Some(Conversation::parse(&format!("telegram:{OPS}")).unwrap()),
        ..Default::default()
    };
    settings.channels.insert("telegram".into(), ChannelPolicy { nudges, ..anyone() });
    let clock = Clock::manual(1_800_000_000_000);
    let tg = Tg::start_with_clock(&dir, &url, Updates::Polling, settings, clock.clone()).await;
    fake.text(ALICE, GROUP, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    clock.advance(10 * 60_000);
    let escalated = fake.sent("Approve: rm -rf build/", 2).await;
    (dir, fake, tg, card, escalated)
}

#[tokio::test]
async fn an_unanswered_approval_is_escalated_to_another_chat() {
    let (_dir, fake, tg, _, escalated) = escalated().await;
    assert_eq!(escalated["chat"]["id"], OPS, "{escalated}");
    fake.sent(&format!("Nobody answered this in telegram:{GROUP} for 10m"), 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn an_answer_from_anyone_in_the_escalation_chat_closes_both_cards() {
    let (_dir, fake, tg, card, escalated) = escalated().await;
    // Bob is not an answerer in the group, but anyone in the escalation chat may answer there.
    let tap = fake.press(BOB, OPS, id_of(&escalated), &data(&escalated, "Allow once"));
    assert_eq!(fake.callback_answer(tap).await["text"], "Recorded.");
    fake.sent("Allowed once: ran `rm -rf build/`", 1).await;
    edited(&fake, GROUP, id_of(&card), "allowed once — @user43 via telegram").await;
    edited(&fake, OPS, id_of(&escalated), "allowed once — @user43 via telegram").await;
    tg.stop().await;
}

#[tokio::test]
async fn another_users_tap_in_a_group_is_refused_with_an_alert() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, GROUP, "/run@askgate_bot demo", None);
    let card = fake.sent("Which library", 1).await;
    let tap = fake.press(BOB, GROUP, id_of(&card), &data(&card, "dayjs"));
    let answer = fake.callback_answer(tap).await;
    assert_eq!(answer["text"], "Not yours to answer.");
    assert_eq!(answer["show_alert"], true);
    let q = tg.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    assert_eq!(q.status, Status::Pending);
    assert!(fake.message(GROUP, id_of(&card)).get("reply_markup").is_some(), "the card must keep its buttons");
    tg.stop().await;
}

#[tokio::test]
async fn a_command_for_another_bot_in_a_group_is_not_ours() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, GROUP, "/run@askgate_bot demo", None);
    fake.sent("Which library", 1).await;
    let before = fake.calls("sendmessage").len();
    fake.text(ALICE, GROUP, "/run@otherbot demo", None);
    fake.text(ALICE, GROUP, "/pending@askgate_bot", None);
    fake.sent("1 waiting:", 1).await;
    assert_eq!(fake.calls("sendmessage").len(), before + 1, "/run@otherbot started something");
    tg.stop().await;
}

#[tokio::test]
async fn forged_or_stale_button_payloads_are_refused() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let id = question_id(&card);
    for (payload, reply) in [
        ("dayjs".to_owned(), "That button is not understood."),
        (format!("/toggle {id} x"), "That button is not understood."),
        (format!("/other {}", id.short()), "That button is not understood."),
        (format!("/other {}", askgate::question::QuestionId::new()), "This question is no longer known."),
        (format!("/toggle {id} 9"), "That button is not understood."),
    ] {
        let tap = fake.press(ALICE, ALICE, id_of(&card), &payload);
        assert_eq!(fake.callback_answer(tap).await["text"], reply, "{payload}");
    }
    assert_eq!(tg.engine.records().question(id).await.unwrap().unwrap().status, Status::Pending);
    assert!(fake.message(ALICE, id_of(&card)).get("reply_markup").is_some(), "the card keeps its buttons");
    tg.stop().await;
}

#[tokio::test]
async fn a_redelivered_message_starts_no_second_run() {
    let (_dir, fake, _, tg) = setup().await;
    let run = fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library", 1).await;
    fake.redeliver(run);
    fake.text(ALICE, ALICE, "/pending", None);
    fake.sent("1 waiting:", 1).await;
    // One card and its /pending listing: one run.
    fake.sent_exactly("Which library", 2).await;
    tg.stop().await;
}

#[tokio::test]
async fn a_second_tap_on_an_answered_card_is_told_already_answered() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let first = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "luxon"));
    assert_eq!(fake.callback_answer(first).await["text"], "Recorded.");
    fake.sent("Archive all 87 emails?", 1).await;
    let again = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "luxon"));
    let answer = fake.callback_answer(again).await;
    assert!(answer["text"].as_str().unwrap().starts_with("Already answered"), "{answer}");
    fake.text(ALICE, ALICE, "/pending", None);
    let pending = fake.sent("1 waiting:", 1).await;
    assert!(pending["text"].as_str().unwrap().contains("Archive all 87 emails?"));
    // One card and its /pending listing: the run resumed once.
    fake.sent_exactly("Archive all 87", 2).await;
    tg.stop().await;
}

#[tokio::test]
async fn a_redelivered_tap_is_answered_without_being_applied_again() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let first = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "luxon"));
    assert_eq!(fake.callback_answer(first).await["text"], "Recorded.");
    fake.sent("Archive all 87 emails?", 1).await;
    let answers_before = fake.calls("answercallbackquery").len();
    fake.redeliver(first);
    // The redelivered update is answered (its spinner stops) and applied no more: it is known
    // by its update, so it is not even a second tap that loses ("Already answered").
    let redelivered = eventually(|| async {
        let calls = fake.calls("answercallbackquery");
        calls.get(answers_before).map(|c| c.body.clone())
    })
    .await;
    assert_eq!(redelivered["callback_query_id"], format!("cb-{first}"));
    assert_eq!(redelivered["text"].as_str().unwrap_or(""), "", "{redelivered}");
    fake.text(ALICE, ALICE, "/pending", None);
    fake.sent("1 waiting:", 1).await;
    // One card and its /pending listing: the run resumed once.
    fake.sent_exactly("Archive all 87", 2).await;
    tg.stop().await;
}

#[tokio::test]
async fn a_tap_after_a_restart_still_resumes_the_run() {
    let (dir, fake, url, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    tg.stop().await;
    let tg = Tg::start(&dir, &url, Updates::Polling, Settings::default()).await;
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "dayjs"));
    edited(&fake, ALICE, id_of(&card), "✅ dayjs").await;
    fake.sent("Archive all 87 emails?", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn an_answer_through_another_surface_removes_the_keyboard() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let q = tg.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    let alice = Resolver::person(UserRef::parse(&format!("telegram:{ALICE}")).unwrap(), Surface::API);
    tg.engine.claims().resolve(&q, "3", &alice).await.unwrap();
    edited(&fake, ALICE, id_of(&card), &format!("✅ luxon — telegram:{ALICE} via api")).await;
    // A cancellation elsewhere retracts the next card too.
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    tg.engine
        .claims()
        .cancel_conversation(&Conversation::parse("telegram:42").unwrap(), &UserRef::parse("telegram:42").unwrap())
        .await
        .unwrap();
    edited(&fake, ALICE, id_of(&confirm), "⛔ cancelled").await;
    tg.stop().await;
}

#[tokio::test]
async fn a_rate_limited_send_or_edit_is_retried_without_loss() {
    let (_dir, fake, _, tg) = setup().await;
    fake.fail_next("sendmessage", 1);
    fake.fail_next("editmessagetext", 1);
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let tries = fake.calls("sendmessage").len();
    assert_eq!(tries, 2, "the 429 was retried once");
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "dayjs"));
    edited(&fake, ALICE, id_of(&card), "✅ dayjs").await;
    assert_eq!(fake.calls("editmessagetext").len(), 2, "the edit was retried after its 429");
    fake.sent("Archive all 87 emails?", 1).await;
    let cards =
        fake.calls("sendmessage").iter().filter(|c| c.body["text"].as_str().unwrap().contains("Which library")).count();
    assert_eq!(cards, 2, "one refused send, one delivered: nothing lost, nothing doubled");
    tg.stop().await;
}

/// askgate with Telegram where only Alice may start runs.
async fn only_alice() -> (TempDir, FakeTelegram, Tg) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let mut settings = Settings::default();
    let alice = UserRef::parse("telegram:42").unwrap();
    settings
        .channels
        .insert("telegram".into(), ChannelPolicy { allowed_users: Access::Only(vec![alice]), ..Default::default() });
    let tg = Tg::start(&dir, &url, Updates::Polling, settings).await;
    (dir, fake, tg)
}

#[tokio::test]
async fn a_stranger_who_may_not_start_runs_is_told_the_line_that_would_allow_them() {
    let (_dir, fake, tg) = only_alice().await;
    fake.text(BOB, BOB, "/run demo", None);
    fake.sent(
        "You may not start runs here. An operator can allow you with allowed_users = [\"telegram:43\"] in [channels.telegram].",
        1,
    )
    .await;
    tg.stop().await;
}

#[tokio::test]
async fn an_allowed_user_starts_runs() {
    let (_dir, fake, tg) = only_alice().await;
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn by_default_nobody_starts_runs_on_telegram() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let mut settings = Settings::default();
    settings.channels.insert("telegram".into(), ChannelPolicy::default());
    let tg = Tg::start(&dir, &url, Updates::Polling, settings).await;
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("allowed_users = [\"telegram:42\"] in [channels.telegram]", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn an_expired_question_is_marked_expired_wherever_it_shows() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let clock = Clock::manual(1_800_000_000_000);
    let tg = Tg::start_with_clock(&dir, &url, Updates::Polling, Settings::default(), clock.clone()).await;
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    clock.advance(31 * 60 * 1000);
    edited(&fake, ALICE, id_of(&card), "⌛ expired, no default").await;
    fake.sent("⌛ Which library for date formatting?: expired, no default", 1).await;
    fake.sent("demo failed: no answer before the timeout", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn webhook_mode_checks_the_secret_token() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let updates =
        Updates::Webhook { url: format!("http://127.0.0.1:{port}/hook"), listen, secret: "s3cr3t_T0ken".into() };
    let tg = Tg::start(&dir, &url, updates, Settings::default()).await;
    fake.call("setwebhook", 1).await;
    let update = json!({"update_id": 5, "message": {"message_id": 1, "date": 1_795_989_700,
        "chat": {"id": ALICE, "type": "private", "first_name": "A"}, "from": crate::fake_telegram::user_json(ALICE),
        "text": "/run demo", "entities": [{"type": "bot_command", "offset": 0, "length": 4}]}});
    let post = |secret: Option<&'static str>| {
        let body = update.to_string();
        async move {
            let mut request = format!(
                "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            if let Some(s) = secret {
                request.push_str(&format!("X-Telegram-Bot-Api-Secret-Token: {s}\r\n"));
            }
            request.push_str("\r\n");
            request.push_str(&body);
            raw_http(listen, &request).await
        }
    };
    eventually(|| async { raw_http_ok(listen).await.then_some(()) }).await;
    assert!(post(None).await.starts_with("HTTP/1.1 401"), "a request without the secret was accepted");
    assert!(post(Some("wrong")).await.starts_with("HTTP/1.1 401"), "a request with a wrong secret was accepted");
    assert!(post(Some("s3cr3t_T0ken")).await.starts_with("HTTP/1.1 200"));
    fake.sent("Which library", 1).await;
    tg.stop().await;
}

async fn raw_http(addr: SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

async fn raw_http_ok(addr: SocketAddr) -> bool {
    tokio::net::TcpStream::connect(addr).await.is_ok()
}

/// Alice allowed `rm -rf build/` always from its card's button: the grant's short id.
async fn allowed_always(fake: &FakeTelegram, tg: &Tg) -> String {
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Allow always"));
    fake.sent("Allowed always", 1).await;
    let grants = eventually(|| async {
        let grants = tg.engine.records().grants(Some(&Conversation::parse("telegram:42").unwrap())).await.unwrap();
        (!grants.is_empty()).then_some(grants)
    })
    .await;
    grants[0].id[..8].to_owned()
}

#[tokio::test]
async fn allow_always_from_a_button_stores_a_grant_that_allows_the_next_time() {
    let (_dir, fake, _, tg) = setup().await;
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    let card = fake.sent("Approve: rm -rf build/", 1).await;
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Allow always"));
    fake.sent("Allowed always", 1).await;
    let run = tg.engine.records().question(question_id(&card)).await.unwrap().unwrap().run;
    let run = eventually(|| async {
        tg.engine.records().run(run).await.unwrap().filter(|r| r.status == RunStatus::Finished)
    })
    .await;
    assert!(run.result.unwrap().starts_with("Allowed always"));
    let grants = tg.engine.records().grants(Some(&Conversation::parse("telegram:42").unwrap())).await.unwrap();
    assert_eq!(grants.len(), 1);
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    fake.sent("Allowed by a standing grant", 1).await;
    tg.stop().await;
}

#[tokio::test]
async fn grants_lists_the_standing_grants_of_the_chat() {
    let (_dir, fake, _, tg) = setup().await;
    let short = allowed_always(&fake, &tg).await;
    fake.text(ALICE, ALICE, "/grants", None);
    let listed = fake.sent("1 standing grant here", 1).await;
    assert!(listed["text"].as_str().unwrap().contains(&format!("[{short}] \"rm -rf build/\" — set by ")), "{listed}");
    tg.stop().await;
}

#[tokio::test]
async fn revoke_takes_a_grant_back() {
    let (_dir, fake, _, tg) = setup().await;
    let short = allowed_always(&fake, &tg).await;
    fake.text(ALICE, ALICE, &format!("/revoke {short}"), None);
    fake.sent(&format!("Revoked {short}"), 1).await;
    fake.text(ALICE, ALICE, "/run approve-demo", None);
    fake.sent("Approve: rm -rf build/", 2).await;
    tg.stop().await;
}

#[tokio::test]
async fn a_reply_paced_in_one_chat_does_not_hold_up_other_chats() {
    let (_dir, fake, _url, tg) = setup().await;
    // Telegram paces Alice's chat: the reply to her next message cannot go out yet.
    fake.stall(ALICE);
    fake.text(ALICE, ALICE, "/frobnicate", None);
    eventually(|| async { fake.calls("sendmessage").iter().any(|c| c.body["chat_id"] == json!(ALICE)).then_some(()) })
        .await;
    // Bob's update is still applied and his card goes out.
    fake.text(BOB, BOB, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(card["chat"]["id"], json!(BOB));
    // Alice's reply follows once her chat's turn comes.
    fake.release(ALICE);
    let reply = fake.sent("frobnicate", 1).await;
    assert_eq!(reply["chat"]["id"], json!(ALICE));
    tg.stop().await;
}

#[tokio::test]
async fn another_poller_on_the_same_token_shows_as_down_until_updates_flow_again() {
    let (_dir, fake, _url, tg) = setup().await;
    let state =
        || tg.engine.delivery().channel_states().into_iter().find(|(name, _)| *name == "telegram").map(|(_, s)| s);
    eventually(|| async { (state() == Some(ChannelState::Up)).then_some(()) }).await;
    fake.refuse("getupdates", 409, "Conflict: terminated by other getUpdates request");
    let why = eventually(|| async {
        match state() {
            Some(ChannelState::Down(why)) => Some(why),
            _ => None,
        }
    })
    .await;
    assert!(why.starts_with("the Bot API refuses updates"), "{why}");
    assert!(why.contains("terminated by other getUpdates request"), "{why}");
    fake.accept("getupdates");
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(state(), Some(ChannelState::Up));
    tg.stop().await;
}

#[tokio::test]
async fn an_idle_bot_keeps_polling_without_errors() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    // A client that gives up after 2 s, and the usual 25 s long poll: askgate must poll for
    // less than the client waits, or every idle poll ends in an error and a growing backoff.
    let timeouts = Timeouts { poll: std::time::Duration::from_secs(25), request: std::time::Duration::from_secs(2) };
    let (tg, telegram) =
        Tg::start_with(&dir, &url, Updates::Polling, Settings::default(), Clock::system(), timeouts).await;
    // Idle through several long polls, longer than the client's timeout.
    eventually(|| async { (fake.polls().0 >= 4).then_some(()) }).await;
    assert_eq!(fake.polls().1, 0, "the client gave up on an idle poll");
    assert!(
        fake.calls("getupdates").iter().all(|c| c.body["timeout"].as_u64() < Some(2)),
        "a poll outlived the client"
    );
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(telegram.failed_polls(), 0, "an idle poll was counted as a failure");
    assert_eq!(tg.engine.delivery().channel_states(), [("telegram", ChannelState::Up)]);
    tg.stop().await;
}

#[tokio::test]
async fn failing_polls_show_down_only_while_the_failures_persist() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let timeouts = Timeouts { poll: std::time::Duration::from_secs(25), request: std::time::Duration::from_secs(2) };
    let (tg, telegram) =
        Tg::start_with(&dir, &url, Updates::Polling, Settings::default(), Clock::system(), timeouts).await;
    let state =
        || tg.engine.delivery().channel_states().into_iter().find(|(name, _)| *name == "telegram").map(|(_, s)| s);
    eventually(|| async { (fake.polls().0 >= 1).then_some(()) }).await;
    // The network swallows getUpdates: each poll ends in the client's timeout.
    fake.hang_polls();
    eventually(|| async { (telegram.failed_polls() >= 1).then_some(()) }).await;
    assert_eq!(state(), Some(ChannelState::Up), "one lost poll is a blip, not an outage");
    let why = eventually(|| async {
        match state() {
            Some(ChannelState::Down(why)) => Some(why),
            _ => None,
        }
    })
    .await;
    assert!(why.starts_with("polling has failed 3 times in a row"), "{why}");
    // The network comes back: the next poll (after a pause of seconds, not a minute) succeeds.
    fake.answer_polls();
    fake.text(ALICE, ALICE, "/run demo", None);
    fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(state(), Some(ChannelState::Up));
    tg.stop().await;
}

/// The real binary with Telegram pointed at `url` (Alice may start runs) and agents' MCP
/// questions sent to Alice's chat; `mcp` adds keys to `[mcp]` and tables after it.
pub(crate) fn binary_with_mcp(dir: &TempDir, url: &str, mcp: &str) -> crate::binary::Served {
    let extra = format!(
        "\n[channels.telegram]\ntoken_env = \"TELEGRAM_BOT_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"{ALICE}\"]\n\n[mcp]\nconversation = \"telegram:{ALICE}\"\n{mcp}"
    );
    let config = crate::binary::write_config(dir.path(), &extra);
    crate::binary::Served::start_with_env(&config, &[("TELEGRAM_BOT_TOKEN", "123:test")])
}

#[tokio::test]
async fn an_agents_question_over_mcp_is_answered_by_a_tap() {
    use crate::mcp::{call, call_in_background, http_client, structured, text};

    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let served = binary_with_mcp(&dir, &url, "");
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;

    let pending = call_in_background(
        &client,
        call(
            "ask_user",
            json!({"prompt": "Which region?", "detail": "for the new bucket",
                   "options": ["eu-west", {"label": "us-east", "description": "cheapest, <80 ms away"}]}),
        ),
    );
    let card = fake.sent("Which region?", 1).await;
    // The buttons show labels; the text says what each option is.
    assert!(
        card["text"].as_str().unwrap().contains("for the new bucket\n1. eu-west\n2. us-east — cheapest, <80 ms away"),
        "{card}"
    );
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "us-east"));
    let result = pending.await.unwrap();
    let outcome = structured(&result);
    assert_eq!(
        (outcome["status"].as_str(), &outcome["value"]),
        (Some("answered"), &json!("us-east")),
        "{}",
        text(&result)
    );
    assert_eq!(outcome["answered_by"], format!("telegram:{ALICE}"));
    assert_eq!(outcome["answered_name"], "@user42");
    edited(&fake, ALICE, id_of(&card), "✅ us-east — @user42 via telegram").await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_answer_in_the_agents_client_retracts_the_telegram_card_but_its_own_approval_is_never_offered_there() {
    use crate::mcp::{Forms, call, call_in_background, structured};

    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let served = binary_with_mcp(&dir, &url, "elicitation = true\n");
    let (base, token) = served.agent(dir.path()).await;
    let shown = Arc::default();
    let forms =
        Forms { answer: Some(json!({"answer": "eu-west"})), shown: Arc::clone(&shown), taken_away: Arc::default() };
    let client = crate::mcp::client_with(&format!("{base}/mcp"), &token, forms).await;

    let ask = json!({"prompt": "Which region?", "options": ["eu-west", "us-east"]});
    let result = client.call_tool(call("ask_user", ask)).await.unwrap();
    assert_eq!(structured(&result)["value"], "eu-west");
    let card = fake.sent("Which region?", 1).await;
    edited(&fake, ALICE, id_of(&card), "via mcp").await;

    // Its own approval is not offered to the client (nobody approves their own request): a
    // person taps it.
    let pending = call_in_background(&client, call("request_approval", json!({"action": "terraform apply"})));
    let card = fake.sent("terraform apply", 1).await;
    let tap = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Allow once"));
    fake.callback_answer(tap).await;
    assert_eq!(structured(&pending.await.unwrap())["decision"], "once");
    assert_eq!(shown.lock().unwrap().len(), 1, "only the question was a form: {:?}", shown.lock().unwrap());

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_gated_tool_call_is_approved_by_a_tap() {
    use crate::binary::example;
    use crate::mcp::{call, call_in_background, http_client, text};

    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("old.log"), "x").unwrap();
    let upstream = format!(
        "\n[[mcp.upstream]]\nname = \"files\"\ncommand = [\"{}\", \"{}\"]\napprove = [\"delete_*\"]\n",
        example("files_server").display(),
        files.display()
    );
    let served = binary_with_mcp(&dir, &url, &upstream);
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    eventually(|| async {
        let tools = client.list_tools(None).await.ok()?.tools;
        tools.iter().any(|t| t.name == "files__delete_file").then_some(())
    })
    .await;

    let pending = call_in_background(&client, call("files__delete_file", json!({"path": "old.log"})));
    let card = fake.sent("files__delete_file", 1).await;
    // The arguments as a preformatted block (a `pre` entity over exactly the JSON).
    let shown = card["text"].as_str().unwrap();
    let json_at = shown.find("{\n  \"path\": \"old.log\"\n}").expect("the arguments, pretty-printed");
    let pre = card["entities"].as_array().unwrap().iter().find(|e| e["type"] == "pre").expect("a pre entity");
    assert_eq!(pre["offset"], shown[..json_at].encode_utf16().count(), "{card}");
    assert_eq!(pre["length"], "{\n  \"path\": \"old.log\"\n}".len(), "{card}");
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Allow once"));
    let result = pending.await.unwrap();
    assert!(text(&result).starts_with("deleted"), "{}", text(&result));
    assert!(!files.join("old.log").exists());
    edited(&fake, ALICE, id_of(&card), "✅").await;

    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_claude_code_hook_is_allowed_by_a_tap() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let served = binary_with_mcp(&dir, &url, &format!("\n[claude_code]\nconversation = \"telegram:{ALICE}\"\n"));
    let (base, token) = served.agent(dir.path()).await;
    let hook = json!({"session_id": "4f0c9a2e-1b7d", "transcript_path": "/t.jsonl", "cwd": "/home/dev/app",
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
        "tool_input": {"command": "npm test", "description": "Run the tests"}});
    let pending = tokio::spawn(async move {
        let response = reqwest::Client::new()
            .post(format!("{base}/hooks/claude-code"))
            .bearer_auth(token)
            .json(&hook)
            .send()
            .await;
        response.unwrap().json::<Value>().await.unwrap()
    });
    let card = fake.sent("Bash: npm test", 1).await;
    assert!(card["text"].as_str().unwrap().contains("in /home/dev/app · session 4f0c9a2e"), "{card}");
    fake.press(ALICE, ALICE, id_of(&card), &data(&card, "Allow once"));
    let answer = pending.await.unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "allow", "{answer}");
    edited(&fake, ALICE, id_of(&card), "✅").await;
    served.terminate().await;
}
