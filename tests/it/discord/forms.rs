//! Forms on Discord: a select per choice, a modal for what is typed, Send for what is left
//! optional; a wrong value named and refused, the rest kept; the card updated to the outcome.

use askgate::clock::Clock;
use askgate::engine::{Context, Function, FunctionError, Settings};
use askgate::question::form::{Form, SubOption, Subquestion};
use askgate::question::{Ask, Outcome, Status, UserRef};
use async_trait::async_trait;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::{ALICE, BOB, CHANNEL, Dc, components, custom_id, id_of, question_id, retracted};
use crate::fake_discord::FakeDiscord;
use crate::support::{anyone, channel_functions};

/// Asks its form and says the answer it got, as JSON.
struct Asks(Ask);

#[async_trait]
impl Function for Asks {
    async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
        let answer = ctx.ask(self.0.clone()).await?;
        Ok(format!("Got {}", answer.value))
    }
}

fn signup() -> Ask {
    let schema = json!({
        "type": "object",
        "properties": {
            "plan": {"type": "string", "title": "Plan", "oneOf": [
                {"const": "free", "title": "Free"},
                {"const": "pro", "title": "Pro", "description": "everything, for 5 € a month"}
            ]},
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "title": "Age", "minimum": 18, "maximum": 130},
            "email": {"type": "string", "title": "Email", "format": "email"}
        },
        "required": ["plan", "name", "age"]
    });
    Ask::form("Sign up", Form::from_schema(&schema).unwrap())
}

fn trip() -> Ask {
    let label = |l: &str| SubOption::Label(l.to_owned());
    Ask::questions(
        "Plan the trip",
        vec![
            Subquestion {
                header: "Library".into(),
                prompt: "Which library?".into(),
                options: vec![label("dayjs"), label("luxon")],
                allow_custom: true,
                ..Subquestion::default()
            },
            Subquestion {
                header: "Days".into(),
                prompt: "Which days?".into(),
                options: vec![label("Mon"), label("Tue"), label("Wed")],
                multi: true,
                ..Subquestion::default()
            },
        ],
    )
    .unwrap()
}

fn prefs() -> Ask {
    let schema = json!({
        "type": "object",
        "properties": {
            "tabs": {"type": "string", "title": "Indent with", "enum": ["tabs", "spaces"]},
            "wrap": {"type": "boolean", "title": "Wrap lines", "default": false}
        },
        "required": ["tabs"]
    });
    Ask::form("Editor settings", Form::from_schema(&schema).unwrap())
}

async fn setup() -> (TempDir, FakeDiscord, Dc) {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeDiscord::start().await;
    let mut settings = Settings::default();
    settings.channels.insert("discord".into(), anyone());
    let mut functions = channel_functions();
    for (name, ask) in [("signup", signup()), ("trip", trip()), ("prefs", prefs())] {
        functions.insert(name, "asks a form", std::sync::Arc::new(Asks(ask)));
    }
    let dc = Dc::start_with_functions(&dir, &url, &fake, settings, Clock::system(), functions).await;
    (dir, fake, dc)
}

/// The `(custom_id, label, value)` of each text input of a modal response.
fn inputs(modal: &Value) -> Vec<(String, String, Option<String>)> {
    (modal["data"]["components"].as_array().unwrap().iter())
        .map(|row| &row["components"][0])
        .map(|i| {
            let text = |key: &str| i[key].as_str().map(str::to_owned);
            (text("custom_id").unwrap(), text("label").unwrap(), text("value"))
        })
        .collect()
}

fn private(response: &Value) -> &str {
    assert_eq!((response["type"].as_u64(), response["data"]["flags"].as_u64()), (Some(4), Some(64)), "{response}");
    response["data"]["content"].as_str().unwrap()
}

