//! The question domain: who asks where, what is asked, and how it ends.
//!
//! Everything here is plain data with validation at construction. The store persists it, the
//! engine moves it through its states, and every surface renders the same [`Question`] snapshot.

mod choice;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

pub use choice::{Choice, InvalidChoice};

/// The most options one question may carry: what a Discord select menu holds, and well within
/// Telegram's keyboard limits, so every surface can show every option as something to tap.
pub const MAX_OPTIONS: usize = 25;
/// The longest option label: Discord's limit for a select option.
pub const MAX_OPTION_LEN: usize = 100;
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

/// A person's name as a surface or an API client gave it, cleaned to be shown with an outcome:
/// control, bidirectional and zero-width characters dropped, whitespace trimmed, at most
/// [`MAX_NAME`] characters; blank is none.
pub fn display_name(raw: &str) -> Option<String> {
    let clean: String = raw.chars().filter(|&c| !c.is_control() && !is_invisible(c)).collect();
    let clean: String = clean.trim().chars().take(MAX_NAME).collect();
    (!clean.is_empty()).then_some(clean)
}

/// How many characters of a question id text surfaces show.
pub const SHORT_ID_LEN: usize = 8;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new random (v4) id.
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// The id of one question: a UUID v4, shown in full in button payloads and by its first
    /// eight characters on text surfaces.
    QuestionId
);
uuid_id!(
    /// The id of one run of a function.
    RunId
);

impl QuestionId {
    /// The first eight characters, as text surfaces show the id.
    pub fn short(&self) -> String {
        let mut s = self.to_string();
        s.truncate(SHORT_ID_LEN);
        s
    }
}

impl RunId {
    /// The first eight characters, as messages to people name a run.
    pub fn short(&self) -> String {
        let mut s = self.to_string();
        s.truncate(SHORT_ID_LEN);
        s
    }
}

/// Where a human talks to the bot: `channel:chat[:thread]`, e.g. `telegram:-100123:7`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Conversation(String);

/// A person on a channel: `channel:id`, e.g. `telegram:42`, `console:local`, `api:ops`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserRef(String);

/// A conversation or user reference that is not `channel:rest`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not of the form channel:id (e.g. telegram:42)")]
pub struct BadRef(pub String);

fn parse_ref(s: &str) -> Result<(), BadRef> {
    let ok = match s.split_once(':') {
        Some((channel, rest)) => {
            !channel.is_empty()
                && channel.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !rest.is_empty()
                && !rest.chars().any(char::is_whitespace)
        }
        None => false,
    };
    if ok && s.len() <= 256 { Ok(()) } else { Err(BadRef(s.to_owned())) }
}

macro_rules! channel_ref {
    ($name:ident) => {
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

channel_ref!(Conversation);
channel_ref!(UserRef);

/// Declares a closed set of states stored as text in a CHECK-constrained column.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
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
        /// Closed without an answer: /cancel, shutdown, restart, a dead process.
        Cancelled = "cancelled",
    }
);

text_enum!(
    /// Where an answer came from.
    Surface {
        /// A Telegram button or message.
        Telegram = "telegram",
        /// A Discord component or message.
        Discord = "discord",
        /// The local stdin/stdout channel.
        Console = "console",
        /// A text channel reached through signed webhooks.
        Webhook = "webhook",
        /// The web page.
        Web = "web",
        /// The REST API.
        Api = "api",
        /// askgate itself: timeouts, cancellations, standing grants.
        Gateway = "gateway",
    }
);

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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
            Self::Initiator { user: u } => u == user,
            Self::Conversation => true,
            Self::Users { users } => users.contains(user),
        }
    }
}

