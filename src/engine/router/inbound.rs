//! What arrived from a person: who said it where, and whether it is a tap, a typed message
//! or a reply.

use crate::command::Command;
use crate::question::{Conversation, Question, Surface, UserRef, display_name};

/// A message from a person on some surface: who said it where ([`Inbound`]'s fields, the same
/// for every kind of message), and what they said ([`Said`]).
#[derive(Clone, Debug)]
pub struct Inbound {
    /// Where it was said.
    pub conversation: Conversation,
    /// Who said it.
    pub user: UserRef,
    /// How people know them (`@alice`), when the surface says.
    pub name: Option<String>,
    /// The surface it came from.
    pub surface: Surface,
    /// What arrived: a tap, a typed message, or a reply.
    pub said: Said,
    /// The platform's id for this update (`telegram:update:123`), so that a redelivery is
    /// applied once.
    pub key: Option<String>,
    /// Said where only the sender reads the answer (a private chat, a direct message, an
    /// ephemeral reply): where a `/web` sign-in link may be sent.
    pub private: bool,
    /// The sender's language, as their platform says it (when askgate speaks it).
    pub locale: Option<crate::question::Locale>,
    /// The language of the place it was said in (a Discord guild's `preferred_locale`), taken
    /// for the sender while their own is not known: their first card reads in it.
    pub place_locale: Option<crate::question::Locale>,
    /// Said in the person's own place (the page's composer, the TUI): the questions they may
    /// answer in any conversation (their board) are theirs to answer here too, by id or, when
    /// one waits for them in all, by a plain reply.
    pub board: bool,
}

/// What a person's message is.
#[derive(Clone, Debug)]
pub enum Said {
    /// A tapped button (or a form or menu that stands for one), whose payload the surface
    /// parsed into `command`.
    Tap {
        /// The button's command.
        command: Command,
        /// The question the button is on, as the adapter opened it ([`Records::open_card`](crate::engine::Records::open_card)):
        /// the command is applied to it without reading it again.
        card: Option<Box<Question>>,
    },
    /// A message typed with no reply context: a command, or words for whatever waits.
    Typed(String),
    /// A reply to a message of this surface: to a card it answers that card's question, to a
    /// prompt it is what the prompt asked for; both are found by the message askgate recorded.
    Reply {
        /// The chat of the message replied to (the surface's id).
        chat: String,
        /// The message replied to (the surface's id).
        message: String,
        /// What was typed.
        text: String,
    },
}

impl Said {
    /// What was typed; empty for a tap.
    pub fn text(&self) -> &str {
        match self {
            Self::Tap { .. } => "",
            Self::Typed(text) | Self::Reply { text, .. } => text,
        }
    }
}

impl Inbound {
    /// Who said it where, having said `said`.
    fn new(conversation: Conversation, user: UserRef, surface: Surface, said: Said) -> Self {
        Self {
            conversation,
            user,
            name: None,
            surface,
            said,
            key: None,
            private: false,
            locale: None,
            place_locale: None,
            board: false,
        }
    }

    /// A typed message with no reply context.
    pub fn text(conversation: Conversation, user: UserRef, surface: Surface, text: impl Into<String>) -> Self {
        Self::new(conversation, user, surface, Said::Typed(text.into()))
    }

    /// A tapped button (or a form or menu that stands for one), whose payload the surface
    /// parsed into `command`.
    pub fn tap(conversation: Conversation, user: UserRef, surface: Surface, command: Command) -> Self {
        Self::new(conversation, user, surface, Said::Tap { command, card: None })
    }

    /// A tap on the card of `question`, opened by [`Records::open_card`](crate::engine::Records::open_card), whose payload the
    /// surface parsed into `command` (about that question).
    pub fn on_card(
        conversation: Conversation,
        user: UserRef,
        surface: Surface,
        question: Question,
        command: Command,
    ) -> Self {
        let said = Said::Tap { command, card: Some(Box::new(question)) };
        Self::new(conversation, user, surface, said)
    }

    /// Makes a typed message a reply to the message `message` in `chat` (the surface's ids);
    /// a tap, or a message that is a reply already, stays as it is.
    #[must_use]
    pub fn replying_to(mut self, chat: String, message: String) -> Self {
        if let Said::Typed(text) = self.said {
            self.said = Said::Reply { chat, message, text };
        }
        self
    }

    /// Sets the platform's id for this update, so that a redelivery is applied once.
    #[must_use]
    pub fn keyed(mut self, key: String) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets the sender's language from the tag their platform gives (`zh-hans`, `en-US`); a
    /// language askgate does not speak, or none, changes nothing.
    #[must_use]
    pub fn speaking(mut self, tag: Option<&str>) -> Self {
        self.locale = tag.and_then(crate::question::Locale::from_tag);
        self
    }

    /// Sets the language of the place it was said in from the tag its platform gives (see
    /// [`Inbound::place_locale`]); a language askgate does not speak, or none, changes nothing.
    #[must_use]
    pub fn said_where_they_speak(mut self, tag: Option<&str>) -> Self {
        self.place_locale = tag.and_then(crate::question::Locale::from_tag);
        self
    }

    /// Marks it as said where only the sender reads the answer (see [`Inbound::private`]).
    #[must_use]
    pub fn in_private(mut self, private: bool) -> Self {
        self.private = private;
        self
    }

    /// Marks it as said in the person's own place (see [`Inbound::board`]).
    #[must_use]
    pub fn on_board(mut self, board: bool) -> Self {
        self.board = board;
        self
    }

    /// Sets how people know the sender, as it will be shown with an outcome (see
    /// [`display_name`]).
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.name = display_name(name);
        self
    }
}
