//! Mattermost through the real binary and the loopback server of [`crate::fake_mattermost`]:
//! the demo's cards with signed buttons, clicks that resume and finish the run, the cards
//! updated with their outcome, strangers' and forged clicks, redeliveries, a server asking to
//! slow down, and a server that refuses the token or does not answer, on `/healthz`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract::driver::Driver;
use crate::contract::mattermost::{CHANNEL, Mattermost, PERSON, PUBLIC_URL, STRANGER};
use crate::fake_mattermost::{actions, message};
use crate::support::eventually;

const LIBRARY: &str = "Which library for date formatting?";

/// The health askgate reports for Mattermost.
async fn health(base: &str) -> String {
    let health: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
    health["channels"]["mattermost"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_signed_buttons_to_its_end() {
    let m = Mattermost::start().await;
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    let card = m.fake.posted(LIBRARY).await;
    let id = card["id"].as_str().unwrap().to_owned();
    let buttons = actions(&card);
    let names: Vec<&str> = buttons.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"date-fns") && names.iter().any(|n| n.contains("Decline")), "{names:?}");
    for button in &buttons {
        let context = &button["integration"]["context"];
        let command = context["command"].as_str().unwrap();
        assert!(command.starts_with("/answer ") || command.starts_with("/decline "), "{button}");
        assert_eq!(context["mac"].as_str().unwrap().len(), 64, "an HMAC-SHA256 in hex: {button}");
        assert_eq!(button["integration"]["url"], format!("{PUBLIC_URL}/channels/mattermost/actions"));
    }
    assert_eq!(m.fake.button_url(&id, "date-fns"), format!("{PUBLIC_URL}/channels/mattermost/actions"));

    let (status, body) = m.fake.click(PERSON, "alice", &id, "date-fns").await;
    assert_eq!((status, &body["ephemeral_text"]), (StatusCode::OK, &json!("")), "{body}");
    let confirm = m.fake.posted("Archive all 87 emails?").await;
    let confirm_id = confirm["id"].as_str().unwrap().to_owned();
    m.fake.click(PERSON, "alice", &confirm_id, "Yes").await;
    m.fake.posted("Using date-fns for dates; archived 87 emails.").await;
    for (post, outcome) in [(&id, "date-fns"), (&confirm_id, "Yes")] {
        let settled = eventually(|| async {
            let now = m.fake.post(post);
            (actions(&now).is_empty() && message(&now).contains('✅')).then_some(now)
        })
        .await;
        assert!(message(&settled).to_lowercase().contains(&outcome.to_lowercase()), "{settled}");
        assert!(message(&settled).contains("alice"), "who answered: {settled}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_click_changes_nothing_but_tells_them_alone() {
    let m = Mattermost::start().await;
    let body = json!({"prompt": "Which colour, clicked by whom?", "options": ["red", "green"]});
    let question = m.askgate.ask(&m.conversation(), &m.person(), body).await;
    let card = m.fake.posted("Which colour, clicked by whom?").await;
    let post = card["id"].as_str().unwrap();
    let (status, body) = m.fake.click(STRANGER, "bob", post, "red").await;
    assert_eq!(status, StatusCode::OK);
    let said = body["ephemeral_text"].as_str().unwrap();
    assert!(said.to_lowercase().contains("not yours"), "{said}");
    assert_eq!(m.askgate.question(&question).await["status"], "pending");
    assert_eq!(actions(&m.fake.post(post)).len(), 3, "the card keeps its buttons");
    assert!(m.fake.ephemerals(PERSON).is_empty(), "told to the stranger alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_without_askgates_signature_gets_401() {
    let m = Mattermost::start().await;
    let body = json!({"prompt": "Which colour, forged?", "options": ["red", "green"]});
    let question = m.askgate.ask(&m.conversation(), &m.person(), body).await;
    let card = m.fake.posted("Which colour, forged?").await;
    let post = card["id"].as_str().unwrap();
    let genuine = m.fake.click_request(PERSON, "alice", post, "red");
    let green = m.fake.click_request(PERSON, "alice", post, "green");
    let mut unsigned = genuine.clone();
    unsigned["context"].as_object_mut().unwrap().remove("mac");
    let mut wrong = genuine.clone();
    wrong["context"]["mac"] = json!("00".repeat(32));
    // A signature that is askgate's, but of another button's command.
    let mut swapped = genuine.clone();
    swapped["context"]["mac"] = green["context"]["mac"].clone();
    let mut bare = genuine.clone();
    bare.as_object_mut().unwrap().remove("context");
    for forged in [unsigned, wrong, swapped, bare] {
        let (status, said) = m.fake.send_click(&forged).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{forged}: {said}");
        assert_eq!(said["error"]["code"], "bad_signature");
    }
    assert_eq!(m.askgate.question(&question).await["status"], "pending");
    assert_eq!(actions(&m.fake.post(post)).len(), 3, "the card keeps its buttons");
    // The genuine click still answers.
    assert_eq!(m.fake.send_click(&genuine).await.0, StatusCode::OK);
    assert_eq!(m.askgate.resolved(&question).await["outcome"]["value"], "red");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_post_starts_one_run() {
    let m = Mattermost::start().await;
    let event = m.fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    m.fake.posted(LIBRARY).await;
    m.fake.redeliver(&event);
    // A marker after the redelivery (events are applied in order): once it is answered, the
    // redelivery was read, and a second card would have come before the answer.
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/pending", None);
    let posts = eventually(|| async { Some(m.fake.bot_posts()).filter(|p| p.len() >= 2) }).await;
    assert!(!posts[1]["props"]["attachments"].is_array(), "the second post answers /pending: {}", posts[1]);
    assert_eq!(m.askgate.asked(LIBRARY).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_elsewhere_updates_the_card() {
    let m = Mattermost::start().await;
    let body = json!({"prompt": "Which colour, from the operator?", "options": ["red", "blue"]});
    let question = m.askgate.ask(&m.conversation(), &m.person(), body).await;
    let card = m.fake.posted("Which colour, from the operator?").await;
    // The operator (the console's own person) answers through the API.
    m.askgate.answer(&question, json!("blue")).await;
    let post = card["id"].as_str().unwrap();
    let settled = eventually(|| async {
        let now = m.fake.post(post);
        (actions(&now).is_empty() && message(&now).contains("blue")).then_some(now)
    })
    .await;
    assert!(message(&settled).contains("api:operator") || message(&settled).contains("operator"), "{settled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_asking_to_slow_down_is_waited_out() {
    let m = Mattermost::start().await;
    m.fake.limit_posts(2);
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    m.fake.posted(LIBRARY).await;
    let tries = m.fake.calls("POST /posts").iter().filter(|c| message(c).contains(LIBRARY)).count();
    assert_eq!(tries, 3, "two 429s, then the card");
    m.askgate.served().log_line("asks to slow down").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_shows_on_healthz() {
    let (fake, url) = crate::fake_mattermost::FakeMattermost::start("the-real-token").await;
    let channel = format!(
        "\n[channels.mattermost]\ntoken_env = \"ASKGATE_TEST_MM_TOKEN\"\nurl = \"{url}\"\npublic_url = \"{PUBLIC_URL}\"\n"
    );
    let askgate =
        crate::contract::driver::Askgate::start(&channel, &[("ASKGATE_TEST_MM_TOKEN", "a-wrong-token")]).await;
    let state = eventually(|| async { Some(health(&askgate.base).await).filter(|s| s.starts_with("down")) }).await;
    assert!(state.starts_with("down: stopped: the Mattermost server refused the token"), "{state}");
    assert!(fake.connections().is_empty(), "no WebSocket without a token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_shows_on_healthz() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let channel = format!(
        "\n[channels.mattermost]\ntoken_env = \"ASKGATE_TEST_MM_TOKEN\"\nurl = \"{url}\"\npublic_url = \"{PUBLIC_URL}\"\n"
    );
    let askgate = crate::contract::driver::Askgate::start(&channel, &[("ASKGATE_TEST_MM_TOKEN", "t")]).await;
    let state = eventually(|| async { Some(health(&askgate.base).await).filter(|s| s.starts_with("down")) }).await;
    assert!(state.contains("cannot be reached"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_click_applies_once_without_a_second_note() {
    let m = Mattermost::start().await;
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    let card = m.fake.posted(LIBRARY).await;
    let click = m.fake.click_request(PERSON, "alice", card["id"].as_str().unwrap(), "date-fns");
    assert_eq!(m.fake.send_click(&click).await, (StatusCode::OK, json!({"ephemeral_text": ""})));
    m.fake.posted("Archive all 87 emails?").await;
    // The same request again (a retried delivery): already applied, so nothing to say.
    assert_eq!(m.fake.send_click(&click).await, (StatusCode::OK, json!({"ephemeral_text": ""})));
    // A click of another choice on the same card is a new attempt, and is told it is too late.
    let other = m.fake.click_request(PERSON, "alice", card["id"].as_str().unwrap(), "dayjs");
    let (_, said) = m.fake.send_click(&other).await;
    assert!(said["ephemeral_text"].as_str().unwrap().to_lowercase().contains("already"), "{said}");
    assert_eq!(m.fake.ephemerals(PERSON).len(), 1, "one note, for the other choice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_in_the_cards_thread_answers_it() {
    let m = Mattermost::start().await;
    let body = json!({"prompt": "Which colour, in the thread?", "options": ["red", "green"]});
    let question = m.askgate.ask(&m.conversation(), &m.person(), body).await;
    let card = m.fake.posted("Which colour, in the thread?").await;
    m.fake.post_as(PERSON, "@alice", CHANNEL, "2", card["id"].as_str());
    assert_eq!(m.askgate.resolved(&question).await["outcome"]["value"], "green");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_websocket_is_made_again_resuming_where_it_was() {
    let m = Mattermost::start().await;
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/pending", None);
    m.fake.posted("").await;
    m.fake.drop_connections();
    m.fake.connected(2).await;
    let resumed = &m.fake.connections()[1];
    assert!(resumed.contains("connection_id=conn") && resumed.contains("sequence_number="), "{resumed}");
    // What is said now is heard on the new connection.
    m.fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    m.fake.posted(LIBRARY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_one_instance_holds_the_websocket_until_it_is_killed() {
    use crate::binary::{Served, write_config_on};
    use crate::contract::mattermost::TOKEN;
    let database = crate::backend::TestDatabase::create().await;
    let (fake, url) = crate::fake_mattermost::FakeMattermost::start(TOKEN).await;
    let section = format!(
        "\n[channels.mattermost]\ntoken_env = \"ASKGATE_TEST_MM_TOKEN\"\nurl = \"{url}\"\npublic_url = \"{PUBLIC_URL}\"\n\
         allowed_users = [\"{PERSON}\"]\n"
    );
    let env = [("ASKGATE_TEST_MM_TOKEN", TOKEN)];
    let start = || async {
        let dir = tempfile::TempDir::new().unwrap();
        let served = Served::start_with_env(&write_config_on(dir.path(), &database.url, &section), &env);
        let line = served.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        served.log_line("askgate is ready").await;
        (served, base, dir)
    };
    let leases = |base: String| async move {
        let health: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
        health["leases"].as_array().cloned().unwrap_or_default()
    };
    let (mut a, a_base, _a_dir) = start().await;
    fake.connected(1).await;
    eventually(|| async { (leases(a_base.clone()).await == [json!("mattermost:websocket")]).then_some(()) }).await;
    let (b, b_base, _b_dir) = start().await;
    assert!(leases(b_base.clone()).await.is_empty(), "one instance listens at a time");
    assert_eq!(fake.connections().len(), 1, "one WebSocket");

    // A dies without a word; B takes the lease and connects.
    a.child.kill().await.unwrap();
    eventually(|| async { (leases(b_base.clone()).await == [json!("mattermost:websocket")]).then_some(()) }).await;
    fake.connected(2).await;
    fake.post_as(PERSON, "@alice", CHANNEL, "/run demo", None);
    fake.posted(LIBRARY).await;
    assert_eq!(fake.bot_posts().iter().filter(|p| message(p).contains(LIBRARY)).count(), 1);
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_after_a_mention_of_the_bot_is_read() {
    let m = Mattermost::start().await;
    // Mattermost takes a message starting with `/` for its own command: a mention goes first.
    m.fake.post_as(PERSON, "@alice", CHANNEL, "@askgate /run demo", None);
    m.fake.posted(LIBRARY).await;
}