/// How a question ended, as the function receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Answered with a value: text, a list for multi, a bool for confirm, `once`/`always`
    /// for an approval.
    Answered {
        /// The answer.
        value: Value,
    },
    /// Declined, or for an approval rejected, with optional feedback.
    Declined {
        /// What the human said, if anything.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// No answer before the deadline; `value` is the fallback that was applied (none: the
    /// function sees a timeout error).
    Expired {
        /// The default that was applied.
        #[serde(default)]
        value: Option<Value>,
    },
    /// Closed without an answer.
    Cancelled {
        /// Why: `cancelled by console:local`, `shutdown`, `restart`, `no_human`.
        reason: String,
    },
}

impl Outcome {
    /// The status a question with this outcome has.
    pub fn status(&self) -> Status {
        match self {
            Self::Answered { .. } => Status::Answered,
            Self::Declined { .. } => Status::Declined,
            Self::Expired { .. } => Status::Expired,
            Self::Cancelled { .. } => Status::Cancelled,
        }
    }

    /// A short human summary: `dayjs`, `declined: not now`, `expired, used no`.
    pub fn summary(&self, kind: Kind) -> String {
        match self {
            Self::Answered { value } => display_value(kind, value),
            Self::Declined { feedback } => {
                let word = if kind == Kind::Approval { "rejected" } else { "declined" };
                match feedback {
                    Some(f) => format!("{word}: {f}"),
                    None => word.to_owned(),
                }
            }
            Self::Expired { value: Some(v) } => format!("expired, used {}", display_value(kind, v)),
            Self::Expired { value: None } => "expired, no default".to_owned(),
            Self::Cancelled { reason } => format!("cancelled ({reason})"),
        }
    }
}

/// Renders an answer value for people.
pub fn display_value(kind: Kind, value: &Value) -> String {
    match (kind, value) {
        (_, Value::String(s)) if kind == Kind::Approval => match s.as_str() {
            "once" => "allowed once".to_owned(),
            "always" => "allowed always".to_owned(),
            other => other.to_owned(),
        },
        (_, Value::String(s)) => s.clone(),
        (_, Value::Bool(true)) => "yes".to_owned(),
        (_, Value::Bool(false)) => "no".to_owned(),
        (_, Value::Array(items)) => {
            items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect::<Vec<_>>().join(", ")
        }
        (_, other) => other.to_string(),
    }
}

/// What a resolve attempt reports back to the person who made it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "receipt", rename_all = "snake_case")]
pub enum Receipt {
    /// This attempt won; the outcome is recorded.
    Resolved {
        /// The question.
        id: QuestionId,
        /// What was recorded.
        outcome: Outcome,
    },
    /// Someone already resolved it the same way.
    AlreadyResolvedSame {
        /// The question.
        id: QuestionId,
        /// Who answered first.
        by: Option<String>,
    },
    /// Someone already resolved it differently.
    AlreadyResolvedConflict {
        /// The question.
        id: QuestionId,
        /// What it was resolved to.
        outcome: Outcome,
        /// Who answered first.
        by: Option<String>,
    },
    /// The deadline passed before this attempt.
    Expired {
        /// The question.
        id: QuestionId,
    },
    /// This user is not among the question's answerers; nothing changed.
    NotAuthorized {
        /// The question.
        id: QuestionId,
    },
    /// No question of this conversation has that id (or the prefix is ambiguous).
    Unknown {
        /// Why the id did not match.
        reason: String,
    },
    /// The choice does not fit the question; it stays pending.
    InvalidChoice {
        /// The question.
        id: QuestionId,
        /// What would have been accepted.
        hint: String,
    },
}

/// A fallback timeout for one ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Timeout {
    /// The gateway's `default_timeout`.
    #[default]
    Default,
    /// This many seconds.
    Seconds(u64),
    /// Never expires.
    Never,
}

impl Timeout {
    /// A timeout as JSON gives it (the process protocol, the API): a positive number of
    /// seconds, `"never"`, or null/absent for the default.
    ///
    /// # Errors
    /// A message naming the value.
    pub fn from_json(value: Option<&Value>) -> Result<Self, String> {
        match value {
            None | Some(Value::Null) => Ok(Self::Default),
            Some(Value::String(s)) if s == "never" => Ok(Self::Never),
            Some(Value::Number(n)) if n.as_u64().is_some_and(|s| s > 0) => Ok(Self::Seconds(n.as_u64().unwrap_or(1))),
            Some(other) => Err(format!("timeout {other} is not a positive number of seconds or \"never\"")),
        }
    }
}

