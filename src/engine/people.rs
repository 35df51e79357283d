//! People's own sign-in: the one-time links `/web` sends from a chat, the browser sessions
//! they become, and the person a credential names. The credentials themselves are
//! [`Login`]s in the store; personal tokens are added by `askgate token add`, and agents'
//! tokens that can be revoked without a restart by `askgate token add <name> --agent`.

use std::sync::Arc;
use std::time::Duration;

use super::Policies;
use super::revocations::Revocations;
use super::router::{Inbound, Response};
use crate::clock::Clock;
use crate::question::{Surface, UserRef};
use crate::store::{Login, Powers, Store, StoreError, StoreExt};

/// How long a `/web` link may wait to be opened.
pub const LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a browser stays signed in through a link.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 86_400);

/// 64 hex characters from the system's random source: a secret nobody guesses.
pub fn new_secret() -> String {
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    hex::encode([a.as_bytes().as_slice(), b.as_bytes().as_slice()].concat())
}

/// A secret's SHA-256 in hex: what the store keeps and is asked for.
pub fn digest(secret: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(secret.trim().as_bytes()))
}

/// Milliseconds in `d`, for times kept in unix milliseconds.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The people service: their credentials (personal tokens, agents' tokens, browser sessions,
/// the one-time `/web` links) and what requests hold open with them, ended when one is revoked
/// ([`super::revocations`]). Holds the store, the clock, the page's address (for links), the
/// revocations part and the access service (links go to whom a channel lets in).
#[derive(Clone)]
pub struct People(Arc<PeopleParts>);

/// The parts of [`People`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct PeopleParts {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    /// Where people's browsers reach the web page; none: no page, no links.
    page_url: Option<Arc<str>>,
    pub(super) revocations: Revocations,
    policies: Policies,
    /// Credentials found lately, so that a request presenting one does not read the store.
    found: Found,
}

/// The most credentials [`Found`] keeps; when full it starts over. Each is one token or
/// session in use: agents' and people's requests find theirs without a read of the store.
const FOUND_KEPT: usize = 1024;

/// Credentials found lately, by the digest of their secret, each with how many revocations
/// had been heard before it was read: one is used only while no revocation (here or on
/// another instance) was heard since, and until it expires. A token added is not in it until
/// found; one revoked is not used again once its revocation is heard.
#[derive(Default)]
struct Found(std::sync::Mutex<std::collections::HashMap<String, (Login, u64)>>);

impl Found {
    fn get(&self, digest: &str, heard: u64, now: i64) -> Option<Login> {
        let found = super::lock(&self.0);
        let (login, when) = found.get(digest)?;
        (*when == heard && login.expires_at.is_none_or(|at| at > now)).then(|| login.clone())
    }

    fn keep(&self, digest: String, login: Login, heard: u64) {
        let mut found = super::lock(&self.0);
        if found.len() >= FOUND_KEPT {
            found.clear();
        }
        found.insert(digest, (login, heard));
    }
}

super::parts!(People, PeopleParts);

impl People {
    pub(super) fn new(store: Arc<dyn Store>, clock: Clock, page_url: Option<&str>, policies: Policies) -> Self {
        Self(Arc::new(PeopleParts {
            store,
            clock,
            page_url: page_url.map(Arc::from),
            revocations: Revocations::default(),
            policies,
            found: Found::default(),
        }))
    }

