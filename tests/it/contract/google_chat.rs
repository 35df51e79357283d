//! Google Chat: the fake Chat API, token endpoint and keys; a message or a click is an event
//! posted to askgate's endpoint with a token Chat's key signs, answered in the response (so it
//! is handled once the response is back), and delivered again as Chat would resend it. A
//! person's language is the `userLocale` Chat sends with each event. A card's detail is cut to
//! 4,000 characters.

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_google_chat::{FakeGoogleChat, SPACE, buttons, person, words};
use crate::support::eventually;

const PERSON: &str = "111";
const STRANGER: &str = "222";

pub struct GoogleChat {
    fake: FakeGoogleChat,
    askgate: Askgate,
    /// The language Chat reports for the person's events.
    locale: std::sync::Mutex<&'static str>,
}

/// The config section of a Google Chat app on `fake`, letting in `allowed`.
pub fn section(fake: &FakeGoogleChat, allowed: &str) -> String {
    section_for(fake, allowed, crate::fake_google_chat::PROJECT)
}

/// The config section of a Google Chat app on `fake` whose authentication audience is
/// `audience`.
pub fn section_for(fake: &FakeGoogleChat, allowed: &str, audience: &str) -> String {
    let base = &fake.base;
    format!(
        "\n[channels.google_chat]\nservice_account_env = \"GOOGLE_CHAT_KEY\"\naudience = \"{audience}\"\n\
         jwks_url = \"{base}/jwks\"\napi_url = \"{base}\"\nallowed_users = [\"{allowed}\"]\n"
    )
}

impl GoogleChat {
    pub async fn start() -> Self {
        let fake = FakeGoogleChat::start().await;
        let key = fake.service_account();
        let askgate = Askgate::start(&section(&fake, &format!("users/{PERSON}")), &[("GOOGLE_CHAT_KEY", &key)]).await;
        Self { fake, askgate, locale: std::sync::Mutex::new("en") }
    }

    fn user(&self, who: Who) -> Value {
        match who {
            Who::Person => person(PERSON, "Alice", &self.locale.lock().unwrap()),
            Who::Stranger => person(STRANGER, "Bob", "en"),
        }
    }

    fn card_of(name: &str, message: &Value) -> Card {
        let choices = buttons(message).into_iter().map(|(label, payload)| Choice { label, payload }).collect();
        Card { at: name.to_owned(), text: words(message), choices }
    }
}

#[async_trait]
impl Driver for GoogleChat {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("google_chat:{SPACE}")
    }

    fn person(&self) -> String {
        format!("google_chat:users/{PERSON}")
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let event = self.fake.message_event(&self.user(who), SPACE, text);
        self.fake.deliver(&self.askgate.base, &event).await;
        Delivered(event.to_string())
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let event = FakeGoogleChat::click_event(&self.user(who), SPACE, &card.at, &card.choice(label).payload);
        self.fake.deliver(&self.askgate.base, &event).await;
        Delivered(event.to_string())
    }

    // Chat waits for the app's response: a delivered event has been answered.
    async fn handled(&self, _delivered: &Delivered) {}

    async fn redeliver(&mut self, delivered: &Delivered) {
        let event: Value = serde_json::from_str(&delivered.0).unwrap();
        self.fake.deliver(&self.askgate.base, &event).await;
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn card(&self, prompt: &str) -> Card {
        let message = self.fake.sent(prompt).await;
        Self::card_of(message["name"].as_str().unwrap(), &message)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let now = Self::card_of(&card.at, &self.fake.message(&card.at));
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        words(&self.fake.sent(needle).await)
    }

    fn posts(&self, needle: &str) -> usize {
        let calls = [self.fake.calls("create"), self.fake.calls("patch")].concat();
        calls.iter().filter(|c| words(c).contains(needle)).count()
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
    }

    async fn speak_chinese(&mut self) -> bool {
        *self.locale.lock().unwrap() = "zh-CN";
        true
    }
}
