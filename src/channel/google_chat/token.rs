//! The service account's access token for the Chat API: an assertion signed with the account's
//! key (RS256, `kid` its key id) exchanged at the key's `token_uri` for a token of the
//! `chat.bot` scope (OAuth 2.0's JWT bearer grant, RFC 7523), kept until shortly before it
//! expires.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::config::ServiceAccount;
use crate::clock::Clock;
use crate::engine::Retry;

/// The scope of a Chat app acting as itself.
pub const SCOPE: &str = "https://www.googleapis.com/auth/chat.bot";
/// The grant of a signed assertion.
pub const GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long an assertion is valid: Google takes at most an hour.
const ASSERTION_SECS: i64 = 3_600;
/// How long before its expiry a token is fetched again.
const EARLY_MS: i64 = 5 * 60 * 1_000;

/// Why there is no token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The key could not sign (not an RSA key in PKCS#8 PEM).
    #[error("the service account's private_key cannot sign: {0}")]
    Key(String),
    /// The token endpoint did not answer, or not with a token.
    #[error("the token endpoint ({uri}) cannot be reached: {error}")]
    Unreachable {
        /// Where.
        uri: String,
        /// What happened.
        error: String,
    },
    /// The token endpoint refused the key (a deleted key, a wrong account).
    #[error("the token endpoint refused the service account key: {0}")]
    Refused(String),
    /// The endpoint asks to slow down.
    #[error("the token endpoint asks to slow down")]
    Limited(Option<Duration>),
}

impl TokenError {
    /// Whether a later try may succeed.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Unreachable { .. } => Retry::Later(None),
            Self::Limited(after) => Retry::Later(*after),
            Self::Key(_) | Self::Refused(_) => Retry::No,
        }
    }
}

/// A token and when it stops being used (ms on askgate's clock).
#[derive(Clone)]
struct Held {
    token: String,
    until: i64,
}

/// The service account's tokens: one at a time, fetched when none is held or it is about to
/// expire.
pub struct Tokens {
    account: ServiceAccount,
    http: reqwest::Client,
    clock: Clock,
    held: Mutex<Option<Held>>,
}

impl Tokens {
    /// The tokens of `account`.
    pub fn new(account: ServiceAccount, http: reqwest::Client, clock: Clock) -> Self {
        Self { account, http, clock, held: Mutex::new(None) }
    }

    /// A token valid for a while yet: the one held, or a new one.
    ///
    /// # Errors
    /// [`TokenError`] when none could be had.
    pub async fn token(&self) -> Result<String, TokenError> {
        let mut held = self.held.lock().await;
        let now = self.clock.now_ms();
        if let Some(h) = held.as_ref().filter(|h| h.until > now) {
            return Ok(h.token.clone());
        }
        let (token, expires_in) = self.fetch(now / 1_000).await?;
        let until = now + expires_in.saturating_mul(1_000) - EARLY_MS;
        *held = Some(Held { token: token.clone(), until });
        Ok(token)
    }

    /// Forgets the token held (the API refused it): the next call fetches one.
    pub async fn forget(&self) {
        *self.held.lock().await = None;
    }

    async fn fetch(&self, now_secs: i64) -> Result<(String, i64), TokenError> {
        let a = &self.account;
        let claims = assertion_claims(a, now_secs);
        let assertion = sign(&a.private_key, a.private_key_id.as_deref(), &claims).map_err(TokenError::Key)?;
        let unreachable = |e: String| TokenError::Unreachable { uri: a.token_uri.clone(), error: e };
        let response = self
            .http
            .post(&a.token_uri)
            .form(&[("grant_type", GRANT), ("assertion", assertion.as_str())])
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let wait = crate::engine::retry::retry_after(response.headers());
        let body: Value = response.json().await.map_err(|e| unreachable(format!("HTTP {status}, {e}")))?;
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(TokenError::Limited(wait));
        }
        if status.is_server_error() {
            return Err(unreachable(format!("HTTP {status}")));
        }
        if !status.is_success() {
            let error = body["error"].as_str().unwrap_or("refused");
            let words = body["error_description"].as_str().unwrap_or_default();
            return Err(TokenError::Refused(format!("{error} {words} (HTTP {})", status.as_u16()).replace("  ", " ")));
        }
        let token = body["access_token"].as_str().filter(|t| !t.is_empty());
        let token = token.ok_or_else(|| unreachable("its answer has no access_token".into()))?;
        Ok((token.to_owned(), body["expires_in"].as_i64().unwrap_or(3_600).max(60)))
    }
}

/// The assertion's claims: the account, for the token endpoint, of the Chat app's scope.
pub fn assertion_claims(account: &ServiceAccount, now_secs: i64) -> Value {
    json!({
        "iss": account.client_email,
        "scope": SCOPE,
        "aud": account.token_uri,
        "iat": now_secs,
        "exp": now_secs + ASSERTION_SECS,
    })
}

/// Signs `claims` with the PEM key `pem` (RS256).
fn sign(pem: &str, kid: Option<&str>, claims: &Value) -> Result<String, String> {
    crate::channel::jwt::sign(pem, kid, claims).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assertion_names_the_account_the_endpoint_and_the_scope() {
        let account = ServiceAccount::parse(
            "G",
            r#"{"client_email": "bot@p.iam.gserviceaccount.com", "private_key": "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----",
                "token_uri": "http://127.0.0.1:9/token"}"#,
        )
        .unwrap();
        let claims = assertion_claims(&account, 1_000);
        assert_eq!(
            claims,
            json!({"iss": "bot@p.iam.gserviceaccount.com", "scope": SCOPE, "aud": "http://127.0.0.1:9/token",
                "iat": 1_000, "exp": 4_600})
        );
        assert_eq!(TokenError::Refused("invalid_grant".into()).retry(), Retry::No);
        assert_eq!(TokenError::Limited(None).retry(), Retry::Later(None));
    }
}
