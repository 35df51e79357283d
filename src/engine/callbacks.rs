//! Callbacks in the store's outbox: written before the question or run they report on (inside
//! the engine's own writes, so this part stays here), read when due, taken for a while by
//! whoever sends them, and settled. Agents' callbacks are sent by `agent::callbacks`; other
//! rows of the outbox (the replies to an opencode server) are sent by a [`Courier`] through
//! [`Callbacks::deliver`], the same durable, bounded retry: a row is tried until it is delivered,
//! with a doubling pause between attempts ([`RETRY`]), and given up [`GIVE_UP_AFTER`] after
//! its run ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::retry::Backoff;
use super::{Event, Logged, Tasks, event::Events};
use crate::clock::Clock;
use crate::question::{QuestionId, RunId};
use crate::store::command::{AddCallback, CallbackTried, TakeCallback};
use crate::store::{Callback, CallbackTry, Store, StoreError, StoreExt};

/// The pauses between attempts to send a row: 1 s, doubling, at most 10 minutes (or what the
/// receiver asked, within that).
pub const RETRY: Backoff = Backoff { first: Duration::from_secs(1), max: Duration::from_secs(600), retries: u32::MAX };
/// How long after its run ended a row is still tried.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(25 * 3600);
/// How long a sender holds a row it is sending: longer than any attempt may take.
pub const LEASE: Duration = Duration::from_secs(120);
/// How often a sender looks at the outbox whatever woke it meanwhile: rows another instance
/// left or let go of, pauses that ended, callbacks another instance wrote.
const SCAN_EVERY: Duration = Duration::from_secs(5);
/// How many due rows are read at once.
pub const BATCH: u32 = 16;
/// How many rows are sent at once: a receiver that hangs holds up only its own.
const AT_ONCE: usize = 8;

/// What sends one kind of the outbox's rows: those whose URL starts with [`Courier::route`].
#[async_trait::async_trait]
pub trait Courier: Send + Sync + 'static {
    /// The start of the URLs of the rows it sends (`opencode://laptop/`).
    fn route(&self) -> &str;

    /// One attempt at sending `callback`, whose run has ended. It must end well within two
    /// minutes (a row's lease).
    async fn send(&self, callback: &Callback) -> Sent;
}

/// What came of one attempt at sending a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The receiver took it: it is never sent again.
    Delivered,
    /// There was nothing to send (the question was cancelled, say): settled without a word.
    Nothing,
    /// It failed: tried again after [`RETRY`]'s pause, or the one the receiver asked for.
    Failed {
        /// Why, as the log and the row keep it.
        error: String,
        /// The pause the receiver asked for (`Retry-After`).
        asked: Option<Duration>,
    },
}

/// Where an agent wants an outcome POSTed, as it asked (`callback` in the API). Not `Debug`:
/// its URL, headers and secret may carry credentials.
#[derive(Clone, PartialEq)]
pub struct CallbackSpec {
    /// Where to POST.
    pub url: String,
    /// Headers to send with it.
    pub headers: Vec<(String, String)>,
    /// Its own signing secret; none: the configured one.
    pub secret: Option<String>,
}

/// The callbacks service: writes callbacks to the store's outbox, reads those due, takes,
/// settles, and sends the rows of a [`Courier`]'s route. Holds the store, the clock, the task
/// tracker and the engine's stop (its senders end with askgate), and the events (a resolution
/// wakes a sender).
#[derive(Clone)]
pub struct Callbacks(Arc<CallbacksParts>);

/// The parts of [`Callbacks`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct CallbacksParts {
    store: Arc<dyn Store>,
    clock: Clock,
    tasks: Tasks,
    stop: CancellationToken,
    events: Arc<Events>,
    /// How many callbacks this instance wrote: a sender that saw its route with nothing open
    /// reads it on a resolution again only once this count moved on.
    written: AtomicU64,
}

super::parts!(Callbacks, CallbacksParts);

