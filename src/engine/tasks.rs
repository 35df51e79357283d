//! The one tracker of every task askgate spawns that outlives the call that spawned it: the
//! engine's own loops and its runs' turns, the lanes' deliveries, the callbacks' senders, the
//! inbound channels, the HTTP server, MCP sessions and upstreams, opencode's bridges. The
//! engine owns it and hands it out ([`Engine::tasks`](super::Engine::tasks)); its stop closes
//! it and waits for it, so that nothing is left half-done when the store closes.
//!
//! Outside this module nothing calls `tokio::spawn` but the few tasks a test (`layout`) lists
//! with the reason each may: a task its caller awaits, the store's own (it is opened before
//! the engine and drains them as it closes), the separate client programs.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// Every long-lived task of one askgate. Cloning shares it.
#[derive(Clone, Default, Debug)]
pub struct Tasks {
    tracker: TaskTracker,
}

impl Tasks {
    /// Runs `task` on the runtime, tracked until it ends.
    #[track_caller]
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// How many tasks are running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Whether none is running.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// Waits for every task to end, at most `grace`: `false` when some still run then (they
    /// are dropped with the runtime).
    pub async fn drain(&self, grace: Duration) -> bool {
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait()).await.is_ok()
    }
}
