//! Matrix: a real Synapse on loopback ([`crate::synapse`]); the person and the stranger are
//! accounts of their own in a room the person made and invited the bot to. A card is the text
//! card; a tap is the reaction askgate seeded for the choice (1️⃣…🔟, 👍/👎, ✅/♾️/❌), and it is
//! handled when askgate has said something after it (the card's edit, or a notice); a second
//! tap on the same choice takes the reaction back and adds it again (Matrix keeps one reaction
//! per person and emoji). Matrix
//! keeps no delivery state for a client, so a redelivery is what a crash before askgate kept
//! its sync position gives: askgate stopped, its position set back to before the event, and
//! started again. Matrix reports no language, so the person's is the channel's `locale`.

use async_trait::async_trait;
use serde_json::Value;

use super::driver::{Askgate, Card, Delivered, Driver, Who, text_choices};
use crate::synapse::{Account, Synapse, body};

pub struct Matrix {
    askgate: Askgate,
    bot: Account,
    person: Account,
    stranger: Account,
    room: String,
}

/// The account data type askgate keeps its sync position in.
const POSITION: &str = "org.askgate.sync";

impl Matrix {
    pub async fn start() -> Self {
        let synapse = Synapse::shared();
        let bot = synapse.register("askgate").await;
        let person = synapse.register("alice").await;
        let stranger = synapse.register("bob").await;
        let askgate = start_askgate(&synapse.url, &bot, &[&person.user_id], "").await;
        let room = person.create_room(&[&bot.user_id, &stranger.user_id], false).await;
        stranger.join(&room).await;
        joined(&person, &room, &bot.user_id).await;
        Self { askgate, bot, person, stranger, room }
    }

    fn account(&self, who: Who) -> &Account {
        match who {
            Who::Person => &self.person,
            Who::Stranger => &self.stranger,
        }
    }

    fn card_of(event: &Value) -> Card {
        let text = body(event).to_owned();
        Card { at: event["event_id"].as_str().unwrap().to_owned(), choices: text_choices(&text), text }
    }
}

/// askgate with `[channels.matrix]` on `homeserver` as `bot`, letting `allowed` start runs,
/// with `more` keys in the section; started and synced.
pub async fn start_askgate(homeserver: &str, bot: &Account, allowed: &[&str], more: &str) -> Askgate {
    let allowed: Vec<String> = allowed.iter().map(|u| format!("\"{u}\"")).collect();
    let channel = format!(
        "\n[channels.matrix]\ntoken_env = \"ASKGATE_TEST_MX_TOKEN\"\nhomeserver = \"{homeserver}\"\nuser_id = \"{}\"\n\
         allowed_users = [{}]\n{more}",
        bot.user_id,
        allowed.join(", ")
    );
    let askgate = Askgate::start(&channel, &[("ASKGATE_TEST_MX_TOKEN", &bot.token)]).await;
    askgate.served().log_line("matrix connected").await;
    askgate
}

/// Waits until `user` has joined `room`.
pub async fn joined(by: &Account, room: &str, user: &str) {
    crate::support::eventually(|| async { by.joined(room, user).await.then_some(()) }).await;
}

/// The reaction a card's choice is: the one askgate seeded for the command a person would type.
pub fn reaction_for(payload: &str) -> &'static str {
    const NUMBERS: [&str; 10] = ["1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟"];
    let words: Vec<&str> = payload.split_whitespace().collect();
    match (words[0], words.get(2).copied()) {
        ("/approve", None) => "✅",
        ("/approve", Some("always")) => "♾️",
        ("/deny" | "/decline", _) => "❌",
        ("/answer", Some("yes")) => "👍",
        ("/answer", Some("no")) => "👎",
        ("/answer", Some(n)) => NUMBERS[n.trim_start_matches('#').parse::<usize>().unwrap() - 1],
        _ => panic!("no reaction stands for {payload}"),
    }
}

/// Whether `event` is a message of `bot`'s (a card, its edit, a notice).
pub fn said_by(event: &Value, bot: &str) -> bool {
    event["type"] == "m.room.message" && event["sender"] == bot
}

#[async_trait]
impl Driver for Matrix {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        format!("matrix:{}", self.room)
    }

    fn person(&self) -> String {
        format!("matrix:{}", self.person.user_id)
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let since = self.bot.account_data(POSITION).await;
        let id = self.account(who).send_text(&self.room, text).await;
        Delivered(format!("{id} {since}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let since = self.bot.account_data(POSITION).await;
        let key = reaction_for(&card.choice(label).payload);
        let account = self.account(who);
        // A reaction stands once per person: tapping it again takes it back, and again adds it.
        if let Some(earlier) = account.own_reaction(&self.room, &card.at, key).await {
            account.redact(&self.room, &earlier).await;
        }
        let id = account.react(&self.room, &card.at, key).await;
        Delivered(format!("{id} {since}"))
    }

    async fn handled(&self, delivered: &Delivered) {
        let (id, _) = delivered.0.split_once(' ').unwrap();
        let mut after = false;
        self.person
            .wait_for(&self.room, "answer from askgate", |e| {
                after |= e["event_id"] == id;
                after && said_by(e, &self.bot.user_id)
            })
            .await;
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let (_, since) = delivered.0.split_once(' ').unwrap();
        let since: Value = serde_json::from_str(since).unwrap();
        let askgate = &mut self.askgate;
        askgate.stop().await;
        self.bot.set_account_data(POSITION, since).await;
        askgate.start_again().await;
        askgate.served().log_line("matrix connected").await;
    }

    fn redelivers_messages(&self) -> bool {
        true
    }

    async fn card(&self, prompt: &str) -> Card {
        let card = self
            .person
            .wait_for(&self.room, "card", |e| {
                said_by(e, &self.bot.user_id)
                    && e["content"]["m.relates_to"]["rel_type"] != "m.replace"
                    && body(e).contains(prompt)
            })
            .await;
        Self::card_of(&card)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        crate::support::eventually(|| async {
            let text = self.person.latest_body(&self.room, &card.at).await;
            let reactions = self.person.reactions_on(&self.room, &card.at).await;
            let seeded = reactions.iter().any(|(who, _)| *who == self.bot.user_id);
            (text.contains(needle) && text_choices(&text).is_empty() && !seeded).then_some(text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        let event = self
            .person
            .wait_for(&self.room, needle, |e| said_by(e, &self.bot.user_id) && body(e).contains(needle))
            .await;
        body(&event).to_owned()
    }

    fn posts(&self, needle: &str) -> usize {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                let events = self.person.timeline(&self.room).await;
                events.iter().filter(|e| said_by(e, &self.bot.user_id) && body(e).contains(needle)).count()
            })
        })
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
        self.askgate.served().log_line("matrix connected").await;
    }

    async fn speak_chinese(&mut self) -> bool {
        self.askgate.reconfigure("allowed_users", "locale = \"zh-CN\"\nallowed_users");
        self.restart().await;
        true
    }

    fn cuts(&self) -> bool {
        false
    }
}
