//! What the contract suite asks of a channel: a [`Driver`] for its loopback platform, and the
//! askgate it drives, the real binary with that channel configured.

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};

/// Who acts: the person the question is for, or someone else in the same place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Person,
    Stranger,
}

/// One choice a card offers: what the person sees, and what a tap sends.
#[derive(Clone, Debug)]
pub struct Choice {
    pub label: String,
    pub payload: String,
}

/// A card as the platform shows it: where it is, its text, and its choices while it waits.
#[derive(Clone, Debug)]
pub struct Card {
    /// The platform's id of the message (a text channel's short question id).
    pub at: String,
    pub text: String,
    pub choices: Vec<Choice>,
}

impl Card {
    /// The choice whose label contains `label`, in any case (`Yes` finds a text card's `yes`).
    pub fn choice(&self, label: &str) -> &Choice {
        let label = label.to_lowercase();
        let found = self.choices.iter().find(|c| c.label.to_lowercase().contains(&label));
        found.unwrap_or_else(|| panic!("no choice {label} on {self:?}"))
    }

    pub fn labels(&self) -> Vec<&str> {
        self.choices.iter().map(|c| c.label.as_str()).collect()
    }
}

/// Something the platform delivered to askgate (a message, a tap), to wait for askgate's
/// answer to it or to deliver it again.
#[derive(Clone, Debug)]
pub struct Delivered(pub String);

/// A channel's loopback platform, driven as its people would.
#[async_trait]
pub trait Driver: Send + Sync {
    /// The askgate this driver started.
    fn askgate(&self) -> &Askgate;

    /// The conversation where the person talks to askgate (`telegram:42`).
    fn conversation(&self) -> String;

    /// The person questions are asked of (`telegram:42`).
    fn person(&self) -> String;

    /// `who` sends `text` in the conversation.
    async fn say(&self, who: Who, text: &str) -> Delivered;

    /// `who` taps the choice of `card` whose label contains `label`.
    async fn tap(&self, who: Who, card: &Card, label: &str) -> Delivered;

    /// Waits until askgate has answered `delivered` (a tap acknowledged, a reply shown).
    async fn handled(&self, delivered: &Delivered);

    /// The platform delivers `delivered` once more.
    async fn redeliver(&mut self, delivered: &Delivered);

    /// Whether this driver can deliver a typed message once more as the platform would (the
    /// same update). The console and the page have no redelivery: a second line or request is
    /// a new message; Discord's and Slack's fakes redeliver taps only, so far.
    fn redelivers_messages(&self) -> bool {
        false
    }

    /// Waits for the first card whose text contains `prompt`.
    async fn card(&self, prompt: &str) -> Card;

    /// Waits until `card` (or, where messages cannot change, a line about it) shows `needle`
    /// and offers nothing more; returns that text.
    async fn settled(&self, card: &Card, needle: &str) -> String;

    /// Waits for a message that contains `needle`; returns its text.
    async fn shown(&self, needle: &str) -> String;

    /// How many messages containing `needle` were posted or edited so far.
    fn posts(&self, needle: &str) -> usize;

    /// Stops askgate (SIGTERM) and starts it again on the same database and platform.
    async fn restart(&mut self);

    /// From now on the person speaks Chinese, as far as askgate can learn it here; false where
    /// askgate's words here are English only.
    async fn speak_chinese(&mut self) -> bool;

    /// Whether a card's choices carry the commands a person could type (`/answer <id> 2`).
    fn commands(&self) -> bool {
        true
    }

    /// Who can act as a stranger here: [`Who::Stranger`], or [`Who::Person`] where the channel
    /// has one person only (who is then a stranger to a question asked of someone else).
    fn stranger(&self) -> Who {
        Who::Stranger
    }

    /// Whether this platform's cards are cut to a size (a terminal shows anything whole).
    fn cuts(&self) -> bool {
        true
    }
}

/// The real binary on a config of its own, with one channel configured besides the console.
pub struct Askgate {
    served: Option<Served>,
    /// The console's input, taken from the running askgate: typing needs no `&mut`.
    input: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    pub dir: TempDir,
    pub config: PathBuf,
    env: Vec<(String, String)>,
    pub base: String,
    pub token: String,
}

impl Askgate {
    /// Starts askgate with `channel` (TOML) configured and `env` set.
    pub async fn start(channel: &str, env: &[(&str, &str)]) -> Self {
        let dir = TempDir::new().unwrap();
        let config = write_config(dir.path(), channel);
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let mut served = serve(&config, &env);
        let (base, token) = served.api(dir.path()).await;
        served.log_line("askgate is ready").await;
        let input = tokio::sync::Mutex::new(served.take_input());
        Self { served: Some(served), input, dir, config, env, base, token }
    }

