//! Serving connections with limits that keep askgate reachable when some clients misbehave:
//! a request's headers (and an idle keep-alive connection's next request) must arrive within
//! [`HEADER_TIMEOUT`], a body within [`BODY_TIMEOUT`], and at most `max_connections` are open
//! at once (the rest wait in the kernel's backlog). axum's own `serve` sets no timeouts, so
//! connections are served here with hyper directly.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long a client may take to send a request's headers, or to start the next request on a
/// kept-alive connection.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish once askgate stops.
const DRAIN: Duration = Duration::from_secs(3);
/// What one connection may have waiting to be sent: in askgate (hyper's buffer) and in the
/// kernel (the socket's send buffer). A client that does not read holds no more than this, and
/// askgate stops producing for it once it is full.
const CONNECTION_BUFFER: usize = 64 * 1024;

/// The limits connections are served with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most connections open at once.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, or to start its next request.
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_connections: super::DEFAULT_MAX_CONNECTIONS, header_timeout: HEADER_TIMEOUT }
    }
}

/// Serves `app` on `listener` until `stop` fires, then lets requests in flight finish (up to
/// a few seconds).
///
/// # Errors
/// Never at present; accept errors (a full file table) are logged and waited out.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken, limits: Limits) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(CONNECTION_BUFFER);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = stop.cancelled() => break,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let (socket, _) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, or a connection reset before it was accepted: wait
                // a moment rather than spin.
                tracing::warn!(error = %e, "could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        // A fixed send buffer: the kernel's autotuning would let a client that does not read
        // absorb megabytes, each one rendered by askgate first.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, CONNECTION_BUFFER);
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(socket), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "an HTTP connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("HTTP requests still running after {}s were cut off", DRAIN.as_secs());
    }
    Ok(())
}

/// Raises this process's soft limit of open files to its hard limit, so that many clients do
/// not run askgate out of file descriptors at the usual 1,024. Returns the limit now in force.
pub fn raise_open_files_limit() -> Option<u64> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if limit.current == limit.maximum {
        return limit.current;
    }
    let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
    match rustix::process::setrlimit(rustix::process::Resource::Nofile, raised) {
        Ok(()) => limit.maximum,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-files limit");
            limit.current
        }
    }
}
