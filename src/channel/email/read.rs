//! A mail that arrived, read as what a person typed: who sent it, which card it replies to,
//! and the new part of its text (quoted history and signature left out; an HTML-only mail made
//! text), with the command in it, wherever it stands, taken as the message.

use mail_parser::{HeaderValue, MessageParser};

use super::CARD;

/// A mail, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mail {
    /// The sender's address, in lower case.
    pub from: String,
    /// The sender's name, when the mail gives one.
    pub name: Option<String>,
    /// The mail's `Message-ID`.
    pub id: Option<String>,
    /// The card it replies to (that card's `Message-ID`).
    pub card: Option<String>,
    /// What the person said: a command line found in the new text, else the new text (else
    /// the subject, for a mail whose body is empty).
    pub text: String,
    /// Sent by a machine (an auto-responder, a bounce, a list): nobody to answer.
    pub automatic: bool,
}

/// Why a mail cannot be read as a message from a person.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// Not a mail at all.
    #[error("not a mail (no headers could be read)")]
    NotMail,
    /// No sender address.
    #[error("it has no From address")]
    NoSender,
}

/// Reads the mail `raw`.
///
/// # Errors
/// [`Unreadable`] when it is not a mail, or names no sender.
pub fn read(raw: &[u8]) -> Result<Mail, Unreadable> {
    let message = MessageParser::default().parse(raw).ok_or(Unreadable::NotMail)?;
    if message.headers().is_empty() {
        return Err(Unreadable::NotMail);
    }
    let sender = message.from().and_then(|from| from.first()).ok_or(Unreadable::NoSender)?;
    let from = sender.address().filter(|a| a.contains('@')).ok_or(Unreadable::NoSender)?.trim().to_lowercase();
    let name = sender.name().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
    let mut named = ids(message.in_reply_to());
    named.extend(ids(message.references()).into_iter().rev());
    let card = named.into_iter().find(|id| id.starts_with(CARD));
    let body = match message.text_part(0) {
        // HTML only: the quoted history (a `<blockquote>`) is left out before it is made text.
        Some(part) if part.is_text_html() => {
            let html = part.text_contents().unwrap_or_default();
            let new = html.to_ascii_lowercase().find("<blockquote").map_or(html, |at| &html[..at]);
            mail_parser::decoders::html::html_to_text(new)
        }
        _ => message.body_text(0).map(|b| b.into_owned()).unwrap_or_default(),
    };
    let subject = message.subject().map(|s| strip_prefixes(s).to_owned()).unwrap_or_default();
    let said = said(&new_part(&body));
    let text = if said.is_empty() && card.is_none() { said_line(&subject) } else { said };
    let header = |name: &str| message.header_raw(name).map(|v| v.trim().to_ascii_lowercase());
    let automatic = header("auto-submitted").is_some_and(|v| v != "no")
        || header("precedence").is_some_and(|v| ["bulk", "junk", "list", "auto_reply"].contains(&v.as_str()))
        || header("list-id").is_some()
        || from.starts_with("mailer-daemon@")
        || from.starts_with("postmaster@");
    Ok(Mail { from, name, id: message.message_id().map(str::to_owned), card, text, automatic })
}

/// The ids a header names, in order.
fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![id.to_string()],
        HeaderValue::TextList(ids) => ids.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    }
}

/// `Re: Fwd: subject` → `subject`.
fn strip_prefixes(mut subject: &str) -> &str {
    loop {
        let trimmed = subject.trim_start();
        let lower = trimmed.to_ascii_lowercase();
        match ["re:", "fwd:", "fw:", "aw:", "sv:"].iter().find(|p| lower.starts_with(*p)) {
            Some(prefix) => subject = &trimmed[prefix.len()..],
            None => return trimmed.trim_end(),
        }
    }
}

/// The text before the quoted history and the signature.
pub fn new_part(body: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in body.lines() {
        let line = line.trim_end();
        if line == "--" || line.starts_with("-----Original Message") || line.starts_with("________________") {
            break;
        }
        if attribution(line) {
            // "On Mon, 1 Jan 2030, Alice <alice@example.org> wrote:", perhaps wrapped.
            if lines.last().is_some_and(|l| opens_attribution(l)) && !opens_attribution(line) {
                lines.pop();
            }
            break;
        }
        if line.trim_start().starts_with('>') {
            continue;
        }
        lines.push(line);
    }
    lines.join("\n").trim().to_owned()
}

fn attribution(line: &str) -> bool {
    let line = line.trim();
    ["wrote:", "schrieb:", "a écrit :", "a écrit:", "escribió:", "写道：", "写道:"]
        .iter()
        .any(|end| line.ends_with(end))
}

