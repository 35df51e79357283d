//! opencode's permission prompts and questions, asked of a person: askgate follows a running
//! opencode server's event stream (`GET /global/event`, every project, reconnecting), turns
//! `permission.asked` into an approval and `question.asked` into its questions, and replies
//! through `POST /permission/{id}/reply` and `POST /question/{id}/reply`. A prompt answered in
//! opencode first (`permission.replied`, `question.replied`/`rejected`), or whose session was
//! stopped (`session.error`, `session.idle`), retracts its card. Servers from before opencode's
//! permission rework send `permission.updated` instead, and take the reply at `POST
//! /session/{session}/permissions/{id}` (`{response}`); both are read.
//!
//! No answer is lost on the way back: each reply is a row of the store's outbox, written before
//! its question and sent until opencode takes it ([`reply`]). Every call to opencode has a
//! timeout, its event lines are bounded, and `/healthz` says when it does not answer.

mod prompt;
mod reply;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use crate::config::OpencodeConfig;
use crate::engine::{CallbackSpec, ChannelState, Engine};
use crate::question::{Answerers, QuestionId, UserRef};
use reply::{Replier, Route};

/// The longest wait between two tries to reach opencode.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long one call to opencode may take, from connecting to the last byte of its answer
/// (for the event stream: to its headers).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest line of the event stream read: one event is a line. A longer one (a huge tool
/// output, or a stream that is not opencode's) is skipped without being kept.
const MAX_LINE: usize = 8 * 1024 * 1024;
/// The largest answer of a list opencode is asked for (its projects, its pending prompts).
const MAX_LIST: usize = 16 * 1024 * 1024;

/// Follows each configured opencode server until askgate stops, and sends its replies.
pub fn start(configs: &[OpencodeConfig], engine: &Engine) {
    for config in configs {
        let opencode = Arc::new(Opencode::new(config.clone(), engine.clone()));
        // Listed at once: a server that never answers is seen as one.
        engine.delivery().set_channel_state(opencode.health, ChannelState::Connecting);
        let route = reply::route_of(&config.name);
        engine.callbacks().deliver(Arc::new(Replier { opencode: opencode.clone(), engine: engine.clone(), route }));
        let bridge = Arc::new(Bridge {
            opencode,
            engine: engine.clone(),
            open: Mutex::default(),
            directories: Mutex::default(),
        });
        engine.tasks().spawn(bridge.run());
    }
}

/// One opencode server: how it is reached, and how it stands in `/healthz`.
struct Opencode {
    config: OpencodeConfig,
    engine: Engine,
    http: reqwest::Client,
    /// `opencode:<name>`: its line in `/healthz`.
    health: &'static str,
    /// Whether its event stream is connected (it is `up` only then).
    following: std::sync::atomic::AtomicBool,
}

impl Opencode {
    fn new(config: OpencodeConfig, engine: Engine) -> Self {
        let health: &'static str = Box::leak(format!("opencode:{}", config.name).into_boxed_str());
        // No timeout for the whole of a request here: the event stream lasts. Each call sets
        // its own; a connection that dies silently is found by TCP keepalive.
        let http = reqwest::Client::builder()
            .connect_timeout(CALL_TIMEOUT)
            .tcp_keepalive(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self { config, engine, http, health, following: std::sync::atomic::AtomicBool::new(false) }
    }

    /// A call of `path` (in project `directory`), with the server's password, bounded by
    /// [`CALL_TIMEOUT`].
    fn request(&self, method: reqwest::Method, path: &str, directory: Option<&str>) -> reqwest::RequestBuilder {
        self.unbounded(method, path, directory).timeout(CALL_TIMEOUT)
    }

    /// As [`Opencode::request`], without a timeout: for the event stream, which lasts.
    fn unbounded(&self, method: reqwest::Method, path: &str, directory: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.config.url));
        if let Some(directory) = directory {
            request = request.query(&[("directory", directory)]);
        }
        match self.config.password_env.as_deref().and_then(|var| std::env::var(var).ok()) {
            Some(password) => request.basic_auth(&self.config.username, Some(password)),
            None => request,
        }
    }

    /// The JSON list at `path`; none when the server has no such route (404). The error says
    /// what went wrong, naming the call.
    async fn list(&self, path: &str, directory: Option<&str>) -> Result<Option<Vec<Value>>, String> {
        let what = format!("GET {path}");
        let response =
            self.request(reqwest::Method::GET, path, directory).send().await.map_err(|e| failed(&what, e))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(format!("{what} answered {}", response.status()));
        }
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.map_err(|e| failed(&what, e))?);
            if body.len() > MAX_LIST {
                return Err(format!("{what} answered more than {} MiB", MAX_LIST >> 20));
            }
        }
        match serde_json::from_slice(&body) {
            Ok(Value::Array(items)) => Ok(Some(items)),
            Ok(_) => Err(format!("{what} answered something other than a list")),
            Err(e) => Err(format!("{what} answered something other than JSON: {e}")),
        }
    }

    /// A call answered: the server is `up` again while its events are followed.
    fn answered(&self) {
        if self.following.load(std::sync::atomic::Ordering::Relaxed) {
            self.engine.delivery().set_channel_state(self.health, ChannelState::Up);
        }
    }

    /// A call was not answered: `/healthz` says so.
    fn unanswered(&self, why: &str) {
        self.engine.delivery().set_channel_state(self.health, ChannelState::Degraded(why.to_owned()));
    }
}

