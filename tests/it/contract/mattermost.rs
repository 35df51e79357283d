//! Mattermost: the loopback server of [`crate::fake_mattermost`]; a card is the bot's post
//! with its buttons, a tap is the request the server sends askgate for a click (handled once
//! askgate has answered it), and a redelivery is the same `posted` event or the same click
//! sent again. Mattermost reports no language with a post or a click, so the person's is the
//! channel's `locale`. A post holds 16,000 characters, more than a question's detail, so
//! nothing askgate asks is cut here.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_mattermost::{FakeMattermost, actions, message};
use crate::support::eventually;

pub const PERSON: &str = "u0000000000000000000alice1";
pub const STRANGER: &str = "u00000000000000000000bob01";
pub const CHANNEL: &str = "c0000000000000000000town01";
pub const TOKEN: &str = "mm-bot-token";
/// askgate's public address as the server knows it (the fake sends clicks to where askgate
/// actually listens).
pub const PUBLIC_URL: &str = "https://askgate.example.com";

pub struct Mattermost {
    pub fake: FakeMattermost,
    pub askgate: Askgate,
    connections: usize,
    /// What was delivered, to deliver again: `posted` events and clicks.
    delivered: Mutex<Vec<Value>>,
}

impl Mattermost {
    pub async fn start() -> Self {
        Self::start_with("").await
    }

    /// askgate with `more` keys in its `[channels.mattermost]` section.
    pub async fn start_with(more: &str) -> Self {
        let (fake, url) = FakeMattermost::start(TOKEN).await;
        let channel = format!(
            "\n[channels.mattermost]\ntoken_env = \"ASKGATE_TEST_MM_TOKEN\"\nurl = \"{url}\"\npublic_url = \"{PUBLIC_URL}\"\n\
             allowed_users = [\"{PERSON}\"]\n{more}"
        );
        let askgate = Askgate::start(&channel, &[("ASKGATE_TEST_MM_TOKEN", TOKEN)]).await;
        fake.set_askgate(&askgate.base);
        fake.connected(1).await;
        Self { fake, askgate, connections: 1, delivered: Mutex::default() }
    }

    fn card_of(post: &Value) -> Card {
        let choices = actions(post)
            .iter()
            .map(|a| Choice {
                label: a["name"].as_str().unwrap_or_default().to_owned(),
                payload: a["integration"]["context"]["command"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        Card { at: post["id"].as_str().unwrap().to_owned(), text: message(post), choices }
    }

    /// What askgate has said so far: its posts and the ephemeral texts.
    fn said(&self) -> usize {
        self.fake.calls("POST /posts").len() + self.fake.ephemerals(PERSON).len() + self.fake.ephemerals(STRANGER).len()
    }

    fn keep(&self, what: Value) -> usize {
        let mut delivered = self.delivered.lock().unwrap();
        delivered.push(what);
        delivered.len() - 1
    }
}

pub fn user(who: Who) -> (&'static str, &'static str) {
    match who {
        Who::Person => (PERSON, "alice"),
        Who::Stranger => (STRANGER, "bob"),
    }
}

#[async_trait]
impl Driver for Mattermost {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("mattermost:{CHANNEL}")
    }

    fn person(&self) -> String {
        format!("mattermost:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let before = self.said();
        let (id, name) = user(who);
        let event = self.fake.post_as(id, &format!("@{name}"), CHANNEL, text, None);
        Delivered(format!("post {} {before}", self.keep(event)))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let (id, name) = user(who);
        let request = self.fake.click_request(id, name, &card.at, label);
        let (status, body) = self.fake.send_click(&request).await;
        assert!(status.is_success(), "{status} {body}");
        Delivered(format!("tap {} 0", self.keep(request)))
    }

    async fn handled(&self, delivered: &Delivered) {
        let words: Vec<&str> = delivered.0.split(' ').collect();
        if words[0] == "post" {
            // askgate answers a post with a post (a card, a reply) or nothing that shows.
            let before: usize = words[2].parse().unwrap();
            eventually(|| async { (self.said() > before).then_some(()) }).await;
        }
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let words: Vec<&str> = delivered.0.split(' ').collect();
        let what = self.delivered.lock().unwrap()[words[1].parse::<usize>().unwrap()].clone();
        if words[0] == "post" {
            self.fake.redeliver(&what);
        } else {
            let (status, body) = self.fake.send_click(&what).await;
            assert!(status.is_success(), "{status} {body}");
        }
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn card(&self, prompt: &str) -> Card {
        Self::card_of(&self.fake.posted(prompt).await)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let now = Self::card_of(&self.fake.post(&card.at));
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        message(&self.fake.posted(needle).await)
    }

    fn posts(&self, needle: &str) -> usize {
        let calls = [self.fake.calls("POST /posts"), self.fake.calls("PUT /posts")].concat();
        calls.iter().filter(|c| message(c).contains(needle)).count()
    }

    fn cuts(&self) -> bool {
        false
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.fake.set_askgate(&self.askgate.base);
        self.connections += 1;
        self.fake.connected(self.connections).await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.askgate.reconfigure("allowed_users", "locale = \"zh-CN\"\nallowed_users");
        self.restart().await;
        true
    }
}
