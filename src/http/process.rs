//! The standard `process_*` metrics of the Prometheus client libraries, read from `/proc/self`:
//! CPU time, resident and virtual memory, open and allowed file descriptors, start time.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The collector of these metrics, read at each scrape; those that cannot be read here are left
/// out. (prometheus-client has no process collector of its own.)
#[derive(Debug)]
pub struct Process;

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let stat = Stat::read();
        let ticks = clock_ticks();
        if let Some(s) = &stat {
            let help = "Total user and system CPU time spent in seconds.";
            let cpu = encoder.encode_descriptor("process_cpu_seconds", help, None, MetricType::Counter)?;
            ConstCounter::new((s.utime + s.stime) as f64 / ticks).encode(cpu)?;
        }
        let gauges = [
            ("process_resident_memory_bytes", "Resident memory size in bytes.", resident_kib().map(|kib| kib * 1024.0)),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes.", stat.as_ref().map(|s| s.vsize as f64)),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                stat.as_ref().and_then(|s| Some(boot_time()? + s.start_ticks as f64 / ticks)),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64),
            ),
            ("process_max_fds", "Maximum number of open file descriptors.", max_fds()),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
            }
        }
        Ok(())
    }
}

/// The metrics as `/metrics` writes them (for tests).
#[cfg(test)]
fn metrics() -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Process));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("a string takes it");
    out
}

/// The fields of `/proc/self/stat` these metrics use.
struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize: u64,
}

impl Stat {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        // Numbered as in proc(5), field 3 (state) being fields[0].
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Self { utime: field(14)?, stime: field(15)?, start_ticks: field(22)?, vsize: field(23)? })
    }
}

/// Clock ticks per second for `/proc` times: 100 on Linux (`USER_HZ`).
fn clock_ticks() -> f64 {
    100.0
}

/// `VmRSS` from `/proc/self/status`, in KiB.
fn resident_kib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()
}

/// The system's boot time, unix seconds, from `/proc/stat`'s `btime`.
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

/// The soft limit on open files, from `/proc/self/limits`.
fn max_fds() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_process_metric_is_read_on_linux() {
        let text = super::metrics();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{name} missing: {text}"))
                .parse()
                .unwrap();
            // A fresh test process may not have used a clock tick of CPU yet.
            let least = if name == "process_cpu_seconds_total" { 0.0 } else { f64::MIN_POSITIVE };
            assert!(value >= least, "{name} = {value}");
        }
        let started: f64 =
            text.lines().find_map(|l| l.strip_prefix("process_start_time_seconds ")).unwrap().parse().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(started <= now + 1.0 && started > now - 86_400.0 * 365.0, "{started} vs {now}");
    }
}
