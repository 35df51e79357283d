//! `[channels.email]`'s own keys: the variables that hold the SMTP and IMAP URLs (with their
//! passwords), the address cards come from, and askgate's public URL for one-click links.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only the email section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    smtp_url_env: Option<String>,
    imap_url_env: Option<String>,
    from: Option<String>,
    link_base: Option<String>,
}

/// The email section, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailConfig {
    /// The variable holding `smtp://user:pass@host:port` (or `smtps://`, `smtp+starttls://`).
    pub smtp_url_env: String,
    /// The variable holding `imap://user:pass@host:port/INBOX` (or `imaps://`).
    pub imap_url_env: String,
    /// The address cards come from (`askgate@example.com`, or `askgate <askgate@example.com>`).
    pub from: String,
    /// askgate's public URL, for one-click links; none: cards carry commands only.
    pub link_base: Option<String>,
}

/// The section's own keys.
///
/// # Errors
/// When a key is unknown, missing or unusable, naming it.
pub fn read(section: &ChatConfig) -> Result<EmailConfig, ConfigError> {
    let own: Own = section.read()?;
    if !section.token_env.is_empty() {
        return Err(section.fault("token_env", "email has no token: set smtp_url_env and imap_url_env"));
    }
    if section.api_url.is_some() {
        return Err(section.fault("api_url", "email reaches its servers through smtp_url_env and imap_url_env"));
    }
    let variable = |key: &str, value: Option<String>| match value {
        None => Err(section.fault(key, format!("set {key}: the environment variable that holds its URL"))),
        Some(v) if v.trim().is_empty() => Err(section.fault(key, "is empty")),
        Some(v) => Ok(v),
    };
    let smtp_url_env = variable("smtp_url_env", own.smtp_url_env)?;
    let imap_url_env = variable("imap_url_env", own.imap_url_env)?;
    let from = own.from.ok_or_else(|| section.fault("from", "set from: the address cards come from"))?;
    if from.parse::<lettre::message::Mailbox>().is_err() {
        return Err(section.fault("from", format!("`{from}` is not an address like askgate@example.com")));
    }
    if let Some(base) = &own.link_base
        && !(base.starts_with("https://") || base.starts_with("http://"))
    {
        return Err(section.fault("link_base", format!("`{base}` is not an http(s) URL")));
    }
    Ok(EmailConfig { smtp_url_env, imap_url_env, from, link_base: own.link_base })
}
