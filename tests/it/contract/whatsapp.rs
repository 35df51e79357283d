//! WhatsApp: the fake Cloud API ([`crate::fake_whatsapp`]) and Meta's signed webhook
//! deliveries. A chat is one person's, so the stranger is the person, to a question asked of
//! someone else. A card is the message askgate sent with its body (the text card); its choices
//! are its reply buttons or list rows, then the commands its body lists; a tap on a button or a
//! row is its reply, on anything else the command typed. A delivery is applied before askgate
//! answers it, so a message is handled once its delivery is answered; Meta delivers again what
//! it saw unanswered, with the same message id. WhatsApp reports no language, so the person's
//! is the channel's `locale`. The person writes first at the start (WhatsApp's 24-hour window).

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who, text_choices};
use crate::fake_whatsapp::{self as fake, FakeWhatsApp, Sent};

pub const PERSON: &str = "+15551234567";

pub struct WhatsApp {
    fake: FakeWhatsApp,
    askgate: Askgate,
}

/// askgate with `[channels.whatsapp]` on the fake at `api_url`, letting `allowed` start runs,
/// with `more` keys in the section.
pub async fn start_askgate(api_url: &str, allowed: &[&str], more: &str) -> Askgate {
    let allowed: Vec<String> = allowed.iter().map(|u| format!("\"{u}\"")).collect();
    let channel = format!(
        "\n[[functions]]\nname = \"approve-demo\"\nbuiltin = \"approve-demo\"\n\n[channels.whatsapp]\n\
         token_env = \"ASKGATE_TEST_WA_TOKEN\"\napp_secret_env = \"ASKGATE_TEST_WA_SECRET\"\n\
         verify_token_env = \"ASKGATE_TEST_WA_VERIFY\"\nphone_number_id = \"{}\"\napi_url = \"{api_url}\"\n\
         allowed_users = [{}]\n{more}",
        fake::PHONE_NUMBER_ID,
        allowed.join(", ")
    );
    let env = [
        ("ASKGATE_TEST_WA_TOKEN", fake::TOKEN),
        ("ASKGATE_TEST_WA_SECRET", fake::APP_SECRET),
        ("ASKGATE_TEST_WA_VERIFY", fake::VERIFY_TOKEN),
    ];
    let askgate = Askgate::start(&channel, &env).await;
    askgate.served().log_line("whatsapp connected").await;
    askgate
}

/// A card as the driver sees it: its choices are its buttons or rows, then its body's commands.
pub fn card_of(sent: &Sent) -> Card {
    let text = sent.text();
    let mut choices: Vec<Choice> =
        sent.choices().into_iter().map(|(label, payload)| Choice { label, payload }).collect();
    choices.extend(text_choices(&text));
    Card { at: sent.id.clone(), text, choices }
}

impl WhatsApp {
    pub async fn start() -> Self {
        let (fake, url) = FakeWhatsApp::start().await;
        let askgate = start_askgate(&url, &[PERSON], "").await;
        let driver = Self { fake, askgate };
        // The person writes first: askgate may write to them for 24 hours.
        driver.say(Who::Person, "/help").await;
        driver
    }

    async fn send(&self, message: Value) -> Delivered {
        let body = self.fake.delivery(PERSON, message);
        self.fake.deliver(&self.askgate.base, &body).await;
        Delivered(body.to_string())
    }
}

#[async_trait]
impl Driver for WhatsApp {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("whatsapp:{PERSON}")
    }

    fn person(&self) -> String {
        format!("whatsapp:{PERSON}")
    }

    async fn say(&self, _who: Who, text: &str) -> Delivered {
        self.send(fake::text(text)).await
    }

    async fn tap(&self, _who: Who, card: &Card, label: &str) -> Delivered {
        let choice = card.choice(label);
        let sent = self.fake.sent().into_iter().find(|s| s.id == card.at).expect("the card was sent");
        if sent.choices().iter().any(|(_, id)| *id == choice.payload) {
            let list = sent.body["interactive"]["type"] == "list";
            self.send(fake::choice(&card.at, &choice.payload, &choice.label, list)).await
        } else {
            self.send(fake::text(&choice.payload)).await
        }
    }

    async fn handled(&self, _delivered: &Delivered) {
        // askgate answers a delivery once it has applied it (asserted when it was delivered).
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let body: Value = serde_json::from_str(&delivered.0).unwrap();
        self.fake.deliver(&self.askgate.base, &body).await;
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    fn stranger(&self) -> Who {
        Who::Person
    }

    async fn card(&self, prompt: &str) -> Card {
        card_of(&self.fake.card(prompt).await)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        self.fake.reply_to(&card.at, needle).await.text()
    }

    async fn shown(&self, needle: &str) -> String {
        self.fake.wait_for(|s| s.text().contains(needle)).await.text()
    }

    fn posts(&self, needle: &str) -> usize {
        self.fake.count(needle)
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.askgate.served().log_line("whatsapp connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.askgate.reconfigure("allowed_users", "locale = \"zh-CN\"\nallowed_users");
        self.restart().await;
        true
    }
}
