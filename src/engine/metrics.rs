//! Counters for `/metrics` (prometheus-client, OpenMetrics text): questions asked, resolved by
//! outcome and surface, how long a follow-up run takes to resume after its question is
//! resolved, and the figures of the moment of a scrape (questions pending, channels, cards
//! waiting to be delivered, the store's writer).

use std::collections::BTreeMap;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::ChannelState;
use crate::question::{Status, Surface};
use crate::store::WriteStats;

/// Upper bounds of the resume-latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// A metric's labels, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// The engine's counters.
pub struct Metrics {
    registry: Registry,
    asked: Counter,
    resolved: Family<Labels, Counter>,
    resume: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let (asked, resolved, resume) = (Counter::default(), Family::default(), Histogram::new(BUCKETS));
        let mut registry = Registry::default();
        registry.register("askgate_questions_asked", "Questions asked since start", asked.clone());
        registry.register(
            "askgate_questions_resolved",
            "Questions resolved since start, by outcome and surface",
            resolved.clone(),
        );
        registry.register(
            "askgate_resume_seconds",
            "Time from a resolution to the resumed run's replay",
            resume.clone(),
        );
        Self { registry, asked, resolved, resume }
    }
}

impl Metrics {
    pub(super) fn asked(&self) {
        self.asked.inc();
    }

    pub(super) fn resolved(&self, status: Status, via: Option<Surface>) {
        let via = via.map_or("unknown", Surface::as_str);
        self.resolved.get_or_create(&vec![("outcome", status.as_str().to_owned()), ("surface", via.to_owned())]).inc();
    }

    pub(super) fn resumed_after(&self, latency: Duration) {
        self.resume.observe(latency.as_secs_f64());
    }

    /// The counters, and `now`'s figures, in OpenMetrics text (without the closing `# EOF`, so
    /// that other registries can follow).
    ///
    /// # Errors
    /// Only when writing to the string fails, which it does not.
    pub fn encode(&self, out: &mut String, now: Snapshot) -> std::fmt::Result {
        prometheus_client::encoding::text::encode_registry(out, &self.registry)?;
        let mut scrape = Registry::default();
        scrape.register_collector(Box::new(now));
        prometheus_client::encoding::text::encode_registry(out, &scrape)
    }
}

/// The figures of the moment a scrape asks for them.
#[derive(Debug)]
pub struct Snapshot {
    pending: u64,
    channels: Vec<(String, bool)>,
    undelivered: Vec<(String, u64)>,
    store: WriteStats,
}

impl Snapshot {
    /// The questions pending, how each channel stands, the cards each could not deliver yet,
    /// and the store's writer.
    pub fn new(
        pending: u64,
        channels: &[(&str, ChannelState)],
        undelivered: &BTreeMap<&str, usize>,
        store: &WriteStats,
    ) -> Self {
        Self {
            pending,
            channels: channels
                .iter()
                .map(|(name, state)| {
                    ((*name).to_owned(), matches!(state, ChannelState::Up | ChannelState::Degraded(_)))
                })
                .collect(),
            undelivered: undelivered.iter().map(|(name, n)| ((*name).to_owned(), *n as u64)).collect(),
            store: store.clone(),
        }
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let WriteStats { batches, writes, failed, busy_seconds: busy, held_seconds: held, ref failing } = self.store;
        for (name, help, value) in [
            ("askgate_store_batches", "Batches of writes the store's writer committed together.", batches),
            ("askgate_store_writes", "Writes; per batch, how many share a commit.", writes),
            ("askgate_store_write_errors", "Writes that failed.", failed),
        ] {
            ConstCounter::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        for (name, help, value) in [
            ("askgate_store_busy_seconds", "Time the writer spent in transactions.", busy),
            ("askgate_store_held_seconds", "Time the writer waited for a checkpoint that fell behind (SQLite).", held),
        ] {
            ConstCounter::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        let help = "Whether the last batch of writes failed (1) or not (0).";
        let gauge = encoder.encode_descriptor("askgate_store_writes_failing", help, None, MetricType::Gauge)?;
        ConstGauge::new(i64::from(failing.is_some())).encode(gauge)?;
        let help = "Questions waiting for an answer.";
        let gauge = encoder.encode_descriptor("askgate_questions_pending", help, None, MetricType::Gauge)?;
        ConstGauge::new(i64::try_from(self.pending).unwrap_or(i64::MAX)).encode(gauge)?;
        let help = "Whether a channel is connected to its platform (1) or not (0).";
        let mut up = encoder.encode_descriptor("askgate_channel_up", help, None, MetricType::Gauge)?;
        for (name, is_up) in &self.channels {
            ConstGauge::new(i64::from(*is_up)).encode(up.encode_family(&vec![("channel", name.clone())])?)?;
        }
        let help = "Cards that could not be delivered yet and are being tried again.";
        let mut cards = encoder.encode_descriptor("askgate_cards_undelivered", help, None, MetricType::Gauge)?;
        for (name, n) in &self.undelivered {
            let n = i64::try_from(*n).unwrap_or(i64::MAX);
            ConstGauge::new(n).encode(cards.encode_family(&vec![("channel", name.clone())])?)?;
        }
        Ok(())
    }
}
