//! The Discord adapter: the real serenity client inside the real engine, against loopback
//! servers that speak Discord's HTTP API and gateway.

use std::sync::Arc;

use askgate::channel::discord::{Discord, DiscordConfig};
use askgate::clock::Clock;
use askgate::engine::{Engine, Functions, Resolver, Settings};
use askgate::question::{QuestionId, Status, Surface, UserRef};
use askgate::store::{SqliteStore, Synchronous};
use serde_json::Value;
use tempfile::TempDir;
use tokio::task::JoinHandle;

use crate::fake_discord::FakeDiscord;
use crate::support::{anyone, channel_functions, db_path, eventually, init_log};

mod forms;
mod language;

const ALICE: u64 = 100_000_000_000_000_101;
const BOB: u64 = 100_000_000_000_000_102;
const CHANNEL: u64 = 600_000_000_000_000_555;

struct Dc {
    engine: Engine,
    serving: JoinHandle<()>,
}

impl Dc {
    async fn start(dir: &TempDir, api: &str, fake: &FakeDiscord) -> Self {
        let mut settings = Settings::default();
        settings.channels.insert("discord".into(), anyone());
        Self::start_with(dir, api, fake, settings).await
    }

    async fn start_with(dir: &TempDir, api: &str, fake: &FakeDiscord, settings: Settings) -> Self {
        Self::start_with_clock(dir, api, fake, settings, Clock::system()).await
    }

    async fn start_with_clock(dir: &TempDir, api: &str, fake: &FakeDiscord, settings: Settings, clock: Clock) -> Self {
        Self::start_with_functions(dir, api, fake, settings, clock, channel_functions()).await
    }

    async fn start_with_functions(
        dir: &TempDir,
        api: &str,
        fake: &FakeDiscord,
        settings: Settings,
        clock: Clock,
        functions: Functions,
    ) -> Self {
        init_log();
        let store = SqliteStore::open(db_path(dir.path()).to_str().unwrap(), Synchronous::Normal).await.unwrap();
        let engine = Engine::new(Arc::new(store), functions, settings, clock.clone());
        let discord = Discord::new(&DiscordConfig { token: "fake-token".into(), api_url: Some(api.to_owned()) }, clock);
        engine.delivery().attach(discord.clone());
        engine.start().await.unwrap();
        let (e, stop) = (engine.clone(), engine.stopping());
        let serving = tokio::spawn(async move { discord.serve(e, stop).await.unwrap() });
        fake.connected().await;
        Self { engine, serving }
    }

    async fn stop(self) {
        self.engine.stopping().cancel();
        self.serving.await.unwrap();
        self.engine.shutdown().await;
    }
}

async fn setup() -> (TempDir, FakeDiscord, String, Dc) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeDiscord::start().await;
    let dc = Dc::start(&dir, &url, &fake).await;
    (dir, fake, url, dc)
}

/// (label or placeholder, custom_id) of every component of a message.
fn components(message: &Value) -> Vec<(String, String)> {
    message["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            let label = c["label"].as_str().or(c["placeholder"].as_str()).unwrap_or_default().to_owned();
            (label, c["custom_id"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn custom_id(message: &Value, label: &str) -> String {
    components(message).into_iter().find(|(l, _)| l == label).unwrap_or_else(|| panic!("no {label} in {message}")).1
}

fn id_of(message: &Value) -> u64 {
    message["id"].as_str().unwrap().parse().unwrap()
}

fn question_id(message: &Value) -> QuestionId {
    components(message)[0].1.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits until a card was edited to show `needle` with its components gone.
async fn retracted(fake: &FakeDiscord, message: u64, needle: &str) -> Value {
    eventually(|| async {
        let m = fake.bot_message(message);
        (m["content"].as_str().unwrap().contains(needle) && m["components"].as_array().is_none_or(|c| c.is_empty()))
            .then_some(m)
    })
    .await
}

#[tokio::test]
async fn the_demo_runs_by_clicking_buttons() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(dc.engine.delivery().channel_states(), [("discord", askgate::engine::ChannelState::Up)]);
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["dayjs", "date-fns", "luxon", "Other…", "Decline"]);
    let click = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "date-fns"));
    let response = fake.callback(click).await;
    assert_eq!(response["type"], 7, "the card is updated in place: {response}");
    let content = response["data"]["content"].as_str().unwrap();
    assert!(content.contains(&format!("✅ date\\-fns — @user{ALICE} via discord")), "{response}");
    // Nothing askgate posts may notify anyone: an `@everyone` in a prompt stays text.
    assert_eq!(response["data"]["allowed_mentions"]["parse"], serde_json::json!([]), "{response}");
    let posts = fake.calls("/messages");
    assert!(!posts.is_empty());
    for (_, path, body) in posts.iter().filter(|(method, ..)| method == "POST") {
        assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]), "{path}: {body}");
    }
    assert_eq!(response["data"]["components"], serde_json::json!([]));
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    fake.click(ALICE, CHANNEL, id_of(&confirm), &custom_id(&confirm, "Yes"));
    fake.sent("Using date\\-fns for dates; archived 87 emails.", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn a_typed_answer_names_its_question_by_a_short_prefix() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    fake.message(ALICE, CHANNEL, &format!("/answer {} 3", &question_id(&card).to_string()[..5]), None);
    retracted(&fake, id_of(&card), "✅ luxon").await;
    dc.stop().await;
}

