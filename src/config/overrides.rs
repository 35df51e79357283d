//! `[gateway]` keys from the environment: `ASKGATE_GATEWAY_<KEY>` (`ASKGATE_GATEWAY_HTTP`,
//! `ASKGATE_GATEWAY_DATABASE`, …) takes the place of the file's value, and each key remembers
//! where its value came from, for `askgate check`.

use super::Env;
use super::raw::RawGateway;
use crate::question::parse_duration;

/// Where a `[gateway]` value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// askgate's default: neither the file nor the environment set it.
    Default,
    /// The configuration file.
    File,
    /// This environment variable.
    Env(String),
}

/// One `[gateway]` key as askgate uses it: its value as written, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayValue {
    /// The key, without `gateway.`.
    pub key: &'static str,
    /// The value as it was written (the default's usual spelling when nothing set it).
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

/// The keys, with how askgate spells each default.
const KEYS: [(&str, &str); 13] = [
    ("database", "sqlite://askgate.db"),
    ("http", "127.0.0.1:8080"),
    ("default_timeout", "30m"),
    ("synchronous", "normal"),
    ("retention", "30d"),
    ("grant_ttl", "never"),
    ("remind_before", "never"),
    // Numbers: the value askgate uses is shown.
    ("max_event_streams", ""),
    ("max_connections", ""),
    ("quorum_includes_requester", "false"),
    ("callback_secret_env", "(none)"),
    ("callback_timeout", "10s"),
    ("public_url", "http://<gateway.http>/"),
];

/// The environment variable that overrides `gateway.<key>`.
pub fn variable(key: &str) -> String {
    format!("ASKGATE_GATEWAY_{}", key.to_ascii_uppercase())
}

/// Applies the environment's `ASKGATE_GATEWAY_*` values to `gateway` (read from `text`) and
/// says where each key's value came from.
///
/// # Errors
/// The dotted key and what is wrong with the variable's value, naming the variable.
pub(super) fn apply(gateway: &mut RawGateway, text: &str, env: &Env) -> Result<Vec<GatewayValue>, (String, String)> {
    // A misspelt variable would otherwise be ignored without a word, as an unknown key in the
    // file is not.
    if let Some(unknown) =
        env.names_starting("ASKGATE_GATEWAY_").into_iter().find(|n| !KEYS.iter().any(|(k, _)| variable(k) == *n))
    {
        let known = KEYS.iter().map(|(k, _)| variable(k)).collect::<Vec<_>>().join(", ");
        return Err(("gateway".to_owned(), format!("`{unknown}` is not a [gateway] key's variable; they are {known}")));
    }
    let file: toml::Table = text.parse().unwrap_or_default();
    let in_file = file.get("gateway").and_then(toml::Value::as_table);
    let mut values = Vec::with_capacity(KEYS.len());
    for (key, default) in KEYS {
        let name = variable(key);
        let (value, source) = if let Some(value) = env.get(&name) {
            set(gateway, key, &value).map_err(|m| (format!("gateway.{key}"), format!("{m} (from {name})")))?;
            (value, Source::Env(name))
        } else if let Some(value) = in_file.and_then(|t| t.get(key)) {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(n) => n.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => "(as written in the file)".to_owned(),
            };
            (value, Source::File)
        } else {
            let value = match key {
                "max_event_streams" => gateway.max_event_streams.to_string(),
                "max_connections" => gateway.max_connections.to_string(),
                _ => default.to_owned(),
            };
            (value, Source::Default)
        };
        values.push(GatewayValue { key, value, source });
    }
    Ok(values)
}

/// A duration, or `never`.
fn duration_or_never(value: &str) -> Result<Option<std::time::Duration>, String> {
    match value.trim() {
        "never" => Ok(None),
        text => parse_duration(text).map(Some).map_err(|m| format!("{m}, or `never`")),
    }
}

