//! The API token: from `ASKGATE_API_TOKEN`, or generated on first start and kept beside the
//! database with owner-only permissions. A token is never written to a log.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The fewest characters a token may have: a short one can be guessed.
pub const MIN_TOKEN_LEN: usize = 32;

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
    /// Generated for this run only and kept nowhere (an in-memory database has no directory to
    /// keep it in): the API cannot be used until `ASKGATE_API_TOKEN` is set.
    Ephemeral,
}

/// A token that may not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// `ASKGATE_API_TOKEN` is too short.
    #[error(
        "ASKGATE_API_TOKEN has {len} characters; use at least {MIN_TOKEN_LEN} (for example the output of `openssl rand -hex 32`)"
    )]
    ShortVariable {
        /// How many it has.
        len: usize,
    },
    /// The token file is too short.
    #[error(
        "{path} holds a token of {len} characters; use at least {MIN_TOKEN_LEN}, or delete the file and askgate creates a new one"
    )]
    ShortFile {
        /// The file.
        path: String,
        /// How many characters it holds.
        len: usize,
    },
    /// Others than the owner may read the token file.
    #[error("{path} can be read by others (mode {mode:o}); make it owner-only with `chmod 600 {path}`")]
    Readable {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The token file cannot be read or written.
    #[error("cannot read or write the API token file {path}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
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

    /// Whether `given` is the token. The comparison takes the same time whatever the two hold,
    /// also when their lengths differ: it compares digests of equal length.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (Sha256::digest(self.secret.as_bytes()), Sha256::digest(given.as_bytes()));
        let (a, b): (&[u8], &[u8]) = (&a, &b);
        bool::from(a.ct_eq(b))
    }

    /// The token from `env` if set, else the one kept beside `database` (created on first
    /// start with mode 0600).
    ///
    /// # Errors
    /// A token shorter than [`MIN_TOKEN_LEN`], a token file others may read, or one that cannot
    /// be read or written.
    pub fn load_or_create(env: Option<String>, database: &str) -> Result<(Self, TokenSource), TokenError> {
        if let Some(secret) = env.filter(|s| !s.trim().is_empty()) {
            let secret = secret.trim();
            if secret.chars().count() < MIN_TOKEN_LEN {
                return Err(TokenError::ShortVariable { len: secret.chars().count() });
            }
            return Ok((Self::new(secret, "operator"), TokenSource::Environment));
        }
        let Some(path) = token_path(database) else {
            return Ok((Self::new(generate(), "operator"), TokenSource::Ephemeral));
        };
        let shown = path.display().to_string();
        let io = |source| TokenError::Io { path: shown.clone(), source };
        match std::fs::read_to_string(&path) {
            Ok(secret) if !secret.trim().is_empty() => {
                let mode = std::fs::metadata(&path).map_err(io)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(TokenError::Readable { path: shown, mode });
                }
                let secret = secret.trim();
                if secret.chars().count() < MIN_TOKEN_LEN {
                    return Err(TokenError::ShortFile { path: shown, len: secret.chars().count() });
                }
                return Ok((Self::new(secret, "operator"), TokenSource::File(path)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let secret = generate();
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path).map_err(io)?;
        // An empty file that existed keeps its mode through `open`: make it owner-only.
        file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        file.write_all(format!("{secret}\n").as_bytes()).map_err(io)?;
        Ok((Self::new(secret, "operator"), TokenSource::Created(path)))
    }
}

/// The token a client of a running askgate uses (`askgate mcp`): `env` if set, else the file
/// beside `database`. Nothing is created.
///
/// # Errors
/// A message that says where the token was looked for.
pub fn client_token(env: Option<String>, database: &str) -> Result<String, String> {
    if let Some(secret) = env.filter(|s| !s.trim().is_empty()) {
        return Ok(secret.trim().to_owned());
    }
    let Some(path) = token_path(database) else {
        return Err("set ASKGATE_API_TOKEN: this database keeps no token file".to_owned());
    };
    match std::fs::read_to_string(&path) {
        Ok(secret) if !secret.trim().is_empty() => Ok(secret.trim().to_owned()),
        Ok(_) => Err(format!("{} is empty; set ASKGATE_API_TOKEN", path.display())),
        Err(e) => Err(format!("cannot read the API token from {} ({e}); set ASKGATE_API_TOKEN", path.display())),
    }
}

/// `askgate.token` in the database's directory; none for an in-memory database or another
/// kind of database (PostgreSQL keeps no files here).
fn token_path(database: &str) -> Option<PathBuf> {
    if database.starts_with("postgres:") || database.starts_with("postgresql:") {
        return None;
    }
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
    hex::encode(bytes)
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
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("askgate.db");
        let (first, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        let TokenSource::Created(path) = source else { panic!("{source:?}") };
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (second, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        assert_eq!(source, TokenSource::File(path));
        assert!(second.matches(&first.secret));
        assert!(!second.matches("nope"));
        assert!(!second.matches(""));
    }

    #[test]
    fn a_token_file_others_can_read_or_a_short_token_is_refused_with_the_fix() {
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("askgate.db");
        let file = dir.path().join("askgate.token");
        std::fs::write(&file, "a".repeat(64)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("can be read by others") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&file, "short").unwrap();
        let e = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("5 characters") && e.contains("at least 32"), "{e}");
        let e = ApiToken::load_or_create(Some("tiny".into()), db.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("ASKGATE_API_TOKEN has 4 characters"), "{e}");
    }
}
