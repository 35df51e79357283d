//! Discord: the fake REST API and gateway; a tap is a component interaction, answered by its
//! callback. `/run` is the application command (an interaction, which carries the person's
//! locale); everything else is a message in the channel.

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_discord::FakeDiscord;
use crate::support::eventually;

const PERSON: u64 = 100;
const STRANGER: u64 = 101;
const CHANNEL: u64 = 555;

pub struct Discord {
    fake: FakeDiscord,
    askgate: Askgate,
}

impl Discord {
    pub async fn start() -> Self {
        let (fake, url) = FakeDiscord::start().await;
        let channel = format!(
            "\n[channels.discord]\ntoken_env = \"ASKGATE_TEST_DC_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"{PERSON}\"]\n"
        );
        let askgate = Askgate::start(&channel, &[("ASKGATE_TEST_DC_TOKEN", "fake-token")]).await;
        askgate.served().log_line("discord connected").await;
        fake.connected().await;
        Self { fake, askgate }
    }

    fn card_of(message: &Value) -> Card {
        let choices = message["components"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
            .map(|c| Choice {
                label: c["label"].as_str().or(c["placeholder"].as_str()).unwrap_or_default().to_owned(),
                payload: c["custom_id"].as_str().unwrap().to_owned(),
            })
            .collect();
        Card { at: message["id"].as_str().unwrap().to_owned(), text: plain(&message["content"]), choices }
    }

    /// Waits for the first bot message whose words contain `needle`.
    async fn sent(&self, needle: &str) -> Value {
        eventually(|| async { self.fake.messages().into_iter().find(|m| plain(&m["content"]).contains(needle)) }).await
    }

    fn posted(&self) -> usize {
        self.fake.calls("/messages").iter().filter(|(method, _, _)| method == "POST").count()
    }
}

/// Discord's markdown without its escapes (`date\-fns` reads `date-fns`).
fn plain(content: &Value) -> String {
    content.as_str().unwrap_or_default().replace('\\', "")
}

fn user(who: Who) -> u64 {
    match who {
        Who::Person => PERSON,
        Who::Stranger => STRANGER,
    }
}

#[async_trait]
impl Driver for Discord {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("discord:{CHANNEL}")
    }

    fn person(&self) -> String {
        format!("discord:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        if let Some(function) = text.strip_prefix("/run ") {
            let interaction = self.fake.run_command(user(who), CHANNEL, function);
            return Delivered(format!("interaction {interaction}"));
        }
        let before = self.posted();
        self.fake.message(user(who), CHANNEL, text, None);
        Delivered(format!("message {before}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let custom_id = &card.choice(label).payload;
        let message: u64 = card.at.parse().unwrap();
        let interaction = self.fake.click(user(who), CHANNEL, message, custom_id);
        Delivered(format!("interaction {interaction} {} {message} {custom_id}", user(who)))
    }

    async fn handled(&self, delivered: &Delivered) {
        let mut words = delivered.0.split_whitespace();
        let (kind, n) = (words.next().unwrap(), words.next().unwrap().parse().unwrap());
        if kind == "interaction" {
            self.fake.callback(n).await;
        } else {
            eventually(|| async { (self.posted() > n as usize).then_some(()) }).await;
        }
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let words: Vec<&str> = delivered.0.splitn(5, ' ').collect();
        let [_, interaction, user, message, custom_id] = words[..] else { panic!("not a tap: {delivered:?}") };
        let (interaction, user, message) =
            (interaction.parse().unwrap(), user.parse().unwrap(), message.parse().unwrap());
        self.fake.redeliver_click(interaction, user, CHANNEL, message, custom_id);
    }

    async fn card(&self, prompt: &str) -> Card {
        Self::card_of(&self.sent(prompt).await)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        let id = card.at.parse().unwrap();
        eventually(|| async {
            let now = Self::card_of(&self.fake.bot_message(id));
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        plain(&self.sent(needle).await["content"])
    }

    fn posts(&self, needle: &str) -> usize {
        let calls = [self.fake.calls("/messages"), self.fake.calls("/callback")].concat();
        calls
            .iter()
            .filter(|(method, _, body)| {
                let content = if method == "POST" && body.get("data").is_some() {
                    &body["data"]["content"]
                } else {
                    &body["content"]
                };
                plain(content).contains(needle)
            })
            .count()
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.askgate.served().log_line("discord connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.fake.speaks(PERSON, "zh-CN");
        true
    }
}
