//! Signed tokens: RSA keys the tests make, for the doubles of platforms that sign their
//! requests (Teams, Google Chat) to sign with; and [`askgate::channel::jwt`] checked against
//! them, its keys served from loopback.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use askgate::channel::jwt::{Expect, Keys, Refused};
use base64::Engine as _;
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use serde_json::{Value, json};

/// An RSA key a test made: its id, its private half as PKCS#8 PEM (a Google service account's
/// `private_key`), and its public half as a JWK.
pub struct TestKey {
    pub kid: String,
    pub pem: String,
    pub jwk: Value,
}

impl TestKey {
    /// A new 2048-bit key named `kid`.
    pub fn new(kid: &str) -> Self {
        let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
        let pem = key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string();
        let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let jwk = json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": b64(key.n().to_bytes_be()), "e": b64(key.e().to_bytes_be())});
        Self { kid: kid.to_owned(), pem, jwk }
    }

    /// Two keys made once per test process (making one takes a moment): the platform's, and
    /// another that signs what the platform did not.
    pub fn pair() -> &'static (TestKey, TestKey) {
        static KEYS: OnceLock<(TestKey, TestKey)> = OnceLock::new();
        KEYS.get_or_init(|| (TestKey::new("test-key-1"), TestKey::new("test-key-2")))
    }

    /// `claims` signed with RS256 under this key, its id in the header.
    pub fn sign(&self, claims: &Value) -> String {
        askgate::channel::jwt::sign(&self.pem, Some(&self.kid), claims).unwrap()
    }

    /// A JWKS document publishing `keys`.
    pub fn jwks(keys: &[&TestKey]) -> Value {
        json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
    }
}

/// Unix seconds now.
pub fn now_secs() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

/// A loopback server of a JWKS document (at `/jwks`) and of OpenID metadata naming it (at
/// `/openid`), counting the JWKS fetches; what it publishes can change.
struct Published {
    url: String,
    jwks: Arc<std::sync::Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

impl Published {
    async fn start(jwks: Value) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (shared, fetches) = (Arc::new(std::sync::Mutex::new(jwks)), Arc::new(AtomicUsize::new(0)));
        let (jwks, count, metadata) = (shared.clone(), fetches.clone(), json!({"jwks_uri": format!("{url}/jwks")}));
        let app = axum::Router::new()
            .route(
                "/jwks",
                axum::routing::get(move || {
                    count.fetch_add(1, Ordering::SeqCst);
                    let jwks = jwks.lock().unwrap().clone();
                    async move { axum::Json(jwks) }
                }),
            )
            .route("/openid", axum::routing::get(move || async move { axum::Json(metadata) }));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, jwks: shared, fetches }
    }
}

fn expect() -> Expect {
    Expect { issuers: vec!["https://issuer.test".into()], audience: "app-1".into() }
}

fn claims(iss: &str, aud: &str, exp: i64) -> Value {
    json!({"iss": iss, "aud": aud, "exp": exp, "nbf": now_secs() - 10, "serviceUrl": "http://x"})
}

#[tokio::test]
async fn a_token_verifies_only_with_the_published_key_its_issuer_its_audience_in_time() {
    let (key, other) = TestKey::pair();
    let published = Published::start(TestKey::jwks(&[key])).await;
    let keys = Keys::openid(reqwest::Client::new(), format!("{}/openid", published.url));
    let later = now_secs() + 600;
    let verified = keys.verify(&key.sign(&claims("https://issuer.test", "app-1", later)), &expect()).await.unwrap();
    assert_eq!(
        (verified.claims["serviceUrl"].as_str(), verified.key["kid"].as_str()),
        (Some("http://x"), Some("test-key-1"))
    );
    let refused = |token: String| {
        let keys = &keys;
        async move { keys.verify(&token, &expect()).await.unwrap_err() }
    };
    assert!(matches!(refused(key.sign(&claims("https://other.test", "app-1", later))).await, Refused::Issuer));
    assert!(matches!(refused(key.sign(&claims("https://issuer.test", "app-2", later))).await, Refused::Audience));
    let expired = now_secs() - 3600;
    assert!(matches!(refused(key.sign(&claims("https://issuer.test", "app-1", expired))).await, Refused::Expired));
    // Another key under the published key's id: the signature does not verify.
    let forged =
        askgate::channel::jwt::sign(&other.pem, Some(&key.kid), &claims("https://issuer.test", "app-1", later));
    assert!(matches!(refused(forged.unwrap()).await, Refused::Signature));
    assert!(matches!(refused("not.a.token".into()).await, Refused::Malformed));
    assert!(keys.healthy());
}

#[tokio::test]
async fn an_unknown_key_is_fetched_for_at_most_once_a_minute() {
    let (key, other) = TestKey::pair();
    let published = Published::start(TestKey::jwks(&[key])).await;
    let clock = askgate::clock::Clock::manual(now_secs() * 1000);
    let keys = Keys::jwks(reqwest::Client::new(), format!("{}/jwks", published.url)).with_clock(clock.clone());
    let token = other.sign(&claims("https://issuer.test", "app-1", now_secs() + 600));
    for _ in 0..3 {
        assert!(matches!(keys.verify(&token, &expect()).await.unwrap_err(), Refused::UnknownKey));
    }
    assert_eq!(published.fetches.load(Ordering::SeqCst), 1, "forged key ids fetch the keys once a minute");
    // The platform rolls its keys over: a minute on, the new key is fetched and verifies.
    *published.jwks.lock().unwrap() = TestKey::jwks(&[key, other]);
    clock.advance(61_000);
    keys.verify(&token, &expect()).await.unwrap();
    assert_eq!(published.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn keys_that_cannot_be_fetched_refuse_every_token_then_say_so() {
    let (key, _) = TestKey::pair();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}/jwks", listener.local_addr().unwrap());
    drop(listener);
    let keys = Keys::jwks(reqwest::Client::new(), gone);
    let token = key.sign(&claims("https://issuer.test", "app-1", now_secs() + 600));
    assert!(matches!(keys.verify(&token, &expect()).await.unwrap_err(), Refused::Unavailable(_)));
    assert!(!keys.healthy());
}
