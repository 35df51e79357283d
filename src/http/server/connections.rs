//! The open HTTP connections and what each is doing: waiting for a request's headers (a new
//! connection, or a kept-alive one between requests) or serving a request. When askgate has as
//! many connections as it allows, a new one takes the place of the connection that has waited
//! longest without a request in flight; connections serving a request (an event stream, a
//! long-poll) are never closed to make room.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::sync::{Notify, oneshot};

/// How a connection is to be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Close {
    /// At once: it has never had a request, so nothing of it is lost.
    Now,
    /// Once what it is sending has gone out: it has answered a request, and the end of that
    /// answer may still be on its way.
    Finish,
}

/// The open connections, at most `cap` of them.
pub(super) struct Connections {
    cap: usize,
    state: Mutex<State>,
    /// Woken when a connection closes or no longer has a request in flight: the moment a
    /// connection refused for want of room, or an accept refused for want of a file
    /// descriptor, may succeed.
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// The source of connection ids and of the order in which connections went idle.
    next: u64,
    open: HashMap<u64, Entry>,
    /// The connections with no request in flight, keyed by when they became so (oldest first).
    /// Invariant: exactly the entries of `open` whose `idle_since` is set, under that key.
    idle: BTreeMap<u64, u64>,
}

struct Entry {
    /// Requests whose headers have been read and whose response is not done yet.
    in_flight: u32,
    /// Its key in [`State::idle`] while it has no request in flight.
    idle_since: Option<u64>,
    /// Whether it has had a request.
    served: bool,
    close: oneshot::Sender<Close>,
}

impl State {
    fn stamp(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Closes the connection that has waited longest without a request in flight.
    fn evict_oldest_idle(&mut self) -> bool {
        let Some((_, id)) = self.idle.pop_first() else { return false };
        // Present by the invariant of `idle`; removing it hands its place to another.
        let Some(entry) = self.open.remove(&id) else { return false };
        let how = if entry.served { Close::Finish } else { Close::Now };
        // The connection's task may have ended already; then its place is free all the same.
        let _ = entry.close.send(how);
        true
    }
}

impl Connections {
    /// No connections yet, room for `cap` (at least one).
    pub(super) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap: cap.max(1), state: Mutex::default(), changed: Notify::new() })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is consistent after every statement that changes it, so a panic elsewhere
        // while it was locked leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection, closing the one idle longest when there is no room.
    /// Returns `None` when there is no room and every connection has a request in flight.
    pub(super) fn admit(self: &Arc<Self>) -> Option<(Registration, oneshot::Receiver<Close>)> {
        let mut state = self.state();
        if state.open.len() >= self.cap && !state.evict_oldest_idle() {
            return None;
        }
        let id = state.stamp();
        let (close, closed) = oneshot::channel();
        state.open.insert(id, Entry { in_flight: 0, idle_since: Some(id), served: false, close });
        state.idle.insert(id, id);
        Some((Registration { connections: self.clone(), id }, closed))
    }

    /// Closes the connection idle longest, to free its file descriptor. Returns whether there
    /// was one.
    pub(super) fn evict_idle(&self) -> bool {
        self.state().evict_oldest_idle()
    }

    /// Waits until a connection closes or goes idle (or returns at once if one did since the
    /// last call).
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let state = self.state();
        (state.open.len(), state.idle.len())
    }

    fn begin(self: &Arc<Self>, id: u64) -> InFlight {
        let mut guard = self.state();
        let state = &mut *guard;
        if let Some(entry) = state.open.get_mut(&id) {
            entry.in_flight += 1;
            entry.served = true;
            if let Some(since) = entry.idle_since.take() {
                state.idle.remove(&since);
            }
        }
        InFlight { connections: self.clone(), id }
    }

    fn end(&self, id: u64) {
        let mut guard = self.state();
        let state = &mut *guard;
        let stamp = state.stamp();
        if let Some(entry) = state.open.get_mut(&id) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            if entry.in_flight == 0 {
                entry.idle_since = Some(stamp);
                state.idle.insert(stamp, id);
            }
        }
        drop(guard);
        self.changed.notify_one();
    }

    fn forget(&self, id: u64) {
        let mut state = self.state();
        if let Some(Entry { idle_since: Some(since), .. }) = state.open.remove(&id) {
            state.idle.remove(&since);
        }
        drop(state);
        self.changed.notify_one();
    }
}