/// What a function asks, before validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ask {
    /// Question, confirm or approval.
    pub kind: Option<Kind>,
    /// What the human reads first.
    pub prompt: String,
    /// More context, shown under the prompt.
    pub detail: Option<String>,
    /// The options to pick from; empty for free text.
    pub options: Vec<String>,
    /// Pick many.
    pub multi: bool,
    /// Free text allowed besides the options.
    pub allow_custom: bool,
    /// Applied on timeout.
    pub default: Option<Value>,
    /// When to give up.
    pub timeout: Timeout,
    /// Who may answer; `None` uses the run's policy.
    pub answerers: Option<Answerers>,
}

impl Ask {
    /// A question with free text or options.
    pub fn question(prompt: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Question), prompt: prompt.into(), ..Self::default() }
    }

    /// A yes/no confirmation; its default on timeout is `false` unless set.
    pub fn confirm(prompt: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Confirm), prompt: prompt.into(), ..Self::default() }
    }

    /// An approval of an action.
    pub fn approval(action: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Approval), prompt: action.into(), ..Self::default() }
    }

    /// Sets the options.
    pub fn options<I, S>(mut self, options: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.options = options.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Allows picking many options.
    pub fn multi(mut self, multi: bool) -> Self {
        self.multi = multi;
        self
    }

    /// Allows free text besides the options.
    pub fn allow_custom(mut self, allow: bool) -> Self {
        self.allow_custom = allow;
        self
    }

    /// Sets the value applied on timeout.
    pub fn default_value(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Timeout) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets who may answer.
    pub fn answerers(mut self, answerers: Answerers) -> Self {
        self.answerers = Some(answerers);
        self
    }

    /// Checks the ask and returns its validated form.
    ///
    /// # Errors
    /// [`InvalidAsk`] naming what is wrong: an empty prompt, empty or duplicate options, too
    /// many options, a default that is not an option or has the wrong type.
    pub fn validate(self) -> Result<ValidAsk, InvalidAsk> {
        let kind = self.kind.unwrap_or(Kind::Question);
        let prompt = self.prompt.trim().to_owned();
        if prompt.chars().all(|c| c.is_whitespace() || is_invisible(c)) {
            return Err(InvalidAsk::EmptyPrompt);
        }
        if prompt.len() > MAX_TEXT_LEN || self.detail.as_ref().is_some_and(|d| d.len() > MAX_TEXT_LEN) {
            return Err(InvalidAsk::TooLong { max: MAX_TEXT_LEN });
        }
        let mut ask = ValidAsk {
            kind,
            prompt,
            detail: self.detail.filter(|d| !d.trim().is_empty()),
            options: Vec::new(),
            multi: false,
            allow_custom: false,
            default: self.default,
            timeout: self.timeout,
            answerers: self.answerers,
        };
        match kind {
            Kind::Question => {
                let mut options: Vec<String> = Vec::with_capacity(self.options.len());
                for label in self.options {
                    let label = label.trim().to_owned();
                    if label.is_empty() {
                        return Err(InvalidAsk::EmptyOption);
                    }
                    if label.chars().count() > MAX_OPTION_LEN {
                        return Err(InvalidAsk::OptionTooLong { label, max: MAX_OPTION_LEN });
                    }
                    if options.iter().any(|o| o.eq_ignore_ascii_case(&label)) {
                        return Err(InvalidAsk::DuplicateOption(label));
                    }
                    options.push(label);
                }
                if options.len() > MAX_OPTIONS {
                    return Err(InvalidAsk::TooManyOptions { count: options.len(), max: MAX_OPTIONS });
                }
                if self.multi && options.is_empty() {
                    return Err(InvalidAsk::MultiWithoutOptions);
                }
                ask.allow_custom = self.allow_custom || options.is_empty();
                ask.multi = self.multi;
                ask.options = options;
                if let Some(default) = &ask.default {
                    ask.default = Some(ask.check_default(default)?);
                }
            }
            Kind::Confirm => {
                ask.options = vec!["Yes".to_owned(), "No".to_owned()];
                match ask.default {
                    None => ask.default = Some(Value::Bool(false)),
                    Some(Value::Bool(_)) => {}
                    Some(ref other) => return Err(InvalidAsk::BadDefault(other.to_string())),
                }
            }
            Kind::Approval => {
                ask.options = vec!["Allow once".to_owned(), "Allow always".to_owned(), "Reject".to_owned()];
                // An approval never allows by itself: a timeout without an answer is a timeout.
                if let Some(d) = &ask.default {
                    return Err(InvalidAsk::BadDefault(format!("{d} (approvals take no default)")));
                }
            }
        }
        Ok(ask)
    }
}

