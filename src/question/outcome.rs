//! How a question ends ([`Outcome`]), how it reads for people, and what a person who tried to
//! resolve it is told ([`Receipt`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Kind, Locale, QuestionId, Status};
use crate::say;

/// How a question ended, as the function receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
        /// Why: `cancelled by console:local`, `shutdown`, `instance_lost`, `no_human`, `client`
        /// (an agent's client cancelled its call), `session_closed` (its MCP session ended).
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

    /// A short human summary: `dayjs`, `declined: not now`, `expired, used No`.
    pub fn summary(&self, kind: Kind) -> String {
        self.summary_in(kind, Locale::En)
    }

    /// [`Outcome::summary`] in `locale`. What people typed (an answer, feedback) is made safe to
    /// show ([`crate::text::safe`]): it is shown on every surface, not only where it was typed.
    pub fn summary_in(&self, kind: Kind, locale: Locale) -> String {
        crate::text::safe(&self.summary_raw(kind, locale)).into_owned()
    }

    fn summary_raw(&self, kind: Kind, locale: Locale) -> String {
        match self {
            Self::Answered { value } => display_value_in(kind, value, locale),
            Self::Declined { feedback } => {
                let word = if kind == Kind::Approval {
                    say!(locale, "outcome.rejected")
                } else {
                    say!(locale, "outcome.declined")
                };
                match feedback {
                    Some(f) => say!(locale, "outcome.with_feedback", word = word, feedback = f),
                    None => word,
                }
            }
            Self::Expired { value: Some(v) } => {
                say!(locale, "outcome.expired_used", value = display_value_in(kind, v, locale))
            }
            Self::Expired { value: None } => say!(locale, "outcome.expired_no_default"),
            Self::Cancelled { reason } => say!(locale, "outcome.cancelled", reason = cancel_reason(reason)),
        }
    }
}

/// A cancellation's reason as it reads after the word "cancelled": `by console:local`, not
/// `cancelled by console:local` (the stored reason keeps its own words).
pub fn cancel_reason(reason: &str) -> &str {
    reason.strip_prefix("cancelled ").unwrap_or(reason)
}

/// Renders an answer value for people.
pub fn display_value(kind: Kind, value: &Value) -> String {
    display_value_in(kind, value, Locale::En)
}

/// [`display_value`] in `locale`: askgate's own words (an approval's decision, a confirm's
/// Yes and No) in that language; what people chose or typed as it is. A form's answer is its
/// fields, `key: value` each.
pub fn display_value_in(kind: Kind, value: &Value, locale: Locale) -> String {
    if let (Kind::Approval, Some(action)) = (kind, super::edited_action(value)) {
        return say!(locale, "outcome.allowed_as_edited", action = action);
    }
    match (kind, value) {
        (_, Value::String(s)) if kind == Kind::Approval => match s.as_str() {
            "once" => say!(locale, "outcome.allowed_once"),
            "always" => say!(locale, "outcome.allowed_always"),
            other => other.to_owned(),
        },
        (_, Value::String(s)) => s.clone(),
        // As a confirm's options are labelled on every surface.
        (_, Value::Bool(true)) => say!(locale, "button.yes"),
        (_, Value::Bool(false)) => say!(locale, "button.no"),
        (_, Value::Object(fields)) => fields
            .iter()
            .map(|(k, v)| format!("{k}: {}", display_value_in(Kind::Question, v, locale)))
            .collect::<Vec<_>>()
            .join("; "),
        (_, Value::Array(items)) => {
            items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect::<Vec<_>>().join(", ")
        }
        (_, other) => other.to_string(),
    }
}

/// What a resolve attempt reports back to the person who made it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
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
    /// A quorum approval counted this approval; it waits for more.
    Counted {
        /// The question.
        id: QuestionId,
        /// Approvals so far, this one included.
        approvals: u32,
        /// Approvals it needs.
        quorum: u32,
    },
    /// This person had approved already: counted once; it still waits for others.
    AlreadyCounted {
        /// The question.
        id: QuestionId,
        /// Approvals so far.
        approvals: u32,
        /// Approvals it needs.
        quorum: u32,
    },
    /// The person who asked for a quorum approval approved it: it needs others.
    OwnRequest {
        /// The question.
        id: QuestionId,
        /// Approvals it needs.
        quorum: u32,
    },
    /// The choice does not fit the question; it stays pending.
    InvalidChoice {
        /// The question.
        id: QuestionId,
        /// What would have been accepted.
        hint: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_reads_without_doubled_words() {
        let by = Outcome::Cancelled { reason: "cancelled by console:local".to_owned() };
        assert_eq!(by.summary(Kind::Question), "cancelled (by console:local)");
        let shutdown = Outcome::Cancelled { reason: "shutdown".to_owned() };
        assert_eq!(shutdown.summary(Kind::Question), "cancelled (shutdown)");
    }
}
