//! What only WhatsApp does, through the real binary against the fake Cloud API and Meta's
//! signed webhook deliveries ([`crate::fake_whatsapp`]): reply buttons, lists and numbered
//! text; reactions; the outcome as a reply to the card; signatures and redeliveries; the
//! 24-hour window and its template; the Graph API's errors by name; the subscribe handshake.
//! The behaviours every channel has run on WhatsApp in the channel contract
//! (`contract::*::whatsapp`).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract::driver::Askgate;
use crate::contract::whatsapp::{PERSON, start_askgate};
use crate::fake_whatsapp::{self as fake, APP_SECRET, FakeWhatsApp, Sent};
use crate::support::eventually;

/// A number that has never written to the business number.
const NEWCOMER: &str = "+447700900123";

/// The fake Cloud API and askgate on it, the person allowed to start runs.
struct Chat {
    fake: FakeWhatsApp,
    askgate: Askgate,
}

impl Chat {
    async fn start(more: &str) -> Self {
        let (fake, url) = FakeWhatsApp::start().await;
        let askgate = start_askgate(&url, &[PERSON], more).await;
        Self { fake, askgate }
    }

    /// `from` sends `message`; the delivery's body.
    async fn send_from(&self, from: &str, message: Value) -> Value {
        let body = self.fake.delivery(from, message);
        self.fake.deliver(&self.askgate.base, &body).await;
        body
    }

    async fn say(&self, text: &str) -> Value {
        self.send_from(PERSON, fake::text(text)).await
    }

    /// The person taps the button or row of `card` whose title is `title`.
    async fn tap(&self, card: &Sent, title: &str) -> Value {
        let (title, id) = card.choices().into_iter().find(|(t, _)| t == title).expect("the card offers it");
        let list = card.body["interactive"]["type"] == "list";
        self.send_from(PERSON, fake::choice(&card.id, &id, &title, list)).await
    }

    async fn ask(&self, to: &str, body: Value) -> String {
        self.askgate.ask(&format!("whatsapp:{to}"), &format!("whatsapp:{to}"), body).await
    }

    async fn health(&self) -> Value {
        reqwest::get(format!("{}/healthz", self.askgate.base)).await.unwrap().json().await.unwrap()
    }
}