#[tokio::test]
async fn a_form_is_filled_with_a_select_and_the_modal_and_a_wrong_value_is_named_and_refused() {
    let (_dir, fake, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run signup", None);
    let card = fake.sent("Sign up", 1).await;
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Plan", "Fill in…", "Send", "Decline"], "{card}");
    let content = card["content"].as_str().unwrap();
    assert!(content.contains("**Age** · a whole number from 18 to 130"), "{content}");
    let plan = &card["components"][0]["components"][0];
    assert_eq!(plan["options"][1]["description"], "everything, for 5 € a month", "{plan}");
    let id = question_id(&card);

    let picked = fake.select(ALICE, CHANNEL, id_of(&card), plan["custom_id"].as_str().unwrap(), &["#2"]);
    assert_eq!(private(&fake.callback(picked).await), "Saved. Still to fill in: Name, Age.");

    let fill = custom_id(&card, "Fill in…");
    let modal = fake.callback(fake.click(ALICE, CHANNEL, id_of(&card), &fill)).await;
    assert_eq!(
        (modal["type"].as_u64(), modal["data"]["custom_id"].as_str()),
        (Some(9), Some(fill.as_str())),
        "{modal}"
    );
    let named: Vec<(String, String)> = inputs(&modal).into_iter().map(|(i, l, _)| (i, l)).collect();
    let named: Vec<(&str, &str)> = named.iter().map(|(i, l)| (i.as_str(), l.as_str())).collect();
    assert_eq!(named, [("v2", "Name"), ("v3", "Age"), ("v4", "Email")]);
    let name = &modal["data"]["components"][0]["components"][0];
    assert_eq!((name["min_length"].as_u64(), name["required"].as_bool()), (Some(2), Some(true)), "{name}");

    let wrong = [("v2", "Ada Lovelace"), ("v3", "200"), ("v4", "ada@example.com")];
    let submitted = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &wrong);
    let refused = private(&fake.callback(submitted).await).to_owned();
    assert!(refused.contains("Age: a whole number from 18 to 130"), "{refused}");
    assert!(refused.contains("The rest is kept"), "{refused}");
    assert_eq!(dc.engine.records().question(id).await.unwrap().unwrap().status, Status::Pending);

    // What was right is kept: the modal opens with it, the wrong one empty.
    let modal = fake.callback(fake.click(ALICE, CHANNEL, id_of(&card), &fill)).await;
    let values: Vec<Option<String>> = inputs(&modal).into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(values, [Some("Ada Lovelace".to_owned()), None, Some("ada@example.com".to_owned())]);

    // A field right before and wrong now is not answered with what it was before.
    let swapped = [("v2", "A"), ("v3", "36"), ("v4", "ada@example.com")];
    let submitted = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &swapped);
    let refused = private(&fake.callback(submitted).await).to_owned();
    assert!(refused.contains("Name: at least 2 characters"), "{refused}");
    assert_eq!(dc.engine.records().question(id).await.unwrap().unwrap().status, Status::Pending);

    let right = [("v2", "Ada Lovelace"), ("v3", "36"), ("v4", "ada@example.com")];
    let submitted = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &right);
    let response = fake.callback(submitted).await;
    assert_eq!(response["type"], 7, "the card is updated in place: {response}");
    let expected = json!({"plan": "pro", "name": "Ada Lovelace", "age": 36, "email": "ada@example.com"});
    let q = dc.engine.records().question(id).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(Outcome::Answered { value: expected.clone() }));
    // The card reads the answer field by field.
    let shown =
        retracted(&fake, id_of(&card), "✅ plan: pro; name: Ada Lovelace; age: 36; email: ada@example.com").await;
    assert!(shown["content"].as_str().unwrap().contains(&format!("@user{ALICE} via discord")), "{shown}");
    fake.sent(&format!("Got {expected}"), 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn several_questions_are_answered_with_a_select_and_own_words_and_strangers_and_forgeries_change_nothing() {
    let (_dir, fake, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run trip", None);
    let card = fake.sent("Plan the trip", 1).await;
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Library", "Days", "Fill in…", "Decline"], "{card}");
    let id = question_id(&card);
    let days = custom_id(&card, "Days");

    let stranger = fake.select(BOB, CHANNEL, id_of(&card), &days, &["#1"]);
    assert_eq!(private(&fake.callback(stranger).await), "Not yours to answer.");
    let no_such_field = format!("/field {id} 9");
    for (control, values) in [(days.as_str(), ["#4"]), (no_such_field.as_str(), ["#1"])] {
        let forged = fake.select(ALICE, CHANNEL, id_of(&card), control, &values);
        assert_eq!(private(&fake.callback(forged).await), "That button is not understood.", "{control}");
    }
    let fill = custom_id(&card, "Fill in…");
    let forged = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &[("v1", "dayjs")]);
    assert_eq!(private(&fake.callback(forged).await), "That form is not understood.", "a choice is not typed");
    let user = UserRef::parse(&format!("discord:{ALICE}")).unwrap();
    let q = dc.engine.records().question(id).await.unwrap().unwrap();
    assert!(dc.engine.forms().form_draft(&q, &user).await.unwrap().is_empty(), "nothing was filled in");

    let picked = fake.select(ALICE, CHANNEL, id_of(&card), &days, &["#1", "#3"]);
    assert_eq!(private(&fake.callback(picked).await), "Saved. Still to fill in: Library.");
    let modal = fake.callback(fake.click(ALICE, CHANNEL, id_of(&card), &fill)).await;
    let ids: Vec<String> = inputs(&modal).into_iter().map(|(i, _, _)| i).collect();
    assert_eq!(ids, ["o1"], "own words for the library: {modal}");
    let submitted = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &[("o1", "moment.js")]);
    assert_eq!(fake.callback(submitted).await["type"], 7);
    let expected = json!({"Library": "moment.js", "Days": ["Mon", "Wed"]});
    let q = dc.engine.records().question(id).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(Outcome::Answered { value: expected.clone() }));
    retracted(&fake, id_of(&card), "✅ Library: moment.js; Days: Mon, Wed").await;
    fake.sent("Got {\"Library\":\"moment.js\"", 1).await;
    dc.stop().await;
}

