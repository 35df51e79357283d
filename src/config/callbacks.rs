//! `[callbacks]`: the targets an operator lets callbacks reach besides `https` on public
//! addresses (`allow = ["http://127.0.0.1:9000", "https://hooks.internal/askgate/"]`).
//!
//! An entry names a scheme, a host and a port (the scheme's own when none is written), and
//! optionally a path: a callback URL fits it when all three are the same and, if the entry
//! has a path, the URL's path is that path or lies under it (`/askgate` covers `/askgate` and
//! `/askgate/done`, never `/askgateway`). Hosts compare as the URL parser writes them (names
//! in lower case, addresses in their one canonical form), so `http://127.1:9000` is the entry
//! `http://127.0.0.1:9000`.

use url::Url;

use super::raw::RawCallbacks;

/// `[callbacks]` as validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallbacksConfig {
    /// What callbacks may reach besides `https` on public addresses.
    pub allow: Vec<CallbackTarget>,
}

/// One `allow` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackTarget {
    scheme: String,
    host: url::Host<String>,
    port: u16,
    /// `/` for every path, else the prefix (without a trailing `/`, unless it is the whole).
    path: String,
    /// As written, for messages.
    shown: String,
}

impl CallbackTarget {
    /// An entry as written in `allow`.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = Url::parse(text.trim()).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("`{text}` is not an http:// or https:// URL"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("`{text}` has a user or password; name the target alone"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("`{text}` has a query or a fragment; name a scheme, host, port and path"));
        }
        let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
            return Err(format!("`{text}` has no host"));
        };
        let path = match url.path().trim_end_matches('/') {
            "" => "/".to_owned(),
            prefix => prefix.to_owned(),
        };
        Ok(Self { scheme: url.scheme().to_owned(), host: host.to_owned(), port, path, shown: text.trim().to_owned() })
    }

    /// Whether `url` is this target: the same scheme, host and port, and a path at or under
    /// this one.
    pub fn admits(&self, url: &Url) -> bool {
        let same_place = url.scheme() == self.scheme
            && url.host().is_some_and(|h| h.to_owned() == self.host)
            && url.port_or_known_default() == Some(self.port);
        let path = url.path();
        same_place
            && (self.path == "/"
                || path == self.path
                || path.strip_prefix(self.path.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }
}

impl std::fmt::Display for CallbackTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl CallbacksConfig {
    /// Whether an `allow` entry lists `url`.
    pub fn lists(&self, url: &Url) -> bool {
        self.allow.iter().any(|target| target.admits(url))
    }
}

pub(super) fn callbacks(raw: Option<RawCallbacks>) -> Result<CallbacksConfig, (String, String)> {
    let Some(raw) = raw else { return Ok(CallbacksConfig::default()) };
    let allow = raw
        .allow
        .iter()
        .enumerate()
        .map(|(i, text)| CallbackTarget::parse(text).map_err(|e| (format!("callbacks.allow[{i}]"), e)))
        .collect::<Result<_, _>>()?;
    Ok(CallbacksConfig { allow })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn an_entry_admits_its_scheme_host_and_port_and_paths_under_its_own() {
        let local = CallbackTarget::parse("http://127.0.0.1:9000").unwrap();
        assert!(local.admits(&url("http://127.0.0.1:9000/done?x=1")));
        assert!(local.admits(&url("http://127.1:9000/")), "the same address, written otherwise");
        assert!(!local.admits(&url("https://127.0.0.1:9000/done")), "another scheme");
        assert!(!local.admits(&url("http://127.0.0.1:9001/done")), "another port");
        assert!(!local.admits(&url("http://localhost:9000/done")), "a name is not its address");
        let hooks = CallbackTarget::parse("https://Hooks.Internal/askgate/").unwrap();
        assert!(hooks.admits(&url("https://hooks.internal:443/askgate")));
        assert!(hooks.admits(&url("https://hooks.internal/askgate/done")));
        assert!(!hooks.admits(&url("https://hooks.internal/askgateway")));
        assert!(!hooks.admits(&url("https://hooks.internal/askgate/../admin")), "the parser resolves `..`");
        assert!(!hooks.admits(&url("https://hooks.internal/")));
        let v6 = CallbackTarget::parse("http://[::1]:7000/").unwrap();
        assert!(v6.admits(&url("http://[0:0:0:0:0:0:0:1]:7000/x")));
    }

    #[test]
    fn a_bad_entry_names_its_key() {
        for (text, says) in [
            ("ftp://files.internal", "not an http"),
            ("http://user:pw@127.0.0.1:9000", "user or password"),
            ("http://127.0.0.1:9000/?token=1", "query or a fragment"),
            ("localhost:9000", "not an http"),
            ("not a url", "not a URL"),
        ] {
            let raw = RawCallbacks { allow: vec!["https://fine.example".into(), text.into()] };
            let (key, message) = callbacks(Some(raw)).unwrap_err();
            assert_eq!(key, "callbacks.allow[1]", "{text}");
            assert!(message.contains(says), "{text}: {message}");
        }
    }
}
