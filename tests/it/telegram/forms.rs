//! Forms on Telegram: one card filled field by field with its buttons and replies to its
//! prompts, a wrong value refused by name, the answer stored as one object.

use std::sync::Arc;

use askgate::clock::Clock;
use askgate::engine::{Context, Function, FunctionError, Settings};
use askgate::question::form::{Form, SubOption, Subquestion};
use askgate::question::{Answerers, Ask, Conversation, Outcome, QuestionId, UserRef};
use async_trait::async_trait;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::{ALICE, Tg, Timeouts, Updates, buttons, data, edited, id_of};
use crate::fake_telegram::FakeTelegram;
use crate::support::{channel_functions, eventually};

/// Asks to sign up with a form and says what it got.
struct Signup;

#[async_trait]
impl Function for Signup {
    async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "title": "Plan", "oneOf": [
                    {"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
                "newsletter": {"type": "boolean", "title": "Newsletter"},
                "name": {"type": "string", "title": "Name", "minLength": 2},
                "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
                "nick": {"type": "string", "title": "Nickname"}
            },
            "required": ["plan", "newsletter", "name"]
        });
        let form = Form::from_schema(&schema).expect("a flat form");
        let answer = ctx.ask(Ask::form("Sign up for the beta", form)).await?;
        Ok(format!("Signed up: {}", answer.value))
    }
}

async fn start(dir: &TempDir, url: &str) -> Tg {
    let mut functions = channel_functions();
    functions.insert("signup", "a form", Arc::new(Signup));
    let settings = Settings::default();
    Tg::launch(dir, url, Updates::Polling, settings, Clock::system(), Timeouts::default(), functions).await.0
}

fn labels(message: &Value) -> Vec<String> {
    buttons(message).into_iter().map(|(label, _)| label).collect()
}

fn text(message: &Value) -> &str {
    message["text"].as_str().unwrap()
}

/// Waits until the card shows `needle` with a keyboard, and returns it.
async fn shows(fake: &FakeTelegram, card: i64, needle: &str) -> Value {
    eventually(|| async {
        let m = fake.message(ALICE, card);
        (text(&m).contains(needle) && m.get("reply_markup").is_some()).then_some(m)
    })
    .await
}

/// Taps the button labelled `label` on the card as it stands; returns the update id.
fn tap(fake: &FakeTelegram, card: i64, label: &str) -> i64 {
    let now = fake.message(ALICE, card);
    fake.press(ALICE, ALICE, card, &data(&now, label))
}

