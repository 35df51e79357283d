//! One-click links: with `link_base`, a card's HTML part has one link per choice,
//! `<link_base>/act/<token>`. Opening one shows a page with the question and one confirm
//! button, and changes nothing (mail scanners and link previewers open links); the button's
//! POST answers, once. A token is `<question>.<choice>.<expiry>.<signature>`: the signature is
//! an HMAC-SHA256 under the secret of the card it was sent in (the secret in that card's
//! `Message-ID`, kept with the card), so nothing else needs keeping and a link works after a
//! restart; it answers as that card's addressee.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::SURFACE;
use super::{CARD, escape};
use crate::clock::Clock;
use crate::command::Command;
use crate::engine::{Engine, Inbound};
use crate::question::{Conversation, Question, QuestionId, Receipt, UserRef};
use crate::store::DeliveryRole;

/// How long a link works when its question has no deadline.
const TTL_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// What each one-click link of `question` does: its label and its command (the labelled
/// buttons Mattermost's cards have too).
pub use crate::channel::buttons::choices;

/// The secret of the card whose `Message-ID` is `card`.
pub fn secret(card: &str) -> Option<&str> {
    let local = card.strip_prefix(CARD)?.split_once('@')?.0;
    local.rsplit_once('.').map(|(_, secret)| secret).filter(|s| s.len() >= 32)
}

fn signature(secret: &str, question: QuestionId, choice: usize, expiry: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(format!("{question}.{choice}.{expiry}").as_bytes());
    hex::encode(&mac.finalize().into_bytes()[..16])
}

/// The token of choice `choice` (its place in [`choices`]) of `question`, on the card with
/// secret `secret`, working until `now_ms` plus the question's time (or a week).
pub fn token(question: &Question, choice: usize, secret: &str, now_ms: i64) -> String {
    let expiry = question.expires_at.unwrap_or(now_ms + TTL_MS).div_euclid(1000) + 60;
    format!("{}.{choice}.{expiry}.{}", question.id, signature(secret, question.id, choice, expiry))
}

/// A token, read (not yet checked).
struct Token {
    question: QuestionId,
    choice: usize,
    expiry: i64,
    signature: String,
}

fn parse(token: &str) -> Option<Token> {
    let mut parts = token.split('.');
    let question: QuestionId = parts.next()?.parse().ok()?;
    let choice = parts.next()?.parse().ok()?;
    let expiry = parts.next()?.parse().ok()?;
    let signature = parts.next()?.to_owned();
    parts.next().is_none().then_some(Token { question, choice, expiry, signature })
}

/// What a checked token stands for: the question, the choice's label and command, and who
/// the card was sent to.
struct Act {
    question: Question,
    label: String,
    command: String,
    to: String,
    signature: String,
}

/// Why a link does nothing.
enum Refused {
    /// Not a link askgate made, or not for a card it still knows.
    Unknown,
    /// Past its time.
    Expired,
    /// askgate's store did not answer.
    Unavailable,
}

#[derive(Clone)]
struct Links {
    engine: Engine,
    clock: Clock,
}

impl Links {
    async fn check(&self, token: &str) -> Result<Act, Refused> {
        let token = parse(token).ok_or(Refused::Unknown)?;
        if token.expiry < self.clock.now_ms().div_euclid(1000) {
            return Err(Refused::Expired);
        }
        let records = self.engine.records();
        let question = records.question(token.question).await.map_err(|_| Refused::Unavailable)?;
        let question = question.ok_or(Refused::Unknown)?;
        let cards = records.deliveries(&[token.question]).await.map_err(|_| Refused::Unavailable)?;
        let signed = cards.into_iter().filter(|c| c.surface == SURFACE && c.role == DeliveryRole::Card).find(|card| {
            secret(&card.message).is_some_and(|secret| {
                let expected = signature(secret, token.question, token.choice, token.expiry);
                subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), token.signature.as_bytes()).into()
            })
        });
        let card = signed.ok_or(Refused::Unknown)?;
        let (label, command) = choices(&question).into_iter().nth(token.choice).ok_or(Refused::Unknown)?;
        Ok(Act { question, label, command, to: card.chat, signature: token.signature })
    }
}

