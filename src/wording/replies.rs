//! The words of the engine's replies to a person's message, and of its notices about runs:
//! the engine says which, these say how, in the language they are given.

use std::fmt::Display;

use super::capitalise;
use crate::question::Locale;
use crate::say;

/// A failure of askgate's own while handling a message.
pub fn failed(l: Locale) -> String {
    say!(l, "reply.failed")
}

/// A plain message where nothing waits and no function takes plain words.
pub fn nothing_waiting(l: Locale) -> String {
    say!(l, "reply.nothing_waiting")
}

/// A plain message handed to the conversation's listener (Claude Code's channel).
pub fn passed_on(l: Locale) -> String {
    say!(l, "reply.passed_on")
}

/// A grant id that matches several grants.
pub fn ambiguous_grant(l: Locale) -> String {
    say!(l, "reply.ambiguous_grant")
}

/// Someone who may not revoke a grant.
pub fn not_yours_to_revoke(l: Locale) -> String {
    say!(l, "reply.not_yours_to_revoke")
}

/// A question id prefix that matches several questions.
pub fn ambiguous_id(l: Locale) -> String {
    say!(l, "reply.ambiguous_id")
}

/// A refusal's own words as a sentence (`Unknown function x.`). The refusal's words are
/// askgate's English (they name configuration keys).
pub fn sentence(refusal: &dyn Display) -> String {
    format!("{}.", capitalise(&refusal.to_string()))
}

/// A run that could not start because its function is unknown.
pub fn unknown_function(refusal: &dyn Display, l: Locale) -> String {
    say!(l, "reply.unknown_function", refusal = capitalise(&refusal.to_string()))
}

/// Someone else's questions wait here (`waiting` of them), none for the sender.
pub fn not_yours(waiting: usize, l: Locale) -> String {
    match waiting {
        1 => say!(l, "reply.not_yours_one"),
        _ => say!(l, "reply.not_yours_many"),
    }
}

/// A plain message while several of the sender's questions wait.
pub fn which_one(waiting: usize, l: Locale) -> String {
    say!(l, "reply.which_one", n = waiting)
}

/// `/approve` of a question that is not an approval.
pub fn not_an_approval(short: &str, l: Locale) -> String {
    say!(l, "reply.not_an_approval", id = short)
}

/// What `/cancel` did.
pub fn cancelled(n: usize, l: Locale) -> String {
    match n {
        0 => say!(l, "reply.nothing_to_cancel"),
        1 => say!(l, "reply.cancelled_run"),
        n => say!(l, "reply.cancelled_many", n = n),
    }
}

/// A grant id shorter than `min` characters.
pub fn grant_id_too_short(min: usize, l: Locale) -> String {
    say!(l, "reply.grant_id_too_short", min = min)
}

/// No grant here has an id starting with `shown`.
pub fn no_grant(shown: &str, l: Locale) -> String {
    say!(l, "reply.no_grant", id = shown)
}

/// A grant revoked: a rule (`pattern`) or one exact action.
pub fn revoked(short: &str, action: &str, pattern: bool, l: Locale) -> String {
    match pattern {
        true => say!(l, "reply.revoked_rule", id = short, action = action),
        false => say!(l, "reply.revoked", id = short, action = action),
    }
}

/// A grant that was no longer live.
pub fn already_revoked(short: &str, l: Locale) -> String {
    say!(l, "reply.already_revoked", id = short)
}

/// A question id shorter than `min` characters.
pub fn id_too_short(min: usize, id: &str, l: Locale) -> String {
    say!(l, "reply.id_too_short", min = min, id = id)
}

/// Text that is no question id.
pub fn not_an_id(shown: &str, l: Locale) -> String {
    say!(l, "reply.not_an_id", id = shown)
}

/// No question here has an id starting with `prefix`.
pub fn no_question(prefix: &str, l: Locale) -> String {
    say!(l, "reply.no_question", id = prefix)
}

/// A rule longer than `max` characters.
pub fn rule_too_long(max: usize, l: Locale) -> String {
    say!(l, "reply.rule_too_long", max = max)
}

/// A rule offered for a gated tool's call: its action is a tool and its arguments as JSON, so
/// a pattern over that text could reach past one value into others.
pub fn gated_takes_no_rule(l: Locale) -> String {
    say!(l, "reply.gated_takes_no_rule")
}

/// A rule that names nothing but `*`.
pub fn rule_catches_all(l: Locale) -> String {
    say!(l, "reply.rule_catches_all")
}

/// A rule that does not fit the action it was given on.
pub fn rule_does_not_fit(rule: &str, action: &str, l: Locale) -> String {
    say!(l, "reply.rule_does_not_fit", rule = rule, action = action)
}

/// A run of `function` that failed, and why (what the person may read).
pub fn run_failed(function: &str, why: &str, l: Locale) -> String {
    say!(l, "reply.run_failed", function = function, why = why)
}

/// A run of `function` that was cancelled, and why.
pub fn run_cancelled(function: &str, reason: &str, l: Locale) -> String {
    say!(l, "reply.run_cancelled", function = function, reason = crate::question::cancel_reason(reason))
}

/// Why a run whose function is gone from the configuration failed (the run's record; English).
pub fn function_gone(function: &str) -> String {
    format!("no function named `{function}` (removed from the config?)")
}

/// A notice that something went wrong.
pub fn warning(message: &str) -> String {
    format!("⚠️ {message}")
}

/// The line above an escalated card: nobody answered it in `conversation` for `waited`.
pub fn escalated(conversation: &str, waited: std::time::Duration, l: Locale) -> String {
    let waited = humantime::format_duration(waited).to_string();
    say!(l, "reply.escalated", conversation = conversation, waited = waited)
}
