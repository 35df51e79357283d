//! The text command grammar every surface shares. Button payloads are these same commands,
//! plus a few that change only the card they are on ([`Tap`]).

mod card;
mod tap;

pub use card::OnCard;
pub use tap::{CardAction, FormAction, Tap};

use crate::question::{QuestionId, QuestionRef, UnreadableId};

/// One parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/answer <id> <choice>`
    Answer {
        /// The question.
        id: QuestionRef,
        /// What it is answered with.
        choice: Given,
    },
    /// `/decline <id> [feedback]`, and its alias `/deny` for approvals.
    Decline {
        /// The question.
        id: QuestionRef,
        /// Optional feedback.
        feedback: Option<String>,
    },
    /// `/approve <id> [once|always|always-like <pattern>|edit <new action>]`
    Approve {
        /// The question.
        id: QuestionRef,
        /// How it is allowed.
        how: Allow,
    },
    /// `/pending`
    Pending,
    /// `/show <id>`: the whole question, where a card had to cut it.
    Show {
        /// The question.
        id: QuestionRef,
    },
    /// `/run <function> [input]`
    Run {
        /// The function's name.
        function: String,
        /// Everything after the name.
        input: String,
    },
    /// `/cancel`
    Cancel,
    /// `/grants`: this conversation's standing allow-always grants.
    Grants,
    /// `/revoke <id>`: takes a grant back.
    Revoke {
        /// The grant's id or a unique prefix of at least four characters.
        id: String,
    },
    /// `/help` (and `/start`, which chat apps send first).
    Help,
    /// `/web`: a one-time link that signs a browser in as the sender.
    Web,
    /// A card's own button, typed (`/other <id> …`, `/toggle <id> 2`, `/fset <id> 1 2`, …).
    Card {
        /// The question.
        id: QuestionRef,
        /// What the button does.
        action: OnCard,
    },
}

/// A message that looks like a command but is not a valid one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// A known command with missing or wrong arguments.
    #[error("usage: {0}")]
    Usage(&'static str),
    /// A slash word askgate does not know.
    #[error("unknown command /{0}: /help lists the commands")]
    Unknown(String),
    /// A command about a question that names none.
    #[error(transparent)]
    Question(UnreadableId),
}

/// What an answer gives the question: the words a person typed, matched against the question
/// once, or what a surface already knows the shape of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Given {
    /// Text as typed after `/answer <id>`: an option's number or label, `yes`, free text…
    Text(String),
    /// One's own words (a form's "Other…" field), taken as written even when they look like
    /// a number (see [`crate::question::Question::own_words`]).
    OwnWords(String),
    /// A multi-select's ticked options, numbered from 1.
    Ticked(Vec<usize>),
}

impl std::fmt::Display for Given {
    /// The choice as a person would type it after `/answer <id>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Text(text) => f.write_str(text),
            Self::OwnWords(words) => write!(f, "\"{words}\""),
            Self::Ticked(ticked) => {
                let positions: Vec<String> = ticked.iter().map(|n| format!("#{n}")).collect();
                f.write_str(&positions.join(","))
            }
        }
    }
}

impl Command {
    /// Parses a message. `None` when the text is not a command (does not start with `/`).
    ///
    /// `/answer@botname …` (Telegram groups) is accepted; surrounding white space is ignored.
    pub fn parse(text: &str) -> Option<Result<Self, CommandError>> {
        let text = text.trim();
        let rest = text.strip_prefix('/')?;
        let (word, args) = match rest.split_once(char::is_whitespace) {
            Some((w, a)) => (w, a.trim()),
            None => (rest, ""),
        };
        let word = word.split_once('@').map_or(word, |(w, _)| w).to_ascii_lowercase();
        let (first, tail) = match args.split_once(char::is_whitespace) {
            Some((f, t)) => (f, t.trim()),
            None => (args, ""),
        };
        let optional = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let id = || first.parse::<QuestionRef>().map_err(CommandError::Question);
        Some(match word.as_str() {
            "answer" if !first.is_empty() && !tail.is_empty() => {
                id().map(|id| Self::Answer { id, choice: Given::Text(tail.to_owned()) })
            }
            "answer" => Err(CommandError::Usage("/answer <id> <choice>")),
            "decline" | "deny" if !first.is_empty() => id().map(|id| Self::Decline { id, feedback: optional(tail) }),
            "decline" => Err(CommandError::Usage("/decline <id> [feedback]")),
            "deny" => Err(CommandError::Usage("/deny <id> [feedback]")),
            "approve" if !first.is_empty() => Allow::parse(tail).and_then(|how| Ok(Self::Approve { id: id()?, how })),
            "approve" => Err(CommandError::Usage(APPROVE_USAGE)),
            "pending" => Ok(Self::Pending),
            "show" if !first.is_empty() && tail.is_empty() => id().map(|id| Self::Show { id }),
            "show" => Err(CommandError::Usage("/show <id>")),
            "run" if !first.is_empty() => Ok(Self::Run { function: first.to_owned(), input: tail.to_owned() }),
            "run" => Err(CommandError::Usage("/run <function> [input]")),
            "cancel" => Ok(Self::Cancel),
            "grants" => Ok(Self::Grants),
            "revoke" if !first.is_empty() && tail.is_empty() => Ok(Self::Revoke { id: first.to_owned() }),
            "revoke" => Err(CommandError::Usage("/revoke <grant id>")),
            "help" | "start" => Ok(Self::Help),
            "web" => Ok(Self::Web),
            word if card::WORDS.contains(&word) => card::parse(word, args),
            other => Err(CommandError::Unknown(crate::text::clip(other, 32, "…"))),
        })
    }
}

