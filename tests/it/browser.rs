//! The web page in headless Chromium, driven over WebDriver by chromedriver: a card appears
//! when a function asks, a click answers it and the run resumes, and a card answered through
//! the API disappears without a reload.

use std::process::Stdio;

use askgate::config::Env;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::http::App;
use crate::support::eventually;

mod forms;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub(crate) struct Driver {
    child: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Driver {
    /// Starts chromedriver and a headless Chromium session. Where they are not installed the
    /// build marks the test ignored (build.rs); in CI they must be (.ci/run installs them).
    pub(crate) async fn start() -> Self {
        let (driver, browser) = ("/usr/bin/chromedriver", "/usr/bin/chromium");
        for path in [driver, browser] {
            assert!(std::path::Path::new(path).exists(), "{path} is missing: apt-get install chromium chromium-driver");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        eventually(|| async {
            client.get(format!("{base}/status")).send().await.ok().filter(|r| r.status().is_success())
        })
        .await;
        let profile = tempfile::TempDir::new().unwrap();
        let capabilities = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": browser,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--window-size=400,900", format!("--user-data-dir={}", profile.path().display())]
        }}}});
        let r: Value =
            client.post(format!("{base}/session")).json(&capabilities).send().await.unwrap().json().await.unwrap();
        let session = r["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {r}")).to_owned();
        Self { child, base, session, client, _profile: profile }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap().json::<Value>().await.unwrap()["value"].clone()
    }

    pub(crate) async fn go(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    /// The element an XPath finds, if any.
    pub(crate) async fn find(&self, xpath: &str) -> Option<String> {
        let found =
            self.command(reqwest::Method::POST, "/elements", Some(json!({"using": "xpath", "value": xpath}))).await;
        found.as_array()?.first().and_then(|e| e[ELEMENT].as_str()).map(str::to_owned)
    }

    pub(crate) async fn wait_for(&self, xpath: &str) -> String {
        eventually(|| async { self.find(xpath).await }).await
    }

    pub(crate) async fn click(&self, element: &str) {
        self.command(reqwest::Method::POST, &format!("/element/{element}/click"), Some(json!({}))).await;
    }

    pub(crate) async fn type_into(&self, element: &str, text: &str) {
        self.command(reqwest::Method::POST, &format!("/element/{element}/value"), Some(json!({"text": text}))).await;
    }

    /// Presses `key` on whatever has the focus.
    pub(crate) async fn press(&self, key: &str) {
        let keys = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.command(reqwest::Method::POST, "/actions", Some(keys)).await;
    }

    async fn displayed(&self, element: &str) -> bool {
        self.command(reqwest::Method::GET, &format!("/element/{element}/displayed"), None).await == json!(true)
    }

    /// The page as a PNG.
    pub(crate) async fn screenshot(&self) -> Vec<u8> {
        let encoded = self.command(reqwest::Method::GET, "/screenshot", None).await;
        base64_decode(encoded.as_str().expect("a screenshot"))
    }

    pub(crate) async fn quit(mut self) {
        self.command(reqwest::Method::DELETE, "", None).await;
        let _ = self.child.kill().await;
    }
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn the_web_page_updates_its_cards_live() {
    let browser = Driver::start().await;
    // The page's quorum below is asked by the operator too: counted as the setting allows.
    let dir = std::sync::Arc::new(tempfile::TempDir::new().unwrap());
    let app = App::start_config(dir, "quorum_includes_requester = true", "", Env::default()).await;
    // Answered before the page was opened: "Recently answered" lists it all the same.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"conversation": "console:local", "prompt": "Pick a region", "options": ["eu", "us"]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let reply = format!("/api/questions/{}/reply", asked["id"].as_str().unwrap());
    let (status, _) = app.post(&reply, json!({"value": "eu", "name": "Bob"})).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    browser.go(&app.url("/")).await;
    let token = browser.wait_for("//input[@id='token']").await;
    // Before the token the page says what it needs, never that nothing waits.
    assert!(browser.displayed(&browser.wait_for("//p[@id='locked']").await).await);
    assert!(!browser.displayed(&browser.wait_for("//p[@id='empty']").await).await);
    browser.wait_for("//p[@id='conn'][@data-state='offline']").await;
    browser.type_into(&token, &app.token).await;
    browser.click(&browser.wait_for("//form[@id='token-form']//button").await).await;
    browser.wait_for("//p[@id='conn'][@data-state='live'][normalize-space()='● live']").await;
    assert!(browser.displayed(&browser.wait_for("//p[@id='empty']").await).await, "askgate said nothing waits");
    browser
        .wait_for(
            "//details[@id='recent']//li[contains(., 'Pick a region')][contains(., 'eu — “Bob” (api:operator) via api')]",
        )
        .await;
    let displayed = browser.command(reqwest::Method::GET, &format!("/element/{token}/displayed"), None).await;
    assert_eq!(displayed, json!(false), "the token form stays hidden once connected");

    let (status, run) = app.post("/api/runs", json!({"function": "demo", "conversation": "console:local"})).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{run}");
    let first = "//article[.//h2[contains(., 'Which library for date formatting?')]]";
    browser.wait_for(&format!("{first}//span[@class='badge question'][normalize-space()='question']")).await;
    browser.wait_for(&format!("{first}//p[@class='meta']/time[starts-with(normalize-space(), 'expires in ')]")).await;
    let name = browser.wait_for("//input[@id='name']").await;
    browser.type_into(&name, "Alice").await;
    let option =
        browser.wait_for("//article[.//h2[contains(., 'Which library')]]//button[normalize-space()='date-fns']").await;
    // The tab counts what waits, and the page has its icon.
    assert_eq!(browser.command(reqwest::Method::GET, "/title", None).await, json!("(1) askgate — questions"));
    let icon = reqwest::get(app.url("/favicon.svg")).await.unwrap();
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    browser.click(&option).await;
    let line = "//article[.//h2[contains(., 'Which library')]]//p[@class='outcome good']";
    browser.wait_for(&format!("{line}[normalize-space()='✅ date-fns — “Alice” (api:operator) via web']")).await;
    // The chosen option stays marked while the outcome shows.
    browser
        .wait_for("//article[.//h2[contains(., 'Which library')]]//button[contains(@class, 'chosen')][@aria-pressed='true'][normalize-space()='date-fns']")
        .await;

    // The run resumed: its next question is asked and shows up on the page.
    browser.wait_for("//article[.//h2[contains(., 'Archive all 87 emails?')]]").await;
    // The card says what applies if nobody answers in time.
    browser
        .wait_for(
            "//article[.//h2[contains(., 'Archive all 87 emails?')]]//p[@class='meta'][contains(., ', then: No')]",
        )
        .await;
    let (_, list) = app.get("/api/questions?conversation=console:local&status=all").await;
    let answered = list["questions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["prompt"] == "Which library for date formatting?")
        .unwrap()
        .clone();
    assert_eq!(answered["outcome"]["value"], "date-fns");
    assert_eq!(answered["answered_via"], "web");
    assert_eq!(answered["answered_name"], "“Alice” (api:operator)");
    assert_eq!(answered["answered_by"], "api:operator");

    // Answered through the API, the second card disappears without a reload.
    let confirm =
        list["questions"].as_array().unwrap().iter().find(|q| q["prompt"] == "Archive all 87 emails?").unwrap().clone();
    let (status, _) =
        app.post(&format!("/api/questions/{}/reply", confirm["id"].as_str().unwrap()), json!({"value": true})).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    eventually(|| async {
        browser.find("//article[.//h2[contains(., 'Archive all 87 emails?')]]").await.is_none().then_some(())
    })
    .await;
    // What was answered stays in "Recently answered", with who answered.
    browser
        .wait_for("//details[@id='recent']//li[contains(., 'Which library')][contains(., 'date-fns — “Alice” (api:operator) via web')]")
        .await;

    // Keys: on a focused card, 2 picks the second option.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"conversation": "console:local", "prompt": "Pick a colour",
                   "options": ["red", {"label": "green", "description": "the calm one"}, "blue"]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let colour = "//article[.//h2[contains(., 'Pick a colour')]]";
    // An option's description is shown on its button, under the label.
    browser
        .wait_for(&format!("{colour}//button[@data-key='2'][span[@class='about'][normalize-space()='the calm one']]"))
        .await;
    browser.click(&browser.wait_for(&format!("{colour}//h2")).await).await;
    browser.press("2").await;
    browser
        .wait_for(&format!(
            "{colour}//p[@class='outcome good'][normalize-space()='✅ green — “Alice” (api:operator) via web']"
        ))
        .await;

    // Several choices: a box ticked with its key, then Enter on the box sends them.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"conversation": "console:local", "prompt": "Pick sizes", "options": ["S", "M", "L"], "multi": true}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let sizes = "//article[.//h2[contains(., 'Pick sizes')]]";
    browser.click(&browser.wait_for(&format!("{sizes}//label[normalize-space()='M']/input")).await).await;
    browser.press("3").await;
    browser.press("\u{E007}").await;
    browser
        .wait_for(&format!(
            "{sizes}//p[@class='outcome good'][normalize-space()='✅ M, L — “Alice” (api:operator) via web']"
        ))
        .await;

    // A detail's fenced block is shown as code, the prose around it as text.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"kind": "approval", "action": "files__delete_file", "conversation": "console:local",
                   "detail": "agent wants:\n```json\n{\"path\": \"a.txt\"}\n```\nfrom CI"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let card = "//article[.//h2[contains(., 'files__delete_file')]]//div[@class='detail']";
    browser.wait_for(&format!("{card}/p[1][normalize-space()='agent wants:']")).await;
    browser.wait_for(&format!("{card}/pre[normalize-space()='{{\"path\": \"a.txt\"}}']")).await;
    browser.wait_for(&format!("{card}/p[2][normalize-space()='from CI']")).await;
    // An approval shows its action as code, Reject as the dangerous choice, Allow always second.
    let approval = "//article[.//h2[contains(., 'files__delete_file')]]";
    browser.wait_for(&format!("{approval}//h2/code[normalize-space()='files__delete_file']")).await;
    browser.wait_for(&format!("{approval}//button[@class='danger'][normalize-space()='Reject']")).await;
    browser.wait_for(&format!("{approval}//button[@class='secondary'][normalize-space()='Allow always']")).await;
    // What "Allow always" covers is said beside it.
    browser
        .wait_for(&format!("{approval}//p[contains(@class, 'covers')][contains(., 'this same action in console:local') and contains(., 'until it is revoked')]"))
        .await;

    // The README's screenshot is this page: ASKGATE_SCREENSHOTS=1 writes it to docs/.
    let png = browser.screenshot().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    if std::env::var_os("ASKGATE_SCREENSHOTS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("web-page.png"), &png).unwrap();
    }

    // Allowed always, the grant is listed under "Standing grants"; Revoke takes it back.
    browser.click(&browser.wait_for(&format!("{approval}//button[normalize-space()='Allow always']")).await).await;
    let grant = "//details[@id='grants']//li[code[normalize-space()='files__delete_file']][contains(., 'Alice')]";
    browser.wait_for(grant).await;
    browser.click(&browser.wait_for("//details[@id='grants']/summary").await).await;
    browser.click(&browser.wait_for(&format!("{grant}//button[normalize-space()='Revoke']")).await).await;
    eventually(|| async { browser.find(grant).await.is_none().then_some(()) }).await;
    let (_, grants) = app.get("/api/grants").await;
    assert_eq!(grants["grants"], json!([]), "revoked from the page");

    // An editable approval is allowed as edited from the page; the original stays in its title.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"kind": "approval", "action": "deploy prod", "editable": true, "conversation": "console:local"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let editable = "//article[.//h2/code[normalize-space()='deploy prod']]";
    let field = browser.wait_for(&format!("{editable}//input[@aria-label='Edited action']")).await;
    browser.command(reqwest::Method::POST, &format!("/element/{field}/clear"), Some(json!({}))).await;
    browser.type_into(&field, "deploy staging").await;
    browser.click(&browser.wait_for(&format!("{editable}//button[normalize-space()='Allow as edited']")).await).await;
    browser
        .wait_for(&format!("{editable}//p[@class='outcome good'][normalize-space()='✅ allowed as edited: deploy staging — “Alice” (api:operator) via web']"))
        .await;

    // A quorum approval (the requester counting, as configured): the page's approval (the
    // operator's) is counted and shown; another person completes it.
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"kind": "approval", "action": "drop table users", "quorum": 2, "conversation": "console:local",
                   "answerers": ["console:local", "test:bob"]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let quorum = "//article[.//h2/code[normalize-space()='drop table users']]";
    assert!(browser.find(&format!("{quorum}//button[normalize-space()='Allow always']")).await.is_none());
    browser.wait_for(&format!("{quorum}//p[contains(@class, 'tally')][normalize-space()='0 of 2 approvals']")).await;
    browser.click(&browser.wait_for(&format!("{quorum}//button[normalize-space()='Approve']")).await).await;
    browser
        .wait_for(&format!(
            "{quorum}//p[contains(@class, 'tally')][normalize-space()='1 of 2 approvals: “Alice” (api:operator)']"
        ))
        .await;
    let engine = app.gateway.as_ref().unwrap().engine().clone();
    let console = askgate::question::Conversation::parse("console:local").unwrap();
    let id = asked["id"].as_str().unwrap();
    let surface = askgate::question::Surface::CONSOLE;
    // The console's operator is the same person as the page's: counted once, nothing changes.
    let operator = askgate::question::UserRef::parse("console:local").unwrap();
    let again = askgate::engine::Inbound::text(console.clone(), operator, surface, format!("/approve {}", &id[..8]));
    assert!(engine.router().handle(again).await.text.unwrap().contains("each person counts once"));
    let bob = askgate::question::UserRef::parse("test:bob").unwrap();
    engine
        .router()
        .handle(askgate::engine::Inbound::text(console, bob, surface, format!("/approve {}", &id[..8])))
        .await;
    browser
        .wait_for(&format!("{quorum}//p[@class='outcome good'][normalize-space()='✅ allowed once — 2 of 2 approvals: “Alice” (api:operator), test:bob']"))
        .await;
    browser.quit().await;
    app.stop().await;
}

/// WCAG's relative luminance of `#rrggbb`.
fn luminance(hex: &str) -> f64 {
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).unwrap()) / 255.0;
        if c <= 0.039_28 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2)
}

