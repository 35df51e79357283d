//! What a button on a card carries: a command as if typed, or an action on the card itself
//! (a multi-select's ticks, "Other…", a form's fields), always with the full question id.

use super::{Command, CommandError};
use crate::question::QuestionId;
use crate::question::form::{Field, Fill, Input};

/// What a button on a card asks for, parsed once where the tap arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tap {
    /// A command, as if typed (`/answer <id> #2`, `/approve <id> always`, `/decline <id>`).
    Command(Command),
    /// A button that changes only its card, or asks for the next message.
    Card {
        /// The card's question.
        id: QuestionId,
        /// What the button does.
        action: CardAction,
    },
}

/// A card button that is not an answer by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardAction {
    /// Ticks or unticks option `n` (from 1) of a multi-select card.
    Toggle(usize),
    /// Answers a multi-select card with its ticked options.
    Submit,
    /// Asks for a free-text answer in the next message.
    Other,
    /// Asks for a rejection note in the next message.
    Note,
    /// A button of a form's card, about one of its fields or the whole draft.
    Form(FormAction),
}

/// What a form card's button does; fields and options are numbered from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormAction {
    /// Fills `field` with option `option` (`/fset <id> <field> <option>`; for yes or no, 1 is
    /// yes).
    Set {
        /// The field.
        field: usize,
        /// The option.
        option: usize,
    },
    /// Ticks or unticks option `option` of the multi choice `field` (`/ftoggle`).
    Toggle {
        /// The field.
        field: usize,
        /// The option.
        option: usize,
    },
    /// Fills the multi choice `field` with the options ticked on the card (`/fdone`).
    Done {
        /// The field.
        field: usize,
    },
    /// Leaves the optional `field` out (`/fskip`).
    Skip {
        /// The field.
        field: usize,
    },
    /// Asks for the value of `field` in the next message (`/ftype`).
    Type {
        /// The field.
        field: usize,
    },
    /// Forgets what the person filled in, to start over (`/freset <id>`).
    Restart,
}

impl FormAction {
    /// What a tap on this button gives its field: an option by its position, yes or no, the
    /// ticked options, or the field left out. None when it does not fit the field (a payload
    /// of another card, or forged) or does not fill it.
    pub fn fill(self, field: &Field, ticked: &[usize]) -> Option<Fill> {
        let options = field.options().len();
        match (&field.input, self) {
            (Input::Boolean { .. }, Self::Set { option: 1, .. }) => Some(Fill::YesNo(true)),
            (Input::Boolean { .. }, Self::Set { option: 2, .. }) => Some(Fill::YesNo(false)),
            (Input::Choice { multi: false, .. }, Self::Set { option, .. }) if option <= options => {
                Some(Fill::Option(option))
            }
            (Input::Choice { multi: true, .. }, Self::Done { .. }) => Some(Fill::Ticked(ticked.to_vec())),
            (_, Self::Skip { .. }) if !field.required => Some(Fill::Cleared),
            _ => None,
        }
    }

    /// The field it is about; none for [`FormAction::Restart`].
    pub fn field(self) -> Option<usize> {
        match self {
            Self::Set { field, .. }
            | Self::Toggle { field, .. }
            | Self::Done { field }
            | Self::Skip { field }
            | Self::Type { field } => Some(field),
            Self::Restart => None,
        }
    }
}

impl Tap {
    /// Parses a button's payload.
    ///
    /// # Errors
    /// When the payload is neither a command nor a card action with a full question id:
    /// a card from an older version, or a forged payload.
    pub fn parse(payload: &str) -> Result<Self, CommandError> {
        let mut words = payload.split_whitespace();
        let first = words.next();
        if let Some((word, usage)) = first.and_then(|w| Some((w, form_usage(w)?))) {
            return Self::parse_form(word, usage, words);
        }
        let action = match first {
            Some("/toggle") => None,
            Some("/submit") => Some(CardAction::Submit),
            Some("/other") => Some(CardAction::Other),
            Some("/note") => Some(CardAction::Note),
            _ => {
                return match Command::parse(payload) {
                    Some(command) => command.map(Self::Command),
                    None => Err(CommandError::Usage("a button carries a command")),
                };
            }
        };
        let id = words.next().and_then(|id| id.parse::<QuestionId>().ok());
        let action = match action {
            Some(action) => action,
            None => match words.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n >= 1 => CardAction::Toggle(n),
                _ => return Err(CommandError::Usage("/toggle <question id> <option number>")),
            },
        };
        match (id, words.next()) {
            (Some(id), None) => Ok(Self::Card { id, action }),
            _ => Err(CommandError::Usage("a card button carries a full question id")),
        }
    }

    /// A form card's button: its word, a full question id, then as many numbers (each from 1)
    /// as the word takes, and nothing more.
    fn parse_form<'a>(
        word: &str,
        usage: &'static str,
        mut words: impl Iterator<Item = &'a str>,
    ) -> Result<Self, CommandError> {
        let bad = || CommandError::Usage(usage);
        let id = words.next().and_then(|id| id.parse::<QuestionId>().ok()).ok_or_else(bad)?;
        let mut number = || words.next().and_then(|n| n.parse::<usize>().ok()).filter(|&n| n >= 1).ok_or_else(bad);
        let action = match word {
            "/fset" => FormAction::Set { field: number()?, option: number()? },
            "/ftoggle" => FormAction::Toggle { field: number()?, option: number()? },
            "/fdone" => FormAction::Done { field: number()? },
            "/fskip" => FormAction::Skip { field: number()? },
            "/ftype" => FormAction::Type { field: number()? },
            _ => FormAction::Restart,
        };
        match words.next() {
            None => Ok(Self::Card { id, action: CardAction::Form(action) }),
            Some(_) => Err(bad()),
        }
    }
}

