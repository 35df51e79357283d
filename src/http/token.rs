//! The tokens of the HTTP API and `/mcp`: the operator's (from `ASKGATE_API_TOKEN`, or
//! generated on first start and kept beside the database with owner-only permissions), the
//! agents' default one (`ASKGATE_AGENT_TOKEN` or `askgate-agent.token`, the same way), and
//! named agents' tokens from `[[agents]]`. A token is never written to a log.
//!
//! What each may do: the operator token administers and answers where the operator is an
//! answerer; an agent token asks (questions, runs, `/mcp`) and reads what it asked, and never
//! answers.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The fewest characters a token may have: a short one can be guessed.
pub const MIN_TOKEN_LEN: usize = 32;

/// What a token lets its holder do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The operator (`api:operator`, the console's operator too): administers, and answers
    /// the questions whose answerers include the operator.
    Operator,
    /// An agent (`agent:<name>`): asks and reads what it asked; never answers.
    Agent,
    /// A person with a credential of their own (a personal token, or the browser session a
    /// `/web` link became): what it may do is the credential's.
    Person,
}

/// One credential for the HTTP API.
pub struct ApiToken {
    /// The SHA-256 of the secret: all a request's token is compared with (the secret itself
    /// is not kept).
    digest: [u8; 32],
    name: String,
    role: Role,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The tokens askgate accepts: the operator's first, then the agents'.
#[derive(Debug)]
pub struct Tokens(Vec<ApiToken>);

impl Tokens {
    /// The operator's token and the agents'.
    pub fn new(operator: ApiToken, agents: Vec<ApiToken>) -> Self {
        let mut all = vec![operator];
        all.extend(agents);
        Self(all)
    }

    /// The holder of a token whose secret another token has too, if any.
    pub fn reused(&self) -> Option<String> {
        self.0.iter().enumerate().find_map(|(i, token)| {
            self.0[..i].iter().any(|earlier| earlier.digest == token.digest).then(|| token.holder())
        })
    }

    /// Whether a configured agent token asks as `agent:<name>`.
    pub fn has_agent(&self, name: &str) -> bool {
        self.0.iter().any(|token| token.role == Role::Agent && token.name == name)
    }

