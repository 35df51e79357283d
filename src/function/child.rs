//! Starting a program: with a clean environment, in its own process group that ends with it.
//! Process functions and upstream MCP servers start this way.

use std::collections::BTreeMap;
use std::process::Stdio;

use tokio::process::Command;

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

/// A program's process group, ended (SIGKILL) when this is dropped.
pub(crate) struct ProcessGroup(pub(crate) u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let Some(pid) = i32::try_from(self.0).ok().and_then(rustix::process::Pid::from_raw) else { return };
        // Gone already is fine: the group ended by itself.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
