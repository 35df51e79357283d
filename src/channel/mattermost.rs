//! Mattermost, as a bot account: people's posts come over the WebSocket API (`posted`
//! events), cards and replies go out through REST v4, and a card's choices are message
//! buttons whose request comes back to askgate's own server.
//!
//! Conversations are `mattermost:<channel id>`, users `mattermost:<user id>` (ids, not
//! usernames: a username can be changed, and the refusal a stranger gets names their id).
//! A button's `integration.context` carries its text command and an HMAC-SHA256 of it under
//! a key of askgate's ([`Signer`]): Mattermost signs no request it sends to an integration,
//! so a request whose command askgate did not sign is refused (401) and changes nothing. Each
//! post is applied once (its id is the update key), each tap once (post, person, command);
//! one instance holds the WebSocket at a time (a lease).

mod actions;
mod client;
mod component;
pub mod config;
mod events;
mod outbound;
mod render;
mod socket;

use std::sync::{Arc, OnceLock};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::clock::Clock;
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{ChannelError, Engine, Inbound, Retry};
use crate::question::{Conversation, UserRef};
use client::{ApiError, Client};

pub use component::Platform;

/// Where answers given on Mattermost come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("mattermost");

/// The Mattermost channel: one bot account on one server.
pub struct Mattermost {
    client: Client,
    /// The bot's user id and username, once the server said them.
    me: OnceLock<(String, String)>,
    /// Where the buttons' requests go: `<public_url>/channels/mattermost/actions`.
    actions_url: String,
    signer: Signer,
    clock: Clock,
}

/// Why the channel could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The server URL or the HTTP client is unusable.
    #[error("{0}")]
    Client(String),
    /// The server refused the token.
    #[error("the Mattermost server refused the token of channels.mattermost.token_env")]
    Token(#[source] ApiError),
}

/// Signs the commands a card's buttons carry, and checks them when they come back.
///
/// The key is the value of `action_secret_env` when the section names one, else an HMAC of a
/// fixed label under the bot's token: nothing more to set up, the same on every instance, and
/// as secret as the token; a token replaced (or a secret set) leaves the buttons of older
/// cards refused, their typed commands still working.
pub struct Signer {
    key: Vec<u8>,
}

impl Signer {
    /// A signer whose key is `secret` itself, or derived from `token`.
    pub fn new(secret: Option<String>, token: &str) -> Self {
        match secret {
            Some(secret) => Self { key: secret.into_bytes() },
            None => Self { key: Self::mac(token.as_bytes(), "askgate mattermost actions").to_vec() },
        }
    }