    /// The token `given` is, if any. It is digested once, and every token is compared with it,
    /// each in constant time.
    pub fn find(&self, given: &str) -> Option<&ApiToken> {
        let given = digest(given);
        self.0
            .iter()
            .fold(None, |found, token| if token.matches_digest(&given) { found.or(Some(token)) } else { found })
    }
}

impl From<ApiToken> for Tokens {
    fn from(operator: ApiToken) -> Self {
        Self(vec![operator])
    }
}

/// Where a kind of token is read or kept.
struct Kind {
    variable: &'static str,
    file: &'static str,
    name: &'static str,
    role: Role,
}

const OPERATOR: Kind =
    Kind { variable: "ASKGATE_API_TOKEN", file: "askgate.token", name: "operator", role: Role::Operator };
const AGENT: Kind =
    Kind { variable: "ASKGATE_AGENT_TOKEN", file: "askgate-agent.token", name: "agent", role: Role::Agent };

/// Where the token came from, for the start-up log.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// Its environment variable (`ASKGATE_API_TOKEN`, `ASKGATE_AGENT_TOKEN`).
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
    /// The variable holds too short a token.
    #[error(
        "{variable} has {len} characters; use at least {MIN_TOKEN_LEN} (for example the output of `openssl rand -hex 32`)"
    )]
    ShortVariable {
        /// The variable.
        variable: String,
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
    /// The database keeps no token file (PostgreSQL, in memory): the variable names the token.
    #[error("this database keeps no token file; set {0} (the same value for askgate and its agents)")]
    NotKept(&'static str),
    /// Two configured tokens are the same secret: askgate could not tell their holders apart.
    #[error("the token of {0} is also another token; give each agent a token of its own")]
    Reused(String),
}

impl ApiToken {
    /// The operator's token with this secret, answering as `api:<name>`.
    pub fn new(secret: impl Into<String>, name: impl Into<String>) -> Self {
        Self { digest: digest(&secret.into()), name: name.into(), role: Role::Operator }
    }

    /// An agent's token with this secret: it asks as `agent:<name>`.
    pub fn agent(secret: impl Into<String>, name: impl Into<String>) -> Self {
        Self { digest: digest(&secret.into()), name: name.into(), role: Role::Agent }
    }

    /// A named agent's token from its variable's value.
    ///
    /// # Errors
    /// [`TokenError::ShortVariable`] when it is shorter than [`MIN_TOKEN_LEN`].
    pub fn named_agent(name: &str, variable: &str, secret: &str) -> Result<Self, TokenError> {
        let secret = secret.trim();
        if secret.chars().count() < MIN_TOKEN_LEN {
            return Err(TokenError::ShortVariable { variable: variable.to_owned(), len: secret.chars().count() });
        }
        Ok(Self::agent(secret, name))
    }

    /// The name it answers or asks as.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it may do.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Who holds it: `api:operator`, or `agent:<name>`.
    pub fn holder(&self) -> String {
        match self.role {
            Role::Operator => format!("api:{}", self.name),
            Role::Agent => format!("agent:{}", self.name),
            // A configured token is never a person's; theirs are in the store (as `web:<name>`).
            Role::Person => format!("web:{}", self.name),
        }
    }

    /// Whether `given` is the token. The comparison takes the same time whatever the two hold,
    /// also when their lengths differ: it compares digests of equal length.
    pub fn matches(&self, given: &str) -> bool {
        self.matches_digest(&digest(given))
    }

    fn matches_digest(&self, given: &[u8; 32]) -> bool {
        bool::from(self.digest.ct_eq(given))
    }

    /// The operator's token from `env` (`ASKGATE_API_TOKEN`) if set, else the one kept beside
    /// `database` (`askgate.token`, created on first start with mode 0600).
    ///
    /// # Errors
    /// A token shorter than [`MIN_TOKEN_LEN`], a token file others may read, or one that cannot
    /// be read or written.
    pub fn load_or_create(env: Option<String>, database: &str) -> Result<(Self, TokenSource), TokenError> {
        load_or_create(&OPERATOR, env, database)
    }

    /// The agents' default token from `env` (`ASKGATE_AGENT_TOKEN`) if set, else the one kept
    /// beside `database` (`askgate-agent.token`, created like the operator's): `askgate mcp`
    /// uses it. It asks as `agent:agent`.
    ///
    /// # Errors
    /// As [`ApiToken::load_or_create`].
    pub fn load_or_create_agent(env: Option<String>, database: &str) -> Result<(Self, TokenSource), TokenError> {
        load_or_create(&AGENT, env, database)
    }
}

fn load_or_create(kind: &Kind, env: Option<String>, database: &str) -> Result<(ApiToken, TokenSource), TokenError> {
    let (secret, source) = secret_or_create(kind, env, database)?;
    Ok((ApiToken { digest: digest(&secret), name: kind.name.to_owned(), role: kind.role }, source))
}

/// The agents' default token itself, as askgate reads or creates it ([`ApiToken::load_or_create_agent`]):
/// what `askgate token agent` prints for an agent's configuration.
///
/// # Errors
/// As [`ApiToken::load_or_create`]; and [`TokenError::NotKept`] for a database that keeps no
/// token file (PostgreSQL, in memory), where only `ASKGATE_AGENT_TOKEN` names the token.
pub fn agent_secret(env: Option<String>, database: &str) -> Result<(String, TokenSource), TokenError> {
    match secret_or_create(&AGENT, env, database)? {
        (_, TokenSource::Ephemeral) => Err(TokenError::NotKept(AGENT.variable)),
        kept => Ok(kept),
    }
}

fn secret_or_create(kind: &Kind, env: Option<String>, database: &str) -> Result<(String, TokenSource), TokenError> {
    if let Some(secret) = env.filter(|s| !s.trim().is_empty()) {
        let secret = secret.trim();
        if secret.chars().count() < MIN_TOKEN_LEN {
            return Err(TokenError::ShortVariable { variable: kind.variable.to_owned(), len: secret.chars().count() });
        }
        return Ok((secret.to_owned(), TokenSource::Environment));
    }
    let Some(path) = token_path(database, kind.file) else {
        return Ok((generate(), TokenSource::Ephemeral));
    };
    let shown = path.display().to_string();
    let io = |source| TokenError::Io { path: shown.clone(), source };
    // Twice at most: a file another askgate process created between the read and the create is
    // read, not overwritten (`askgate token agent` while askgate starts).
    for _ in 0..2 {
        let empty = match std::fs::read_to_string(&path) {
            Ok(secret) if !secret.trim().is_empty() => {
                let mode = std::fs::metadata(&path).map_err(io)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(TokenError::Readable { path: shown, mode });
                }
                let secret = secret.trim();
                if secret.chars().count() < MIN_TOKEN_LEN {
                    return Err(TokenError::ShortFile { path: shown, len: secret.chars().count() });
                }
                return Ok((secret.to_owned(), TokenSource::File(path)));
            }
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io(e)),
        };
        let secret = generate();
        let mut options = std::fs::OpenOptions::new();
        options.write(true).mode(0o600);
        if empty {
            options.truncate(true);
        } else {
            options.create_new(true);
        }
        let mut file = match options.open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(e)),
        };
        // An empty file that existed keeps its mode through `open`: make it owner-only.
        file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        file.write_all(format!("{secret}\n").as_bytes()).map_err(io)?;
        return Ok((secret, TokenSource::Created(path)));
    }
    Err(io(std::io::Error::other("it changed while askgate read it; try again")))
}

