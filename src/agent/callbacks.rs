//! Callbacks: when an agent's question or run ends, its outcome is POSTed to the URL the agent
//! named (`callback` in `POST /api/questions` and `POST /api/runs`), from the store's outbox.
//!
//! The outbox row is written before the question or run it belongs to, so no outcome is
//! known without it (the engine writes it, in `engine::callbacks`); the deliverer takes a due row for a while (a lease in the row: on
//! PostgreSQL only one instance sends it, and another takes it over if that one dies), POSTs
//! the body signed as the webhook channel signs (`X-Askgate-Timestamp`, `X-Askgate-Signature:
//! v1=…`) with the row's id as `Idempotency-Key`, and records what came of it. Anything but a
//! 2xx is tried again with a doubling pause (at most [`RETRY`]'s 10 minutes, or what `Retry-After`
//! asks) until [`GIVE_UP_AFTER`] past the outcome; the receiver may see one body twice (a
//! timeout after it took it, a crash before the delivery was recorded), always under the same
//! key, and never again once one attempt succeeded.
//!
//! Where a callback may go is [`CallbackRules`]' (`rules`): `https` on a public address, or a
//! target `[callbacks] allow` lists; checked when asked (the HTTP API asks them, as its
//! [`crate::http::CallbackCheck`]) and again at every attempt, after the name is resolved, with
//! no redirect followed and no proxy between. The body is the one `GET …/outcome` (or `GET
//! /api/runs/{id}`) answers.

mod rules;

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;

pub use rules::CallbackRules;
use rules::{PublicOnly, Reach};

use crate::engine::Engine;
use crate::engine::callbacks::{BATCH, GIVE_UP_AFTER, LEASE, RETRY};
use crate::store::{Callback, CallbackTry};

use crate::http::{CallbackCheck, OutcomeView, RunView};

/// Headers an asker may not set: askgate's own (its signature, its key, `X-Askgate-*`), HTTP's
/// framing and connection headers (which could split or smuggle a request), and those a
/// receiver or a proxy on its side takes as said by the network (`Forwarded`, `X-Forwarded-*`).
const RESERVED: [&str; 16] = [
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "idempotency-key",
    "forwarded",
    "x-real-ip",
    "x-askgate-callback",
];

/// Whether an asker may not set the header `name` (lower case, as [`HeaderName`] keeps it).
fn reserved(name: &str) -> bool {
    RESERVED.contains(&name) || ["x-askgate-", "x-forwarded-", "proxy-"].iter().any(|p| name.starts_with(p))
}

/// Checks a caller's headers: valid names and values, none reserved.
///
/// # Errors
/// What is wrong, naming the header.
pub fn check_headers(headers: &[(String, String)]) -> Result<(), String> {
    for (name, value) in headers {
        let parsed = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("callback header `{name}` is not a header name"))?;
        if reserved(parsed.as_str()) {
            return Err(format!(
                "callback header `{name}` is reserved: askgate sets it, or it is HTTP's own (Host, Content-Length, \
                 Transfer-Encoding, Connection, X-Askgate-*, X-Forwarded-*, …)"
            ));
        }
        axum::http::HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("callback header `{name}` has a value that is not a header value"))?;
    }
    Ok(())
}

impl CallbackCheck for CallbackRules {
    fn check(&self, url: &str, headers: &[(String, String)]) -> Result<(), String> {
        CallbackRules::check(self, url)?;
        check_headers(headers)
    }
}

/// Where a POST on an asker's behalf may go, and the client that goes there: the operator's
/// rules (`[callbacks] allow`) asked again at every attempt, names resolved to public addresses
/// only (https only) for a target no entry lists. Callbacks and A2A's push notifications go
/// out through it.
#[derive(Clone)]
pub struct Outbound {
    /// For URLs no `allow` entry lists: names resolve to public addresses only, https only.
    public: reqwest::Client,
    /// For the targets the operator listed.
    listed: reqwest::Client,
    rules: CallbackRules,
}

