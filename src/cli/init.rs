//! `askgate init [FOLDER]`: a setup of one's own, from the files bundled into the binary: the
//! repository's commented `channels.toml`, the demo programs it names, and the Python helper
//! they import. Nothing is overwritten: when any of them is there already, nothing is written.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// One bundled file: where it goes under the folder, its text, and whether it is a program.
struct Bundled {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

/// Bundles the repository's file at `path` (from the crate's root) under the same path.
macro_rules! bundled {
    ($path:literal, $executable:literal) => {
        Bundled { path: $path, text: include_str!(concat!("../../", $path)), executable: $executable }
    };
}

/// What `askgate init` writes: `channels.toml`, each file its functions name (a test holds
/// this list to them and every copy to the repository's), and the helper the Python ones import
/// from `../clients/python`.
const FILES: &[Bundled] = &[
    bundled!("channels.toml", false),
    bundled!("examples/deploy.py", true),
    bundled!("examples/archive.py", true),
    bundled!("examples/confirm.sh", true),
    bundled!("clients/python/askgate/__init__.py", false),
    bundled!("clients/python/askgate/client.py", false),
    bundled!("clients/python/askgate/runtime.py", false),
];

/// `askgate init`: writes the bundled files into `folder` (made when missing) and says what
/// it wrote and what to run next.
///
/// # Errors
/// The files already there (nothing is written then), or what the system said when a folder
/// or a file could not be made.
pub fn init(folder: &Path) -> Result<String, String> {
    let targets: Vec<(PathBuf, &Bundled)> = FILES.iter().map(|f| (folder.join(f.path), f)).collect();
    // All checked before any is written: a refusal leaves the folder as it was. A dangling
    // link counts as there (writing through it would make a file elsewhere).
    let there: Vec<String> = targets
        .iter()
        .filter(|(path, _)| path.symlink_metadata().is_ok())
        .map(|(path, _)| path.display().to_string())
        .collect();
    if !there.is_empty() {
        return Err(format!(
            "{} already there; nothing was written (move {} away, or give another folder)",
            there.join(", "),
            if there.len() == 1 { "it" } else { "them" }
        ));
    }
    let shown = std::path::absolute(folder).unwrap_or_else(|_| folder.to_path_buf());
    let mut report = format!("wrote into {}:\n", shown.display());
    for (path, file) in &targets {
        write(path, file).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        report.push_str(&format!("  {}{}\n", file.path, if file.executable { " (executable)" } else { "" }));
    }
    let config = folder.join("channels.toml");
    report.push_str(&format!(
        "next:\n  askgate check --config {0}\n  askgate serve --config {0}\n\
         (the database, askgate.db, and the API token, askgate.token, are made in the working directory)\n",
        config.display()
    ));
    Ok(report)
}

/// Writes one file, never over one that appeared since the check: programs `rwxr-xr-x`, the
/// rest `rw-r--r--` (less what the umask takes).
fn write(path: &Path, file: &Bundled) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mode = if file.executable { 0o755 } else { 0o644 };
    let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    out.write_all(file.text.as_bytes())
}