/// What a failed call says: a timeout as one.
fn failed(what: &str, error: reqwest::Error) -> String {
    if error.is_timeout() {
        format!("{what} did not answer within {} s", CALL_TIMEOUT.as_secs())
    } else {
        format!("{what}: {}", crate::error_chain(&error.without_url()))
    }
}

/// A prompt of opencode's that a person is asked: where, and its question once asked.
struct Open {
    session: String,
    directory: Option<String>,
    question: Option<QuestionId>,
}

struct Bridge {
    opencode: Arc<Opencode>,
    engine: Engine,
    /// Prompts asked of a person, by opencode's request id, until opencode says they are
    /// settled (a reply it took, or an answer in opencode): one is never asked twice.
    open: Mutex<HashMap<String, Open>>,
    /// The projects whose events came: after a reconnect, their pending prompts are read again.
    directories: Mutex<BTreeSet<String>>,
}

impl Bridge {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn name(&self) -> &str {
        &self.opencode.config.name
    }

    async fn run(self: Arc<Self>) {
        let stop = self.engine.stopping();
        let mut backoff = Duration::from_secs(1);
        loop {
            let ended = tokio::select! {
                ended = self.follow() => ended,
                () = stop.cancelled() => return,
            };
            self.opencode.following.store(false, std::sync::atomic::Ordering::Relaxed);
            let reason = match ended {
                Ok(()) => "the event stream ended".to_owned(),
                Err(e) => e,
            };
            tracing::warn!(opencode = self.name(), reason, "opencode is not reachable; trying again");
            self.opencode.unanswered(&reason);
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Reads the event stream until it ends, catching up on what came or went while it was
    /// down meanwhile.
    async fn follow(self: &Arc<Self>) -> Result<(), String> {
        let url = &self.opencode.config.url;
        let request = self
            .opencode
            .unbounded(reqwest::Method::GET, "/global/event", None)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        // A timeout of the whole call would end the stream: only its headers are waited for.
        let response = match tokio::time::timeout(CALL_TIMEOUT, request.send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(format!("cannot connect to {url}: {}", crate::error_chain(&e.without_url()))),
            Err(_) => return Err(format!("{url}/global/event did not answer within {} s", CALL_TIMEOUT.as_secs())),
        };
        if !response.status().is_success() {
            return Err(format!("{url}/global/event answered {}", response.status()));
        }
        self.opencode.following.store(true, std::sync::atomic::Ordering::Relaxed);
        self.engine.delivery().set_channel_state(self.opencode.health, ChannelState::Up);
        tracing::info!(opencode = self.name(), url = %url, "following opencode's events");
        // Only prompts known before this stream can have been settled unseen: one the stream
        // brings is live, and is not retracted by a list read meanwhile.
        let known: BTreeSet<String> = self.open().keys().cloned().collect();
        // Both at once: a list that hangs does not hold up the events. The catch-up ends with
        // the stream.
        let catch_up = async {
            self.catch_up(&known).await;
            std::future::pending::<()>().await;
        };
        tokio::select! {
            ended = self.events(response) => ended,
            () = catch_up => Ok(()),
        }
    }

    /// Reads the events, one `data:` line each, until the stream ends.
    async fn events(self: &Arc<Self>, response: reqwest::Response) -> Result<(), String> {
        let body = response.bytes_stream().map(|chunk| chunk.map_err(std::io::Error::other));
        let mut lines =
            FramedRead::new(tokio_util::io::StreamReader::new(body), LinesCodec::new_with_max_length(MAX_LINE));
        // After a line it could not read, the codec ends its stream once and then goes on with
        // the next line.
        let mut skipped = false;
        loop {
            match lines.next().await {
                Some(Ok(line)) => {
                    skipped = false;
                    let Some(data) = line.strip_prefix("data:") else { continue };
                    match serde_json::from_str::<Value>(data) {
                        Ok(event) => self.heard(&event),
                        Err(e) => tracing::debug!(opencode = self.name(), error = %e, "an event that is not JSON"),
                    }
                }
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    skipped = true;
                    tracing::warn!(
                        opencode = self.name(),
                        max = MAX_LINE,
                        "skipped an event line longer than askgate reads"
                    );
                }
                Some(Err(LinesCodecError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => {
                    skipped = true;
                    tracing::warn!(opencode = self.name(), "skipped an event line that is not UTF-8");
                }
                Some(Err(LinesCodecError::Io(e))) => return Err(format!("reading the event stream: {e}")),
                None if skipped => skipped = false,
                None => return Ok(()),
            }
        }
    }

    /// The stream replays nothing: what came or went while it was down is read from the lists,
    /// in every project opencode knows (also those askgate has not heard from yet). Tried again
    /// until it succeeds, while the stream lasts.
    async fn catch_up(self: &Arc<Self>, known: &BTreeSet<String>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            match self.reconcile_all(known).await {
                Ok(()) => {
                    self.opencode.answered();
                    return;
                }
                Err(why) => {
                    tracing::warn!(
                        opencode = self.name(),
                        why,
                        "could not read opencode's pending prompts; trying again"
                    );
                    self.opencode.unanswered(&why);
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn reconcile_all(self: &Arc<Self>, known: &BTreeSet<String>) -> Result<(), String> {
        self.projects().await?;
        let directories: Vec<String> =
            self.directories.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        for directory in directories {
            self.reconcile(&directory, known).await?;
        }
        Ok(())
    }

    /// Notes the projects opencode lists (`GET /project`, their `worktree`), whose pending
    /// prompts are read after each reconnect. A server without the list (404) leaves the
    /// projects heard from.
    async fn projects(&self) -> Result<(), String> {
        let Some(projects) = self.opencode.list("/project", None).await? else { return Ok(()) };
        let mut directories = self.directories.lock().unwrap_or_else(PoisonError::into_inner);
        for project in projects {
            // `/` is opencode's global project (no repository): not a project of its own.
            if let Some(worktree) =
                project.get("worktree").and_then(Value::as_str).filter(|w| *w != "/" && !w.is_empty())
            {
                directories.insert(worktree.to_owned());
            }
        }
        Ok(())
    }

    /// Asks the prompts pending in `directory` that are not asked yet, and retracts the cards of
    /// those of `known` that are no longer pending there.
    async fn reconcile(self: &Arc<Self>, directory: &str, known: &BTreeSet<String>) -> Result<(), String> {
        let mut pending = BTreeSet::new();
        for (path, kind) in [("/permission", "permission.asked"), ("/question", "question.asked")] {
            // A server without the list leaves its cards as they are.
            let Some(items) = self.opencode.list(path, Some(directory)).await? else { return Ok(()) };
            for item in items {
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    pending.insert(id.to_owned());
                }
                let event = json!({"directory": directory, "payload": {"type": kind, "properties": item}});
                self.heard(&event);
            }
        }
        let directory = Some(directory.to_owned());
        self.retract(
            |id, open| known.contains(id) && open.directory == directory && !pending.contains(id),
            "answered in opencode",
        );
        Ok(())
    }

    /// One event of the global stream: `{directory, payload: {type, properties}}`.
    fn heard(self: &Arc<Self>, event: &Value) {
        let directory = event.get("directory").and_then(Value::as_str).map(str::to_owned);
        if let Some(directory) = &directory {
            self.directories.lock().unwrap_or_else(PoisonError::into_inner).insert(directory.clone());
        }
        let payload = event.get("payload").unwrap_or(event);
        let properties = payload.get("properties").cloned().unwrap_or(Value::Null);
        let text = |key: &str| properties.get(key).and_then(Value::as_str).map(str::to_owned);
        match payload.get("type").and_then(Value::as_str).unwrap_or_default() {
            kind @ ("permission.asked" | "question.asked" | "permission.updated") => {
                let (Some(id), Some(session)) = (text("id"), text("sessionID")) else { return };
                if self.open().contains_key(&id) {
                    return;
                }
                let route = match kind {
                    "question.asked" => Route::Question { id: id.clone() },
                    "permission.updated" => Route::OldPermission { session: session.clone(), id: id.clone() },
                    _ => Route::Permission { id: id.clone() },
                };
                self.open().insert(id.clone(), Open { session, directory: directory.clone(), question: None });
                let properties = match route {
                    Route::OldPermission { .. } => prompt::reworked(&properties),
                    _ => properties,
                };
                let bridge = self.clone();
                self.engine.tasks().spawn(async move { bridge.ask(id, route, directory, properties).await });
            }
            "permission.replied" | "question.replied" | "question.rejected" => {
                if let Some(id) = text("requestID").or_else(|| text("permissionID")) {
                    self.retract(|open_id, _| *open_id == id, "answered in opencode");
                }
            }
            "session.error" | "session.idle" => {
                if let Some(session) = text("sessionID") {
                    self.retract(|_, open| open.session == session, "its opencode session stopped");
                }
            }
            _ => {}
        }
    }

    /// Forgets the prompts `which` selects, and cancels their questions still pending (one
    /// answered meanwhile keeps its reply: opencode takes a reply to a settled prompt as
    /// nothing).
    fn retract(&self, which: impl Fn(&String, &Open) -> bool, reason: &'static str) {
        let retracted: Vec<QuestionId> = {
            let mut open = self.open();
            let ids: Vec<String> = open.iter().filter(|(id, o)| which(id, o)).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| open.remove(id)).filter_map(|o| o.question).collect()
        };
        for question in retracted {
            let engine = self.engine.clone();
            self.engine.tasks().spawn(async move {
                if let Err(e) = engine.asks().cancel_external(question, reason).await {
                    tracing::error!(question = %question, error = %e, "could not retract an opencode prompt's card");
                }
            });
        }
    }

    /// Asks a person; the reply goes to opencode from the outbox once they answered.
    async fn ask(self: Arc<Self>, id: String, route: Route, directory: Option<String>, properties: Value) {
        let ask = match route {
            Route::Question { .. } => prompt::questions(&properties),
            Route::Permission { .. } | Route::OldPermission { .. } => {
                Some(prompt::permission(&properties, directory.as_deref()))
            }
        };
        let Some(mut ask) = ask else {
            self.open().remove(&id);
            return;
        };
        let config = &self.opencode.config;
        ask.answerers = config.answerers.clone().map(|users| Answerers::Users { users });
        let reply =
            CallbackSpec { url: route.url(&config.name, directory.as_deref()), headers: Vec::new(), secret: None };
        let asker = UserRef::parse(&format!("opencode:{}", config.name)).expect("a checked name makes a user");
        let asked = self.engine.asks().ask_external_with(config.conversation.clone(), ask, asker, Some(reply)).await;
        let asked = match asked {
            Ok(asked) => asked,
            Err(e) => {
                tracing::error!(opencode = self.name(), request = %id, error = %e, "could not ask opencode's prompt");
                self.open().remove(&id);
                return;
            }
        };
        let settled = match self.open().get_mut(&id) {
            Some(open) => {
                open.question = Some(asked.id);
                false
            }
            None => true,
        };
        if settled {
            // Settled in opencode while it was being asked.
            let _ = self.engine.asks().cancel_external(asked.id, "answered in opencode").await;
        }
    }
}
