//! What people read, in one place: the card of text-only surfaces (numbered options, each with
//! the command that answers it), reminders, the lists `/pending` and `/grants` show, the words
//! of a receipt, and how long ago or until. Adapters draw their own cards from these words.

pub mod replies;

use std::fmt::Write;

use crate::question::{Kind, Outcome, Question, Receipt, display_value};
use crate::text::Piece;

/// Renders a question as plain text with its commands.
pub fn card(q: &Question, now_ms: i64) -> String {
    let id = q.id.short();
    let mut out = String::new();
    let title = match q.kind {
        Kind::Question => "❓",
        Kind::Confirm => "❔",
        Kind::Approval => "🔐 Approve:",
        Kind::Form => "📝",
    };
    let _ = writeln!(out, "{title} {}", q.prompt);
    for piece in q.detail.as_deref().map(crate::text::pieces).unwrap_or_default() {
        let (indent, text) = match piece {
            Piece::Text(text) => ("   ", text),
            Piece::Code(code) => ("       ", code),
        };
        for line in text.lines() {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
    let _ = writeln!(out, "   {}", footer(q, now_ms));
    if let Some(form) = &q.form {
        form_lines(&mut out, form, &id);
        return out;
    }
    match q.kind {
        Kind::Question | Kind::Form => {
            let width = q.options.iter().map(|o| o.chars().count()).max().unwrap_or(0);
            for (i, label) in q.options.iter().enumerate() {
                let n = i + 1;
                let pad = " ".repeat(width - label.chars().count());
                let _ = writeln!(out, "   {n}. {label}{pad}    /answer {id} {}", q.position_token(n));
                if let Some(about) = q.description(i) {
                    let _ = writeln!(out, "      {about}");
                }
            }
            if q.multi {
                let _ = writeln!(out, "   pick several: /answer {id} {},{}", q.position_token(1), q.position_token(3));
            }
            if q.allow_custom {
                let _ = writeln!(out, "   your own answer: /answer {id} <text>");
            }
            let _ = write!(out, "   decline: /decline {id} [feedback]");
        }
        Kind::Confirm => {
            let _ = writeln!(out, "   1. Yes    /answer {id} yes");
            let _ = writeln!(out, "   2. No     /answer {id} no");
            let _ = write!(out, "   decline: /decline {id} [feedback]");
        }
        Kind::Approval if q.needs_quorum() => {
            let _ = writeln!(out, "   1. Approve    /approve {id}");
            let _ = write!(out, "   2. Reject     /deny {id} [feedback]");
        }
        Kind::Approval => {
            let _ = writeln!(out, "   1. Allow once      /approve {id}");
            let _ = writeln!(out, "   2. Allow always    /approve {id} always");
            let _ = write!(out, "   3. Reject          /deny {id} [feedback]");
            if q.allow_custom {
                let _ = write!(out, "\n   4. Edit, then allow    /approve {id} edit <new action>");
            }
        }
    }
    out
}

/// A form's fields (or several questions) as the text card lists them, with how to answer;
/// empty for a question without fields.
pub fn form_text(q: &Question) -> String {
    let mut out = String::new();
    if let Some(form) = &q.form {
        form_lines(&mut out, form, &q.id.short());
    }
    out
}

/// A form's fields (or several questions), numbered, with what each takes, and how to answer:
/// all at once by command, or one field at a time by plain replies.
fn form_lines(out: &mut String, form: &crate::question::form::Form, id: &str) {
    for (i, field) in form.fields.iter().enumerate() {
        let n = i + 1;
        let required = if field.required { "" } else { " (optional)" };
        match &field.description {
            Some(about) if field.title.is_none() => {
                let _ = writeln!(out, "   {n}. {}{required}: {about}", field.key);
            }
            Some(about) => {
                let _ = writeln!(out, "   {n}. {}{required} — {about}", field.label());
            }
            None => {
                let _ = writeln!(out, "   {n}. {}{required}", field.label());
            }
        }
        let options = field.options();
        if options.is_empty() {
            let _ = writeln!(out, "      {}", field.takes());
        }
        for (j, option) in options.iter().enumerate() {
            match &option.description {
                Some(about) => {
                    let _ = writeln!(out, "      {}) {} — {about}", j + 1, option.label());
                }
                None => {
                    let _ = writeln!(out, "      {}) {}", j + 1, option.label());
                }
            }
        }
        if let crate::question::form::Input::Choice { multi, other, .. } = &field.input {
            let how = match (multi, other) {
                (true, true) => Some("several: 1,3; or your own words"),
                (true, false) => Some("several: 1,3"),
                (false, true) => Some("or your own words"),
                (false, false) => None,
            };
            if let Some(how) = how {
                let _ = writeln!(out, "      {how}");
            }
        }
    }
    let first = form.fields.first().map_or("", |f| f.label());
    let _ = writeln!(out, "   all at once: /answer {id} {}", form.example());
    let _ = writeln!(out, "   or reply to fill one field at a time, from {first} (- leaves an optional one out)");
    let _ = write!(out, "   decline: /decline {id} [feedback]");
}

/// What a person filling a form one field at a time is asked next: `2/7 · Email — an email
/// address, like ada@example.com. Reply with it (- leaves it out).` None when `next` is no
/// field of the question's form.
pub fn next_field(q: &Question, draft: &crate::question::form::Draft, next: &str) -> Option<String> {
    let form = q.form.as_ref()?;
    let (i, field) = form.fields.iter().enumerate().find(|(_, f)| f.key == next)?;
    let filled = draft.values().filter(|v| !v.is_null()).count();
    let mut line = format!("{}/{} · {}", i + 1, form.fields.len(), field.label());
    if let Some(about) = &field.description {
        let _ = write!(line, ": {about}");
    }
    let _ = write!(line, " — {}.", field.takes());
    for (j, option) in field.options().iter().enumerate() {
        let _ = write!(line, "\n   {}) {}", j + 1, option.label());
    }
    let _ = write!(line, "\nReply with it");
    if !field.required {
        line.push_str(" (- leaves it out)");
    }
    let _ =
        write!(line, ". {filled} filled so far; /answer {} {} gives them all at once.", q.id.short(), form.example());
    Some(line)
}

/// A reminder of a pending question: who it waits for (`mentions`, when there is anyone in
/// particular), then its card with the commands.
pub fn reminder(q: &Question, mentions: &str, now_ms: i64) -> String {
    format!("{}\n{}", reminder_line(mentions), card(q, now_ms))
}

/// A reminder's first line: `⏰ Reminder @alice: this still waits for an answer.`; the
/// mentions as the surface writes them.
pub fn reminder_line(mentions: &str) -> String {
    let whom = if mentions.is_empty() { String::new() } else { format!(" {mentions}:") };
    format!("⏰ Reminder{whom} this still waits for an answer.")
}

/// The one line a text surface prints when a question is resolved.
pub fn resolved_line(q: &Question) -> String {
    format!("[{}] {}", q.id.short(), q.outcome_line())
}

/// A card's last line: `id 1a2b3c4d · expires in 30m (23:15 UTC) · asked by deploy`, and for a
/// quorum approval its count so far (`· 1 of 2 approvals: @alice`).
pub fn footer(q: &Question, now_ms: i64) -> String {
    let mut line = format!("id {} · {}", q.id.short(), deadline(q, now_ms));
    if !q.asked_by.is_empty() {
        line.push_str(" · asked by ");
        line.push_str(&q.asked_by);
    }
    if let Some(tally) = q.tally() {
        line.push_str(" · ");
        line.push_str(&tally);
    }
    line
}

/// A card's deadline: `expires in 30m (23:15 UTC), then: No` — with what applies on timeout
/// when the question has a default.
pub fn deadline(q: &Question, now_ms: i64) -> String {
    let when = expiry(q.expires_at, now_ms);
    match (&q.default, q.expires_at) {
        (Some(default), Some(_)) => format!("{when}, then: {}", crate::question::display_value(q.kind, default)),
        _ => when,
    }
}

/// `expires in 30m (23:15 UTC)`, or `never expires`. The time left is rounded up in the unit
/// shown, so a card never promises less time than there is.
pub fn expiry(expires_at: Option<i64>, now_ms: i64) -> String {
    let Some(at) = expires_at else { return "never expires".to_owned() };
    let left = ((at - now_ms).max(0) + 999) / 1000;
    let span = if left > 86_400 {
        let hours = (left + 3_599) / 3_600;
        match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        }
    } else if left > 3_600 {
        let minutes = (left + 59) / 60;
        format!("{}h{:02}m", minutes / 60, minutes % 60)
    } else if left >= 60 {
        format!("{}m", (left + 59) / 60)
    } else {
        format!("{left}s")
    };
    let secs = at.div_euclid(1000).rem_euclid(86_400);
    format!("expires in {span} ({:02}:{:02} UTC)", secs / 3_600, secs % 3_600 / 60)
}

/// `just now`, `5m ago`, `3h ago`, `2d ago`.
pub fn ago(at: i64, now_ms: i64) -> String {
    let secs = (now_ms - at).max(0) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3_600 => format!("{}m ago", secs / 60),
        3_600..86_400 => format!("{}h ago", secs / 3_600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// Lists a conversation's standing grants with their ids and commands, for `/grants`.
pub fn grants_list(grants: &[crate::store::Grant], now_ms: i64) -> String {
    if grants.is_empty() {
        return "No standing grants here; \"allow always\" on an approval sets one.".to_owned();
    }
    let mut out = format!("{} standing grant{} here (allowed always):\n", grants.len(), plural(grants.len()));
    for g in grants {
        let short = g.short_id();
        let until = match g.expires_at {
            Some(_) => expiry(g.expires_at, now_ms),
            None => "until revoked".to_owned(),
        };
        let rule = if g.pattern { "rule " } else { "" };
        let _ = writeln!(
            out,
            "[{short}] {rule}\"{}\" — set by {}, {}, {until} — /revoke {short}",
            crate::text::clip(&g.action, 200, "…"),
            g.setter(),
            ago(g.created_at, now_ms)
        );
    }
    out.truncate(out.trim_end().len());
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// How many waiting questions a chat listing shows (the oldest); one more is read to know
/// that more wait. A chat message with thousands of cards helps nobody and costs memory.
pub const LISTED: u32 = 10;

/// The questions a listing read with a limit of [`LISTED`]` + 1` shows, and whether more wait.
pub fn listed(questions: &[Question]) -> (&[Question], bool) {
    let shown = questions.len().min(LISTED as usize);
    (&questions[..shown], questions.len() > shown)
}

/// Lists pending questions with their commands, for `/pending`: read with a limit of
/// [`LISTED`]` + 1`.
pub fn pending_list(questions: &[Question], now_ms: i64) -> String {
    if questions.is_empty() {
        return "No questions are waiting here.".to_owned();
    }
    let (shown, more) = listed(questions);
    let mut out = if more {
        format!("More than {LISTED} waiting; the {LISTED} oldest (the web page lists them all):\n")
    } else {
        format!("{} waiting:\n", shown.len())
    };
    for q in shown {
        out.push_str(&card(q, now_ms));
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// The words for a receipt; none for a plain success, which the card's update shows.
pub fn receipt(receipt: &Receipt, question: Option<&Question>) -> Option<String> {
    let kind = question.map_or(Kind::Question, |q| q.kind);
    Some(match receipt {
        Receipt::Resolved { .. } => return None,
        Receipt::AlreadyResolvedSame { by, .. } => match by {
            Some(by) => format!("Already answered the same way by {by}."),
            None => "Already answered the same way.".to_owned(),
        },
        Receipt::AlreadyResolvedConflict { outcome, by, .. } => match (outcome, by) {
            (Outcome::Answered { value }, Some(by)) => {
                format!("Already answered: {} — by {by}.", display_value(kind, value))
            }
            (other, _) => format!("Already closed: {}.", other.summary(kind)),
        },
        Receipt::Expired { .. } => "This question has expired.".to_owned(),
        Receipt::Counted { id, approvals, quorum } => {
            format!("Approval {approvals} of {quorum} recorded ({}); it needs {} more.", id.short(), quorum - approvals)
        }
        Receipt::AlreadyCounted { id, approvals, quorum } => format!(
            "You approved {} already; each person counts once ({approvals} of {quorum}, {} more needed).",
            id.short(),
            quorum - approvals
        ),
        Receipt::NotAuthorized { .. } => "Not yours to answer.".to_owned(),
        Receipt::OwnRequest { id, quorum } => format!(
            "You asked for this approval ({}): it needs {quorum} approvals from others, so yours is not counted.",
            id.short()
        ),
        Receipt::Unknown { reason } => format!("{reason}."),
        Receipt::InvalidChoice { id, hint } => format!("Not accepted ({}): {hint}.", id.short()),
    })
}

/// What the sender of a tap is told in a toast or a private note: "Recorded." for a tap that
/// resolved its question (its card shows the rest), else the words of its receipt or reply;
/// none for a redelivered tap, which was answered when it was first applied.
pub fn tap_note(receipt: Option<&Receipt>, text: Option<&str>) -> Option<String> {
    // Every other receipt carries its words in `text` (see `receipt`).
    match receipt {
        Some(Receipt::Resolved { .. }) => Some("Recorded.".to_owned()),
        _ => text.map(str::to_owned),
    }
}

/// `s` with its first letter in upper case.
pub fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_says_what_applies_on_timeout() {
        use crate::question::Ask;
        let q = crate::question::test_question(Ask::confirm("Archive?"));
        assert!(deadline(&q, 0).ends_with(", then: No"), "{}", deadline(&q, 0));
        assert!(card(&q, 0).contains(", then: No · asked by test\n"), "{}", card(&q, 0));
        let q = crate::question::test_question(Ask::question("Which?").options(["a", "b"]).default_value("b"));
        assert!(deadline(&q, 0).ends_with(", then: b"), "{}", deadline(&q, 0));
        let q = crate::question::test_question(Ask::question("Which?").options(["a", "b"]));
        assert!(!deadline(&q, 0).contains("then"), "no default, nothing applies: {}", deadline(&q, 0));
    }

    #[test]
    fn an_options_description_is_the_line_under_it() {
        use crate::question::Ask;
        let q = crate::question::test_question(Ask::question("Which?").option("dayjs", "2 kB").option("luxon", ""));
        let id = q.id.short();
        let text = card(&q, 0);
        assert!(
            text.contains(&format!("1. dayjs    /answer {id} 1\n      2 kB\n   2. luxon    /answer {id} 2\n")),
            "{text}"
        );
    }

    #[test]
    fn a_quorum_card_has_approve_and_reject_and_its_count() {
        use crate::question::Ask;
        let q = crate::question::test_question(Ask::approval("deploy prod").quorum(2));
        let id = q.id.short();
        let text = card(&q, 0);
        assert!(text.contains(" · 0 of 2 approvals\n"), "{text}");
        assert!(
            text.contains(&format!("1. Approve    /approve {id}\n   2. Reject     /deny {id} [feedback]")),
            "{text}"
        );
        assert!(!text.contains("always"), "{text}");
    }

    #[test]
    fn expiry_shows_minutes_and_utc_clock() {
        let now = 1_700_000_000_000;
        assert_eq!(expiry(Some(now + 30 * 60_000), now), "expires in 30m (22:43 UTC)");
        assert_eq!(expiry(None, now), "never expires");
    }

    #[test]
    fn time_left_is_rounded_up_never_below_what_is_left() {
        let now = 1_700_000_000_000;
        let span = |ms: i64| expiry(Some(now + ms), now).split(" (").next().unwrap().to_owned();
        assert_eq!(span(1_999), "expires in 2s");
        assert_eq!(span(2_000), "expires in 2s");
        assert_eq!(span(61_000), "expires in 2m");
        assert_eq!(span(3_600_000), "expires in 60m");
        assert_eq!(span(5_430_000), "expires in 1h31m");
        assert_eq!(span(86_400_000), "expires in 24h00m");
        assert_eq!(span(86_400_000 + 1), "expires in 1d1h");
        assert_eq!(span(2 * 86_400_000), "expires in 2d");
        assert_eq!(span(-5), "expires in 0s");
    }
}
