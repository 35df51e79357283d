//! Remote A2A agents as functions (`[[functions]]` with `a2a = "<agent card URL>"`): askgate is
//! the agent's client. A run of the function reads the agent's card, sends the person's text as
//! a message (`SendMessage` over JSON-RPC, protocol 1.0) and follows the task it starts (the
//! call blocks until the task settles; a task still working is read again with `GetTask`,
//! waiting longer each time). A task in `input-required` needs a person: its status message is
//! asked in the conversation that started the run, and the answer is sent as the next message
//! on the same task (its `taskId` and `contextId`). A completed task's artifacts are the reply;
//! a failed, rejected or cancelled one fails the run with the agent's reason.
//!
//! As with AG-UI agents, a replay after an answer, or after askgate restarted, must not send a
//! message again whose answer is known: each round's `input-required` is kept with the run
//! ([`Context::keep`]) before it is asked, and only the round after the last kept one is sent
//! (with the same `messageId` if askgate stopped before its answer came). A round's task id is
//! kept as soon as `SendMessage` answers with it unsettled, so a replay while the task works reads it again with
//! `GetTask` instead of starting a second task.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::a2a::wire::{AGENT_CARD_PATH, JSONRPC_BINDING, METHOD_CANCEL_TASK, METHOD_GET_TASK, METHOD_SEND_MESSAGE};
use super::a2a::wire::{
    AgentCard, CancelTaskRequest, GetTaskRequest, JsonRpcId, JsonRpcRequest, JsonRpcResponse, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, Task, TaskState,
};
use super::a2a::wire::{PROTOCOL_VERSION, VERSION_HEADER, text_part};
use crate::config::{Env, RemoteAgent};
use crate::engine::{AskError, Context, Function, FunctionError};
use crate::question::Ask;

/// How long connecting to the agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait before a working task is read again; each wait doubles, up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(250);
/// The longest wait between two reads of a working task.
const MAX_POLL: Duration = Duration::from_secs(10);
/// The largest answer read from the agent (a card, a task without its history).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// The function that sends messages to the A2A agent `agent`, configured as `name`.
pub fn function(name: &str, agent: &RemoteAgent, env: &Env) -> Arc<dyn Function> {
    let http = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().unwrap_or_default();
    Arc::new(A2aRemote {
        name: name.to_owned(),
        card: card_url(&agent.url),
        token: agent.token_env.as_deref().and_then(|v| env.get(v)),
        token_env: agent.token_env.clone(),
        timeout: agent.timeout,
        http,
    })
}

/// Where the agent's card is: the URL as given when it names a `.json` document, else the
/// well-known path below it.
fn card_url(url: &str) -> String {
    if url.ends_with(".json") { url.to_owned() } else { format!("{}{AGENT_CARD_PATH}", url.trim_end_matches('/')) }
}

/// One remote A2A agent.
struct A2aRemote {
    name: String,
    card: String,
    token: Option<String>,
    token_env: Option<String>,
    timeout: Duration,
    http: reqwest::Client,
}

/// A task waiting for a person: kept with the run, so a replay asks it without sending again.
#[derive(Debug, Serialize, Deserialize)]
struct Waiting {
    task: String,
    context: Option<String>,
    prompt: String,
}

#[async_trait]
impl Function for A2aRemote {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        if let (Some(var), None) = (&self.token_env, &self.token) {
            return Err(FunctionError::failed(format!(
                "the agent `{}` needs its token: set {var} in askgate's environment",
                self.name
            )));
        }
        let run = ctx.run().id.to_string();
        let (mut text, mut on) = (input.to_owned(), None::<Waiting>);
        let mut round = 0u32;
        loop {
            let kept = format!("a2a.round.{round}");
            let waiting = match ctx.kept(&kept).await? {
                Some(json) => serde_json::from_str::<Waiting>(&json).map_err(|e| {
                    FunctionError::failed(format!("what askgate kept of round {round} is unreadable: {e}"))
                })?,
                None => {
                    let message = message(format!("{run}-{round}"), &text, on.as_ref());
                    let task = self.exchange(ctx, round, message).await?;
                    let waiting = match task {
                        Settled::Answered(reply) => return Ok(reply),
                        Settled::Waiting(waiting) => waiting,
                    };
                    let json = serde_json::to_string(&waiting).map_err(|e| FunctionError::failed(e.to_string()))?;
                    ctx.keep(&kept, &json).await?;
                    waiting
                }
            };
            let detail = format!("asked by the A2A agent `{}` (task {})", self.name, waiting.task);
            let ask = Ask::question(waiting.prompt.clone()).detail(detail).allow_custom(true);
            text = match ctx.ask(ask).await {
                Ok(answer) => answer.text(),
                Err(e @ (AskError::Declined { .. } | AskError::Timeout | AskError::Cancelled { .. })) => {
                    // The agent waits for an answer that will not come: its task is cancelled.
                    self.cancel(&waiting.task).await;
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            };
            on = Some(waiting);
            round += 1;
        }
    }
}

