//! Microsoft Teams, as a Bot Framework bot: the Bot Framework posts each activity to
//! `POST /channels/teams`, signed with a token askgate checks ([`auth`]); cards are Adaptive
//! Cards whose `Action.Submit` buttons carry the text commands ([`render`]); replies, cards
//! and their updates go to each conversation's Bot Connector ([`connector`]) with a token of
//! the bot's app.
//!
//! Users are `teams:<AAD object id>`. Conversations are `teams:<conversation id>` (a group chat
//! or a channel thread, `teams:19:…`), but a person's personal chat with the bot is
//! `teams:<their AAD object id>`: whatever its Teams id (which changes when the bot is
//! installed again), it is the place to ask them, even before it exists. Teams lets a bot
//! write first only where someone has talked to it, so askgate keeps where it heard from
//! ([`references`]); a question to a person it never heard from ends at once as cancelled,
//! saying why. An activity is applied before its request is answered, once (its id is the
//! update key).

mod activity;
mod auth;
mod component;
pub mod config;
mod connector;
mod outbound;
mod references;
mod render;
mod routes;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::command::Command;
use crate::engine::retry::{pause, pauses};
use crate::engine::{ChannelError, ChannelState, Claims, Engine, Inbound, Records, Retry};
use crate::question::{Conversation, Receipt, UserRef};
use activity::{Activity, Said};
use connector::{ApiError, Connector};
use references::References;

pub use component::Platform;

/// Where answers given on Teams come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("teams");

/// The Teams channel: the bot's app and its Bot Connector client.
pub struct Teams {
    /// The bot's Microsoft app id.
    app_id: String,
    connector: Connector,
    references: References,
    /// Ends a question Teams cannot carry (to a person the bot never heard from), saying why.
    claims: Claims,
    clock: Clock,
}

impl Teams {
    /// The channel of the app `app_id`, ready to send once it serves.
    pub fn new(app_id: String, connector: Connector, records: Records, claims: Claims, clock: Clock) -> Arc<Self> {
        let references = References::new(records);
        Arc::new(Self { app_id, connector, references, claims, clock })
    }

