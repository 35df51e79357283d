//! Receiving: `/sync` long polling under a lease (one instance syncs), from the position kept
//! in the bot's account data.
//!
//! Telegram keeps the position of a bot's updates itself (the next `getUpdates` offset
//! confirms them); a homeserver keeps none for a client, so askgate keeps it where Telegram
//! would: with the bot's account, on the homeserver (`org.askgate.sync` account data). Every
//! instance and every restart reads the same position, whichever database askgate uses. It is
//! written after each batch with room events is applied: a crash in between gets that batch
//! again, and its events' ids (the update keys) make the second delivery change nothing. The
//! filter leaves that account data out of the sync, so writing it wakes no poll.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::client::ApiError;
use super::{Matrix, StartError, events};
use crate::engine::retry::pause;
use crate::engine::{ChannelState, Engine};

/// The account data type holding the sync position.
pub const POSITION: &str = "org.askgate.sync";

/// What a sync asks for: rooms' timelines and state, no presence, typing, receipts or
/// account data (the position's own among them).
const FILTER: &str = r#"{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},"room":{"ephemeral":{"not_types":["*"]},"account_data":{"not_types":["*"]},"timeline":{"limit":100}}}"#;

/// How long a poll waits for events.
const POLL: Duration = Duration::from_secs(30);
/// How many failed syncs in a row mark the channel down.
const DOWN_AFTER: u32 = 3;
/// The longest pause between failed syncs.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Matrix {
    /// Logs in with the password when it has one, checks the token (retrying while the
    /// homeserver cannot be reached or asks to slow down), joins the rooms of
    /// the configuration, then syncs while this instance holds the lease, until `stop`.
    ///
    /// # Errors
    /// When the homeserver refuses the password or the token, or the token is another
    /// account's.
    pub async fn serve(self: std::sync::Arc<Self>, engine: Engine, stop: CancellationToken) -> Result<(), StartError> {
        let state = |s| engine.delivery().set_channel_state("matrix", s);
        state(ChannelState::Connecting);
        let mut failures = 0;
        let mut logged_in = self.password.is_none();
        let me = loop {
            let attempt = tokio::select! {
                me = self.sign_in(&mut logged_in) => me,
                () = stop.cancelled() => return Ok(()),
            };
            match attempt {
                Ok(me) => break me,
                Err(e) if e.retry() != crate::engine::Retry::No => {
                    failures += 1;
                    // A homeserver asking to slow down (a login's rate limit) says how long.
                    let wait = match &e {
                        ApiError::Limited(Some(after)) => *after,
                        _ => backoff(failures),
                    };
                    tracing::warn!(error = %e, "could not sign in to matrix; retrying in {}s", wait.as_secs());
                    state(ChannelState::Down(format!("signing in: {e}; retrying")));
                    if pause(wait, &stop).await.is_err() {
                        return Ok(());
                    }
                }
                Err(e) => match (&self.password, logged_in) {
                    (Some((variable, _)), false) => {
                        let (variable, user) = (variable.clone(), self.me.clone());
                        return Err(StartError::Password { variable, user, source: e });
                    }
                    _ => return Err(StartError::Token(e)),
                },
            }
        };
        if me != self.me {
            return Err(StartError::OtherAccount { actual: me, configured: self.me.clone() });
        }
        tracing::info!(user = %self.me, "matrix connected");
        state(ChannelState::Up);
        for room in &self.rooms {
            if let Err(e) = self.client.join(room).await {
                tracing::warn!(error = %e, room, "could not join a room of channels.matrix.rooms");
            }
        }
        while let Some(held) = engine.leases().lease("matrix:sync").await {
            let syncing = stop.child_token();
            tokio::select! {
                () = self.sync(&engine, &syncing) => break,
                () = held.lost() => {
                    tracing::warn!("stopped syncing matrix: the lease on it was lost");
                    syncing.cancel();
                }
            }
        }
        Ok(())
    }

    /// Logs in with the password unless `logged_in` (then it is), and checks the token: whose
    /// it is.
    async fn sign_in(&self, logged_in: &mut bool) -> Result<String, ApiError> {
        if let Some((_, password)) = self.password.as_ref().filter(|_| !*logged_in) {
            self.client.login(&self.me, password, super::DEVICE).await?;
            *logged_in = true;
            tracing::info!(user = %self.me, device = super::DEVICE, "logged in to matrix with the password");
        }
        self.client.whoami().await
    }

    /// Syncs until `stop`, applying each batch in order and keeping the position after it.
    async fn sync(&self, engine: &Engine, stop: &CancellationToken) {
        let Ok(mut since) = self.position(engine, stop).await else { return };
        let mut failing: Option<(u32, Instant)> = None;
        loop {
            // The first sync ever only learns where now is: what was said before askgate
            // joined is not acted on.
            let wait = if since.is_some() { POLL } else { Duration::ZERO };
            let result = tokio::select! {
                result = self.client.sync(since.as_deref(), wait, FILTER) => result,
                () = stop.cancelled() => return,
            };
            match result {
                Ok(batch) => {
                    if let Some((count, at)) = failing.take() {
                        tracing::info!(
                            "matrix sync recovered after {count} failed attempts over {}s",
                            at.elapsed().as_secs()
                        );
                    }
                    engine.delivery().set_channel_state("matrix", ChannelState::Up);
                    let acted = self.apply(&batch, since.as_deref(), engine).await;
                    let Some(next) = batch["next_batch"].as_str() else { continue };
                    if acted || since.is_none() {
                        self.keep_position(next).await;
                    }
                    since = Some(next.to_owned());
                }
                Err(ApiError::Limited(after)) => {
                    let wait = after.unwrap_or(Duration::from_secs(1));
                    tracing::info!(ms = wait.as_millis(), "the homeserver asked to slow down syncing");
                    if pause(wait, stop).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let (count, at) = failing.get_or_insert((0, Instant::now()));
                    *count += 1;
                    if *count == 1 {
                        tracing::warn!(error = %e, "matrix sync failed; retrying (logged again once it recovers)");
                    }
                    if *count >= DOWN_AFTER {
                        let why =
                            format!("syncing has failed {count} times in a row since {}s: {e}", at.elapsed().as_secs());
                        engine.delivery().set_channel_state("matrix", ChannelState::Down(why));
                    }
                    if pause(backoff(*count), stop).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// The position kept in the account data, read again until the homeserver answers.
    async fn position(&self, engine: &Engine, stop: &CancellationToken) -> Result<Option<String>, ()> {
        let mut failures = 0;
        loop {
            match self.client.account_data(&self.me, POSITION).await {
                Ok(data) => return Ok(data.and_then(|d| d["since"].as_str().map(str::to_owned))),
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "could not read the matrix sync position; retrying");
                    engine.delivery().set_channel_state("matrix", ChannelState::Down(e.to_string()));
                    pause(backoff(failures), stop).await?;
                }
            }
        }
    }

    async fn keep_position(&self, since: &str) {
        let data = json!({ "since": since });
        let kept = crate::engine::retry::retrying(crate::engine::retry::Backoff::QUICK, ApiError::retry, || {
            self.client.set_account_data(&self.me, POSITION, &data)
        });
        if let Err(e) = kept.await {
            tracing::warn!(error = %e, "could not keep the matrix sync position; a restart gets these events again");
        }
    }

    /// Applies a batch: invites first, then each joined room's events in order. `since`: where
    /// the batch starts; none for the first sync ever, whose timelines are history. Whether it
    /// had rooms in it.
    async fn apply(&self, batch: &Value, since: Option<&str>, engine: &Engine) -> bool {
        let rooms = &batch["rooms"];
        let mut acted = false;
        for (room, invited) in rooms["invite"].as_object().into_iter().flatten() {
            acted = true;
            self.invited(room, invited, engine).await;
        }
        for (room, joined) in rooms["join"].as_object().into_iter().flatten() {
            acted = true;
            let Some(since) = since else { continue };
            // A room whose encryption was turned on after askgate joined.
            if events::encrypted(joined) {
                self.refuse_encrypted(room, engine).await;
            }
            let timeline = &joined["timeline"];
            if timeline["limited"] == true
                && let Some(gap) = timeline["prev_batch"].as_str()
            {
                for event in self.gap(room, gap, since).await {
                    self.on_event(room, &event, engine).await;
                }
            }
            for event in timeline["events"].as_array().into_iter().flatten() {
                self.on_event(room, event, engine).await;
            }
        }
        acted
    }

    /// The events of `room` a limited timeline left out, between `since` and `from`, oldest
    /// first (as many as the homeserver gives; what it cannot is logged).
    async fn gap(&self, room: &str, from: &str, since: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut next = Some(from.to_owned());
        // At most 100 pages of 100 events: a gap longer than that is a room to read, not to act on.
        for _ in 0..100 {
            let Some(from) = next.take() else { break };
            match self.client.messages_back(room, &from, since).await {
                Ok((page, end)) => {
                    events.extend(page);
                    next = end;
                }
                Err(e) => {
                    tracing::warn!(error = %e, room, "could not read the events a sync left out; they are not applied");
                    break;
                }
            }
        }
        events.reverse();
        events
    }

    /// Joins `room` when an allowed user invited the bot; an encrypted room is told at once
    /// that askgate cannot read it. Other invites are left unanswered.
    async fn invited(&self, room: &str, invited: &Value, engine: &Engine) {
        let Some(inviter) = events::inviter(invited, &self.me) else { return };
        let (Some(user), Ok(conversation)) =
            (super::user_ref(inviter), crate::question::Conversation::parse(&format!("matrix:{room}")))
        else {
            return;
        };
        if !engine.policies().lets_in(&conversation, &user) {
            tracing::info!(room, inviter, "ignored an invite from someone not in channels.matrix.allowed_users");
            return;
        }
        match self.client.join(room).await {
            Ok(_) => tracing::info!(room, inviter, "joined a matrix room"),
            Err(e) => {
                tracing::warn!(error = %e, room, "could not join a matrix room");
                return;
            }
        }
        if events::encrypted(invited) {
            self.refuse_encrypted(room, engine).await;
        }
    }
}

/// The pause after the `n`th failure in a row (from 1).
fn backoff(failures: u32) -> Duration {
    let nth = usize::try_from(failures.saturating_sub(1).min(16)).unwrap_or(16);
    crate::engine::retry::pauses(Duration::from_secs(1), MAX_BACKOFF).nth(nth).unwrap_or(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_json_and_leaves_the_position_out() {
        let filter: Value = serde_json::from_str(FILTER).unwrap();
        assert_eq!(filter["account_data"]["not_types"], json!(["*"]));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
