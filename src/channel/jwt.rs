//! JSON Web Tokens, as platforms that call askgate over HTTP sign their requests (the Bot
//! Framework for Teams, Google Chat) and as Google's service accounts ask for an access token.
//!
//! [`Keys`] verifies RS256 tokens against a platform's published keys: a JWKS document, or the
//! one an OpenID metadata document names. The keys are cached and fetched again when a token
//! names a key askgate has not seen (a platform rolls its keys over without notice), at most
//! once a minute so that forged `kid`s cannot make askgate hammer the platform, and after a day.
//! [`sign`] makes the assertion a service account exchanges for a token.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::clock::Clock;

/// How long fetched keys are trusted before they are fetched again, in milliseconds.
const KEYS_LIVE_MS: i64 = 24 * 60 * 60 * 1000;

/// The least time between two fetches for keys askgate has not seen, in milliseconds.
const REFETCH_GAP_MS: i64 = 60 * 1000;

/// How far a token's `exp` and `nbf` may be off askgate's clock.
const LEEWAY_SECS: u64 = 5 * 60;

/// Where the keys are published.
#[derive(Clone, Debug)]
enum Source {
    /// A JWKS document.
    Jwks(String),
    /// An OpenID metadata document whose `jwks_uri` is the JWKS document.
    OpenId(String),
}

/// A platform's public keys, fetched and cached (see the module's note).
pub struct Keys {
    http: reqwest::Client,
    source: Source,
    clock: Clock,
    cache: Mutex<Cache>,
    /// Held while fetching: requests that find the same unknown key wait for one fetch.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Cache {
    /// By key id: the key, and the JWK it came from.
    keys: HashMap<String, (DecodingKey, Value)>,
    /// When the keys were last fetched, in unix milliseconds.
    fetched: Option<i64>,
    /// When a fetch was last tried, and whether it failed.
    tried: Option<(i64, bool)>,
}

/// What a token must say besides its signature.
#[derive(Clone, Debug)]
pub struct Expect {
    /// Its `iss` is one of these.
    pub issuers: Vec<String>,
    /// Its `aud`.
    pub audience: String,
}

/// A token that passed: its claims, and the JWK it was signed under (the Bot Framework's keys
/// carry the channels they are endorsed for).
#[derive(Clone, Debug)]
pub struct Verified {
    /// The token's claims.
    pub claims: Value,
    /// The JWK's own fields.
    pub key: Value,
}

/// Why a token was refused. Each says which check failed, for the log; the sender gets only
/// 401.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// It is not a JWT, or not one signed with RS256.
    #[error("the token is malformed or not signed with RS256")]
    Malformed,
    /// It names a key the platform does not publish.
    #[error("the token names a key the platform does not publish")]
    UnknownKey,
    /// Its signature does not verify.
    #[error("the token's signature does not verify")]
    Signature,
    /// It has expired or is not valid yet.
    #[error("the token has expired or is not valid yet")]
    Expired,
    /// It was issued by someone else.
    #[error("the token was issued by someone else")]
    Issuer,
    /// It is meant for someone else.
    #[error("the token is meant for someone else")]
    Audience,
    /// The platform's keys could not be fetched.
    #[error("the platform's keys could not be fetched: {0}")]
    Unavailable(String),
}

/// A private key that cannot sign.
#[derive(Debug, thiserror::Error)]
#[error("the private key cannot sign: {0}")]
pub struct SignError(String);

impl Keys {
    /// The keys of the JWKS document at `url`.
    pub fn jwks(http: reqwest::Client, url: String) -> Self {
        Self::new(http, Source::Jwks(url))
    }

    /// The keys of the JWKS document the OpenID metadata at `metadata_url` names.
    pub fn openid(http: reqwest::Client, metadata_url: String) -> Self {
        Self::new(http, Source::OpenId(metadata_url))
    }

    fn new(http: reqwest::Client, source: Source) -> Self {
        let clock = Clock::system();
        Self { http, source, clock, cache: Mutex::default(), fetching: tokio::sync::Mutex::new(()) }
    }

    /// The same keys, timed by `clock` (the system's by default).
    #[must_use]
    pub fn with_clock(self, clock: Clock) -> Self {
        Self { clock, ..self }
    }