    /// The live credential (a personal token or a browser session) whose secret is `secret`.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn login(&self, secret: &str) -> Result<Option<Login>, StoreError> {
        let (digest, now) = (digest(secret), self.clock.now_ms());
        // Counted before the read: a revocation heard while it reads makes what it found stale.
        let heard = self.revocations_heard();
        if let Some(login) = self.found.get(&digest, heard, now) {
            return Ok(Some(login));
        }
        let login = self.store.login(&digest, now).await?;
        if let Some(login) = &login {
            self.found.keep(digest, login.clone(), heard);
        }
        Ok(login)
    }

    /// Whether the credential whose secret has `digest` still works (not revoked, not expired).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn login_is_live(&self, digest: &str) -> Result<bool, StoreError> {
        Ok(self.store.login(digest, self.clock.now_ms()).await?.is_some())
    }

    /// Whom the unused `/web` link with `secret` would sign in, without using it: what a page
    /// shows before it asks the person to sign in. None when the link is unknown, used or
    /// expired.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn sign_in_link(&self, secret: &str) -> Result<Option<Login>, StoreError> {
        let find = crate::store::LoginFind::Link { digest: &digest(secret), now: self.clock.now_ms() };
        Ok(self.store.logins(find).await?.pop())
    }

    /// Signs a browser in with the secret of a `/web` link: the link becomes a session, once.
    /// Returns the session's secret and what it is; none when the link is unknown, used or
    /// expired.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn use_sign_in_link(&self, secret: &str) -> Result<Option<(String, Login)>, StoreError> {
        let now = self.clock.now_ms();
        let session = new_secret();
        let name = format!("session:{}", &digest(&session)[..12]);
        let until = now.saturating_add(ms(SESSION_TTL));
        let login = self.store.use_link(&digest(secret), now, &name, &digest(&session), until).await?;
        Ok(login.map(|login| (session, login)))
    }

    /// `/web`: a link that signs a browser in as the sender, sent only where the sender alone
    /// reads it (anyone else in a group could open it first).
    pub(super) async fn web_command(&self, inbound: &Inbound) -> Result<Response, StoreError> {
        let Some(page) = self.page_url.as_deref() else {
            return Ok(Response::say("askgate's web page is not served here."));
        };
        if inbound.user.is_operator() || matches!(inbound.surface, Surface::WEB | Surface::TUI | Surface::API) {
            return Ok(Response::say(
                "/web signs a chat's person in on the web page; here you are signed in already (the operator's token, \
                 or your own).",
            ));
        }
        if !inbound.private {
            return Ok(Response::say(
                "Send /web to me in a private chat: a sign-in link here could be opened by anyone who reads it.",
            ));
        }
        // Links go to the people a channel knows (closed by default, as starting runs is).
        if !self.policies.lets_in(&inbound.conversation, &inbound.user) {
            return Ok(Response::say(format!(
                "You may not sign in from here. An operator can allow you with allowed_users = [\"{}\"] in [{}]",
                inbound.user,
                super::access::section_of(&inbound.conversation)
            )));
        }
        let secret = new_secret();
        let now = self.clock.now_ms();
        // One unused link per person: a new one replaces the one before, so a person holds at
        // most one, however often they ask.
        let name = format!("link:{}", inbound.user);
        self.store.remove_login(&name).await?;
        let login = Login {
            name,
            person: inbound.user.clone(),
            digest: digest(&secret),
            may: Powers::ANSWER,
            created_at: now,
            expires_at: Some(now.saturating_add(ms(LINK_TTL))),
            link: true,
        };
        if !self.store.add_login(&login).await? {
            return Ok(Response::say("No link could be made just now; send /web again."));
        }
        tracing::info!(person = %inbound.user, "a sign-in link was sent");
        Ok(Response::say(format!(
            "Open this within {} minutes to answer on askgate's web page as {} (it works once):\n{}#signin={secret}",
            LINK_TTL.as_secs() / 60,
            inbound.user,
            page.trim_end_matches('/').to_owned() + "/"
        )))
    }
}

/// The longest name a personal token may have.
const MAX_NAME: usize = 64;

/// Whether `name` may name a personal token: lower-case letters, digits, `.`, `_` and `-`, as
/// its person is `web:<name>`.
///
/// # Errors
/// What a name must be.
pub fn valid_token_name(name: &str) -> Result<(), String> {
    let fits = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(fits) {
        return Err(format!(
            "`{}` is not a token name: use 1 to {MAX_NAME} lower-case letters, digits, `.`, `_` or `-` (the person is \
             web:<name>)",
            crate::text::clip(name, 80, "…")
        ));
    }
    Ok(())
}