const APPROVE_USAGE: &str = "/approve <id> [once|always|always-like \"<pattern>\"|edit <new action>]";

/// How an approval is allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allow {
    /// This time.
    Once,
    /// Always: a standing grant for this action here.
    Always,
    /// Always, and every action the rule fits (`*` matches any run of characters); the rule
    /// without the quotes it may be typed in.
    Like(String),
    /// This time, as edited: this action instead (editable approvals).
    Edited(String),
}

impl Allow {
    /// What follows the id: nothing or `once`, `always`, `always-like <pattern>`, `edit <action>`.
    fn parse(tail: &str) -> Result<Self, CommandError> {
        let usage = || CommandError::Usage(APPROVE_USAGE);
        match tail.split_once(char::is_whitespace) {
            Some((word, action)) if word.eq_ignore_ascii_case("edit") => Ok(Self::Edited(action.trim().to_owned())),
            Some((word, pattern)) if word.eq_ignore_ascii_case("always-like") => match unquote(pattern.trim()) {
                "" => Err(usage()),
                pattern => Ok(Self::Like(pattern.to_owned())),
            },
            _ => match tail.to_ascii_lowercase().as_str() {
                "" | "once" => Ok(Self::Once),
                "always" => Ok(Self::Always),
                _ => Err(usage()),
            },
        }
    }
}

/// `"git push *"` → `git push *`: a pattern may be typed in straight or curly quotes.
fn unquote(text: &str) -> &str {
    for (open, close) in [('"', '"'), ('\'', '\''), ('“', '”')] {
        if let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(close)) {
            return inner.trim();
        }
    }
    text
}

impl Command {
    /// The question an answer, a decline or an approval names.
    pub fn question(&self) -> Option<&QuestionRef> {
        match self {
            Self::Answer { id, .. }
            | Self::Decline { id, .. }
            | Self::Approve { id, .. }
            | Self::Card { id, .. }
            | Self::Show { id } => Some(id),
            Self::Pending
            | Self::Run { .. }
            | Self::Cancel
            | Self::Help
            | Self::Web
            | Self::Grants
            | Self::Revoke { .. } => None,
        }
    }
}

impl std::fmt::Display for Command {
    /// The command as a person would type it (and as a button carries it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |t: &Option<String>| t.as_ref().map(|t| format!(" {t}")).unwrap_or_default();
        match self {
            Self::Answer { id, choice } => write!(f, "/answer {id} {choice}"),
            Self::Decline { id, feedback } => write!(f, "/decline {id}{}", tail(feedback)),
            Self::Approve { id, how: Allow::Once } => write!(f, "/approve {id}"),
            Self::Approve { id, how: Allow::Always } => write!(f, "/approve {id} always"),
            Self::Approve { id, how: Allow::Like(pattern) } => write!(f, "/approve {id} always-like \"{pattern}\""),
            Self::Approve { id, how: Allow::Edited(action) } => write!(f, "/approve {id} edit {action}"),
            Self::Pending => f.write_str("/pending"),
            Self::Show { id } => write!(f, "/show {id}"),
            Self::Run { function, input } if input.is_empty() => write!(f, "/run {function}"),
            Self::Run { function, input } => write!(f, "/run {function} {input}"),
            Self::Cancel => f.write_str("/cancel"),
            Self::Help => f.write_str("/help"),
            Self::Web => f.write_str("/web"),
            Self::Grants => f.write_str("/grants"),
            Self::Revoke { id } => write!(f, "/revoke {id}"),
            Self::Card { id, action } => action.write(id, f),
        }
    }
}