    pub fn served(&self) -> &Served {
        self.served.as_ref().expect("askgate runs")
    }

    /// Types `line` at askgate's console.
    pub async fn type_line(&self, line: &str) {
        use tokio::io::AsyncWriteExt;
        let mut input = self.input.lock().await;
        let input = input.as_mut().expect("the console's input is open");
        input.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        input.flush().await.unwrap();
    }

    /// SIGTERM, then the same config again.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.start_again().await;
    }

    /// SIGTERM: askgate stops cleanly.
    pub async fn stop(&mut self) {
        let old = self.served.take().expect("askgate runs");
        assert_eq!(old.terminate().await.code(), Some(0));
    }

    /// Starts askgate again after [`Askgate::stop`], on the same config.
    pub async fn start_again(&mut self) {
        let mut served = serve(&self.config, &self.env);
        (self.base, _) = served.api(self.dir.path()).await;
        served.log_line("askgate is ready").await;
        *self.input.get_mut() = served.take_input();
        self.served = Some(served);
    }

    /// Replaces `from` by `to` in the config, for the next start.
    pub fn reconfigure(&self, from: &str, to: &str) {
        let config = std::fs::read_to_string(&self.config).unwrap();
        assert!(config.contains(from), "{from} in {config}");
        std::fs::write(&self.config, config.replacen(from, to, 1)).unwrap();
    }

    /// Asks `body` (the API's `POST /api/questions`) in `conversation` of `person` (and of the
    /// operator, who answers elsewhere); the question's id.
    pub async fn ask(&self, conversation: &str, person: &str, body: Value) -> String {
        self.ask_of(conversation, &[person, "api:operator"], body).await
    }

    /// Asks `body` in `conversation` of `answerers` only; the question's id.
    pub async fn ask_of(&self, conversation: &str, answerers: &[&str], mut body: Value) -> String {
        body["conversation"] = json!(conversation);
        body["answerers"] = json!(answerers);
        let (status, asked) = crate::support::post(&self.base, &self.token, "/api/questions", &body).await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
        asked["id"].as_str().unwrap().to_owned()
    }

    /// The question `id` as the API shows it.
    /// How many questions, in any state, have `prompt` as their prompt.
    pub async fn asked(&self, prompt: &str) -> usize {
        let listed = crate::support::get_json(&format!("{}/api/questions?status=all", self.base), &self.token).await;
        listed["questions"].as_array().unwrap().iter().filter(|q| q["prompt"] == prompt).count()
    }

    pub async fn question(&self, id: &str) -> Value {
        crate::support::get_json(&format!("{}/api/questions/{id}", self.base), &self.token).await
    }

    /// Waits until the question `id` is no longer pending; returns it.
    pub async fn resolved(&self, id: &str) -> Value {
        crate::support::eventually(|| async { Some(self.question(id).await).filter(|q| q["status"] != "pending") })
            .await
    }

    /// Answers `id` through the API, as the operator: an answer given elsewhere.
    pub async fn answer(&self, id: &str, value: Value) {
        self.answer_with(&self.token, id, value).await;
    }

    /// Answers `id` through the API with `token`.
    pub async fn answer_with(&self, token: &str, id: &str, value: Value) {
        let path = format!("/api/questions/{id}/reply");
        let (status, answered) = crate::support::post(&self.base, token, &path, json!({ "value": value })).await;
        assert!(status.is_success(), "{status:?} {answered}");
    }
}

impl Askgate {
    /// A personal token for `web:<name>`, made with `askgate token add`, that may answer and ask.
    pub async fn person_token(&self, name: &str) -> String {
        let out = tokio::process::Command::new(crate::binary::BIN)
            .args(["token", "add", name, "--may", "answer,ask", "--config"])
            .arg(&self.config)
            .args(["--url", &self.base])
            .env_remove("ASKGATE_API_TOKEN")
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().next().unwrap().trim().to_owned()
    }
}

fn serve(config: &std::path::Path, env: &[(String, String)]) -> Served {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Served::start_with_env(config, &env)
}

/// The short id a card shows and typed commands take.
pub fn short(id: &str) -> &str {
    &id[..8]
}

/// A text card's choices: each line that ends in a command (`2. date-fns   /answer 0b6f12ab 2`).
/// (`拒绝回答：/decline 0b6f12ab [理由]` has its command after a full-width colon.)
pub fn text_choices(text: &str) -> Vec<Choice> {
    text.lines()
        .filter_map(|line| {
            let at = line.find(" /").map(|at| at + 1).or_else(|| line.find("：/").map(|at| at + "：".len()))?;
            let (label, payload) = line.split_at(at);
            Some(Choice { label: label.trim().to_owned(), payload: payload.trim().to_owned() })
        })
        .collect()
}