/// The agent a credential's person is (`agent:ci` → `ci`): an agent's token made at run time.
pub fn agent_name(person: &UserRef) -> Option<&str> {
    person.as_str().strip_prefix("agent:")
}

/// The name an agent's token made at run time is kept (and revoked) under: `agent:<name>`.
pub fn agent_token_name(agent: &str) -> String {
    format!("agent:{agent}")
}

impl People {
    /// A new token for the agent `agent:<name>`, kept as `agent:<name>`: it asks and reads what
    /// it asked (the API, `/mcp`), never answers, and works until revoked. Its secret (shown
    /// once) and what is kept; none when the name is taken. The name must pass
    /// [`valid_token_name`].
    ///
    /// # Errors
    /// When the store fails.
    pub async fn add_agent_token(&self, name: &str) -> Result<Option<(String, Login)>, StoreError> {
        let person = UserRef::parse(&format!("agent:{name}")).map_err(|e| StoreError::Constraint(e.to_string()))?;
        let secret = new_secret();
        let login = Login {
            name: agent_token_name(name),
            person,
            digest: digest(&secret),
            may: Powers { ask: true, ..Powers::default() },
            created_at: self.clock.now_ms(),
            expires_at: None,
            link: false,
        };
        Ok(self.store.add_login(&login).await?.then_some((secret, login)))
    }

    /// A new personal token for `web:<name>`: its secret (shown once) and what is kept; none
    /// when the name is taken. The name must pass [`valid_token_name`].
    ///
    /// # Errors
    /// When the store fails.
    pub async fn add_token(&self, name: &str, may: Powers) -> Result<Option<(String, Login)>, StoreError> {
        let person = UserRef::parse(&format!("web:{name}")).map_err(|e| StoreError::Constraint(e.to_string()))?;
        let secret = new_secret();
        let login = Login {
            name: name.to_owned(),
            person,
            digest: digest(&secret),
            may,
            created_at: self.clock.now_ms(),
            expires_at: None,
            link: false,
        };
        Ok(self.store.add_login(&login).await?.then_some((secret, login)))
    }

    /// Every live personal token, browser session and unused link, by name.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn logins(&self) -> Result<Vec<Login>, StoreError> {
        self.store.logins(crate::store::LoginFind::All { now: self.clock.now_ms() }).await
    }

    /// Revokes the token or session `name`, and ends what it holds open (event streams,
    /// long-polls, MCP streams; on other instances as they hear it); false when there is none.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn revoke_login(&self, name: &str) -> Result<bool, StoreError> {
        let removed = self.store.remove_login(name).await?;
        if removed {
            self.revoked(name);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(expires_at: Option<i64>) -> Login {
        Login {
            name: "alice".to_owned(),
            person: UserRef::parse("web:alice").unwrap(),
            digest: "d".to_owned(),
            may: Powers::default(),
            created_at: 0,
            expires_at,
            link: false,
        }
    }

    #[test]
    fn a_credential_found_is_used_until_a_revocation_is_heard_or_it_expires() {
        let found = Found::default();
        found.keep("d".to_owned(), login(Some(100)), 3);
        assert!(found.get("d", 3, 99).is_some(), "kept and live");
        assert!(found.get("d", 4, 99).is_none(), "a revocation heard since it was read");
        assert!(found.get("d", 3, 100).is_none(), "expired");
        assert!(found.get("e", 3, 99).is_none(), "another secret");
        for i in 0..FOUND_KEPT {
            found.keep(format!("k{i}"), login(None), 3);
        }
        assert!(crate::engine::lock(&found.0).len() <= FOUND_KEPT, "bounded");
    }
}
