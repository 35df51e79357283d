//! The console: cards printed on stdout, each choice a command to type. The terminal has one
//! person at it, so a stranger is played by the person at a question asked of someone else,
//! and a "redelivered" line is the same line typed again (a terminal delivers each line once).
//! A terminal cannot edit what it printed: the outcome is a line naming the card's id. Its
//! language is `[channels.console] locale`, as it reports none.

use async_trait::async_trait;

use super::driver::{Askgate, Card, Delivered, Driver, Who, text_choices};
use crate::support::eventually;

pub struct Console {
    askgate: Askgate,
}

impl Console {
    pub async fn start() -> Self {
        Self { askgate: Askgate::start("", &[]).await }
    }

    fn lines(&self) -> Vec<String> {
        self.askgate.served().stdout().lines().map(str::to_owned).collect()
    }

    /// The card that starts at line `at`: its first line and the indented ones under it; none
    /// while its id line is not written yet (a card is printed a line at a time).
    fn card_at(lines: &[String], at: usize) -> Option<Card> {
        let under = lines[at + 1..].iter().take_while(|l| l.starts_with(' '));
        let text: Vec<&str> = std::iter::once(&lines[at]).chain(under).map(String::as_str).collect();
        let id = text.iter().find_map(|l| l.trim_start().strip_prefix("id "))?;
        let at = id.split_whitespace().next()?.to_owned();
        let text = text.join("\n");
        Some(Card { at, choices: text_choices(&text), text })
    }
}

fn is_card(line: &str) -> bool {
    ["❓", "❔", "🔐", "📝"].iter().any(|m| line.starts_with(m))
}

#[async_trait]
impl Driver for Console {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        "console:local".to_owned()
    }

    fn person(&self) -> String {
        "console:local".to_owned()
    }

    fn stranger(&self) -> Who {
        Who::Person
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        assert_eq!(who, Who::Person, "the console has one person");
        let before = self.lines().len();
        self.askgate.type_line(text).await;
        Delivered(format!("{before} {text}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let payload = card.choice(label).payload.clone();
        self.say(who, &payload).await
    }

    async fn handled(&self, delivered: &Delivered) {
        let before: usize = delivered.0.split(' ').next().unwrap().parse().unwrap();
        eventually(|| async { (self.lines().len() > before).then_some(()) }).await;
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let (_, typed) = delivered.0.split_once(' ').unwrap();
        self.askgate.type_line(typed).await;
    }

    async fn card(&self, prompt: &str) -> Card {
        eventually(|| async {
            let lines = self.lines();
            let at = lines.iter().position(|l| is_card(l) && l.contains(prompt))?;
            // Wait for the whole card: every card's last line is how to decline it.
            let card = Self::card_at(&lines, at)?;
            card.text.contains("/decline ").then_some(card)
        })
        .await
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        let mark = format!("[{}]", card.at);
        eventually(|| async { self.lines().into_iter().find(|l| l.contains(&mark) && l.contains(needle)) }).await
    }

    async fn shown(&self, needle: &str) -> String {
        self.askgate.served().stdout_line(needle).await
    }

    fn posts(&self, needle: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(needle)).count()
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
    }

    async fn speak_chinese(&mut self) -> bool {
        let console = "[channels.console]\nenabled = true\n";
        self.askgate.reconfigure(console, &format!("{console}locale = \"zh-CN\"\n"));
        self.askgate.restart().await;
        true
    }

    fn cuts(&self) -> bool {
        false
    }
}
