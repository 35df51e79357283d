//! The words of the engine's replies to a person's message, and of its notices about runs:
//! the engine says which, these say how.

use std::fmt::Display;

use super::capitalise;

/// A failure of askgate's own while handling a message.
pub const FAILED: &str = "Something went wrong on our side; nothing was changed. Please try again.";
/// A plain message where nothing waits and no function takes plain words.
pub const NOTHING_WAITING: &str = "Nothing is waiting for an answer here. /help lists the commands.";
/// A plain message handed to the conversation's listener (Claude Code's channel).
pub const PASSED_ON: &str = "Passed on to the agent listening here.";
/// A grant id that matches several grants.
pub const AMBIGUOUS_GRANT: &str = "Ambiguous grant id, use more characters.";
/// Someone who may not revoke a grant.
pub const NOT_YOURS_TO_REVOKE: &str =
    "Only people who may answer its approvals can revoke this grant; nothing was changed.";
/// A question id prefix that matches several questions.
pub const AMBIGUOUS_ID: &str = "Ambiguous id, use more characters";

/// A refusal's own words as a sentence (`Unknown function x.`).
pub fn sentence(refusal: &dyn Display) -> String {
    format!("{}.", capitalise(&refusal.to_string()))
}

/// A run that could not start because its function is unknown.
pub fn unknown_function(refusal: &dyn Display) -> String {
    format!("{}. /help lists the functions.", capitalise(&refusal.to_string()))
}

/// Someone else's questions wait here (`waiting` of them), none for the sender.
pub fn not_yours(waiting: usize) -> &'static str {
    match waiting {
        1 => "The question waiting here is not yours to answer.",
        _ => "The questions waiting here are not yours to answer.",
    }
}

/// A plain message while several of the sender's questions wait.
pub fn which_one(waiting: usize) -> String {
    format!("{waiting} questions are waiting for you here; answer with /answer <id> <choice> (/pending lists them).")
}

/// `/approve` of a question that is not an approval.
pub fn not_an_approval(short: &str) -> String {
    format!("{short} is not an approval; answer it with /answer {short} <choice>.")
}

/// What `/cancel` did.
pub fn cancelled(n: usize) -> String {
    match n {
        0 => "Nothing to cancel here.".to_owned(),
        1 => "Cancelled the waiting run.".to_owned(),
        n => format!("Cancelled {n} waiting questions."),
    }
}

/// A grant id shorter than `min` characters.
pub fn grant_id_too_short(min: usize) -> String {
    format!("Grant ids need at least {min} characters; /grants lists them.")
}

/// No grant here has an id starting with `shown`.
pub fn no_grant(shown: &str) -> String {
    format!("No grant {shown} here; /grants lists them.")
}

/// A grant revoked: a rule (`pattern`) or one exact action.
pub fn revoked(short: &str, action: &str, pattern: bool) -> String {
    match pattern {
        true => format!("Revoked {short}: actions like \"{action}\" will be asked again."),
        false => format!("Revoked {short}: \"{action}\" will be asked again."),
    }
}

/// A grant that was no longer live.
pub fn already_revoked(short: &str) -> String {
    format!("Grant {short} was already revoked or has expired.")
}

/// A question id shorter than `min` characters.
pub fn id_too_short(min: usize, id: &str) -> String {
    format!("Ids need at least {min} characters; `{id}` is too short")
}

/// Text that is no question id.
pub fn not_an_id(shown: &str) -> String {
    format!("`{shown}` is not a question id")
}

/// No question here has an id starting with `prefix`.
pub fn no_question(prefix: &str) -> String {
    format!("No question {prefix} here")
}

/// A rule longer than `max` characters.
pub fn rule_too_long(max: usize) -> String {
    format!("A rule is at most {max} characters; nothing was changed.")
}

/// A rule offered for a gated tool's call: its action is a tool and its arguments as JSON, so
/// a pattern over that text could reach past one value into others.
pub const GATED_TAKES_NO_RULE: &str = "a gated tool's call takes no rule; allow it always (the tool, or its exact arguments, as its upstream's grant says)";

/// A rule that names nothing but `*`.
pub const RULE_CATCHES_ALL: &str = "A rule must name something besides *; nothing was changed.";

/// A rule that does not fit the action it was given on.
pub fn rule_does_not_fit(rule: &str, action: &str) -> String {
    format!(
        "The rule \"{rule}\" does not fit this action (`{action}`); nothing was changed. A rule fits one simple \
         command word by word, never a chained or redirected one."
    )
}

/// A run of `function` that failed, and why (what the person may read).
pub fn run_failed(function: &str, why: &str) -> String {
    format!("⚠️ {function} failed: {why}")
}

/// A run of `function` that was cancelled, and why.
pub fn run_cancelled(function: &str, reason: &str) -> String {
    format!("⛔ {function} cancelled ({}).", crate::question::cancel_reason(reason))
}

/// Why a run whose function is gone from the configuration failed.
pub fn function_gone(function: &str) -> String {
    format!("no function named `{function}` (removed from the config?)")
}

/// A notice that something went wrong.
pub fn warning(message: &str) -> String {
    format!("⚠️ {message}")
}

/// The line above an escalated card: nobody answered it in `conversation` for `waited`.
pub fn escalated(conversation: &str, waited: std::time::Duration) -> String {
    format!("⬆️ Nobody answered this in {conversation} for {}:", humantime::format_duration(waited))
}