#[tokio::test]
async fn a_reply_to_a_card_answers_it() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    fake.message(ALICE, CHANNEL, &format!("/answer {} 3", question_id(&card)), None);
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    fake.message(ALICE, CHANNEL, "no", Some(id_of(&confirm)));
    fake.sent("left the 87 emails where they are", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn a_plain_message_answers_the_one_waiting_question() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    fake.message(ALICE, CHANNEL, "2", None);
    retracted(&fake, id_of(&card), "✅ date\\-fns").await;
    dc.stop().await;
}

#[tokio::test]
async fn multi_select_goes_through_a_select_menu() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run multi", None);
    let card = fake.sent("Which days?", 1).await;
    let select = &card["components"][0]["components"][0];
    assert_eq!(
        (select["type"].as_u64(), select["min_values"].as_u64(), select["max_values"].as_u64()),
        (Some(3), Some(1), Some(3))
    );
    let interaction = fake.select(ALICE, CHANNEL, id_of(&card), select["custom_id"].as_str().unwrap(), &["1", "3"]);
    assert_eq!(fake.callback(interaction).await["type"], 7);
    fake.sent("Picked Mon + Wed.", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn options_with_descriptions_are_a_select_that_shows_them() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run described", None);
    let card = fake.sent("Which library?", 1).await;
    let select = &card["components"][0]["components"][0];
    assert_eq!((select["type"].as_u64(), select["max_values"].as_u64()), (Some(3), Some(1)), "{card}");
    let shown: Vec<(&str, Option<&str>)> = (select["options"].as_array().unwrap().iter())
        .map(|o| (o["label"].as_str().unwrap(), o["description"].as_str()))
        .collect();
    assert_eq!(
        shown,
        [("dayjs", Some("2 kB, the Moment API")), ("luxon", Some("time zones built in")), ("date-fns", None)]
    );
    let interaction = fake.select(ALICE, CHANNEL, id_of(&card), select["custom_id"].as_str().unwrap(), &["#2"]);
    assert_eq!(fake.callback(interaction).await["type"], 7);
    fake.sent("Picked luxon.", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn free_text_goes_through_a_modal() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let open = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Other…"));
    let modal = fake.callback(open).await;
    assert_eq!(modal["type"], 9, "a modal opens: {modal}");
    let submit = modal["data"]["custom_id"].as_str().unwrap().to_owned();
    assert_eq!(submit, format!("/answer {}", question_id(&card)));
    let submitted = fake.submit_modal(ALICE, CHANNEL, id_of(&card), &submit, "moment.js");
    assert_eq!(fake.callback(submitted).await["type"], 7);
    retracted(&fake, id_of(&card), "✅ moment.js").await;
    dc.stop().await;
}

#[tokio::test]
async fn reject_with_a_note_goes_through_a_modal() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run approve-demo", None);
    let card = fake.sent("Approve: rm \\-rf build/", 1).await;
    let open = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Reject with note…"));
    let modal = fake.callback(open).await;
    let submit = modal["data"]["custom_id"].as_str().unwrap().to_owned();
    assert!(submit.starts_with("/deny "), "{submit}");
    fake.submit_modal(ALICE, CHANNEL, id_of(&card), &submit, "not on a Friday");
    fake.sent(
        "Rejected: did not run `rm -rf build/` (not on a Friday)"
            .replace('-', "\\-")
            .replace('`', "\\`")
            .replace('(', "\\(")
            .replace(')', "\\)")
            .as_str(),
        1,
    )
    .await;
    dc.stop().await;
}