fn contrast(a: &str, b: &str) -> f64 {
    let (a, b) = (luminance(a), luminance(b));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

/// The colour variables of the first `:root { … }` after `from` in the page's style sheet.
fn palette(css: &str, from: &str) -> std::collections::HashMap<String, String> {
    let at = css.find(from).unwrap();
    let root = &css[at..];
    let body = &root[root.find(":root {").unwrap() + 7..];
    let body = &body[..body.find('}').unwrap()];
    body.split(';')
        .filter_map(|d| d.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, v)| k.starts_with("--") && v.starts_with('#'))
        .collect()
}

#[test]
fn the_pages_colours_keep_wcag_aa_contrast_in_both_themes() {
    let css = include_str!("../../src/http/page.css");
    for (theme, from) in [("light", ":root"), ("dark", "prefers-color-scheme: dark")] {
        let colours = palette(css, from);
        let bg = &colours["--bg"];
        for text in ["--accent", "--muted", "--ok", "--bad", "--warn"] {
            let ratio = contrast(&colours[text], bg);
            assert!(ratio >= 4.5, "{theme}: {text} {} on {bg} is {ratio:.2}:1, below 4.5:1", colours[text]);
        }
        let on = contrast(&colours["--on-accent"], &colours["--accent"]);
        assert!(on >= 4.5, "{theme}: a primary button's text is {on:.2}:1");
    }
}

/// Standard base64 (WebDriver's screenshots), without a crate for it.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()).map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | u32::from(*d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
