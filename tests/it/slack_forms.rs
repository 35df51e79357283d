//! Forms on Slack, through the real binary against the loopback Slack: the card's "Fill in…"
//! opens a modal of inputs, and its submission is answered in the reply Slack waits for — the
//! Socket Mode acknowledgement's payload, or the HTTP response's body.

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::fake_slack::{FakeSlack, TEAM, button, elements};
use crate::slack::{sign, url_encode};
use crate::support::{eventually, get_json};

const ALICE: &str = "U0000ALICE";
const BOB: &str = "U0000BOB";
const CHANNEL: &str = "C0000GENERAL";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Asks Alice a sign-up form in the channel over the API; its id.
async fn ask(base: &str, token: &str) -> String {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "plan"]
    });
    let body = json!({"conversation": format!("slack:{TEAM}:{CHANNEL}"), "kind": "form", "prompt": "Sign up",
        "schema": schema, "answerers": [format!("slack:{ALICE}")]});
    let response = reqwest::Client::new()
        .post(format!("{base}/api/questions"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

async fn outcome(base: &str, token: &str, id: &str) -> Value {
    get_json(&format!("{base}/api/questions/{id}/outcome?wait=0"), token).await
}

/// The modal's inputs: (block id, element type, label).
fn inputs(view: &Value) -> Vec<(String, String, String)> {
    let blocks = view["blocks"].as_array().unwrap().iter().filter(|b| b["type"] == "input");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    blocks.map(|b| (text(&b["block_id"]), text(&b["element"]["type"]), text(&b["label"]["text"]))).collect()
}

fn state(name: &str, age: &str, plan: Option<&str>) -> Value {
    let picked = plan.map(|p| json!({"text": {"type": "plain_text", "text": p}, "value": p}));
    json!({
        "f1": {"v": {"type": "plain_text_input", "value": name}},
        "f2": {"v": {"type": "number_input", "value": age}},
        "f3": {"v": {"type": "static_select", "selected_option": picked}},
        "f4": {"v": {"type": "radio_buttons", "selected_option": null}}
    })
}

/// The card `ts` once it shows `needle` and has no buttons left.
async fn retracted(fake: &FakeSlack, ts: &str, needle: &str) -> Value {
    eventually(|| async {
        let m = fake.message_at(ts);
        (m.to_string().contains(needle) && elements(&m).is_empty()).then_some(m)
    })
    .await
}

const ANSWER: &str = r#"{"name":"Ada Lovelace","age":36,"plan":"pro","newsletter":false}"#;

#[tokio::test]
async fn a_form_card_opens_a_modal_whose_submission_is_answered_in_the_socket_acknowledgement() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeSlack::start().await;
    let toml = format!(
        "[channels.slack]\ntoken_env = \"SLACK_BOT_TOKEN\"\napp_token_env = \"SLACK_APP_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"*\"]\n"
    );
    let env = [("SLACK_BOT_TOKEN", "xoxb-fake"), ("SLACK_APP_TOKEN", "xapp-fake")];
    let served = Served::start_with_env(&write_config(dir.path(), &toml), &env);
    fake.connected(1).await;
    let (base, token) = served.api(dir.path()).await;
    let id = ask(&base, &token).await;
    let (ts, card) = fake.sent("Sign up", 1).await;
    let labels: Vec<Value> = elements(&card).iter().map(|e| e["text"]["text"].clone()).collect();
    assert_eq!(labels, ["Fill in…", "Decline"]);
    assert_eq!(button(&card, "Fill in…"), format!("/fill {id}"), "the button's value is the typed command");

    // Typed, `/fill` still shows the fields as text.
    fake.message(ALICE, CHANNEL, &format!("/fill {}", &id[..8]), None);
    fake.sent("1. Name: …", 1).await;

    // Bob may not answer: told so privately, and no modal opens.
    fake.click(BOB, CHANNEL, &ts, &button(&card, "Fill in…"));
    fake.ephemeral(BOB, "Not yours to answer.").await;
    assert!(fake.calls("views.open").is_empty());

    let click = fake.click(ALICE, CHANNEL, &ts, &button(&card, "Fill in…"));
    let view = fake.opened(1).await;
    let trigger = format!("trigger.{}", click.strip_prefix("env-").unwrap());
    assert_eq!(fake.calls("views.open")[0]["trigger_id"], trigger, "the modal opens on the click's trigger");
    assert_eq!(view["callback_id"], format!("form:{id}"));
    let expected = [
        ("f1", "plain_text_input", "Name"),
        ("f2", "number_input", "age"),
        ("f3", "static_select", "plan"),
        ("f4", "radio_buttons", "newsletter"),
    ];
    assert_eq!(inputs(&view), expected.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned())));

    // Bob's submission of Alice's modal (he was never shown one) answers nothing.
    let forged = fake.submit_form(BOB, &view, state("Bob", "30", Some("1")));
    let reply = fake.ack_payload(&forged).await;
    assert_eq!(reply, json!({"response_action": "errors", "errors": {"f1": "Not yours to answer."}}));

    // Wrong values: each field is named in the acknowledgement, and the question waits.
    let wrong = fake.submit_form(ALICE, &view, state("A", "200", None));
    let reply = fake.ack_payload(&wrong).await;
    assert_eq!(reply["response_action"], "errors", "{reply}");
    assert_eq!(
        reply["errors"],
        json!({"f1": "at least 2 characters", "f2": "a whole number from 0 to 150", "f3": "is required"})
    );
    assert_eq!(outcome(&base, &token, &id).await["status"], "pending");

    let good = fake.submit_form(ALICE, &view, state("Ada Lovelace", "36", Some("2")));
    assert_eq!(fake.ack_payload(&good).await, json!({"response_action": "clear"}));
    retracted(&fake, &ts, "✅").await;
    let answered = outcome(&base, &token, &id).await;
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["outcome"]["value"], serde_json::from_str::<Value>(ANSWER).unwrap());

    // A second submission, once it is answered: the modal says so.
    let late = fake.submit_form(ALICE, &view, state("Grace Hopper", "40", Some("1")));
    let reply = fake.ack_payload(&late).await;
    assert_eq!(reply["response_action"], "update", "{reply}");
    assert!(reply["view"]["blocks"][0]["text"]["text"].as_str().unwrap().starts_with("Already closed: ✅"), "{reply}");
    served.terminate().await;
}

