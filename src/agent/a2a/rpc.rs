//! `POST /a2a`: A2A's JSON-RPC binding, behind an agent token. Each method reads its params into
//! the protocol's types and answers a JSON-RPC response, or, for the two streaming methods, a
//! stream of them (server-sent events) that ends with the task's final status.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Request};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::A2a;
use super::task::{Record, ask_of, ended, task_of};
use super::wire::{
    self, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    GetTaskRequest, JsonRpcError, JsonRpcId, JsonRpcRequest, JsonRpcResponse, ListTaskPushNotificationConfigsRequest,
    SendMessageRequest, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, is_terminal,
};
use crate::engine::{CallbackSpec, ExternalAskError};
use crate::http::{ApiError, Asker, Caller, Role, read_body};
use crate::question::{Answerers, Question, QuestionId};

/// The largest request: a message is a question's text and its fields.
const MAX_BODY: usize = 1024 * 1024;

/// The outbox row each task has: its outcome goes to the task's push configs when it ends.
pub(super) const PUSH_ROUTE: &str = "a2a://push";

/// A JSON-RPC error: its code and what the sender should do.
struct Failure(i32, String);

impl Failure {
    fn params(message: impl Into<String>) -> Self {
        Self(wire::INVALID_PARAMS, message.into())
    }

    fn not_found(id: &str) -> Self {
        Self(wire::TASK_NOT_FOUND, format!("no task {id} of yours: tasks are the ids SendMessage answered"))
    }

    fn internal(error: impl std::fmt::Display) -> Self {
        Self(wire::INTERNAL_ERROR, format!("askgate could not do it: {error}"))
    }
}

fn respond(id: JsonRpcId, result: Result<Value, Failure>) -> JsonRpcResponse {
    let (result, error) = match result {
        Ok(result) => (Some(result), None),
        Err(Failure(code, message)) => (None, Some(JsonRpcError { code, message, data: None })),
    };
    JsonRpcResponse { jsonrpc: "2.0".to_owned(), result, error, id }
}

/// The endpoint.
pub(super) async fn endpoint(Asker(caller): Asker, Extension(a2a): Extension<Arc<A2a>>, request: Request) -> Response {
    if a2a.config.is_none() {
        return ApiError::not_found("askgate is an A2A agent once channels.toml has an [a2a] table").into_response();
    }
    if caller.role != Role::Agent {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_token",
            "/a2a takes an agent token, not the operator's, which could answer the questions it asks",
        )
        .into_response();
    }
    let body = match read_body(request, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let request: JsonRpcRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let code =
                if serde_json::from_slice::<Value>(&body).is_ok() { wire::INVALID_REQUEST } else { wire::PARSE_ERROR };
            let failure = Failure(code, format!("not a JSON-RPC 2.0 request: {e}"));
            return axum::Json(respond(JsonRpcId::Null, Err(failure))).into_response();
        }
    };
    let (id, params) = (request.id, request.params.unwrap_or(Value::Null));
    let result = match request.method.as_str() {
        wire::METHOD_SEND_MESSAGE => send(&a2a, &caller, params).await.and_then(|task| to_value(json!({"task": task}))),
        wire::METHOD_SEND_STREAMING_MESSAGE => {
            return match send(&a2a, &caller, params).await {
                Ok(task) => stream(&a2a, id, task),
                Err(failure) => axum::Json(respond(id, Err(failure))).into_response(),
            };
        }
        wire::METHOD_SUBSCRIBE_TO_TASK => {
            return match subscribe(&a2a, &caller, params).await {
                Ok(task) => stream(&a2a, id, task),
                Err(failure) => axum::Json(respond(id, Err(failure))).into_response(),
            };
        }
        wire::METHOD_GET_TASK => get(&a2a, &caller, params).await.and_then(to_value),
        wire::METHOD_CANCEL_TASK => cancel(&a2a, &caller, params).await.and_then(to_value),
        wire::METHOD_CREATE_TASK_PUSH_NOTIFICATION_CONFIG => create_push(&a2a, &caller, params).await,
        wire::METHOD_GET_TASK_PUSH_NOTIFICATION_CONFIG => get_push(&a2a, &caller, params).await,
        wire::METHOD_LIST_TASK_PUSH_NOTIFICATION_CONFIGS => list_push(&a2a, &caller, params).await,
        wire::METHOD_DELETE_TASK_PUSH_NOTIFICATION_CONFIG => delete_push(&a2a, &caller, params).await,
        wire::METHOD_LIST_TASKS => Err(Failure(
            wire::UNSUPPORTED_OPERATION,
            "askgate lists no tasks: keep the ids SendMessage answered, and read each with GetTask".into(),
        )),
        wire::METHOD_GET_EXTENDED_AGENT_CARD => Err(Failure(
            -32007,
            "askgate has no extended agent card: the public one at /.well-known/agent-card.json is all".into(),
        )),
        other => Err(Failure(wire::METHOD_NOT_FOUND, format!("askgate does not answer `{other}` (A2A v1.0 names)"))),
    };
    axum::Json(respond(id, result)).into_response()
}

