//! Every button's payload is a command: typed on the console of the real binary, each does
//! what its tap does on a card (ticks, "Other…", "Reject with note…", a form's fields).

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::support::eventually;

async fn ask(base: &str, token: &str, body: Value) -> String {
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

/// The outcome once the question is no longer pending.
async fn ended(base: &str, token: &str, id: &str) -> Value {
    eventually(|| async {
        let o = crate::support::get_json(&format!("{base}/api/questions/{id}/outcome?wait=0"), token).await;
        (o["status"] != "pending").then_some(o)
    })
    .await
}

async fn pending(base: &str, token: &str, id: &str) -> bool {
    crate::support::get_json(&format!("{base}/api/questions/{id}/outcome?wait=0"), token).await["status"] == "pending"
}

#[tokio::test]
async fn a_cards_buttons_typed_on_the_console_do_what_their_taps_do() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;

    let multi =
        json!({"conversation": "console:local", "prompt": "Pick sizes", "options": ["S", "M", "L"], "multi": true});
    let id = ask(&base, &token, multi).await;
    let short = served.card_id("Pick sizes").await;
    served.type_line(&format!("/toggle {short} 1")).await;
    served.stdout_line(&format!("Ticked on {short}: 1) S.")).await;
    served.type_line(&format!("/toggle {short} 3")).await;
    served.stdout_line(&format!("Ticked on {short}: 1) S, 3) L.")).await;
    served.type_line(&format!("/toggle {short} 1")).await;
    served.stdout_line(&format!("Ticked on {short}: 3) L.")).await;
    assert!(pending(&base, &token, &id).await, "a tick answers nothing");
    served.type_line(&format!("/submit {short}")).await;
    assert_eq!(ended(&base, &token, &id).await["outcome"]["value"], json!(["L"]));

    let custom = json!({"conversation": "console:local", "prompt": "Which port", "options": ["80", "443"], "allow_custom": true});
    let id = ask(&base, &token, custom).await;
    let short = served.card_id("Which port").await;
    served.type_line(&format!("/other {short}")).await;
    served.stdout_line(&format!("Your own answer to {short}: /other {short} <your words>")).await;
    served.type_line(&format!("/other {short} 1")).await;
    let answered = ended(&base, &token, &id).await;
    assert_eq!(answered["outcome"]["value"], "1", "one's own words, not option 1: {answered}");

    let approval = json!({"conversation": "console:local", "kind": "approval", "action": "drop table users"});
    let id = ask(&base, &token, approval).await;
    let short = served.card_id("drop table users").await;
    served.type_line(&format!("/note {short}")).await;
    served.stdout_line(&format!("Why reject {short}? /note {short} <why>")).await;
    assert!(pending(&base, &token, &id).await, "asking how to give a note rejects nothing");
    served.type_line(&format!("/note {short} not on a Friday")).await;
    let rejected = ended(&base, &token, &id).await;
    assert_eq!(
        (rejected["status"].as_str(), rejected["outcome"]["feedback"].as_str()),
        (Some("declined"), Some("not on a Friday")),
        "{rejected}"
    );

    let editable =
        json!({"conversation": "console:local", "kind": "approval", "action": "deploy prod", "editable": true});
    let id = ask(&base, &token, editable).await;
    let short = served.card_id("deploy prod").await;
    served.type_line(&format!("/other {short} deploy staging")).await;
    let edited = ended(&base, &token, &id).await;
    assert!(edited.to_string().contains("deploy staging"), "{edited}");
    served.terminate().await;
}

fn survey() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "age": {"type": "integer", "minimum": 0},
            "plan": {"type": "string", "enum": ["free", "pro"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "plan"]
    })
}

#[tokio::test]
async fn a_forms_buttons_typed_on_the_console_fill_the_persons_draft_as_their_taps_do() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    let form = json!({"conversation": "console:local", "kind": "form", "prompt": "Survey", "schema": survey()});
    let id = ask(&base, &token, form).await;
    let short = served.card_id("Survey").await;

    served.type_line(&format!("/ftype {short} 1")).await;
    served.stdout_line(&format!("/ftype {short} 1 <value> fills it.")).await;
    served.type_line(&format!("/ftype {short} 1 Ada")).await;
    served.stdout_line("2/5 · age").await;
    served.type_line(&format!("/fskip {short} 2")).await;
    served.stdout_line("3/5 · plan").await;
    served.type_line(&format!("/fset {short} 3 2")).await;
    served.stdout_line("4/5 · tags").await;
    served.type_line(&format!("/ftoggle {short} 4 1")).await;
    served.type_line(&format!("/ftoggle {short} 4 3")).await;
    served.stdout_line(&format!("Ticked for tags: 1) red, 3) blue. /fdone {short} 4 fills it with them.")).await;
    served.type_line(&format!("/fdone {short} 4")).await;
    served.stdout_line("5/5 · newsletter").await;
    served.type_line(&format!("/fill {short}")).await;
    served.stdout_line("   1. Name: Ada").await;
    served.stdout_line("   3. plan: pro").await;
    served.stdout_line(r#"   4. tags: ["red","blue"]"#).await;
    assert!(pending(&base, &token, &id).await, "a draft answers nothing");

    served.type_line(&format!("/freset {short}")).await;
    served.stdout_line("Started over.").await;
    served.type_line(&format!("/field {short} 1 Grace")).await;
    served.type_line(&format!("/fset {short} 3 1")).await;
    served.type_line(&format!("/send {short}")).await;
    let answered = ended(&base, &token, &id).await;
    assert_eq!(
        answered["outcome"]["value"],
        json!({"name": "Grace", "plan": "free", "newsletter": false}),
        "{answered}"
    );
    served.terminate().await;
}