#[tokio::test]
async fn a_quorum_approval_counts_each_approvers_click_once_until_it_has_enough() {
    let (_dir, fake, _, dc) = setup().await;
    // Carol asks; her own approval does not count toward it.
    let carol = 100_000_000_000_000_103;
    fake.message(carol, CHANNEL, "/run two-approvers", None);
    let card = fake.sent("Approve: deploy prod", 1).await;
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Approve", "Reject", "Reject with note…"], "no allow-always for a quorum");
    let approve = custom_id(&card, "Approve");
    let own = fake.callback(fake.click(carol, CHANNEL, id_of(&card), &approve)).await;
    assert!(own["data"]["content"].as_str().unwrap().starts_with("You asked for this approval"), "{own}");
    let first = fake.callback(fake.click(ALICE, CHANNEL, id_of(&card), &approve)).await;
    assert_eq!(first["data"]["flags"], 64, "told privately: {first}");
    assert!(first["data"]["content"].as_str().unwrap().starts_with("Approval 1 of 2 recorded"), "{first}");
    // The card shows the count through REST and keeps its components.
    let counted = eventually(|| async {
        let m = fake.bot_message(id_of(&card));
        m["content"].as_str().unwrap().contains(&format!("1 of 2 approvals: @user{ALICE}")).then_some(m)
    })
    .await;
    assert_eq!(components(&counted), components(&card));
    let again = fake.callback(fake.click(ALICE, CHANNEL, id_of(&card), &approve)).await;
    assert!(again["data"]["content"].as_str().unwrap().contains("each person counts once"), "{again}");
    let last = fake.callback(fake.click(BOB, CHANNEL, id_of(&card), &approve)).await;
    assert_eq!(last["type"], 7, "the card is updated in place: {last}");
    let content = last["data"]["content"].as_str().unwrap();
    assert!(content.contains(&format!("2 of 2 approvals: @user{ALICE}, @user{BOB}")), "{last}");
    fake.sent("Deployed.", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn a_reminder_pings_only_the_answerer_with_the_cards_commands() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeDiscord::start().await;
    let mut settings = Settings { remind_before: Some(std::time::Duration::from_secs(25 * 60)), ..Settings::default() };
    settings.channels.insert("discord".into(), anyone());
    let clock = Clock::manual(1_800_000_000_000);
    let dc = Dc::start_with_clock(&dir, &url, &fake, settings, clock.clone()).await;
    fake.message(ALICE, CHANNEL, "/run approve-demo", None);
    let card = fake.sent("Approve: rm \\-rf build/", 1).await;
    let id = question_id(&card).short();
    clock.advance(5 * 60_000);
    let reminder = fake.sent("⏰ Reminder", 1).await;
    let content = reminder["content"].as_str().unwrap();
    assert!(content.starts_with(&format!("⏰ Reminder <@{ALICE}>: this still waits")), "{content}");
    assert!(content.contains(&format!("/approve {id} always")), "{content}");
    let (_, _, body) = fake
        .calls("/messages")
        .into_iter()
        .rev()
        .find(|(_, _, b)| b["content"].as_str().unwrap_or("").starts_with("⏰"))
        .unwrap();
    assert_eq!(body["allowed_mentions"]["users"], serde_json::json!([ALICE.to_string()]), "{body}");
    assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]), "nobody else: {body}");
    dc.stop().await;
}

#[tokio::test]
async fn another_users_click_is_refused_privately() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let refused = fake.click(BOB, CHANNEL, id_of(&card), &custom_id(&card, "dayjs"));
    let response = fake.callback(refused).await;
    assert_eq!(response["type"], 4);
    assert_eq!(response["data"]["flags"], 64, "ephemeral: {response}");
    assert_eq!(response["data"]["content"], "Not yours to answer.");
    let q = dc.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    assert_eq!(q.status, Status::Pending);
    dc.stop().await;
}