#[tokio::test]
async fn over_http_a_forms_submission_is_answered_in_the_response_body() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeSlack::start().await;
    let toml = format!(
        "[channels.slack]\ntoken_env = \"SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\napi_url = \"{url}\"\nallowed_users = [\"*\"]\n"
    );
    let env = [("SLACK_BOT_TOKEN", "xoxb-fake"), ("SLACK_SIGNING_SECRET", SECRET)];
    let served = Served::start_with_env(&write_config(dir.path(), &toml), &env);
    let (base, token) = served.api(dir.path()).await;
    served.log_line("slack connected").await;
    let id = ask(&base, &token).await;
    let (ts, card) = fake.sent("Sign up", 1).await;
    let post = |payload: Value| {
        let body = format!("payload={}", url_encode(&payload.to_string()));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let request = reqwest::Client::new()
            .post(format!("{base}/channels/slack"))
            .header("x-slack-request-timestamp", now.to_string())
            .header("x-slack-signature", sign(SECRET, now, &body))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        }
    };
    let action = json!({"type": "button", "action_id": "a1", "value": button(&card, "Fill in…")});
    let answered = post(FakeSlack::actions_payload(ALICE, CHANNEL, &ts, action, json!({"values": {}}), 7)).await;
    assert_eq!(answered, "", "a click is answered at once, with nothing");
    let view = fake.opened(1).await;
    assert_eq!(fake.calls("views.open")[0]["trigger_id"], "trigger.7");

    let wrong = post(FakeSlack::form_payload(ALICE, &view, state("Ada", "x", Some("1")), 8)).await;
    let wrong: Value = serde_json::from_str(&wrong).unwrap();
    assert_eq!(wrong, json!({"response_action": "errors", "errors": {"f2": "a whole number from 0 to 150"}}));
    assert_eq!(outcome(&base, &token, &id).await["status"], "pending");

    let good = post(FakeSlack::form_payload(ALICE, &view, state("Ada Lovelace", "36", Some("2")), 9)).await;
    assert_eq!(serde_json::from_str::<Value>(&good).unwrap(), json!({"response_action": "clear"}));
    retracted(&fake, &ts, "✅").await;
    assert_eq!(outcome(&base, &token, &id).await["outcome"]["value"], serde_json::from_str::<Value>(ANSWER).unwrap());
    served.terminate().await;
}
