//! A card's own buttons as commands a person types where there are no buttons: the same words
//! the buttons carry (`/other`, `/note`, `/toggle`, `/submit`, a form's `/fset`, `/ftoggle`,
//! `/fdone`, `/fskip`, `/ftype`, `/freset`, and Discord's `/field`, `/fill`, `/send`), naming
//! the question by id or prefix, with what the button would ask for next given at once.

use super::{Command, CommandError, FormAction};

/// A card's button, typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnCard {
    /// `/other <id> [words]`: an answer in one's own words (for an editable approval, the
    /// action as edited); without words, how to give them.
    Other(Option<String>),
    /// `/note <id> [note]`: a rejection with a note; without one, how to give it.
    Note(Option<String>),
    /// `/toggle <id> <n>`: ticks or unticks option `n` (from 1) of a multi-select.
    Toggle(usize),
    /// `/submit <id>`: answers a multi-select with the options ticked.
    Submit,
    /// A form's button: `/fset`, `/ftoggle`, `/fdone`, `/fskip`, `/ftype <id> <field>` (which
    /// asks for the field's value), `/freset`.
    Form(FormAction),
    /// `/ftype <id> <field> <value>` (or `/field`, as Discord's select names it): fills the
    /// field with the value, as typed.
    Value {
        /// The field's number, from 1.
        field: usize,
        /// What is typed for it.
        value: String,
    },
    /// `/fill <id>`: the form's fields, with what one has filled in and what comes next.
    Show,
    /// `/send <id>`: the form as filled in so far, left-out fields taking their defaults.
    Send,
}

/// The words of a card's buttons, as [`Command::parse`] passes them on (lower-cased).
pub(super) const WORDS: [&str; 13] = [
    "other", "note", "toggle", "submit", "fset", "ftoggle", "fdone", "fskip", "ftype", "field", "freset", "fill",
    "send",
];

/// Parses a card's button typed as `/<word> <args>`; `word` is one of [`WORDS`].
pub(super) fn parse(word: &str, args: &str) -> Result<Command, CommandError> {
    let bad = || CommandError::Usage(usage(word));
    let (id, rest) = split(args);
    if id.is_empty() {
        return Err(bad());
    }
    let number = |s: &str| s.parse::<usize>().ok().filter(|&n| n >= 1).ok_or_else(bad);
    let words: Vec<&str> = rest.split_whitespace().collect();
    let optional = (!rest.is_empty()).then(|| rest.to_owned());
    let action = match (word, words.as_slice()) {
        ("other", _) => OnCard::Other(optional),
        ("note", _) => OnCard::Note(optional),
        ("toggle", [n]) => OnCard::Toggle(number(n)?),
        ("submit", []) => OnCard::Submit,
        ("fset", [field, option]) => OnCard::Form(FormAction::Set { field: number(field)?, option: number(option)? }),
        ("ftoggle", [field, option]) => {
            OnCard::Form(FormAction::Toggle { field: number(field)?, option: number(option)? })
        }
        ("fdone", [field]) => OnCard::Form(FormAction::Done { field: number(field)? }),
        ("fskip", [field]) => OnCard::Form(FormAction::Skip { field: number(field)? }),
        ("ftype" | "field", [_, ..]) => {
            let (field, value) = split(rest);
            let field = number(field)?;
            match value {
                "" => OnCard::Form(FormAction::Type { field }),
                value => OnCard::Value { field, value: value.to_owned() },
            }
        }
        ("freset", []) => OnCard::Form(FormAction::Restart),
        ("fill", []) => OnCard::Show,
        ("send", []) => OnCard::Send,
        _ => return Err(bad()),
    };
    let id = id.parse().map_err(CommandError::Question)?;
    Ok(Command::Card { id, action })
}

/// The first word and the rest, trimmed.
fn split(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((first, rest)) => (first, rest.trim()),
        None => (text, ""),
    }
}

/// How `word` is typed.
fn usage(word: &str) -> &'static str {
    match word {
        "other" => "/other <id> [your own words]",
        "note" => "/note <id> [why]",
        "toggle" => "/toggle <id> <option number>",
        "submit" => "/submit <id>",
        "fset" => "/fset <id> <field number> <option number>",
        "ftoggle" => "/ftoggle <id> <field number> <option number>",
        "fdone" => "/fdone <id> <field number>",
        "fskip" => "/fskip <id> <field number>",
        "ftype" => "/ftype <id> <field number> [value]",
        "field" => "/field <id> <field number> [value]",
        "freset" => "/freset <id>",
        "fill" => "/fill <id>",
        _ => "/send <id>",
    }
}