/// The command list `/help` shows, in `locale`: the English one is in docs/src/commands.md
/// (a test holds them together).
pub fn help(locale: crate::question::Locale) -> String {
    crate::say!(locale, "help.body")
}

/// The command a submitted form stands for (its id says which: `/answer <id>`, `/deny <id>`,
/// `/edit <id>`): an answer in the person's own words (taken as written, so a number is text,
/// not an option), or a rejection with a note.
pub fn form_command(custom_id: &str, text: &str) -> Option<(Command, QuestionId)> {
    let (action, id) = custom_id.split_once(' ')?;
    let question = id.trim().parse::<QuestionId>().ok()?;
    let id = QuestionRef::Id(question);
    let command = match action {
        "/answer" if !text.is_empty() => Command::Answer { id, choice: Given::OwnWords(text.to_owned()) },
        "/deny" => Command::Decline { id, feedback: (!text.is_empty()).then(|| text.to_owned()) },
        "/edit" if !text.is_empty() => Command::Approve { id, how: Allow::Edited(text.to_owned()) },
        _ => return None,
    };
    Some((command, question))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Command, CommandError> {
        Command::parse(s).expect("a command")
    }

    fn r(id: &str) -> QuestionRef {
        id.parse().expect("a question reference")
    }

    #[test]
    fn a_command_about_a_question_names_one() {
        let too_short = CommandError::Question(UnreadableId::TooShort("ab".into()));
        assert_eq!(parse("/answer ab 2"), Err(too_short));
        assert_eq!(parse("/show zzzz"), Err(CommandError::Question(UnreadableId::NotAnId("zzzz".into()))));
        assert_eq!(parse("/answer ab"), Err(CommandError::Usage("/answer <id> <choice>")), "usage comes first");
    }

    #[test]
    fn help_and_the_docs_list_the_same_commands() {
        let readme = include_str!("../docs/src/commands.md");
        let help = help(crate::question::Locale::En);
        assert!(readme.contains(&format!("```\n{help}\n```")), "/help and docs/src/commands.md differ");
    }

    #[test]
    fn a_rule_is_typed_after_always_like_with_or_without_quotes() {
        let like = |id: &str, pattern: &str| Ok(Command::Approve { id: r(id), how: Allow::Like(pattern.into()) });
        assert_eq!(parse("/approve 1a2b always-like \"git push *\""), like("1a2b", "git push *"));
        assert_eq!(parse("/approve 1a2b ALWAYS-LIKE git push *"), like("1a2b", "git push *"));
        assert_eq!(parse("/approve 1a2b always-like “deploy *”"), like("1a2b", "deploy *"));
        assert_eq!(parse("/approve 1a2b always-like \"\""), Err(CommandError::Usage(APPROVE_USAGE)));
        assert_eq!(parse("/approve 1a2b sometimes"), Err(CommandError::Usage(APPROVE_USAGE)));
        let typed = Command::Approve { id: r("1a2b"), how: Allow::Like("git push *".into()) };
        assert_eq!(parse(&typed.to_string()), Ok(typed));
    }

    #[test]
    fn an_edit_carries_the_new_action() {
        let edit = Command::Approve { id: r("1a2b"), how: Allow::Edited("git push --dry-run".into()) };
        assert_eq!(parse("/approve 1a2b edit git push --dry-run"), Ok(edit.clone()));
        assert_eq!(parse("/approve 1a2b EDIT   git push --dry-run "), Ok(edit.clone()));
        assert_eq!(parse(&edit.to_string()), Ok(edit));
    }

    #[test]
    fn show_names_one_question() {
        assert_eq!(parse("/show 1a2b3c4d"), Ok(Command::Show { id: r("1a2b3c4d") }));
        assert_eq!(parse("/show"), Err(CommandError::Usage("/show <id>")));
        assert_eq!(parse("/show 1a2b more"), Err(CommandError::Usage("/show <id>")));
        assert_eq!(Command::Show { id: r("1a2b") }.to_string(), "/show 1a2b");
    }

    #[test]
    fn grants_are_listed_and_revoked_by_id() {
        assert_eq!(parse("/grants"), Ok(Command::Grants));
        assert_eq!(parse("/revoke 1a2b3c4d"), Ok(Command::Revoke { id: "1a2b3c4d".into() }));
        assert_eq!(parse("/revoke"), Err(CommandError::Usage("/revoke <grant id>")));
        assert_eq!(parse("/revoke a b"), Err(CommandError::Usage("/revoke <grant id>")));
        assert_eq!(Command::Revoke { id: "1a2b".into() }.to_string(), "/revoke 1a2b");
    }

    #[test]
    fn plain_text_is_not_a_command() {
        assert_eq!(Command::parse("2"), None);
        assert_eq!(Command::parse("dayjs please"), None);
    }

    #[test]
    fn answer_keeps_the_whole_choice() {
        assert_eq!(
            parse("  /answer 0b6f12ab my own text \n"),
            Ok(Command::Answer { id: r("0b6f12ab"), choice: Given::Text("my own text".into()) })
        );
    }

    #[test]
    fn bot_name_suffix_is_accepted() {
        assert_eq!(
            parse("/answer@askbot abcd 2"),
            Ok(Command::Answer { id: r("abcd"), choice: Given::Text("2".into()) })
        );
        assert_eq!(parse("/HELP@askbot"), Ok(Command::Help));
    }

    #[test]
    fn answer_without_choice_gets_usage() {
        assert_eq!(parse("/answer abcd"), Err(CommandError::Usage("/answer <id> <choice>")));
    }

    #[test]
    fn deny_is_decline_and_approve_defaults_to_once() {
        assert_eq!(
            parse("/deny abcd too risky"),
            Ok(Command::Decline { id: r("abcd"), feedback: Some("too risky".into()) })
        );
        assert_eq!(parse("/approve abcd"), Ok(Command::Approve { id: r("abcd"), how: Allow::Once }));
        assert_eq!(parse("/approve abcd always"), Ok(Command::Approve { id: r("abcd"), how: Allow::Always }));
        assert!(parse("/approve abcd sometimes").is_err());
    }

    #[test]
    fn run_splits_function_and_input() {
        assert_eq!(parse("/run demo"), Ok(Command::Run { function: "demo".into(), input: String::new() }));
        assert_eq!(
            parse("/run deploy prod now"),
            Ok(Command::Run { function: "deploy".into(), input: "prod now".into() })
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Text as people type it: no surrounding white space, at least one character.
        fn words() -> impl Strategy<Value = String> {
            "[^\\s][^\\n]{0,40}".prop_map(|s| s.trim().to_owned()).prop_filter("not blank", |s| !s.is_empty())
        }

        fn token() -> impl Strategy<Value = String> {
            "[A-Za-z0-9-]{1,36}"
        }

        /// A question as people name it: a prefix, any case, or a whole id.
        fn question() -> impl Strategy<Value = QuestionRef> {
            "[0-9a-fA-F-]{4,36}".prop_map(|s| s.parse().expect("hex digits and hyphens name a question"))
        }

        fn command() -> impl Strategy<Value = Command> {
            prop_oneof![
                (question(), words()).prop_map(|(id, choice)| Command::Answer { id, choice: Given::Text(choice) }),
                (question(), proptest::option::of(words()))
                    .prop_map(|(id, feedback)| Command::Decline { id, feedback }),
                (question(), any::<bool>()).prop_map(|(id, always)| Command::Approve {
                    id,
                    how: if always { Allow::Always } else { Allow::Once }
                }),
                Just(Command::Pending),
                (token(), proptest::option::of(words()))
                    .prop_map(|(function, input)| Command::Run { function, input: input.unwrap_or_default() }),
                Just(Command::Cancel),
                Just(Command::Help),
            ]
        }

        proptest! {
            #[test]
            fn any_text_parses_without_panicking(text in "\\PC{0,200}") {
                let _ = Command::parse(&text);
            }

            #[test]
            fn a_command_rendered_parses_back_to_itself(command in command()) {
                let text = command.to_string();
                prop_assert_eq!(Command::parse(&text), Some(Ok(command)), "{}", text);
            }
        }
    }

    #[test]
    fn unknown_command_is_named() {
        assert_eq!(parse("/frobnicate x"), Err(CommandError::Unknown("frobnicate".into())));
    }
}