    /// Verifies `token`: RS256, signed under the published key its `kid` names, within its
    /// `exp` and `nbf` (five minutes of leeway), issued by one of `expect.issuers` for
    /// `expect.audience`.
    ///
    /// # Errors
    /// [`Refused`], saying which check failed.
    pub async fn verify(&self, token: &str, expect: &Expect) -> Result<Verified, Refused> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refused::Malformed)?;
        let (Algorithm::RS256, Some(kid)) = (header.alg, header.kid) else { return Err(Refused::Malformed) };
        let (key, jwk) = match self.cached(&kid) {
            Some(found) => found,
            None => {
                self.refresh().await?;
                self.cached(&kid).ok_or(Refused::UnknownKey)?
            }
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&expect.issuers);
        validation.set_audience(&[&expect.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature => Refused::Signature,
            ErrorKind::ExpiredSignature | ErrorKind::ImmatureSignature => Refused::Expired,
            ErrorKind::InvalidIssuer => Refused::Issuer,
            ErrorKind::InvalidAudience => Refused::Audience,
            _ => Refused::Malformed,
        })?;
        Ok(Verified { claims: data.claims, key: jwk })
    }

    /// Whether the last fetch of the keys worked (true before the first): what `/healthz` says
    /// of the platform's side of its requests.
    pub fn healthy(&self) -> bool {
        self.lock().tried.is_none_or(|(_, failed)| !failed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding the lock leaves a cache that is still whole: every write to it
        // is one assignment.
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The key `kid` names, while the keys are fresh.
    fn cached(&self, kid: &str) -> Option<(DecodingKey, Value)> {
        let cache = self.lock();
        let fresh = cache.fetched.is_some_and(|at| self.clock.now_ms() - at < KEYS_LIVE_MS);
        cache.keys.get(kid).filter(|_| fresh).cloned()
    }

    /// Fetches the keys again, unless a fetch was tried less than a minute ago (then the keys
    /// stay as they are; a failed one is reported again).
    async fn refresh(&self) -> Result<(), Refused> {
        let _one = self.fetching.lock().await;
        let tried = self.lock().tried;
        match tried {
            Some((at, failed)) if self.clock.now_ms() - at < REFETCH_GAP_MS => {
                return if failed { Err(Refused::Unavailable("the last try failed".to_owned())) } else { Ok(()) };
            }
            _ => {}
        }
        let fetched = self.fetch().await;
        let mut cache = self.lock();
        let now = self.clock.now_ms();
        cache.tried = Some((now, fetched.is_err()));
        let keys = fetched.map_err(Refused::Unavailable)?;
        cache.keys = keys;
        cache.fetched = Some(now);
        Ok(())
    }

    async fn fetch(&self) -> Result<HashMap<String, (DecodingKey, Value)>, String> {
        let url = match &self.source {
            Source::Jwks(url) => url.clone(),
            Source::OpenId(metadata) => {
                let metadata = self.get(metadata).await?;
                metadata["jwks_uri"].as_str().ok_or("the OpenID metadata names no jwks_uri")?.to_owned()
            }
        };
        Ok(parse_jwks(&self.get(&url).await?))
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        let response = self.http.get(url).send().await.map_err(|e| format!("{url}: {}", crate::error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        response.json().await.map_err(|e| format!("{url}: {}", crate::error_chain(&e)))
    }
}

/// The RSA keys of a JWKS document, by key id; keys of other kinds or without an id are
/// left out.
fn parse_jwks(jwks: &Value) -> HashMap<String, (DecodingKey, Value)> {
    let keys = jwks["keys"].as_array().map(Vec::as_slice).unwrap_or_default();
    keys.iter()
        .filter(|jwk| jwk["kty"] == "RSA")
        .filter_map(|jwk| {
            let (kid, n, e) = (jwk["kid"].as_str()?, jwk["n"].as_str()?, jwk["e"].as_str()?);
            let key = DecodingKey::from_rsa_components(n, e).ok()?;
            Some((kid.to_owned(), (key, jwk.clone())))
        })
        .collect()
}

/// Signs `claims` with RS256 under `pem`, a PEM private key (PKCS#8, as a Google service
/// account's `private_key`, or PKCS#1), with `kid` in the header when given.
///
/// # Errors
/// When `pem` is not an RSA private key.
pub fn sign(pem: &str, kid: Option<&str>, claims: &Value) -> Result<String, SignError> {
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(|e| SignError(e.to_string()))?;
    let header = Header { kid: kid.map(str::to_owned), ..Header::new(Algorithm::RS256) };
    jsonwebtoken::encode(&header, claims, &key).map_err(|e| SignError(e.to_string()))
}
