//! Receiving: the WebSocket API under a lease (one instance listens). askgate checks the
//! token (`GET /api/v4/users/me`, which also says the bot's id), connects to
//! `/api/v4/websocket`, answers the server's hello with an `authentication_challenge`
//! carrying the token, and applies each `posted` event in order. A dropped connection is
//! made again after a backoff, asking the server for the events it missed
//! (`connection_id` and `sequence_number`, the last `seq` seen); an event delivered twice is
//! applied once (its post's id is the update key).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use websocket::tungstenite::Message;

use super::events::{self, Frame};
use super::{Mattermost, StartError};
use crate::engine::retry::pause;
use crate::engine::{ChannelState, Engine, Retry};

/// The lease one instance holds while it listens.
pub const LEASE: &str = "mattermost:websocket";
/// How many failed connections in a row mark the channel down.
const DOWN_AFTER: u32 = 3;
/// The longest pause between failed connections.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often askgate pings a quiet connection; two pings without a frame back end it.
const PING: Duration = Duration::from_secs(30);

/// Where a connection left off: the server's id for it and the last event's number.
#[derive(Default)]
struct Resume {
    connection: Option<String>,
    seq: Option<i64>,
}

impl Mattermost {
    /// Checks the token (retrying while the server cannot be reached or asks to slow down),
    /// then listens while this instance holds the lease, until `stop`.
    ///
    /// # Errors
    /// When the server refuses the token.
    pub async fn serve(self: std::sync::Arc<Self>, engine: Engine, stop: CancellationToken) -> Result<(), StartError> {
        let state = |s| engine.delivery().set_channel_state("mattermost", s);
        state(ChannelState::Connecting);
        let mut failures = 0;
        let me = loop {
            let attempt = tokio::select! {
                me = self.client.me() => me,
                () = stop.cancelled() => return Ok(()),
            };
            match attempt {
                Ok(me) => break me,
                Err(e) if e.is_token() || e.retry() == Retry::No => return Err(StartError::Token(e)),
                Err(e) => {
                    failures += 1;
                    let wait = match e.retry() {
                        Retry::Later(Some(after)) => after,
                        _ => backoff(failures),
                    };
                    tracing::warn!(error = %e, "could not reach mattermost; retrying in {}s", wait.as_secs());
                    state(ChannelState::Down(format!("checking the token: {e}; retrying")));
                    if pause(wait, &stop).await.is_err() {
                        return Ok(());
                    }
                }
            }
        };
        let id = me["id"].as_str().unwrap_or_default().to_owned();
        let username = me["username"].as_str().unwrap_or_default().to_owned();
        let _ = self.me.set((id, username.clone()));
        tracing::info!(user = %username, "mattermost connected");
        state(ChannelState::Up);
        while let Some(held) = engine.leases().lease(LEASE).await {
            let listening = stop.child_token();
            tokio::select! {
                result = self.listen(&engine, &listening) => return result,
                () = held.lost() => {
                    tracing::warn!("stopped listening to mattermost: the lease on its WebSocket was lost");
                    listening.cancel();
                }
            }
        }
        Ok(())
    }

    /// Connects again and again until `stop`, applying what each connection brings.
    async fn listen(&self, engine: &Engine, stop: &CancellationToken) -> Result<(), StartError> {
        let mut resume = Resume::default();
        let mut failures = 0;
        loop {
            let ended = tokio::select! {
                ended = self.connection(engine, &mut resume, &mut failures) => ended,
                () = stop.cancelled() => return Ok(()),
            };
            let why = match ended {
                Ok(()) => "the server closed the WebSocket".to_owned(),
                Err(Ended::Refused(why)) => {
                    let refused = super::client::ApiError::Refused { status: 401, id: String::new(), message: why };
                    return Err(StartError::Token(refused));
                }
                Err(Ended::Failed(why)) => why,
            };
            failures += 1;
            if failures == 1 {
                tracing::warn!(error = %why, "mattermost's WebSocket ended; connecting again");
            }
            if failures >= DOWN_AFTER {
                let state = ChannelState::Down(format!("the WebSocket failed {failures} times in a row: {why}"));
                engine.delivery().set_channel_state("mattermost", state);
            }
            if pause(backoff(failures), stop).await.is_err() {
                return Ok(());
            }
        }
    }

    /// One connection, from the handshake to its end; `failures` is reset once it is
    /// authenticated.
    async fn connection(&self, engine: &Engine, resume: &mut Resume, failures: &mut u32) -> Result<(), Ended> {
        let mut url = self.client.websocket();
        if let (Some(connection), Some(seq)) = (&resume.connection, resume.seq) {
            url.query_pairs_mut()
                .append_pair("connection_id", connection)
                .append_pair("sequence_number", &(seq + 1).to_string());
        }
        let (socket, _) = websocket::connect_async(url.as_str()).await.map_err(|e| Ended::Failed(e.to_string()))?;
        let (mut sink, mut source) = socket.split();
        let challenge = json!({"seq": 1, "action": "authentication_challenge", "data": {"token": self.client.token()}});
        sink.send(Message::text(challenge.to_string())).await.map_err(|e| Ended::Failed(e.to_string()))?;
        let mut ticks = tokio::time::interval(PING);
        ticks.tick().await;
        let mut quiet = 0;
        loop {
            let frame = tokio::select! {
                frame = source.next() => frame,
                _ = ticks.tick() => {
                    quiet += 1;
                    if quiet > 2 {
                        return Err(Ended::Failed("the server stopped answering pings".to_owned()));
                    }
                    sink.send(Message::Ping(Vec::new().into())).await.map_err(|e| Ended::Failed(e.to_string()))?;
                    continue;
                }
            };
            quiet = 0;
            let text = match frame {
                None => return Ok(()),
                Some(Err(e)) => return Err(Ended::Failed(e.to_string())),
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) => return Ok(()),
                Some(Ok(_)) => continue,
            };
            let frame = events::read(&text, self.me());
            // The hello starts a connection's numbering, or (resumed) continues it.
            if let Some(seq) = events::seq(&text).filter(|_| !matches!(frame, Some(Frame::Hello { .. }))) {
                if let Some(last) = resume.seq.filter(|last| seq > last + 1) {
                    tracing::warn!(last, seq, "mattermost's WebSocket skipped events; those posts are not applied");
                }
                resume.seq = Some(seq);
            }
            match frame {
                Some(Frame::Hello { connection }) => {
                    if connection != resume.connection {
                        resume.seq = Some(0);
                    }
                    resume.connection = connection;
                }
                Some(Frame::Reply { seq: 1, ok: true, .. }) => {
                    *failures = 0;
                    tracing::info!("mattermost's WebSocket is authenticated");
                    engine.delivery().set_channel_state("mattermost", ChannelState::Up);
                }
                Some(Frame::Reply { seq: 1, ok: false, error }) => return Err(Ended::Refused(error)),
                Some(Frame::Posted(post)) => self.on_post(post, engine).await,
                Some(Frame::Reply { .. } | Frame::Other) | None => {}
            }
        }
    }
}

/// Why a connection ended.
enum Ended {
    /// The server refused the token on the WebSocket.
    Refused(String),
    /// It could not be made or it broke.
    Failed(String),
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
    fn failures_back_off_to_a_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