/// Why an ask was refused before anything was persisted.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum InvalidAsk {
    /// The prompt is empty or blank.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt or detail is longer than askgate stores.
    #[error("the prompt or detail is longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// An option is empty or blank.
    #[error("an option is empty")]
    EmptyOption,
    /// An option label is too long for the surfaces.
    #[error("option `{label}` is longer than {max} characters")]
    OptionTooLong {
        /// The label.
        label: String,
        /// The limit.
        max: usize,
    },
    /// Two options have the same label (case-insensitive).
    #[error("option `{0}` is listed twice")]
    DuplicateOption(String),
    /// More options than every surface can show.
    #[error("{count} options is more than the {max} every surface can show")]
    TooManyOptions {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A multi-select question without options.
    #[error("a multi-select question needs options")]
    MultiWithoutOptions,
    /// The default is not one of the options.
    #[error("the default `{0}` is not one of the options")]
    DefaultNotAnOption(String),
    /// The default has the wrong type for this kind.
    #[error("the default {0} does not fit this kind of question")]
    BadDefault(String),
}

/// A checked ask, ready to persist.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidAsk {
    /// Question, confirm or approval.
    pub kind: Kind,
    /// Trimmed, non-empty prompt (for an approval: the action).
    pub prompt: String,
    /// More context.
    pub detail: Option<String>,
    /// The options; for confirm Yes/No, for approvals the three decisions.
    pub options: Vec<String>,
    /// Pick many.
    pub multi: bool,
    /// Free text allowed.
    pub allow_custom: bool,
    /// Applied on timeout.
    pub default: Option<Value>,
    /// When to give up.
    pub timeout: Timeout,
    /// Who may answer; `None` uses the run's policy.
    pub answerers: Option<Answerers>,
}

impl ValidAsk {
    fn check_default(&self, default: &Value) -> Result<Value, InvalidAsk> {
        let canonical = |v: &Value| -> Result<Value, InvalidAsk> {
            let text = v.as_str().ok_or_else(|| InvalidAsk::BadDefault(v.to_string()))?;
            if let Some(o) = self.options.iter().find(|o| o.eq_ignore_ascii_case(text)) {
                return Ok(Value::String(o.clone()));
            }
            if self.allow_custom && !self.options.is_empty() || self.options.is_empty() {
                return Ok(Value::String(text.to_owned()));
            }
            Err(InvalidAsk::DefaultNotAnOption(text.to_owned()))
        };
        match (self.multi, default) {
            (true, Value::Array(items)) => items.iter().map(canonical).collect::<Result<Vec<_>, _>>().map(Value::Array),
            (true, single) => Ok(Value::Array(vec![canonical(single)?])),
            (false, v) => canonical(v),
        }
    }