/// The question id in a form card's payloads.
fn question_id(message: &Value) -> QuestionId {
    let decline = data(message, "Decline");
    decline.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits for a sent message with `needle` that asks for a reply, and returns it.
async fn prompt(fake: &FakeTelegram, needle: &str, n: usize) -> Value {
    let prompt = fake.sent(needle, n).await;
    let asked = fake.calls("sendmessage").into_iter().find(|c| c.body["text"] == prompt["text"]).unwrap();
    assert_eq!(asked.body["reply_markup"]["force_reply"], true, "{prompt}");
    prompt
}

#[tokio::test]
async fn a_functions_form_is_filled_field_by_field_on_one_card_and_a_value_that_does_not_fit_is_asked_again() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let tg = start(&dir, &url).await;
    fake.text(ALICE, ALICE, "/run signup", None);
    let card = fake.sent("Sign up for the beta", 1).await;
    let (id, card) = (question_id(&card), id_of(&card));
    let first = fake.message(ALICE, card);
    assert!(text(&first).contains("\n▸ Plan\n· Newsletter\n· Name\n· Age\n· Nickname\n"), "{first}");
    assert_eq!(labels(&first), ["Free", "Pro", "Start over", "Decline"]);

    // A choice by its button, then start over: the draft goes and the first field is back.
    let chose = tap(&fake, card, "Pro");
    assert_eq!(fake.callback_answer(chose).await["text"].as_str().unwrap_or(""), "");
    let now = shows(&fake, card, "✓ Plan: Pro\n▸ Newsletter").await;
    assert_eq!(labels(&now), ["Yes", "No", "Start over", "Decline"]);
    let reset = tap(&fake, card, "Start over");
    assert_eq!(fake.callback_answer(reset).await["text"], "Started over.");
    shows(&fake, card, "\n▸ Plan\n").await;
    tap(&fake, card, "Pro");
    shows(&fake, card, "✓ Plan: Pro\n▸ Newsletter").await;

    // A boolean by its button.
    tap(&fake, card, "Yes");
    let now = shows(&fake, card, "✓ Newsletter: Yes\n▸ Name\n").await;
    assert!(text(&now).contains("▸ Name\n   Text — tap ✍️ Type it… and reply."), "{now}");
    assert_eq!(labels(&now), ["✍️ Type it…", "Start over", "Decline"]);

    // Text by a reply to the prompt "Type it…" sends.
    let typing = tap(&fake, card, "Type it");
    assert_eq!(fake.callback_answer(typing).await["text"], "Reply to the message below.");
    let name_prompt = prompt(&fake, &format!("✍️ Name ({})", id.short()), 1).await;
    fake.text(ALICE, ALICE, "Ada Lovelace", Some(id_of(&name_prompt)));
    let now = shows(&fake, card, "✓ Name: Ada Lovelace\n▸ Age (optional)").await;
    assert_eq!(labels(&now), ["✍️ Type it…", "Skip", "Start over", "Decline"]);

    // "Start over" delivered again is answered and applied no more: the draft stays.
    let answers = fake.calls("answercallbackquery").len();
    fake.redeliver(reset);
    let redelivered =
        eventually(|| async { fake.calls("answercallbackquery").get(answers).map(|c| c.body.clone()) }).await;
    assert_eq!(redelivered["callback_query_id"], format!("cb-{reset}"));
    assert_eq!(redelivered["text"].as_str(), None, "{redelivered}");
    assert_eq!(text(&fake.message(ALICE, card)), text(&now), "the redelivered reset changed the card");

    // A number out of range is refused by the field's name and asked again; the card stays.
    tap(&fake, card, "Type it");
    let age_prompt = prompt(&fake, &format!("✍️ Age ({})", id.short()), 1).await;
    fake.text(ALICE, ALICE, "200", Some(id_of(&age_prompt)));
    let again = prompt(&fake, "Age: a whole number from 0 to 150", 1).await;
    assert!(text(&again).ends_with(&format!("✍️ Age ({}): a whole number from 0 to 150", id.short())), "{again}");
    assert!(text(&fake.message(ALICE, card)).contains("\n▸ Age (optional)"), "the card stays on the field");
    fake.text(ALICE, ALICE, "36", Some(id_of(&again)));
    shows(&fake, card, "✓ Age: 36\n▸ Nickname (optional)").await;

    // An optional field skipped completes the form.
    let skipped = tap(&fake, card, "Skip");
    assert_eq!(fake.callback_answer(skipped).await["text"], "Recorded.");
    let expected = json!({"plan": "pro", "newsletter": true, "name": "Ada Lovelace", "age": 36});
    let said = fake.sent("Signed up:", 1).await;
    let said: Value = serde_json::from_str(text(&said).strip_prefix("Signed up: ").unwrap()).unwrap();
    assert_eq!(said, expected);
    let stored = tg.engine.records().question(id).await.unwrap().unwrap();
    assert_eq!(stored.outcome, Some(Outcome::Answered { value: expected }));
    let done = edited(&fake, ALICE, card, "— @user42 via telegram").await;
    assert!(
        text(&done)
            .contains("\n✓ Plan: Pro\n✓ Newsletter: Yes\n✓ Name: Ada Lovelace\n✓ Age: 36\n– Nickname: left out\n\n"),
        "{done}"
    );
    assert!(text(&done).contains("\n✅ "), "{done}");
    // The prompts that asked for values go with the question.
    for asked in [&name_prompt, &age_prompt, &again] {
        eventually(|| async { fake.deleted(ALICE, id_of(asked)).then_some(()) }).await;
    }
    tg.stop().await;
}