#[tokio::test]
async fn a_replayed_click_or_a_second_one_resumes_the_run_once() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let dayjs = custom_id(&card, "dayjs");
    let first = fake.click(ALICE, CHANNEL, id_of(&card), &dayjs);
    assert_eq!(fake.callback(first).await["type"], 7);
    fake.sent("Archive all 87 emails?", 1).await;
    // The same interaction again (a gateway replay), and a second click.
    fake.redeliver_click(first, ALICE, CHANNEL, id_of(&card), &dayjs);
    let second = fake.click(ALICE, CHANNEL, id_of(&card), &dayjs);
    let response = fake.callback(second).await;
    assert_eq!(response["data"]["flags"], 64);
    assert!(response["data"]["content"].as_str().unwrap().starts_with("Already answered"), "{response}");
    // A marker message after both: once it is answered, both were applied.
    fake.message(ALICE, CHANNEL, "/pending", None);
    let pending = fake.sent("1 waiting:", 1).await;
    assert!(pending["content"].as_str().unwrap().contains("Archive all 87 emails?"), "{pending}");
    // One card and its /pending listing: the run resumed once.
    fake.sent_exactly("Archive all 87", 2).await;
    dc.stop().await;
}

#[tokio::test]
async fn forged_component_payloads_or_forms_are_refused() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let id = question_id(&card);
    for (payload, reply) in [
        ("dayjs".to_owned(), "That button is not understood."),
        (format!("/note {}", id.short()), "That button is not understood."),
        (format!("/other {}", askgate::question::QuestionId::new()), "This question is no longer known."),
    ] {
        let click = fake.click(ALICE, CHANNEL, id_of(&card), &payload);
        let response = fake.callback(click).await;
        assert_eq!(response["data"]["flags"], 64, "ephemeral: {response}");
        assert_eq!(response["data"]["content"], reply, "{payload}");
    }
    let submitted = fake.submit_modal(ALICE, CHANNEL, id_of(&card), &format!("/approve {id}"), "sure");
    assert_eq!(fake.callback(submitted).await["data"]["content"], "That form is not understood.");
    assert_eq!(dc.engine.records().question(id).await.unwrap().unwrap().status, Status::Pending);
    dc.stop().await;
}

#[tokio::test]
async fn an_answer_elsewhere_removes_the_components_through_rest() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    let q = dc.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    let alice = Resolver::person(UserRef::parse(&format!("discord:{ALICE}")).unwrap(), Surface::API);
    dc.engine.claims().resolve(&q, "dayjs", &alice).await.unwrap();
    retracted(&fake, id_of(&card), &format!("✅ dayjs — discord:{ALICE} via api")).await;
    assert!(fake.calls("/messages/").iter().any(|(m, _, b)| m == "PATCH" && b["components"] == serde_json::json!([])));
    dc.stop().await;
}

