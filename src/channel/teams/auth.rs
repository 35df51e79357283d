//! Who may post activities to `/channels/teams`: the Bot Framework, proving it with a JSON Web
//! Token in `Authorization: Bearer`. The token is checked as the Bot Connector's
//! authentication reference asks: signed (RS256) by a key the Bot Framework's OpenID metadata
//! names, issued by `https://api.botframework.com` for the bot's app id, not expired; the key
//! that signed it endorses the activity's channel (`msteams`); and its `serviceurl` claim is
//! the activity's `serviceUrl`, so a token cannot send askgate's replies elsewhere.

use serde_json::Value;

use super::activity::Envelope;
use crate::channel::jwt::{Expect, Keys, Refused};

/// The issuer of the tokens the Bot Framework's channels send.
pub const ISSUER: &str = "https://api.botframework.com";

/// Why an activity's token was refused: nothing it carries is applied.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token")]
    Missing,
    /// The token itself is not one the Bot Framework signed for this bot.
    #[error("the token: {0}")]
    Token(#[from] Refused),
    /// The key that signed it does not endorse the activity's channel.
    #[error("the signing key does not endorse the channel `{0}`")]
    Endorsement(String),
    /// Its `serviceurl` claim is not the activity's `serviceUrl`.
    #[error("the token's serviceurl is not the activity's serviceUrl `{0}`")]
    ServiceUrl(String),
}

/// The door's check: the Bot Framework's keys, and what its tokens must say.
pub struct Door {
    keys: Keys,
    expect: Expect,
}

/// A token checked as the Bot Framework's, not yet against the activity it came with.
pub struct Checked {
    claims: Value,
    key: Value,
}

impl Door {
    /// Checks tokens for the app `app_id` against the keys `openid_url`'s metadata names.
    pub fn new(http: reqwest::Client, openid_url: String, app_id: String) -> Self {
        Self {
            keys: Keys::openid(http, openid_url),
            expect: Expect { issuers: vec![ISSUER.to_owned()], audience: app_id },
        }
    }

    /// Whether the Bot Framework's keys were fetched at the last try.
    pub fn keys_healthy(&self) -> bool {
        self.keys.healthy()
    }

    /// Checks the token of the header `authorization`.
    ///
    /// # Errors
    /// A [`Refusal`] saying why.
    pub async fn token(&self, authorization: Option<&str>) -> Result<Checked, Refusal> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Missing)?;
        let verified = self.keys.verify(token, &self.expect).await?;
        Ok(Checked { claims: verified.claims, key: verified.key })
    }
}

impl Checked {
    /// Checks the token against the activity it came with.
    ///
    /// # Errors
    /// A [`Refusal`] saying why.
    pub fn carries(&self, envelope: &Envelope) -> Result<(), Refusal> {
        let endorsed = self.key["endorsements"]
            .as_array()
            .is_some_and(|all| all.iter().any(|e| e.as_str() == Some(envelope.channel.as_str())));
        if !endorsed {
            return Err(Refusal::Endorsement(envelope.channel.clone()));
        }
        let claim = self.claims.get("serviceurl").or_else(|| self.claims.get("serviceUrl")).and_then(Value::as_str);
        if claim != Some(envelope.service_url.as_str()) {
            return Err(Refusal::ServiceUrl(envelope.service_url.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn envelope() -> Envelope {
        Envelope { channel: "msteams".into(), service_url: "https://smba.trafficmanager.net/amer/".into() }
    }

    #[test]
    fn a_token_holds_only_with_a_key_endorsing_the_channel_naming_the_service_url() {
        let ok = Checked {
            claims: json!({"serviceurl": "https://smba.trafficmanager.net/amer/"}),
            key: json!({"kid": "k", "endorsements": ["msteams", "skype"]}),
        };
        assert!(ok.carries(&envelope()).is_ok());
        let other_channel = Checked { key: json!({"endorsements": ["skype"]}), ..ok_clone(&ok) };
        assert!(matches!(other_channel.carries(&envelope()), Err(Refusal::Endorsement(_))));
        let no_endorsements = Checked { key: json!({"kid": "k"}), ..ok_clone(&ok) };
        assert!(matches!(no_endorsements.carries(&envelope()), Err(Refusal::Endorsement(_))));
        let elsewhere = Checked { claims: json!({"serviceurl": "https://evil.example/"}), ..ok_clone(&ok) };
        assert!(matches!(elsewhere.carries(&envelope()), Err(Refusal::ServiceUrl(_))));
        let none = Checked { claims: json!({}), ..ok_clone(&ok) };
        assert!(matches!(none.carries(&envelope()), Err(Refusal::ServiceUrl(_))));
    }

    fn ok_clone(c: &Checked) -> Checked {
        Checked { claims: c.claims.clone(), key: c.key.clone() }
    }
}
