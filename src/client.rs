//! Commands that talk to a running askgate over its HTTP API, as its other clients do:
//! `askgate token` ([`tokens`]) and `askgate tui` ([`tui`]).

pub mod tokens;
pub mod tui;

use serde_json::Value;

use crate::config::{Config, Env};

/// askgate's address: `url` when given, else the configured `gateway.http` (a wildcard bind
/// is reached on loopback).
pub fn address(config: &Config, url: Option<String>) -> String {
    url.map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| format!("http://{}", crate::config::reachable(config.http)))
}

/// The askgate `config` names (or `url`), with the operator's token: `ASKGATE_API_TOKEN`, or
/// `askgate.token` beside the database.
///
/// # Errors
/// Where the token was looked for, when none is found.
pub fn with_operator(config: &Config, url: Option<String>) -> Result<Api, String> {
    let token = crate::http::token::operator_client_token(Env::process().get("ASKGATE_API_TOKEN"), &config.database)?;
    Ok(Api::new(address(config, url), token))
}

/// As [`with_operator`], with the person's own token instead when `ASKGATE_TOKEN` is set.
///
/// # Errors
/// As [`with_operator`].
pub fn with_own_token(config: &Config, url: Option<String>) -> Result<Api, String> {
    match Env::process().get("ASKGATE_TOKEN").filter(|t| !t.trim().is_empty()) {
        Some(own) => Ok(Api::new(address(config, url), own.trim().to_owned())),
        None => with_operator(config, url),
    }
}

/// Runs `work` to its end on a runtime of its own.
///
/// # Errors
/// `work`'s, or why no runtime could start.
pub fn block_on<T>(work: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(work)
}

/// A client of askgate's API with one token.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
    /// The surface its answers are recorded as given on (`X-Askgate-Surface`); none: `api`.
    surface: Option<&'static str>,
}

/// What askgate answered: its status and its JSON body (or the text it sent instead).
pub type Answer = (reqwest::StatusCode, Value);

impl Api {
    /// A client of the askgate at `base` (`http://127.0.0.1:8080`) with `token`.
    pub fn new(base: String, token: String) -> Self {
        Self { base, token, http: reqwest::Client::new(), surface: None }
    }

    /// The same client, its requests saying they come from `surface` (`tui`), so that answers
    /// given through it are recorded as given there.
    pub fn on_surface(mut self, surface: &'static str) -> Self {
        self.surface = Some(surface);
        self
    }

    /// Where it talks to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A request to `path`, with the token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        match self.surface {
            Some(surface) => request.header(crate::http::SURFACE_HEADER, surface),
            None => request,
        }
    }

    /// Sends `request` and reads its JSON answer.
    ///
    /// # Errors
    /// When askgate does not answer: the message names the address.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, String> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.unreachable(&e))?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, body))
    }

    fn unreachable(&self, e: &reqwest::Error) -> String {
        let why = crate::error_chain(e);
        format!("askgate does not answer at {} ({why}); is it running? (`askgate serve`, or --url)", self.base)
    }
}

/// The message of an error answer (`{"error":{"message"}}`), or the status.
pub fn error_message(answer: &Answer) -> String {
    match answer.1["error"]["message"].as_str() {
        Some(message) => format!("{message} ({})", answer.0),
        None => format!("askgate answered {}", answer.0),
    }
}
