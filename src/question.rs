//! The question domain: who asks where, what is asked, and how it ends.
//!
//! Everything here is plain data with validation at construction. The store persists it, the
//! engine moves it through its states, and every surface renders the same [`Question`] snapshot.

mod approvals;
mod ask;
mod choice;
mod duration;
pub mod form;
mod locale;
mod nudge;
mod outcome;
mod person;
pub mod rule;
mod wire;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use approvals::Approver;
pub use ask::{Ask, InvalidAsk, MAX_QUORUM, Origin, Timeout, ValidAsk};
pub use choice::{Choice, InvalidChoice, edited_action};
pub use duration::parse_duration;
pub use locale::{Locale, Presentation, Zone, clock};
pub use nudge::{MIN_REMIND_EVERY_MS, Nudges, millis};
pub use outcome::{Outcome, Receipt, cancel_reason, display_value, display_value_in};
pub use person::{API_OPERATOR, CONSOLE_OPERATOR, display_name, lists, typed_name};
pub use wire::AskWire;

/// The most options one question may carry: what a Discord select menu holds, and well within
/// Telegram's keyboard limits, so every surface can show every option as something to tap.
pub const MAX_OPTIONS: usize = 25;
/// The longest option label: Discord's limit for a select option.
pub const MAX_OPTION_LEN: usize = 100;
/// The longest description of an option, in characters: one line under its label. Surfaces with
/// a tighter limit (a Discord select option's 100, a Slack one's 75) shorten it further.
pub const MAX_DESCRIPTION_LEN: usize = 200;
/// The longest prompt or detail askgate stores; surfaces shorten further to their own limits.
pub const MAX_TEXT_LEN: usize = 16 * 1024;
/// The longest name of a person kept, in characters.
pub const MAX_NAME: usize = 64;

/// Characters that change how text around them reads without showing themselves: the
/// bidirectional controls (a name `@\u{202E}ecila` would read as another person) and the
/// zero-width ones (a blank-looking prompt, or two names that look alike).
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{180E}' | '\u{FEFF}')
}

/// How many characters of a question id text surfaces show.
pub const SHORT_ID_LEN: usize = 8;

/// The JSON Schema of a type that is text on the wire (an id, a reference), inlined where used.
macro_rules! string_schema {
    ($name:ident, $schema:tt) => {
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!($schema)
            }
        }
    };
}

mod id;
pub use id::{QuestionId, QuestionRef, RunId, UnreadableId};

/// Where a human talks to the bot: `channel:chat[:thread]`, e.g. `telegram:-100123:7`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Conversation(String);

/// A person on a channel: `channel:id`, e.g. `telegram:42`, `console:local`, `api:ops`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserRef(String);

/// A conversation or user reference that is not `channel:rest` (without white space, control or
/// invisible characters).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not of the form channel:id (e.g. {example})", example = EXAMPLE_USER)]
pub struct BadRef(pub String);

fn parse_ref(s: &str) -> Result<(), BadRef> {
    let ok = match s.split_once(':') {
        Some((channel, rest)) => {
            !channel.is_empty()
                && channel.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !rest.is_empty()
                && !rest.chars().any(|c| c.is_whitespace() || c.is_control() || is_invisible(c))
        }
        None => false,
    };
    if ok && s.len() <= 256 { Ok(()) } else { Err(BadRef(s.to_owned())) }
}

macro_rules! channel_ref {
    ($name:ident, $example:expr) => {
        string_schema!($name, {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]+:[^\\s]+$",
            "maxLength": 256,
            "examples": [$example],
        });

        impl $name {
            /// Parses `channel:rest`.
            ///
            /// # Errors
            /// [`BadRef`] when the text has no channel part, an empty rest, or white space.
            pub fn parse(s: &str) -> Result<Self, BadRef> {
                parse_ref(s).map(|()| Self(s.to_owned()))
            }

            /// The channel part: `telegram` of `telegram:42`.
            pub fn channel(&self) -> &str {
                self.0.split_once(':').map_or("", |(c, _)| c)
            }

            /// The whole reference.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = BadRef;
            fn try_from(s: String) -> Result<Self, BadRef> {
                parse_ref(&s).map(|()| Self(s))
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }
    };
}

/// The person examples name (in messages, the API's schema): someone on a chat platform.
pub const EXAMPLE_USER: &str = "telegram:42";

/// The conversation examples name: a group on a chat platform.
const EXAMPLE_GROUP: &str = "telegram:-100123";

