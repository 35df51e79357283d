//! The email channel against a real mail server: Dovecot holds askgate's mailbox (IMAP) and
//! aiosmtpd receives what askgate sends (SMTP). A person "says" something by a new mail to
//! askgate; a "tap" is a reply to the card whose body is the choice's command; a mail cannot
//! change once sent, so a card's outcome is a later mail in its thread; a mail delivered again
//! carries the same `Message-ID`. Mail says no language: the person's language is the
//! section's `locale`. A mail takes text of any length, so nothing is cut.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::driver::{Askgate, Card, Delivered, Driver, Who, text_choices};
use crate::mail_server::{MailServer, SentMail};
use crate::support::eventually;

/// askgate's own address, whose mailbox it reads.
pub const ASKGATE: &str = "askgate@example.com";
/// The person, allowed to start runs.
pub const PERSON: &str = "alice@example.org";
/// Someone else, who may not.
pub const STRANGER: &str = "eve@example.org";

pub struct Email {
    // askgate stops (dropped) before its mail servers.
    pub askgate: Askgate,
    pub server: MailServer,
    sent: AtomicU64,
}

/// A mail from `from` to askgate: `Message-ID` `id`, replying to `card` when given.
pub fn mail(from: &str, id: &str, subject: &str, card: Option<&str>, body: &str) -> String {
    let mut headers = format!("From: {from}\r\nTo: {ASKGATE}\r\nSubject: {subject}\r\nMessage-ID: <{id}>\r\n");
    if let Some(card) = card {
        headers.push_str(&format!("In-Reply-To: <{card}>\r\nReferences: <{card}>\r\n"));
    }
    format!("{headers}Content-Type: text/plain; charset=utf-8\r\n\r\n{}\r\n", body.replace('\n', "\r\n"))
}

impl Email {
    pub async fn start() -> Self {
        Self::start_with("").await
    }

    /// Starts with `extra` keys in `[channels.email]`.
    pub async fn start_with(extra: &str) -> Self {
        let server = MailServer::start().await;
        let channel = format!(
            "\n[channels.email]\nsmtp_url_env = \"ASKGATE_TEST_SMTP_URL\"\nimap_url_env = \"ASKGATE_TEST_IMAP_URL\"\n\
             from = \"askgate <{ASKGATE}>\"\n{extra}allowed_users = [\"{PERSON}\"]\n"
        );
        let (smtp, imap) = (server.smtp_url(), server.imap_url(ASKGATE));
        let env = [("ASKGATE_TEST_SMTP_URL", smtp.as_str()), ("ASKGATE_TEST_IMAP_URL", imap.as_str())];
        let askgate = Askgate::start(&channel, &env).await;
        Self { server, askgate, sent: AtomicU64::new(0) }
    }

    fn address(who: Who) -> &'static str {
        if who == Who::Person { PERSON } else { STRANGER }
    }

    /// A new `Message-ID`.
    pub fn next_id(&self) -> String {
        format!("m{}@example.org", self.sent.fetch_add(1, Ordering::Relaxed))
    }

    /// `who` mails `body`, replying to `card` when given; what was delivered.
    pub async fn send(&self, who: Who, card: Option<&str>, body: &str) -> Delivered {
        let id = self.next_id();
        let subject = if card.is_some() { "Re: your question" } else { "hello" };
        let raw = mail(Self::address(who), &id, subject, card, body);
        self.server.deliver(ASKGATE, raw.as_bytes()).await;
        Delivered(raw)
    }

    /// The person mails `body` in reply to the card with id `card`, and waits until askgate
    /// has read it.
    pub async fn say_replying(&self, card: &str, body: &str) {
        let delivered = self.send(Who::Person, Some(card), body).await;
        self.handled(&delivered).await;
    }

    /// The mails askgate sent to `to`.
    pub fn sent_to(&self, to: &str) -> Vec<SentMail> {
        self.server.sent().into_iter().filter(|m| m.to.iter().any(|t| t == to)).collect()
    }

    fn texts(&self) -> Vec<String> {
        self.server.sent().iter().map(SentMail::text).collect()
    }
}

/// The `Message-ID` of a mail the test wrote.
pub fn id_of(delivered: &Delivered) -> String {
    let line = delivered.0.lines().find_map(|l| l.strip_prefix("Message-ID: <")).unwrap();
    line.trim_end_matches(['>', '\r']).to_owned()
}

#[async_trait]
impl Driver for Email {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("email:{PERSON}")
    }

    fn person(&self) -> String {
        format!("email:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let delivered = self.send(who, None, text).await;
        self.handled(&delivered).await;
        delivered
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let payload = card.choice(label).payload.clone();
        let delivered = self.send(who, Some(&card.at), &payload).await;
        self.handled(&delivered).await;
        delivered
    }

    async fn handled(&self, delivered: &Delivered) {
        let id = id_of(delivered);
        // askgate marks a mail \Seen once it has handled it.
        eventually(|| async { self.server.seen(ASKGATE, &id).filter(|seen| *seen) }).await;
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        self.server.deliver(ASKGATE, delivered.0.as_bytes()).await;
        let id = id_of(delivered);
        // Both copies read: each is marked \Seen.
        eventually(|| async {
            let root = self.server.mailbox(ASKGATE);
            let copies = root.len();
            (copies > 0 && root.iter().all(|(_, seen)| *seen) && self.server.seen(ASKGATE, &id) == Some(true))
                .then_some(())
        })
        .await;
    }

    async fn card(&self, prompt: &str) -> Card {
        let mail = self
            .server
            .sent_where(|m| {
                m.to.iter().any(|t| t == PERSON)
                    && m.message_id().starts_with("askgate.card.")
                    && m.text().contains(prompt)
            })
            .await;
        let text = mail.text();
        Card { at: mail.message_id(), choices: text_choices(&text), text }
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        let thread = format!("<{}>", card.at);
        let mail = self
            .server
            .sent_where(|m| m.header("In-Reply-To").as_deref() == Some(thread.as_str()) && m.text().contains(needle))
            .await;
        mail.text()
    }

    async fn shown(&self, needle: &str) -> String {
        eventually(|| async { self.texts().into_iter().find(|t| t.contains(needle)) }).await
    }

    fn posts(&self, needle: &str) -> usize {
        self.texts().iter().filter(|t| t.contains(needle)).count()
    }

    fn cuts(&self) -> bool {
        false
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.askgate.reconfigure("allowed_users", "locale = \"zh-CN\"\nallowed_users");
        self.askgate.restart().await;
        true
    }
}
