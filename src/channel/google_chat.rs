//! Google Chat, as a Chat app on an HTTP endpoint: Chat posts interaction events to
//! `POST /channels/google-chat` with a bearer token askgate verifies ([`door`]); cards (cards
//! v2) whose buttons carry the text commands in their action's `command` parameter; a click
//! is a tap, answered in the same response (the card updated in place when it resolved its
//! question, else a private note only the clicker sees); messages go out through the Chat
//! API as the app, with its service account's token ([`token`]).
//!
//! Conversations are `google_chat:<space>` (`google_chat:spaces/AAA`), users
//! `google_chat:<user>` (`google_chat:users/123`), or `google_chat:<email>` when
//! `allowed_users` lets the person in by their address rather than their id (see
//! [`GoogleChat::person`]). A message's name is its update key, so a redelivered message
//! applies once; a click's is the card's message, the clicker and the command.

mod client;
mod component;
pub mod config;
mod door;
pub mod events;
mod outbound;
pub mod render;
mod token;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::retry::{Backoff, pause};
use crate::engine::{ChannelState, Engine};
use crate::question::{Conversation, UserRef};
use client::{ApiError, Client};
use events::Person;

pub use component::Platform;

/// Where answers given on Google Chat come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("google_chat");

/// The command words accepted without their slash: Chat keeps a leading `/` for the slash
/// commands an app declares, and a message reaches the app only when it is to it (a direct
/// message, or a mention).
const WORDS: [&str; 11] =
    ["answer", "approve", "deny", "decline", "run", "pending", "show", "cancel", "grants", "revoke", "help"];

/// How often the token endpoint and Google's keys are checked for `/healthz` while all is
/// well.
const CHECK_EVERY: Duration = Duration::from_secs(300);

/// The Google Chat channel: the Chat API as the app.
pub struct GoogleChat {
    client: Client,
    clock: Clock,
    /// Set once the channel serves: its state goes to `/healthz` as calls succeed or fail.
    engine: std::sync::OnceLock<Engine>,
}

impl GoogleChat {
    /// The channel for `config`, acting as `account`; nothing is sent until it is used.
    ///
    /// # Errors
    /// When the API's URL is unusable or the HTTP client cannot be built.
    pub fn new(
        config: &config::GoogleChatConfig,
        account: config::ServiceAccount,
        http: reqwest::Client,
        clock: Clock,
    ) -> Result<Arc<Self>, String> {
        let tokens = token::Tokens::new(account, http.clone(), clock.clone());
        let client = Client::new(&config.api_url, http, tokens)?;
        Ok(Arc::new(Self { client, clock, engine: std::sync::OnceLock::new() }))
    }

    /// Checks the service account's key at the token endpoint until `stop` fires, showing on
    /// `/healthz` whether it is taken: at once, then every few minutes, and sooner again while
    /// it is not.
    pub async fn serve(self: Arc<Self>, engine: Engine, keys: Arc<crate::channel::jwt::Keys>, stop: CancellationToken) {
        let _ = self.engine.set(engine.clone());
        let mut failures = 0;
        loop {
            let wait = match self.client.tokens().token().await {
                Ok(_) if !keys.healthy() => {
                    failures = 0;
                    self.state(ChannelState::Degraded("Google's keys for Chat's requests cannot be fetched".into()));
                    CHECK_EVERY
                }
                Ok(_) => {
                    failures = 0;
                    self.state(ChannelState::Up);
                    CHECK_EVERY
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "google chat: no token for the Chat API");
                    self.state(ChannelState::Down(e.to_string()));
                    Backoff::QUICK.pause(failures, None)
                }
            };
            if pause(wait, &stop).await.is_err() {
                return;
            }
        }
    }

    fn state(&self, state: ChannelState) {
        if let Some(engine) = self.engine.get() {
            engine.delivery().set_channel_state("google_chat", state);
        }
    }

    /// Shows what a call to the API says about its health: a refusal of the app or no answer
    /// is down; a success is up.
    fn heard<T>(&self, result: &Result<T, ApiError>) {
        match result {
            Ok(_) => self.state(ChannelState::Up),
            Err(e) if e.is_down() => self.state(ChannelState::Down(e.to_string())),
            Err(_) => {}
        }
    }

    /// Who `person` is to askgate in `conversation`: `google_chat:users/<id>`; or, when the
    /// channel's `allowed_users` lets them in by their address and not by their id,
    /// `google_chat:<email>` (Chat sends the address of people in the app's own Workspace).
    fn person(&self, engine: &Engine, person: &Person, conversation: &Conversation) -> Option<UserRef> {
        let by_id = user_ref(&person.name)?;
        let policies = engine.policies();
        if policies.lets_in(conversation, &by_id) {
            return Some(by_id);
        }
        let by_email = person.email.as_deref().and_then(user_ref);
        match by_email {
            Some(by_email) if policies.lets_in(conversation, &by_email) => Some(by_email),
            _ => Some(by_id),
        }
    }
}

/// `google_chat:<id>`.
fn user_ref(id: &str) -> Option<UserRef> {
    UserRef::parse(&format!("google_chat:{id}")).ok()
}

/// The conversation of a space: `google_chat:spaces/AAA`.
fn conversation_of(space: &str) -> Option<Conversation> {
    Conversation::parse(&format!("google_chat:{space}")).ok()
}

/// The space of a conversation: `spaces/AAA` of `google_chat:spaces/AAA`.
fn space_of(conversation: &Conversation) -> Result<&str, crate::engine::ChannelError> {
    conversation
        .as_str()
        .strip_prefix("google_chat:")
        .filter(|space| space.starts_with("spaces/") && space.len() > "spaces/".len())
        .ok_or_else(|| crate::engine::ChannelError::permanent(format!("`{conversation}` is not a Google Chat space")))
}

/// A message's words as askgate reads them: a command word without its slash given one.
fn typed(text: &str) -> String {
    let word = text.split_whitespace().next().unwrap_or_default();
    let lower = word.to_ascii_lowercase();
    if WORDS.contains(&lower.as_str()) { format!("/{lower}{}", &text[word.len()..]) } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_a_space_and_a_user_an_id() {
        let c = conversation_of("spaces/AAA").unwrap();
        assert_eq!((c.as_str(), space_of(&c).unwrap()), ("google_chat:spaces/AAA", "spaces/AAA"));
        assert!(space_of(&Conversation::parse("google_chat:users/1").unwrap()).is_err());
        assert!(space_of(&Conversation::parse("telegram:1").unwrap()).is_err());
        assert_eq!(user_ref("users/123").unwrap().as_str(), "google_chat:users/123");
    }

    #[test]
    fn a_command_word_gets_its_slash() {
        assert_eq!(typed("answer 1a2b 2"), "/answer 1a2b 2");
        assert_eq!(typed("Run demo"), "/run demo");
        assert_eq!(typed("green"), "green");
        assert_eq!(typed("/pending"), "/pending");
    }
}
