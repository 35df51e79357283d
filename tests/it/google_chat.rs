//! Google Chat through the real binary: a Chat app on askgate's HTTP endpoint, against the
//! loopback Chat API, token endpoint and keys of [`crate::fake_google_chat`]. Events are
//! signed with a key the test made and verified by askgate; askgate's service account signs
//! its assertions with another, which the fake token endpoint verifies.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract::driver::{Askgate, short};
use crate::contract::google_chat::{section, section_for};
use crate::fake_google_chat::{CHAT, FakeGoogleChat, PROJECT, SPACE, buttons, keys, person, words};
use crate::support::eventually;

const DEMO: &str = "Which library for date formatting?";

fn alice() -> Value {
    person("111", "Alice", "en")
}

fn bob() -> Value {
    person("222", "Bob", "en")
}

async fn start(allowed: &str) -> (FakeGoogleChat, Askgate) {
    let fake = FakeGoogleChat::start().await;
    let askgate = Askgate::start(&section(&fake, allowed), &[("GOOGLE_CHAT_KEY", &fake.service_account())]).await;
    (fake, askgate)
}

/// Alice's `/run demo` in the space; the card it brings.
async fn run_demo(fake: &FakeGoogleChat, askgate: &Askgate) -> Value {
    let event = fake.message_event(&alice(), SPACE, "/run demo");
    fake.deliver(&askgate.base, &event).await;
    fake.sent(DEMO).await
}

fn click(user: &Value, card: &Value, label: &str) -> Value {
    let (_, command) = buttons(card).into_iter().find(|(l, _)| l.contains(label)).unwrap();
    FakeGoogleChat::click_event(user, SPACE, card["name"].as_str().unwrap(), &command)
}

