//! Matrix, over the client-server API: cards as messages whose choices are reactions the bot
//! seeds ([`crate::channel::reactions`]), a person's reaction read as a tap, replies and typed
//! commands as on every text surface, the outcome as an edit of the card with the seeded
//! reactions redacted.
//!
//! Conversations are `matrix:<room id>` (`matrix:!abc:example.org`), users
//! `matrix:<Matrix id>` (`matrix:@alice:example.org`). Events come by `/sync` long polling
//! from a position kept in the bot's account data (so a restart neither replays nor misses),
//! each event applied once (its id is the update key); one instance syncs (a lease).
//! Encrypted rooms are refused with one message: askgate reads no end-to-end encryption.

mod client;
mod component;
pub mod config;
mod events;
mod outbound;
mod render;
mod sync;

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::command::Command;
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{ChannelError, Engine, Inbound, Retry};
use crate::question::{Conversation, Receipt, UserRef};
use client::{ApiError, Client};
use events::Event;

pub use component::Platform;

/// Where answers given on Matrix come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("matrix");

/// The Matrix channel: one account on one homeserver.
pub struct Matrix {
    client: Client,
    /// The bot's Matrix id.
    me: String,
    /// Rooms joined at start.
    rooms: Vec<String>,
    /// The variable `password_env` names and the account's password in it, when askgate logs
    /// in with that rather than being given an access token.
    password: Option<(String, String)>,
    clock: Clock,
}

/// The device askgate logs in on with a password: always the same, so a restart (or another
/// instance) takes up the device it had rather than adding a new one to the account each
/// start. The account is the bot's own, so one fixed name is enough; a login on a device that
/// exists gives a new token and leaves the device's other tokens working, so instances sharing
/// the account do not log each other out.
const DEVICE: &str = "ASKGATE";

/// Why the channel could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The homeserver URL or the HTTP client is unusable.
    #[error("{0}")]
    Client(String),
    /// The homeserver refused the token.
    #[error("the homeserver refused the access token")]
    Token(#[source] ApiError),
    /// The homeserver refused the password.
    #[error("the homeserver refused the password of channels.matrix.password_env (`{variable}`) for {user}")]
    Password {
        /// The variable holding it.
        variable: String,
        /// The account.
        user: String,
        /// The homeserver's refusal.
        #[source]
        source: ApiError,
    },
    /// The token is another account's than `user_id`.
    #[error("the access token is {actual}'s, not {configured}'s (channels.matrix.user_id)")]
    OtherAccount {
        /// Whose token it is.
        actual: String,
        /// Whose it should be.
        configured: String,
    },
}

impl Matrix {
    /// The channel, signing in with `secret` (the value of the variable `config` names), ready
    /// to send once it serves; nothing is sent until it is used.
    ///
    /// # Errors
    /// A homeserver URL that is not one.
    pub fn new(config: &config::MatrixConfig, secret: String, clock: Clock) -> Result<Arc<Self>, StartError> {
        let (token, password) = match &config.secret {
            config::Secret::Token(_) => (secret, None),
            config::Secret::Password(variable) => (String::new(), Some((variable.clone(), secret))),
        };
        let client = Client::new(&config.homeserver, token, clock.now_ms()).map_err(StartError::Client)?;
        let (me, rooms) = (config.user_id.clone(), config.rooms.clone());
        Ok(Arc::new(Self { client, me, rooms, password, clock }))
    }

