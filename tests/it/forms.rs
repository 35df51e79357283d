//! Forms and several questions in one ask, through the real binary: asked over the API, by a
//! program (the Python package) and by an agent over MCP; answered on the console all at once
//! by command and one field at a time by plain replies, and in an agent's own client.

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::mcp::{Forms, call, client_with, structured, text};
use crate::support::{eventually, post};

fn signup_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "plan"]
    })
}

async fn outcome(base: &str, token: &str, id: &str) -> Value {
    crate::support::get_json(&format!("{base}/api/questions/{id}/outcome?wait=0"), token).await
}

#[tokio::test]
async fn a_form_schema_that_is_not_flat_is_refused_naming_the_field() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;

    // A schema that is not a flat form is refused at once, naming the field.
    let nested = json!({"type": "object", "properties": {"address": {"type": "object"}}});
    let (status, body) = post(
        &base,
        &token,
        "/api/questions",
        json!({"conversation": "console:local", "kind": "form", "prompt": "x", "schema": nested}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`address`"), "{body}");
    served.terminate().await;
}

#[tokio::test]
async fn a_wrong_field_in_a_typed_form_answer_is_named_answering_nothing() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;

    let (status, body) = post(
        &base,
        &token,
        "/api/questions",
        json!({"conversation": "console:local", "kind": "form", "prompt": "Sign up", "schema": signup_schema()}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(body["question"]["kind"], "form");
    let short = served.card_id("Sign up").await;
    served.stdout_line("3. plan").await;
    served.stdout_line(&format!("all at once: /answer {short} name=… age=… plan=…")).await;

    served.type_line(&format!("/answer {short} name=Ada age=200 plan=pro")).await;
    let refused = served.stdout_line("Not accepted").await;
    assert!(refused.contains("age: a whole number from 0 to 150"), "{refused}");
    assert_eq!(outcome(&base, &token, &id).await["status"], "pending", "a wrong field answers nothing");

    served.terminate().await;
}

#[tokio::test]
async fn a_form_asked_over_the_api_is_answered_on_the_console_by_command() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;

    let (status, body) = post(
        &base,
        &token,
        "/api/questions",
        json!({"conversation": "console:local", "kind": "form", "prompt": "Sign up", "schema": signup_schema()}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(body["question"]["kind"], "form");
    let short = served.card_id("Sign up").await;
    served.stdout_line("3. plan").await;
    served.stdout_line(&format!("all at once: /answer {short} name=… age=… plan=…")).await;

    served.type_line(&format!("/answer {short} name=Ada Lovelace age=36 plan=Pro")).await;
    let answered = eventually(|| async {
        let o = outcome(&base, &token, &id).await;
        (o["status"] == "answered").then_some(o)
    })
    .await;
    assert_eq!(
        answered["outcome"]["value"],
        json!({"name": "Ada Lovelace", "age": 36, "plan": "pro", "newsletter": false})
    );
    served.terminate().await;
}

const SIGNUP: &str = r#"
import askgate
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Name", "minLength": 2},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "plan": {"type": "string", "enum": ["free", "pro"]}},
    "required": ["name", "plan"]}
def main(input, run):
    answer = askgate.form("Sign up for the beta", SCHEMA)
    return f"Welcome {answer['name']} ({answer['plan']}, age {answer.get('age', 'unsaid')})"
askgate.run(main)
"#;

fn program_config(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("signup.py"), SIGNUP).unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python");
    write_config(
        dir,
        &format!(
            "\n[[functions]]\nname = \"signup\"\ncommand = [\"python3\", \"{}\"]\nset_env = {{ PYTHONPATH = \"{}\" }}\n",
            dir.join("signup.py").display(),
            python.display()
        ),
    )
}

#[tokio::test]
async fn a_programs_form_is_filled_one_field_at_a_time_by_plain_replies_on_the_console() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&program_config(dir.path()));
    served.log_line("askgate is ready").await;
    served.type_line("/run signup").await;
    served.card_id("Sign up for the beta").await;
    served.stdout_line("or reply to fill one field at a time, from Name").await;

    served.type_line("A").await;
    let refused = served.stdout_line("Not accepted").await;
    assert!(refused.contains("Name: at least 2 characters"), "{refused}");
    served.type_line("Ada").await;
    let next = served.stdout_line("2/3 · age").await;
    assert!(next.contains("a whole number from 0 to 150"), "{next}");
    served.stdout_line("(- leaves it out)").await;
    served.type_line("-").await;
    served.stdout_line("3/3 · plan").await;
    served.type_line("2").await;
    served.stdout_line("Welcome Ada (pro, age unsaid)").await;
    served.terminate().await;
}

#[tokio::test]
async fn several_questions_asked_together_are_answered_field_by_field_as_one_object() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    let questions = json!([
        {"header": "Library", "prompt": "Which date library?", "options": [{"label": "dayjs", "description": "2 kB"}, "luxon"], "allow_custom": true},
        {"header": "Tests", "prompt": "Which tests?", "options": ["unit", "e2e", "lint"], "multi": true},
        {"header": "Name", "prompt": "What is the module called?"}
    ]);
    let (status, body) = post(
        &base,
        &token,
        "/api/questions",
        json!({"conversation": "console:local", "prompt": "Project setup", "questions": questions}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(body["question"]["kind"], "question");
    served.card_id("Project setup").await;
    served.stdout_line("1. Library: Which date library?").await;
    served.stdout_line("1) dayjs — 2 kB").await;
    served.stdout_line("or your own words").await;

    // One field at a time: an option by number, several by name, then text.
    served.type_line("moment").await;
    served.stdout_line("2/3 · Tests").await;
    served.type_line("unit, lint").await;
    served.stdout_line("3/3 · Name").await;
    served.type_line("calendar").await;
    let answered = eventually(|| async {
        let o = outcome(&base, &token, &id).await;
        (o["status"] == "answered").then_some(o)
    })
    .await;
    assert_eq!(
        answered["outcome"]["value"],
        json!({"Library": "moment", "Tests": ["unit", "lint"], "Name": "calendar"})
    );
    served.stdout_line("✅").await;
    served.terminate().await;
}

#[tokio::test]
async fn five_questions_are_more_than_one_ask_holds() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    // Five questions are more than one ask holds.
    let five: Vec<Value> = (0..5).map(|i| json!({"header": format!("q{i}"), "prompt": "?"})).collect();
    let (status, body) =
        post(&base, &token, "/api/questions", json!({"conversation": "console:local", "questions": five})).await;
    assert_eq!(status, 400, "{body}");
    served.terminate().await;
}

