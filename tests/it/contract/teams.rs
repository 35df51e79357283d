//! Microsoft Teams: the fake Bot Framework; a message and a tap are activities POSTed to
//! askgate's messaging endpoint with a token signed by the test's key, and the same activity
//! can be delivered again. The person and a stranger talk to the bot in one group chat; a tap is
//! a message activity whose `value` is the `Action.Submit`'s data. Teams' language is the
//! activity's `locale`. A card's text blocks hold askgate's longest question whole.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::fake_teams::{APP_ID, APP_PASSWORD, FakeTeams, Signed, actions, words};
use crate::support::eventually;

pub const PERSON: &str = "6f2d2a8e-5b1f-4c1e-9a55-0000000a11ce";
pub const STRANGER: &str = "6f2d2a8e-5b1f-4c1e-9a55-000000000b0b";
const CHAT: &str = "19:contract-chat@thread.v2";

pub struct Teams {
    fake: FakeTeams,
    askgate: Askgate,
    locale: &'static str,
}

/// The `[channels.teams]` section for `fake`, letting in `allowed`.
pub fn section(fake: &FakeTeams, allowed: &str) -> String {
    format!(
        "\n[channels.teams]\napp_id_env = \"TEAMS_APP_ID\"\napp_password_env = \"TEAMS_APP_PASSWORD\"\n{}allowed_users = [\"{allowed}\"]\n",
        fake.section()
    )
}

/// The variables the section names.
pub const ENV: [(&str, &str); 2] = [("TEAMS_APP_ID", APP_ID), ("TEAMS_APP_PASSWORD", APP_PASSWORD)];

impl Teams {
    pub async fn start() -> Self {
        let fake = FakeTeams::start().await;
        let askgate = Askgate::start(&section(&fake, PERSON), &ENV).await;
        askgate.served().log_line("teams connected").await;
        let teams = Self { fake, askgate, locale: "en-US" };
        // Teams lets a bot write where someone talked to it: the person says hello first.
        let hello = teams.say(Who::Person, "/pending").await;
        teams.handled(&hello).await;
        teams
    }

    fn card_of(&self, id: &str) -> Card {
        let message = self.fake.message(id);
        let choices = actions(&message).into_iter().map(|(label, payload)| Choice { label, payload }).collect();
        Card { at: id.to_owned(), text: words(&message), choices }
    }

    /// Delivers `activity` signed; a handle holding the number of calls askgate had made.
    async fn deliver(&self, mut activity: Value) -> Delivered {
        activity["locale"] = json!(self.locale);
        let before = self.fake.calls().len();
        let status = self.fake.deliver(&self.askgate.base, &activity, Signed::Properly).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{activity}");
        Delivered(format!("{before} {activity}"))
    }
}

fn user(who: Who) -> (&'static str, &'static str) {
    match who {
        Who::Person => (PERSON, "Alice"),
        Who::Stranger => (STRANGER, "Bob"),
    }
}

#[async_trait]
impl Driver for Teams {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("teams:{CHAT}")
    }

    fn person(&self) -> String {
        format!("teams:{PERSON}")
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let (id, name) = user(who);
        self.deliver(self.fake.message_activity(CHAT, false, id, name, text)).await
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let (id, name) = user(who);
        let data = json!({"askgate": card.choice(label).payload});
        self.deliver(self.fake.tap_activity(CHAT, false, id, name, &data)).await
    }

    async fn handled(&self, delivered: &Delivered) {
        let before: usize = delivered.0.split_once(' ').unwrap().0.parse().unwrap();
        eventually(|| async { (self.fake.calls().len() > before).then_some(()) }).await;
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let activity: Value = serde_json::from_str(delivered.0.split_once(' ').unwrap().1).unwrap();
        let status = self.fake.deliver(&self.askgate.base, &activity, Signed::Properly).await;
        assert_eq!(status, reqwest::StatusCode::OK);
    }

    async fn card(&self, prompt: &str) -> Card {
        let (id, _, _) = self.fake.sent(prompt).await;
        self.card_of(&id)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let now = self.card_of(&card.at);
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        eventually(|| async { self.fake.calls().into_iter().map(|c| words(&c.body)).find(|w| w.contains(needle)) })
            .await
    }

    fn posts(&self, needle: &str) -> usize {
        self.fake.calls().iter().filter(|c| words(&c.body).contains(needle)).count()
    }

    fn cuts(&self) -> bool {
        false
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.askgate.served().log_line("teams connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.locale = "zh-CN";
        true
    }
}
