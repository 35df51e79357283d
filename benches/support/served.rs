//! The real askgate binary, served on a temp directory for a benchmark: its address, its
//! operator token and its process, whose CPU and memory the benchmark reads from `/proc`.

#![allow(dead_code, reason = "a module of several benchmarks, each using some of it")]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

/// The askgate binary to run: this build's, unless `ASKGATE_BENCH_BIN` names another.
pub fn bin() -> String {
    std::env::var("ASKGATE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_askgate").to_owned())
}

/// Resident and peak resident memory of a process, in MB.
pub fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A process's user and system CPU time so far.
pub fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Linux reports them in USER_HZ, 100 a second on every common build.
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

pub struct Served {
    pub child: tokio::process::Child,
    pub base: String,
    pub token: String,
}

/// How askgate is started: its log filter (`info` unless said), variables of its environment,
/// an open-files limit (soft and hard) and one CPU to run on.
#[derive(Default)]
pub struct Start {
    pub log: Option<&'static str>,
    pub env: Vec<(&'static str, String)>,
    pub open_files: Option<u64>,
    pub cpu: Option<usize>,
}

/// askgate on `dir` with the console channel, started as `start` says, and its operator token.
pub async fn serve(dir: &Path, start: Start) -> Served {
    let config = dir.join("channels.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\ndatabase = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n",
            dir.join("askgate.db").display()
        ),
    )
    .unwrap();
    let (child, base) = launch(&config, &start).await;
    let token = std::fs::read_to_string(dir.join("askgate.token")).unwrap().trim().to_owned();
    Served { child, base, token }
}

/// askgate serving `config`, started as `start` says, once it listens: the process and its
/// address (`http://127.0.0.1:<port>`). Its log is read and dropped.
pub async fn launch(config: &Path, start: &Start) -> (tokio::process::Child, String) {
    // The shell lowers both limits and pins the CPU, then becomes askgate.
    let mut script = String::new();
    if let Some(limit) = start.open_files {
        script.push_str(&format!("ulimit -n {limit} && "));
    }
    match start.cpu {
        Some(cpu) => script.push_str(&format!("exec taskset -c {cpu} \"$0\" \"$@\"")),
        None => script.push_str("exec \"$0\" \"$@\""),
    }
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .arg(bin())
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", start.log.unwrap_or("info"))
        .envs(start.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next_line().await.unwrap().expect("askgate started");
        if let Some(rest) = line.split("web page on ").nth(1) {
            break rest.trim().trim_end_matches('/').to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, base)
}

/// Pins this process (the benchmark's client) to all CPUs but the server's (CPU 0).
pub fn pin_client() {
    let pid = std::process::id().to_string();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus > 1 {
        let _ =
            std::process::Command::new("taskset").args(["-a", "-p", "-c", &format!("1-{}", cpus - 1), &pid]).output();
    }
}
