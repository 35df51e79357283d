//! People's own sign-in: personal tokens made, used and revoked through `askgate token` and
//! the real binary; `/web` links from a chat that sign one browser in, once, before they
//! expire, and only from a private chat; two people completing a 2-of-2 quorum on the page.

use askgate::channel::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use askgate::clock::Clock;
use askgate::config::Env;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{BIN, Served, write_config};
use crate::browser::Driver;
use crate::http::{App, error_code, now_secs};

/// `askgate token …` against the askgate at `base` (its token file beside `config`'s
/// database): its exit status and output.
async fn token_command(config: &std::path::Path, base: &str, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(BIN)
        .arg("token")
        .args(args)
        .arg("--config")
        .arg(config)
        .args(["--url", base])
        .env_remove("ASKGATE_API_TOKEN")
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn call(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_personal_token_answers_as_its_person_until_revoked() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let (ok, out, err) = token_command(&config, &base, &["add", "alice"]).await;
    assert!(ok, "{err}");
    let alice = out.lines().next().unwrap().trim().to_owned();
    assert!(out.contains("web:alice (may answer)"), "{out}");
    let (ok, out, err) = token_command(&config, &base, &["add", "bob", "--may", "answer,ask"]).await;
    assert!(ok, "{err}");
    let bob = out.lines().next().unwrap().trim().to_owned();
    let (ok, _, err) = token_command(&config, &base, &["add", "bob"]).await;
    assert!(!ok && err.contains("exists already"), "{err}");
    let (ok, _, err) = token_command(&config, &base, &["add", "Bob!"]).await;
    assert!(!ok && err.contains("is not a token name"), "{err}");

    let (status, me) = call(reqwest::Method::GET, format!("{base}/api/me"), &alice, None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!((me["user"].as_str(), me["role"].as_str()), (Some("web:alice"), Some("person")));
    let (status, asked) = call(
        reqwest::Method::POST,
        format!("{base}/api/questions"),
        &operator,
        Some(json!({"conversation": "console:local", "prompt": "Ship it?", "options": ["yes", "no"],
                    "answerers": ["web:alice"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    // Each person sees the questions they may answer, and only those.
    let listed = |token: String| {
        let base = base.clone();
        async move {
            let (_, page) = call(reqwest::Method::GET, format!("{base}/api/questions"), &token, None).await;
            page["questions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(alice.clone()).await, std::slice::from_ref(&id));
    assert!(listed(bob.clone()).await.is_empty());
    let (status, body) =
        call(reqwest::Method::POST, format!("{base}/api/questions/{id}/reply"), &bob, Some(json!({"value": "no"})))
            .await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "not_authorized"), "not bob's to answer: {body}");
    let (status, body) =
        call(reqwest::Method::POST, format!("{base}/api/questions/{id}/reject"), &bob, Some(json!({}))).await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "not_authorized"), "{body}");
    assert!(!body.to_string().contains("Ship it?"), "a refusal tells nothing of the question: {body}");
    let (status, _) = call(reqwest::Method::GET, format!("{base}/api/questions/{id}"), &bob, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "reading it stays hidden");
    // The event stream is filtered as the list is: bob's backlog and live events never carry
    // alice's question, though one of his own comes after it.
    let mut stream =
        reqwest::Client::new().get(format!("{base}/api/events")).bearer_auth(&bob).send().await.unwrap().bytes_stream();
    let mut heard = String::new();
    let mut read_until = async |needle: &str, heard: &mut String| {
        use futures_util::StreamExt;
        while !heard.contains(needle) {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next()).await;
            heard.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on").unwrap().unwrap()));
        }
    };
    read_until("replay.done", &mut heard).await;
    let alices = json!({"conversation": "console:local", "prompt": "Alice only?", "answerers": ["web:alice"]});
    let (status, _) = call(reqwest::Method::POST, format!("{base}/api/questions"), &operator, Some(alices)).await;
    assert_eq!(status, StatusCode::CREATED);
    let bobs = json!({"conversation": "console:local", "prompt": "Bob only?", "answerers": ["web:bob"]});
    let (status, _) = call(reqwest::Method::POST, format!("{base}/api/questions"), &operator, Some(bobs)).await;
    assert_eq!(status, StatusCode::CREATED);
    read_until("Bob only?", &mut heard).await;
    assert!(!heard.contains("Ship it?") && !heard.contains("Alice only?"), "bob heard alice's questions: {heard}");
    drop(stream);
    // Asking takes a token that may ask, in the person's own conversation (or where the
    // channel lets them in): not in the console's, nor in another person's.
    let ask = |conversation: &str| json!({"conversation": conversation, "prompt": "Lunch?", "answerers": ["web:bob"]});
    let questions = format!("{base}/api/questions");
    let (status, body) = call(reqwest::Method::POST, questions.clone(), &alice, Some(ask("web:alice"))).await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "may_not_ask"));
    for elsewhere in ["console:local", "web:alice"] {
        let (status, body) = call(reqwest::Method::POST, questions.clone(), &bob, Some(ask(elsewhere))).await;
        assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "not_your_conversation"), "{elsewhere}");
    }
    let (status, body) = call(reqwest::Method::POST, questions.clone(), &bob, Some(ask("web:bob"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["question"]["asked_by"], "web:bob", "{body}");
    // A token that may only ask answers nothing, neither by a reply in its conversation.
    let (ok, out, err) = token_command(&config, &base, &["add", "carol", "--may", "ask"]).await;
    assert!(ok, "{err}");
    let carol = out.lines().next().unwrap().trim().to_owned();
    let plain = Some(json!({"text": "yes"}));
    let (status, body) = call(reqwest::Method::POST, format!("{base}/api/messages"), &carol, plain).await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "may_not_answer"), "{body}");
    let run = json!({"text": "/run demo"});
    let (status, body) = call(reqwest::Method::POST, format!("{base}/api/messages"), &alice, Some(run)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "may_not_ask"), "{body}");
    // Administering takes admin.
    let (status, body) = call(reqwest::Method::GET, format!("{base}/api/tokens"), &alice, None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::FORBIDDEN, "not_admin"));
    // A grant is taken back by the people it answers for, as /revoke in a chat.
    let (_, approval) = call(
        reqwest::Method::POST,
        format!("{base}/api/questions"),
        &operator,
        Some(json!({"conversation": "console:local", "kind": "approval", "prompt": "rm -rf build",
                    "answerers": ["web:alice"]})),
    )
    .await;
    let approval = approval["id"].as_str().unwrap();
    let always = Some(json!({"value": "always"}));
    let (status, body) =
        call(reqwest::Method::POST, format!("{base}/api/questions/{approval}/reply"), &alice, always).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let grants = |token: String| {
        let base = base.clone();
        async move {
            let (_, list) = call(reqwest::Method::GET, format!("{base}/api/grants"), &token, None).await;
            list["grants"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };
    let theirs = grants(alice.clone()).await;
    assert_eq!(theirs.len(), 1);
    assert!(grants(bob.clone()).await.is_empty(), "not bob's to see");
    let grant = format!("{base}/api/grants/{}", theirs[0]);
    assert_eq!(call(reqwest::Method::DELETE, grant.clone(), &bob, None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(call(reqwest::Method::DELETE, grant, &alice, None).await.0, StatusCode::NO_CONTENT);

    let (status, body) =
        call(reqwest::Method::POST, format!("{base}/api/questions/{id}/reply"), &alice, Some(json!({"value": "yes"})))
            .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, answered) = call(reqwest::Method::GET, format!("{base}/api/questions/{id}"), &operator, None).await;
    assert_eq!((answered["answered_by"].as_str(), answered["status"].as_str()), (Some("web:alice"), Some("answered")));

    let (ok, out, err) = token_command(&config, &base, &["list"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("alice") && out.contains("web:bob") && out.contains("answer,ask"), "{out}");
    assert!(!out.contains(&alice) && !out.contains(&bob), "a list never shows a secret: {out}");
    let (ok, out, err) = token_command(&config, &base, &["revoke", "alice"]).await;
    assert!(ok && out.contains("revoked `alice`"), "{err}");
    let (status, body) = call(reqwest::Method::GET, format!("{base}/api/me"), &alice, None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (status, _) = call(reqwest::Method::GET, format!("{base}/api/me"), &bob, None).await;
    assert_eq!(status, StatusCode::OK, "bob's token stands");
    // Agents make no tokens.
    let (_, agent) = served.agent(dir.path()).await;
    let body = json!({"name": "mallory"});
    let (status, _) = call(reqwest::Method::POST, format!("{base}/api/tokens"), &agent, Some(body)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    served.terminate().await;
}

/// A webhook chat's message, signed.
async fn from_chat(app: &App, conversation: &str, user: &str, text: &str) -> Value {
    // Each message its own id: the same body signed twice in one second would be a replay.
    let id = uuid::Uuid::new_v4().to_string();
    let body =
        serde_json::to_vec(&json!({"id": id, "conversation": conversation, "user": user, "text": text})).unwrap();
    let at = now_secs();
    let r = app
        .client
        .post(app.url("/channels/webhook/sms"))
        .header("content-type", "application/json")
        .header(TIMESTAMP_HEADER, at.to_string())
        .header(SIGNATURE_HEADER, sign(b"hush", at, &body))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

/// The secret of the sign-in link in a `/web` reply.
fn link_secret(reply: &Value) -> String {
    let text = reply["reply"].as_str().unwrap_or_else(|| panic!("no reply: {reply}"));
    let (_, secret) = text.split_once("#signin=").unwrap_or_else(|| panic!("no link: {text}"));
    secret.trim().to_owned()
}

async fn sign_in(app: &App, secret: &str) -> (StatusCode, Value) {
    let r = app.client.post(app.url("/api/signin")).json(&json!({"link": secret})).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

const SMS: &str = "\n[channels.webhook.sms]\nurl = \"http://127.0.0.1:9/\"\nsecret_env = \"SMS_SECRET\"\nallowed_users = [\"+1555\"]\n";

#[tokio::test]
async fn a_web_link_from_a_private_chat_signs_one_browser_in_once_before_it_expires() {
    let clock = Clock::manual(Clock::system().now_ms());
    let app = App::start_clocked(SMS, Env::from_pairs([("SMS_SECRET", "hush")]), clock.clone()).await;
    // Links go to the people the channel lets in, and only in private.
    let stranger = from_chat(&app, "+1999", "+1999", "/web").await;
    assert!(stranger["reply"].as_str().unwrap().contains("You may not sign in from here"), "{stranger}");
    let group = from_chat(&app, "family", "+1555", "/web").await;
    assert!(group["reply"].as_str().unwrap().contains("Send /web to me in a private chat"), "{group}");
    assert!(!group["reply"].as_str().unwrap().contains("#signin="), "{group}");

    let reply = from_chat(&app, "+1555", "+1555", "/web").await;
    let text = reply["reply"].as_str().unwrap();
    assert!(text.contains(&format!("{}/#signin=", app.base)) && text.contains("as webhook:sms:+1555"), "{text}");
    let (status, session) = sign_in(&app, &link_secret(&reply)).await;
    assert_eq!(status, StatusCode::OK, "{session}");
    assert_eq!(session["user"], "webhook:sms:+1555");
    let token = session["token"].as_str().unwrap();
    let (status, me) = call(reqwest::Method::GET, app.url("/api/me"), token, None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!((me["user"].as_str(), me["role"].as_str()), (Some("webhook:sms:+1555"), Some("person")));
    // The link works once.
    let (status, body) = sign_in(&app, &link_secret(&reply)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "link_not_valid"));
    let (status, _) = sign_in(&app, "0123456789abcdef0123456789abcdef").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A new link replaces the one before it.
    let replaced = from_chat(&app, "+1555", "+1555", "/web").await;
    let newer = from_chat(&app, "+1555", "+1555", "/web").await;
    let (status, _) = sign_in(&app, &link_secret(&replaced)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a link replaced by a newer one");
    let (status, _) = sign_in(&app, &link_secret(&newer)).await;
    assert_eq!(status, StatusCode::OK);
    // A link not opened within its minutes is refused; the session it would have made never is.
    let late = from_chat(&app, "+1555", "+1555", "/web").await;
    clock.advance(11 * 60 * 1000);
    let (status, body) = sign_in(&app, &link_secret(&late)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "link_not_valid"));
    // The session itself lasts a week, then is refused.
    let (status, _) = call(reqwest::Method::GET, app.url("/api/me"), token, None).await;
    assert_eq!(status, StatusCode::OK);
    clock.advance(7 * 86_400 * 1000);
    let (status, _) = call(reqwest::Method::GET, app.url("/api/me"), token, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    app.stop().await;
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn two_people_signed_in_two_ways_complete_a_quorum_on_the_page() {
    let app = App::start(SMS, Env::from_pairs([("SMS_SECRET", "hush")])).await;
    let (status, made) = app.post("/api/tokens", json!({"name": "alice"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let alice = made["token"].as_str().unwrap().to_owned();
    let (status, asked) = app
        .post(
            "/api/questions",
            json!({"conversation": "console:local", "kind": "approval", "prompt": "Deploy to production",
                   "quorum": 2, "answerers": ["web:alice", "webhook:sms:+1555"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{asked}");
    let card = "//article[.//h2[contains(., 'Deploy to production')]]";

    // Alice signs in with her own token; the page names her and asks no name.
    let first = Driver::start().await;
    first.go(&app.url("/")).await;
    first.type_into(&first.wait_for("//input[@id='token']").await, &alice).await;
    first.click(&first.wait_for("//form[@id='token-form']//button").await).await;
    first.wait_for("//p[@id='me'][normalize-space()='Signed in as web:alice']").await;
    first.click(&first.wait_for(&format!("{card}//button[normalize-space()='Approve']")).await).await;
    first.wait_for(&format!("{card}//*[contains(., '1 of 2')]")).await;

    // The second person opens the link /web sent them: no token typed, but the page says whom
    // it signs in and waits for them to agree.
    let reply = from_chat(&app, "+1555", "+1555", "/web").await;
    let second = Driver::start().await;
    second.go(&format!("{}/#signin={}", app.base, link_secret(&reply))).await;
    second.wait_for("//p[@id='signin-text'][contains(., 'signs this tab in as webhook:sms:+1555')]").await;
    assert!(second.find("//p[@id='me'][not(@hidden)]").await.is_none(), "signed in before agreeing");
    second.click(&second.wait_for("//button[normalize-space()='Sign in as webhook:sms:+1555']").await).await;
    second.wait_for("//p[@id='me'][normalize-space()='Signed in as webhook:sms:+1555']").await;
    second.click(&second.wait_for(&format!("{card}//button[normalize-space()='Approve']")).await).await;
    second.wait_for(&format!("{card}//p[contains(@class, 'outcome')]")).await;

    let (_, question) = app.get(&format!("/api/questions/{}", asked["id"].as_str().unwrap())).await;
    assert_eq!(question["status"], "answered", "{question}");
    let approvers: Vec<&str> =
        question["approvals"].as_array().unwrap().iter().map(|a| a["user"].as_str().unwrap()).collect();
    assert_eq!(approvers, ["web:alice", "webhook:sms:+1555"]);
    // The link was used: opened again, it signs nobody in.
    let third = Driver::start().await;
    third.go(&format!("{}/#signin={}", app.base, link_secret(&reply))).await;
    third.wait_for("//p[@id='status'][contains(., 'used already or has expired')]").await;
    for driver in [first, second, third] {
        driver.quit().await;
    }
    app.stop().await;
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn someone_elses_link_signs_a_tab_in_only_when_asked() {
    let app = App::start(SMS, Env::from_pairs([("SMS_SECRET", "hush")])).await;
    let (status, made) = app.post("/api/tokens", json!({"name": "alice"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    // A fresh tab opened on someone else's link: it says whose, and "Not me" leaves it unused.
    let theirs = from_chat(&app, "+1555", "+1555", "/web").await;
    let browser = Driver::start().await;
    browser.go(&format!("{}/#signin={}", app.base, link_secret(&theirs))).await;
    browser.wait_for("//p[@id='signin-text'][contains(., 'webhook:sms:+1555')]").await;
    browser.click(&browser.wait_for("//button[normalize-space()='Not me']").await).await;
    browser.wait_for("//p[@id='status'][contains(., 'Not signed in with the link')]").await;
    browser.wait_for("//form[@id='token-form'][not(@hidden)]").await;
    let (status, _) = sign_in(&app, &link_secret(&theirs)).await;
    assert_eq!(status, StatusCode::OK, "the link was not used");

    // Signed in as alice, the person pastes a link of another identity into the address bar.
    browser.type_into(&browser.wait_for("//input[@id='token']").await, made["token"].as_str().unwrap()).await;
    browser.click(&browser.wait_for("//form[@id='token-form']//button").await).await;
    browser.wait_for("//p[@id='me'][normalize-space()='Signed in as web:alice']").await;
    let pasted = from_chat(&app, "+1555", "+1555", "/web").await;
    browser.go(&format!("{}/#signin={}", app.base, link_secret(&pasted))).await;
    browser
        .wait_for("//p[@id='signin-text'][contains(., \"That link is webhook:sms:+1555's. This tab is signed in as web:alice\")]")
        .await;
    browser.wait_for("//button[normalize-space()='Stay web:alice']").await;
    browser.click(&browser.wait_for("//button[normalize-space()='Switch to webhook:sms:+1555']").await).await;
    browser.wait_for("//p[@id='me'][normalize-space()='Signed in as webhook:sms:+1555']").await;
    browser.quit().await;
    app.stop().await;
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn a_person_runs_the_demo_from_the_composer_by_plain_replies() {
    let app = App::start("", Env::default()).await;
    let (status, made) = app.post("/api/tokens", json!({"name": "bob", "may": "answer,ask"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let browser = Driver::start().await;
    browser.go(&app.url("/")).await;
    browser.type_into(&browser.wait_for("//input[@id='token']").await, made["token"].as_str().unwrap()).await;
    browser.click(&browser.wait_for("//form[@id='token-form']//button").await).await;
    browser.wait_for("//span[@id='chat-name'][normalize-space()='web:bob']").await;
    let composer = browser.wait_for("//input[@id='say']").await;
    browser.type_into(&composer, "/run demo").await;
    browser.press("\u{E007}").await;
    let log = "//ol[@id='chat-log']";
    browser.wait_for(&format!("{log}/li[contains(@class, 'mine')][contains(., '/run demo')]")).await;
    browser.wait_for(&format!("{log}/li[contains(., 'Which library for date formatting?')]")).await;
    // The board shows the same question, as a card.
    browser.wait_for("//article[.//h2[contains(., 'Which library for date formatting?')]]").await;
    // A plain reply answers the question waiting in the conversation.
    browser.type_into(&composer, "2").await;
    browser.press("\u{E007}").await;
    browser.wait_for(&format!("{log}/li[contains(., '✅ date-fns — web:bob via web')]")).await;
    browser.wait_for(&format!("{log}/li[contains(., 'Archive all 87 emails?')]")).await;
    browser.type_into(&composer, "no").await;
    browser.press("\u{E007}").await;
    browser
        .wait_for(&format!("{log}/li[contains(., 'Using date-fns for dates; left the 87 emails where they are.')]"))
        .await;
    // The README's picture of the conversation: ASKGATE_SCREENSHOTS=1 writes it to docs/.
    if std::env::var_os("ASKGATE_SCREENSHOTS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
        std::fs::write(docs.join("web-conversation.png"), browser.screenshot().await).unwrap();
    }
    // Text is text: markup typed in stays as typed.
    browser.type_into(&composer, "<b>hi</b>").await;
    browser.press("\u{E007}").await;
    browser.wait_for(&format!("{log}/li[contains(@class, 'mine')][contains(., '<b>hi</b>')]")).await;
    assert!(browser.find(&format!("{log}//b")).await.is_none(), "markup was rendered");
    let (status, lines) =
        call(reqwest::Method::GET, app.url("/api/messages"), made["token"].as_str().unwrap(), None).await;
    assert_eq!((status, lines["conversation"].as_str()), (StatusCode::OK, Some("web:bob")));
    browser.quit().await;
    app.stop().await;
}

/// What the composer (`POST /api/messages`) made of `text`, said with `token`.
async fn compose(base: &str, token: &str, text: &str) -> Value {
    let (status, said) =
        call(reqwest::Method::POST, format!("{base}/api/messages"), token, Some(json!({"text": text}))).await;
    assert_eq!(status, StatusCode::OK, "{said}");
    said
}

#[tokio::test]
async fn the_composer_answers_what_waits_for_its_person_on_the_board_by_a_plain_reply_or_by_id() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let (ok, out, err) = token_command(&config, &base, &["add", "alice"]).await;
    assert!(ok, "{err}");
    let alice = out.lines().next().unwrap().trim().to_owned();
    let ask = |body: Value| {
        let base = base.clone();
        let operator = operator.clone();
        async move {
            let (status, asked) =
                call(reqwest::Method::POST, format!("{base}/api/questions"), &operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{asked}");
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let status = |id: String| {
        let base = base.clone();
        let operator = operator.clone();
        async move {
            let (_, q) = call(reqwest::Method::GET, format!("{base}/api/questions/{id}"), &operator, None).await;
            q
        }
    };

    // An approval asked on the console for alice: on her board, not in her conversation.
    let deploy = ask(json!({"conversation": "console:local", "kind": "approval", "action": "deploy prod",
                            "answerers": ["web:alice"]}))
    .await;
    let said = compose(&base, &alice, "1").await;
    assert_eq!(said["receipt"]["receipt"], "resolved", "{said}");
    let answered = status(deploy.clone()).await;
    assert_eq!(
        (answered["status"].as_str(), answered["answered_by"].as_str()),
        (Some("answered"), Some("web:alice")),
        "{answered}"
    );

    // Two wait for her: a plain reply answers neither and says how to choose; an id does.
    let first = ask(json!({"conversation": "console:local", "prompt": "Lunch?", "options": ["soup", "salad"],
                           "answerers": ["web:alice"]}))
    .await;
    let second = ask(json!({"conversation": "console:local", "kind": "approval", "action": "rm -rf build",
                            "answerers": ["web:alice"]}))
    .await;
    let bobs = ask(json!({"conversation": "console:local", "prompt": "Bob's lunch?", "options": ["soup", "salad"],
                          "answerers": ["web:bob"]}))
    .await;
    let said = compose(&base, &alice, "1").await;
    assert!(said["reply"].as_str().unwrap().contains("2 questions are waiting for you"), "{said}");
    assert_eq!(status(first.clone()).await["status"], "pending");
    let listed = compose(&base, &alice, "/pending").await;
    let listed = listed["reply"].as_str().unwrap();
    assert!(listed.contains("Lunch?") && listed.contains("rm -rf build") && !listed.contains("Bob's"), "{listed}");
    let said = compose(&base, &alice, &format!("/answer {} 2", &first[..8])).await;
    assert_eq!(said["receipt"]["receipt"], "resolved", "{said}");
    assert_eq!(status(first).await["outcome"]["value"], "salad");
    let said = compose(&base, &alice, &format!("/deny {second} not today")).await;
    assert_eq!(said["receipt"]["receipt"], "resolved", "{said}");
    assert_eq!(status(second).await["status"], "declined");
    // Someone else's question is not on her board: not found, and it keeps waiting.
    let said = compose(&base, &alice, &format!("/answer {bobs} 1")).await;
    assert_eq!(said["receipt"]["receipt"], "unknown", "{said}");
    assert_eq!(status(bobs).await["status"], "pending");
    served.terminate().await;
}

#[tokio::test]
async fn a_person_acting_faster_than_the_limit_gets_429_with_retry_after_doing_nothing() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "\n[limits]\nper_person = \"1/h\"\nper_person_burst = 3\n");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let made = |name: &'static str| {
        let (base, operator) = (base.clone(), operator.clone());
        async move {
            let body = json!({"name": name, "may": "answer,ask"});
            let (status, made) = call(reqwest::Method::POST, format!("{base}/api/tokens"), &operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{made}");
            made["token"].as_str().unwrap().to_owned()
        }
    };
    let (alice, bob) = (made("alice").await, made("bob").await);
    let (status, asked) = call(
        reqwest::Method::POST,
        format!("{base}/api/questions"),
        &operator,
        Some(json!({"conversation": "console:local", "prompt": "Ship it?", "options": ["yes", "no"],
                    "answerers": ["web:alice"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    // The burst: three starts go through.
    for _ in 0..3 {
        let run = Some(json!({"text": "/run demo"}));
        let (status, body) = call(reqwest::Method::POST, format!("{base}/api/messages"), &alice, run).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Then a start, an ask and an answer are all refused, each saying when to come back.
    let tries = [
        ("/api/messages".to_owned(), json!({"text": "/run demo"})),
        ("/api/runs".to_owned(), json!({"function": "demo", "conversation": "web:alice"})),
        (
            "/api/questions".to_owned(),
            json!({"conversation": "web:alice", "prompt": "Lunch?", "answerers": ["web:alice"]}),
        ),
        (format!("/api/questions/{id}/reply"), json!({"value": "yes"})),
    ];
    for (path, body) in tries {
        let r =
            reqwest::Client::new().post(format!("{base}{path}")).bearer_auth(&alice).json(&body).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        let wait: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(wait >= 1, "{path}: Retry-After {wait}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(error_code(&body), "rate_limited", "{path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("[limits] per_person"), "{body}");
    }
    let (_, question) = call(reqwest::Method::GET, format!("{base}/api/questions/{id}"), &operator, None).await;
    assert_eq!(question["status"], "pending", "the refused answer changed nothing: {question}");
    // Others are not held back: another person, and the operator.
    let run = Some(json!({"text": "/run demo"}));
    assert_eq!(call(reqwest::Method::POST, format!("{base}/api/messages"), &bob, run).await.0, StatusCode::OK);
    for _ in 0..5 {
        let run = Some(json!({"function": "demo", "conversation": "console:local"}));
        let (status, body) = call(reqwest::Method::POST, format!("{base}/api/runs"), &operator, run).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    served.terminate().await;
}

#[tokio::test]
async fn a_sign_in_link_is_for_the_one_person_it_names() {
    let dir = TempDir::new().unwrap();
    let served = Served::start_with_env(&write_config(dir.path(), SMS), &[("SMS_SECRET", "hush")]);
    let (base, _) = served.api(dir.path()).await;
    let client = reqwest::Client::new();
    let chat = |text: &'static str| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let id = uuid::Uuid::new_v4().to_string();
            let body =
                serde_json::to_vec(&json!({"id": id, "conversation": "+1555", "user": "+1555", "text": text})).unwrap();
            let at = now_secs();
            let r = client
                .post(format!("{base}/channels/webhook/sms"))
                .header("content-type", "application/json")
                .header(TIMESTAMP_HEADER, at.to_string())
                .header(SIGNATURE_HEADER, sign(b"hush", at, &body))
                .body(body)
                .send()
                .await
                .unwrap();
            link_secret(&r.json().await.unwrap())
        }
    };
    let post = |path: &'static str, body: Value| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let r = client.post(format!("{base}{path}")).json(&body).send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let link = chat("/web").await;
    // Asked whom it is for, as often as the page likes: it says, and stays unused.
    for _ in 0..2 {
        let (status, said) = post("/api/signin/check", json!({"link": link})).await;
        assert_eq!(status, StatusCode::OK, "{said}");
        assert_eq!(said["user"], "webhook:sms:+1555", "{said}");
        assert!(said["expires_at"].as_i64().is_some(), "{said}");
    }
    // Signing in as someone else than the link's person is refused, and uses nothing.
    let (status, body) = post("/api/signin", json!({"link": link, "as": "telegram:42"})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::CONFLICT, "not_this_person"), "{body}");
    let (status, session) = post("/api/signin", json!({"link": link, "as": "webhook:sms:+1555"})).await;
    assert_eq!((status, session["user"].as_str()), (StatusCode::OK, Some("webhook:sms:+1555")), "{session}");
    let (status, body) = post("/api/signin/check", json!({"link": link})).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "link_not_valid"), "used: {body}");
    // The page asks before it signs in: it reads whom the link is for, and signs in as that person.
    let script = client.get(format!("{base}/page.js")).send().await.unwrap().text().await.unwrap();
    let (check, sign) = (script.find("\"/api/signin/check\"").unwrap(), script.find("\"/api/signin\"").unwrap());
    assert!(check < sign && script.contains("as: link.user") && !script.contains("window.confirm"));
    served.terminate().await;
}
