//! `/healthz` (readiness) and `/livez` (liveness). `/healthz` needs no token, so what it costs
//! is what anyone can make askgate spend: counting the pending questions takes tens of
//! milliseconds with a million of them, so the count it shows is a recent one ([`Pending`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{AppState, bodies};
use crate::engine::{ChannelState, Engine};

/// How old the pending count `/healthz` shows may be.
const COUNT_AGE: Duration = Duration::from_secs(2);

/// How long a count may take before `/healthz` says the store is failing: a wedged database
/// must not be shown as healthy from its last count.
const COUNT_TIMEOUT: Duration = Duration::from_secs(5);

/// The pending count as `/healthz` shows it: the first call counts; later ones get the last
/// count, and one that finds it older than its age starts one count in the background.
/// However often `/healthz` is called, the store counts at most once per [`COUNT_AGE`], and no
/// call waits for a count but the first (the next is run by the engine's task tracker).
pub(super) struct Pending {
    /// How old the count shown may be.
    age: Duration,
    /// The last count (or why it failed, as `/healthz` says it) and when it was made.
    last: Mutex<Option<(Instant, Result<u64, String>)>>,
    /// Whether a count is under way.
    counting: AtomicBool,
    /// Held by the first count: calls arriving meanwhile wait for it instead of counting too.
    first: tokio::sync::Mutex<()>,
}

impl Default for Pending {
    fn default() -> Self {
        Self { age: COUNT_AGE, last: Mutex::default(), counting: AtomicBool::new(false), first: Default::default() }
    }
}

impl Pending {
    /// A recent count, made by `count` when there is none yet; when the last is too old, also
    /// the next count, for the caller to run in the background.
    async fn recent<F>(
        self: &Arc<Self>,
        count: impl FnOnce() -> F,
    ) -> (Result<u64, String>, Option<impl Future<Output = ()> + Send + 'static>)
    where
        F: Future<Output = Result<u64, String>> + Send + 'static,
    {
        let last = || self.last.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((at, figure)) = last() else {
            let _first = self.first.lock().await;
            if let Some((_, figure)) = last() {
                return (figure, None);
            }
            let figure = count().await;
            self.keep(figure.clone());
            return (figure, None);
        };
        let stale = at.elapsed() >= self.age && !self.counting.swap(true, Ordering::AcqRel);
        let next = stale.then(|| {
            let (pending, counted) = (self.clone(), count());
            async move {
                pending.keep(counted.await);
                pending.counting.store(false, Ordering::Release);
            }
        });
        (figure, next)
    }

    fn keep(&self, figure: Result<u64, String>) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), figure));
    }
}

/// The store's count of pending questions, as a future that owns what it needs.
fn counted(engine: &Engine) -> impl Future<Output = Result<u64, String>> + Send + 'static {
    let engine = engine.clone();
    async move {
        match tokio::time::timeout(COUNT_TIMEOUT, engine.records().pending_count()).await {
            Ok(counted) => counted.map_err(|e| crate::error_chain(&e)),
            Err(_) => Err(format!("the pending questions were not counted within {} s", COUNT_TIMEOUT.as_secs())),
        }
    }
}

/// 200 when the store answers, no channel is down and every gated MCP upstream has had its
/// first try at starting; 503 otherwise. The body says what stands how:
/// `{"status","store","pending","channels":{"telegram":"up",…}}`.
pub(super) async fn healthz(State(state): State<AppState>) -> Response {
    let (store, next) = state.pending.recent(|| counted(&state.engine)).await;
    if let Some(next) = next {
        state.engine.tasks().spawn(next);
    }
    let writes = state.engine.records().write_stats().failing;
    let channels = state.engine.delivery().channel_states();
    let down = channels.iter().any(|(_, s)| matches!(s, ChannelState::Down(_)));
    let degraded = channels.iter().any(|(_, s)| matches!(s, ChannelState::Degraded(_)));
    let healthy = store.is_ok() && writes.is_none() && !down;
    let starting = state.upstreams.as_ref().is_some_and(|u| u.starting());
    let instance = state.engine.records().instance().map(str::to_owned);
    let body = bodies::Health {
        status: if !healthy {
            "failing"
        } else if starting {
            "starting"
        } else if degraded {
            "degraded"
        } else {
            "ok"
        },
        store: match (&store, &writes) {
            (Err(e), _) => format!("failing: {e}"),
            (Ok(_), Some(why)) => format!("writes failing: {why}"),
            (Ok(_), None) => "ok".to_owned(),
        },
        pending: store.ok(),
        channels: channels.iter().map(|(name, s)| ((*name).to_owned(), s.to_string())).collect(),
        leases: instance.is_some().then(|| state.engine.leases().names()),
        instance,
    };
    let status = if healthy && !starting { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, [(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
}

/// 200 while the process runs (liveness), whatever the store and channels say (that is
/// `/healthz`, readiness).
pub(super) async fn livez() -> Response {
    axum::Json(bodies::Live { status: "live" }).into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    /// A count that says how many times it was made (when it runs, not when it is handed out).
    fn counter(
        made: &Arc<AtomicU64>,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<u64, String>> + Send>> {
        let made = made.clone();
        move || Box::pin(async move { Ok(made.fetch_add(1, Ordering::SeqCst) + 1) })
    }

    #[tokio::test]
    async fn a_flood_of_calls_counts_once_while_the_count_is_recent() {
        let (pending, made) = (Arc::new(Pending::default()), Arc::new(AtomicU64::new(0)));
        for _ in 0..1000 {
            let (figure, next) = pending.recent(counter(&made)).await;
            assert_eq!(figure, Ok(1));
            assert!(next.is_none(), "no count while the last is recent");
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_old_count_is_shown_while_one_new_count_is_made() {
        let pending = Arc::new(Pending { age: Duration::ZERO, ..Pending::default() });
        let made = Arc::new(AtomicU64::new(0));
        assert_eq!(pending.recent(counter(&made)).await.0, Ok(1));
        // Old at once: the call shows the last count and hands over the next.
        let (figure, next) = pending.recent(counter(&made)).await;
        assert_eq!(figure, Ok(1));
        // While that count is under way, no other starts.
        let (figure, other) = pending.recent(counter(&made)).await;
        assert_eq!((figure, other.is_none()), (Ok(1), true));
        next.expect("a new count").await;
        assert_eq!(pending.recent(counter(&made)).await.0, Ok(2));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn calls_that_come_together_share_the_first_count() {
        let (pending, made) = (Arc::new(Pending::default()), Arc::new(AtomicU64::new(0)));
        // A count that takes a while: the second call arrives while it runs.
        let slow = |made: &Arc<AtomicU64>| {
            let made = made.clone();
            move || async move {
                tokio::task::yield_now().await;
                Ok::<u64, String>(made.fetch_add(1, Ordering::SeqCst) + 1)
            }
        };
        let (one, two) = tokio::join!(pending.recent(slow(&made)), pending.recent(slow(&made)));
        assert_eq!((one.0, two.0), (Ok(1), Ok(1)));
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }
}
