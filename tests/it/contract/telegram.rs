//! Telegram: the fake Bot API; a tap is a callback query, answered by `answerCallbackQuery`.

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_telegram::FakeTelegram;
use crate::support::eventually;

const PERSON: i64 = 42;
const STRANGER: i64 = 43;
/// The person's private chat with the bot, where the stranger's updates come from too.
const CHAT: i64 = PERSON;

pub struct Telegram {
    fake: FakeTelegram,
    askgate: Askgate,
}

impl Telegram {
    pub async fn start() -> Self {
        let (fake, url) = FakeTelegram::start().await;
        let channel = format!(
            "\n[channels.telegram]\ntoken_env = \"ASKGATE_TEST_TG_TOKEN\"\napi_url = \"{url}\"\nallowed_users = [\"{PERSON}\"]\n"
        );
        let askgate = Askgate::start(&channel, &[("ASKGATE_TEST_TG_TOKEN", "123:fake")]).await;
        askgate.served().log_line("telegram connected").await;
        Self { fake, askgate }
    }

    fn card_of(message: &Value) -> Card {
        let choices = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
            .map(|b| Choice {
                label: b["text"].as_str().unwrap().to_owned(),
                payload: b["callback_data"].as_str().unwrap().to_owned(),
            })
            .collect();
        Card {
            at: message["message_id"].to_string(),
            text: message["text"].as_str().unwrap_or_default().to_owned(),
            choices,
        }
    }

    fn sends(&self) -> usize {
        self.fake.calls("sendmessage").len()
    }
}

fn user(who: Who) -> i64 {
    match who {
        Who::Person => PERSON,
        Who::Stranger => STRANGER,
    }
}

#[async_trait]
impl Driver for Telegram {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("telegram:{CHAT}")
    }

    fn person(&self) -> String {
        format!("telegram:{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let before = self.sends();
        let update = self.fake.text(user(who), CHAT, text, None);
        Delivered(format!("text {update} {before}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let data = &card.choice(label).payload;
        let update = self.fake.press(user(who), CHAT, card.at.parse().unwrap(), data);
        Delivered(format!("tap {update}"))
    }

    async fn handled(&self, delivered: &Delivered) {
        let mut words = delivered.0.split_whitespace();
        let (kind, update) = (words.next().unwrap(), words.next().unwrap().parse().unwrap());
        if kind == "tap" {
            self.fake.callback_answer(update).await;
        } else {
            // A message is answered with a message of askgate's own.
            let before: usize = words.next().unwrap().parse().unwrap();
            eventually(|| async { (self.sends() > before).then_some(()) }).await;
        }
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let update = delivered.0.split_whitespace().nth(1).unwrap().parse().unwrap();
        self.fake.redeliver(update);
    }

    async fn card(&self, prompt: &str) -> Card {
        Self::card_of(&self.fake.sent(prompt, 1).await)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        let id = card.at.parse().unwrap();
        eventually(|| async {
            let now = Self::card_of(&self.fake.message(CHAT, id));
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        self.fake.sent(needle, 1).await["text"].as_str().unwrap().to_owned()
    }

    fn posts(&self, needle: &str) -> usize {
        let calls = [self.fake.calls("sendmessage"), self.fake.calls("editmessagetext")].concat();
        calls.iter().filter(|c| c.body["text"].as_str().is_some_and(|t| t.contains(needle))).count()
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.askgate.served().log_line("telegram connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.fake.speaks(PERSON, "zh-hans");
        true
    }
}
