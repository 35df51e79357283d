//! Commands that talk to a running askgate over its HTTP API, as its other clients do:
//! `askgate token` ([`tokens`]) and `askgate tui` ([`tui`]).

pub mod tokens;
pub mod tui;

use serde_json::Value;

use crate::config::Config;

/// askgate's address: `url` when given, else the configured `gateway.http` (a wildcard bind
/// is reached on loopback).
pub fn address(config: &Config, url: Option<String>) -> String {
    url.map(|u| u.trim_end_matches('/').to_owned()).unwrap_or_else(|| {
        let mut http = config.http;
        if http.ip().is_unspecified() {
            http.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{http}")
    })
}

/// A client of askgate's API with one token.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// What askgate answered: its status and its JSON body (or the text it sent instead).
pub type Answer = (reqwest::StatusCode, Value);

impl Api {
    /// A client of the askgate at `base` (`http://127.0.0.1:8080`) with `token`.
    pub fn new(base: String, token: String) -> Self {
        Self { base, token, http: reqwest::Client::new() }
    }

    /// Where it talks to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A request to `path`, with the token and marked as a person's on a page of askgate's own.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header(crate::http::SURFACE_HEADER, "web")
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