    /// Applies one event of `room`'s timeline.
    async fn on_event(&self, room: &str, event: &Value, engine: &Engine) {
        let Some(event) = events::read(event, &self.me) else { return };
        let Ok(conversation) = Conversation::parse(&format!("matrix:{room}")) else { return };
        match event {
            Event::Message { id, sender, text, replying_to, in_thread } => {
                let Some(user) = user_ref(&sender) else { return };
                let mut inbound = Inbound::text(conversation, user, SURFACE, text).named(handle(&sender));
                inbound.key = Some(format!("matrix:event:{id}"));
                if let Some(to) = &replying_to {
                    inbound = inbound.replying_to(room.to_owned(), to.clone());
                }
                let response = engine.router().handle(inbound).await;
                if let Some(text) = response.text {
                    // An answer in a thread stays in it.
                    let thread = replying_to.as_deref().filter(|_| in_thread);
                    self.answer(room, &text, &id, thread).await;
                }
            }
            Event::Reaction { id, sender, on, key } => {
                let Some(user) = user_ref(&sender) else { return };
                let Some(command) = self.reaction_command(room, &on, &key, engine).await else { return };
                let inbound = Inbound::tap(conversation, user, SURFACE, command)
                    .named(handle(&sender))
                    .keyed(format!("matrix:event:{id}"));
                let response = engine.router().handle(inbound).await;
                // A tap that resolved shows on the card; anything else is said under it.
                if !matches!(response.receipt, Some(Receipt::Resolved { .. }))
                    && let Some(note) =
                        crate::wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale)
                {
                    self.answer(room, &format!("{sender}: {note}"), &on, None).await;
                }
            }
            Event::Encrypted => self.refuse_encrypted(room, engine).await,
        }
    }

    /// The command a reaction `key` on the event `on` stands for: one of the reactions askgate
    /// seeded on a card of this room.
    async fn reaction_command(&self, room: &str, on: &str, key: &str, engine: &Engine) -> Option<Command> {
        // A card is recorded once its reactions are seeded: a tap that quick waits for it.
        for attempt in 0..4 {
            match engine.records().card_question(SURFACE, room, on).await {
                Ok(Some(question)) => return crate::channel::reactions::command(&question, key),
                Ok(None) if attempt < 3 && crate::channel::reactions::is_choice(key) => {
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the question of a card someone reacted to");
                    return None;
                }
            }
        }
        None
    }

    /// Says `text` in `room` as a notice replying to the event `to`.
    async fn answer(&self, room: &str, text: &str, to: &str, thread: Option<&str>) {
        let content = render::answer(text, to, thread);
        if let Err(e) = self.send(room, "m.room.message", &content).await {
            tracing::warn!(error = %e, "could not answer on matrix");
        }
    }

    /// Says once per room (the store keeps that it did, a week), unencrypted, that askgate
    /// cannot read an encrypted room.
    async fn refuse_encrypted(&self, room: &str, engine: &Engine) {
        let key = format!("matrix:encrypted:{room}");
        match engine.router().first_sighting(&key).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, room, "could not record that an encrypted room was refused");
                return;
            }
        }
        let text = crate::say!(crate::question::Locale::default(), "matrix.encrypted");
        if let Err(e) = self.send(room, "m.room.message", &render::message("m.notice", &text)).await {
            tracing::warn!(error = %e, room, "could not say on matrix that an encrypted room is not read");
        }
    }

    /// Sends an event, retrying a few times while the homeserver is busy or away (with the
    /// same transaction id, so it is sent once); its event id.
    async fn send(&self, room: &str, kind: &str, content: &Value) -> Result<String, ApiError> {
        let txn = self.client.txn();
        retrying(Backoff::QUICK, ApiError::retry, || self.client.send(room, kind, &txn, content)).await
    }

    /// Redacts an event, retrying like [`Matrix::send`].
    async fn redact(&self, room: &str, event: &str) -> Result<(), ApiError> {
        let txn = self.client.txn();
        retrying(Backoff::QUICK, ApiError::retry, || self.client.redact(room, event, &txn)).await
    }
}

fn channel_error(e: &ApiError) -> ChannelError {
    match e.retry() {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

/// The user a Matrix id is: `matrix:@alice:example.org`.
fn user_ref(sender: &str) -> Option<UserRef> {
    UserRef::parse(&format!("matrix:{sender}")).ok()
}

/// How people in a room know someone, as the card shows who answered: `@alice` of
/// `@alice:example.org`.
fn handle(sender: &str) -> &str {
    sender.split_once(':').map_or(sender, |(local, _)| local)
}

/// The room of a conversation: `!abc:example.org` of `matrix:!abc:example.org`.
fn room_of(conversation: &Conversation) -> Result<&str, ChannelError> {
    conversation
        .as_str()
        .strip_prefix("matrix:")
        .filter(|room| room.starts_with('!'))
        .ok_or_else(|| ChannelError::permanent(format!("`{conversation}` is not a Matrix room")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_a_room_and_a_user_an_id() {
        let c = Conversation::parse("matrix:!abc:example.org").unwrap();
        assert_eq!(room_of(&c).unwrap(), "!abc:example.org");
        assert!(room_of(&Conversation::parse("matrix:#alias:example.org").unwrap()).is_err());
        assert!(room_of(&Conversation::parse("telegram:1").unwrap()).is_err());
        assert_eq!(user_ref("@alice:example.org").unwrap().as_str(), "matrix:@alice:example.org");
        assert_eq!(handle("@alice:example.org"), "@alice");
    }
}
