//! What people read, in one place: the card of text-only surfaces (numbered options, each with
//! the command that answers it), reminders, the lists `/pending` and `/grants` show, the words
//! of a receipt, and how long ago or until. Adapters draw their own cards from these words.

pub mod replies;

use std::fmt::Write;

use crate::question::{Kind, Locale, Outcome, Presentation, Question, Receipt};
use crate::say;
use crate::text::Piece;

/// Renders a question as plain text with its commands, in the question's language.
pub fn card(q: &Question, now_ms: i64) -> String {
    let l = q.presentation.locale;
    let id = q.id.short();
    let mut out = String::new();
    let _ = writeln!(out, "{} {}", title(q), q.prompt);
    detail_lines(&mut out, q);
    let _ = writeln!(out, "   {}", footer(q, now_ms));
    if let Some(form) = &q.form {
        form_lines(&mut out, form, &id, l);
        return out;
    }
    let decline = say!(l, "card.decline", id = id);
    let feedback = say!(l, "card.feedback");
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
                let example = format!("{},{}", q.position_token(1), q.position_token(3));
                let _ = writeln!(out, "   {}", say!(l, "card.pick_several", id = id, example = example));
            }
            if q.allow_custom {
                let _ = writeln!(out, "   {}", say!(l, "card.own_answer", id = id));
            }
            let _ = write!(out, "   {decline}");
        }
        Kind::Confirm => {
            let rows = [(say!(l, "button.yes"), "yes"), (say!(l, "button.no"), "no")];
            table(&mut out, &rows.iter().map(|(a, w)| (a.clone(), format!("/answer {id} {w}"))).collect::<Vec<_>>());
            let _ = write!(out, "\n   {decline}");
        }
        Kind::Approval if q.needs_quorum() => {
            let rows = [
                (say!(l, "button.approve"), format!("/approve {id}")),
                (say!(l, "button.reject"), format!("/deny {id} {feedback}")),
            ];
            table(&mut out, &rows);
        }
        Kind::Approval => {
            let mut rows = vec![
                (say!(l, "button.allow_once"), format!("/approve {id}")),
                (say!(l, "button.allow_always"), format!("/approve {id} always")),
                (say!(l, "button.reject"), format!("/deny {id} {feedback}")),
            ];
            if q.allow_custom {
                rows.push((
                    say!(l, "button.edit_then_allow"),
                    format!("/approve {id} edit {}", say!(l, "card.new_action")),
                ));
            }
            table(&mut out, &rows);
        }
    }
    out
}

