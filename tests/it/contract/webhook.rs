//! The webhook channel: a bridge POSTs signed messages in and receives signed messages out,
//! text only. A "tap" is the choice's command typed; a card cannot change once sent, so its
//! outcome is a later message; a message the bridge sends again carries the same `id`. The
//! bridge reports no language: the person's language is the endpoint's `locale`. A bridge
//! takes text of any length, so nothing is cut.

use std::sync::{Arc, Mutex};

use askgate::channel::webhook::{OutboundMessage, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::driver::{Askgate, Card, Delivered, Driver, Who, text_choices};
use crate::support::{answer, eventually};

const SECRET: &str = "hush";
const PERSON: &str = "+15550001";
const STRANGER: &str = "+15550002";

pub struct Webhook {
    got: Arc<Mutex<Vec<OutboundMessage>>>,
    askgate: Askgate,
    sent: std::sync::atomic::AtomicU64,
}

impl Webhook {
    pub async fn start() -> Self {
        let (out, got, _) = crate::http::receiver(SECRET).await;
        let channel = format!(
            "\n[channels.webhook.sms]\nurl = \"{out}\"\nsecret_env = \"ASKGATE_TEST_SMS_SECRET\"\nallowed_users = [\"{PERSON}\"]\n"
        );
        let askgate = Askgate::start(&channel, &[("ASKGATE_TEST_SMS_SECRET", SECRET)]).await;
        Self { got, askgate, sent: Default::default() }
    }

    fn texts(&self) -> Vec<String> {
        self.got.lock().unwrap().iter().map(|m| m.text.clone()).collect()
    }

    /// POSTs `body` as the bridge does, signed `ago` seconds ago; askgate's reply.
    async fn post(&self, body: &Value, ago: i64) -> Value {
        let body = serde_json::to_vec(body).unwrap();
        let at = crate::http::now_secs() - ago;
        let request = reqwest::Client::new()
            .post(format!("{}/channels/webhook/sms", self.askgate.base))
            .header("content-type", "application/json")
            .header(TIMESTAMP_HEADER, at.to_string())
            .header(SIGNATURE_HEADER, sign(SECRET.as_bytes(), at, &body))
            .body(body);
        let (status, answered) = answer(request).await;
        assert!(status.is_success(), "{status:?}");
        answered
    }
}

#[async_trait]
impl Driver for Webhook {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("webhook:sms:{PERSON}")
    }

    fn person(&self) -> String {
        format!("webhook:sms:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let user = if who == Who::Person { PERSON } else { STRANGER };
        let n = self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({"conversation": PERSON, "user": user, "text": text, "id": format!("m{n}")});
        // askgate answers the POST once it has handled the message.
        self.post(&body, 0).await;
        Delivered(body.to_string())
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let payload = card.choice(label).payload.clone();
        self.say(who, &payload).await
    }

    async fn handled(&self, _delivered: &Delivered) {
        // Handled before the bridge's POST was answered.
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        // Signed anew, as a bridge does when it sends again: a signature is taken once.
        self.post(&serde_json::from_str(&delivered.0).unwrap(), 1).await;
    }

    async fn card(&self, prompt: &str) -> Card {
        let text = eventually(|| async { self.texts().into_iter().find(|t| t.contains(prompt)) }).await;
        let id = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("id "))
            .map(|l| l.split_whitespace().next().unwrap().to_owned());
        Card { at: id.unwrap_or_default(), choices: text_choices(&text), text }
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let texts = self.texts();
            let at = texts.iter().position(|t| *t == card.text)?;
            texts[at + 1..].iter().find(|t| t.contains(needle) && (t.contains('✅') || t.contains(&card.at))).cloned()
        })
        .await
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
