//! `POST /channels/google-chat`: the Chat app's HTTP endpoint. Each request carries a bearer
//! token Google signs; askgate verifies it with Google's published keys before reading the
//! event, and answers 401, changing nothing, when it does not verify. With a project number
//! as the app's authentication audience the token is issued by
//! `chat@system.gserviceaccount.com` for that number; with the endpoint's URL it is a Google ID
//! token (issuer `https://accounts.google.com`) for that URL whose verified `email` is
//! `chat@system.gserviceaccount.com`.
//!
//! The event is applied before the request is answered, and the answer is Chat's synchronous
//! response: a reply in the message's thread, the clicked card updated in place
//! (`UPDATE_MESSAGE`), or a note only the clicker sees (`privateMessageViewer`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::events::{self, Event, Person, Place, Unread};
use super::{GoogleChat, SURFACE, conversation_of, render, typed};
use crate::channel::jwt::{Expect, Keys, Refused};
use crate::channel::posted::{read_body, refuse};
use crate::command::Command;
use crate::engine::{Engine, Inbound};
use crate::question::Receipt;
use crate::wording;

/// The path Chat posts to.
pub const PATH: &str = "/channels/google-chat";
/// Chat's own account: the issuer of its tokens, and the `email` of its ID tokens.
pub const CHAT_ISSUER: &str = "chat@system.gserviceaccount.com";
/// The issuers of Google's ID tokens.
const GOOGLE_ISSUERS: [&str; 2] = ["https://accounts.google.com", "accounts.google.com"];
/// The largest event accepted.
const MAX_BODY: usize = 256 * 1024;

/// The endpoint's state: the channel, the engine, and what a token must be.
pub struct Door {
    chat: Arc<GoogleChat>,
    engine: Engine,
    keys: Arc<Keys>,
    expect: Expect,
    /// Whether the audience is the endpoint's URL: the token is then an ID token, and its
    /// `email` must be Chat's.
    id_token: bool,
}

impl Door {
    /// The door of `chat`, checking tokens for `audience` with `keys`.
    pub fn new(
        chat: Arc<GoogleChat>,
        engine: Engine,
        keys: Arc<Keys>,
        audience: &super::config::Audience,
    ) -> Arc<Self> {
        let (issuers, id_token) = match audience {
            super::config::Audience::Project(_) => (vec![CHAT_ISSUER.to_owned()], false),
            super::config::Audience::Url(_) => (GOOGLE_ISSUERS.iter().map(|i| (*i).to_owned()).collect(), true),
        };
        let expect = Expect { issuers, audience: audience.as_str().to_owned() };
        Arc::new(Self { chat, engine, keys, expect, id_token })
    }

    /// Whether the request's bearer token is Chat's, for this app.
    async fn verify(&self, headers: &HeaderMap) -> Result<(), Response> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let Some(bearer) = bearer else {
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "no bearer token: Google Chat signs each request",
            ));
        };
        let verified = match self.keys.verify(bearer, &self.expect).await {
            Ok(verified) => verified,
            Err(Refused::Unavailable(why)) => {
                tracing::warn!(why, "google chat: Google's keys cannot be fetched; a request waits to be sent again");
                return Err(refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the keys to verify the token cannot be fetched",
                ));
            }
            Err(why) => {
                tracing::info!(%why, "google chat: a request's token was refused");
                return Err(refuse(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    format!("the bearer token is refused: {why}"),
                ));
            }
        };
        if self.id_token {
            let claims = &verified.claims;
            if claims["email"] != CHAT_ISSUER || claims["email_verified"] != true {
                tracing::info!("google chat: an ID token that is not Chat's was refused");
                return Err(refuse(StatusCode::UNAUTHORIZED, "unauthorized", "the ID token is not Google Chat's"));
            }
        }
        Ok(())
    }

    /// Applies one event; Chat's synchronous response to it.
    async fn apply(&self, event: Event) -> Value {
        match event {
            Event::Message { name, person, place, text } => self.on_message(&name, &person, &place, &text).await,
            Event::Click { message, person, place, command } => {
                self.on_click(&message, &person, &place, &command).await
            }
            // Added to a space: the commands it takes.
            Event::Added { .. } => json!({"text": render::text(&self.engine.router().help())}),
        }
    }

    async fn on_message(&self, name: &str, person: &Person, place: &Place, text: &str) -> Value {
        let (Some(conversation), true) = (conversation_of(&place.space), !text.is_empty()) else { return json!({}) };
        let Some(user) = self.chat.person(&self.engine, person, &conversation) else { return json!({}) };
        let mut inbound = Inbound::text(conversation, user, SURFACE, typed(text))
            .keyed(format!("google_chat:message:{name}"))
            .in_private(place.direct)
            .speaking(person.locale.as_deref());
        if let Some(display) = &person.display {
            inbound = inbound.named(display);
        }
        let response = self.engine.router().handle(inbound).await;
        match response.text {
            Some(text) => {
                let mut reply = json!({"text": render::text(&text)});
                if let Some(thread) = &place.thread {
                    reply["thread"] = json!({"name": thread});
                }
                reply
            }
            None => json!({}),
        }
    }

    async fn on_click(&self, message: &str, person: &Person, place: &Place, command: &str) -> Value {
        let Some(conversation) = conversation_of(&place.space) else { return json!({}) };
        let Some(user) = self.chat.person(&self.engine, person, &conversation) else { return json!({}) };
        let Some(Ok(parsed)) = Command::parse(command) else {
            tracing::warn!(command, "a google chat button carried a command that is not understood");
            return private(person, "That button is not understood.");
        };
        let mut inbound = Inbound::tap(conversation, user, SURFACE, parsed)
            .keyed(format!("google_chat:click:{message}:{}:{command}", person.name))
            .speaking(person.locale.as_deref());
        if let Some(display) = &person.display {
            inbound = inbound.named(display);
        }
        let response = self.engine.router().handle(inbound).await;
        if let (Some(Receipt::Resolved { .. }), Some(question)) = (&response.receipt, &response.resolved) {
            // The card changes in place at once; the engine's update of every card follows.
            return json!({"actionResponse": {"type": "UPDATE_MESSAGE"}, "cardsV2": render::resolved(question)});
        }
        match wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale) {
            Some(note) => private(person, &note),
            None => json!({}),
        }
    }
}

/// A new message only `person` sees (and the app).
fn private(person: &Person, text: &str) -> Value {
    json!({"actionResponse": {"type": "NEW_MESSAGE"}, "privateMessageViewer": {"name": person.name},
        "text": render::text(text)})
}

/// The route `POST /channels/google-chat`, answered through `door`.
pub fn routes(door: Arc<Door>) -> Router {
    Router::new().route(PATH, post(receive)).with_state(door)
}

/// `POST /channels/google-chat`.
async fn receive(State(door): State<Arc<Door>>, headers: HeaderMap, request: Request) -> Response {
    // The token first: nothing of an unverified request is read.
    if let Err(refusal) = door.verify(&headers).await {
        return refusal;
    }
    let body = match read_body(request, MAX_BODY).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let event: Value = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "bad_request", format!("not JSON: {e}")),
    };
    match events::read(&event) {
        Ok(event) => axum::Json(door.apply(event).await).into_response(),
        Err(Unread::Ignored(kind)) => {
            tracing::debug!(kind, "google chat: an event askgate takes no action on");
            axum::Json(json!({})).into_response()
        }
        Err(missing) => refuse(StatusCode::BAD_REQUEST, "bad_request", missing.to_string()),
    }
}