fn to_value(value: impl serde::Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(Failure::internal)
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, Failure> {
    serde_json::from_value(params).map_err(|e| Failure::params(format!("params: {e}")))
}

/// `SendMessage`: the message asked as a question in `[a2a] conversation`, as a task.
async fn send(a2a: &A2a, caller: &Caller, request: Value) -> Result<Task, Failure> {
    let request: SendMessageRequest = params(request)?;
    let config = a2a.config.as_ref().ok_or_else(|| Failure::internal("no [a2a] table"))?;
    if let Some(task) = &request.message.task_id {
        return Err(Failure(
            wire::UNSUPPORTED_OPERATION,
            format!(
                "task {task} takes no further messages: each question is a task of its own; send a new message without a taskId"
            ),
        ));
    }
    let mut ask = ask_of(&request.message).map_err(Failure::params)?;
    ask.answerers = config.answerers.clone().map(|users| Answerers::Users { users });
    let push = request.configuration.and_then(|c| c.task_push_notification_config);
    if let Some(push) = &push {
        check_push(a2a, push)?;
    }
    let row = CallbackSpec { url: PUSH_ROUTE.to_owned(), headers: Vec::new(), secret: None };
    let asked = a2a.engine.asks().ask_external_with(config.conversation.clone(), ask, caller.user.clone(), Some(row));
    let question = asked.await.map_err(|e| match e {
        ExternalAskError::Invalid(e) => Failure::params(e.to_string()),
        other => Failure::internal(other),
    })?;
    let id = question.id.to_string();
    let context = request.message.context_id.clone().unwrap_or_else(|| question.run.to_string());
    let push = push.map(|push| named(push, &id)).into_iter().collect();
    let record = Record { context, asker: caller.user.to_string(), push };
    keep(a2a, &id, &record).await?;
    Ok(task_of(&question, &record))
}

/// A task's question and record, when it is the caller's.
async fn load(a2a: &A2a, caller: &Caller, id: &str) -> Result<(Question, Record), Failure> {
    let question_id: QuestionId = id.parse().map_err(|_| Failure::not_found(id))?;
    let note = a2a.engine.records().note(&Record::key(id)).await.map_err(Failure::internal)?;
    let record: Record = match note {
        Some(note) => serde_json::from_str(&note.value).map_err(Failure::internal)?,
        None => return Err(Failure::not_found(id)),
    };
    if record.asker != caller.user.to_string() {
        return Err(Failure::not_found(id));
    }
    let question = a2a.engine.records().question(question_id).await.map_err(Failure::internal)?;
    Ok((question.ok_or_else(|| Failure::not_found(id))?, record))
}

async fn keep(a2a: &A2a, id: &str, record: &Record) -> Result<(), Failure> {
    let value = serde_json::to_string(record).map_err(Failure::internal)?;
    a2a.engine.records().remember(&Record::key(id), &value).await.map_err(Failure::internal)
}

async fn get(a2a: &A2a, caller: &Caller, request: Value) -> Result<Task, Failure> {
    let request: GetTaskRequest = params(request)?;
    let (question, record) = load(a2a, caller, &request.id).await?;
    Ok(task_of(&question, &record))
}

/// `CancelTask`: the question is cancelled, its cards retracted.
async fn cancel(a2a: &A2a, caller: &Caller, request: Value) -> Result<Task, Failure> {
    let request: CancelTaskRequest = params(request)?;
    let (question, record) = load(a2a, caller, &request.id).await?;
    let reason = format!("cancelled by {} over A2A", caller.user);
    let cancelled = a2a.engine.asks().cancel_external(question.id, &reason).await.map_err(Failure::internal)?;
    let (question, record) = if cancelled { load(a2a, caller, &request.id).await? } else { (question, record) };
    let task = task_of(&question, &record);
    if !cancelled && task.status.state != wire::TaskState::Canceled {
        return Err(Failure(
            wire::TASK_NOT_CANCELABLE,
            format!("task {} has ended: it can no longer be canceled", task.id),
        ));
    }
    Ok(task)
}

/// `SubscribeToTask`: a task still waiting, to stream.
async fn subscribe(a2a: &A2a, caller: &Caller, request: Value) -> Result<Task, Failure> {
    let request: SubscribeToTaskRequest = params(request)?;
    let (question, record) = load(a2a, caller, &request.id).await?;
    let task = task_of(&question, &record);
    if is_terminal(task.status.state) {
        return Err(Failure(wire::UNSUPPORTED_OPERATION, format!("task {} has ended: read it with GetTask", task.id)));
    }
    Ok(task)
}

/// The stream of a waiting `task`: the task, then once the person decided its answer and
/// final status. A stream cut by askgate's stop ends without them: subscribe again.
fn stream(a2a: &A2a, id: JsonRpcId, task: Task) -> Response {
    let (engine, record_key) = (a2a.engine.clone(), Record::key(&task.id));
    let event = move |item: &StreamResponse| {
        let response = respond(id.clone(), serde_json::to_value(item).map_err(Failure::internal));
        SseEvent::default().data(serde_json::to_string(&response).unwrap_or_default())
    };
    let items = async_stream(engine, record_key, task);
    let events = futures_util::StreamExt::map(items, move |item| Ok::<_, std::convert::Infallible>(event(&item)));
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

/// The items of [`stream`].
fn async_stream(
    engine: crate::engine::Engine,
    record_key: String,
    task: Task,
) -> impl futures_util::Stream<Item = StreamResponse> {
    let first = futures_util::stream::once(std::future::ready(StreamResponse::Task(task.clone())));
    let rest = futures_util::stream::once(async move {
        let Ok(id) = task.id.parse::<QuestionId>() else { return Vec::new() };
        let resolved = match engine.asks().wait_resolved(id).await {
            Ok(Some(question)) if !question.is_pending() => question,
            _ => return Vec::new(),
        };
        let record = match engine.records().note(&record_key).await {
            Ok(Some(note)) => serde_json::from_str(&note.value).unwrap_or_default(),
            _ => Record { context: task.context_id.clone().unwrap_or_default(), ..Record::default() },
        };
        ended(&task_of(&resolved, &record))
    });
    let rest = futures_util::StreamExt::flat_map(rest, futures_util::stream::iter);
    futures_util::StreamExt::chain(first, rest)
}

/// A push config as kept: with an id (given, or made) and its task's.
fn named(mut push: TaskPushNotificationConfig, task: &str) -> TaskPushNotificationConfig {
    if push.id.is_empty() {
        push.id = uuid::Uuid::new_v4().to_string();
    }
    push.task_id = task.to_owned();
    push
}

/// Refuses a push target the callbacks' rules do not let askgate POST to.
fn check_push(a2a: &A2a, push: &TaskPushNotificationConfig) -> Result<(), Failure> {
    a2a.outbound.rules().check(&push.url).map_err(|e| Failure::params(format!("push notification url: {e}")))
}

async fn create_push(a2a: &A2a, caller: &Caller, request: Value) -> Result<Value, Failure> {
    let push: TaskPushNotificationConfig = params(request)?;
    check_push(a2a, &push)?;
    let task = push.task_id.clone();
    let (_, mut record) = load(a2a, caller, &task).await?;
    let push = named(push, &task);
    record.push.retain(|kept| kept.id != push.id);
    record.push.push(push.clone());
    keep(a2a, &task, &record).await?;
    to_value(push)
}

async fn get_push(a2a: &A2a, caller: &Caller, request: Value) -> Result<Value, Failure> {
    let request: GetTaskPushNotificationConfigRequest = params(request)?;
    let (_, record) = load(a2a, caller, &request.task_id).await?;
    let push = record.push.into_iter().find(|push| push.id == request.id);
    let push =
        push.ok_or_else(|| Failure::params(format!("task {} has no push config {}", request.task_id, request.id)))?;
    to_value(push)
}

async fn list_push(a2a: &A2a, caller: &Caller, request: Value) -> Result<Value, Failure> {
    let request: ListTaskPushNotificationConfigsRequest = params(request)?;
    let (_, record) = load(a2a, caller, &request.task_id).await?;
    to_value(wire::ListTaskPushNotificationConfigsResponse { configs: record.push, next_page_token: String::new() })
}

async fn delete_push(a2a: &A2a, caller: &Caller, request: Value) -> Result<Value, Failure> {
    let request: DeleteTaskPushNotificationConfigRequest = params(request)?;
    let (_, mut record) = load(a2a, caller, &request.task_id).await?;
    let before = record.push.len();
    record.push.retain(|push| push.id != request.id);
    if record.push.len() == before {
        return Err(Failure::params(format!("task {} has no push config {}", request.task_id, request.id)));
    }
    keep(a2a, &request.task_id, &record).await?;
    Ok(json!({}))
}