/// A connection's place among the open ones, given up when it is dropped (with the
/// connection, whose service holds it).
pub(super) struct Registration {
    connections: Arc<Connections>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.connections.forget(self.id);
    }
}

/// A request in flight on a connection, from its headers until its response is done (the
/// response's body dropped: sent, or the connection gone).
struct InFlight {
    connections: Arc<Connections>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.connections.end(self.id);
    }
}

/// A connection's service: the router's, with each request marked in flight from the moment
/// hyper has read its headers until its response is done.
pub(super) struct Tracked<S> {
    inner: S,
    registration: Registration,
}

impl<S> Tracked<S> {
    pub(super) fn new(inner: S, registration: Registration) -> Self {
        Self { inner, registration }
    }
}

impl<S> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Guarded>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Guarded>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.registration.connections.begin(self.registration.id);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Guarded { body, _in_flight: in_flight }))
        })
    }
}

/// A response body that keeps its request in flight until hyper drops it.
pub(super) struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(receiver: &mut oneshot::Receiver<Close>) -> Option<Close> {
        receiver.try_recv().ok()
    }

    #[test]
    fn a_connection_beyond_the_cap_takes_the_place_of_the_one_idle_longest() {
        let connections = Connections::new(2);
        let (_a, mut a_closed) = connections.admit().unwrap();
        let (_b, mut b_closed) = connections.admit().unwrap();
        let (_c, _) = connections.admit().unwrap();
        assert_eq!(closed(&mut a_closed), Some(Close::Now), "the oldest, that never sent a request, goes at once");
        assert_eq!(closed(&mut b_closed), None);
        assert_eq!(connections.counts(), (2, 2));
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_closed_for_room() {
        let connections = Connections::new(2);
        let (a, mut a_closed) = connections.admit().unwrap();
        let (b, mut b_closed) = connections.admit().unwrap();
        let streaming = connections.begin(a.id);
        let (_c, _) = connections.admit().unwrap();
        assert_eq!(closed(&mut a_closed), None, "the older one is serving a request");
        assert_eq!(closed(&mut b_closed), Some(Close::Now));
        let c = connections.state().idle.values().next().copied().unwrap();
        let _also = connections.begin(c);
        assert!(connections.admit().is_none(), "no room, and nobody idle");
        drop((streaming, b));
    }

    #[test]
    fn a_connection_that_answered_goes_idle_behind_those_waiting_longer_and_finishes_when_closed() {
        let connections = Connections::new(2);
        let (a, mut a_closed) = connections.admit().unwrap();
        let (_b, mut b_closed) = connections.admit().unwrap();
        drop(connections.begin(a.id));
        let (_c, _) = connections.admit().unwrap();
        assert_eq!(closed(&mut b_closed), Some(Close::Now), "b has waited longer than a, idle again just now");
        let (_d, _) = connections.admit().unwrap();
        assert_eq!(closed(&mut a_closed), Some(Close::Finish), "a answered, so its answer may still be going out");
    }

    #[test]
    fn a_closed_connection_frees_its_place() {
        let connections = Connections::new(1);
        let (a, _) = connections.admit().unwrap();
        let streaming = connections.begin(a.id);
        assert!(connections.admit().is_none());
        drop(streaming);
        drop(a);
        assert_eq!(connections.counts(), (0, 0));
        let (_b, mut b_closed) = connections.admit().unwrap();
        assert!(connections.evict_idle());
        assert_eq!(closed(&mut b_closed), Some(Close::Now));
        assert!(!connections.evict_idle(), "nothing left to close");
    }
}
