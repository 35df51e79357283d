//! The mails askgate sends: a card (text with its `/answer` commands, and the same as HTML),
//! the outcome of a card in its thread, and plain text. Each has askgate's own `Message-ID`; a
//! card's says it is a card and holds its secret (`askgate.card.<question>.<secret>@<domain>`),
//! so a reply that names it (`In-Reply-To`, `References`) is read as a reply to that card, and
//! one that names a card askgate never sent its sender is refused.

use lettre::Message;
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};

use super::{CARD, escape};
use crate::question::Question;

/// The longest subject, in characters, before the question's id.
const SUBJECT: usize = 70;

/// A mail ready to send, with the `Message-ID` it carries (without angle brackets).
pub struct Composed {
    /// The mail.
    pub message: Message,
    /// Its `Message-ID`.
    pub id: String,
}

/// Who mails come from, and the domain of their `Message-ID`s.
#[derive(Clone, Debug)]
pub struct Sender {
    from: Mailbox,
    domain: String,
    /// askgate's public URL: cards get one-click links.
    link_base: Option<String>,
}

/// The mail could not be made (an address that is not one).
#[derive(Debug, thiserror::Error)]
#[error("could not make the mail: {0}")]
pub struct ComposeError(String);

impl Sender {
    /// Mails from `from`; with `link_base`, cards carry one-click links to it.
    ///
    /// # Errors
    /// When `from` is not an address.
    pub fn new(from: &str, link_base: Option<&str>) -> Result<Self, ComposeError> {
        let from: Mailbox = from.parse().map_err(|e| ComposeError(format!("from `{from}`: {e}")))?;
        let domain = from.email.domain().to_owned();
        let link_base = link_base.map(|base| base.trim_end_matches('/').to_owned());
        Ok(Self { from, domain, link_base })
    }

    /// The domain of the address mails come from.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The address mails come from, in lower case: mail from it is askgate's own.
    pub fn address(&self) -> String {
        self.from.email.to_string().to_lowercase()
    }

    /// A card of `question` to `to`: `text` is the text card; the HTML part shows the same,
    /// and with a link base one link per choice.
    ///
    /// # Errors
    /// When `to` is not an address.
    pub fn card(&self, question: &Question, to: &str, text: &str, now_ms: i64) -> Result<Composed, ComposeError> {
        // The card's secret: a reply proves it answers this card by naming its id, which
        // nobody but its addressee has seen (122 random bits).
        let secret = uuid::Uuid::new_v4().simple();
        let id = format!("{CARD}{}.{secret}@{}", question.id, self.domain);
        let secret = secret.to_string();
        let links = match &self.link_base {
            Some(base) => super::links::choices(question)
                .into_iter()
                .enumerate()
                .map(|(n, (label, _))| {
                    let href = format!("{base}/act/{}", super::links::token(question, n, &secret, now_ms));
                    format!("<a href=\"{}\">{}</a>", escape(&href), escape(&label))
                })
                .collect::<Vec<_>>()
                .join(" &middot; "),
            None => String::new(),
        };
        let links = if links.is_empty() { links } else { format!("<p>{links}</p>") };
        let html = format!(
            "<!doctype html><html><body>{links}<pre style=\"font-family: inherit; white-space: pre-wrap\">{}</pre></body></html>",
            escape(text)
        );
        let message = self
            .builder(to, &subject(question), &id)?
            .multipart(MultiPart::alternative_plain_html(text.to_owned(), html))
            .map_err(|e| ComposeError(e.to_string()))?;
        Ok(Composed { message, id })
    }

    /// The outcome of `question` (`line`), in the thread of its card `card` (its `Message-ID`).
    ///
    /// # Errors
    /// When `to` is not an address.
    pub fn outcome(&self, question: &Question, to: &str, card: &str, line: &str) -> Result<Composed, ComposeError> {
        let id = format!("askgate.outcome.{}.{}@{}", question.id, nonce(), self.domain);
        let builder = self
            .builder(to, &format!("Re: {}", subject(question)), &id)?
            .in_reply_to(format!("<{card}>"))
            .references(format!("<{card}>"));
        let message = builder.body(line.to_owned()).map_err(|e| ComposeError(e.to_string()))?;
        Ok(Composed { message, id })
    }