/// Where a task stopped.
enum Settled {
    /// It completed (or the agent answered with a message): the reply.
    Answered(String),
    /// It needs a person.
    Waiting(Waiting),
}

/// Why an exchange with the agent failed.
#[derive(Debug, thiserror::Error)]
enum RemoteError {
    #[error("could not reach the agent: {0}")]
    Unreachable(String),
    #[error("the agent answered {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("the agent's card at {card} is unusable: {why}")]
    Card { card: String, why: String },
    #[error("the agent refused the call: {message} (code {code})")]
    Rpc { code: i32, message: String },
    #[error("the agent's answer is not A2A's: {0}")]
    Unreadable(String),
    #[error("the task {state}: {reason}")]
    Ended { state: &'static str, reason: String },
    #[error("the task needs the agent's own authentication, which askgate cannot give: {0}")]
    AuthRequired(String),
    #[error("no answer from the agent within {0:?}")]
    TooLong(Duration),
}

impl A2aRemote {
    fn failure(&self, error: &RemoteError) -> FunctionError {
        FunctionError::failed(format!("the agent `{}`: {error}", self.name))
    }

    /// Round `round`: sends `message`, then follows its task until it completes, fails or needs
    /// a person. The task's id is kept with the run as soon as the agent answers with it still
    /// working, so a replay after a restart reads that task again rather than sending the
    /// message anew, which would start a second task. (Not `returnImmediately`: the answer to a
    /// later round would then show the task still `input-required` from the round before.)
    async fn exchange(&self, ctx: &mut Context, round: u32, message: Message) -> Result<Settled, FunctionError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let sent = format!("a2a.sent.{round}");
        let endpoint = self.within(deadline, self.endpoint()).await.map_err(|e| self.failure(&e))?;
        let task = match ctx.kept(&sent).await? {
            Some(id) => self.within(deadline, self.task(&endpoint, id)).await,
            None => {
                // The task's history is not needed: its status and artifacts are.
                let configuration = SendMessageConfiguration { history_length: Some(0), ..Default::default() };
                let request =
                    SendMessageRequest { message, configuration: Some(configuration), metadata: None, tenant: None };
                let answer = self.within(deadline, self.call(&endpoint, METHOD_SEND_MESSAGE, &request)).await;
                match answer.map_err(|e| self.failure(&e))? {
                    SendMessageResponse::Message(reply) => return Ok(Settled::Answered(text_of(&reply.parts))),
                    SendMessageResponse::Task(task) => {
                        if matches!(settled(&task), Ok(None)) {
                            ctx.keep(&sent, &task.id).await?;
                        }
                        Ok(task)
                    }
                }
            }
        };
        let task = task.map_err(|e| self.failure(&e))?;
        self.within(deadline, self.follow(&endpoint, task)).await.map_err(|e| self.failure(&e))
    }

    /// `work`, failed as too long when it is not done by `deadline`.
    async fn within<T>(
        &self,
        deadline: tokio::time::Instant,
        work: impl std::future::Future<Output = Result<T, RemoteError>>,
    ) -> Result<T, RemoteError> {
        tokio::time::timeout_at(deadline, work).await.map_err(|_| RemoteError::TooLong(self.timeout))?
    }

    /// Reads `task` again until it completes, fails or needs a person, waiting longer each time.
    async fn follow(&self, endpoint: &str, mut task: Task) -> Result<Settled, RemoteError> {
        let mut wait = FIRST_POLL;
        loop {
            if let Some(settled) = settled(&task)? {
                return Ok(settled);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_POLL);
            task = self.task(endpoint, task.id.clone()).await?;
        }
    }