/// The routes of one-click links.
pub fn routes(engine: Engine, clock: Clock) -> Router {
    Router::new().route("/act/{token}", get(show).post(act)).with_state(Links { engine, clock })
}

/// The page a link opens: the question and one confirm button; nothing changes.
async fn show(State(links): State<Links>, Path(token): Path<String>) -> Response {
    match links.check(&token).await {
        Ok(act) => {
            let prompt = escape(&act.question.prompt);
            let form = format!(
                "<p>{}</p><form method=\"post\"><button type=\"submit\">{}</button></form>",
                escape(&format!("Your answer: {}", act.label)),
                escape(&format!("Confirm: {}", act.label))
            );
            page(StatusCode::OK, &prompt, &form)
        }
        Err(refused) => refusal(refused),
    }
}

/// The confirm button: answers as the card's addressee, once.
async fn act(State(links): State<Links>, Path(token): Path<String>) -> Response {
    let act = match links.check(&token).await {
        Ok(act) => act,
        Err(refused) => return refusal(refused),
    };
    let prompt = escape(&act.question.prompt);
    match links.engine.router().first_sighting(&format!("email:link:{}", act.signature)).await {
        Ok(true) => {}
        Ok(false) => return page(StatusCode::CONFLICT, &prompt, "<p>This link was already used.</p>"),
        Err(_) => return refusal(Refused::Unavailable),
    }
    let who = format!("{}:{}", SURFACE.as_str(), act.to);
    let (Ok(conversation), Ok(user), Some(Ok(command))) =
        (Conversation::parse(&who), UserRef::parse(&who), Command::parse(&act.command))
    else {
        return refusal(Refused::Unknown);
    };
    let response = links.engine.router().handle(Inbound::tap(conversation, user, SURFACE, command)).await;
    let said = match (&response.receipt, &response.text) {
        (Some(Receipt::Resolved { .. }), _) | (_, None) => format!("Answered: {}. You can close this page.", act.label),
        (_, Some(text)) => text.clone(),
    };
    page(StatusCode::OK, &prompt, &format!("<p>{}</p>", escape(&said)))
}

fn refusal(refused: Refused) -> Response {
    let (status, why) = match refused {
        Refused::Unknown => (StatusCode::NOT_FOUND, "This link is not one askgate made, or its question is gone."),
        Refused::Expired => (StatusCode::GONE, "This link has expired."),
        Refused::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "askgate cannot answer now; try again in a minute."),
    };
    page(status, "askgate", &format!("<p>{why}</p>"))
}

/// A page of its own, with a policy that lets its one form post back to itself.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"robots\" content=\"noindex\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title></head>\
         <body><h1>{title}</h1>{body}</body></html>"
    );
    let policy = "default-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, policy),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (status, headers, html).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_question_and_choice_and_is_signed_by_the_card() {
        let q = crate::question::test_question(crate::question::Ask::question("Ship?").options(["a", "b"]));
        let secret = "0123456789abcdef0123456789abcdef";
        let token = token(&q, 1, secret, 0);
        let read = parse(&token).unwrap();
        assert_eq!((read.question, read.choice), (q.id, 1));
        assert_eq!(read.signature, signature(secret, q.id, 1, read.expiry));
        assert_ne!(read.signature, signature("another secret, just as long....", q.id, 1, read.expiry));
        assert_ne!(read.signature, signature(secret, q.id, 0, read.expiry), "another choice, another signature");
        assert!(parse(&format!("{token}.x")).is_none() && parse("nonsense").is_none());
    }

    #[test]
    fn a_cards_secret_is_read_from_its_message_id() {
        let card = format!("{CARD}q.0123456789abcdef0123456789abcdef@example.com");
        assert_eq!(secret(&card), Some("0123456789abcdef0123456789abcdef"));
        assert_eq!(secret("askgate.card.q.short@example.com"), None);
        assert_eq!(secret("askgate.text.x@example.com"), None);
    }
}