channel_ref!(Conversation, EXAMPLE_GROUP);
channel_ref!(UserRef, EXAMPLE_USER);

/// Declares a closed set of states stored as text in a CHECK-constrained column.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            /// The stored and displayed name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err(format!("unknown {} `{other}`", stringify!($name))),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use text_enum;

text_enum!(
    /// What sort of ask this is.
    Kind {
        /// Free text, pick one, or pick many.
        Question = "question",
        /// Yes or no.
        Confirm = "confirm",
        /// Allow once, allow always, or reject.
        Approval = "approval",
        /// Several fields of one flat object, answered together.
        Form = "form",
    }
);

text_enum!(
    /// Where a question stands. Every status but `Pending` is final.
    Status {
        /// Waiting for a human.
        Pending = "pending",
        /// Someone answered (for an approval: allowed).
        Answered = "answered",
        /// Someone declined (for an approval: rejected).
        Declined = "declined",
        /// The deadline passed; the fallback was applied.
        Expired = "expired",
        /// Closed without an answer: /cancel, shutdown, a lost instance, a dead process.
        Cancelled = "cancelled",
    }
);

mod surface;
pub use surface::Surface;

text_enum!(
    /// How a run's asks behave.
    Mode {
        /// `ask` returns pending at once; the run is replayed when the answer comes.
        FollowUp = "follow_up",
        /// `ask` awaits the answer; the run holds its place meanwhile.
        Blocking = "blocking",
        /// A question an external agent posted through the API; it waits by long-polling.
        External = "external",
    }
);

/// Who may answer a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Answerers {
    /// Only the user who started the run.
    Initiator {
        /// That user.
        user: UserRef,
    },
    /// Anyone in the conversation.
    Conversation,
    /// These users.
    Users {
        /// The users allowed to answer.
        users: Vec<UserRef>,
    },
}

impl Answerers {
    /// Whether `user` may answer.
    pub fn admits(&self, user: &UserRef) -> bool {
        match self {
            Self::Initiator { user: u } => u.same_person(user),
            Self::Conversation => true,
            Self::Users { users } => lists(users, user),
        }
    }
}

/// The persisted snapshot of one ask: what every surface renders.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Question {
    /// The id.
    pub id: QuestionId,
    /// Where it is asked.
    pub conversation: Option<Conversation>,
    /// The run that asked.
    pub run: RunId,
    /// The run's ask number, from 0.
    pub step: u32,
    /// How the run waits for it.
    pub mode: Mode,
    /// Question, confirm or approval.
    pub kind: Kind,
    /// What the human reads first.
    pub prompt: String,
    /// More context.
    pub detail: Option<String>,
    /// The options.
    pub options: Vec<String>,
    /// One line about each option, by position (blank: none); empty when no option has one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub descriptions: Vec<String>,
    /// Pick many.
    pub multi: bool,
    /// Free text allowed.
    pub allow_custom: bool,
    /// The fields of a form, or of several questions asked together (then its kind is
    /// `question`); none for one question, a confirm or an approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form: Option<form::Form>,
    /// Applied on timeout.
    pub default: Option<Value>,
    /// How its cards read: askgate's language there and the time zone of their times.
    #[serde(flatten)]
    pub presentation: Presentation,
    /// Who may answer.
    pub answerers: Answerers,
    /// The replay fingerprint of (kind, prompt, options).
    pub fingerprint: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds; none: never.
    pub expires_at: Option<i64>,
    /// Where it stands.
    pub status: Status,
    /// How it ended.
    pub outcome: Option<Outcome>,
    /// Who resolved it: a stable id (`telegram:42`).
    pub answered_by: Option<String>,
    /// How people know who resolved it (`@alice`), when the surface said.
    pub answered_name: Option<String>,
    /// Where it was resolved.
    pub answered_via: Option<Surface>,
    /// When it was resolved, unix milliseconds.
    pub resolved_at: Option<i64>,
    /// How many distinct people must approve (an approval; 1 for everything else).
    pub quorum: u32,
    /// Who approved so far, in order (a quorum approval).
    pub approvals: Vec<Approver>,
    /// Reminders and escalation while it waits.
    #[serde(skip_serializing_if = "Nudges::is_empty")]
    pub nudges: Nudges,
    /// When the sweeper next reminds or escalates, unix milliseconds; none: nothing is left.
    #[serde(skip)]
    pub nudge_at: Option<i64>,
    /// The conversation it was escalated to, once it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalated_to: Option<Conversation>,
    /// Who asks, as cards name it: the function (`deploy`), the agent (`mcp:agent.claude-code`,
    /// `agent:ci`), or for a gated call the agent and the upstream (`mcp:agent.claude-code via
    /// files`). Empty for a question stored before askgate recorded it.
    pub asked_by: String,
}

