//! The SQLite files on disk, through the real binary: the write-ahead log stays bounded under
//! load and is emptied when askgate idles and when it stops; a full disk (a real one: a small
//! tmpfs in a mount namespace of the test's own) refuses writes only until space is back, with
//! and without a restart.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::binary::{BIN, Served, write_config, write_config_on};
use crate::support::eventually;

const TOKEN: &str = "disk-test-token-0123456789abcdef0123456789";

/// The API's base URL, from the start-up log.
async fn api_base(served: &Served) -> String {
    let line = served.log_line("web page on http://").await;
    line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned()
}

/// Asks one question with a paragraph of detail; the HTTP status.
async fn ask(client: &reqwest::Client, base: &str, n: u64) -> u16 {
    let body = json!({"conversation": "console:local", "prompt": format!("Question {n}: which?"),
                      "options": ["a", "b", "c"], "detail": "Some context for the person. ".repeat(20)});
    match client.post(format!("{base}/api/questions")).bearer_auth(TOKEN).json(&body).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Eight clients asking until `stop` or `max` questions; counts the questions stored.
fn load(base: String, max: u64, asked: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let next = Arc::new(AtomicU64::new(0));
        let clients = (0..8).map(|_| {
            let (client, base, next, asked, stop) =
                (client.clone(), base.clone(), next.clone(), asked.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= max {
                        break;
                    }
                    if ask(&client, &base, n).await == 201 {
                        asked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        futures_util::future::join_all(clients).await;
    })
}

#[tokio::test]
async fn the_wal_stays_bounded_under_load_and_is_emptied_when_idle_and_at_a_clean_stop() {
    let dir = TempDir::new().unwrap();
    let wal = dir.path().join("askgate.db-wal");
    let served = Served::start_with_env(&write_config(dir.path(), ""), &[("ASKGATE_API_TOKEN", TOKEN)]);
    let base = api_base(&served).await;

    // 3,000 questions from eight clients, the log's size watched meanwhile (before it was
    // trimmed, this load left a log of well over 100 MB, growing for as long as it lasted).
    let (asked, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    let loading = load(base.clone(), 3000, asked.clone(), stop.clone());
    let mut peak = 0;
    while !loading.is_finished() {
        peak = peak.max(size(&wal));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(asked.load(Ordering::Relaxed), 3000);
    assert!(peak < 64 << 20, "the log reached {peak} bytes under load");
    // Idle, askgate cuts the log to nothing.
    eventually(|| async { (size(&wal) == 0).then_some(()) }).await;

    // Stopped in the middle of a load (never idle), it leaves the log empty too.
    let asked = Arc::new(AtomicU64::new(0));
    let loading = load(base, 100_000, asked.clone(), stop.clone());
    eventually(|| async { (asked.load(Ordering::Relaxed) >= 1000).then_some(()) }).await;
    assert!(size(&wal) > 0, "the load writes to the log");
    assert_eq!(served.terminate().await.code(), Some(0));
    stop.store(true, Ordering::Relaxed);
    loading.await.unwrap();
    assert_eq!(size(&wal), 0, "the log after a clean stop");
    assert!(size(&dir.path().join("askgate.db-shm")) > 0, "the index stays, so a full disk can still be read");
}

/// A private user and mount namespace holding a tmpfs of `megabytes` at `at`, kept alive by a
/// `sleep` while the test runs; askgate is started inside it with `nsenter`.
struct SmallDisk {
    holder: tokio::process::Child,
    at: PathBuf,
}

impl SmallDisk {
    /// Mounts it, or says why it cannot (unprivileged user namespaces switched off).
    async fn mount(at: &Path, megabytes: u32) -> Result<Self, String> {
        let script = format!("mount -t tmpfs -o size={megabytes}m tmpfs \"$0\" && echo mounted && exec sleep 600");
        let mut holder = Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
            .arg(at)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("unshare: {e}"))?;
        let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
        match lines.next_line().await {
            Ok(Some(line)) if line == "mounted" => Ok(Self { holder, at: at.to_owned() }),
            _ => {
                let out = holder.wait_with_output().await.map_err(|e| e.to_string())?;
                Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
            }
        }
    }

    /// `path` (under the mount) as this test sees it: through the holder's root.
    fn path(&self, name: &str) -> PathBuf {
        let pid = self.holder.id().unwrap();
        Path::new(&format!("/proc/{pid}/root")).join(self.at.strip_prefix("/").unwrap()).join(name)
    }

    /// Fills what is left of it with one more ballast file.
    fn fill(&self) {
        use std::io::Write;
        let n = (0..).find(|n| !self.path(&format!("ballast{n}")).exists()).unwrap();
        let mut ballast = std::fs::File::create(self.path(&format!("ballast{n}"))).unwrap();
        for chunk in [1 << 20, 4096, 512] {
            while ballast.write_all(&vec![0; chunk]).is_ok() {}
        }
        let _ = ballast.sync_all();
    }

    /// Gives the space back.
    fn free(&self) {
        for n in 0.. {
            if std::fs::remove_file(self.path(&format!("ballast{n}"))).is_err() {
                break;
            }
        }
    }

    /// `askgate serve` inside the namespace.
    fn serve(&self, config: &Path) -> Served {
        let pid = self.holder.id().unwrap().to_string();
        let mut command = Command::new("nsenter");
        command.args(["-t", &pid, "--user", "--mount", "--preserve-credentials", BIN, "serve", "--config"]).arg(config);
        Served::spawn(command, &[("ASKGATE_API_TOKEN", TOKEN)])
    }
}

async fn pending(client: &reqwest::Client, base: &str) -> (u16, Value) {
    let response =
        client.get(format!("{base}/api/questions?status=pending&limit=1000")).bearer_auth(TOKEN).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Asks until the disk refuses a question; returns that status.
async fn until_refused(client: &reqwest::Client, base: &str) -> u16 {
    for n in 0..2000 {
        let status = ask(client, base, n).await;
        if status != 201 {
            return status;
        }
    }
    panic!("2,000 questions fitted on a full disk");
}

#[tokio::test]
#[cfg_attr(
    no_user_namespaces,
    ignore = "needs unprivileged user and mount namespaces (unshare --user --map-root-user --mount): allow them \
              with sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone"
)]
async fn a_full_disk_refuses_writes_until_space_is_back_also_across_a_restart() {
    let dir = TempDir::new().unwrap();
    let mount = dir.path().join("disk");
    std::fs::create_dir(&mount).unwrap();
    // Where the build found no user namespaces the test is ignored; in CI they must be there.
    let disk = SmallDisk::mount(&mount, 8).await.unwrap_or_else(|why| panic!("a tmpfs in a user namespace: {why}"));
    let config = write_config_on(dir.path(), &mount.join("askgate.db").display().to_string(), "");
    let client = reqwest::Client::new();

    // Without a restart: refused while the disk is full, taken again once space is back.
    let served = disk.serve(&config);
    let base = api_base(&served).await;
    assert_eq!(ask(&client, &base, 0).await, 201);
    disk.fill();
    assert_eq!(until_refused(&client, &base).await, 500);
    served.log_line("the database refuses writes").await;
    disk.free();
    eventually(|| async { (ask(&client, &base, 1).await == 201).then_some(()) }).await;
    served.log_line("the database takes writes again").await;

    // Across a restart on a full disk: askgate stops cleanly, starts again, reads what it had,
    // and takes writes as soon as space is back.
    disk.fill();
    until_refused(&client, &base).await;
    assert_eq!(served.terminate().await.code(), Some(0));
    // What the stop gave back (the emptied log) is taken too.
    disk.fill();
    let served = disk.serve(&config);
    let base = api_base(&served).await;
    served.log_line("askgate is ready").await;
    let (status, before) = pending(&client, &base).await;
    assert_eq!(status, 200, "a full disk is still read: {before}");
    let stored = before["questions"].as_array().map_or(0, Vec::len);
    assert!(stored >= 2, "{before}");
    assert_eq!(until_refused(&client, &base).await, 500);
    disk.free();
    eventually(|| async { (ask(&client, &base, 2).await == 201).then_some(()) }).await;
    let (_, after) = pending(&client, &base).await;
    assert_eq!(after["questions"].as_array().map_or(0, Vec::len), stored + 1, "{after}");
    assert_eq!(served.terminate().await.code(), Some(0));
}
