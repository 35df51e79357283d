//! opencode's permission prompts and questions, asked of a person: askgate follows a running
//! opencode server's event stream (`GET /global/event`, every project, reconnecting), turns
//! `permission.asked` into an approval and `question.asked` into its questions, and replies
//! through `POST /permission/{id}/reply` and `POST /question/{id}/reply`. A prompt answered in
//! opencode first (`permission.replied`, `question.replied`/`rejected`), or whose session was
//! stopped (`session.error`, `session.idle`), retracts its card. Servers from before opencode's
//! permission rework send `permission.updated` instead, and take the reply at `POST
//! /session/{session}/permissions/{id}` (`{response}`); both are read.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::config::OpencodeConfig;
use crate::engine::{ChannelState, Engine};
use crate::question::{Answerers, Ask, Outcome, Question, QuestionId, UserRef};

/// The longest wait between two tries to reach opencode.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Follows each configured opencode server until askgate stops.
pub fn start(configs: &[OpencodeConfig], engine: &Engine) {
    for config in configs {
        let bridge = Arc::new(Bridge::new(config.clone(), engine.clone()));
        tokio::spawn(bridge.run());
    }
}

/// A prompt of opencode's that a person is asked: which kind, where, and the question(s).
#[derive(Clone)]
struct Open {
    session: String,
    directory: Option<String>,
    questions: Vec<QuestionId>,
    /// Asked by `permission.updated`: replied to at the route of those servers.
    legacy: bool,
}

struct Bridge {
    config: OpencodeConfig,
    engine: Engine,
    http: reqwest::Client,
    /// `opencode:<name>`: who asks, and its line in `/healthz`.
    asker: UserRef,
    health: &'static str,
    /// Prompts asked of a person, by opencode's request id.
    open: Mutex<HashMap<String, Open>>,
    /// The projects whose events came: after a reconnect, their pending prompts are read again.
    directories: Mutex<BTreeSet<String>>,
}

impl Bridge {
    fn new(config: OpencodeConfig, engine: Engine) -> Self {
        let asker = UserRef::parse(&format!("opencode:{}", config.name)).expect("a checked name makes a user");
        let health: &'static str = Box::leak(format!("opencode:{}", config.name).into_boxed_str());
        Self {
            config,
            engine,
            http: reqwest::Client::new(),
            asker,
            health,
            open: Mutex::default(),
            directories: Mutex::default(),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn request(&self, method: reqwest::Method, path: &str, directory: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.config.url));
        if let Some(directory) = directory {
            request = request.query(&[("directory", directory)]);
        }
        match self.config.password_env.as_deref().and_then(|var| std::env::var(var).ok()) {
            Some(password) => request.basic_auth(&self.config.username, Some(password)),
            None => request,
        }
    }