#[tokio::test]
async fn an_agents_form_goes_to_its_own_client_as_the_same_schema_checked_as_any_answer() {
    let dir = TempDir::new().unwrap();
    let config = "\n[mcp]\nconversation = \"console:local\"\nelicitation = true\n";
    let mut served = Served::start(&write_config(dir.path(), config));
    let (base, agent) = served.agent(dir.path()).await;

    // The client's answer is checked as any other: a wrong one leaves the question waiting.
    let wrong = Forms {
        answer: Some(json!({"name": "A", "plan": "free"})),
        shown: Default::default(),
        taken_away: Default::default(),
    };
    let client = client_with(&format!("{base}/mcp"), &agent, wrong.clone()).await;
    let pending = crate::mcp::call_in_background(
        &client,
        call("ask_user", json!({"prompt": "Sign up", "schema": signup_schema()})),
    );
    let short = served.card_id("Sign up").await;
    eventually(|| async { (!wrong.shown.lock().unwrap().is_empty()).then_some(()) }).await;
    let shown = wrong.shown.lock().unwrap()[0].clone();
    assert!(shown.contains(r#""minimum":0"#) && shown.contains(r#""const":"pro""#), "{shown}");
    assert!(shown.contains(r#""required":["name","plan"]"#), "{shown}");
    served.type_line(&format!("/answer {short} name=Grace plan=free")).await;
    let result = pending.await.unwrap();
    let outcome = structured(&result);
    assert_eq!(outcome["value"], json!({"name": "Grace", "plan": "free", "newsletter": false}), "{}", text(&result));
    client.cancel().await.unwrap();

    served.terminate().await;
}

#[tokio::test]
async fn an_agents_form_is_answered_in_its_own_client() {
    let dir = TempDir::new().unwrap();
    let config = "\n[mcp]\nconversation = \"console:local\"\nelicitation = true\n";
    let served = Served::start(&write_config(dir.path(), config));
    let (base, agent) = served.agent(dir.path()).await;

    let right = Forms {
        answer: Some(json!({"name": "Ada", "plan": "pro", "age": 36})),
        shown: Default::default(),
        taken_away: Default::default(),
    };
    let client = client_with(&format!("{base}/mcp"), &agent, right).await;
    let result = client
        .call_tool(call("ask_user", json!({"prompt": "Sign up again", "schema": signup_schema()})))
        .await
        .unwrap();
    assert_eq!(structured(&result)["value"], json!({"name": "Ada", "age": 36, "plan": "pro", "newsletter": false}));
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_form_with_look_alike_field_names_is_refused() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    let ask =
        |schema: Value| json!({"conversation": "console:local", "kind": "form", "prompt": "Pay", "schema": schema});
    let text = json!({"type": "string"});

    let (status, body) = post(
        &base,
        &token,
        "/api/questions",
        ask(json!({"type": "object", "properties": {"iban": text, "\u{456}ban": text}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("field `\u{456}ban`: looks like field `iban`"), "{body}");
    let (status, body) =
        post(&base, &token, "/api/questions", ask(json!({"type": "object", "properties": {"i\u{200B}ban": text}})))
            .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("U+200B"), "{body}");
    served.terminate().await;
}

#[tokio::test]
async fn a_form_with_bounds_no_answer_meets_is_refused() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    let ask =
        |schema: Value| json!({"conversation": "console:local", "kind": "form", "prompt": "Pay", "schema": schema});

    let bounds = json!({"type": "object", "properties": {"amount": {"type": "number", "minimum": 100, "maximum": 10}}});
    let (status, body) = post(&base, &token, "/api/questions", ask(bounds)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("field `amount`: `minimum` (100) is above"), "{body}");

    served.terminate().await;
}

#[tokio::test]
async fn a_blank_answer_fills_no_form_field() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.api(dir.path()).await;
    let ask =
        |schema: Value| json!({"conversation": "console:local", "kind": "form", "prompt": "Pay", "schema": schema});
    let text = json!({"type": "string"});

    let schema = json!({"type": "object", "properties": {"iban": {"type": "string", "minLength": 5}, "note": text},
                        "required": ["iban", "note"]});
    let (status, body) = post(&base, &token, "/api/questions", ask(schema)).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let path = format!("/api/questions/{id}/reply");
    let reply = |value: Value| post(&base, &token, &path, json!({"value": value}));
    let (status, body) = reply(json!({"iban": "\u{200B}\u{200B}\u{200B}\u{200B}\u{200B}", "note": "x"})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("iban"), "{body}");
    let (status, body) = reply(json!({"iban": "DE89 3704", "note": "\u{2800}\u{202E}"})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("note"), "{body}");
    assert_eq!(outcome(&base, &token, &id).await["status"], "pending", "a blank answer answers nothing");
    let (status, body) = reply(json!({"iban": "DE89 3704", "note": "rent"})).await;
    assert_eq!(status, 200, "{body}");
    served.terminate().await;
}