#[tokio::test]
async fn send_answers_a_form_with_its_optional_fields_left_at_their_defaults() {
    let (_dir, fake, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run prefs", None);
    let card = fake.sent("Editor settings", 1).await;
    let labels: Vec<String> = components(&card).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Indent with", "Wrap lines (optional)", "Send", "Decline"], "{card}");
    let send = custom_id(&card, "Send");
    let early = fake.click(ALICE, CHANNEL, id_of(&card), &send);
    assert!(private(&fake.callback(early).await).contains("Indent with: is required"));
    let picked = fake.select(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Indent with"), &["#2"]);
    let saved = private(&fake.callback(picked).await).to_owned();
    assert_eq!(saved, "Saved. Press Send to send it as it is, or fill in Wrap lines first.");
    let sent = fake.click(ALICE, CHANNEL, id_of(&card), &send);
    assert_eq!(fake.callback(sent).await["type"], 7);
    let q = dc.engine.records().question(question_id(&card)).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(Outcome::Answered { value: json!({"tabs": "spaces", "wrap": false}) }));
    dc.stop().await;
}

#[tokio::test]
async fn own_words_in_the_modal_that_look_like_a_position_are_recorded_as_written() {
    let (_dir, fake, dc) = setup().await;
    fake.message(ALICE, CHANNEL, "/run trip", None);
    let card = fake.sent("Plan the trip", 1).await;
    let id = question_id(&card);
    let picked = fake.select(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "Days"), &["#2"]);
    assert_eq!(private(&fake.callback(picked).await), "Saved. Still to fill in: Library.");
    let fill = custom_id(&card, "Fill in…");
    let submitted = fake.submit_inputs(ALICE, CHANNEL, id_of(&card), &fill, &[("o1", "#1")]);
    assert_eq!(fake.callback(submitted).await["type"], 7);
    let q = dc.engine.records().question(id).await.unwrap().unwrap();
    let expected = json!({"Library": "#1", "Days": ["Tue"]});
    assert_eq!(q.outcome, Some(Outcome::Answered { value: expected }), "not option 1 (dayjs)");
    dc.stop().await;
}