    /// Gets a first token (which checks the app's credentials), then waits until `stop` fires;
    /// activities are applied by the endpoint ([`routes`]). How the connector and the token
    /// endpoint stand shows on `/healthz`.
    ///
    /// # Errors
    /// Never so far: a refused password shows as down, and is tried again.
    pub async fn serve(
        self: Arc<Self>,
        door: Arc<auth::Door>,
        engine: Engine,
        stop: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut states = self.connector.states();
        let watcher = {
            let (engine, stop) = (engine.clone(), stop.clone());
            async move {
                loop {
                    let state = match states.borrow_and_update().clone() {
                        ChannelState::Up if !door.keys_healthy() => keys_unavailable(),
                        state => state,
                    };
                    engine.delivery().set_channel_state("teams", state);
                    // The keys are fetched when activities come: looked at again each minute.
                    tokio::select! {
                        changed = states.changed() => if changed.is_err() { return },
                        () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
                        () = stop.cancelled() => return,
                    }
                }
            }
        };
        let watcher = engine.tasks().spawn(watcher);
        let mut waits = pauses(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60));
        while let Err(e) = self.connector.token().await {
            tracing::warn!(error = %e, "teams: could not get a token for the bot");
            if pause(waits.next().unwrap_or_default(), &stop).await.is_err() {
                return Ok(());
            }
        }
        tracing::info!("teams connected");
        stop.cancelled().await;
        let _ = watcher.await;
        Ok(())
    }

    /// Applies one activity: keeps where it came from, then hands a message or a tap to the
    /// engine and answers its sender.
    async fn apply(&self, activity: Activity, engine: &Engine) {
        // Applied before the endpoint answers: an activity the Bot Framework was told arrived
        // has had its effect, so a stop or a crash after the answer loses none (before it, the
        // Bot Framework sends it again).
        if let Err(e) = self.references.heard(&activity).await {
            tracing::warn!(error = %e, "teams: could not keep where an activity came from");
        }
        let (Some(conversation), Some(user)) = (conversation_of(&activity), self.user(&activity, engine)) else {
            return;
        };
        let inbound = match &activity.said {
            Said::Text(text) if !text.is_empty() => Inbound::text(conversation, user, SURFACE, text.clone()),
            Said::Tap(payload) => match Command::parse(payload) {
                Some(Ok(command)) => Inbound::tap(conversation, user, SURFACE, command),
                _ => return,
            },
            Said::Text(_) | Said::Joined | Said::Other => return,
        };
        let name = activity.from.name.clone().unwrap_or_default();
        let inbound = inbound
            .named(&name)
            .keyed(format!("teams:activity:{}", activity.id))
            .speaking(activity.locale.as_deref())
            .in_private(activity.personal);
        let tap = matches!(activity.said, Said::Tap(_));
        let response = engine.router().handle(inbound).await;
        let text = if tap {
            // A tap that resolved shows on the card; anything else is said under it. Teams has
            // no note only the tapper sees, so it names them.
            if matches!(response.receipt, Some(Receipt::Resolved { .. })) {
                None
            } else {
                crate::wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale)
                    .map(|note| if name.is_empty() { note } else { format!("{name}: {note}") })
            }
        } else {
            response.text
        };
        if let Some(text) = text {
            let reply = render::text(&text);
            let replied = self.connector.reply(&activity.service_url, &activity.conversation, &activity.id, &reply);
            if let Err(e) = replied.await {
                tracing::warn!(error = %e, "could not answer on teams");
            }
        }
    }

    /// Who sent `activity`: `teams:<AAD object id>`, or `teams:<UPN>` where the channel's
    /// `allowed_users` lets them in by the UPN the activity gives and not by their id. None
    /// for a sender without an AAD object id (another bot).
    fn user(&self, activity: &Activity, engine: &Engine) -> Option<UserRef> {
        let by_id = UserRef::parse(&format!("teams:{}", activity.from.aad.as_deref()?)).ok()?;
        let conversation = conversation_of(activity)?;
        let policies = engine.policies();
        if policies.lets_in(&conversation, &by_id) {
            return Some(by_id);
        }
        let by_upn =
            activity.from.upn.as_deref().and_then(|upn| UserRef::parse(&format!("teams:{}", upn.to_lowercase())).ok());
        Some(by_upn.filter(|upn| policies.lets_in(&conversation, upn)).unwrap_or(by_id))
    }
}

/// The conversation of `activity`: `teams:<conversation id>`, or for a personal chat
/// `teams:<the person's AAD object id>`.
fn conversation_of(activity: &Activity) -> Option<Conversation> {
    let id = match &activity.from.aad {
        Some(aad) if activity.personal => aad,
        _ => &activity.conversation,
    };
    Conversation::parse(&format!("teams:{id}")).ok()
}

fn channel_error(e: &ApiError) -> ChannelError {
    match e.retry() {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

/// What `/healthz` says while the Bot Framework's keys cannot be fetched: activities are
/// refused (503, so the Bot Framework sends them again) until they can.
fn keys_unavailable() -> ChannelState {
    ChannelState::Degraded("the Bot Framework's keys (openid_url) cannot be fetched".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity(personal: bool, aad: Option<&str>) -> Activity {
        Activity {
            id: "1".into(),
            service_url: "https://smba.trafficmanager.net/amer/".into(),
            conversation: if personal { "a:1xyz".into() } else { "19:abc@thread.v2".into() },
            personal,
            tenant: None,
            from: activity::From { id: "29:1".into(), name: None, aad: aad.map(str::to_owned), upn: None },
            locale: None,
            said: Said::Other,
        }
    }

    #[test]
    fn a_personal_chat_is_the_persons_conversation_a_group_its_own() {
        let aad = "7faf3d4c-1a3c-4e6f-9b61-b55f3f3b8c11";
        assert_eq!(conversation_of(&activity(true, Some(aad))).unwrap().as_str(), format!("teams:{aad}"));
        assert_eq!(conversation_of(&activity(false, Some(aad))).unwrap().as_str(), "teams:19:abc@thread.v2");
        assert_eq!(conversation_of(&activity(true, None)).unwrap().as_str(), "teams:a:1xyz");
    }
}
