//! The Slack adapter: the real slack-morphism client inside the real engine, against loopback
//! servers that speak Slack's Web API and Socket Mode; and its HTTP mode, signed requests to
//! askgate's own server.

use std::sync::Arc;

use askgate::channel::slack::{Slack, SlackConfig};
use askgate::clock::Clock;
use askgate::engine::{Engine, Settings};
use askgate::question::Status;
use askgate::store::{SqliteStore, Synchronous};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tempfile::TempDir;
use tokio::task::JoinHandle;

use crate::fake_slack::{FakeSlack, TEAM, button, elements};
use crate::support::{anyone, channel_functions, db_path, eventually, init_log};

const ALICE: &str = "U0000ALICE";
const BOB: &str = "U0000BOB";
const CHANNEL: &str = "C0000GENERAL";

struct Sl {
    engine: Engine,
    slack: Arc<Slack>,
    serving: JoinHandle<()>,
}

impl Sl {
    async fn start(dir: &TempDir, api: &str, app_token: Option<&str>) -> Self {
        init_log();
        let mut settings = Settings::default();
        settings.channels.insert("slack".into(), anyone());
        let store = SqliteStore::open(db_path(dir.path()).to_str().unwrap(), Synchronous::Normal).await.unwrap();
        let clock = Clock::system();
        let engine = Engine::new(Arc::new(store), channel_functions(), settings, clock.clone());
        let config = SlackConfig {
            token: "xoxb-fake".into(),
            app_token: app_token.map(str::to_owned),
            api_url: Some(api.to_owned()),
        };
        let slack = Slack::new(&config, clock).unwrap();
        engine.delivery().attach(slack.clone());
        engine.start().await.unwrap();
        let (e, stop, s) = (engine.clone(), engine.stopping(), slack.clone());
        let serving = tokio::spawn(async move { s.serve(e, stop).await.unwrap() });
        Self { engine, slack, serving }
    }

    async fn stop(self) {
        self.engine.stopping().cancel();
        self.serving.await.unwrap();
        self.engine.shutdown().await;
    }
}

async fn setup() -> (TempDir, FakeSlack, Sl) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeSlack::start().await;
    let sl = Sl::start(&dir, &url, Some("xapp-fake")).await;
    fake.connected(1).await;
    (dir, fake, sl)
}

/// The question id a card's buttons carry.
fn question_id(card: &Value) -> String {
    let value = elements(card).into_iter().find_map(|e| e["value"].as_str().map(str::to_owned)).unwrap();
    value.split_whitespace().nth(1).unwrap().to_owned()
}

/// Waits until the card `ts` shows `needle` and has no buttons left.
async fn updated(fake: &FakeSlack, ts: &str, needle: &str) -> Value {
    eventually(|| async {
        let m = fake.message_at(ts);
        (m.to_string().contains(needle) && elements(&m).is_empty()).then_some(m)
    })
    .await
}

