//! Serving connections with limits that keep askgate reachable when some clients misbehave:
//! a request's headers (and an idle keep-alive connection's next request) must arrive within
//! [`HEADER_TIMEOUT`], a body within [`BODY_TIMEOUT`], and at most `max_connections` are open
//! at once (fewer when the open-files limit could not hold that many). Connections are accepted
//! as soon as they arrive; when askgate is at its cap, a new connection takes the place of the
//! one that has waited longest without a request in flight (see [`connections`]), so a flood of
//! clients that never finish their headers cannot keep the API, `/healthz` or the webhook
//! endpoints from answering. Connections serving a request (an event stream, a long-poll) are
//! never closed for room; when every connection is serving one, the next waits until one is
//! done. When accept fails for want of file descriptors, the connection idle longest is closed
//! to free one. axum's own `serve` sets no timeouts and no cap, so connections are served here
//! with hyper directly.

mod connections;

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use connections::{Close, Connections, Tracked};

/// How long a client may take to send a request's headers, or to start the next request on a
/// kept-alive connection.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish once askgate stops.
const DRAIN: Duration = Duration::from_secs(3);
/// How long a kept-alive connection closed for room may take to send the rest of its last
/// answer (a client that does not read it is cut off then).
const EVICTION_GRACE: Duration = Duration::from_secs(1);
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
        Self { max_connections: crate::config::DEFAULT_MAX_CONNECTIONS, header_timeout: HEADER_TIMEOUT }
    }
}

type Connection = hyper::server::conn::http1::Connection<TokioIo<TcpStream>, Tracked<TowerToHyperService<Router>>>;

/// Listens on `addr` with room in the kernel for `max_connections` handshakes waiting to be
/// accepted (the kernel holds it to `net.core.somaxconn`, 4,096 by default): when slow clients
/// that were closed for room connect again at once, a shallower queue would be full of them and
/// drop the handshakes of everyone else.
///
/// # Errors
/// When the address cannot be bound.
pub fn listen(addr: std::net::SocketAddr, max_connections: usize) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // As `TcpListener::bind` does: a restart can bind while the last one's connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::try_from(max_connections).unwrap_or(u32::MAX))
}

/// Serves `app` on `listener` until `stop` fires, then lets requests in flight finish (up to
/// a few seconds).
///
/// # Errors
/// Never at present; accept errors (a full file table) are logged and waited out.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken, limits: Limits) -> std::io::Result<()> {
    let connections = Connections::new(connection_cap(limits.max_connections));
    let tasks = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(CONNECTION_BUFFER);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let socket = match accepted {
            Ok((socket, _)) => socket,
            Err(e) if out_of_descriptors(&e) => {
                // The connection stays in the backlog; close the one idle longest so the next
                // accept has a descriptor, and wait for it to go (or a moment, rather than spin).
                if connections.evict_idle() {
                    tracing::debug!("out of file descriptors: closed the connection idle longest");
                } else {
                    tracing::warn!(error = %e, "could not accept a connection, and every connection is serving a request");
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), connections.changed()).await;
                continue;
            }
            Err(e) => {
                // A connection reset before it was accepted, and the like: nothing to serve.
                tracing::debug!(error = %e, "could not accept a connection");
                continue;
            }
        };
        let admitted = loop {
            if let Some(admitted) = connections.admit() {
                break Some(admitted);
            }
            // Every connection is serving a request: this one waits for the first to be done.
            tokio::select! {
                () = connections.changed() => {}
                () = stop.cancelled() => break None,
            }
        };
        let Some((registration, closed)) = admitted else { break };
        let _ = socket.set_nodelay(true);
        // A fixed send buffer: the kernel's autotuning would let a client that does not read
        // absorb megabytes, each one rendered by askgate first.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, CONNECTION_BUFFER);
        let service = Tracked::new(TowerToHyperService::new(app.clone()), registration);
        let connection = http.serve_connection(TokioIo::new(socket), service);
        tasks.spawn(drive(connection, closed, stop.clone()));
    }
    drop(listener);
    tasks.close();
    if tokio::time::timeout(DRAIN, tasks.wait()).await.is_err() {
        tracing::warn!("HTTP requests still running after {}s were cut off", DRAIN.as_secs());
    }
    Ok(())
}

/// Serves one connection until it ends, it is closed for room (`closed`), or askgate stops.
async fn drive(connection: Connection, closed: oneshot::Receiver<Close>, stop: CancellationToken) {
    let mut connection = pin!(connection);
    let closed = async {
        match closed.await {
            Ok(how) => how,
            // The sender goes only with the connection's place, which this connection holds.
            Err(_) => std::future::pending().await,
        }
    };
    let grace = tokio::select! {
        ended = connection.as_mut() => return finished(ended),
        () = stop.cancelled() => None,
        how = closed => match how {
            // Dropping the connection closes it.
            Close::Now => return,
            Close::Finish => Some(EVICTION_GRACE),
        },
    };
    // Finish the request in flight (or the answer going out), then close; hyper closes a
    // kept-alive connection between requests at once.
    connection.as_mut().graceful_shutdown();
    let grace = async {
        match grace {
            Some(grace) => tokio::time::sleep(grace).await,
            // askgate is stopping: `serve` bounds the wait.
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        ended = connection => finished(ended),
        () = grace => {}
    }
}

fn finished(ended: hyper::Result<()>) {
    if let Err(e) = ended {
        tracing::debug!(error = %e, "an HTTP connection ended with an error");
    }
}

/// Whether accept failed because this process (EMFILE) or the system (ENFILE) has no file
/// descriptor left.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    let code = e.raw_os_error().map(rustix::io::Errno::from_raw_os_error);
    code == Some(rustix::io::Errno::MFILE) || code == Some(rustix::io::Errno::NFILE)
}

/// The most connections to keep open: `max_connections`, or three quarters of the open-files
/// limit when that is less, so the store, channels and programs keep descriptors of their own.
fn connection_cap(max_connections: usize) -> usize {
    let Some(limit) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current else {
        return max_connections;
    };
    let allowed = usize::try_from(limit / 4 * 3).unwrap_or(usize::MAX).max(1);
    if allowed < max_connections {
        tracing::info!(
            max_connections,
            open_files = limit,
            "at most {allowed} HTTP connections at once: the open-files limit leaves no room for more"
        );
    }
    max_connections.min(allowed)
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