/// How a form card's button is written, when `word` is one's.
fn form_usage(word: &str) -> Option<&'static str> {
    Some(match word {
        "/fset" => "/fset <question id> <field number> <option number>",
        "/ftoggle" => "/ftoggle <question id> <field number> <option number>",
        "/fdone" => "/fdone <question id> <field number>",
        "/fskip" => "/fskip <question id> <field number>",
        "/ftype" => "/ftype <question id> <field number>",
        "/freset" => "/freset <question id>",
        _ => return None,
    })
}

impl std::fmt::Display for Tap {
    /// The payload a button carries for this tap (what [`Tap::parse`] reads back).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (id, action) = match self {
            Self::Command(command) => return write!(f, "{command}"),
            Self::Card { id, action } => (id, action),
        };
        match action {
            CardAction::Toggle(n) => write!(f, "/toggle {id} {n}"),
            CardAction::Submit => write!(f, "/submit {id}"),
            CardAction::Other => write!(f, "/other {id}"),
            CardAction::Note => write!(f, "/note {id}"),
            CardAction::Form(action) => match action {
                FormAction::Set { field, option } => write!(f, "/fset {id} {field} {option}"),
                FormAction::Toggle { field, option } => write!(f, "/ftoggle {id} {field} {option}"),
                FormAction::Done { field } => write!(f, "/fdone {id} {field}"),
                FormAction::Skip { field } => write!(f, "/fskip {id} {field}"),
                FormAction::Type { field } => write!(f, "/ftype {id} {field}"),
                FormAction::Restart => write!(f, "/freset {id}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_are_commands_or_card_actions_with_a_full_id() {
        let id = QuestionId::new();
        assert_eq!(
            Tap::parse(&format!("/answer {id} #2")),
            Ok(Tap::Command(Command::Answer { id: id.into(), choice: crate::command::Given::Text("#2".into()) }))
        );
        assert_eq!(Tap::parse(&format!("/toggle {id} 3")), Ok(Tap::Card { id, action: CardAction::Toggle(3) }));
        assert_eq!(Tap::parse(&format!("/submit {id}")), Ok(Tap::Card { id, action: CardAction::Submit }));
        assert_eq!(Tap::parse(&format!("/note {id}")), Ok(Tap::Card { id, action: CardAction::Note }));
        for bad in [
            format!("/toggle {id} 0"),
            format!("/toggle {id}"),
            format!("/other {}", id.short()),
            format!("/submit {id} extra"),
            "/other".to_owned(),
            "yes".to_owned(),
            "/answer".to_owned(),
            "/frobnicate".to_owned(),
        ] {
            assert!(Tap::parse(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn form_buttons_name_a_field_by_number_and_read_back_as_written() {
        let id = QuestionId::new();
        let form = |action| Tap::Card { id, action: CardAction::Form(action) };
        for (payload, tap) in [
            (format!("/fset {id} 2 3"), form(FormAction::Set { field: 2, option: 3 })),
            (format!("/ftoggle {id} 1 25"), form(FormAction::Toggle { field: 1, option: 25 })),
            (format!("/fdone {id} 4"), form(FormAction::Done { field: 4 })),
            (format!("/fskip {id} 20"), form(FormAction::Skip { field: 20 })),
            (format!("/ftype {id} 1"), form(FormAction::Type { field: 1 })),
            (format!("/freset {id}"), form(FormAction::Restart)),
            (format!("/toggle {id} 2"), Tap::Card { id, action: CardAction::Toggle(2) }),
        ] {
            assert_eq!(Tap::parse(&payload), Ok(tap.clone()), "{payload}");
            assert_eq!(tap.to_string(), payload);
        }
        for bad in [
            format!("/fset {id} 2"),
            format!("/fset {id} 0 1"),
            format!("/fset {id} 1 0"),
            format!("/fset {id} 1 2 3"),
            format!("/fset {} 1 2", id.short()),
            format!("/ftoggle {id} x 1"),
            format!("/fdone {id}"),
            format!("/fskip {id} -1"),
            format!("/ftype {id} 1 more"),
            format!("/freset {id} 1"),
            "/freset".to_owned(),
        ] {
            assert!(Tap::parse(&bad).is_err(), "{bad} was accepted");
        }
    }
}
