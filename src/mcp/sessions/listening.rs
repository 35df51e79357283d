//! The standalone event stream (`GET /mcp`) of a 2025-11-25 session, served by askgate itself.
//! Clients keep it open all along (the rmcp and TypeScript SDKs do), so if rmcp served it, an
//! idle session would keep running for it. Here a [`Listener`] in the session's record holds the
//! stream's sender, and the session is put away as if no stream were open. What the client
//! hears on it still reaches it: askgate writes `tools/list_changed` itself, to every session
//! listening, running or not; and while a session runs, what it sends on its own standalone
//! stream (a form shown from a task of its own) is forwarded here.
//!
//! Event ids count on in the listener across the session's runs and the client's
//! reconnections, so one id names one event. A client that comes back with `Last-Event-ID`
//! gets a new stream and the events from then on: what was sent while it had none open is
//! not replayed.

use futures_util::Stream;
use rmcp::model::{ServerJsonRpcMessage, ServerNotification, ToolListChangedNotification};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::mpsc;

/// Events a stream holds for a client slow to read them; past that a `tools/list_changed` is
/// dropped (the next one says the same) and a forwarded message waits.
const CAPACITY: usize = 8;

/// Further streams a session keeps open at once beside its first (as rmcp does).
const MAX_SHADOWS: usize = 32;

/// What a session keeps of its client's standalone event stream.
pub(super) struct Listener {
    /// The open stream's sender; closed once the client dropped the stream.
    sender: Option<mpsc::Sender<ServerSseMessage>>,
    /// The id the next event gets.
    next: u64,
    /// The run whose standalone messages are forwarded here, while one is.
    pub(super) forwarded: Option<u64>,
    /// Streams opened while one already was: kept open and sent nothing, so that two of the
    /// client's connections do not end each other.
    shadows: Vec<mpsc::Sender<ServerSseMessage>>,
}

impl Default for Listener {
    fn default() -> Self {
        // Event id 0 is rmcp's priming event, sent at the start of every stream.
        Self { sender: None, next: 1, forwarded: None, shadows: Vec::new() }
    }
}

impl Listener {
    /// A new stream of the session's events: the one they are sent on, unless one is open.
    pub(super) fn open(&mut self) -> impl Stream<Item = ServerSseMessage> + Send + Sync + use<> {
        let (sender, mut receiver) = mpsc::channel(CAPACITY);
        if self.is_open() {
            self.shadows.retain(|s| !s.is_closed());
            if self.shadows.len() >= MAX_SHADOWS {
                self.shadows.remove(0);
            }
            self.shadows.push(sender);
        } else {
            self.sender = Some(sender);
        }
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }

    /// Whether the client has the stream open.
    pub(super) fn is_open(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// `event` numbered as the stream's next, and the sender to send it on; none when the
    /// stream is closed (the event is lost, as it would be to a client that has none open).
    pub(super) fn event(
        &mut self,
        mut event: ServerSseMessage,
    ) -> Option<(mpsc::Sender<ServerSseMessage>, ServerSseMessage)> {
        let sender = self.sender.as_ref().filter(|s| !s.is_closed())?.clone();
        event.event_id = Some(self.next.to_string());
        self.next += 1;
        Some((sender, event))
    }
}

/// The event that says the tools changed.
pub(super) fn tools_changed() -> ServerSseMessage {
    ServerSseMessage::from_message(ServerJsonRpcMessage::notification(ServerNotification::ToolListChangedNotification(
        ToolListChangedNotification::default(),
    )))
}

/// Whether `message` says the tools changed: askgate writes that to listeners itself, so a
/// running session's own is not forwarded (it would come twice).
pub(super) fn is_tools_changed(message: &ServerJsonRpcMessage) -> bool {
    matches!(message, ServerJsonRpcMessage::Notification(n)
        if matches!(n.notification, ServerNotification::ToolListChangedNotification(_)))
}

/// Whether a `Last-Event-ID` names an event of the standalone stream (`7`), not of a request's
/// own stream (`7/3`, rmcp's).
pub(super) fn is_standalone(last_event_id: &str) -> bool {
    !last_event_id.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn events_are_numbered_on_across_reconnections() {
        let mut listener = Listener::default();
        let mut first = Box::pin(listener.open());
        let (sender, event) = listener.event(tools_changed()).unwrap();
        sender.send(event).await.unwrap();
        assert_eq!(first.next().await.unwrap().event_id.as_deref(), Some("1"));
        drop(first);
        assert!(!listener.is_open());
        assert!(listener.event(tools_changed()).is_none(), "nobody listens: nothing to send");

        let mut second = Box::pin(listener.open());
        let (sender, event) = listener.event(tools_changed()).unwrap();
        sender.send(event).await.unwrap();
        assert_eq!(second.next().await.unwrap().event_id.as_deref(), Some("2"));
    }

    #[tokio::test]
    async fn a_second_stream_is_a_shadow_and_the_first_keeps_the_events() {
        let mut listener = Listener::default();
        let mut first = Box::pin(listener.open());
        let mut shadow = Box::pin(listener.open());
        let (sender, event) = listener.event(tools_changed()).unwrap();
        sender.send(event).await.unwrap();
        assert!(first.next().await.unwrap().message.is_some_and(|m| is_tools_changed(&m)));
        assert!(futures_util::poll!(shadow.next()).is_pending(), "the shadow stays open and silent");
        drop((sender, listener));
        assert!(first.next().await.is_none(), "a listener dropped with its session ends its streams");
        assert!(shadow.next().await.is_none());
    }

    #[test]
    fn a_request_streams_event_id_is_not_the_standalone_streams() {
        assert!(is_standalone("12"));
        assert!(!is_standalone("3/1"));
    }
}