    async fn run(self: Arc<Self>) {
        let stop = self.engine.stopping();
        let mut backoff = Duration::from_secs(1);
        loop {
            let ended = tokio::select! {
                ended = self.follow() => ended,
                () = stop.cancelled() => return,
            };
            let reason = match ended {
                Ok(()) => "the event stream ended".to_owned(),
                Err(e) => e,
            };
            tracing::warn!(opencode = %self.config.name, reason, "opencode is not reachable; trying again");
            self.engine.set_channel_state(self.health, ChannelState::Degraded(reason));
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Reads the event stream until it ends.
    async fn follow(self: &Arc<Self>) -> Result<(), String> {
        let response = self
            .request(reqwest::Method::GET, "/global/event", None)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.config.url))?;
        if !response.status().is_success() {
            return Err(format!("{}/global/event answered {}", self.config.url, response.status()));
        }
        self.engine.set_channel_state(self.health, ChannelState::Up);
        tracing::info!(opencode = %self.config.name, url = %self.config.url, "following opencode's events");
        // The stream replays nothing: what came or went while it was down is read from the lists,
        // in every project opencode knows (also those askgate has not heard from yet).
        self.projects().await;
        let directories: Vec<String> =
            self.directories.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        for directory in directories {
            self.reconcile(&directory).await;
        }
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        while let Some(chunk) = body.next().await {
            buffer.extend_from_slice(&chunk.map_err(|e| format!("reading the event stream: {e}"))?);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if let Some(data) = line.strip_prefix(b"data:") {
                    match serde_json::from_slice::<Value>(data) {
                        Ok(event) => self.heard(&event),
                        Err(e) => {
                            tracing::debug!(opencode = %self.config.name, error = %e, "an event that is not JSON")
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Notes the projects opencode lists (`GET /project`, their `worktree`), whose pending
    /// prompts are read after each reconnect. A server without the list leaves the projects
    /// heard from.
    async fn projects(&self) {
        let Ok(listed) = self.request(reqwest::Method::GET, "/project", None).send().await else { return };
        let Ok(Value::Array(projects)) = listed.json::<Value>().await else { return };
        let mut directories = self.directories.lock().unwrap_or_else(PoisonError::into_inner);
        for project in projects {
            // `/` is opencode's global project (no repository): not a project of its own.
            if let Some(worktree) =
                project.get("worktree").and_then(Value::as_str).filter(|w| *w != "/" && !w.is_empty())
            {
                directories.insert(worktree.to_owned());
            }
        }
    }

    /// Asks the prompts pending in `directory` that are not asked yet, and retracts the cards of
    /// those that are no longer pending there.
    async fn reconcile(self: &Arc<Self>, directory: &str) {
        let mut pending = BTreeSet::new();
        for (path, kind) in [("/permission", "permission.asked"), ("/question", "question.asked")] {
            let listed = self.request(reqwest::Method::GET, path, Some(directory)).send().await;
            let Ok(listed) = listed else { return };
            let Ok(Value::Array(items)) = listed.json::<Value>().await else { return };
            for item in items {
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    pending.insert(id.to_owned());
                }
                let event = json!({"directory": directory, "payload": {"type": kind, "properties": item}});
                self.heard(&event);
            }
        }
        let directory = Some(directory.to_owned());
        self.retract(|id, open| open.directory == directory && !pending.contains(id), "answered in opencode");
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
                let legacy = kind == "permission.updated";
                let open = Open { session, directory: directory.clone(), questions: Vec::new(), legacy };
                self.open().insert(id.clone(), open);
                let properties = if legacy { reworked(&properties) } else { properties };
                let (bridge, question) = (self.clone(), kind == "question.asked");
                tokio::spawn(async move { bridge.ask(id, directory, properties, question).await });
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

    /// Cancels the questions of the prompts `which` selects.
    fn retract(&self, which: impl Fn(&String, &Open) -> bool, reason: &'static str) {
        let retracted: Vec<QuestionId> = {
            let mut open = self.open();
            let ids: Vec<String> = open.iter().filter(|(id, o)| which(id, o)).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| open.remove(id)).flat_map(|o| o.questions).collect()
        };
        for question in retracted {
            let engine = self.engine.clone();
            tokio::spawn(async move {
                if let Err(e) = engine.cancel_external(question, reason).await {
                    tracing::error!(question = %question, error = %e, "could not retract an opencode prompt's card");
                }
            });
        }
    }

    /// Asks a person and replies to opencode, unless opencode settled it first.
    async fn ask(self: Arc<Self>, id: String, directory: Option<String>, properties: Value, question: bool) {
        let asks = if question { questions(&properties) } else { vec![permission(&properties, directory.as_deref())] };
        let mut answered = Vec::new();
        for mut ask in asks {
            ask.answerers = self.config.answerers.clone().map(|users| Answerers::Users { users });
            let asked = self.engine.ask_external(self.config.conversation.clone(), ask, self.asker.clone()).await;
            let asked = match asked {
                Ok(asked) => asked,
                Err(e) => {
                    tracing::error!(opencode = %self.config.name, request = %id, error = %e, "could not ask opencode's prompt");
                    self.open().remove(&id);
                    return;
                }
            };
            if !self.asked(&id, asked.id) {
                // Settled in opencode while it was being asked.
                let _ = self.engine.cancel_external(asked.id, "answered in opencode").await;
                return;
            }
            let Some(resolved) = self.settle(asked).await else { return };
            // A declined or expired question ends the prompt.
            let done = !question || !matches!(resolved.outcome, Some(Outcome::Answered { .. }));
            answered.push(resolved);
            if done {
                break;
            }
        }
        let Some(open) = self.open().remove(&id) else {
            return; // Settled in opencode meanwhile.
        };
        let (path, body) = match question {
            true => reply_to_question(&id, &answered),
            false if open.legacy => reply_to_old_permission(&open.session, &id, &answered[0]),
            false => reply_to_permission(&id, &answered[0]),
        };
        let Some(body) = body else { return };
        let sent = self.request(reqwest::Method::POST, &path, directory.as_deref()).json(&body).send().await;
        match sent {
            Ok(response) if response.status().is_success() => {
                tracing::info!(opencode = %self.config.name, request = %id, "replied to opencode");
            }
            Ok(response) => {
                tracing::warn!(opencode = %self.config.name, request = %id, status = %response.status(), "opencode refused the reply");
            }
            Err(e) => {
                tracing::warn!(opencode = %self.config.name, request = %id, error = %e, "could not reply to opencode")
            }
        }
    }

    /// Notes that `question` asks the prompt `id`; false when the prompt was settled meanwhile.
    fn asked(&self, id: &str, question: QuestionId) -> bool {
        match self.open().get_mut(id) {
            Some(open) => {
                open.questions.push(question);
                true
            }
            None => false,
        }
    }

    /// The question once resolved; none when it is gone or askgate stops.
    async fn settle(&self, question: Question) -> Option<Question> {
        // Still pending, askgate stops: opencode keeps the prompt, and lists it after the restart.
        self.engine.wait_resolved(question.id).await.ok().flatten().filter(|q| !q.is_pending())
    }
}

/// A permission prompt as an approval: what opencode would do, what "always" would allow, where.
fn permission(properties: &Value, directory: Option<&str>) -> Ask {
    let kind = properties.get("permission").and_then(Value::as_str).unwrap_or("permission");
    let strings = |key: &str| -> Vec<String> {
        properties
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let metadata = properties.get("metadata").cloned().unwrap_or(Value::Null);
    let what = metadata
        .get("command")
        .or_else(|| metadata.get("filepath"))
        .and_then(Value::as_str)
        .map_or_else(|| strings("patterns").join(" "), str::to_owned);
    let mut detail = Vec::new();
    if let Some(diff) = metadata.get("diff").and_then(Value::as_str) {
        detail.push(format!("```\n{}\n```", crate::text::clip(diff, 3000, "…")));
    }
    let always = strings("always");
    if !always.is_empty() {
        detail.push(format!("Allow always lets {} through in opencode.", always.join(", ")));
    }
    let session: String =
        properties.get("sessionID").and_then(Value::as_str).unwrap_or_default().chars().take(12).collect();
    detail.push(match directory {
        Some(directory) => format!("in {directory} · session {session}"),
        None => format!("session {session}"),
    });
    Ask::approval(format!("{kind}: {what}")).detail(detail.join("\n"))
}

/// A `permission.updated` prompt ({id, type, pattern, title, metadata}) in the shape of
/// `permission.asked`: its `type` is the permission, its `pattern` (one or a list) the patterns.
fn reworked(properties: &Value) -> Value {
    let mut reworked = properties.clone();
    if let Some(object) = reworked.as_object_mut() {
        let permission = properties.get("type").cloned().unwrap_or(Value::Null);
        let patterns = match properties.get("pattern") {
            Some(Value::String(p)) => json!([p]),
            Some(list @ Value::Array(_)) => list.clone(),
            _ => json!([]),
        };
        object.insert("permission".into(), permission);
        object.insert("patterns".into(), patterns);
    }
    reworked
}

/// What a server from before the permission rework is told: `{response}` at the session's
/// route, which takes no message (a reason the person gave stays on askgate).
fn reply_to_old_permission(session: &str, id: &str, question: &Question) -> (String, Option<Value>) {
    let (_, body) = reply_to_permission(id, question);
    let body = body.map(|b| json!({"response": b["reply"]}));
    (format!("/session/{session}/permissions/{id}"), body)
}

/// A question prompt's questions as one ask: one alone is an ordinary question, several are
/// answered together.
fn questions(properties: &Value) -> Vec<Ask> {
    let questions = properties.get("questions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let ask = match questions {
        [one] => {
            let multi = one.get("multiple").and_then(Value::as_bool).unwrap_or(false);
            crate::hooks::choices(one, multi, one.get("custom").and_then(Value::as_bool).unwrap_or(true), None)
        }
        many => match crate::hooks::together(many, "multiple", true) {
            Ok(ask) => Some(ask),
            Err(e) => {
                tracing::warn!(error = %e, "opencode's questions cannot be asked");
                None
            }
        },
    };
    ask.into_iter().collect()
}

/// What opencode is told of a permission's approval; none when it was not decided here.
fn reply_to_permission(id: &str, question: &Question) -> (String, Option<Value>) {
    let path = format!("/permission/{id}/reply");
    let body = match &question.outcome {
        // askgate's own grant ("granted") lets this one through; the person's "always" is
        // opencode's too.
        Some(Outcome::Answered { value })
            if value == "always" && question.answered_via != Some(crate::question::Surface::Gateway) =>
        {
            Some(json!({"reply": "always"}))
        }
        Some(Outcome::Answered { .. }) => Some(json!({"reply": "once"})),
        Some(Outcome::Declined { feedback }) => Some(match feedback {
            Some(feedback) => json!({"reply": "reject", "message": feedback}),
            None => json!({"reply": "reject"}),
        }),
        Some(Outcome::Expired { .. }) => {
            Some(json!({"reply": "reject", "message": "nobody answered this permission on askgate in time"}))
        }
        Some(Outcome::Cancelled { .. }) | None => None,
    };
    (path, body)
}

/// What opencode is told of its questions: the labels chosen for each, in order, or a
/// rejection when one was declined or not answered.
fn reply_to_question(id: &str, questions: &[Question]) -> (String, Option<Value>) {
    let mut answers = Vec::new();
    for question in questions {
        match &question.outcome {
            Some(Outcome::Answered { value }) => {
                for (_, value) in crate::hooks::by_question(question, value) {
                    answers.push(match value {
                        Value::Array(labels) => Value::Array(labels),
                        value => json!([value]),
                    });
                }
            }
            Some(Outcome::Cancelled { .. }) | None => return (String::new(), None),
            Some(_) => return (format!("/question/{id}/reject"), Some(json!({}))),
        }
    }
    (format!("/question/{id}/reply"), Some(json!({"answers": answers})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Kind, Status};

    fn answered(ask: Ask, value: Value) -> Question {
        let mut q = crate::question::test_question(ask);
        (q.status, q.outcome) = (Status::Answered, Some(Outcome::Answered { value }));
        q
    }

    #[test]
    fn several_questions_are_asked_together_and_answered_in_opencodes_order() {
        let properties = json!({"questions": [
            {"question": "Which colour?", "header": "Colour", "options": [{"label": "red"}, {"label": "blue", "description": "calm"}]},
            {"question": "Which sizes?", "header": "Colour", "multiple": true, "options": [{"label": "S"}, {"label": "M"}]}]});
        let asks = questions(&properties);
        assert_eq!(asks.len(), 1, "one ask for both");
        let form = asks[0].form.clone().unwrap();
        assert_eq!(
            (form.fields[0].key.as_str(), form.fields[1].key.as_str()),
            ("Colour", "Colour 2"),
            "headers stay apart"
        );
        assert_eq!(asks[0].kind, Some(Kind::Question));
        let q = answered(asks[0].clone(), json!({"Colour": "blue", "Colour 2": ["S", "M"]}));
        let (path, body) = reply_to_question("que_1", &[q]);
        assert_eq!(path, "/question/que_1/reply");
        assert_eq!(body, Some(json!({"answers": [["blue"], ["S", "M"]]})));
        let one = questions(&json!({"questions": [{"question": "Sure?", "options": [{"label": "yes"}]}]}));
        assert!(one[0].form.is_none(), "one question alone is an ordinary question");
    }
}