impl Outbound {
    /// The clients for `rules`, each attempt ending after `timeout`.
    pub fn new(rules: CallbackRules, timeout: Duration) -> Self {
        // A redirect would turn the POST into a GET, carry the headers elsewhere and go where the
        // rules were not asked: a receiver that moved answers 3xx, tried again like any failure.
        // No proxy from the environment either: the rules must see where the connection goes.
        let client = |resolver: Option<Arc<PublicOnly>>| {
            let builder =
                reqwest::Client::builder().timeout(timeout).redirect(reqwest::redirect::Policy::none()).no_proxy();
            let builder = match resolver {
                Some(resolver) => builder.dns_resolver(resolver).https_only(true),
                None => builder,
            };
            builder.build().unwrap_or_default()
        };
        Self { public: client(Some(Arc::new(PublicOnly))), listed: client(None), rules }
    }

    /// The rules, to check a target when it is given.
    pub fn rules(&self) -> &CallbackRules {
        &self.rules
    }

    /// The client that may POST to `url` under the rules as they are now.
    ///
    /// # Errors
    /// The rules refuse it: the message says why.
    pub fn client(&self, url: &reqwest::Url) -> Result<&reqwest::Client, String> {
        match self.rules.reach(url) {
            Ok(Reach::Listed) => Ok(&self.listed),
            Ok(Reach::Public) => Ok(&self.public),
            Err(refused) => Err(format!("refused: {refused}")),
        }
    }
}

/// Sends the outbox's due callbacks until askgate stops, where `rules` let them go.
pub fn start(engine: &Engine, secret: Option<String>, timeout: Duration, rules: CallbackRules) {
    let deliverer =
        Deliverer { engine: engine.clone(), outbound: Outbound::new(rules, timeout), secret, stop: engine.stopping() };
    engine.tasks().spawn(async move {
        let callbacks = deliverer.engine.callbacks();
        // Woken by what ends a run (an agent's question has a run of its own).
        callbacks.each_read(ROUTE, ends_a_run, || deliverer.send_due()).await;
    });
}

/// Whether `event` may make a callback due.
fn ends_a_run(event: &crate::engine::Event) -> bool {
    use crate::run::RunStatus;
    match event {
        crate::engine::Event::Resolved(_) => true,
        crate::engine::Event::Run(run) => !matches!(run.status, RunStatus::Running | RunStatus::Waiting),
        _ => false,
    }
}

struct Deliverer {
    engine: Engine,
    /// Where it may POST, and how.
    outbound: Outbound,
    /// The configured secret, for callbacks without one of their own.
    secret: Option<String>,
    /// Fires when askgate begins to stop.
    stop: tokio_util::sync::CancellationToken,
}

/// The start of agents' callback URLs (http or https): the outbox also holds opencode's
/// replies and A2A's pushes, which their own senders read.
const ROUTE: &str = "http";

/// How many callbacks are sent at once: a receiver that hangs holds up only its own.
const AT_ONCE: usize = 8;

impl Deliverer {
    async fn send_due(&self) {
        use futures_util::StreamExt;
        let due = match self.engine.callbacks().due_callbacks(ROUTE, BATCH).await {
            Ok(due) => {
                tracing::debug!(due = due.len(), "read the callbacks' outbox");
                due
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the callbacks' outbox; trying again shortly");
                return;
            }
        };
        futures_util::stream::iter(due)
            .for_each_concurrent(AT_ONCE, |callback| async move {
                // Once askgate stops, the callbacks being sent finish (shutdown waits for them)
                // and the rest wait for the next start.
                if self.stop.is_cancelled() {
                    return;
                }
                match self.engine.callbacks().take_callback(&callback.id, LEASE).await {
                    Ok(Some(lease)) => self.send(callback, lease).await,
                    Ok(None) => {}
                    Err(e) => tracing::warn!(callback = %callback.id, error = %e, "could not take a callback"),
                }
            })
            .await;
    }

