//! Slack: the fake Web API and Socket Mode; a tap is a `block_actions` envelope, answered by
//! its acknowledgement, and Slack delivers an envelope again when it saw none. Slack reports
//! no locale with a message or a tap, so the person's language is the channel's `locale`. A
//! card's detail fills up to eight sections (24,000 characters), more than askgate takes in a
//! question (16 KiB), so nothing askgate asks is cut here.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_slack::{FakeSlack, TEAM};
use crate::support::eventually;

const PERSON: &str = "U0000ALICE";
const STRANGER: &str = "U0000BOB";
const CHANNEL: &str = "C0000GENERAL";

pub struct Slack {
    fake: FakeSlack,
    askgate: Askgate,
    /// Socket Mode connections made so far, by every askgate started here.
    connections: u32,
    /// Taps so far: each has its own action time and trigger, as Slack's do.
    taps: std::sync::atomic::AtomicU64,
}

impl Slack {
    pub async fn start() -> Self {
        let (fake, url) = FakeSlack::start().await;
        let channel = format!(
            "\n[channels.slack]\ntoken_env = \"SLACK_BOT_TOKEN\"\napp_token_env = \"SLACK_APP_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"{PERSON}\"]\n"
        );
        let env = [("SLACK_BOT_TOKEN", "xoxb-fake"), ("SLACK_APP_TOKEN", "xapp-fake")];
        let askgate = Askgate::start(&channel, &env).await;
        fake.connected(1).await;
        askgate.served().log_line("slack connected").await;
        Self { fake, askgate, connections: 1, taps: Default::default() }
    }

    fn card_of(ts: &str, message: &Value) -> Card {
        let choices = crate::fake_slack::elements(message)
            .into_iter()
            .filter(|e| e["type"] == "button")
            .map(|e| Choice {
                label: e["text"]["text"].as_str().unwrap_or_default().to_owned(),
                payload: e["value"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        Card { at: ts.to_owned(), text: words(message), choices }
    }
}

/// A message's words: its `text` and those of its blocks other than the buttons.
fn words(message: &Value) -> String {
    fn collect(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::Object(map) if map.get("type").is_some_and(|t| t == "actions") => {}
            Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        Value::String(s) if key == "text" => into.push(s.clone()),
                        _ => collect(v, into),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, into)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    collect(&json!({"text": message["text"], "blocks": message["blocks"]}), &mut found);
    found.join("\n")
}

fn user(who: Who) -> &'static str {
    match who {
        Who::Person => PERSON,
        Who::Stranger => STRANGER,
    }
}

#[async_trait]
impl Driver for Slack {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("slack:{TEAM}:{CHANNEL}")
    }

    fn person(&self) -> String {
        format!("slack:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let posted = self.fake.calls("chat.postMessage").len() + self.fake.calls("chat.postEphemeral").len();
        let id = self.fake.message(user(who), CHANNEL, text, None);
        Delivered(format!("message {id} {posted}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let value = &card.choice(label).payload;
        let n = self.taps.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let action =
            json!({"type": "button", "action_id": "a1", "value": value, "text": {"type": "plain_text", "text": label}});
        let payload = FakeSlack::actions_payload(user(who), CHANNEL, &card.at, action, json!({"values": {}}), n);
        let id = self.fake.envelope("interactive", payload.clone());
        Delivered(format!("tap {id} {payload}"))
    }

    async fn handled(&self, delivered: &Delivered) {
        let mut words = delivered.0.splitn(3, ' ');
        let (kind, id, rest) = (words.next().unwrap(), words.next().unwrap(), words.next().unwrap());
        self.fake.acked(id).await;
        if kind == "message" {
            // A message is acknowledged at once; askgate's answer to it is a message.
            let posted: usize = rest.parse().unwrap();
            eventually(|| async {
                let now = self.fake.calls("chat.postMessage").len() + self.fake.calls("chat.postEphemeral").len();
                (now > posted).then_some(())
            })
            .await;
        }
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let mut words = delivered.0.splitn(3, ' ');
        let (kind, id, payload) = (words.next().unwrap(), words.next().unwrap(), words.next().unwrap());
        assert_eq!(kind, "tap", "taps are redelivered here");
        self.fake.redeliver(id, "interactive", serde_json::from_str(payload).unwrap());
    }

    async fn card(&self, prompt: &str) -> Card {
        let (ts, message) = self.fake.sent(prompt, 1).await;
        Self::card_of(&ts, &message)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let now = Self::card_of(&card.at, &self.fake.message_at(&card.at));
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        words(&self.fake.sent(needle, 1).await.1)
    }

    fn posts(&self, needle: &str) -> usize {
        let calls = [self.fake.calls("chat.postMessage"), self.fake.calls("chat.update")].concat();
        calls.iter().filter(|c| words(c).contains(needle)).count()
    }

    fn cuts(&self) -> bool {
        false
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.connections += 1;
        self.fake.connected(self.connections).await;
        self.askgate.served().log_line("slack connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.askgate.reconfigure("allowed_users", "locale = \"zh-CN\"\nallowed_users");
        self.restart().await;
        true
    }
}