impl Question {
    /// Whether this is the copy a channel's lane shows in the conversation the question was
    /// escalated to (its conversation set to that one): what happens to it there leaves the
    /// question as it is where it was asked.
    pub fn is_escalation_copy(&self) -> bool {
        self.conversation.is_some() && self.conversation == self.nudges.escalate_to
    }

    /// Whether the question is still waiting.
    pub fn is_pending(&self) -> bool {
        self.status == Status::Pending
    }

    /// Whether it is shown in `conversation`: its own, or the one it was escalated to.
    pub fn is_in(&self, conversation: &Conversation) -> bool {
        self.conversation.as_ref() == Some(conversation) || self.escalated_to.as_ref() == Some(conversation)
    }

    /// Whether `user`, writing from `conversation` (if from one), may answer it: one of its
    /// answerers, or in the conversation it was escalated to one of the escalation's answerers
    /// (anyone there unless `escalate_answerers` names them). "Anyone in the conversation" is
    /// someone writing there: through the API (no conversation) only the operator, and only in
    /// the console's conversation, which is theirs.
    pub fn admits(&self, user: &UserRef, conversation: Option<&Conversation>) -> bool {
        let escalated_here = self.escalated_to.is_some() && self.escalated_to.as_ref() == conversation;
        let listed = match (&self.answerers, conversation) {
            (Answerers::Conversation, Some(from)) => self.conversation.as_ref() == Some(from),
            (Answerers::Conversation, None) => {
                user.is_operator() && self.conversation.as_ref().is_some_and(|c| c.channel() == "console")
            }
            (other, _) => other.admits(user),
        };
        listed || escalated_here && self.nudges.escalate_answerers.as_ref().is_none_or(|users| lists(users, user))
    }

    /// The description of the option at `index` (from 0), when it has one.
    pub fn description(&self, index: usize) -> Option<&str> {
        self.descriptions.get(index).map(String::as_str).filter(|d| !d.is_empty())
    }

    /// Who resolved it, as people know them: the name when the surface gave one, else the id.
    pub fn answerer(&self) -> Option<&str> {
        self.answered_name.as_deref().or(self.answered_by.as_deref())
    }

    /// A one-line statement of how it ended, as its cards say it (in their language):
    /// `✅ dayjs — @alice via telegram`.
    pub fn outcome_line(&self) -> String {
        self.outcome_line_in(self.presentation.locale)
    }

    /// [`Question::outcome_line`] in `locale` (English where programs and agents read it).
    pub fn outcome_line_in(&self, locale: Locale) -> String {
        let Some(outcome) = &self.outcome else {
            return crate::say!(locale, "outcome.pending");
        };
        let mark = match outcome {
            Outcome::Answered { .. } => "✅",
            Outcome::Declined { .. } => "❌",
            Outcome::Expired { .. } => "⌛",
            Outcome::Cancelled { .. } => "⛔",
        };
        let mut line = format!("{mark} {}", outcome.summary_in(self.kind, locale));
        if let (Outcome::Answered { .. }, Some(tally)) = (outcome, self.tally_in(locale)) {
            // Allowed by several people: all of them.
            line.push_str(&crate::say!(locale, "outcome.by", by = tally));
        } else if let (Outcome::Answered { .. } | Outcome::Declined { .. }, Some(by)) = (outcome, self.answerer()) {
            line.push_str(&crate::say!(locale, "outcome.by", by = by));
            if let Some(via) = self.answered_via {
                line.push_str(&crate::say!(locale, "outcome.via", via = via));
            }
        }
        line
    }
}

