//! Long polling of `getUpdates`, written here rather than taken from teloxide's `Polling`.
//!
//! Two things decide that. Telegram holds an idle poll open for the timeout it is asked for, so
//! the HTTP client must wait longer than that or every idle poll ends in a client-side error
//! (teloxide's default client gives up after 17 s; its polling asks for more). And only a loop
//! of our own sees a successful empty poll, which is what tells a person at 3 a.m. that polling
//! recovered: teloxide's stream yields updates and errors, never "all is well again".

use std::time::{Duration, Instant};

use teloxide::RequestError;
use teloxide::payloads::GetUpdatesSetters;
use teloxide::prelude::{Request, Requester};
use teloxide::types::AllowedUpdate;
use tokio_util::sync::CancellationToken;

use super::Telegram;
use crate::engine::ChannelState;
use crate::engine::Engine;
use crate::engine::retry::pause;

/// How many failed polls in a row mark the channel down: one lost poll is a blip, not an outage.
const DOWN_AFTER: u32 = 3;
/// The longest pause between failed polls.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long a poll waits for updates, and how long the HTTP client waits for any answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// The long-poll timeout asked of Telegram (it is shortened to end before `request`).
    pub poll: Duration,
    /// The HTTP client's timeout for one request.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { poll: Duration::from_secs(25), request: Duration::from_secs(40) }
    }
}

impl Timeouts {
    /// The poll timeout to ask for, in whole seconds: the configured one, shortened so that an
    /// idle poll is answered (empty) well before the client would give up on it.
    pub fn long_poll_secs(&self) -> u32 {
        let margin = (self.request / 2).min(Duration::from_secs(10));
        let secs = self.poll.min(self.request.saturating_sub(margin)).as_secs();
        u32::try_from(secs).unwrap_or(u32::MAX)
    }
}

/// The pause after the `n`th failed poll in a row (from 1): short for the first few, so that a
/// blip costs a second or two, then longer, up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    let nth = usize::try_from(failures.saturating_sub(1).min(16)).unwrap_or(16);
    crate::engine::retry::pauses(Duration::from_secs(1), MAX_BACKOFF).nth(nth).unwrap_or(MAX_BACKOFF)
}

/// A run of failed polls.
struct Failing {
    count: u32,
    since: Instant,
}

impl Telegram {
    /// Polls until `stop`, handing each update to the engine in order, and confirms the last
    /// one handled before returning.
    pub(super) async fn poll(&self, engine: &Engine, stop: &CancellationToken) {
        self.delete_webhook().await;
        let mut offset = 0;
        let mut failing: Option<Failing> = None;
        let secs = self.timeouts.long_poll_secs();
        loop {
            let request = self
                .bot
                .get_updates()
                .offset(offset)
                .timeout(secs)
                .allowed_updates([AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
            let result = tokio::select! {
                result = request.send() => result,
                () = stop.cancelled() => break,
            };
            match result {
                Ok(updates) => {
                    if let Some(f) = failing.take() {
                        tracing::info!(
                            "telegram polling recovered after {} failed attempts over {}s",
                            f.count,
                            f.since.elapsed().as_secs()
                        );
                    }
                    engine.delivery().set_channel_state("telegram", ChannelState::Up);
                    for update in updates {
                        // An update is confirmed by the next request's offset, so only once it
                        // was applied; the store's inbound keys make a redelivery harmless.
                        offset = update.id.as_offset();
                        self.on_update(update, engine).await;
                    }
                }
                Err(RequestError::RetryAfter(wait)) => {
                    tracing::info!(seconds = wait.seconds(), "telegram asked to slow down polling");
                    if pause(wait.duration(), stop).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let f = failing.get_or_insert(Failing { count: 0, since: Instant::now() });
                    f.count += 1;
                    self.count_failed_poll();
                    let wait = backoff(f.count);
                    if f.count == 1 {
                        tracing::warn!(error = %e, "telegram polling failed; retrying (logged again once it recovers)");
                    } else {
                        tracing::debug!(error = %e, failures = f.count, "telegram polling failed again");
                    }
                    // The Bot API itself refusing (a revoked token, another process polling with
                    // the same token) lasts until someone acts; a network error usually passes.
                    if let RequestError::Api(_) = e {
                        let why = format!("the Bot API refuses updates: {e}");
                        engine.delivery().set_channel_state("telegram", ChannelState::Down(why));
                    } else if f.count >= DOWN_AFTER {
                        let why = format!(
                            "polling has failed {} times in a row since {}s: {e}",
                            f.count,
                            f.since.elapsed().as_secs()
                        );
                        engine.delivery().set_channel_state("telegram", ChannelState::Down(why));
                    }
                    if pause(wait, stop).await.is_err() {
                        break;
                    }
                }
            }
        }
        if offset != 0 {
            // Confirm what was handled, so a restart does not receive it again.
            let confirm = self.bot.get_updates().offset(offset).timeout(0).limit(1).send();
            if let Err(e) =
                tokio::time::timeout(Duration::from_secs(5), confirm).await.unwrap_or_else(|_| Ok(Vec::new()))
            {
                tracing::debug!(error = %e, "could not confirm the last telegram updates; they will be ignored when redelivered");
            }
        }
    }

    /// Removes a webhook left by an earlier webhook-mode setup: Telegram refuses `getUpdates`
    /// while one is set.
    async fn delete_webhook(&self) {
        match self.bot.get_webhook_info().send().await {
            Ok(info) if info.url.is_some() => {
                if let Err(e) = self.bot.delete_webhook().send().await {
                    tracing::warn!(error = %e, "could not remove the webhook set earlier; polling may be refused");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "could not read the webhook settings"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_poll_ends_before_the_client_gives_up() {
        let t = Timeouts::default();
        assert_eq!(t.long_poll_secs(), 25);
        assert!(Duration::from_secs(u64::from(t.long_poll_secs())) < t.request);
        let short = Timeouts { poll: Duration::from_secs(25), request: Duration::from_secs(17) };
        assert_eq!(short.long_poll_secs(), 8, "a long poll must end well before the client's timeout");
        let tiny = Timeouts { poll: Duration::from_secs(25), request: Duration::from_secs(2) };
        assert_eq!(tiny.long_poll_secs(), 1);
    }

    #[test]
    fn backoff_is_short_at_first_and_capped() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(3), Duration::from_secs(4));
        assert_eq!(backoff(50), MAX_BACKOFF);
    }
}
