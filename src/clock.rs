//! Wall-clock time in unix milliseconds, with a manual clock for tests.
//!
//! Deadlines are stored as wall-clock times so that they survive a restart. Tests that need
//! time to pass (timeouts, questions that expired while askgate was down) use a manual clock
//! and move it forward themselves; the sweeper watches the clock and wakes when it moves.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A source of the current time.
#[derive(Clone, Debug)]
pub struct Clock(Inner);

#[derive(Clone, Debug)]
enum Inner {
    System,
    Manual { now: Arc<AtomicI64>, moved: Arc<watch::Sender<i64>> },
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self(Inner::System)
    }

    /// A clock that stands at `now_ms` until [`Clock::advance`] moves it.
    pub fn manual(now_ms: i64) -> Self {
        let (moved, _) = watch::channel(now_ms);
        Self(Inner::Manual { now: Arc::new(AtomicI64::new(now_ms)), moved: Arc::new(moved) })
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> i64 {
        match &self.0 {
            Inner::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Inner::Manual { now, .. } => now.load(Ordering::SeqCst),
        }
    }

    /// Moves a manual clock forward; the system clock ignores it.
    pub fn advance(&self, ms: i64) {
        if let Inner::Manual { now, moved } = &self.0 {
            let at = now.fetch_add(ms, Ordering::SeqCst) + ms;
            moved.send_replace(at);
        }
    }

    /// A watcher that sees each move of a manual clock; none for the system clock.
    pub fn watch(&self) -> Option<watch::Receiver<i64>> {
        match &self.0 {
            Inner::System => None,
            Inner::Manual { moved, .. } => Some(moved.subscribe()),
        }
    }
}

/// Resolves when the watched clock has moved since the last call; never without a watcher.
pub async fn moved(watcher: &mut Option<watch::Receiver<i64>>) {
    let Some(rx) = watcher else { return std::future::pending().await };
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
