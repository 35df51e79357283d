//! Plain messages handed to whoever listens in a conversation (Claude Code's channel, through
//! `askgate mcp --channel`): a message that answers nothing and starts nothing there (no
//! question waits for its sender, no default function) goes to the listeners, if the sender may
//! start runs in the conversation. Nothing is kept: a message nobody listens for is told so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

use super::Policies;
use crate::question::{Conversation, UserRef};

/// How many messages a listener may fall behind before it misses some.
const BUFFERED: usize = 64;

/// A plain message heard in a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heard {
    /// Where.
    pub conversation: Conversation,
    /// Who sent it.
    pub user: UserRef,
    /// How people know them, when the surface said.
    pub name: Option<String>,
    /// What they wrote.
    pub text: String,
}

/// The listeners of each conversation.
#[derive(Default)]
pub(super) struct Listeners(Mutex<HashMap<Conversation, broadcast::Sender<Arc<Heard>>>>);

impl Listeners {
    fn listen(&self, conversation: &Conversation) -> broadcast::Receiver<Arc<Heard>> {
        let mut listeners = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        listeners.retain(|_, sender| sender.receiver_count() > 0);
        listeners.entry(conversation.clone()).or_insert_with(|| broadcast::channel(BUFFERED).0).subscribe()
    }

    /// Hands `heard` to the listeners of its conversation; whether anyone listened.
    fn send(&self, heard: Heard) -> bool {
        let listeners = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(sender) = listeners.get(&heard.conversation) else { return false };
        sender.send(Arc::new(heard)).is_ok()
    }
}

impl Policies {
    /// Listens to the plain messages of `conversation` that nothing else takes, until the
    /// receiver is dropped.
    pub fn listen(&self, conversation: &Conversation) -> broadcast::Receiver<Arc<Heard>> {
        self.listeners.listen(conversation)
    }

    /// Hands `heard` to the conversation's listeners, if the sender may start runs there;
    /// whether anyone listened.
    pub(super) fn pass_on(&self, heard: Heard) -> bool {
        if !heard.user.is_operator() && !self.policy(&heard.conversation).allowed_users.admits(&heard.user) {
            return false;
        }
        self.listeners.send(heard)
    }
}
