//! The email channel through the real binary, against Dovecot (askgate's mailbox, over IMAP)
//! and aiosmtpd (what askgate sends, over SMTP): what only email does. What every channel does
//! runs in the contract suite (`contract::*::email`).

use serde_json::json;

use crate::contract::driver::{Driver, Who};
use crate::contract::email::{ASKGATE, Email, PERSON, STRANGER, mail};
use crate::support::eventually;

/// A short id's question, in the person's conversation, answered by the person.
async fn asked(d: &Email, prompt: &str) -> String {
    let body = json!({"prompt": prompt, "options": ["red", "green", "blue"]});
    d.askgate.ask(&d.conversation(), &d.person(), body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_mailed_run_is_answered_by_a_plain_reply_then_by_a_typed_command() {
    let d = Email::start().await;
    d.say(Who::Person, "run demo").await;
    let card = d.card("Which library for date formatting?").await;
    let sent = d.sent_to(PERSON).into_iter().find(|m| m.message_id() == card.at).unwrap();
    assert!(sent.subject().starts_with("Which library for date formatting? ["), "{}", sent.subject());
    assert!(sent.html().is_some_and(|h| h.contains("/answer")), "the HTML part shows the commands too");
    assert_eq!(sent.from, ASKGATE);
    // A plain "2" in reply to the card picks date-fns; what is quoted below it is not read.
    let reply = format!("2\n\nOn Monday, askgate <{ASKGATE}> wrote:\n> {}", card.text.replace('\n', "\n> "));
    d.send(Who::Person, Some(&card.at), &reply).await;
    d.settled(&card, "date-fns").await;
    let confirm = d.card("Archive all 87 emails?").await;
    // A new mail with the command finishes the run.
    let id =
        confirm.text.lines().find_map(|l| l.trim().strip_prefix("id ")).unwrap().split_whitespace().next().unwrap();
    d.say(Who::Person, &format!("Hello,\n\n/answer {id} yes\n\nAlice")).await;
    d.shown("Using date-fns for dates; archived 87 emails.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_stranger_who_mails_run_is_told_the_key_that_would_allow_them() {
    let d = Email::start().await;
    d.say(Who::Stranger, "run demo").await;
    let told = d.server.sent_where(|m| m.to.iter().any(|t| t == STRANGER)).await;
    assert!(told.text().contains(&format!("email:{STRANGER}")), "{}", told.text());
    assert_eq!(d.askgate.asked("Which library for date formatting?").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_reply_sent_while_askgate_restarts_is_taken_once() {
    let mut d = Email::start().await;
    let id = asked(&d, "Which colour for the van?").await;
    let card = d.card("Which colour for the van?").await;
    // The reply lands in the mailbox while askgate stops and starts again.
    let reply = mail(PERSON, "late@example.org", "Re: van", Some(&card.at), "blue");
    let delivering = d.server.deliver(ASKGATE, reply.as_bytes());
    let ((), ()) = tokio::join!(delivering, d.askgate.restart());
    let q = d.askgate.resolved(&id).await;
    assert_eq!(q["outcome"]["value"], "blue", "{q}");
    d.settled(&card, "blue").await;
    eventually(|| async { d.server.seen(ASKGATE, "late@example.org").filter(|s| *s) }).await;
    // The same reply again (a mail server that delivers twice) changes nothing and says nothing.
    let before = d.server.sent().len();
    d.server.deliver(ASKGATE, reply.as_bytes()).await;
    d.say(Who::Person, "/pending").await;
    eventually(|| async { (d.server.sent().len() > before).then_some(()) }).await;
    let after: Vec<String> = d.server.sent()[before..].iter().map(|m| m.text()).collect();
    assert_eq!(after.len(), 1, "only /pending was answered: {after:?}");
    assert_eq!(d.askgate.resolved(&id).await["outcome"]["value"], "blue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_twenty_megabyte_mail_answers_its_question() {
    let d = Email::start().await;
    let id = asked(&d, "Which colour for the bike?").await;
    let card = d.card("Which colour for the bike?").await;
    let attachment = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\r\n".repeat(270_000);
    let raw = format!(
        "From: {PERSON}\r\nTo: {ASKGATE}\r\nSubject: Re: bike\r\nMessage-ID: <big@example.org>\r\nIn-Reply-To: <{}>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n\
         green\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n{attachment}--b--\r\n",
        card.at
    );
    assert!(raw.len() > 20_000_000, "{}", raw.len());
    d.server.deliver(ASKGATE, raw.as_bytes()).await;
    let q = d.askgate.resolved(&id).await;
    assert_eq!(q["outcome"]["value"], "green", "{q}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_mail_with_only_html_answers_from_its_text() {
    let d = Email::start().await;
    let id = asked(&d, "Which colour for the boat?").await;
    let card = d.card("Which colour for the boat?").await;
    let raw = format!(
        "From: {PERSON}\r\nTo: {ASKGATE}\r\nSubject: Re: boat\r\nMessage-ID: <html@example.org>\r\nIn-Reply-To: <{}>\r\n\
         Content-Type: text/html; charset=utf-8\r\n\r\n<html><body><div>red</div><blockquote>{}</blockquote></body></html>\r\n",
        card.at, card.text
    );
    d.server.deliver(ASKGATE, raw.as_bytes()).await;
    let q = d.askgate.resolved(&id).await;
    assert_eq!(q["outcome"]["value"], "red", "{q}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_mail_askgate_cannot_read_stays_in_the_mailbox_without_holding_up_the_next() {
    let d = Email::start().await;
    let id = asked(&d, "Which colour for the kite?").await;
    let card = d.card("Which colour for the kite?").await;
    let nobody =
        "To: askgate@example.com\r\nSubject: no sender\r\nMessage-ID: <nobody@example.org>\r\n\r\n/answer x 1\r\n";
    d.server.deliver(ASKGATE, nobody.as_bytes()).await;
    d.send(Who::Person, Some(&card.at), "blue").await;
    assert_eq!(d.askgate.resolved(&id).await["outcome"]["value"], "blue");
    assert_eq!(d.server.seen(ASKGATE, "nobody@example.org"), Some(true), "left in the mailbox, read once");
    d.askgate.served().log_line("a mail that could not be read was left in the mailbox").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_mailbox_that_stops_answering_is_reported_down_until_it_is_back() {
    let mut d = Email::start().await;
    let health = |d: &Email| {
        let url = format!("{}/healthz", d.askgate.base);
        async move { reqwest::get(url).await.unwrap().json::<serde_json::Value>().await.unwrap() }
    };
    eventually(|| async { (health(&d).await["channels"]["email"] == "up").then_some(()) }).await;
    d.server.stop_imap().await;
    let down = eventually(|| async {
        let h = health(&d).await;
        h["channels"]["email"]
            .as_str()
            .filter(|s| s.starts_with("down: the mailbox does not answer"))
            .map(|_| h.clone())
    })
    .await;
    assert_eq!(down["status"], "failing", "{down}");
    d.server.restart_imap().await;
    let id = asked(&d, "Which colour for the tent?").await;
    let card = d.card("Which colour for the tent?").await;
    d.send(Who::Person, Some(&card.at), "green").await;
    assert_eq!(d.askgate.resolved(&id).await["outcome"]["value"], "green");
    eventually(|| async { (health(&d).await["channels"]["email"] == "up").then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_card_the_smtp_server_is_too_busy_for_is_sent_again() {
    let d = Email::start().await;
    d.server.refuse_next(&["451 4.3.0 busy, try later", "452 4.3.1 out of room"]);
    asked(&d, "Which colour for the car?").await;
    d.card("Which colour for the car?").await;
    assert_eq!(d.sent_to(PERSON).len(), 1, "one card, sent on the third try");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_mail_the_smtp_server_refuses_is_given_up_with_its_reason_logged() {
    let d = Email::start().await;
    asked(&d, "Which colour for the bus?").await;
    d.card("Which colour for the bus?").await;
    d.server.refuse_next(&["554 5.7.1 no thanks"]);
    d.say(Who::Person, "/pending").await;
    let logged = d.askgate.served().log_line("SMTP refused the mail").await;
    assert!(logged.contains("554") && logged.contains("no thanks"), "the server's reason: {logged}");
    // The next mail goes out: the refused one was not tried again before it.
    d.say(Who::Person, "/help").await;
    let help = d.server.sent_where(|m| m.to.iter().any(|t| t == PERSON) && m.text().contains("/run")).await;
    let lists = d.sent_to(PERSON).iter().filter(|m| m.text().contains("Which colour for the bus?")).count();
    assert_eq!(lists, 1, "the card only; the refused list was not sent again: {}", help.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_reply_without_the_cards_secret_changes_nothing_with_one_explanation_an_hour() {
    let d = Email::start().await;
    let id = asked(&d, "Which colour for the roof?").await;
    let card = d.card("Which colour for the roof?").await;
    // The card's id with another secret: what someone who knows the question's id could forge.
    let (local, domain) = card.at.split_once('@').unwrap();
    let (stem, secret) = local.rsplit_once('.').unwrap();
    assert!(secret.len() >= 32, "a card's secret is long: {secret}");
    let forged = format!("{stem}.{}@{domain}", "0".repeat(secret.len()));
    d.say_replying(&forged, "blue").await;
    d.say_replying(&forged, "/answer roof blue").await;
    d.say(Who::Person, "/pending").await;
    d.server
        .sent_where(|m| m.text().contains("Which colour for the roof?") && !m.message_id().starts_with("askgate.card."))
        .await;
    assert_eq!(d.askgate.question(&id).await["status"], "pending");
    let told = d.sent_to(PERSON).iter().filter(|m| m.text().contains("did not send to")).count();
    assert_eq!(told, 1, "one explanation for two such mails");
}

/// The token of the one-click link labelled `label` in a card's HTML.
fn link(html: &str, label: &str) -> String {
    let end = html.find(&format!("\">{label}</a>")).unwrap_or_else(|| panic!("no link {label} in {html}"));
    let start = html[..end].rfind("href=\"").unwrap() + "href=\"".len();
    let href = &html[start..end];
    href.strip_prefix("https://askgate.example.com/act/").unwrap_or_else(|| panic!("{href}")).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn a_one_click_link_changes_nothing_until_its_page_is_confirmed_then_answers_once() {
    let d = Email::start_with("link_base = \"https://askgate.example.com\"\n").await;
    let id = asked(&d, "Which colour for the door?").await;
    let card = d.card("Which colour for the door?").await;
    let sent = d.sent_to(PERSON).into_iter().find(|m| m.message_id() == card.at).unwrap();
    let token = link(&sent.html().unwrap(), "green");
    let url = format!("{}/act/{token}", d.askgate.base);
    let client = reqwest::Client::new();
    // Opening the link (as a mail scanner would, twice) shows the question and changes nothing.
    for _ in 0..2 {
        let page = client.get(&url).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.contains("form-action 'self'"), "its form may post: {csp}");
        let page = page.text().await.unwrap();
        assert!(page.contains("Which colour for the door?") && page.contains("Confirm: green"), "{page}");
    }
    assert_eq!(d.askgate.question(&id).await["status"], "pending");
    // A token whose signature was changed is no link of askgate's.
    let other = if url.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{other}", &url[..url.len() - 1]);
    assert_eq!(client.post(&forged).send().await.unwrap().status(), 404);
    let answered = client.post(&url).send().await.unwrap();
    assert_eq!(answered.status(), 200);
    assert!(answered.text().await.unwrap().contains("Answered: green"));
    let q = d.askgate.resolved(&id).await;
    assert_eq!((&q["outcome"]["value"], &q["answered_by"]), (&json!("green"), &json!(format!("email:{PERSON}"))));
    let again = client.post(&url).send().await.unwrap();
    assert_eq!(again.status(), 409);
    assert!(again.text().await.unwrap().contains("already used"));
    d.settled(&card, "green").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_mail_servers,
    ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)"
)]
async fn an_smtp_server_that_takes_no_mail_shows_on_healthz_until_the_card_goes_out() {
    let d = Email::start().await;
    let health = || async {
        let url = format!("{}/healthz", d.askgate.base);
        reqwest::get(url).await.unwrap().json::<serde_json::Value>().await.unwrap()
    };
    // Busy for longer than one send's tries (about 15 s of pauses).
    d.server.refuse_next(&["451 4.3.0 busy"; 7]);
    asked(&d, "Which colour for the gate?").await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let degraded = loop {
        let h = health().await;
        if h["channels"]["email"].as_str().is_some_and(|s| s.starts_with("degraded: SMTP does not take mail")) {
            break h;
        }
        assert!(tokio::time::Instant::now() < deadline, "never degraded: {h}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(degraded["channels"]["email"].as_str().unwrap().contains("451"), "{degraded}");
    d.card("Which colour for the gate?").await;
    eventually(|| async { (health().await["channels"]["email"] == "up").then_some(()) }).await;
}