impl Callbacks {
    pub(super) fn new(
        store: Arc<dyn Store>,
        clock: Clock,
        tasks: Tasks,
        stop: CancellationToken,
        events: Arc<Events>,
    ) -> Self {
        Self(Arc::new(CallbacksParts { store, clock, tasks, stop, events, written: AtomicU64::new(0) }))
    }

    /// Writes `spec` for `run` (and `question`, whose outcome it reports) to the outbox,
    /// before the run is: an outcome is never known without its callback.
    pub(super) async fn add_callback(
        &self,
        spec: CallbackSpec,
        run: RunId,
        question: Option<QuestionId>,
    ) -> Result<(), StoreError> {
        let CallbackSpec { url, headers, secret } = spec;
        let id = uuid::Uuid::new_v4().to_string();
        let callback = Callback {
            id,
            run,
            question,
            url,
            headers,
            secret,
            created_at: self.clock.now_ms(),
            attempts: 0,
            ended_at: None,
        };
        self.store.run_command(AddCallback(Box::new(callback))).await?;
        // Counted once written: a sender that saw nothing open before this reads again.
        self.written.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The callbacks due now (their run ended, their pause is over, nobody holds them) whose
    /// URL starts with `to`: each sender reads only its own (`http` for agents' callbacks,
    /// `opencode://<name>/` for the replies to an opencode server).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn due_callbacks(&self, to: &str, limit: u32) -> Result<Vec<Callback>, StoreError> {
        self.store.due_callbacks(self.clock.now_ms(), to, limit).await
    }

    /// Takes a due callback for `lease` (counting an attempt): the lease it holds, to record
    /// the attempt with; none when another took it or it settled meanwhile.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn take_callback(&self, id: &str, lease: Duration) -> Result<Option<i64>, StoreError> {
        let now = self.clock.now_ms();
        let until = super::after(now, lease);
        let taken = self.store.run_command(TakeCallback { id: id.to_owned(), now, until }).await?;
        Ok(taken.then_some(until))
    }

    /// Records what came of the attempt that holds `lease`, and lets go of the callback;
    /// `false` when that lease had run out and another sender took the callback.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn callback_tried(&self, id: &str, lease: i64, tried: CallbackTry) -> Result<bool, StoreError> {
        let tried = CallbackTried { id: id.to_owned(), at: self.clock.now_ms(), lease, tried };
        self.store.run_command(tried).await
    }
}

/// Waits until a sender of the outbox may have something to read: an event `wakes` takes (or a
/// lag: events were missed), or `look`, its periodic look. `false` once askgate stops.
async fn woken(
    events: &mut broadcast::Receiver<Arc<Logged>>,
    stop: &CancellationToken,
    look: tokio::time::Instant,
    wakes: impl Fn(&Event) -> bool,
) -> bool {
    let event = async {
        loop {
            match events.recv().await {
                Ok(logged) if wakes(&logged.event) => return,
                Ok(_) => {}
                // A lagging receiver only means the next read finds more.
                Err(_) => {
                    *events = events.resubscribe();
                    return;
                }
            }
        }
    };
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep_until(look) => true,
        () = event => true,
    }
}

impl Callbacks {
    /// Runs `send` (one read of the due rows of the route `to`, and their sending) until askgate
    /// stops: at the start, at every periodic look ([`SCAN_EVERY`], kept however many events
    /// come between), and on an event `wakes` takes while a callback of the route may be open.
    /// Whether one may be is asked of the store at each look (a read of the open rows only: a
    /// partial index holds them); a callback this instance writes after that counts as one.
    /// Where nobody asked for a callback, a resolution reads nothing: it read the due rows,
    /// which SQLite prepared again each time, at every one.
    pub async fn each_read<F: Future<Output = ()>>(
        &self,
        to: &str,
        wakes: impl Fn(&Event) -> bool,
        mut send: impl FnMut() -> F,
    ) {
        let mut events = self.events.subscribe();
        // The count of callbacks written when the route was last seen with nothing open.
        let mut quiet = None;
        let mut look = tokio::time::Instant::now();
        loop {
            // Events that keep coming do not put the look off: it is due at its time.
            if tokio::time::Instant::now() >= look {
                look = tokio::time::Instant::now() + SCAN_EVERY;
                quiet = self.quiet(to).await;
            }
            if quiet != Some(self.written.load(Ordering::SeqCst)) {
                send().await;
            }
            if !woken(&mut events, &self.stop, look, &wakes).await {
                return;
            }
        }
    }

