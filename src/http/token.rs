//! The API token: from `ASKGATE_API_TOKEN`, or generated on first start and kept beside the
//! database with owner-only permissions.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The operator credential for the HTTP API.
pub struct ApiToken {
    secret: String,
    name: String,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken").field("name", &self.name).field("secret", &"<redacted>").finish()
    }
}

/// Where the token came from, for the start-up log.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `ASKGATE_API_TOKEN`.
    Environment,
    /// A file written on an earlier start.
    File(PathBuf),
    /// A file written now.
    Created(PathBuf),
    /// Generated for this run only (an in-memory database has no directory to keep it in).
    Ephemeral,
}

impl ApiToken {
    /// A token with this secret, answering as `api:<name>`.
    pub fn new(secret: impl Into<String>, name: impl Into<String>) -> Self {
        Self { secret: secret.into(), name: name.into() }
    }

    /// The name it answers as.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The secret, for printing once where the operator asked for it.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Compares in constant time.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.secret.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// The token from `env` if set, else the one kept beside `database` (created on first
    /// start with mode 0600).
    ///
    /// # Errors
    /// When the token file cannot be read or written.
    pub fn load_or_create(env: Option<String>, database: &str) -> std::io::Result<(Self, TokenSource)> {
        if let Some(secret) = env.filter(|s| !s.trim().is_empty()) {
            return Ok((Self::new(secret.trim(), "operator"), TokenSource::Environment));
        }
        let Some(path) = token_path(database) else {
            return Ok((Self::new(generate(), "operator"), TokenSource::Ephemeral));
        };
        match std::fs::read_to_string(&path) {
            Ok(secret) if !secret.trim().is_empty() => {
                return Ok((Self::new(secret.trim(), "operator"), TokenSource::File(path)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let secret = generate();
        let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
        file.write_all(format!("{secret}\n").as_bytes())?;
        Ok((Self::new(secret, "operator"), TokenSource::Created(path)))
    }
}

/// `askgate.token` in the database's directory; none for an in-memory database.
fn token_path(database: &str) -> Option<PathBuf> {
    let path = database.strip_prefix("sqlite://").or_else(|| database.strip_prefix("sqlite:")).unwrap_or(database);
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") {
        return None;
    }
    let dir = Path::new(path).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Some(dir.join("askgate.token"))
}

/// 64 hex characters from the system's random source.
fn generate() -> String {
    let bytes: Vec<u8> =
        uuid::Uuid::new_v4().as_bytes().iter().chain(uuid::Uuid::new_v4().as_bytes()).copied().collect();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_sits_beside_the_database() {
        assert_eq!(token_path("sqlite://askgate.db"), Some(PathBuf::from("./askgate.token")));
        assert_eq!(
            token_path("sqlite:///var/lib/askgate/a.db?mode=rwc"),
            Some(PathBuf::from("/var/lib/askgate/askgate.token"))
        );
        assert_eq!(token_path("sqlite::memory:"), None);
    }

    #[test]
    fn a_created_token_is_kept_owner_only_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("askgate.db");
        let (first, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        let TokenSource::Created(path) = source else { panic!("{source:?}") };
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (second, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        assert_eq!(source, TokenSource::File(path));
        assert!(second.matches(first.secret()));
        assert!(!second.matches("nope"));
    }
}