    /// The pending question this ask becomes as step `step` of `run`, answerable by
    /// `answerers` (when the ask names none), asked at `now` and expiring at `expires_at`.
    pub fn pending(
        self,
        run: &crate::run::Run,
        step: u32,
        answerers: Answerers,
        now: i64,
        expires_at: Option<i64>,
    ) -> Question {
        Question {
            id: QuestionId::new(),
            conversation: run.conversation.clone(),
            run: run.id,
            step,
            mode: run.mode,
            kind: self.kind,
            fingerprint: self.fingerprint(),
            answerers: self.answerers.unwrap_or(answerers),
            prompt: self.prompt,
            detail: self.detail,
            options: self.options,
            multi: self.multi,
            allow_custom: self.allow_custom,
            default: self.default,
            created_at: now,
            expires_at,
            status: Status::Pending,
            outcome: None,
            answered_by: None,
            answered_name: None,
            answered_via: None,
        }
    }

    /// The replay fingerprint: a hash of kind, prompt and options.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.kind.as_str());
        h.update([0]);
        h.update(&self.prompt);
        for o in &self.options {
            h.update([0]);
            h.update(o);
        }
        let digest = h.finalize();
        hex::encode(&digest[..12])
    }
}

/// The persisted snapshot of one ask: what every surface renders.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Pick many.
    pub multi: bool,
    /// Free text allowed.
    pub allow_custom: bool,
    /// Applied on timeout.
    pub default: Option<Value>,
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
}

impl Question {
    /// Whether the question is still waiting.
    pub fn is_pending(&self) -> bool {
        self.status == Status::Pending
    }

    /// Who resolved it, as people know them: the name when the surface gave one, else the id.
    pub fn answerer(&self) -> Option<&str> {
        self.answered_name.as_deref().or(self.answered_by.as_deref())
    }

    /// A one-line statement of how it ended: `✅ dayjs — @alice via telegram`.
    pub fn outcome_line(&self) -> String {
        let Some(outcome) = &self.outcome else {
            return "pending".to_owned();
        };
        let mark = match outcome {
            Outcome::Answered { .. } => "✅",
            Outcome::Declined { .. } => "❌",
            Outcome::Expired { .. } => "⌛",
            Outcome::Cancelled { .. } => "⛔",
        };
        let mut line = format!("{mark} {}", outcome.summary(self.kind));
        if let (Outcome::Answered { .. } | Outcome::Declined { .. }, Some(by)) = (outcome, self.answerer()) {
            line.push_str(&format!(" — {by}"));
            if let Some(via) = self.answered_via {
                line.push_str(&format!(" via {via}"));
            }
        }
        line
    }
}

/// A pending question of a throwaway run, for unit tests of rendering and matching.
#[cfg(test)]
pub(crate) fn test_question(ask: Ask) -> Question {
    let run = crate::run::Run {
        id: RunId::new(),
        function: "test".into(),
        conversation: None,
        initiator: UserRef::parse("test:user").unwrap(),
        answerers: None,
        input: String::new(),
        mode: Mode::FollowUp,
        status: crate::run::RunStatus::Waiting,
        says: 0,
        result: None,
        created_at: 0,
        updated_at: 0,
        update: None,
    };
    ask.validate().unwrap().pending(&run, 0, Answerers::Conversation, 0, Some(60_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_capped_and_blank_is_none() {
        assert_eq!(display_name("  @alice\u{7}\n ").as_deref(), Some("@alice"));
        assert_eq!(display_name(" \t\u{0} "), None);
        let long = "é".repeat(MAX_NAME + 10);
        assert_eq!(display_name(&long).map(|n| n.chars().count()), Some(MAX_NAME));
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
        assert_eq!(display_name("al\u{200B}ice\u{2066}").as_deref(), Some("alice"));
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
    fn fingerprint_changes_with_prompt_and_options() {
        let a = Ask::question("Pick").options(["a", "b"]).validate().unwrap();
        let b = Ask::question("Pick").options(["a", "c"]).validate().unwrap();
        let c = Ask::question("Pick!").options(["a", "b"]).validate().unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint(), Ask::question("Pick").options(["a", "b"]).validate().unwrap().fingerprint());
    }
}