/// The question id the card's first button carries.
fn question_of(card: &Value) -> String {
    buttons(card)[0].1.split_whitespace().nth(1).unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_before_it_expires_is_replaced_without_losing_a_card() {
    let (fake, askgate) = start("users/111").await;
    let card = run_demo(&fake, &askgate).await;
    let issued = fake.revoke_tokens();
    fake.deliver(&askgate.base, &click(&alice(), &card, "date-fns")).await;
    fake.sent("Archive all 87 emails?").await;
    assert_eq!(fake.revoke_tokens(), issued + 1, "the refused token was replaced once");
    // At once, by the call that was refused: no card failed and waited to be sent again.
    let log = askgate.served().stderr();
    // A refusal is logged as "(HTTP 401)": the bare number is also in timestamps and durations.
    assert!(!log.contains("(HTTP 401)"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_to_its_end_through_card_buttons() {
    let (fake, askgate) = start("users/111").await;
    let card = run_demo(&fake, &askgate).await;
    let id = question_of(&card);
    for (label, command) in buttons(&card) {
        assert!(
            command.starts_with(&format!("/answer {id} ")) || command == format!("/decline {id}"),
            "{label}: {command}"
        );
    }
    // The click is answered with the card updated in place: the outcome, no buttons.
    let (_, response) = fake.deliver(&askgate.base, &click(&alice(), &card, "date-fns")).await;
    assert_eq!(response["actionResponse"]["type"], "UPDATE_MESSAGE", "{response}");
    let clicked = fake.message(card["name"].as_str().unwrap());
    assert!(buttons(&clicked).is_empty() && words(&clicked).contains("date-fns"), "{clicked}");
    let confirm = fake.sent("Archive all 87 emails?").await;
    fake.deliver(&askgate.base, &click(&alice(), &confirm, "Yes")).await;
    fake.sent("Using date-fns for dates; archived 87 emails.").await;
    let name = confirm["name"].as_str().unwrap().to_owned();
    eventually(|| async { buttons(&fake.message(&name)).is_empty().then_some(()) }).await;
    let q = askgate.resolved(&id).await;
    assert_eq!(
        (&q["answered_by"], &q["answered_via"]),
        (&json!("google_chat:users/111"), &json!("google_chat")),
        "{q}"
    );
    // The engine's own update of every card went through the Chat API too.
    assert!(fake.calls("patch").iter().any(|p| p["name"] == card["name"] && p["updateMask"] == "cardsV2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_click_gets_only_a_private_note() {
    let (fake, askgate) = start("users/111").await;
    let card = run_demo(&fake, &askgate).await;
    let id = question_of(&card);
    let (_, response) = fake.deliver(&askgate.base, &click(&bob(), &card, "date-fns")).await;
    assert_eq!(response["privateMessageViewer"]["name"], "users/222", "{response}");
    assert_eq!(fake.private("users/222"), ["Not yours to answer."]);
    assert_eq!(askgate.question(&id).await["status"], "pending");
    assert_eq!(
        buttons(&fake.message(card["name"].as_str().unwrap())).len(),
        buttons(&card).len(),
        "the card is as it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_chat_did_not_sign_get_401_changing_nothing() {
    let (fake, askgate) = start("users/111").await;
    let now = crate::signing::now_secs();
    let claims = |iss: &str, aud: &str, exp: i64| json!({"iss": iss, "aud": aud, "iat": now - 10, "exp": exp});
    // Signed by another key under the name of Chat's: the signature does not match.
    let forged =
        askgate::channel::jwt::sign(&keys().1.pem, Some(&keys().0.kid), &claims(CHAT, PROJECT, now + 600)).unwrap();
    let event = fake.message_event(&alice(), SPACE, "/run demo");
    for (why, bearer) in [
        ("no token", None),
        ("not a token", Some("AbCdEf123456".to_owned())),
        ("wrongly signed", Some(forged)),
        ("another audience", Some(keys().0.sign(&claims(CHAT, "987654321", now + 600)))),
        ("another issuer", Some(keys().0.sign(&claims("someone@example.com", PROJECT, now + 600)))),
        ("expired", Some(keys().0.sign(&claims(CHAT, PROJECT, now - 3_600)))),
    ] {
        let (status, body) = fake.deliver_with(&askgate.base, bearer.as_deref(), &event).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
    }
    // Signed as Chat signs, the same event starts the run: the refusals changed nothing.
    assert_eq!(askgate.asked(DEMO).await, 0);
    assert!(fake.calls("create").is_empty(), "{:?}", fake.calls("create"));
    fake.deliver(&askgate.base, &event).await;
    fake.sent(DEMO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_applies_once() {
    let (fake, askgate) = start("users/111").await;
    let event = fake.message_event(&alice(), SPACE, "/run demo");
    fake.deliver(&askgate.base, &event).await;
    let card = fake.sent(DEMO).await;
    fake.deliver(&askgate.base, &event).await;
    let tap = click(&alice(), &card, "date-fns");
    fake.deliver(&askgate.base, &tap).await;
    let (_, again) = fake.deliver(&askgate.base, &tap).await;
    assert_eq!(again, json!({}), "a redelivered click is answered with nothing new");
    fake.sent("Archive all 87 emails?").await;
    // A marker after anything a second delivery would have sent.
    let marker = fake.message_event(&alice(), SPACE, "/pending");
    fake.deliver(&askgate.base, &marker).await;
    assert_eq!(askgate.asked(DEMO).await, 1);
    assert_eq!(askgate.asked("Archive all 87 emails?").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_elsewhere_updates_the_card() {
    let (fake, askgate) = start("users/111").await;
    let body = json!({"prompt": "Which colour?", "options": ["red", "green", "blue"]});
    let id = askgate.ask(&format!("google_chat:{SPACE}"), "google_chat:users/111", body).await;
    let card = fake.sent("Which colour?").await;
    assert!(words(&card).contains(&format!("id {}", short(&id))), "{card}");
    askgate.answer(&id, json!("blue")).await;
    let name = card["name"].as_str().unwrap().to_owned();
    let settled = eventually(|| async {
        let now = fake.message(&name);
        (buttons(&now).is_empty() && words(&now).contains("blue")).then_some(now)
    })
    .await;
    assert!(words(&settled).contains("api:operator") || words(&settled).contains("operator"), "{settled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_chat_api_is_waited_out() {
    let (fake, askgate) = start("users/111").await;
    fake.fail("create", 2);
    let body = json!({"prompt": "Which size?", "options": ["small", "large"]});
    askgate.ask(&format!("google_chat:{SPACE}"), "google_chat:users/111", body).await;
    fake.sent("Which size?").await;
    assert_eq!(fake.calls("create").iter().filter(|c| words(c).contains("Which size?")).count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_service_account_key_shows_on_healthz() {
    let fake = FakeGoogleChat::start().await;
    fake.refuse_key(true);
    let askgate = Askgate::start(&section(&fake, "users/111"), &[("GOOGLE_CHAT_KEY", &fake.service_account())]).await;
    let state = eventually(|| async {
        let health: Value = reqwest::get(format!("{}/healthz", askgate.base)).await.ok()?.json().await.ok()?;
        health["channels"]["google_chat"].as_str().filter(|s| s.starts_with("down")).map(str::to_owned)
    })
    .await;
    assert!(state.contains("refused the service account key") && state.contains("invalid_grant"), "{state}");
    assert!(fake.calls("token").iter().all(|c| c["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"));
    // Taken again, the channel is up.
    fake.refuse_key(false);
    eventually(|| async {
        let health: Value = reqwest::get(format!("{}/healthz", askgate.base)).await.ok()?.json().await.ok()?;
        (health["channels"]["google_chat"] == "up").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_let_in_by_address_answers_by_address() {
    let (fake, askgate) = start("alice@example.com").await;
    let card = run_demo(&fake, &askgate).await;
    let id = question_of(&card);
    fake.deliver(&askgate.base, &click(&alice(), &card, "dayjs")).await;
    let q = askgate.resolved(&id).await;
    assert_eq!(q["answered_by"], "google_chat:alice@example.com", "{q}");
    // Bob's address is not listed: his message starts nothing, and he is told his id.
    let (_, reply) = fake.deliver(&askgate.base, &fake.message_event(&bob(), SPACE, "/run demo")).await;
    assert!(reply["text"].as_str().unwrap_or_default().contains("google_chat:users/222"), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_url_audience_takes_chats_id_tokens_only() {
    let fake = FakeGoogleChat::start().await;
    let url = "https://askgate.example.org/channels/google-chat";
    let askgate =
        Askgate::start(&section_for(&fake, "users/111", url), &[("GOOGLE_CHAT_KEY", &fake.service_account())]).await;
    let now = crate::signing::now_secs();
    let id_token = |email: &str, verified: bool| {
        keys().0.sign(&json!({"iss": "https://accounts.google.com", "aud": url, "iat": now, "exp": now + 600,
            "email": email, "email_verified": verified, "sub": "1"}))
    };
    let event = fake.message_event(&alice(), SPACE, "/run demo");
    for (why, token) in [
        ("someone else's ID token", id_token("mallory@gmail.com", true)),
        ("an unverified email", id_token(CHAT, false)),
        ("Chat's own JWT, for the project", FakeGoogleChat::chat_token(PROJECT)),
    ] {
        let (status, body) = fake.deliver_with(&askgate.base, Some(&token), &event).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
    }
    assert_eq!(askgate.asked(DEMO).await, 0);
    let (status, body) = fake.deliver_with(&askgate.base, Some(&id_token(CHAT, true)), &event).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    fake.sent(DEMO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_token_endpoint_shows_on_healthz() {
    let fake = FakeGoogleChat::start().await;
    // A port nothing listens on: the key's own token_uri is where askgate asks.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut key: Value = serde_json::from_str(&fake.service_account()).unwrap();
    key["token_uri"] = json!(format!("http://{closed}/token"));
    let askgate = Askgate::start(&section(&fake, "users/111"), &[("GOOGLE_CHAT_KEY", &key.to_string())]).await;
    let state = eventually(|| async {
        let health: Value = reqwest::get(format!("{}/healthz", askgate.base)).await.ok()?.json().await.ok()?;
        health["channels"]["google_chat"].as_str().filter(|s| s.starts_with("down")).map(str::to_owned)
    })
    .await;
    assert!(state.contains("token endpoint") && state.contains("cannot be reached"), "{state}");
    assert!(fake.calls("token").is_empty());
}
