//! The page: a person signed in with a token of their own reads the questions they may answer
//! (`GET /api/questions`, drawn as cards by the page) and their own conversation
//! (`GET /api/messages`), and taps as the page's buttons do: `POST /api/questions/<id>/reply`
//! (or `/reject`). Its buttons call the API rather than carry a command; the page draws every
//! text whole; its words are English only (the page has no translations); nothing is
//! redelivered by a platform, so the same request sent again is the equivalent.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::driver::{Askgate, Card, Choice, Delivered, Driver, Who};
use crate::support::{eventually, get_json, post};

pub struct Page {
    askgate: Askgate,
    alice: String,
    bob: String,
}

impl Page {
    pub async fn start() -> Self {
        let askgate = Askgate::start("", &[]).await;
        let (alice, bob) = (askgate.person_token("alice").await, askgate.person_token("bob").await);
        Self { askgate, alice, bob }
    }

    fn token(&self, who: Who) -> &str {
        if who == Who::Person { &self.alice } else { &self.bob }
    }

    /// The question `prompt` as the person's board lists it.
    async fn listed(&self, prompt: &str) -> Option<Value> {
        let list = get_json(&format!("{}/api/questions?status=all&limit=100", self.askgate.base), &self.alice).await;
        list["questions"].as_array()?.iter().find(|q| q["prompt"].as_str().is_some_and(|p| p.contains(prompt))).cloned()
    }

    /// The lines of the person's own conversation.
    async fn lines(&self) -> Vec<String> {
        let said = get_json(&format!("{}/api/messages", self.askgate.base), &self.alice).await;
        said["lines"].as_array().into_iter().flatten().filter_map(|l| l["text"].as_str().map(str::to_owned)).collect()
    }

    async fn post(&self, who: Who, path: &str, body: &Value) -> (reqwest::StatusCode, Value) {
        post(&self.askgate.base, self.token(who), path, body).await
    }
}

/// The card the page draws for `q` (see `render` in the page's script).
fn card_of(q: &Value) -> Card {
    let id = q["id"].as_str().unwrap().to_owned();
    let reply = |value: Value| format!("/api/questions/{id}/reply {}", json!({ "value": value }));
    let mut choices = Vec::new();
    if q["status"] == "pending" {
        match q["kind"].as_str() {
            Some("confirm") => {
                choices.push(Choice { label: "Yes".into(), payload: reply(json!(true)) });
                choices.push(Choice { label: "No".into(), payload: reply(json!(false)) });
            }
            Some("question") if q["form"].is_null() => {
                for (i, o) in q["options"].as_array().into_iter().flatten().enumerate() {
                    choices.push(Choice { label: o.as_str().unwrap().to_owned(), payload: reply(json!(i + 1)) });
                }
            }
            _ => {}
        }
        if q["kind"] != "confirm" {
            let path = format!("/api/questions/{id}/reject {}", json!({ "feedback": null }));
            choices.push(Choice { label: "Decline".into(), payload: path });
        }
    }
    let mut text = vec![q["prompt"].as_str().unwrap_or_default().to_owned()];
    text.extend(q["detail"].as_str().map(str::to_owned));
    if let Some(fields) = q["form"]["fields"].as_array() {
        for field in fields {
            let words = ["key", "title", "description"].map(|k| field[k].as_str().unwrap_or_default());
            text.push(words.join(" ").trim().to_owned());
        }
    }
    if q["status"] != "pending" {
        text.push(format!("{} {}", q["status"], q["outcome"]));
    }
    Card { at: id, text: text.join("\n"), choices }
}

#[async_trait]
impl Driver for Page {
    fn askgate(&self) -> &Askgate {
        &self.askgate
    }

    fn conversation(&self) -> String {
        "web:alice".to_owned()
    }

    fn person(&self) -> String {
        "web:alice".to_owned()
    }

    fn commands(&self) -> bool {
        false
    }

    async fn say(&self, who: Who, text: &str) -> Delivered {
        let (status, said) = self.post(who, "/api/messages", &json!({ "text": text })).await;
        Delivered(format!("{status} {said}"))
    }

    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered {
        let payload = card.choice(label).payload.clone();
        let (path, body) = payload.split_once(' ').unwrap();
        self.post(who, path, &serde_json::from_str(body).unwrap()).await;
        Delivered(format!("{} {payload}", who == Who::Person))
    }

    async fn handled(&self, _delivered: &Delivered) {
        // Each request is answered once askgate has handled it.
    }

    async fn redeliver(&mut self, delivered: &Delivered) {
        let (person, payload) = delivered.0.split_once(' ').unwrap();
        let (path, body) = payload.split_once(' ').unwrap();
        let who = if person == "true" { Who::Person } else { Who::Stranger };
        self.post(who, path, &serde_json::from_str(body).unwrap()).await;
    }

    async fn card(&self, prompt: &str) -> Card {
        card_of(&eventually(|| self.listed(prompt)).await)
    }

    async fn settled(&self, card: &Card, needle: &str) -> String {
        eventually(|| async {
            let q = get_json(&format!("{}/api/questions/{}", self.askgate.base, card.at), &self.alice).await;
            let now = card_of(&q);
            (now.text.contains(needle) && now.choices.is_empty()).then_some(now.text)
        })
        .await
    }

    async fn shown(&self, needle: &str) -> String {
        eventually(|| async {
            let lines = self.lines().await;
            match lines.into_iter().find(|l| l.contains(needle)) {
                Some(line) => Some(line),
                None => self.listed(needle).await.map(|q| card_of(&q).text),
            }
        })
        .await
    }

    fn posts(&self, needle: &str) -> usize {
        let lines = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(self.lines()));
        lines.iter().filter(|l| l.contains(needle)).count()
    }

    async fn restart(&mut self) {
        self.askgate.restart().await;
    }

    async fn speak_chinese(&mut self) -> bool {
        false
    }

    fn cuts(&self) -> bool {
        false
    }
}
