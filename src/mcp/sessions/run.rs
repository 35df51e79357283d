//! Running a session: starting one put away again, forwarding what it sends on its
//! standalone stream to the stream askgate holds for its client, and the work of
//! [`Sessions`](super::Sessions) in the background (telling listeners that the tools changed,
//! forgetting sessions unused for `session_timeout`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, InitializeRequest, InitializeRequestParams,
    InitializedNotification, RequestId,
};
use rmcp::service::serve_server_with_ct;
use rmcp::transport::TransportAdapterIdentity;
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage, SessionId, SessionManager};
use tokio::sync::watch;

use super::listening::{self, Listener};
use super::{SessionsError, Shared, State, Watched};

impl Shared {
    /// Starts the session `id` again as its run `run`, and says so to those waiting.
    pub(super) async fn restart(
        self: &Arc<Self>,
        id: &SessionId,
        run: u64,
        params: InitializeRequestParams,
        parts: Option<&axum::http::request::Parts>,
    ) -> Result<(), SessionsError> {
        let started = self.start(id, run, params, parts).await;
        let closed = {
            let mut records = self.lock();
            match records.by_id.get_mut(id).filter(|r| r.run == run) {
                Some(record) => {
                    record.state = match started {
                        Ok(()) => State::Running { busy: Vec::new(), asked: Vec::new(), streams: 0, ready: true },
                        Err(_) => State::Away,
                    };
                    false
                }
                // Closed (a DELETE) while it started.
                None => true,
            }
        };
        self.changed.notify_waiters();
        // What did start of it is ended: a later request starts it afresh.
        if closed || started.is_err() {
            self.close_local(id).await;
        }
        if closed {
            return Err(SessionsError::Unknown(id.clone()));
        }
        if started.is_ok() {
            self.forward(id, run).await;
        }
        started
    }

    /// Starts the session `id` again as its run `run`: a new handler, and the client's
    /// handshake replayed to it.
    async fn start(
        self: &Arc<Self>,
        id: &SessionId,
        run: u64,
        params: InitializeRequestParams,
        parts: Option<&axum::http::request::Parts>,
    ) -> Result<(), SessionsError> {
        let RestoreOutcome::Restored(transport) = self.local.restore_session(id.clone()).await? else {
            return Err(SessionsError::Restart(id.clone()));
        };
        let transport = Watched { inner: transport, sessions: self.clone(), id: id.clone(), run };
        let (server, stop, shared, session) = (self.server.clone(), self.stop.child_token(), self.clone(), id.clone());
        let (served, started) = tokio::sync::oneshot::channel();
        self.server.engine.tasks().spawn(async move {
            match serve_server_with_ct::<_, _, _, TransportAdapterIdentity>(server, transport, stop).await {
                Ok(running) => {
                    let _ = served.send(());
                    if let Err(e) = running.waiting().await {
                        tracing::error!(session = %session, error = %e, "an MCP session's task failed");
                    }
                }
                Err(e) => tracing::warn!(session = %session, error = %e, "an MCP session could not be started again"),
            }
            shared.ended(&session, run).await;
        });
        let mut initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(params)),
            RequestId::Number(0),
        );
        let mut initialized = ClientJsonRpcMessage::notification(ClientNotification::InitializedNotification(
            InitializedNotification::default(),
        ));
        if let Some(parts) = parts {
            initialize.insert_extension(parts.clone());
            initialized.insert_extension(parts.clone());
        }
        self.local.initialize_session(id, initialize).await?;
        self.local.accept_message(id, initialized).await?;
        started.await.map_err(|_| SessionsError::Restart(id.clone()))
    }

    /// Forwards what the run `run` of the session `id` sends on its standalone stream to the
    /// stream askgate holds for the client, if the client has one open and nothing forwards
    /// that run's yet.
    pub(super) async fn forward(self: &Arc<Self>, id: &SessionId, run: u64) {
        {
            let mut records = self.lock();
            let Some(record) = records.by_id.get_mut(id).filter(|r| r.run == run) else { return };
            if !matches!(record.state, State::Running { .. }) {
                return;
            }
            let Some(listener) = record.listening.as_mut().filter(|l| l.is_open()) else { return };
            if listener.forwarded == Some(run) {
                return;
            }
            listener.forwarded = Some(run);
        }
        let stream = match self.local.create_standalone_stream(id).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "an MCP session's standalone stream could not be forwarded");
                if let Some(listener) = self.lock().by_id.get_mut(id).and_then(|r| r.listening.as_mut())
                    && listener.forwarded == Some(run)
                {
                    listener.forwarded = None;
                }
                return;
            }
        };
        let (shared, id) = (self.clone(), id.clone());
        // It ends with the run (rmcp's session drops the stream's sender).
        self.server.engine.tasks().spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if event.message.as_deref().is_some_and(|m| !listening::is_tools_changed(m)) {
                    shared.tell(&id, event).await;
                }
            }
            if let Some(listener) = shared.lock().by_id.get_mut(&id).and_then(|r| r.listening.as_mut())
                && listener.forwarded == Some(run)
            {
                listener.forwarded = None;
            }
        });
    }

    /// Sends `message` on the stream the client of session `id` has open, waiting while the
    /// client is slow to read; lost when it has none open.
    async fn tell(&self, id: &SessionId, event: ServerSseMessage) {
        let event = self.lock().by_id.get_mut(id).and_then(|r| r.listening.as_mut()).and_then(|l| l.event(event));
        if let Some((sender, event)) = event {
            let _ = sender.send(event).await;
        }
    }

    /// Tells every client with a stream open that the tools changed, whether its session runs
    /// or was put away; one that is not reading its stream misses it.
    fn tools_changed(&self) {
        let mut records = self.lock();
        let listeners = records.by_id.values_mut().filter_map(|r| r.listening.as_mut());
        let mut told = 0;
        for listener in listeners {
            if let Some((sender, event)) = listener.event(listening::tools_changed())
                && sender.try_send(event).is_ok()
            {
                told += 1;
            }
        }
        tracing::debug!(told, "MCP sessions told that the tools changed");
    }

    /// Forgets the sessions put away and unused for `session_timeout`, ending the streams their
    /// clients hold (as a running session ends then, with its stream).
    fn sweep(&self) {
        let timeout = self.timeout;
        let mut records = self.lock();
        records.by_id.retain(|id, r| {
            let expired = matches!(r.state, State::Away) && r.used.elapsed() >= timeout;
            if expired {
                tracing::debug!(session = %id, "an MCP session unused for session_timeout was forgotten");
            }
            !expired
        });
    }

    /// Until `stop`: tells listeners when `changes` says the tools changed, and forgets
    /// expired sessions now and then.
    pub(super) async fn background(self: Arc<Self>, mut changes: watch::Receiver<u64>) {
        let every = self.timeout.clamp(Duration::from_secs(1), Duration::from_secs(60));
        let mut sweep = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let mut watching = true;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                changed = changes.changed(), if watching => match changed {
                    Ok(()) => self.tools_changed(),
                    // No upstream will change any more.
                    Err(_) => watching = false,
                },
                _ = sweep.tick() => self.sweep(),
            }
        }
    }
}

/// A record's listener, made when its client first opens a stream.
pub(super) fn listener(listening: &mut Option<Box<Listener>>) -> &mut Listener {
    listening.get_or_insert_with(Box::default)
}