#[tokio::test]
async fn a_click_after_a_restart_still_resumes_the_run() {
    let (dir, fake, url, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    dc.stop().await;
    let dc = Dc::start(&dir, &url, &fake).await;
    let click = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "luxon"));
    assert_eq!(fake.callback(click).await["type"], 7);
    fake.sent("Archive all 87 emails?", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn a_dropped_gateway_and_a_reconnect_request_lose_nothing() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let card = fake.sent("Which library", 1).await;
    // Alice answers while the gateway is away: Discord replays it when the session resumes.
    let before = fake.sessions();
    fake.drop_connection();
    assert!(fake.away());
    fake.message(ALICE, CHANNEL, "2", None);
    eventually(|| async { (fake.sessions() != before).then_some(()) }).await;
    retracted(&fake, id_of(&card), "✅ date\\-fns").await;
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    // And taps while askgate reconnects as asked.
    let before = fake.sessions();
    fake.request_reconnect();
    assert!(fake.away());
    fake.click(ALICE, CHANNEL, id_of(&confirm), &custom_id(&confirm, "Yes"));
    eventually(|| async { (fake.sessions() != before).then_some(()) }).await;
    fake.sent("archived 87 emails", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn the_run_application_command_starts_a_run() {
    let (_dir, fake, _, dc) = setup().await;
    eventually(|| async { (!fake.calls("applications/").is_empty()).then_some(()) }).await;
    let command = fake.run_command(ALICE, CHANNEL, "demo");
    let response = fake.callback(command).await;
    assert_eq!((response["type"].as_u64(), response["data"]["flags"].as_u64()), (Some(4), Some(64)));
    fake.sent("Which library", 1).await;
    let unknown = fake.run_command(ALICE, CHANNEL, "nothing");
    assert!(fake.callback(unknown).await["data"]["content"].as_str().unwrap().contains("No function named"));
    dc.stop().await;
}

#[tokio::test]
async fn a_rate_limited_send_is_retried_until_delivered() {
    let (_dir, fake, _, dc) = setup().await;
    fake.fail_next(2);
    fake.message(ALICE, CHANNEL, "/run demo", None);
    fake.sent("Which library", 1).await;
    let posts = fake
        .calls("/messages")
        .iter()
        .filter(|(m, _, b)| m == "POST" && b["content"].as_str().unwrap_or("").contains("Which library"))
        .count();
    assert_eq!(posts, 3, "two refused, one delivered");
    dc.stop().await;
}

#[tokio::test]
async fn by_default_a_stranger_starts_no_run_but_is_told_their_id() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeDiscord::start().await;
    let dc = Dc::start_with(&dir, &url, &fake, Settings::default()).await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let refusal = fake.sent(&format!("allowed\\_users = \\[\"discord:{ALICE}\"\\] in \\[channels.discord\\]"), 1).await;
    assert!(refusal["content"].as_str().unwrap().starts_with("You may not start runs here."), "{refusal}");
    assert!(dc.engine.records().pending_for(None, 1).await.unwrap().is_empty(), "a run started");
    dc.stop().await;
}

/// Alice allowed `rm -rf build/` always by clicking its card: the grant's short id.
async fn allowed_always(fake: &FakeDiscord, dc: &Dc) -> String {
    fake.message(ALICE, CHANNEL, "/run approve-demo", None);
    let card = fake.sent("Approve: rm \\-rf build/", 1).await;
    fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Allow always"));
    let grants = eventually(|| async { dc.engine.records().grants(None).await.unwrap().pop() }).await;
    grants.id[..8].to_owned()
}

#[tokio::test]
async fn allow_always_is_listed_by_grants() {
    let (_dir, fake, _, dc) = setup().await;
    let short = allowed_always(&fake, &dc).await;
    fake.message(ALICE, CHANNEL, "/grants", None);
    let listed = fake.sent("1 standing grant here", 1).await;
    assert!(listed["content"].as_str().unwrap().contains(&format!("/revoke {short}")), "{listed}");
    dc.stop().await;
}

#[tokio::test]
async fn revoke_takes_back_an_allow_always() {
    let (_dir, fake, _, dc) = setup().await;
    let short = allowed_always(&fake, &dc).await;
    fake.message(ALICE, CHANNEL, &format!("/revoke {short}"), None);
    fake.sent(&format!("Revoked {short}"), 1).await;
    assert!(dc.engine.records().grants(None).await.unwrap().is_empty());
    dc.stop().await;
}

#[tokio::test]
async fn edit_opens_a_form_holding_the_action_to_allow_as_edited() {
    let (_dir, fake, _, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run approve-demo", None);
    let card = fake.sent("Approve: rm \\-rf build/", 1).await;
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Allow once", "Allow always", "Reject", "Reject with note…", "Edit…"]);
    let open = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Edit…"));
    let modal = fake.callback(open).await;
    assert_eq!(modal["type"], 9, "a modal opens: {modal}");
    let submit = modal["data"]["custom_id"].as_str().unwrap().to_owned();
    assert_eq!(submit, format!("/edit {}", question_id(&card)));
    let input = &modal["data"]["components"][0]["components"][0];
    assert_eq!(input["value"], "rm -rf build/", "the form holds the action to edit: {modal}");
    let submitted = fake.submit_modal(ALICE, CHANNEL, id_of(&card), &submit, "rm -rf build/cache");
    assert_eq!(fake.callback(submitted).await["type"], 7);
    retracted(&fake, id_of(&card), "allowed as edited: rm \\-rf build/cache").await;
    let q = dc.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    assert_eq!(
        q.outcome.unwrap(),
        askgate::question::Outcome::Answered {
            value: serde_json::json!({"decision": "edited", "action": "rm -rf build/cache"})
        }
    );
    dc.stop().await;
}