#[tokio::test]
async fn the_demo_runs_by_clicking_buttons() {
    let (_dir, fake, sl) = setup().await;
    let started = fake.message(ALICE, CHANNEL, "/run demo", None);
    fake.acked(&started).await;
    let (ts, card) = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(card["channel"], CHANNEL);
    let labels: Vec<Value> = elements(&card).iter().map(|e| e["text"]["text"].clone()).collect();
    assert_eq!(labels, ["dayjs", "date-fns", "luxon", "Other…", "Decline"]);
    assert_eq!(sl.engine.delivery().channel_states(), [("slack", askgate::engine::ChannelState::Up)]);
    let id = question_id(&card);
    assert_eq!(button(&card, "date-fns"), format!("/answer {id} #2"), "a button's value is its command");
    let action_ids: std::collections::HashSet<Value> = elements(&card).iter().map(|e| e["action_id"].clone()).collect();
    assert_eq!(action_ids.len(), 5, "action ids are unique on the card");
    let click = fake.click(ALICE, CHANNEL, &ts, &button(&card, "date-fns"));
    fake.acked(&click).await;
    let resolved = updated(&fake, &ts, "✅ date-fns — @userU0000ALICE via slack").await;
    assert!(resolved["text"].as_str().unwrap().contains("date-fns"), "{resolved}");
    let (confirm_ts, confirm) = fake.sent("Archive all 87 emails?", 1).await;
    fake.click(ALICE, CHANNEL, &confirm_ts, &button(&confirm, "Yes"));
    fake.sent("Using date-fns for dates; archived 87 emails.", 1).await;
    let q = sl.engine.records().question(id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(q.answered_via, Some(askgate::channel::slack::SURFACE));
    sl.stop().await;
}

#[tokio::test]
async fn a_strangers_click_is_refused_privately() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    let id = question_id(&card);
    fake.click(BOB, CHANNEL, &ts, &button(&card, "dayjs"));
    fake.ephemeral(BOB, "Not yours to answer.").await;
    let q = sl.engine.records().question(id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(q.status, Status::Pending);
    sl.stop().await;
}

#[tokio::test]
async fn a_redelivered_click_resumes_nothing() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    // Alice's click, then the same envelope again (Slack saw no acknowledgement in time).
    let n = 77;
    let action = json!({"type": "button", "action_id": "a1", "value": button(&card, "dayjs")});
    let payload = FakeSlack::actions_payload(ALICE, CHANNEL, &ts, action, json!({"values": {}}), n);
    let first = fake.envelope("interactive", payload.clone());
    updated(&fake, &ts, "✅ dayjs").await;
    fake.sent("Archive all 87 emails?", 1).await;
    fake.redeliver(&first, "interactive", payload);
    // A marker message after it: once it is answered, the redelivery was applied.
    fake.message(ALICE, CHANNEL, "/pending", None);
    fake.sent("waiting", 1).await;
    fake.sent_exactly("Archive all 87", 1).await;
    sl.stop().await;
}

#[tokio::test]
async fn a_redelivered_message_starts_no_second_run() {
    let (_dir, fake, sl) = setup().await;
    // The same message event twice: one run.
    // (Slack redelivers an envelope it saw no acknowledgement for after a few seconds: here,
    // once the run it started has asked.)
    let event = FakeSlack::message_event(ALICE, CHANNEL, "/run demo", None, 500);
    let once = fake.envelope("events_api", event.clone());
    fake.sent("Which library", 1).await;
    fake.redeliver(&once, "events_api", event);
    // A marker message after it: once it is answered, the redelivery was applied.
    fake.message(ALICE, CHANNEL, "/pending", None);
    fake.sent("waiting", 1).await;
    fake.sent_exactly("Which library", 1).await;
    sl.stop().await;
}

#[tokio::test]
async fn free_text_through_other_is_a_modal_whose_submission_answers() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "Other…"));
    let view = fake.opened(1).await;
    assert_eq!(view["type"], "modal");
    assert!(fake.calls("views.open")[0]["trigger_id"].as_str().unwrap().starts_with("trigger."));
    fake.submit(ALICE, &view, "moment");
    updated(&fake, &ts, "✅ moment").await;
    sl.stop().await;
}

#[tokio::test]
async fn a_plain_reply_in_a_cards_thread_answers_it() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "date-fns"));
    let (confirm_ts, _) = fake.sent("Archive all 87 emails?", 1).await;
    // (Once askgate has recorded the card it posted: a reply within the same instant would be
    // a reply to a message askgate does not know yet.)
    eventually(|| async {
        sl.engine.records().card_conversation(askgate::channel::slack::SURFACE, CHANNEL, &confirm_ts).await.unwrap()
    })
    .await;
    fake.message(ALICE, CHANNEL, "no", Some(&confirm_ts));
    updated(&fake, &confirm_ts, "No — slack:U0000ALICE via slack").await;
    fake.sent("left the 87 emails where they are", 1).await;
    sl.stop().await;
}

#[tokio::test]
async fn several_choices_are_a_menu_with_a_submit_button() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run multi", None);
    let (ts, card) = fake.sent("Which days?", 1).await;
    let submit = button(&card, "Submit");
    let state = json!({"values": {"pick": {"pick": {"type": "multi_static_select", "selected_options": [
        {"text": {"type": "plain_text", "text": "Mon"}, "value": "#1"},
        {"text": {"type": "plain_text", "text": "Wed"}, "value": "#3"}]}}}});
    let action = json!({"type": "button", "action_id": "a9", "value": submit});
    fake.envelope("interactive", FakeSlack::actions_payload(ALICE, CHANNEL, &ts, action, state, 90));
    updated(&fake, &ts, "Mon, Wed").await;
    sl.stop().await;
}