#[tokio::test]
async fn three_questions_asked_together_are_answered_on_one_card_as_an_object_keyed_by_their_headers() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let tg = start(&dir, &url).await;
    let questions = vec![
        Subquestion {
            header: "Library".into(),
            prompt: "Which date library?".into(),
            options: vec![
                SubOption::Described { label: "dayjs".into(), description: Some("2 kB, the Moment API".into()) },
                SubOption::Described { label: "luxon".into(), description: Some("time zones built in".into()) },
            ],
            ..Subquestion::default()
        },
        Subquestion {
            header: "Days".into(),
            prompt: "Which days may it run?".into(),
            options: ["Mon", "Tue", "Wed"].map(|d| SubOption::Label(d.into())).to_vec(),
            multi: true,
            ..Subquestion::default()
        },
        Subquestion { header: "Name".into(), prompt: "What is it called?".into(), ..Subquestion::default() },
    ];
    let ask = Ask::questions("Plan the calendar work", questions).unwrap().answerers(Answerers::Conversation);
    let conversation = Conversation::parse(&format!("telegram:{ALICE}")).unwrap();
    let asked = tg.engine.asks().ask_external(conversation, ask, UserRef::operator()).await.unwrap();
    let card = id_of(&fake.sent("Plan the calendar work", 1).await);
    let first = fake.message(ALICE, card);
    assert!(
        text(&first).contains(
            "\n▸ Library\n   Which date library?\n   1. dayjs — 2 kB, the Moment API\n   \
             2. luxon — time zones built in\n· Days\n· Name\n"
        ),
        "{first}"
    );
    assert_eq!(labels(&first), ["dayjs", "luxon", "Start over", "Decline"]);

    // Payloads that fit no field of this card are refused and change nothing.
    let id = asked.id;
    for forged in [format!("/fset {id} 9 1"), format!("/fset {id} 1 3"), format!("/fskip {id} 1")] {
        let update = fake.press(ALICE, ALICE, card, &forged);
        assert_eq!(fake.callback_answer(update).await["text"], "That button is not understood.", "{forged}");
    }
    let forged = fake.press(ALICE, ALICE, card, &format!("/ftoggle {id} 2 1"));
    assert_eq!(fake.callback_answer(forged).await["text"], "That button is not understood.", "not on the card yet");

    tap(&fake, card, "luxon");
    let now = shows(&fake, card, "✓ Library: luxon\n▸ Days\n   Which days may it run?\n   Tick any, then Done.").await;
    assert_eq!(labels(&now), ["☐ Mon", "☐ Tue", "☐ Wed", "Done", "Start over", "Decline"]);
    // "Type it…" for a field that is not this person's next asks for nothing: the card shows theirs.
    let ahead = fake.press(ALICE, ALICE, card, &format!("/ftype {id} 3"));
    assert_eq!(fake.callback_answer(ahead).await["text"], "Your next field is Days: the card shows it now.");
    let none = tap(&fake, card, "Done");
    assert_eq!(fake.callback_answer(none).await["text"], "Days: pick at least 1");

    // A tick is read from the card it was tapped on: its update coming again changes nothing.
    let ticked = tap(&fake, card, "Mon");
    fake.callback_answer(ticked).await;
    eventually(|| async { labels(&fake.message(ALICE, card))[0].starts_with('☑').then_some(()) }).await;
    let answers = fake.calls("answercallbackquery").len();
    fake.redeliver(ticked);
    eventually(|| async { (fake.calls("answercallbackquery").len() > answers).then_some(()) }).await;
    tap(&fake, card, "Wed");
    let now = eventually(|| async {
        let m = fake.message(ALICE, card);
        labels(&m)[2].starts_with('☑').then_some(m)
    })
    .await;
    assert_eq!(labels(&now)[..3], ["☑ Mon", "☐ Tue", "☑ Wed"], "the redelivered tick did not untick Mon");
    tap(&fake, card, "Done");
    let now = shows(&fake, card, "✓ Days: Mon, Wed\n▸ Name\n   What is it called?").await;
    assert_eq!(labels(&now), ["✍️ Type it…", "Start over", "Decline"]);

    tap(&fake, card, "Type it");
    let name = prompt(&fake, &format!("✍️ Name ({})", id.short()), 1).await;
    fake.text(ALICE, ALICE, "calendar", Some(id_of(&name)));
    let expected = json!({"Library": "luxon", "Days": ["Mon", "Wed"], "Name": "calendar"});
    let answered = eventually(|| async {
        let q = tg.engine.records().question(id).await.unwrap().unwrap();
        (!q.is_pending()).then_some(q.outcome).flatten()
    })
    .await;
    assert_eq!(answered, Outcome::Answered { value: expected });
    let done = edited(&fake, ALICE, card, "✅").await;
    assert!(text(&done).contains("\n✓ Library: luxon\n✓ Days: Mon, Wed\n✓ Name: calendar\n"), "{done}");
    tg.stop().await;
}

#[tokio::test]
async fn options_tapped_or_ticked_are_recorded_by_position_even_when_named_like_another() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let tg = start(&dir, &url).await;
    let look_alikes = || ["#2", "#1"].map(|l| SubOption::Label(l.into())).to_vec();
    let questions = vec![
        Subquestion {
            header: "Size".into(),
            prompt: "Which?".into(),
            options: look_alikes(),
            ..Subquestion::default()
        },
        Subquestion {
            header: "Marks".into(),
            prompt: "Which?".into(),
            options: look_alikes(),
            multi: true,
            ..Subquestion::default()
        },
    ];
    let ask = Ask::questions("Look-alikes", questions).unwrap().answerers(Answerers::Conversation);
    let conversation = Conversation::parse(&format!("telegram:{ALICE}")).unwrap();
    let asked = tg.engine.asks().ask_external(conversation, ask, UserRef::operator()).await.unwrap();
    let card = id_of(&fake.sent("Look-alikes", 1).await);
    tap(&fake, card, "#2");
    shows(&fake, card, "Tick any, then Done.").await;
    tap(&fake, card, "☐ #2");
    eventually(|| async { labels(&fake.message(ALICE, card))[0].starts_with('☑').then_some(()) }).await;
    tap(&fake, card, "Done");
    let answered = eventually(|| async {
        let q = tg.engine.records().question(asked.id).await.unwrap().unwrap();
        (!q.is_pending()).then_some(q.outcome).flatten()
    })
    .await;
    let expected = json!({"Size": "#2", "Marks": ["#2"]});
    assert_eq!(answered, Outcome::Answered { value: expected }, "the first options, not the ones named #1");
    tg.stop().await;
}