/// The token a client of a running askgate uses (`askgate mcp`, which asks as an agent):
/// `env` (`ASKGATE_AGENT_TOKEN`) if set, else the agents' token file beside `database`.
/// Nothing is created.
///
/// # Errors
/// A message that says where the token was looked for.
pub fn client_token(env: Option<String>, database: &str) -> Result<String, String> {
    read_client_token(&AGENT, env, database)
}

/// The operator's token for a client of a running askgate (`askgate token`, `askgate tui`):
/// `env` (`ASKGATE_API_TOKEN`) if set, else `askgate.token` beside `database`. Nothing is
/// created.
///
/// # Errors
/// A message that says where the token was looked for.
pub fn operator_client_token(env: Option<String>, database: &str) -> Result<String, String> {
    read_client_token(&OPERATOR, env, database)
}

fn read_client_token(kind: &Kind, env: Option<String>, database: &str) -> Result<String, String> {
    if let Some(secret) = env.filter(|s| !s.trim().is_empty()) {
        return Ok(secret.trim().to_owned());
    }
    let variable = kind.variable;
    let Some(path) = token_path(database, kind.file) else {
        return Err(format!("set {variable}: this database keeps no token file"));
    };
    match std::fs::read_to_string(&path) {
        Ok(secret) if !secret.trim().is_empty() => Ok(secret.trim().to_owned()),
        Ok(_) => Err(format!("{} is empty; set {variable}", path.display())),
        Err(e) => Err(format!(
            "cannot read the token from {} ({e}); set {variable}, or start askgate once to create it",
            path.display()
        )),
    }
}

/// `file` in the database's directory; none for an in-memory database or another kind of
/// database (PostgreSQL keeps no files here).
fn token_path(database: &str, file: &str) -> Option<PathBuf> {
    let elsewhere = database.starts_with("postgres:") || database.starts_with("postgresql:");
    if elsewhere || crate::store::is_memory_url(database) {
        return None;
    }
    let path = database.strip_prefix("sqlite://").or_else(|| database.strip_prefix("sqlite:")).unwrap_or(database);
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") {
        return None;
    }
    let dir = Path::new(path).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Some(dir.join(file))
}

/// The SHA-256 of a secret: compared in place of it, digests of equal length whatever the
/// secrets' lengths.
fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// 64 hex characters from the system's random source (the same secrets people's tokens get).
fn generate() -> String {
    crate::engine::people::new_secret()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_sits_beside_the_database() {
        assert_eq!(token_path("sqlite://askgate.db", "askgate.token"), Some(PathBuf::from("./askgate.token")));
        assert_eq!(
            token_path("sqlite:///var/lib/askgate/a.db?mode=rwc", "askgate-agent.token"),
            Some(PathBuf::from("/var/lib/askgate/askgate-agent.token"))
        );
        assert_eq!(token_path("sqlite::memory:", "askgate.token"), None);
        assert_eq!(token_path("memory:", "askgate.token"), None);
    }

    #[test]
    fn a_created_token_is_kept_owner_only_and_reused() {
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("askgate.db");
        let (first, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        let TokenSource::Created(path) = source else { panic!("{source:?}") };
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (second, source) = ApiToken::load_or_create(None, db.to_str().unwrap()).unwrap();
        assert_eq!(source, TokenSource::File(path.clone()));
        let secret = std::fs::read_to_string(&path).unwrap();
        assert!(first.matches(secret.trim()) && second.matches(secret.trim()));
        assert!(!second.matches("nope"));
        assert!(!second.matches(""));
    }

    #[test]
    fn each_token_is_found_as_its_holder_and_a_secret_given_twice_is_refused() {
        let (operator, agent) = ("o".repeat(40), "a".repeat(40));
        let tokens =
            Tokens::new(ApiToken::new(operator.clone(), "operator"), vec![ApiToken::agent(agent.clone(), "ci")]);
        assert_eq!(
            tokens.find(&operator).map(|t| (t.holder(), t.role())),
            Some(("api:operator".into(), Role::Operator))
        );
        assert_eq!(tokens.find(&agent).map(|t| (t.holder(), t.role())), Some(("agent:ci".into(), Role::Agent)));
        assert!(tokens.find("nope").is_none());
        assert_eq!(tokens.reused(), None);
        let twice = Tokens::new(ApiToken::new(operator.clone(), "operator"), vec![ApiToken::agent(operator, "ci")]);
        assert_eq!(twice.reused().as_deref(), Some("agent:ci"));
        assert!(ApiToken::named_agent("ci", "CI_TOKEN", "short").unwrap_err().to_string().contains("CI_TOKEN has 5"));
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