impl OnCard {
    /// Writes the command for question `id` as a person would type it.
    pub(super) fn write(&self, id: &crate::question::QuestionRef, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |t: &Option<String>| t.as_ref().map(|t| format!(" {t}")).unwrap_or_default();
        match self {
            Self::Other(words) => write!(f, "/other {id}{}", tail(words)),
            Self::Note(note) => write!(f, "/note {id}{}", tail(note)),
            Self::Toggle(n) => write!(f, "/toggle {id} {n}"),
            Self::Submit => write!(f, "/submit {id}"),
            Self::Form(action) => match action {
                FormAction::Set { field, option } => write!(f, "/fset {id} {field} {option}"),
                FormAction::Toggle { field, option } => write!(f, "/ftoggle {id} {field} {option}"),
                FormAction::Done { field } => write!(f, "/fdone {id} {field}"),
                FormAction::Skip { field } => write!(f, "/fskip {id} {field}"),
                FormAction::Type { field } => write!(f, "/ftype {id} {field}"),
                FormAction::Restart => write!(f, "/freset {id}"),
            },
            Self::Value { field, value } => write!(f, "/ftype {id} {field} {value}"),
            Self::Show => write!(f, "/fill {id}"),
            Self::Send => write!(f, "/send {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Tap;
    use crate::question::{QuestionId, QuestionRef};

    fn parse(s: &str) -> Result<Command, CommandError> {
        Command::parse(s).expect("a command")
    }

    fn card(id: &str, action: OnCard) -> Result<Command, CommandError> {
        Ok(Command::Card { id: id.parse().unwrap(), action })
    }

    #[test]
    fn every_card_button_payload_is_a_typed_command_about_the_same_question() {
        let id = QuestionId::new();
        for payload in [
            format!("/other {id}"),
            format!("/note {id}"),
            format!("/toggle {id} 3"),
            format!("/submit {id}"),
            format!("/fset {id} 2 3"),
            format!("/ftoggle {id} 1 25"),
            format!("/fdone {id} 4"),
            format!("/fskip {id} 2"),
            format!("/ftype {id} 1"),
            format!("/freset {id}"),
            format!("/field {id} 2"),
            format!("/fill {id}"),
            format!("/send {id}"),
        ] {
            let typed = parse(&payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
            assert_eq!(typed.question(), Some(&QuestionRef::Id(id)), "{payload}");
            if !payload.starts_with("/field") {
                assert_eq!(typed.to_string(), payload, "reads back as written");
            }
            if let Ok(Tap::Card { id: tapped, .. }) = Tap::parse(&payload) {
                assert_eq!(tapped, id, "the button and the command name one question");
            }
        }
    }

    #[test]
    fn typed_card_commands_take_a_prefix_and_what_the_button_would_ask_for() {
        assert_eq!(parse("/other 1a2b my own words"), card("1a2b", OnCard::Other(Some("my own words".into()))));
        assert_eq!(parse("/note 1a2b  too risky "), card("1a2b", OnCard::Note(Some("too risky".into()))));
        assert_eq!(
            parse("/ftype 1a2b 2 ada@example.com"),
            card("1a2b", OnCard::Value { field: 2, value: "ada@example.com".into() })
        );
        assert_eq!(
            parse("/field 1a2b 3 Pro, Team"),
            card("1a2b", OnCard::Value { field: 3, value: "Pro, Team".into() })
        );
        assert_eq!(parse("/FSET@bot 1a2b 1 2"), card("1a2b", OnCard::Form(FormAction::Set { field: 1, option: 2 })));
    }

    #[test]
    fn a_card_command_with_wrong_numbers_gets_its_usage() {
        for (typed, usage) in [
            ("/toggle 1a2b", "/toggle <id> <option number>"),
            ("/toggle 1a2b 0", "/toggle <id> <option number>"),
            ("/submit 1a2b 3", "/submit <id>"),
            ("/fset 1a2b 2", "/fset <id> <field number> <option number>"),
            ("/fdone 1a2b x", "/fdone <id> <field number>"),
            ("/ftype 1a2b", "/ftype <id> <field number> [value]"),
            ("/freset", "/freset <id>"),
            ("/send 1a2b now", "/send <id>"),
            ("/other", "/other <id> [your own words]"),
        ] {
            assert_eq!(parse(typed), Err(CommandError::Usage(usage)), "{typed}");
        }
    }
}