#[tokio::test]
async fn options_with_descriptions_are_listed_on_the_card_above_its_buttons() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run described", None);
    let (ts, card) = fake.sent("Which library?", 1).await;
    let list = card["blocks"][1]["text"]["text"].as_str().unwrap();
    assert_eq!(list, "*1. dayjs* — 2 kB, the Moment API\n*2. luxon* — time zones built in\n*3. date-fns*", "{card}");
    let labels: Vec<Value> = elements(&card).iter().map(|e| e["text"]["text"].clone()).collect();
    assert_eq!(labels, ["dayjs", "luxon", "date-fns", "Decline"]);
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "luxon"));
    fake.sent("Picked luxon.", 1).await;
    sl.stop().await;
}

/// The channel's conversation.
fn channel() -> askgate::question::Conversation {
    askgate::question::Conversation::parse(&format!("slack:{TEAM}:{CHANNEL}")).unwrap()
}

#[tokio::test]
async fn many_options_are_a_static_select_that_answers() {
    let (_dir, fake, sl) = setup().await;
    let options: Vec<String> = (1..=22).map(|i| format!("region {i}")).collect();
    let mut ask = askgate::question::Ask::question("Which region?").options(options);
    ask.answerers = Some(askgate::question::Answerers::Conversation);
    let asked = sl.engine.asks().ask_external(channel(), ask, askgate::question::UserRef::operator()).await.unwrap();
    let (ts, card) = fake.sent("Which region?", 1).await;
    let select = elements(&card).into_iter().find(|e| e["type"] == "static_select").expect("a menu for 22 options");
    assert_eq!(select["options"].as_array().unwrap().len(), 22);
    fake.pick(ALICE, CHANNEL, &ts, select["action_id"].as_str().unwrap(), "#7");
    updated(&fake, &ts, "region 7").await;
    assert_eq!(sl.engine.records().question(asked.id).await.unwrap().unwrap().status, Status::Answered);
    sl.stop().await;
}

#[tokio::test]
async fn a_rejection_with_a_note_goes_through_a_modal() {
    let (_dir, fake, sl) = setup().await;
    let mut approval = askgate::question::Ask::approval("drop the staging database");
    approval.answerers = Some(askgate::question::Answerers::Conversation);
    let asked =
        sl.engine.asks().ask_external(channel(), approval, askgate::question::UserRef::operator()).await.unwrap();
    let (ts, card) = fake.sent("drop the staging database", 1).await;
    let reject = elements(&card).into_iter().find(|e| e["text"]["text"] == "Reject").unwrap();
    assert_eq!(reject["style"], "danger");
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "Reject with note…"));
    let view = fake.opened(1).await;
    fake.submit(ALICE, &view, "not on a Friday");
    updated(&fake, &ts, "not on a Friday").await;
    let q = sl.engine.records().question(asked.id).await.unwrap().unwrap();
    assert_eq!(q.status, Status::Declined);
    sl.stop().await;
}

#[tokio::test]
async fn a_rate_limited_post_is_retried_until_it_goes_out() {
    let (_dir, fake, sl) = setup().await;
    fake.fail("chat.postMessage", 2);
    fake.message(ALICE, CHANNEL, "/run demo", None);
    fake.sent("Which library", 1).await;
    assert!(fake.calls("chat.postMessage").len() >= 3, "two 429s, then the card");
    sl.stop().await;
}

#[tokio::test]
async fn a_click_while_no_socket_is_up_arrives_on_the_next_one() {
    let (_dir, fake, sl) = setup().await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    // Slack asks for a reconnect, then a socket drops without a word, and a click comes while
    // no socket is up (Slack holds it): the client connects again each time, and the click
    // arrives on the new socket and resumes the run.
    fake.disconnect();
    fake.connected(2).await;
    fake.drop_socket();
    let click = fake.click(ALICE, CHANNEL, &ts, &button(&card, "luxon"));
    fake.connected(3).await;
    fake.acked(&click).await;
    updated(&fake, &ts, "✅ luxon").await;
    fake.sent("Archive all 87 emails?", 1).await;
    sl.stop().await;
}

