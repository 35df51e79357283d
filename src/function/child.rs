//! Starting a program: with a clean environment, in its own process group. Process functions
//! and upstream MCP servers start this way; a process function's program is also marked, so
//! that whatever it starts ends with its turn, also what left its process group.

use std::collections::BTreeMap;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// The variable whose value marks every process a program started by [`spawn_tree`] leads to.
/// A program's children inherit it, also those that leave its process group (`setsid`).
pub(crate) const MARK: &str = "ASKGATE_PROCESS_MARK";

/// A program ready to start with a clean environment (only `pass_env`, from askgate's, and
/// `set_env`), piped stdin, stdout and stderr, in its own process group (so that stopping it
/// stops whatever it started too), killed if its handle is dropped. Process functions and
/// upstream MCP servers start this way.
pub(crate) fn clean_command(
    command: &[String],
    cwd: &std::path::Path,
    pass_env: &[String],
    set_env: &BTreeMap<String, String>,
) -> Command {
    let mut program = Command::new(&command[0]);
    program
        .args(&command[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(pass_env.iter().filter_map(|name| std::env::var_os(name).map(|value| (name, value))))
        .envs(set_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    program
}

/// Starts `command` with a fresh [`MARK`] in its environment; the [`ProcessTree`] ends the
/// program and everything it started when dropped.
///
/// # Errors
/// When the program cannot be started.
pub(crate) fn spawn_tree(command: &mut Command) -> std::io::Result<(Child, ProcessTree)> {
    let mark = uuid::Uuid::new_v4().simple().to_string();
    let child = command.env(MARK, &mark).spawn()?;
    let group = child.id();
    Ok((child, ProcessTree { group, mark }))
}

/// Every process one started program leads to: its process group, and the processes that
/// carry its [`MARK`] (those that left the group: `setsid sleep 300 &`, a daemon). All are
/// ended (SIGKILL) when this is dropped: when the program's turn ends however it ends (done,
/// pending, failure, a timeout, or the turn dropped at shutdown).
pub(crate) struct ProcessTree {
    group: Option<u32>,
    mark: String,
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if let Some(pid) = self.group.and_then(|g| i32::try_from(g).ok()).and_then(rustix::process::Pid::from_raw) {
            // Gone already is fine: the group ended by itself.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        // After the group, so that what remains cannot start more in it meanwhile. Synchronous:
        // a drop cannot wait, and this runs also when the turn's future is dropped at shutdown;
        // reading procfs never waits on a disk (a scan of a few hundred processes takes a
        // millisecond or two).
        marked::kill(&self.mark);
    }
}

/// Finding the processes that carry a mark. Read from `/proc` with the standard library: the
/// scan needs a directory listing and one small file per process, which a procfs crate would
/// wrap in much more than it saves.
#[cfg(target_os = "linux")]
mod marked {
    use std::collections::HashSet;

    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

    /// The most scans one kill makes: each finds what a process forked before it was killed.
    const PASSES: usize = 16;

    /// Kills (SIGKILL) every process whose environment carries `MARK=mark`, until a scan
    /// finds none it has not killed. Only this user's processes can be read (`environ` of
    /// another user's is refused), so only those are candidates.
    pub(super) fn kill(mark: &str) {
        let needle = format!("{}={mark}", super::MARK);
        let mut killed = HashSet::new();
        for _ in 0..PASSES {
            if !kill_once(needle.as_bytes(), &mut killed) {
                return;
            }
        }
        tracing::warn!(processes = killed.len(), "a program's processes kept forking while they were being ended");
    }

    /// One scan of `/proc`: kills the marked processes not in `killed` and adds them; whether
    /// it killed any.
    fn kill_once(needle: &[u8], killed: &mut HashSet<Pid>) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else { return false };
        let mut any = false;
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()).and_then(Pid::from_raw) else {
                continue;
            };
            if killed.contains(&pid) || !carries(pid, needle) {
                continue;
            }
            // Signalled through a pidfd, and the mark read again after it was opened: a pid
            // that ended and was reused by another process between the read and the kill is
            // never hit (the pidfd names the process that had the pid when it was opened).
            let Ok(fd) = pidfd_open(pid, PidfdFlags::empty()) else { continue };
            if carries(pid, needle) && pidfd_send_signal(&fd, Signal::KILL).is_ok() {
                killed.insert(pid);
                any = true;
            }
        }
        any
    }

    /// Whether the process `pid` was started with `needle` (`NAME=value`) in its environment.
    /// A process that ended has none left to read.
    fn carries(pid: Pid, needle: &[u8]) -> bool {
        std::fs::read(format!("/proc/{}/environ", pid.as_raw_nonzero()))
            .is_ok_and(|environ| environ.split(|&b| b == 0).any(|variable| variable == needle))
    }
}

/// Elsewhere there is no `/proc` to read: the process group is all that ends.
#[cfg(not(target_os = "linux"))]
mod marked {
    pub(super) fn kill(_mark: &str) {}
}
