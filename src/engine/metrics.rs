//! Counters for `/metrics`: questions asked, resolved by outcome and surface, and how long a
//! follow-up run takes to resume after its question is resolved.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::ChannelState;
use crate::question::{Status, Surface};
use crate::store::WriteStats;

/// Upper bounds of the resume-latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The engine's counters.
#[derive(Default)]
pub struct Metrics {
    asked: AtomicU64,
    resolved: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    resume: Mutex<Histogram>,
}

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    pub(super) fn asked(&self) {
        self.asked.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn resolved(&self, status: Status, via: Option<Surface>) {
        let via = via.map_or("unknown", Surface::as_str);
        let mut resolved = self.resolved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *resolved.entry((status.as_str(), via)).or_default() += 1;
    }

    pub(super) fn resumed_after(&self, latency: Duration) {
        let secs = latency.as_secs_f64();
        let mut h = self.resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (bound, count) in BUCKETS.iter().zip(h.counts.iter_mut()) {
            if secs <= *bound {
                *count += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    /// The Prometheus text exposition, with the current number of pending questions and how
    /// each channel stands.
    pub fn render(
        &self,
        pending: usize,
        channels: &[(&str, ChannelState)],
        undelivered: &std::collections::BTreeMap<&str, usize>,
        store: &WriteStats,
    ) -> String {
        let mut out = String::new();
        for (name, help, value) in [
            (
                "askgate_store_batches_total",
                "Batches of writes the store's writer committed together.",
                store.batches as f64,
            ),
            ("askgate_store_writes_total", "Writes; per batch, how many share a commit.", store.writes as f64),
            ("askgate_store_write_errors_total", "Writes that failed.", store.failed as f64),
            ("askgate_store_busy_seconds_total", "Time the writer spent in transactions.", store.busy_seconds),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {value}");
        }
        let _ =
            writeln!(out, "# HELP askgate_channel_up Whether a channel is connected to its platform (1) or not (0).");
        let _ = writeln!(out, "# TYPE askgate_channel_up gauge");
        for (name, state) in channels {
            let up = matches!(state, ChannelState::Up | ChannelState::Degraded(_));
            let _ = writeln!(out, "askgate_channel_up{{channel=\"{name}\"}} {}", u8::from(up));
        }
        let _ = writeln!(
            out,
            "# HELP askgate_cards_undelivered Cards that could not be delivered yet and are being tried again."
        );
        let _ = writeln!(out, "# TYPE askgate_cards_undelivered gauge");
        for (name, n) in undelivered {
            let _ = writeln!(out, "askgate_cards_undelivered{{channel=\"{name}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP askgate_store_writes_failing Whether the last batch of writes failed (1) or not (0)."
        );
        let _ = writeln!(out, "# TYPE askgate_store_writes_failing gauge");
        let _ = writeln!(out, "askgate_store_writes_failing {}", u8::from(store.failing.is_some()));
        let _ = writeln!(out, "# HELP askgate_questions_asked_total Questions asked since start.");
        let _ = writeln!(out, "# TYPE askgate_questions_asked_total counter");
        let _ = writeln!(out, "askgate_questions_asked_total {}", self.asked.load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "# HELP askgate_questions_resolved_total Questions resolved since start, by outcome and surface."
        );
        let _ = writeln!(out, "# TYPE askgate_questions_resolved_total counter");
        for ((status, via), n) in self.resolved.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            let _ = writeln!(out, "askgate_questions_resolved_total{{outcome=\"{status}\",surface=\"{via}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP askgate_questions_pending Questions waiting for an answer.");
        let _ = writeln!(out, "# TYPE askgate_questions_pending gauge");
        let _ = writeln!(out, "askgate_questions_pending {pending}");
        let h = self.resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(out, "# HELP askgate_resume_seconds Time from a resolution to the resumed run's replay.");
        let _ = writeln!(out, "# TYPE askgate_resume_seconds histogram");
        for (bound, count) in BUCKETS.iter().zip(h.counts.iter()) {
            let _ = writeln!(out, "askgate_resume_seconds_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "askgate_resume_seconds_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "askgate_resume_seconds_sum {}", h.sum);
        let _ = writeln!(out, "askgate_resume_seconds_count {}", h.count);
        out
    }
}
