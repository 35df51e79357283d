//! `[channels.whatsapp]`'s own keys: the business phone number askgate sends from, the
//! variables of the app secret (webhook signatures) and of the verify token (the webhook's
//! subscribe handshake), and the template that reaches a person outside the 24-hour window.
//! Its `allowed_users` are phone numbers in E.164 (`+15551234567`), checked here.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only WhatsApp's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {
    phone_number_id: Option<String>,
    app_secret_env: Option<String>,
    verify_token_env: Option<String>,
    template: Option<String>,
    template_language: Option<String>,
}

/// The WhatsApp section, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhatsAppConfig {
    /// The id of the business phone number askgate sends from (the Graph API's, not the
    /// number itself).
    pub phone_number_id: String,
    /// The variable holding the system user's access token.
    pub token_env: String,
    /// The variable holding the app secret, which signs the webhook's deliveries.
    pub app_secret_env: String,
    /// The variable holding the verify token of the webhook's subscribe handshake.
    pub verify_token_env: String,
    /// The approved template a question goes out as outside the 24-hour window, with its
    /// language; none: such a question fails when it is asked.
    pub template: Option<Template>,
    /// The Graph API's base (`https://graph.facebook.com`), or a test double's.
    pub api_url: String,
}

/// An approved message template: its name and language code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// Its name (`askgate_question`).
    pub name: String,
    /// Its language code (`en_US`).
    pub language: String,
}

/// Meta's Graph API.
pub const GRAPH: &str = "https://graph.facebook.com";

/// The section's own keys, and the form of its `allowed_users`.
///
/// # Errors
/// When a key is unknown, missing or unusable, naming it.
pub fn read(section: &ChatConfig) -> Result<WhatsAppConfig, ConfigError> {
    let own: Own = section.read()?;
    let Some(phone_number_id) = own.phone_number_id else {
        return Err(section.fault(
            "phone_number_id",
            "set phone_number_id, the id of the business phone number (WhatsApp Manager, API Setup)",
        ));
    };
    if phone_number_id.is_empty() || !phone_number_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(section.fault("phone_number_id", format!("`{phone_number_id}` is not a phone number id (digits)")));
    }
    let variable = |key: &str, value: Option<String>, what: &str| match value {
        None => Err(section.fault(key, format!("set {key}: the environment variable that holds {what}"))),
        Some(v) if v.trim().is_empty() => Err(section.fault(key, "is empty")),
        Some(v) => Ok(v),
    };
    let app_secret_env = variable("app_secret_env", own.app_secret_env, "the app secret")?;
    let verify_token_env = variable("verify_token_env", own.verify_token_env, "the webhook's verify token")?;
    let template = match (own.template, own.template_language) {
        (None, None) => None,
        (None, Some(_)) => return Err(section.fault("template_language", "set template too, or neither")),
        (Some(name), _) if !is_template_name(&name) => {
            return Err(section.fault(
                "template",
                format!("`{name}` is not a template name (lower-case letters, digits and underscores)"),
            ));
        }
        (Some(name), language) => {
            let language = language.unwrap_or_else(|| "en_US".to_owned());
            if language.is_empty() || !language.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(
                    section.fault("template_language", format!("`{language}` is not a language code like en_US"))
                );
            }
            Some(Template { name, language })
        }
    };
    if let Some(user) = section.allowed_users.iter().map(|u| u.trim()).find(|u| *u != "*" && !is_allowed(u)) {
        return Err(section.fault(
            "allowed_users",
            format!("`{user}` is not a phone number in E.164 like +15551234567 (a +, the country code, the number)"),
        ));
    }
    let api_url = section.api_url.clone().unwrap_or_else(|| GRAPH.to_owned());
    if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
        return Err(section.fault("api_url", format!("`{api_url}` is not an http(s) URL")));
    }
    Ok(WhatsAppConfig {
        phone_number_id,
        token_env: section.token_env.clone(),
        app_secret_env,
        verify_token_env,
        template,
        api_url,
    })
}

/// Whether `user` of `allowed_users` is a number (`+15551234567`, or `whatsapp:+15551234567`).
fn is_allowed(user: &str) -> bool {
    super::is_e164(user.strip_prefix("whatsapp:").unwrap_or(user))
}

/// Meta's template names: lower-case letters, digits and underscores.
fn is_template_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn read(own: &str) -> Result<super::WhatsAppConfig, String> {
        let text =
            format!("[channels.whatsapp]\ntoken_env = \"T\"\napp_secret_env = \"S\"\nverify_token_env = \"V\"\n{own}");
        let config = Config::parse(&text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        crate::channel::check(&config).map_err(|e| e.to_string())?;
        super::read(config.chat("whatsapp").unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_section_names_its_number_its_secrets_with_an_optional_template() {
        let ok = read("phone_number_id = \"1065\"\nallowed_users = [\"+15551234567\"]\n").unwrap();
        assert_eq!((ok.phone_number_id.as_str(), ok.api_url.as_str(), ok.template), ("1065", super::GRAPH, None));
        let ok = read("phone_number_id = \"1\"\ntemplate = \"askgate_question\"\n").unwrap();
        assert_eq!(ok.template.unwrap().language, "en_US");
        let ok = read("phone_number_id = \"1\"\ntemplate = \"q\"\ntemplate_language = \"de\"\n").unwrap();
        assert_eq!(ok.template.unwrap().language, "de");
    }

    #[test]
    fn a_malformed_number_or_key_is_refused_by_name() {
        for (own, says) in [
            ("", "`channels.whatsapp.phone_number_id`: set phone_number_id"),
            ("phone_number_id = \"+1555\"\n", "`channels.whatsapp.phone_number_id`: `+1555` is not a phone number id"),
            (
                "phone_number_id = \"1\"\nallowed_users = [\"15551234567\"]\n",
                "`channels.whatsapp.allowed_users`: `15551234567` is not a phone number in E.164",
            ),
            ("phone_number_id = \"1\"\nallowed_users = [\"+1 555 1234\"]\n", "`channels.whatsapp.allowed_users`"),
            ("phone_number_id = \"1\"\ntemplate_language = \"en\"\n", "`channels.whatsapp.template_language`"),
            ("phone_number_id = \"1\"\ntemplate = \"Ask Me\"\n", "`channels.whatsapp.template`: `Ask Me`"),
            ("phone_number_id = \"1\"\napi_url = \"graph\"\n", "`channels.whatsapp.api_url`"),
            ("phone_number_id = \"1\"\nwebhook = \"x\"\n", "unknown field `webhook`"),
        ] {
            let err = read(own).unwrap_err();
            assert!(err.contains(says), "{own}: {err}");
        }
        let text = "[channels.whatsapp]\ntoken_env = \"T\"\nphone_number_id = \"1\"\nverify_token_env = \"V\"\n";
        let config = Config::parse(text, "c.toml", Path::new(".")).unwrap();
        let err = crate::channel::check(&config).unwrap_err().to_string();
        assert!(err.contains("`channels.whatsapp.app_secret_env`: set app_secret_env"), "{err}");
    }
}
