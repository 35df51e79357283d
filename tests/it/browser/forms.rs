//! Forms on the web page: a form asked over the API is one control per field; a wrong field is
//! refused with askgate's hint beside the form and the field, nothing typed is lost, and the
//! corrected answer is stored as one object. Several questions asked together are answered
//! the same way.

use askgate::config::Env;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Driver, ELEMENT};
use crate::http::App;

impl Driver {
    /// Sets an input's value as the person would (a date-time picker's segments are typed
    /// differently in every locale), with the `input` event it fires.
    async fn set_value(&self, element: &str, value: &str) {
        let script =
            "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', {bubbles: true}));";
        let args = json!([{ELEMENT: element}, value]);
        self.command(Method::POST, "/execute/sync", Some(json!({"script": script, "args": args}))).await;
    }

    /// An element's DOM property (`value`, `checked`).
    async fn property(&self, element: &str, name: &str) -> Value {
        self.command(Method::GET, &format!("/element/{element}/property/{name}"), None).await
    }

    async fn clear(&self, element: &str) {
        self.command(Method::POST, &format!("/element/{element}/clear"), Some(json!({}))).await;
    }

    /// Opens the page and connects with the operator's token.
    async fn connect(&self, app: &App) {
        self.go(&app.url("/")).await;
        let token = self.wait_for("//input[@id='token']").await;
        self.type_into(&token, &app.token).await;
        self.click(&self.wait_for("//form[@id='token-form']//button").await).await;
        self.wait_for("//p[@id='conn'][@data-state='live']").await;
    }
}

async fn asked(app: &App, body: Value) -> String {
    let (status, asked) = app.post("/api/questions", body).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    asked["id"].as_str().unwrap().to_owned()
}

