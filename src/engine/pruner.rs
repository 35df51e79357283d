//! The pruner keeps the database from growing without end: at start-up and then once an
//! hour it deletes runs that ended longer ago than the retention (with their questions and
//! cards) and inbound update keys older than a week. It is a task of its own, beside the
//! sweeper, so that a long first prune (after an upgrade, say) does not hold up expiries.

use std::time::Duration;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::sweeper::MAX_SLEEP;
use crate::clock::Clock;
use crate::store::{Pruned, Store, StoreError, StoreExt};

/// How often old rows are pruned.
const PRUNE_EVERY: i64 = 3_600_000;
/// How long an inbound update key is kept: platforms redeliver within a day.
const INBOUND_KEEP: i64 = 7 * 86_400_000;
/// The most runs (and keys) one pruning transaction deletes, so other writes interleave.
const PRUNE_BATCH: u32 = 500;

/// The pruner: the store it prunes, its clock, how long ended runs are kept (none: for
/// ever), and the stop.
pub(super) struct Pruner {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    pub(super) retention: Option<Duration>,
    pub(super) stop: CancellationToken,
}

impl Pruner {
    /// Prunes at start-up, then whenever an hour has passed on the clock.
    pub(super) async fn run(self) {
        let mut clock = self.clock.watch();
        let mut next = self.clock.now_ms();
        loop {
            let now = self.clock.now_ms();
            if now >= next {
                next = now + PRUNE_EVERY;
                if let Err(e) = self.prune().await {
                    tracing::error!(error = %e, "could not prune old runs");
                }
            }
            let nap = Duration::from_millis(u64::try_from(next - self.clock.now_ms()).unwrap_or(0)).min(MAX_SLEEP);
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(nap) => {}
                () = crate::clock::moved(&mut clock) => {}
            }
        }
    }

    /// Deletes ended runs older than the retention and old inbound keys, a batch at a time.
    async fn prune(&self) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let ended_before =
            self.retention.map(|keep| now.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX)));
        let mut total = Pruned::default();
        loop {
            let pruned = self.store.prune(ended_before, now - INBOUND_KEEP, PRUNE_BATCH).await?;
            total.runs += pruned.runs;
            total.inbound += pruned.inbound;
            if pruned.runs < u64::from(PRUNE_BATCH) && pruned.inbound < u64::from(PRUNE_BATCH) {
                break;
            }
            if self.stop.is_cancelled() {
                break;
            }
        }
        if total != Pruned::default() {
            tracing::info!(runs = total.runs, inbound = total.inbound, "pruned old runs and inbound keys");
        }
        Ok(())
    }
}