    /// Plain text to `to`; its subject is its first line.
    ///
    /// # Errors
    /// When `to` is not an address.
    pub fn text(&self, to: &str, text: &str) -> Result<Composed, ComposeError> {
        let id = format!("askgate.text.{}@{}", uuid::Uuid::new_v4(), self.domain);
        let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("askgate");
        let subject = crate::text::clip(first, SUBJECT, "…");
        let message =
            self.builder(to, &subject, &id)?.body(text.to_owned()).map_err(|e| ComposeError(e.to_string()))?;
        Ok(Composed { message, id })
    }

    fn builder(&self, to: &str, subject: &str, id: &str) -> Result<lettre::message::MessageBuilder, ComposeError> {
        let to: Mailbox = to.parse().map_err(|e| ComposeError(format!("to `{to}`: {e}")))?;
        // An automatic mail (RFC 3834): a person's auto-responder does not answer it.
        let automatic = HeaderValue::new(HeaderName::new_from_ascii_str("Auto-Submitted"), "auto-generated".to_owned());
        Ok(Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(format!("<{id}>")))
            .raw_header(automatic)
            .date_now())
    }
}

/// A card's subject: the question's prompt, cut, and its short id (`Which library? [1a2b3c4d]`).
pub fn subject(question: &Question) -> String {
    let prompt = question.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("{} [{}]", crate::text::clip(&prompt, SUBJECT, "…"), question.id.short())
}

/// Eight random hex digits: two cards of one question have different ids.
fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(prompt: &str) -> Question {
        crate::question::test_question(crate::question::Ask::question(prompt))
    }

    fn sent(composed: &Composed) -> String {
        String::from_utf8(composed.message.formatted()).unwrap()
    }

    #[test]
    fn a_card_is_text_and_html_with_its_own_message_id_and_subject() {
        let q = question("Ship <b>it</b>?");
        let sender = Sender::new("askgate <askgate@example.com>", None).unwrap();
        let card = sender.card(&q, "alice@example.org", "Ship <b>it</b>?\n   /answer 1a2b 1", 0).unwrap();
        let raw = sent(&card);
        assert!(card.id.starts_with(&format!("{CARD}{}.", q.id)) && card.id.ends_with("@example.com"), "{}", card.id);
        assert!(raw.contains(&format!("Message-ID: <{}>", card.id)), "{raw}");
        assert!(raw.contains(&format!("Subject: Ship <b>it</b>? [{}]", q.id.short())), "{raw}");
        assert!(raw.contains("multipart/alternative") && raw.contains("text/html"), "{raw}");
        assert!(raw.contains("Ship &lt;b&gt;it&lt;/b&gt;?"), "the HTML part escapes: {raw}");
        assert!(raw.contains("Auto-Submitted: auto-generated"), "{raw}");
        assert_ne!(sender.card(&q, "alice@example.org", "x", 0).unwrap().id, card.id, "each card its own id");
    }

    #[test]
    fn an_outcome_is_in_its_cards_thread() {
        let q = question("Ship?");
        let sender = Sender::new("askgate@example.com", None).unwrap();
        let raw = sent(&sender.outcome(&q, "alice@example.org", "askgate.card.x@example.com", "✅ yes").unwrap());
        assert!(raw.contains("In-Reply-To: <askgate.card.x@example.com>"), "{raw}");
        assert!(raw.contains("References: <askgate.card.x@example.com>"), "{raw}");
        assert!(raw.contains(&format!("Subject: Re: Ship? [{}]", q.id.short())), "{raw}");
    }

    #[test]
    fn a_bad_address_is_refused_not_sent() {
        assert!(Sender::new("not an address", None).is_err());
        let sender = Sender::new("askgate@example.com", None).unwrap();
        assert!(sender.text("nobody", "hi").is_err());
    }
}