async fn outcome(app: &App, id: &str) -> Value {
    app.get(&format!("/api/questions/{id}/outcome")).await.1
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn a_form_is_filled_on_the_page_and_a_wrong_field_is_refused_beside_it_keeping_what_was_typed() {
    let browser = Driver::start().await;
    let app = App::start("", Env::default()).await;
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "As on your badge", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "email": {"type": "string", "format": "email"},
            "start": {"type": "string", "format": "date-time", "title": "Start"},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "plan"]
    });
    let id = asked(
        &app,
        json!({"conversation": "console:local", "kind": "form", "prompt": "Sign up for the beta", "schema": schema}),
    )
    .await;
    browser.connect(&app).await;
    let card = "//article[@data-kind='form'][.//h2[contains(., 'Sign up for the beta')]]";
    browser.wait_for(&format!("{card}//span[@class='badge form']")).await;

    // One control per field, in order, each as its field takes it.
    let name = browser.wait_for(&format!("{card}//label[normalize-space()='Name (required)']/following-sibling::input[@type='text'][@minlength='2'][@required]")).await;
    browser
        .wait_for(&format!(
            "{card}//div[@class='field'][label[normalize-space()='Name (required)']]/span[@class='about'][normalize-space()='As on your badge']"
        ))
        .await;
    let age = browser.wait_for(&format!("{card}//input[@type='number'][@min='0'][@max='150'][@step='1']")).await;
    let fields = browser
        .command(
            Method::POST,
            "/elements",
            Some(json!({"using": "xpath", "value": format!("{card}//form[@class='fields']/*[contains(@class, 'field')]")})),
        )
        .await;
    assert_eq!(fields.as_array().unwrap().len(), 6, "one control per field: {fields}");
    let pro = browser
        .wait_for(&format!("{card}//fieldset[legend[normalize-space()='plan (required)']]//label[normalize-space()='Pro']/input[@type='radio']"))
        .await;
    browser
        .wait_for(&format!("{card}//label[normalize-space()='email']/following-sibling::input[@type='email']"))
        .await;
    let start = browser
        .wait_for(&format!("{card}//label[normalize-space()='Start']/following-sibling::input[@type='datetime-local']"))
        .await;
    let newsletter =
        browser.wait_for(&format!("{card}//label[normalize-space()='newsletter']/input[@type='checkbox']")).await;
    assert_eq!(browser.property(&newsletter, "checked").await, json!(false), "its default");

    // A wrong age: askgate refuses it, naming the field, beside the form and beside the field.
    browser.type_into(&name, "Ada Lovelace").await;
    browser.type_into(&age, "200").await;
    browser.click(&pro).await;
    browser.set_value(&start, "2026-12-03T09:30").await;
    browser.click(&browser.wait_for(&format!("{card}//button[normalize-space()='Submit']")).await).await;
    browser
        .wait_for(&format!(
            "{card}//p[contains(@class, 'form-hint')][normalize-space()='Not accepted: age: a whole number from 0 to 150']"
        ))
        .await;
    browser
        .wait_for(&format!("{card}//div[@class='field'][input[@type='number'][@aria-invalid='true']]/p[@class='hint'][normalize-space()='a whole number from 0 to 150']"))
        .await;
    assert_eq!(outcome(&app, &id).await["status"], "pending", "a wrong field answers nothing");
    assert_eq!(browser.property(&name, "value").await, json!("Ada Lovelace"), "what was typed stays");
    assert_eq!(browser.property(&pro, "checked").await, json!(true));

    // The README's picture of a form: ASKGATE_SCREENSHOTS=1 writes it to docs/.
    if std::env::var_os("ASKGATE_SCREENSHOTS").is_some() {
        // Tall enough for the whole card.
        browser.command(Method::POST, "/window/rect", Some(json!({"width": 480, "height": 1400}))).await;
        let article = browser.wait_for(card).await;
        let png = browser.command(Method::GET, &format!("/element/{article}/screenshot"), None).await;
        let png = super::base64_decode(png.as_str().expect("a screenshot"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
        std::fs::write(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images/web-form.png"), png)
            .unwrap();
    }

    // Corrected, the answer is one object: numbers as numbers, the box as a boolean, the time
    // with its offset, and the empty optional email left out.
    browser.clear(&age).await;
    browser.type_into(&age, "36").await;
    browser.click(&newsletter).await;
    browser.click(&browser.wait_for(&format!("{card}//button[normalize-space()='Submit']")).await).await;
    browser
        .wait_for(&format!("{card}//p[@class='outcome good'][starts-with(normalize-space(), '✅ name: Ada Lovelace · age: 36 · plan: pro · start: 2026-12-03T09:30:00')]"))
        .await;
    let stored = outcome(&app, &id).await;
    assert_eq!(stored["status"], "answered", "{stored}");
    let mut value = stored["outcome"]["value"].clone();
    let start = value.as_object_mut().unwrap().remove("start").unwrap();
    assert_eq!(value, json!({"name": "Ada Lovelace", "age": 36, "plan": "pro", "newsletter": true}));
    let start = start.as_str().unwrap();
    assert!(start.starts_with("2026-12-03T09:30:00") && start.len() == 25, "RFC 3339 with an offset: {start}");
    browser.quit().await;
    app.stop().await;
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn several_questions_asked_together_are_answered_on_the_page_as_one_object() {
    let browser = Driver::start().await;
    let app = App::start("", Env::default()).await;
    let questions = json!([
        {"header": "Library", "prompt": "Which date library?", "options": [{"label": "dayjs", "description": "2 kB"}, "luxon"], "allow_custom": true},
        {"header": "Tests", "prompt": "Which tests?", "options": ["unit", "e2e", "lint"], "multi": true},
        {"header": "Name", "prompt": "What is the module called?"}
    ]);
    let id =
        asked(&app, json!({"conversation": "console:local", "prompt": "Project setup", "questions": questions})).await;
    browser.connect(&app).await;
    let card = "//article[.//h2[contains(., 'Project setup')]]";
    // Each question under its header, an option's description under its label.
    let library = format!("{card}//fieldset[legend[normalize-space()='Library (required)']]");
    browser.wait_for(&format!("{library}/span[@class='about'][normalize-space()='Which date library?']")).await;
    let about = browser
        .wait_for(&format!("{library}//label[contains(., 'dayjs')]/span[@class='about'][normalize-space()='2 kB']"))
        .await;
    assert!(browser.displayed(&about).await, "the description is visible");
    // Words of one's own pick "Other…".
    let own = browser.wait_for(&format!("{library}//input[@type='text'][@aria-label='Library: your own words']")).await;
    browser.type_into(&own, "moment").await;
    let tests = format!("{card}//fieldset[legend[starts-with(normalize-space(), 'Tests (required)')]]");
    for label in ["unit", "lint"] {
        browser
            .click(
                &browser
                    .wait_for(&format!("{tests}//label[normalize-space()='{label}']/input[@type='checkbox']"))
                    .await,
            )
            .await;
    }
    let name =
        browser.wait_for(&format!("{card}//label[normalize-space()='Name (required)']/following-sibling::input")).await;
    browser.type_into(&name, "calendar").await;
    browser.click(&browser.wait_for(&format!("{card}//button[normalize-space()='Submit']")).await).await;
    browser
        .wait_for(&format!(
            "{card}//p[@class='outcome good'][starts-with(normalize-space(), '✅ Library: moment · Tests: unit, lint · Name: calendar')]"
        ))
        .await;
    let stored = outcome(&app, &id).await;
    assert_eq!(stored["outcome"]["value"], json!({"Library": "moment", "Tests": ["unit", "lint"], "Name": "calendar"}));
    assert_eq!(stored["status"], "answered");
    browser.quit().await;
    app.stop().await;
}
