//! The database file: its URL, the advisory lock that keeps a second askgate out, and
//! owner-only permissions from the start.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{FileExt as _, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;

use super::SqliteStore;
use crate::store::StoreError;

impl SqliteStore {
    /// Who serves the database at `url` now, for `askgate check`: `Some("pid 123")` while an
    /// askgate has it open, `None` when none has (or it does not exist yet).
    ///
    /// # Errors
    /// A malformed URL, or a lock file that cannot be read.
    pub fn holder(url: &str) -> Result<Option<String>, StoreError> {
        let options = parse_url(url)?;
        let Some(database) = database_file(&options) else { return Ok(None) };
        let path = lock_path(database);
        let failed = |source| StoreError::Lock { path: path.display().to_string(), source };
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(failed(e)),
        };
        match file.try_lock_shared() {
            // Free: dropping the file releases the probe's shared lock at once (an askgate
            // starting in that instant would be refused; the probe is a human's check).
            Ok(()) => Ok(None),
            Err(TryLockError::WouldBlock) => Ok(Some(read_holder(&path))),
            Err(TryLockError::Error(e)) => Err(failed(e)),
        }
    }

    /// Whether askgate could make its files in the folder of the database at `url`, for
    /// `askgate check`: a file is created there and removed again. `Ok` for an in-memory
    /// database.
    ///
    /// # Errors
    /// A malformed URL, or [`StoreError::Folder`] (as `serve` reports it at start-up) when the
    /// folder is missing or refuses new files.
    pub fn check_folder(url: &str) -> Result<(), StoreError> {
        let options = parse_url(url)?;
        let Some(database) = database_file(&options) else { return Ok(()) };
        // The lock file is not the probe: removing it could unlink a lock an askgate starting
        // this instant has just taken.
        let probe = tempfile::Builder::new().prefix(".askgate-check-").tempfile_in(folder_of(database));
        probe.map(drop).map_err(|source| folder_error(database, source))
    }
}

/// The folder the database's files are kept in: `.` for a bare file name.
fn folder_of(database: &Path) -> &Path {
    database.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The folder named as such: askgate cannot make its files there.
fn folder_error(database: &Path, source: std::io::Error) -> StoreError {
    StoreError::Folder { folder: folder_of(database).display().to_string(), source }
}

/// The connection options for `url`: `sqlite://askgate.db`, `sqlite::memory:`, or a path.
pub(super) fn parse_url(url: &str) -> Result<SqliteConnectOptions, StoreError> {
    Ok(if url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(url)?
    } else {
        SqliteConnectOptions::new().filename(Path::new(url))
    })
}

/// The database file, or none for an in-memory database (a path `:memory:`, or the URL
/// `sqlite::memory:`, which sqlx names `file:sqlx-in-memory-<n>`).
pub(super) fn database_file(options: &SqliteConnectOptions) -> Option<&Path> {
    Some(options.get_filename())
        .filter(|f| *f != Path::new(":memory:") && !f.to_string_lossy().starts_with("file:sqlx-in-memory-"))
}

/// `<database>-wal`, SQLite's write-ahead log.
pub(super) fn log_path(database: &Path) -> PathBuf {
    let mut path = database.as_os_str().to_owned();
    path.push("-wal");
    PathBuf::from(path)
}

pub(super) fn lock_path(database: &Path) -> PathBuf {
    let mut path = database.as_os_str().to_owned();
    path.push(".lock");
    PathBuf::from(path)
}

/// Who the lock file says holds it: `pid 123`.
pub(super) fn read_holder(path: &Path) -> String {
    let holder = std::fs::read_to_string(path).unwrap_or_default();
    let holder = holder.trim();
    if holder.is_empty() { "pid unknown".to_owned() } else { holder.to_owned() }
}

/// Takes the advisory lock on `<database>.lock` and writes this process's id into it; when
/// another process holds it, says which.
/// How often, and how far apart, a held lock is tried again before it counts as held.
const LOCK_TRIES: u32 = 20;
const LOCK_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

pub(super) fn lock_database(database: &Path) -> Result<File, StoreError> {
    let path = lock_path(database);
    let failed = |source| StoreError::Lock { path: path.display().to_string(), source };
    // The first file askgate makes there: a folder it may not write in is named as such.
    let folder = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::PermissionDenied
        | std::io::ErrorKind::ReadOnlyFilesystem
        | std::io::ErrorKind::NotFound => folder_error(database, source),
        _ => failed(source),
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(folder)?;
    // A lock just released may still be held for a moment by a child that a process forked
    // while it held it (the child's copy of the descriptor lives until it execs): try a few
    // times over half a second before naming the holder.
    let mut tries = 0;
    let locked = loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                tries += 1;
                std::thread::sleep(LOCK_PAUSE);
            }
            other => break other,
        }
    };
    match locked {
        Ok(()) => {
            // Written over the last holder's pid, then cut to length: a file that had one needs
            // no new space, so askgate starts on a full disk. The lock is what counts; a pid
            // that cannot be written only leaves the holder unnamed.
            let pid = format!("pid {}\n", std::process::id());
            let named = file.write_all_at(pid.as_bytes(), 0).and_then(|()| file.set_len(pid.len() as u64));
            if let Err(e) = named {
                tracing::warn!(error = %e, path = %path.display(), "this askgate's pid could not be written beside its lock");
            }
            Ok(file)
        }
        Err(TryLockError::WouldBlock) => {
            Err(StoreError::InUse { database: database.display().to_string(), holder: read_holder(&path) })
        }
        Err(TryLockError::Error(e)) => Err(failed(e)),
    }
}

/// Creates the database file owner-only when it does not exist yet: SQLite gives its `-wal`
/// and `-shm` files the database file's permissions, so they are owner-only too.
pub(super) fn create_owner_only(database: &Path) -> Result<(), StoreError> {
    match OpenOptions::new().write(true).create_new(true).mode(0o600).open(database) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Create { path: database.display().to_string(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_memory_database_has_no_file_whichever_way_it_is_named() {
        for url in ["sqlite::memory:", ":memory:"] {
            let options = parse_url(url).unwrap();
            assert_eq!(database_file(&options), None, "{url}: {:?}", options.get_filename());
        }
        let options = parse_url("sqlite://askgate.db").unwrap();
        assert_eq!(database_file(&options), Some(Path::new("askgate.db")));
    }
}
