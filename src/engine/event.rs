//! Events that observers (the event stream, the web page, metrics) subscribe to, and the
//! recent ones kept in memory so that a client that reconnects gets what it missed: the
//! engine's [`Events`] part.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use serde::Serialize;

use super::waiters::Waiters;
use crate::question::{Question, Status};
use crate::run::{Run, RunStatus};
use crate::store::{RunEvent, Store, StoreExt};

/// Something that happened to a question or a run. The snapshots are shared (with the lanes
/// that render them and every stream that sends them), not copied.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Event {
    /// A question was persisted and is being rendered.
    Asked(Arc<Question>),
    /// A question was resolved; its status says how.
    Resolved(Arc<Question>),
    /// A quorum approval counted one more approval; it still waits.
    Counted(Arc<Question>),
    /// A run started.
    RunStarted(Arc<Run>),
    /// A follow-up run replays after an answer (or after a restart interrupted its turn).
    RunResumed(Arc<Run>),
    /// A run ended its turn on a question, or ended for good; its status says which.
    Run(Arc<Run>),
}

impl Event {
    /// One log line for a question's life on this instance (asked, counted, and how it ended),
    /// with its ids as fields; runs at debug.
    pub(super) fn log(&self) {
        // A span for traces (exported over OTLP when configured; logs do not show it), with the
        // ids as attributes, around the log line, which becomes its event.
        let span = match self {
            Self::Asked(q) | Self::Counted(q) | Self::Resolved(q) => tracing::info_span!(
                target: "askgate::otel", "question", otel.name = self.name(),
                question.id = %q.id, run.id = %q.run, question.status = q.status.as_str()
            ),
            Self::RunStarted(r) | Self::RunResumed(r) | Self::Run(r) => tracing::info_span!(
                target: "askgate::otel", "run", otel.name = self.name(), run.id = %r.id, run.function = %r.function
            ),
        };
        let _in = span.enter();
        match self {
            Self::Asked(q) => tracing::info!(
                question = %q.id, run = %q.run, kind = q.kind.as_str(),
                conversation = q.conversation.as_ref().map(crate::question::Conversation::as_str),
                "question asked"
            ),
            Self::Counted(q) => tracing::info!(question = %q.id, run = %q.run, "question counted an approval"),
            Self::Resolved(q) => tracing::info!(
                question = %q.id, run = %q.run, status = q.status.as_str(),
                via = q.answered_via.map(crate::question::Surface::as_str),
                by = q.answered_by.as_deref(),
                "question {}", q.status.as_str()
            ),
            Self::RunStarted(r) | Self::RunResumed(r) | Self::Run(r) => {
                tracing::debug!(run = %r.id, function = %r.function, status = r.status.as_str(), "{}", self.name());
            }
        }
    }

    /// The event's name: `question.asked`, `question.replied`, `run.waiting`, …
    pub fn name(&self) -> &'static str {
        if let Some((what, _)) = self.of_run() {
            return what.as_str();
        }
        match self {
            Self::Resolved(q) => match q.status {
                Status::Answered | Status::Pending => "question.replied",
                Status::Declined => "question.rejected",
                Status::Expired => "question.expired",
                Status::Cancelled => "question.cancelled",
            },
            Self::Counted(_) => "question.counted",
            _ => "question.asked",
        }
    }

    /// What a run did, for the other instances sharing the store (none: a question event,
    /// which the store announces with the question's own write).
    pub(super) fn of_run(&self) -> Option<(RunEvent, &Run)> {
        match self {
            Self::Asked(_) | Self::Resolved(_) | Self::Counted(_) => None,
            Self::RunStarted(r) => Some((RunEvent::Started, r)),
            Self::RunResumed(r) => Some((RunEvent::Resumed, r)),
            Self::Run(r) => Some((
                match r.status {
                    RunStatus::Running | RunStatus::Waiting => RunEvent::Waiting,
                    RunStatus::Finished => RunEvent::Finished,
                    RunStatus::Failed => RunEvent::Failed,
                    RunStatus::Cancelled => RunEvent::Cancelled,
                },
                r,
            )),
        }
    }

    /// What another instance's run did, as an event here.
    pub(super) fn heard_of_run(event: RunEvent, mut run: Run) -> Self {
        match event {
            RunEvent::Started => Self::RunStarted(Arc::new(run)),
            RunEvent::Resumed => Self::RunResumed(Arc::new(run)),
            ended => {
                // A run read from the store may have moved on since; the event says what it did.
                run.status = match ended {
                    RunEvent::Finished => RunStatus::Finished,
                    RunEvent::Failed => RunStatus::Failed,
                    RunEvent::Cancelled => RunStatus::Cancelled,
                    _ => RunStatus::Waiting,
                };
                Self::Run(Arc::new(run))
            }
        }
    }
}

/// An event with its place in this process's sequence.
#[derive(Debug)]
pub struct Logged {
    /// Its number: one more than the event before it.
    pub seq: u64,
    /// What happened.
    pub event: Event,
    /// The event as JSON, made once however many streams send it.
    json: std::sync::OnceLock<String>,
}

impl Logged {
    /// The event as JSON (made on first use, then shared).
    pub fn json(&self) -> &str {
        self.json.get_or_init(|| serde_json::to_string(&self.event).unwrap_or_else(|_| "{}".to_owned()))
    }
}

