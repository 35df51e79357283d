//! The one sweeper. It keeps no timer per question: it reads the earliest deadline, reminder
//! or escalation from the store, sleeps until then (or until a new question or a clock change
//! wakes it), and expires, reminds and escalates whatever is due. The claim-once write makes
//! each expiry happen exactly once; a conditional write does the same for each nudge.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Claims, nudge::Nudges};
use crate::clock::Clock;
use crate::question::Question;
use crate::store::{Store, StoreError};

/// The longest the sweeper sleeps without looking at the store again.
pub(super) const MAX_SLEEP: Duration = Duration::from_secs(60);
/// How long it waits after a store failure before trying again.
const RETRY: Duration = Duration::from_secs(1);

/// The sweeper part: when it looks next, how to wake it, and when its last sweep began.
pub(super) struct Sweeper {
    wake: Notify,
    /// When the sweeper will look next (unix ms): a question expiring earlier wakes it, any
    /// other does not (waking it costs two reads).
    next: AtomicI64,
    /// The clock time at which the last completed sweep began (unix ms; 0 before the first).
    swept: watch::Sender<i64>,
}

impl Default for Sweeper {
    fn default() -> Self {
        Self { wake: Notify::new(), next: AtomicI64::new(i64::MAX), swept: watch::Sender::new(0) }
    }
}

impl Sweeper {
    /// Wakes the sweeper when a new question's expiry or first nudge comes before the time it
    /// sleeps until.
    pub(super) fn wake_for(&self, question: &Question) {
        if let Some(first) = [question.expires_at, question.nudge_at].into_iter().flatten().min() {
            self.wake_before(first);
        }
    }

    /// Returns once a sweep that began at clock time `at` (unix ms) or later is done, or at
    /// `stop`.
    pub(super) async fn swept(&self, at: i64, stop: &CancellationToken) {
        let mut swept = self.swept.subscribe();
        tokio::select! {
            _ = swept.wait_for(|&began| began >= at) => {}
            () = stop.cancelled() => {}
        }
    }

    /// Wakes the sweeper when `at` comes before the time it sleeps until.
    fn wake_before(&self, at: i64) {
        if at < self.next.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }
}

/// What the sweeper's loop works with: its part, the claim that expires, the nudges, and the
/// store it reads the next deadline from.
pub(super) struct Sweep {
    pub(super) part: Arc<Sweeper>,
    pub(super) claims: Claims,
    pub(super) nudges: Nudges,
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    pub(super) stop: CancellationToken,
}

impl Sweep {
    /// The loop: sweeps, then sleeps until the next deadline, a new question that comes
    /// earlier, a clock change, or the stop.
    pub(super) async fn run(self) {
        let part = &self.part;
        let mut clock = self.clock.watch();
        loop {
            // While it sweeps, any new question wakes it again: its deadline may not have been read.
            part.next.store(i64::MAX, Ordering::Relaxed);
            let began = self.clock.now_ms();
            let nap = match self.sweep().await {
                Ok(next) => {
                    part.swept.send_replace(began);
                    next
                }
                Err(e) => {
                    tracing::error!(error = %e, "the timeout sweeper could not read the store");
                    RETRY
                }
            };
            let next = self.clock.now_ms().saturating_add(i64::try_from(nap.as_millis()).unwrap_or(i64::MAX));
            part.next.store(next, Ordering::Relaxed);
            let woken = part.wake.notified();
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(nap) => {}
                () = woken => {}
                () = crate::clock::moved(&mut clock) => {}
            }
        }
    }

    /// Expires what is due; returns how long to sleep until the next deadline.
    async fn sweep(&self) -> Result<Duration, StoreError> {
        self.claims.expire_due().await?;
        self.nudges.nudge_due().await?;
        let next = self.store.next_deadline().await?;
        let now = self.clock.now_ms();
        Ok(match next {
            Some(at) if at <= now => Duration::ZERO,
            Some(at) => Duration::from_millis(u64::try_from(at - now).unwrap_or(u64::MAX)).min(MAX_SLEEP),
            None => MAX_SLEEP,
        })
    }
}