/// Sets `gateway.<key>` from an environment variable's text.
fn set(gateway: &mut RawGateway, key: &str, value: &str) -> Result<(), String> {
    let count = |value: &str| value.trim().parse::<usize>().map_err(|_| format!("`{value}` is not a whole number"));
    match key {
        "database" => gateway.database = value.to_owned(),
        "http" => gateway.http = value.to_owned(),
        "default_timeout" => gateway.default_timeout = parse_duration(value)?,
        "synchronous" => gateway.synchronous = Some(value.trim().to_owned()),
        "retention" => gateway.retention = duration_or_never(value)?,
        "grant_ttl" => gateway.grant_ttl = duration_or_never(value)?,
        "remind_before" => gateway.remind_before = duration_or_never(value)?,
        "max_event_streams" => gateway.max_event_streams = count(value)?,
        "max_connections" => gateway.max_connections = count(value)?,
        "quorum_includes_requester" => {
            gateway.quorum_includes_requester = match value.trim() {
                "true" => true,
                "false" => false,
                other => return Err(format!("`{other}` is not true or false")),
            }
        }
        "callback_secret_env" => gateway.callback_secret_env = Some(value.trim().to_owned()),
        "callback_timeout" => gateway.callback_timeout = parse_duration(value)?,
        "public_url" => gateway.public_url = Some(value.trim().to_owned()),
        other => unreachable!("`{other}` is not a [gateway] key"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, crate::config::ConfigError> {
        Config::parse_with(text, "test.toml", std::path::Path::new("."), &Env::from_pairs(env.iter().copied()))
    }

    fn source<'a>(config: &'a Config, key: &str) -> &'a GatewayValue {
        config.gateway_values.iter().find(|v| v.key == key).unwrap()
    }

    #[test]
    fn the_environment_overrides_the_file_and_each_value_names_its_source() {
        let text = "[gateway]\nhttp = \"127.0.0.1:9000\"\ndefault_timeout = \"10m\"\n";
        let config =
            parse(text, &[("ASKGATE_GATEWAY_HTTP", "127.0.0.1:9100"), ("ASKGATE_GATEWAY_RETENTION", "never")]).unwrap();
        assert_eq!(config.http.port(), 9100);
        assert_eq!(config.settings.retention, None);
        assert_eq!(config.settings.default_timeout, std::time::Duration::from_secs(600));
        let http = source(&config, "http");
        assert_eq!(
            (http.value.as_str(), &http.source),
            ("127.0.0.1:9100", &Source::Env("ASKGATE_GATEWAY_HTTP".into()))
        );
        assert_eq!(source(&config, "default_timeout").source, Source::File);
        assert_eq!(source(&config, "default_timeout").value, "10m");
        assert_eq!(source(&config, "database").source, Source::Default);
        assert_eq!(config.gateway_values.len(), KEYS.len());
    }

    #[test]
    fn a_bad_value_in_the_environment_names_the_key_and_the_variable() {
        for (name, value, says) in [
            ("ASKGATE_GATEWAY_HTTP", "nowhere", "not an address"),
            ("ASKGATE_GATEWAY_DEFAULT_TIMEOUT", "soon", "not a duration"),
            ("ASKGATE_GATEWAY_MAX_CONNECTIONS", "many", "not a whole number"),
            ("ASKGATE_GATEWAY_MAX_CONNECTIONS", "0", "at least 1"),
            ("ASKGATE_GATEWAY_SYNCHRONOUS", "always", "not `normal` or `full`"),
        ] {
            let message = parse("", &[(name, value)]).unwrap_err().to_string();
            let key = name.trim_start_matches("ASKGATE_GATEWAY_").to_ascii_lowercase();
            assert!(message.contains(&format!("`gateway.{key}`")), "{message}");
            assert!(message.contains(says) && message.contains(name), "{message}");
        }
    }

    #[test]
    fn a_misspelt_variable_is_refused_with_the_ones_there_are() {
        let message = parse("", &[("ASKGATE_GATEWAY_HTTPP", "0.0.0.0:8080")]).unwrap_err().to_string();
        assert!(message.contains("`ASKGATE_GATEWAY_HTTPP` is not a [gateway] key's variable"), "{message}");
        assert!(message.contains("ASKGATE_GATEWAY_HTTP,"), "{message}");
    }
}