    async fn send(&self, callback: Callback, lease: i64) {
        let tried = match self.body(&callback).await {
            Ok(body) => self.post(&callback, &body).await,
            Err(e) => CallbackTry::Retry { next_at: self.engine.clock().now_ms() + 1_000, error: e },
        };
        let tried = self.give_up_if_late(&callback, tried);
        // Where it goes, without the path and query, which may carry a token.
        let to = reqwest::Url::parse(&callback.url).map(|u| rules::origin(&u)).unwrap_or_default();
        let id = &callback.id;
        let said = match &tried {
            CallbackTry::Delivered => None,
            CallbackTry::Retry { error, .. } | CallbackTry::GaveUp { error } => Some(error.clone()),
        };
        let gave_up = matches!(tried, CallbackTry::GaveUp { .. });
        match self.engine.callbacks().callback_tried(id, lease, tried).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(callback = %id, to = %to, "a callback's attempt outlasted its lease; another sender has it");
                return;
            }
            Err(e) => {
                // Its lease runs out and it is sent again, under the same key.
                tracing::warn!(callback = %id, error = %e, "could not record a callback's attempt");
                return;
            }
        }
        match said {
            None => tracing::info!(callback = %id, to = %to, "callback delivered"),
            Some(error) if gave_up => tracing::error!(callback = %id, to = %to, error = %error, "callback given up"),
            Some(error) => {
                let attempt = callback.attempts + 1;
                tracing::warn!(callback = %id, to = %to, attempt, error = %error, "callback not delivered; it is tried again");
            }
        }
    }

    /// A retry past [`GIVE_UP_AFTER`] since the outcome is the last one.
    fn give_up_if_late(&self, callback: &Callback, tried: CallbackTry) -> CallbackTry {
        let late = callback.ended_at.is_some_and(|at| {
            self.engine.clock().now_ms() - at > i64::try_from(GIVE_UP_AFTER.as_millis()).unwrap_or(i64::MAX)
        });
        match tried {
            CallbackTry::Retry { error, .. } if late => CallbackTry::GaveUp { error },
            other => other,
        }
    }

    /// The body: the question's outcome as `GET /api/questions/{id}/outcome` answers, or the
    /// run as `GET /api/runs/{id}` does.
    async fn body(&self, callback: &Callback) -> Result<Vec<u8>, String> {
        let body = match callback.question {
            Some(id) => {
                let question = self.engine.records().question(id).await.map_err(|e| e.to_string())?;
                let question = question.ok_or_else(|| format!("question {id} is gone"))?;
                serde_json::to_vec(&OutcomeView::from(&question))
            }
            None => {
                let run = self.engine.records().run(callback.run).await.map_err(|e| e.to_string())?;
                let run = run.ok_or_else(|| format!("run {} is gone", callback.run))?;
                serde_json::to_vec(&RunView { run })
            }
        };
        body.map_err(|e| e.to_string())
    }

    async fn post(&self, callback: &Callback, body: &[u8]) -> CallbackTry {
        let attempt = callback.attempts + 1;
        let retry = |error: String, asked: Option<Duration>| {
            let pause = RETRY.pause(attempt, asked);
            let next_at = self.engine.clock().now_ms() + i64::try_from(pause.as_millis()).unwrap_or(i64::MAX);
            CallbackTry::Retry { next_at, error }
        };
        // Never signed with an empty key: an instance without the configured secret waits for it.
        let Some(secret) = callback.secret.as_deref().or(self.secret.as_deref()).filter(|s| !s.is_empty()) else {
            return retry("no secret to sign it: set the variable gateway.callback_secret_env names".to_owned(), None);
        };
        // The rules as they are now: the operator may have closed what was open when it was asked.
        let url = match reqwest::Url::parse(&callback.url) {
            Ok(url) => url,
            Err(e) => return retry(format!("callback url: {e}"), None),
        };
        let client = match self.outbound.client(&url) {
            Ok(client) => client,
            Err(refused) => return retry(refused, None),
        };
        let timestamp = self.engine.clock().now_ms() / 1000;
        let signature = crate::channel::webhook::sign(secret.as_bytes(), timestamp, body);
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("idempotency-key", &callback.id)
            .header("x-askgate-callback", &callback.id)
            .header("x-askgate-timestamp", timestamp.to_string())
            .header("x-askgate-signature", signature);
        // Checked when asked; a row kept from before a header was reserved sends it no more.
        for (name, value) in callback.headers.iter().filter(|(name, _)| !reserved(&name.to_ascii_lowercase())) {
            request = request.header(name, value);
        }
        match request.body(body.to_vec()).send().await {
            Ok(response) if response.status().is_success() => CallbackTry::Delivered,
            Ok(response) => {
                let asked = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                retry(format!("the receiver answered {}", response.status()), asked)
            }
            // Without the URL, which may carry a token: the error is logged and stored. A name
            // that resolves only inside says so in the chain.
            Err(e) => retry(crate::error_chain(&e.without_url()), None),
        }
    }
}