/// The most recent events, by number; a reconnecting client that missed no more than these
/// gets exactly them.
struct EventLog {
    /// This process's mark: event ids of another process (before a restart) do not resume.
    boot: String,
    next: u64,
    recent: VecDeque<Arc<Logged>>,
    cap: usize,
}

impl EventLog {
    pub(super) fn new(cap: usize) -> Self {
        let boot = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        Self { boot, next: 1, recent: VecDeque::with_capacity(cap), cap }
    }

    /// Numbers and keeps an event.
    pub(super) fn push(&mut self, event: Event) -> Arc<Logged> {
        let logged = Arc::new(Logged { seq: self.next, event, json: std::sync::OnceLock::new() });
        self.next += 1;
        if self.recent.len() == self.cap {
            self.recent.pop_front();
        }
        self.recent.push_back(logged.clone());
        logged
    }

    /// The id a client sends back (`Last-Event-ID`) for event `seq`: `<boot>-<seq>`.
    pub(super) fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.boot)
    }

    /// The number of the latest event (0 before the first).
    pub(super) fn latest(&self) -> u64 {
        self.next - 1
    }

    /// The events after `last_id`, when it is an id of this process and none after it has
    /// been forgotten; none otherwise (the client then needs the whole picture again).
    pub(super) fn since(&self, last_id: &str) -> Option<Vec<Arc<Logged>>> {
        let (boot, seq) = last_id.trim().rsplit_once('-')?;
        let seq: u64 = seq.parse().ok()?;
        if boot != self.boot || seq > self.latest() {
            return None;
        }
        let oldest = self.recent.front().map_or(self.next, |e| e.seq);
        if seq + 1 < oldest {
            return None;
        }
        Some(self.recent.iter().filter(|e| e.seq > seq).cloned().collect())
    }
}

/// The events part: the live stream and the numbered recent events, under one lock so that
/// the two agree.
pub(super) struct Events {
    live: broadcast::Sender<Arc<Logged>>,
    log: Mutex<EventLog>,
}

/// A subscription to events, with what a reconnecting client missed.
pub struct Subscription {
    /// The events from now on.
    pub live: broadcast::Receiver<Arc<Logged>>,
    /// The events after the client's last id, when they are all kept; none: the client needs
    /// the whole picture (the pending questions) again.
    pub missed: Option<Vec<Arc<Logged>>>,
    /// The id of the latest event before `live` starts.
    pub at: String,
}

impl Events {
    /// A stream a subscriber may fall `buffered` events behind, keeping the last `kept`.
    pub(super) fn new(buffered: usize, kept: usize) -> Self {
        let (live, _) = broadcast::channel(buffered);
        Self { live, log: Mutex::new(EventLog::new(kept)) }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, EventLog> {
        super::lock(&self.log)
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<Logged>> {
        self.live.subscribe()
    }

    pub(super) fn subscribe_since(&self, last_id: Option<&str>) -> Subscription {
        let log = self.log();
        let live = self.live.subscribe();
        Subscription { live, missed: last_id.and_then(|id| log.since(id)), at: log.id(log.latest()) }
    }

    pub(super) fn id(&self, seq: u64) -> String {
        self.log().id(seq)
    }

    /// Numbers `event`, keeps it and sends it to the subscribers.
    pub(super) fn publish(&self, event: Event) {
        let mut log = self.log();
        let logged = log.push(event);
        // No subscribers is fine: events are for observers.
        let _ = self.live.send(logged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event::Resolved(Arc::new(crate::question::test_question(crate::question::Ask::question("x"))))
    }

    #[test]
    fn a_client_resumes_from_its_last_id_while_the_events_after_it_are_kept() {
        let mut log = EventLog::new(3);
        let first = log.push(event());
        let id = log.id(first.seq);
        assert_eq!(log.since(&id).unwrap().len(), 0);
        log.push(event());
        log.push(event());
        assert_eq!(log.since(&id).unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
        log.push(event());
        log.push(event());
        assert!(log.since(&id).is_none(), "events after it were forgotten: the whole picture is needed");
        assert!(log.since("deadbeef-1").is_none(), "an id of another process");
        assert!(log.since(&log.id(99)).is_none(), "an id from the future");
        assert!(log.since("nonsense").is_none());
    }
}

/// The announcing part, which services hold: an event goes to the log, to the other
/// instances sharing the store (a run's: a question's goes with its own write), to whoever
/// waits on its question here, and to the observers here.
#[derive(Clone)]
pub(super) struct Bus(Arc<BusParts>);

/// The parts of [`Bus`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub(super) struct BusParts {
    store: Arc<dyn Store>,
    events: Arc<Events>,
    waiters: Arc<Waiters>,
}

super::parts!(Bus, BusParts);

impl Bus {
    pub(super) fn new(store: Arc<dyn Store>, events: Arc<Events>, waiters: Arc<Waiters>) -> Self {
        Self(Arc::new(BusParts { store, events, waiters }))
    }

    /// Logs `event`, tells the other instances of a run's, and publishes it here.
    pub(super) fn emit(&self, event: Event) {
        event.log();
        if let Some((what, run)) = event.of_run() {
            self.store.announce_run(what, run);
        }
        self.publish(event);
    }

    /// Hands `event` to the observers here (and not to the other instances: see [`Self::emit`]),
    /// and a resolution to whoever waits on its question here (see `waiters`).
    pub(super) fn publish(&self, event: Event) {
        if let Event::Resolved(question) = &event {
            self.waiters.resolved(question);
        }
        self.events.publish(event);
    }
}