    /// The task `id` as it stands (`GetTask`, without its history).
    async fn task(&self, endpoint: &str, id: String) -> Result<Task, RemoteError> {
        let get = GetTaskRequest { id, history_length: Some(0), tenant: None };
        self.call(endpoint, METHOD_GET_TASK, &get).await
    }

    /// Cancels `task`, as well as it can: the run ends either way.
    async fn cancel(&self, task: &str) {
        let request = CancelTaskRequest { id: task.to_owned(), tenant: None, metadata: None };
        let cancelled = async {
            let endpoint = self.endpoint().await?;
            self.call::<_, Value>(&endpoint, METHOD_CANCEL_TASK, &request).await
        };
        match tokio::time::timeout(self.timeout, cancelled).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(agent = %self.name, task, error = %e, "could not cancel the A2A task"),
            Err(_) => tracing::warn!(agent = %self.name, task, "could not cancel the A2A task in time"),
        }
    }

    /// The JSON-RPC endpoint the agent's card names.
    async fn endpoint(&self) -> Result<String, RemoteError> {
        let bad = |why: String| RemoteError::Card { card: self.card.clone(), why };
        let response = self.authorized(self.http.get(&self.card)).send().await;
        let response = response.map_err(|e| RemoteError::Unreachable(crate::error_chain(&e)))?;
        let body = success(response).await?;
        let card: AgentCard = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
        let Some(interface) = card.supported_interfaces.iter().find(|i| i.protocol_binding == JSONRPC_BINDING) else {
            let offered: Vec<&str> = card.supported_interfaces.iter().map(|i| i.protocol_binding.as_str()).collect();
            return Err(bad(format!("it offers no JSONRPC interface (it offers {offered:?})")));
        };
        endpoint_of(&self.card, &interface.url).map_err(bad)
    }

    async fn call<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        endpoint: &str,
        method: &str,
        params: &P,
    ) -> Result<R, RemoteError> {
        let params = serde_json::to_value(params).map_err(|e| RemoteError::Unreadable(e.to_string()))?;
        let request = JsonRpcRequest {
            jsonrpc: "2.0".to_owned(),
            method: method.to_owned(),
            params: Some(params),
            id: JsonRpcId::String(uuid::Uuid::new_v4().to_string()),
        };
        let post = self.http.post(endpoint).header(VERSION_HEADER, PROTOCOL_VERSION).json(&request);
        let response =
            self.authorized(post).send().await.map_err(|e| RemoteError::Unreachable(crate::error_chain(&e)))?;
        let body = success(response).await?;
        let answer: JsonRpcResponse =
            serde_json::from_slice(&body).map_err(|e| RemoteError::Unreadable(e.to_string()))?;
        if let Some(error) = answer.error {
            return Err(RemoteError::Rpc { code: error.code, message: error.message });
        }
        serde_json::from_value(answer.result.unwrap_or(Value::Null)).map_err(|e| RemoteError::Unreadable(e.to_string()))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

/// The JSON-RPC endpoint `named` by the card at `card`, resolved against it. It must have the
/// card's origin (scheme, host and port): askgate sends the agent's token there, and a card
/// naming another host would otherwise receive it for that host.
fn endpoint_of(card: &str, named: &str) -> Result<String, String> {
    let base = reqwest::Url::parse(card).map_err(|e| e.to_string())?;
    let url = base.join(named).map_err(|e| format!("`{named}`: {e}"))?;
    if url.origin() != base.origin() {
        return Err(format!(
            "its JSON-RPC endpoint {url} is not on the card's origin ({card}); askgate sends the agent's \
             token only to the card's scheme, host and port, so serve both from one origin"
        ));
    }
    Ok(url.to_string())
}

/// The body of a 2xx answer; any other is refused with the start of what it said.
async fn success(response: reqwest::Response) -> Result<Vec<u8>, RemoteError> {
    let status = response.status();
    if !status.is_success() {
        return Err(RemoteError::Refused { status: status.as_u16(), body: crate::agent::refusal(response).await });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| RemoteError::Unreachable(crate::error_chain(&e)))?;
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(RemoteError::Unreadable(format!("its answer is larger than {MAX_ANSWER} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Where `task` stands: settled (answered, or waiting for a person), failed, or still working
/// (none).
fn settled(task: &Task) -> Result<Option<Settled>, RemoteError> {
    let said = task.status.message.as_ref().map(|m| text_of(&m.parts)).unwrap_or_default();
    let ended = |state| RemoteError::Ended {
        state,
        reason: if said.is_empty() { "no reason given".to_owned() } else { said.clone() },
    };
    match task.status.state {
        TaskState::Completed => {
            let artifacts: Vec<String> =
                task.artifacts.iter().map(|a| text_of(&a.parts)).filter(|t| !t.is_empty()).collect();
            let reply = if artifacts.is_empty() { said.clone() } else { artifacts.join("\n\n") };
            Ok(Some(Settled::Answered(reply)))
        }
        TaskState::InputRequired => {
            let prompt =
                if said.is_empty() { "The agent needs your answer to go on.".to_owned() } else { said.clone() };
            Ok(Some(Settled::Waiting(Waiting { task: task.id.clone(), context: task.context_id.clone(), prompt })))
        }
        TaskState::Failed => Err(ended("failed")),
        TaskState::Rejected => Err(ended("was rejected")),
        TaskState::Canceled => Err(ended("was cancelled")),
        TaskState::AuthRequired => Err(RemoteError::AuthRequired(said.clone())),
        TaskState::Submitted | TaskState::Working | TaskState::Unspecified => Ok(None),
    }
}

/// The person's `text` as a user message, on the task that waits for it when there is one.
fn message(id: String, text: &str, on: Option<&Waiting>) -> Message {
    Message {
        message_id: id,
        context_id: on.and_then(|w| w.context.clone()),
        task_id: on.map(|w| w.task.clone()),
        role: Role::User,
        parts: vec![text_part(text)],
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// The text parts of `parts`, one paragraph each.
fn text_of(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).filter(|t| !t.trim().is_empty()).collect();
    texts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(value: serde_json::Value) -> Task {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_input_required_task_waits_with_its_status_message_as_the_prompt() {
        let t =
            task(serde_json::json!({"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Delete build/?"}]}}}));
        let Ok(Some(Settled::Waiting(w))) = settled(&t) else { panic!("not waiting") };
        assert_eq!((w.task.as_str(), w.context.as_deref(), w.prompt.as_str()), ("t1", Some("c1"), "Delete build/?"));
    }

    #[test]
    fn a_rejected_task_fails_with_the_agents_reason() {
        let t = task(serde_json::json!({"id": "t1", "status": {"state": "TASK_STATE_REJECTED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "not allowed"}]}}}));
        let Err(e) = settled(&t) else { panic!("not failed") };
        assert_eq!(e.to_string(), "the task was rejected: not allowed");
    }

    #[test]
    fn a_completed_task_answers_with_its_artifacts_text() {
        let t = task(serde_json::json!({"id": "t1", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "Deleted build/."}]}]}));
        let Ok(Some(Settled::Answered(reply))) = settled(&t) else { panic!("not answered") };
        assert_eq!(reply, "Deleted build/.");
    }

    #[test]
    fn the_endpoint_must_share_the_cards_origin() {
        let card = "http://127.0.0.1:9/.well-known/agent-card.json";
        assert_eq!(endpoint_of(card, "/a2a").unwrap(), "http://127.0.0.1:9/a2a");
        assert_eq!(endpoint_of(card, "http://127.0.0.1:9/rpc").unwrap(), "http://127.0.0.1:9/rpc");
        for elsewhere in ["http://evil.example/a2a", "https://127.0.0.1:9/a2a", "http://127.0.0.1:10/a2a"] {
            let e = endpoint_of(card, elsewhere).unwrap_err();
            assert!(e.contains(elsewhere) && e.contains(card), "{e}");
        }
    }

    #[test]
    fn a_card_url_is_the_well_known_path_unless_it_names_a_document() {
        assert_eq!(card_url("http://127.0.0.1:9/"), "http://127.0.0.1:9/.well-known/agent-card.json");
        assert_eq!(card_url("http://h/agent.json"), "http://h/agent.json");
    }
}