    /// The count of callbacks written as it was before the store said the route `to` has none
    /// open; none when one is open or the store failed (read as if one were: the read that
    /// follows says what failed).
    async fn quiet(&self, to: &str) -> Option<u64> {
        let written = self.written.load(Ordering::SeqCst);
        let open = self.store.callbacks_open(to).await;
        tracing::debug!(to, ?open, "looked for open callbacks");
        matches!(open, Ok(false)).then_some(written)
    }

    /// Sends the due rows of `courier`'s route until askgate stops: each taken for a while (one
    /// sender at a time, also across instances sharing a database), tried again after a pause
    /// while it fails, and given up [`GIVE_UP_AFTER`] after its run ended.
    pub fn deliver(&self, courier: Arc<dyn Courier>) {
        let callbacks = self.clone();
        self.tasks.spawn(async move {
            // Woken by a resolution (it ends the run of an agent's question).
            let resolved = |event: &Event| matches!(event, Event::Resolved(_));
            callbacks.each_read(courier.route(), resolved, || callbacks.send_due(&courier)).await;
        });
    }

    async fn send_due(&self, courier: &Arc<dyn Courier>) {
        use futures_util::StreamExt;
        let due = match self.due_callbacks(courier.route(), BATCH).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(to = courier.route(), error = %e, "could not read the outbox; trying again shortly");
                return;
            }
        };
        futures_util::stream::iter(due)
            .for_each_concurrent(AT_ONCE, |callback| async move {
                // Once askgate stops, the rows being sent finish and the rest wait for the next start.
                if self.stop.is_cancelled() {
                    return;
                }
                match self.take_callback(&callback.id, LEASE).await {
                    Ok(Some(lease)) => self.send_one(courier, &callback, lease).await,
                    Ok(None) => {}
                    Err(e) => tracing::warn!(callback = %callback.id, error = %e, "could not take a row of the outbox"),
                }
            })
            .await;
    }

    async fn send_one(&self, courier: &Arc<dyn Courier>, callback: &Callback, lease: i64) {
        let sent = courier.send(callback).await;
        let attempt = callback.attempts + 1;
        let late = callback.ended_at.is_some_and(|at| self.clock.now_ms() > super::after(at, GIVE_UP_AFTER));
        let tried = match &sent {
            Sent::Delivered | Sent::Nothing => CallbackTry::Delivered,
            Sent::Failed { error, .. } if late => CallbackTry::GaveUp { error: error.clone() },
            Sent::Failed { error, asked } => {
                let next_at = super::after(self.clock.now_ms(), RETRY.pause(attempt, *asked));
                CallbackTry::Retry { next_at, error: error.clone() }
            }
        };
        let (id, to) = (&callback.id, courier.route());
        match self.callback_tried(id, lease, tried.clone()).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(callback = %id, to, "an attempt outlasted its lease; another sender has the row");
                return;
            }
            // Its lease runs out, and it is sent again.
            Err(e) => {
                tracing::warn!(callback = %id, to, error = %e, "could not record an attempt");
                return;
            }
        }
        match tried {
            CallbackTry::Delivered => {}
            CallbackTry::GaveUp { error } => tracing::error!(callback = %id, to, error, "given up: not tried again"),
            CallbackTry::Retry { error, .. } => {
                tracing::warn!(callback = %id, to, attempt, error, "not delivered; it is tried again");
            }
        }
    }
}