    fn mac(key: &[u8], text: &str) -> [u8; 32] {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(text.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// The signature of `command`, in hex.
    pub fn sign(&self, command: &str) -> String {
        hex::encode(Self::mac(&self.key, command))
    }

    /// Whether `mac` (hex) is `command`'s signature, compared in constant time.
    pub fn verify(&self, command: &str, mac: &str) -> bool {
        let Ok(given) = hex::decode(mac) else { return false };
        let mut check =
            Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        check.update(command.as_bytes());
        check.verify_slice(&given).is_ok()
    }
}

impl Mattermost {
    /// The channel on the server of `config`, as the bot whose token is `token`; nothing is
    /// sent until it is used.
    ///
    /// # Errors
    /// A server URL that is not one.
    pub fn new(
        config: &config::MattermostConfig,
        token: String,
        secret: Option<String>,
        clock: Clock,
    ) -> Result<Arc<Self>, StartError> {
        let signer = Signer::new(secret, &token);
        let client = Client::new(&config.url, token).map_err(StartError::Client)?;
        let actions_url = format!("{}{}", config.public_url, render::ACTIONS_PATH);
        Ok(Arc::new(Self { client, me: OnceLock::new(), actions_url, signer, clock }))
    }

    /// The bot's user id; empty until the server said it.
    fn me(&self) -> &str {
        self.me.get().map_or("", |(id, _)| id.as_str())
    }

    /// The bot's username (`askgate`); empty until the server said it.
    fn username(&self) -> &str {
        self.me.get().map_or("", |(_, name)| name.as_str())
    }

    /// Applies a person's post.
    async fn on_post(&self, post: events::Post, engine: &Engine) {
        let (Some(conversation), Some(user)) = (conversation(&post.channel), user_ref(&post.user)) else { return };
        let text = events::addressed(&post.text, self.username()).to_owned();
        let mut inbound = Inbound::text(conversation, user, SURFACE, text)
            .keyed(format!("mattermost:post:{}", post.id))
            .in_private(post.direct);
        if let Some(name) = &post.name {
            inbound = inbound.named(name);
        }
        if let Some(root) = &post.root {
            inbound = inbound.replying_to(post.channel.clone(), root.clone());
        }
        let response = engine.router().handle(inbound).await;
        if let Some(text) = response.text {
            // An answer in a thread stays in it.
            let post = render::reply(&post.channel, &text, post.root.as_deref());
            if let Err(e) = self.create(&post).await {
                tracing::warn!(error = %e, "could not answer on mattermost");
            }
        }
    }

    /// Makes a post, retrying a few times while the server is busy or away; its id.
    async fn create(&self, post: &serde_json::Value) -> Result<String, ApiError> {
        let made = retrying(Backoff::QUICK, ApiError::retry, || self.client.create_post(post)).await?;
        Ok(made["id"].as_str().unwrap_or_default().to_owned())
    }

    /// Replaces a post's message and props, retrying like [`Mattermost::create`].
    async fn update(&self, id: &str, post: &serde_json::Value) -> Result<(), ApiError> {
        retrying(Backoff::QUICK, ApiError::retry, || self.client.update_post(id, post)).await
    }
}

fn channel_error(e: &ApiError) -> ChannelError {
    match e.retry() {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

/// The conversation of a channel: `mattermost:<channel id>`.
fn conversation(channel: &str) -> Option<Conversation> {
    Conversation::parse(&format!("mattermost:{channel}")).ok()
}

/// The user a Mattermost user id is: `mattermost:<user id>`.
fn user_ref(user: &str) -> Option<UserRef> {
    UserRef::parse(&format!("mattermost:{user}")).ok()
}

/// The channel of a conversation: `<channel id>` of `mattermost:<channel id>`.
fn channel_of(conversation: &Conversation) -> Result<&str, ChannelError> {
    conversation
        .as_str()
        .strip_prefix("mattermost:")
        .filter(|channel| !channel.is_empty() && channel.chars().all(|c| c.is_ascii_alphanumeric()))
        .ok_or_else(|| ChannelError::permanent(format!("`{conversation}` is not a Mattermost channel")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_a_channel_a_user_an_id() {
        let c = conversation("4xp9fdt9ftnd8r5kzgx7h9fqmy").unwrap();
        assert_eq!(c.as_str(), "mattermost:4xp9fdt9ftnd8r5kzgx7h9fqmy");
        assert_eq!(channel_of(&c).unwrap(), "4xp9fdt9ftnd8r5kzgx7h9fqmy");
        assert!(channel_of(&Conversation::parse("mattermost:a/b").unwrap()).is_err());
        assert!(channel_of(&Conversation::parse("telegram:1").unwrap()).is_err());
        assert_eq!(user_ref("u1").unwrap().as_str(), "mattermost:u1");
    }

    #[test]
    fn a_signature_is_checked_against_its_command_under_its_key() {
        let signer = Signer::new(None, "token-a");
        let mac = signer.sign("/answer 0b6f #2");
        assert!(signer.verify("/answer 0b6f #2", &mac));
        assert!(!signer.verify("/answer 0b6f #1", &mac));
        assert!(!signer.verify("/answer 0b6f #2", "zz"));
        assert!(!Signer::new(None, "token-b").verify("/answer 0b6f #2", &mac));
        let secret = Signer::new(Some("s3cret".into()), "token-a");
        assert!(!secret.verify("/answer 0b6f #2", &mac));
        assert!(secret.verify("/answer 0b6f #2", &secret.sign("/answer 0b6f #2")));
    }
}