/// A pending question of a throwaway run, for unit tests of rendering and matching.
#[cfg(test)]
pub(crate) fn test_question(ask: Ask) -> Question {
    let origin = Origin {
        run: RunId::new(),
        conversation: None,
        mode: Mode::FollowUp,
        step: 0,
        asker: "test".into(),
        presentation: Presentation::default(),
    };
    ask.validate().unwrap().pending(origin, Answerers::Conversation, 0, Some(60_000)).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_capped_and_blank_is_none() {
        assert_eq!(display_name("  @alice\u{7}\n ").as_deref(), Some("@alice"));
        assert_eq!(display_name(" \t\u{0} "), None);
        let long = "é".repeat(MAX_NAME + 10);
        assert_eq!(display_name(&long).map(|n| n.chars().count()), Some(MAX_NAME + 2), "and its quotes");
    }

    #[test]
    fn conversation_needs_a_channel_and_a_chat() {
        assert!(Conversation::parse("telegram:-100123:7").is_ok());
        assert_eq!(Conversation::parse("telegram:42").unwrap().channel(), "telegram");
        for bad in ["", "telegram", ":42", "telegram:", "tele gram:1", "telegram:4 2"] {
            assert!(Conversation::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn empty_prompt_is_refused() {
        assert_eq!(Ask::question("  ").validate(), Err(InvalidAsk::EmptyPrompt));
        assert_eq!(Ask::question(" \u{200B}\u{FEFF} \u{2060}").validate(), Err(InvalidAsk::EmptyPrompt));
    }

    #[test]
    fn names_lose_bidirectional_and_zero_width_characters() {
        assert_eq!(display_name("@\u{202E}ecila").as_deref(), Some("@ecila"));
        assert_eq!(display_name("al\u{200B}ice\u{2066}").as_deref(), Some("“alice”"));
        assert_eq!(display_name("\u{200B}\u{200D}"), None);
    }

    #[test]
    fn duplicate_labels_are_refused_case_insensitively() {
        let err = Ask::question("Pick").options(["dayjs", "DayJS"]).validate().unwrap_err();
        assert_eq!(err, InvalidAsk::DuplicateOption("DayJS".into()));
    }

    #[test]
    fn default_must_be_an_option_unless_free_text_is_allowed() {
        let err = Ask::question("Pick").options(["a", "b"]).default_value("c").validate().unwrap_err();
        assert_eq!(err, InvalidAsk::DefaultNotAnOption("c".into()));
        let ok = Ask::question("Pick").options(["a", "b"]).default_value("B").validate().unwrap();
        assert_eq!(ok.default, Some(Value::String("b".into())), "default is canonicalised");
        assert!(Ask::question("Pick").options(["a"]).allow_custom(true).default_value("c").validate().is_ok());
    }

    #[test]
    fn too_many_options_are_refused() {
        let options: Vec<String> = (0..=MAX_OPTIONS).map(|i| format!("o{i}")).collect();
        let err = Ask::question("Pick").options(options).validate().unwrap_err();
        assert_eq!(err, InvalidAsk::TooManyOptions { count: MAX_OPTIONS + 1, max: MAX_OPTIONS });
    }

    #[test]
    fn confirm_defaults_to_no_and_takes_only_a_bool() {
        let ask = Ask::confirm("Archive?").validate().unwrap();
        assert_eq!(ask.default, Some(Value::Bool(false)));
        assert!(Ask::confirm("Archive?").default_value("yes").validate().is_err());
    }

    #[test]
    fn a_quorum_approval_shows_its_count_and_every_approver_once_allowed() {
        let mut q = test_question(Ask::approval("deploy").quorum(2));
        assert_eq!(q.tally().as_deref(), Some("0 of 2 approvals"));
        let approver = |user: &str, name: Option<&str>| Approver {
            user: user.into(),
            name: name.map(Into::into),
            via: Surface::platform("telegram"),
            at: 0,
        };
        q.approvals = vec![approver("telegram:1", Some("@alice"))];
        assert_eq!(q.tally().as_deref(), Some("1 of 2 approvals: @alice"));
        q.approvals.push(approver("discord:2", None));
        q.status = Status::Answered;
        q.outcome = Some(Outcome::Answered { value: Value::String("once".into()) });
        q.answered_by = Some("discord:2".into());
        assert_eq!(q.outcome_line(), "✅ allowed once — 2 of 2 approvals: @alice, discord:2");
        assert_eq!(test_question(Ask::approval("deploy")).tally(), None, "one approver: no count");
    }

    #[test]
    fn fingerprint_changes_with_prompt_and_options() {
        let a = Ask::question("Pick").options(["a", "b"]).validate().unwrap();
        let b = Ask::question("Pick").options(["a", "c"]).validate().unwrap();
        let c = Ask::question("Pick!").options(["a", "b"]).validate().unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint(), Ask::question("Pick").options(["a", "b"]).validate().unwrap().fingerprint());
    }
}