/// A question's detail under its prompt: prose indented, code indented further.
fn detail_lines(out: &mut String, q: &Question) {
    for piece in q.detail.as_deref().map(crate::text::pieces).unwrap_or_default() {
        let (indent, text) = match piece {
            Piece::Text(text) => ("   ", text),
            Piece::Code(code) => ("       ", code),
        };
        for line in text.lines() {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
}

/// A question whole, for `/show`: a waiting one's text card (never cut: a surface splits it
/// into as many messages as it needs), an ended one's prompt and detail with how it ended.
pub fn whole(q: &Question, now_ms: i64) -> String {
    if q.status == crate::question::Status::Pending {
        return card(q, now_ms);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", q.prompt);
    detail_lines(&mut out, q);
    out.push_str(&resolved_line(q));
    out
}

/// What a card cut to fit ends with: where to read the whole, `… [cut: /show 1a2b3c4d shows
/// it all]`, in the question's language.
pub fn cut_mark(q: &Question) -> String {
    say!(q.presentation.locale, "card.cut", id = q.id.short())
}

/// Numbered choices, each with its command, the commands lined up: `   1. Yes    /answer …`.
/// The last line has no line break.
fn table(out: &mut String, rows: &[(String, String)]) {
    let width = rows.iter().map(|(label, _)| label.chars().count()).max().unwrap_or(0);
    for (i, (label, command)) in rows.iter().enumerate() {
        let pad = " ".repeat(width - label.chars().count());
        let end = if i + 1 == rows.len() { "" } else { "\n" };
        let _ = write!(out, "   {}. {label}{pad}    {command}{end}", i + 1);
    }
}

/// A form's fields (or several questions) as the text card lists them, with how to answer;
/// empty for a question without fields.
pub fn form_text(q: &Question) -> String {
    let mut out = String::new();
    if let Some(form) = &q.form {
        form_lines(&mut out, form, &q.id.short(), q.presentation.locale);
    }
    out
}

/// A form's fields (or several questions), numbered, with what each takes, and how to answer:
/// all at once by command, or one field at a time by plain replies.
fn form_lines(out: &mut String, form: &crate::question::form::Form, id: &str, l: Locale) {
    for (i, field) in form.fields.iter().enumerate() {
        let n = i + 1;
        let required = if field.required { String::new() } else { say!(l, "form.optional") };
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
            let _ = writeln!(out, "      {}", field.takes(l));
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
                (true, true) => Some(say!(l, "form.several_other")),
                (true, false) => Some(say!(l, "form.several")),
                (false, true) => Some(say!(l, "form.other")),
                (false, false) => None,
            };
            if let Some(how) = how {
                let _ = writeln!(out, "      {how}");
            }
        }
    }
    let first = form.fields.first().map_or("", |f| f.label());
    let _ = writeln!(out, "   {}", say!(l, "form.all_at_once", id = id, example = form.example()));
    let _ = writeln!(out, "   {}", say!(l, "form.one_at_a_time", first = first));
    let _ = write!(out, "   {}", say!(l, "card.decline", id = id));
}

/// What a person filling a form one field at a time is asked next, in `l`: `2/7 · Email — an
/// email address, like ada@example.com. Reply with it (- leaves it out).` None when `next` is
/// no field of the question's form.
pub fn next_field(q: &Question, draft: &crate::question::form::Draft, next: &str, l: Locale) -> Option<String> {
    let form = q.form.as_ref()?;
    let (i, field) = form.fields.iter().enumerate().find(|(_, f)| f.key == next)?;
    let filled = draft.values().filter(|v| !v.is_null()).count();
    let mut line = format!("{}/{} · {}", i + 1, form.fields.len(), field.label());
    if let Some(about) = &field.description {
        let _ = write!(line, ": {about}");
    }
    let _ = write!(line, " — {}.", field.takes(l));
    for (j, option) in field.options().iter().enumerate() {
        let _ = write!(line, "\n   {}) {}", j + 1, option.label());
    }
    let _ = write!(line, "\n{}", say!(l, "form.reply_with_it"));
    if !field.required {
        line.push_str(&say!(l, "form.leave_out"));
    }
    line.push_str(&say!(l, "form.progress", filled = filled, id = q.id.short(), example = form.example()));
    Some(line)
}

/// A reminder of a pending question: who it waits for (`mentions`, when there is anyone in
/// particular), then its card with the commands.
pub fn reminder(q: &Question, mentions: &str, now_ms: i64) -> String {
    format!("{}\n{}", reminder_line(mentions, q.presentation.locale), card(q, now_ms))
}

/// A reminder's first line: `⏰ Reminder @alice: this still waits for an answer.`; the
/// mentions as the surface writes them.
pub fn reminder_line(mentions: &str, l: Locale) -> String {
    let whom = if mentions.is_empty() { String::new() } else { format!(" {mentions}:") };
    say!(l, "card.reminder", whom = whom)
}

/// What a card's first line starts with: its kind's mark (an approval's in words).
fn title(q: &Question) -> String {
    match q.kind {
        Kind::Question => "❓".to_owned(),
        Kind::Confirm => "❔".to_owned(),
        Kind::Approval => say!(q.presentation.locale, "card.approve_title"),
        Kind::Form => "📝".to_owned(),
    }
}

/// The one line a conversation's log shows for a question asked there, where its card is
/// shown beside the log (the page's board, the TUI's): `[1a2b3c4d] ❓ Which library?`.
pub fn asked_line(q: &Question) -> String {
    format!("[{}] {} {}", q.id.short(), title(q), crate::text::clip(&q.prompt, 200, "…"))
}

/// What a chat says under an expired question's card, and where: `⌛ <prompt>: <outcome>` in
/// its conversation. None for a question that did not expire.
pub fn expiry_notice(q: &Question) -> Option<(&crate::question::Conversation, String)> {
    let conversation = q.conversation.as_ref().filter(|_| q.status == crate::question::Status::Expired)?;
    let outcome = q.outcome.as_ref().map(|o| o.summary(q.kind)).unwrap_or_default();
    Some((conversation, format!("⌛ {}: {outcome}", q.prompt)))
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
        line.push_str(" · ");
        line.push_str(&say!(q.presentation.locale, "card.asked_by", who = q.asked_by.as_str()));
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
    let l = q.presentation.locale;
    let when = expiry_in(q.expires_at, now_ms, &q.presentation);
    match (&q.default, q.expires_at) {
        (Some(default), Some(_)) => {
            let value = crate::question::display_value_in(q.kind, default, l);
            say!(l, "card.then", when = when, value = crate::text::safe_line(&value))
        }
        _ => when,
    }
}

/// `expires in 30m (23:15 UTC)`, or `never expires`, in English and UTC.
pub fn expiry(expires_at: Option<i64>, now_ms: i64) -> String {
    expiry_in(expires_at, now_ms, &Presentation::default())
}

/// `expires in 30m (23:15 UTC)`, or `never expires`, as `presentation` reads (its language,
/// the clock in its time zone). The time left is rounded up in the unit shown, so a card never
/// promises less time than there is.
pub fn expiry_in(expires_at: Option<i64>, now_ms: i64, presentation: &Presentation) -> String {
    let l = presentation.locale;
    let Some(at) = expires_at else { return say!(l, "card.never_expires") };
    let left = ((at - now_ms).max(0) + 999) / 1000;
    let span = if left > 86_400 {
        let hours = (left + 3_599) / 3_600;
        match hours % 24 {
            0 => say!(l, "span.days", days = hours / 24),
            h => say!(l, "span.days_hours", days = hours / 24, hours = h),
        }
    } else if left > 3_600 {
        let minutes = (left + 59) / 60;
        say!(l, "span.hours_minutes", hours = minutes / 60, minutes = format!("{:02}", minutes % 60))
    } else if left >= 60 {
        say!(l, "span.minutes", minutes = (left + 59) / 60)
    } else {
        say!(l, "span.seconds", seconds = left)
    };
    say!(l, "card.expires_in", span = span, clock = crate::question::clock(presentation.time_zone.as_ref(), at))
}

/// `just now`, `5m ago`, `3h ago`, `2d ago`.
pub fn ago(at: i64, now_ms: i64, l: Locale) -> String {
    let secs = (now_ms - at).max(0) / 1000;
    match secs {
        0..60 => say!(l, "ago.now"),
        60..3_600 => say!(l, "ago.minutes", n = secs / 60),
        3_600..86_400 => say!(l, "ago.hours", n = secs / 3_600),
        _ => say!(l, "ago.days", n = secs / 86_400),
    }
}

/// Lists a conversation's standing grants with their ids and commands, for `/grants`.
pub fn grants_list(grants: &[crate::store::Grant], now_ms: i64, l: Locale) -> String {
    if grants.is_empty() {
        return say!(l, "list.no_grants");
    }
    let mut out = match grants.len() {
        1 => say!(l, "list.grants_one"),
        n => say!(l, "list.grants_many", n = n),
    };
    out.push('\n');
    let presentation = Presentation { locale: l, time_zone: None };
    for g in grants {
        let short = g.short_id();
        let until = match g.expires_at {
            Some(_) => expiry_in(g.expires_at, now_ms, &presentation),
            None => say!(l, "list.until_revoked"),
        };
        let rule = if g.pattern { say!(l, "list.rule") } else { String::new() };
        let line = say!(
            l,
            "list.grant",
            id = short,
            rule = rule,
            action = crate::text::clip(&g.action, 200, "…"),
            setter = g.setter(),
            ago = ago(g.created_at, now_ms, l),
            until = until
        );
        let _ = writeln!(out, "{line}");
    }
    out.truncate(out.trim_end().len());
    out
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
/// [`LISTED`]` + 1`. The list's own words in `l`, each card in its question's language.
pub fn pending_list(questions: &[Question], now_ms: i64, l: Locale) -> String {
    if questions.is_empty() {
        return say!(l, "list.no_pending");
    }
    let (shown, more) = listed(questions);
    let mut out =
        if more { say!(l, "list.more_waiting", n = LISTED) } else { say!(l, "list.waiting", n = shown.len()) };
    out.push('\n');
    for q in shown {
        out.push_str(&card(q, now_ms));
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// The words for a receipt, in `l`; none for a plain success, which the card's update shows.
pub fn receipt(receipt: &Receipt, question: Option<&Question>, l: Locale) -> Option<String> {
    let kind = question.map_or(Kind::Question, |q| q.kind);
    Some(match receipt {
        Receipt::Resolved { .. } => return None,
        Receipt::AlreadyResolvedSame { by, .. } => match by {
            Some(by) => say!(l, "receipt.same_by", by = by),
            None => say!(l, "receipt.same"),
        },
        Receipt::AlreadyResolvedConflict { outcome, by, .. } => match (outcome, by) {
            (Outcome::Answered { value }, Some(by)) => {
                let value = crate::question::display_value_in(kind, value, l);
                say!(l, "receipt.answered_by", value = crate::text::safe(&value), by = by)
            }
            (other, _) => say!(l, "receipt.closed", summary = other.summary_in(kind, l)),
        },
        Receipt::Expired { .. } => say!(l, "receipt.expired"),
        Receipt::Counted { id, approvals, quorum } => {
            say!(
                l,
                "receipt.counted",
                approvals = approvals,
                quorum = quorum,
                id = id.short(),
                more = quorum - approvals
            )
        }
        Receipt::AlreadyCounted { id, approvals, quorum } => say!(
            l,
            "receipt.already_counted",
            id = id.short(),
            approvals = approvals,
            quorum = quorum,
            more = quorum - approvals
        ),
        Receipt::NotAuthorized { .. } => say!(l, "receipt.not_yours"),
        Receipt::OwnRequest { id, quorum } => say!(l, "receipt.own_request", id = id.short(), quorum = quorum),
        Receipt::Unknown { reason } => say!(l, "receipt.unknown", reason = reason),
        Receipt::InvalidChoice { id, hint } => say!(l, "receipt.not_accepted", id = id.short(), hint = hint),
    })
}

/// What the sender of a tap is told in a toast or a private note, in `l`: "Recorded." for a tap
/// that resolved its question (its card shows the rest), else the words of its receipt or
/// reply; none for a redelivered tap, which was answered when it was first applied.
pub fn tap_note(receipt: Option<&Receipt>, text: Option<&str>, l: Locale) -> Option<String> {
    // Every other receipt carries its words in `text` (see `receipt`).
    match receipt {
        Some(Receipt::Resolved { .. }) => Some(say!(l, "receipt.recorded")),
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
    fn a_question_shown_whole_is_its_card_while_it_waits_then_its_text_and_how_it_ended() {
        use crate::question::{Ask, Outcome, Status};
        let mut q = crate::question::test_question(Ask::approval("deploy").detail("a\n```\nb\n```"));
        assert_eq!(whole(&q, 0), card(&q, 0));
        (q.status, q.outcome) = (Status::Declined, Some(Outcome::Declined { feedback: Some("no".into()) }));
        let id = q.id.short();
        assert_eq!(whole(&q, 0), format!("deploy\n   a\n       b\n[{id}] ❌ rejected: no"));
    }

    #[test]
    fn only_an_expired_question_has_a_notice_in_its_conversation() {
        use crate::question::{Ask, Conversation, Outcome, Status};
        let mut q = crate::question::test_question(Ask::confirm("Archive?"));
        q.conversation = Some(Conversation::parse("test:room").unwrap());
        assert_eq!(expiry_notice(&q), None, "pending");
        (q.status, q.outcome) = (Status::Expired, Some(Outcome::Expired { value: None }));
        let (place, line) = expiry_notice(&q).unwrap();
        assert_eq!(place.as_str(), "test:room");
        assert!(line.starts_with("⌛ Archive?: "), "{line}");
        (q.status, q.outcome) = (Status::Declined, Some(Outcome::Declined { feedback: None }));
        assert_eq!(expiry_notice(&q), None, "declined");
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
    fn a_card_in_chinese_has_askgates_words_in_chinese_and_its_times_in_its_zone() {
        use crate::question::{Ask, Locale, Presentation};
        let mut q = crate::question::test_question(Ask::confirm("Ship it?").default_value(false));
        q.presentation = Presentation { locale: Locale::ZhCn, time_zone: Some("Asia/Shanghai".parse().unwrap()) };
        q.expires_at = Some(1_700_000_000_000 + 30 * 60_000);
        let text = card(&q, 1_700_000_000_000);
        assert!(text.starts_with("❔ Ship it?\n"), "the prompt is the function's: {text}");
        assert!(text.contains("30分钟后过期（06:43 CST），届时采用：否"), "{text}");
        assert!(text.contains("提问者 test"), "{text}");
        assert!(text.contains("1. 是    /answer"), "{text}");
        assert!(text.contains("拒绝回答：/decline"), "{text}");
        let english = card(&crate::question::test_question(Ask::confirm("Ship it?")), 0);
        assert!(english.contains("1. Yes    /answer") && english.contains("UTC"), "{english}");
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