/// The options `option 1` … `option n`.
fn options(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("option {i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_reply_buttons_with_its_outcomes_replying_to_the_cards() {
    let chat = Chat::start("").await;
    chat.say("/run demo").await;
    let card = chat.fake.card("Which library for date formatting?").await;
    assert_eq!(card.body["type"], "interactive");
    assert_eq!(card.body["interactive"]["type"], "button");
    let titles: Vec<String> = card.choices().into_iter().map(|(t, _)| t).collect();
    assert_eq!(titles, ["dayjs", "date-fns", "luxon"]);
    assert!(card.choices().iter().all(|(_, id)| id.starts_with("/answer ") && id.len() <= 256));
    assert_eq!(card.to(), PERSON);
    // A button reply resumes the run: the next card is the confirm, Yes / No.
    chat.tap(&card, "date-fns").await;
    let outcome = chat.fake.reply_to(&card.id, "date-fns").await;
    assert!(outcome.text().contains("Person 4567"), "who answered: {}", outcome.text());
    let confirm = chat.fake.card("Archive all 87 emails?").await;
    let titles: Vec<String> = confirm.choices().into_iter().map(|(t, _)| t).collect();
    assert_eq!(titles, ["Yes", "No"]);
    chat.tap(&confirm, "Yes").await;
    let outcome = chat.fake.reply_to(&confirm.id, "✅").await;
    assert!(outcome.text().contains("yes") || outcome.text().contains("Yes"), "{}", outcome.text());
    chat.fake.wait_for(|s| s.text().contains("Using date-fns for dates; archived 87 emails.")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_options_come_as_a_list_whose_rows_answer() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let id = chat.ask(PERSON, json!({"prompt": "Which of five?", "options": options(5)})).await;
    let card = chat.fake.card("Which of five?").await;
    assert_eq!(card.body["interactive"]["type"], "list");
    let rows = card.choices();
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|(title, id)| title.chars().count() <= 24 && id.len() <= 200), "{rows:?}");
    chat.tap(&card, "option 4").await;
    let q = chat.askgate.resolved(&id).await;
    assert_eq!(q["outcome"]["value"], "option 4", "{q}");
    chat.fake.reply_to(&card.id, "option 4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_options_come_as_numbered_text_with_answer_lines() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let id = chat.ask(PERSON, json!({"prompt": "Which of twelve?", "options": options(12)})).await;
    let card = chat.fake.card("Which of twelve?").await;
    assert_eq!(card.body["type"], "text");
    let short = &id[..8];
    for n in 1..=12 {
        assert!(card.text().contains(&format!("{n}. option {n}")), "{}", card.text());
        assert!(card.text().contains(&format!("/answer {short} {n}")), "{}", card.text());
    }
    chat.say(&format!("/answer {short} 11")).await;
    assert_eq!(chat.askgate.resolved(&id).await["outcome"]["value"], "option 11");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thumbs_up_on_an_approval_allows_once() {
    let chat = Chat::start("").await;
    chat.say("/run approve-demo").await;
    let card = chat.fake.card("rm -rf build/").await;
    let titles: Vec<String> = card.choices().into_iter().map(|(t, _)| t).collect();
    assert_eq!(titles, ["Allow once", "Allow always", "Reject"]);
    // WhatsApp sends a reaction with the person's skin tone when they chose one.
    chat.send_from(PERSON, fake::reaction(&card.id, "👍🏽")).await;
    chat.fake.wait_for(|s| s.text().contains("Allowed once: ran `rm -rf build/`.")).await;
    chat.fake.reply_to(&card.id, "✅").await;
    // Once: no grant was made, so the next run asks again.
    chat.say("/run approve-demo").await;
    eventually(|| async {
        (chat.fake.sent().iter().filter(|s| s.text().contains("rm -rf build/") && !s.choices().is_empty()).count() == 2)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thumbs_down_on_a_confirm_says_no() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let id = chat.ask(PERSON, json!({"kind": "confirm", "prompt": "Ship it?"})).await;
    let card = chat.fake.card("Ship it?").await;
    // A reaction on something else, or one taken away, is nothing.
    chat.send_from(PERSON, fake::reaction("wamid.OTHER", "👍")).await;
    chat.send_from(PERSON, json!({"type": "reaction", "reaction": {"message_id": card.id}})).await;
    assert_eq!(chat.askgate.question(&id).await["status"], "pending");
    chat.send_from(PERSON, fake::reaction(&card.id, "👎")).await;
    let q = chat.askgate.resolved(&id).await;
    assert_eq!(q["outcome"]["value"], false, "{q}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_or_wrongly_signed_delivery_is_refused() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let id = chat.ask(PERSON, json!({"prompt": "Which colour?", "options": ["red", "green"]})).await;
    let card = chat.fake.card("Which colour?").await;
    let sent = chat.fake.sent().len();
    let (_, green) = card.choices().into_iter().find(|(t, _)| t == "green").unwrap();
    let body = chat.fake.delivery(PERSON, fake::choice(&card.id, &green, "green", false));
    let base = &chat.askgate.base;
    assert_eq!(chat.fake.deliver_signed(base, &body, None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(chat.fake.deliver_signed(base, &body, Some("not-the-app-secret")).await, StatusCode::UNAUTHORIZED);
    // Signed, but for another body.
    let bytes = serde_json::to_vec(&body).unwrap();
    let other = fake::sign(APP_SECRET, b"{}");
    let answer = reqwest::Client::new()
        .post(format!("{base}/channels/whatsapp"))
        .header("x-hub-signature-256", other)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let refusal: Value = answer.json().await.unwrap();
    assert_eq!(refusal["error"]["code"], "bad_signature");
    // Nothing changed: the question waits, nothing was said.
    assert_eq!(chat.askgate.question(&id).await["status"], "pending");
    assert_eq!(chat.fake.sent().len(), sent);
    // The same delivery, signed, is taken.
    chat.fake.deliver(base, &body).await;
    assert_eq!(chat.askgate.resolved(&id).await["outcome"]["value"], "green");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_message_applies_once() {
    let chat = Chat::start("").await;
    let start = chat.say("/run demo").await;
    let card = chat.fake.card("Which library for date formatting?").await;
    chat.fake.deliver(&chat.askgate.base, &start).await;
    let tap = chat.tap(&card, "dayjs").await;
    chat.fake.reply_to(&card.id, "dayjs").await;
    chat.fake.deliver(&chat.askgate.base, &tap).await;
    chat.fake.card("Archive all 87 emails?").await;
    // A marker after both redeliveries: everything they could have caused is sent by now.
    chat.say("/pending").await;
    chat.fake.wait_for(|s| s.text().contains("Archive all 87 emails?") && s.replying_to().is_some()).await;
    assert_eq!(chat.fake.count("Which library for date formatting?"), 1, "the run started twice");
    assert_eq!(chat.fake.sent().iter().filter(|s| s.replying_to() == Some(card.id.as_str())).count(), 1);
    assert_eq!(chat.askgate.asked("Archive all 87 emails?").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_tap_is_told_who_answered_already() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let id = chat.ask(PERSON, json!({"prompt": "Which colour, late?", "options": ["red", "green"]})).await;
    let card = chat.fake.card("Which colour, late?").await;
    chat.askgate.answer(&id, json!("red")).await;
    chat.fake.reply_to(&card.id, "red").await;
    chat.tap(&card, "green").await;
    let note = chat.fake.reply_to(&card.id, "Already answered: red").await;
    assert!(note.text().contains("api:operator") || note.text().contains("operator"), "{}", note.text());
    assert_eq!(chat.askgate.question(&id).await["outcome"]["value"], "red");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_a_question_goes_as_the_template() {
    let chat = Chat::start("template = \"askgate_question\"\ntemplate_language = \"en_GB\"\n").await;
    let id = chat.ask(NEWCOMER, json!({"prompt": "Deploy\nto prod?", "options": ["yes please", "not now"]})).await;
    let template = chat.fake.wait_for(|s| s.body["type"] == "template").await;
    assert_eq!(template.to(), NEWCOMER);
    assert_eq!(template.body["template"]["name"], "askgate_question");
    assert_eq!(template.body["template"]["language"]["code"], "en_GB");
    assert_eq!(template.text(), "Deploy to prod?", "the prompt, on one line");
    assert!(chat.fake.sent().iter().all(|s| s.body["type"] == "template"), "nothing else outside the window");
    // They reply to it: the window opens, and the question's card comes.
    chat.send_from(NEWCOMER, fake::replying(fake::text("Show me"), &template.id)).await;
    let card = chat.fake.card("to prod?").await;
    assert_eq!((card.to(), card.body["interactive"]["type"].as_str()), (NEWCOMER.to_owned(), Some("button")));
    assert_eq!(chat.askgate.question(&id).await["status"], "pending", "their reply was no answer");
    let (_, yes) = card.choices().into_iter().find(|(t, _)| t == "yes please").unwrap();
    chat.send_from(NEWCOMER, fake::choice(&card.id, &yes, "yes please", false)).await;
    assert_eq!(chat.askgate.resolved(&id).await["outcome"]["value"], "yes please");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_without_a_template_the_question_fails_at_once() {
    let chat = Chat::start("").await;
    let id = chat.ask(NEWCOMER, json!({"prompt": "Deploy?", "options": ["yes", "no"]})).await;
    let q = chat.askgate.resolved(&id).await;
    assert_eq!(q["status"], "cancelled", "{q}");
    let reason = q["outcome"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("24 hours") && reason.contains("template"), "{q}");
    assert!(chat.fake.sent().iter().all(|s| s.to() != NEWCOMER), "nothing went out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reengagement_error_falls_back_to_the_template() {
    let chat = Chat::start("template = \"askgate_question\"\n").await;
    chat.say("hello").await;
    chat.fake.fail_next(400, 131_047, None);
    let id = chat.ask(PERSON, json!({"prompt": "Which colour, re-engaged?", "options": ["red", "green"]})).await;
    let template = chat.fake.wait_for(|s| s.body["type"] == "template").await;
    assert_eq!(
        (template.text(), template.body["template"]["language"]["code"].as_str()),
        ("Which colour, re-engaged?".to_owned(), Some("en_US"))
    );
    // WhatsApp may say it later, in the card's status: the template goes out then.
    let id2 = chat.ask(PERSON, json!({"prompt": "Which size, undelivered?", "options": ["s", "m"]})).await;
    let card = chat.fake.card("Which size, undelivered?").await;
    chat.fake.deliver(&chat.askgate.base, &chat.fake.failed_status(&card.id, PERSON, 131_047)).await;
    chat.fake.wait_for(|s| s.body["type"] == "template" && s.text() == "Which size, undelivered?").await;
    for id in [id, id2] {
        assert_eq!(chat.askgate.question(&id).await["status"], "pending");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_throughput_limit_is_waited_out() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    chat.fake.fail_next(400, 130_429, Some(1));
    chat.fake.fail_next(400, 131_056, Some(1));
    chat.ask(PERSON, json!({"prompt": "Which colour, throttled?", "options": ["red", "green"]})).await;
    chat.fake.card("Which colour, throttled?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_shows_on_healthz() {
    let (fake, url) = FakeWhatsApp::start().await;
    fake.refuse_token();
    let askgate = start_askgate_unchecked(&url).await;
    let health =
        || async { reqwest::get(format!("{}/healthz", askgate.base)).await.unwrap().json::<Value>().await.unwrap() };
    let h = eventually(|| async {
        Some(health().await).filter(|h| h["channels"]["whatsapp"].as_str().is_some_and(|s| s.starts_with("down")))
    })
    .await;
    assert!(h["channels"]["whatsapp"].as_str().unwrap().contains("refuses the token (190)"), "{h}");
}

/// askgate on the fake without waiting for it to take the token.
async fn start_askgate_unchecked(url: &str) -> Askgate {
    let channel = format!(
        "\n[channels.whatsapp]\ntoken_env = \"WA_T\"\napp_secret_env = \"WA_S\"\nverify_token_env = \"WA_V\"\n\
         phone_number_id = \"{}\"\napi_url = \"{url}\"\nallowed_users = [\"{PERSON}\"]\n",
        fake::PHONE_NUMBER_ID
    );
    Askgate::start(&channel, &[("WA_T", fake::TOKEN), ("WA_S", APP_SECRET), ("WA_V", fake::VERIFY_TOKEN)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_handshake_answers_with_its_challenge() {
    let chat = Chat::start("").await;
    let url = format!("{}/channels/whatsapp", chat.askgate.base);
    let query = |token: &str| {
        vec![
            ("hub.mode", "subscribe".to_owned()),
            ("hub.challenge", "1158201444".to_owned()),
            ("hub.verify_token", token.to_owned()),
        ]
    };
    let answer = reqwest::Client::new().get(&url).query(&query(fake::VERIFY_TOKEN)).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.text().await.unwrap(), "1158201444");
    let wrong = reqwest::Client::new().get(&url).query(&query("guess")).send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    assert!(!wrong.text().await.unwrap().contains("1158201444"));
    let health = chat.health().await;
    assert_eq!(health["channels"]["whatsapp"], "up", "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_is_told_their_number_not_run() {
    let chat = Chat::start("").await;
    let stranger = "+15557654321";
    chat.send_from(stranger, fake::text("/run demo")).await;
    let refusal = chat.fake.wait_for(|s| s.to() == stranger).await;
    assert!(refusal.text().contains("whatsapp:+15557654321"), "{}", refusal.text());
    assert_eq!(chat.askgate.asked("Which library for date formatting?").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_is_remembered_across_a_restart() {
    let mut chat = Chat::start("").await;
    chat.say("hello").await;
    chat.askgate.restart().await;
    chat.askgate.served().log_line("whatsapp connected").await;
    // No template: a question outside the window would end at once; this one is shown.
    let id = chat.ask(PERSON, json!({"prompt": "Which colour, after a restart?", "options": ["red", "green"]})).await;
    let card = chat.fake.card("Which colour, after a restart?").await;
    assert_eq!(card.body["interactive"]["type"], "button");
    assert_eq!(chat.askgate.question(&id).await["status"], "pending");
}

#[tokio::test]
async fn a_number_not_in_e164_is_refused_naming_the_key() {
    let dir = tempfile::TempDir::new().unwrap();
    let section = "\n[channels.whatsapp]\ntoken_env = \"T\"\napp_secret_env = \"S\"\nverify_token_env = \"V\"\n\
                   phone_number_id = \"1065\"\nallowed_users = [\"15551234567\"]\n";
    let config = crate::binary::write_config(dir.path(), section);
    let out = tokio::process::Command::new(crate::binary::BIN)
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("channels.whatsapp.allowed_users") && err.contains("`15551234567` is not a phone number in E.164"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_answered_with_what_askgate_reads() {
    let chat = Chat::start("").await;
    let note = chat.send_from(PERSON, json!({"type": "audio", "audio": {"id": "m1", "mime_type": "audio/ogg"}})).await;
    let id = note["entry"][0]["changes"][0]["value"]["messages"][0]["id"].as_str().unwrap().to_owned();
    let answer = chat.fake.reply_to(&id, "askgate reads text, buttons, list choices and reactions here").await;
    assert!(answer.text().contains("audio"), "{}", answer.text());
    // Delivered again, it is answered once: nothing more came by the answer to a later message.
    chat.fake.deliver(&chat.askgate.base, &note).await;
    let marker = chat.say("/pending").await;
    let marker = marker["entry"][0]["changes"][0]["value"]["messages"][0]["id"].as_str().unwrap().to_owned();
    chat.fake.wait_for(|s| s.replying_to() == Some(marker.as_str())).await;
    assert_eq!(chat.fake.sent().iter().filter(|s| s.replying_to() == Some(id.as_str())).count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_escalated_outside_the_window_keeps_waiting_where_it_was_asked() {
    let chat = Chat::start("").await;
    chat.say("hello").await;
    let body = json!({"prompt": "Which colour, escalated?", "options": ["red", "green"],
        "escalate_after": 1, "escalate_to": format!("whatsapp:{NEWCOMER}")});
    let id = chat.ask(PERSON, body).await;
    chat.fake.card("Which colour, escalated?").await;
    // The copy cannot reach the newcomer (no template): the question itself is not cancelled.
    chat.askgate.served().log_line("has not written to the WhatsApp number in the last 24 hours").await;
    assert_eq!(chat.askgate.question(&id).await["status"], "pending");
    let cards = chat.fake.sent().into_iter().filter(|s| s.to() == NEWCOMER && !s.choices().is_empty()).count();
    assert_eq!(cards, 0, "no card went to the newcomer");
}