fn opens_attribution(line: &str) -> bool {
    ["On ", "Le ", "Am ", "El ", "在 "].iter().any(|start| line.trim_start().starts_with(start))
}

/// What the new text says: its first command line (`/answer 1a2b 2`, or `run demo` written
/// without its slash), else the whole text.
fn said(text: &str) -> String {
    let command = text.lines().map(str::trim).find(|l| l.starts_with('/') || is_run(l));
    match command {
        Some(line) => said_line(line),
        None => text.trim().to_owned(),
    }
}

/// One line as a message: `run demo` is `/run demo`.
fn said_line(line: &str) -> String {
    let line = line.trim();
    match line.split_once(char::is_whitespace) {
        Some((_, rest)) if is_run(line) => format!("/run {}", rest.trim()),
        _ => line.to_owned(),
    }
}

fn is_run(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next().is_some_and(|w| w.eq_ignore_ascii_case("run")) && words.next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail(headers: &str, body: &str) -> Vec<u8> {
        format!("{headers}\r\n\r\n{body}").replace("\r\n", "\n").replace('\n', "\r\n").into_bytes()
    }

    const FROM: &str = "From: Alice Example <Alice@Example.org>\nTo: askgate@example.com\nSubject: Re: Which library? [1a2b3c4d]\nMessage-ID: <m1@example.org>";

    #[test]
    fn a_reply_to_a_card_names_the_card_and_says_only_its_new_words() {
        let headers =
            format!("{FROM}\nIn-Reply-To: <askgate.card.Q.n@example.com>\nReferences: <askgate.card.Q.n@example.com>");
        let body = "2\n\nAlice\n-- \nAlice Example, Example Org\n\nOn Mon, 1 Jan 2030 at 10:00, askgate <askgate@example.com>\nwrote:\n> Which library?\n>   1. dayjs   /answer 1a2b3c4d 1\n";
        let read = read(&mail(&headers, body)).unwrap();
        assert_eq!(read.from, "alice@example.org");
        assert_eq!(read.name.as_deref(), Some("Alice Example"));
        assert_eq!(read.id.as_deref(), Some("m1@example.org"));
        assert_eq!(read.card.as_deref(), Some("askgate.card.Q.n@example.com"));
        assert_eq!(read.text, "2\n\nAlice");
        assert!(!read.automatic);
    }

    #[test]
    fn a_command_anywhere_in_the_new_part_is_the_message() {
        let body = "Hi,\n\nsure:\n  /answer 1a2b3c4d yes\nthanks\n> /answer 1a2b3c4d no\n";
        assert_eq!(read(&mail(FROM, body)).unwrap().text, "/answer 1a2b3c4d yes");
        assert_eq!(read(&mail(FROM, "Run demo please\n")).unwrap().text, "/run demo please");
        assert_eq!(read(&mail(FROM, "run\n")).unwrap().text, "run", "a word alone starts nothing");
    }

    #[test]
    fn a_quoted_command_is_not_taken() {
        let body = "ok\n\nOn Tue, Bob wrote:\n/answer 1a2b3c4d 1\n";
        assert_eq!(read(&mail(FROM, body)).unwrap().text, "ok");
    }

    #[test]
    fn an_empty_new_mail_says_its_subject() {
        let headers = "From: alice@example.org\nSubject: run demo";
        assert_eq!(read(&mail(headers, "\n")).unwrap().text, "/run demo");
    }

    #[test]
    fn an_html_only_mail_is_read_as_text() {
        let headers = "From: alice@example.org\nSubject: hi\nContent-Type: text/html; charset=utf-8";
        let body = "<html><body><p>/answer 1a2b3c4d <b>2</b></p><blockquote>old</blockquote></body></html>";
        assert_eq!(read(&mail(headers, body)).unwrap().text, "/answer 1a2b3c4d 2");
        let reply = "<div>red</div><BLOCKQUOTE type=cite>1. red /answer 1a2b3c4d 1</BLOCKQUOTE>";
        assert_eq!(read(&mail(headers, reply)).unwrap().text, "red", "the quoted card is not read");
    }

    #[test]
    fn machines_are_known_and_mails_without_a_sender_refused() {
        let auto = "From: alice@example.org\nAuto-Submitted: auto-replied\nSubject: Out of office";
        assert!(read(&mail(auto, "away")).unwrap().automatic);
        assert!(read(&mail("From: MAILER-DAEMON@example.org\nSubject: failure", "x")).unwrap().automatic);
        assert!(!read(&mail("From: alice@example.org\nAuto-Submitted: no", "x")).unwrap().automatic);
        assert_eq!(read(&mail("Subject: nobody", "x")), Err(Unreadable::NoSender));
        assert!(read(b"\x00\x01 not a mail").is_err());
    }
}