/// Slack's signature of `body` sent at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn the_http_mode_takes_only_fresh_signed_requests_once() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeSlack::start().await;
    let sl = Sl::start(&dir, &url, None).await;
    let secret = "8f742231b10e8888abcd99yyyzzz85a5";
    let token = askgate::http::ApiToken::new("t".repeat(32), "operator");
    let surfaces = askgate::http::Surfaces {
        routes: vec![askgate::channel::slack::events::routes(
            Some(askgate::channel::slack::events::SlackEvents::new(sl.slack.clone(), secret.into())),
            sl.engine.clock().clone(),
        )],
        ..Default::default()
    };
    let router =
        askgate::http::router(sl.engine.clone(), token, surfaces, askgate::http::HttpSettings::default(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(askgate::http::server::serve(listener, router, sl.engine.stopping(), Default::default()));
    let client = reqwest::Client::new();
    let post = |body: String, timestamp: i64, signature: String, form: bool| {
        let request = client
            .post(format!("http://{addr}/channels/slack"))
            .header("x-slack-request-timestamp", timestamp.to_string())
            .header("x-slack-signature", signature)
            .header("content-type", if form { "application/x-www-form-urlencoded" } else { "application/json" })
            .body(body);
        async move { request.send().await.unwrap() }
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;

    // The Request URL's check.
    let check = json!({"type": "url_verification", "token": "x", "challenge": "3eZbrw1aB"}).to_string();
    let answer = post(check.clone(), now, sign(secret, now, &check), false).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.json::<Value>().await.unwrap()["challenge"], "3eZbrw1aB");

    // A signed message starts a run; its card is posted.
    let event = FakeSlack::message_event(ALICE, CHANNEL, "/run demo", None, 1).to_string();
    let signature = sign(secret, now, &event);
    assert_eq!(post(event.clone(), now, signature.clone(), false).await.status(), 200);
    let (ts, card) = fake.sent("Which library", 1).await;

    // The same request again is a replay; a wrong signature and a stale timestamp are refused.
    let replay = post(event.clone(), now, signature.clone(), false).await;
    assert_eq!(replay.status(), 401);
    assert!(replay.text().await.unwrap().contains("replay"));
    // The same signature with its hex upper-cased is the same MAC: refused, not a new request.
    let hex = signature.strip_prefix("v0=").unwrap();
    let shouted = post(event.clone(), now, format!("v0={}", hex.to_uppercase()), false).await;
    assert_eq!(shouted.status(), 401, "an upper-cased signature replays an accepted request");
    let forged = post(event.clone(), now, sign("not-the-secret", now, &event), false).await;
    assert_eq!(forged.status(), 401);
    let stale = now - 6 * 60;
    let old = post(event.clone(), stale, sign(secret, stale, &event), false).await;
    assert_eq!(old.status(), 401);
    assert!(old.text().await.unwrap().contains("5 minutes"));
    // Slack's notice that it holds events back for a minute is taken, not refused.
    let limited = json!({"token": "x", "type": "app_rate_limited", "team_id": "T0000TEAM",
        "minute_rate_limited": now / 60 * 60, "api_app_id": "A1"})
    .to_string();
    assert_eq!(post(limited.clone(), now, sign(secret, now, &limited), false).await.status(), 200);
    let junk = "{\"type\": \"event_callback\"}".to_owned();
    assert_eq!(post(junk.clone(), now, sign(secret, now, &junk), false).await.status(), 400);

    // A click comes as a signed form with its payload.
    let action = json!({"type": "button", "action_id": "a1", "value": button(&card, "luxon")});
    let payload = FakeSlack::actions_payload(ALICE, CHANNEL, &ts, action, json!({"values": {}}), 2).to_string();
    let form = format!("payload={}", url_encode(&payload));
    assert_eq!(post(form.clone(), now, sign(secret, now, &form), true).await.status(), 200);
    updated(&fake, &ts, "✅ luxon").await;
    // And `/askgate pending` as a slash command: its answer is an ephemeral note.
    let command = "command=%2Faskgate&text=pending&team_id=T0000TEAM&channel_id=C0000GENERAL&user_id=U0000ALICE&response_url=https%3A%2F%2Fhooks.slack.com%2Fc&trigger_id=3.4.5".to_owned();
    assert_eq!(post(command.clone(), now, sign(secret, now, &command), true).await.status(), 200);
    fake.ephemeral(ALICE, "Archive all 87").await;
    assert_eq!(fake.calls("apps.connections.open").len(), 0, "no socket mode without an app-level token");
    sl.stop().await;
}

pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn the_binary_serves_slack_from_its_configuration() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeSlack::start().await;
    let toml = format!(
        "[channels.slack]\ntoken_env = \"SLACK_BOT_TOKEN\"\napp_token_env = \"SLACK_APP_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"*\"]\n"
    );
    let config = crate::binary::write_config(dir.path(), &toml);
    let served = crate::binary::Served::start_with_env(
        &config,
        &[("SLACK_BOT_TOKEN", "xoxb-fake"), ("SLACK_APP_TOKEN", "xapp-fake")],
    );
    fake.connected(1).await;
    served.log_line("slack connected").await;
    fake.message(ALICE, CHANNEL, "/run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "dayjs"));
    updated(&fake, &ts, "✅ dayjs").await;
    assert_eq!(fake.calls("apps.connections.open").len(), 1);
    served.terminate().await;
}

#[tokio::test]
async fn a_thread_is_its_own_conversation() {
    let (_dir, fake, sl) = setup().await;
    // A run started in a thread asks in that thread.
    fake.message(ALICE, CHANNEL, "/run demo", Some("1799999999.000001"));
    let (ts, card) = fake.sent("Which library", 1).await;
    assert_eq!(card["thread_ts"], "1799999999.000001", "{card}");
    let id = question_id(&card);
    let q = sl.engine.records().question(id.parse().unwrap()).await.unwrap().unwrap();
    let thread = format!("slack:{TEAM}:{CHANNEL}:1799999999.000001");
    assert_eq!(q.conversation.unwrap().as_str(), thread);
    fake.message(ALICE, CHANNEL, "2", Some("1799999999.000001"));
    updated(&fake, &ts, "✅ date-fns").await;
    sl.stop().await;
}

#[tokio::test]
async fn a_dm_or_a_mention_takes_commands_without_the_slash() {
    let (_dir, fake, sl) = setup().await;
    // In a DM, `run` and `answer` need no slash; in a channel, a mention of the bot does it.
    let dm = "D0000ALICE";
    fake.message(ALICE, dm, "run demo", None);
    let (ts, card) = fake.sent("Which library", 1).await;
    assert_eq!(card["channel"], dm);
    let short = &question_id(&card)[..8];
    fake.message(ALICE, dm, &format!("answer {short} 3"), None);
    updated(&fake, &ts, "✅ luxon").await;
    fake.message(ALICE, CHANNEL, &format!("<@{}> help", crate::fake_slack::BOT), None);
    let (_, help) = fake.sent("Commands:", 1).await;
    assert_eq!(help["channel"], CHANNEL);
    sl.stop().await;
}

#[tokio::test]
async fn a_quorum_approval_counts_in_place_until_it_has_enough() {
    let (_dir, fake, sl) = setup().await;
    let mut ask = askgate::question::Ask::approval("rotate the keys");
    ask.quorum = Some(2);
    let people = [ALICE, BOB].map(|u| askgate::question::UserRef::parse(&format!("slack:{u}")).unwrap());
    ask.answerers = Some(askgate::question::Answerers::Users { users: people.to_vec() });
    let asked = sl.engine.asks().ask_external(channel(), ask, askgate::question::UserRef::operator()).await.unwrap();
    let (ts, card) = fake.sent("rotate the keys", 1).await;
    fake.click(ALICE, CHANNEL, &ts, &button(&card, "Approve"));
    fake.ephemeral(ALICE, "Approval 1 of 2 recorded").await;
    let counted = eventually(|| async {
        let m = fake.message_at(&ts);
        m.to_string().contains("1 of 2 approvals").then_some(m)
    })
    .await;
    assert!(!elements(&counted).is_empty(), "the card keeps its buttons while it counts: {counted}");
    fake.click(BOB, CHANNEL, &ts, &button(&card, "Approve"));
    updated(&fake, &ts, "✅").await;
    assert_eq!(sl.engine.records().question(asked.id).await.unwrap().unwrap().status, Status::Answered);
    sl.stop().await;
}
