//! The ids of questions and runs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::SHORT_ID_LEN;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $new_doc:literal, $new:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            #[doc = $new_doc]
            pub fn new() -> Self {
                Self($new)
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

        string_schema!($name, {"type": "string", "format": "uuid"});
    };
}

uuid_id!(
    /// The id of one question: a UUID v4, shown in full in button payloads and by its first
    /// eight characters on text surfaces.
    QuestionId,
    "A new random (v4) id: people type its first characters, so they must differ.",
    Uuid::new_v4()
);
uuid_id!(
    /// The id of one run of a function: a UUID v7, ordered by when the run started.
    RunId,
    "A new time-ordered (v7) id. Runs and their questions are stored in the order of their \
     run ids, so a store's writes of runs started together land on the same few pages instead \
     of one random page each (nobody types a run id; see [`RunId::short`]).",
    Uuid::now_v7()
);

impl QuestionId {
    /// The fewest characters of an id that name a question (a unique prefix, as typed in
    /// chats and in API routes); cards show [`QuestionId::short`], 8.
    pub const MIN_PREFIX: usize = 4;

    /// The first eight characters, as text surfaces show the id.
    pub fn short(&self) -> String {
        let mut s = self.to_string();
        s.truncate(SHORT_ID_LEN);
        s
    }
}

/// A question as a person names it: its whole id, or its first characters (at least
/// [`QuestionId::MIN_PREFIX`]), which name it where no other question there starts the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuestionRef {
    /// The whole id.
    Id(QuestionId),
    /// The first characters of an id, lower-cased: hex digits and hyphens.
    Prefix(String),
}

/// Text that cannot name a question.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnreadableId {
    /// Fewer characters than [`QuestionId::MIN_PREFIX`]; the text as given.
    #[error("a question id needs at least {min} characters, not `{0}`", min = QuestionId::MIN_PREFIX)]
    TooShort(String),
    /// Characters no id has, or more of them than an id; the text as given.
    #[error("`{0}` is not a question id")]
    NotAnId(String),
}

impl QuestionRef {
    /// The whole id, when it was given whole.
    pub fn id(&self) -> Option<QuestionId> {
        match self {
            Self::Id(id) => Some(*id),
            Self::Prefix(_) => None,
        }
    }

    /// The characters an id must start with to be named by this reference.
    pub fn prefix(&self) -> String {
        self.to_string()
    }
}

impl From<QuestionId> for QuestionRef {
    fn from(id: QuestionId) -> Self {
        Self::Id(id)
    }
}

impl FromStr for QuestionRef {
    type Err = UnreadableId;

    /// A whole id in any form a UUID is written in, else a prefix: hex digits and hyphens,
    /// any case, from [`QuestionId::MIN_PREFIX`] to 36 characters.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(id) = s.parse::<QuestionId>() {
            return Ok(Self::Id(id));
        }
        let prefix = s.to_ascii_lowercase();
        let fits = |c: char| c.is_ascii_hexdigit() || c == '-';
        match prefix.len() {
            n if n < QuestionId::MIN_PREFIX => Err(UnreadableId::TooShort(s.to_owned())),
            n if n <= 36 && prefix.chars().all(fits) => Ok(Self::Prefix(prefix)),
            _ => Err(UnreadableId::NotAnId(s.to_owned())),
        }
    }
}

impl fmt::Display for QuestionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => id.fmt(f),
            Self::Prefix(prefix) => f.write_str(prefix),
        }
    }
}

impl RunId {
    /// The last eight characters, as messages to people name a run: random, where the first
    /// ones are the time it started and differ only from one minute to the next.
    pub fn short(&self) -> String {
        let s = self.to_string();
        s[s.len() - SHORT_ID_LEN..].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_named_by_its_id_or_a_prefix_of_at_least_four_characters() {
        let id = QuestionId::new();
        assert_eq!(id.to_string().parse::<QuestionRef>(), Ok(QuestionRef::Id(id)));
        assert_eq!("0B6F12ab".parse::<QuestionRef>(), Ok(QuestionRef::Prefix("0b6f12ab".into())));
        assert_eq!("0b6".parse::<QuestionRef>(), Err(UnreadableId::TooShort("0b6".into())));
        assert_eq!("zzzz".parse::<QuestionRef>(), Err(UnreadableId::NotAnId("zzzz".into())));
        assert_eq!("0".repeat(37).parse::<QuestionRef>(), Err(UnreadableId::NotAnId("0".repeat(37))));
    }

    #[test]
    fn run_ids_sort_in_the_order_runs_start_and_are_named_by_their_random_end() {
        // The store writes runs (and their questions' journal index) in run id order: ids made
        // one after another must sort that way, or each write lands on a random page.
        let ids: Vec<RunId> = (0..1000).map(|_| RunId::new()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "run ids out of their start order");
        let (a, b) = (ids[0], ids[1]);
        assert_eq!(a.short(), a.to_string()[28..]);
        assert_ne!(a.short(), b.short(), "two runs started together are told apart");
        // Question ids are typed by their first characters: those are random.
        let questions: std::collections::HashSet<String> = (0..100).map(|_| QuestionId::new().short()).collect();
        assert_eq!(questions.len(), 100);
    }
}
