//! `/api/questions` and `/api/runs` (`/api/grants` is in [`super::grants`]).

use std::ops::ControlFlow;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::auth::Held;
use super::bodies::{Asked, OutcomeView, QuestionPage, QuestionView, ReceiptView, RunStarted, RunView};
use super::{Answerer, ApiError, AppState, Asker, Caller, JsonBody, Params, Reader, Role, conversation_param};
use crate::engine::{CallbackSpec, ExternalAskError, Found, RunRequest, StartError};
use crate::question::{
    Answerers, AskWire, Choice, Conversation, Kind, Mode, Question, QuestionId, Receipt, RunId, Status, UserRef,
};
use crate::store::{Delivery, QuestionFilter};

/// The longest a long-poll waits.
const MAX_WAIT: u64 = 60;

/// The question a full id or a unique prefix names (cards show 8 characters).
async fn find(state: &AppState, id: &str) -> Result<Question, ApiError> {
    match state.engine.records().find_question(id).await? {
        Found::One(question) => Ok(*question),
        Found::Ambiguous => Err(ApiError::not_found(format!(
            "`{}` names more than one question; use more characters",
            crate::text::clip(id, 40, "…")
        ))),
        Found::Nothing => Err(no_question(id)),
    }
}

/// 404 for `id`: also for a question the caller may not see, as if it did not exist.
fn no_question(id: &str) -> ApiError {
    ApiError::not_found(format!("no question `{}`", crate::text::clip(id, 40, "…")))
}

/// As [`find`], for `caller`: an agent finds only the questions it asked (read with who asked
/// it; a short id is found first), a person only those they may see (others are not found).
async fn find_for(state: &AppState, caller: &Caller, id: &str) -> Result<Question, ApiError> {
    let seen = match caller.role {
        Role::Agent => {
            let full = if let Ok(full) = id.parse() { full } else { find(state, id).await?.id };
            state.engine.records().asked_by(full, &caller.user).await?
        }
        _ => Some(find(state, id).await?).filter(|question| caller.sees(question)),
    };
    seen.ok_or_else(|| no_question(id))
}

/// The question a person answers by its id: as [`find_for`], but one they may not answer is
/// refused as theirs not to answer (403 `not_authorized`, as the docs promise; its id came
/// from a card they were shown), never described.
async fn find_to_answer(state: &AppState, caller: &Caller, id: &str) -> Result<Question, ApiError> {
    if caller.role == Role::Agent {
        return find_for(state, caller, id).await;
    }
    let question = find(state, id).await?;
    if !caller.sees(&question) {
        return Err(not_yours());
    }
    Ok(question)
}

/// A question's answerers do not include the caller.
fn not_yours() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "not_authorized",
        "not yours to answer: the question's answerers do not include you",
    )
}

/// A question with its rendered cards: what every surface shows.
pub(super) async fn snapshot(state: &AppState, question: &Question) -> Result<QuestionView, ApiError> {
    let deliveries = state.engine.records().deliveries(&[question.id]).await?;
    Ok(snapshot_with(question, &deliveries))
}

fn snapshot_with(question: &Question, deliveries: &[Delivery]) -> QuestionView {
    QuestionView {
        question: question.clone(),
        short_id: question.id.short(),
        deliveries: deliveries.iter().filter(|d| d.question == question.id).cloned().collect(),
    }
}

/// The default page size of a listing, and the largest one asked for.
const PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    /// Only this conversation's questions (`telegram:-100123`).
    #[schemars(with = "Option<Conversation>")]
    conversation: Option<String>,
    /// Only those in this status; `all` for every status (default: `pending`).
    #[schemars(extend("enum" = ["pending", "answered", "declined", "expired", "cancelled", "all"]))]
    status: Option<String>,
    /// Only those of this kind.
    #[schemars(extend("enum" = ["question", "confirm", "approval"]))]
    kind: Option<String>,
    /// How many to a page (default 100).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
    /// Where the page starts: the `next` of the page before.
    cursor: Option<String>,
}

/// `{"questions": [...], "next": "<cursor>"}`: a page, and the cursor of the next one (null at
/// the end). Two reads per page whatever its size: the questions, and their cards.
pub(super) async fn list(
    Reader(caller): Reader,
    State(state): State<AppState>,
    Params(query): Params<ListQuery>,
) -> Result<Response, ApiError> {
    let conversation = conversation_param(query.conversation.as_deref())?;
    let status = match query.status.as_deref() {
        None | Some("pending") => Some(Status::Pending),
        Some("all") => None,
        Some(other) => Some(other.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "status `{other}` is not pending, answered, declined, expired, cancelled or all"
            ))
        })?),
    };
    let limit = match query.limit {
        None => PAGE,
        Some(n @ 1..=MAX_PAGE) => n,
        Some(n) => return Err(ApiError::bad_request(format!("limit {n} is not between 1 and {MAX_PAGE}"))),
    };
    let kind = query
        .kind
        .as_deref()
        .map(|k| {
            k.parse::<Kind>()
                .map_err(|_| ApiError::bad_request(format!("kind `{k}` is not question, confirm or approval")))
        })
        .transpose()?;
    let filter = QuestionFilter { conversation, status, kind };
    let (questions, next) =
        state.engine.records().questions_page(&filter, query.cursor.as_deref(), limit).await.map_err(|e| match e {
            crate::store::StoreError::BadCursor(_) => ApiError::bad_request(e.to_string()),
            other => other.into(),
        })?;
    // A person sees the questions they may answer: a page may hold fewer than `limit`.
    let questions: Vec<Question> = questions.into_iter().filter(|q| caller.sees(q)).collect();
    let ids: Vec<QuestionId> = questions.iter().map(|q| q.id).collect();
    let deliveries = state.engine.records().deliveries(&ids).await?;
    let questions = questions.iter().map(|q| snapshot_with(q, &deliveries)).collect();
    Ok(axum::Json(QuestionPage { questions, next }).into_response())
}

pub(super) async fn get_one(
    Asker(caller): Asker,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let question = find_for(&state, &caller, &id).await?;
    Ok(axum::Json(snapshot(&state, &question).await?).into_response())
}

/// The API's own keys of `POST /api/questions`; the rest is an [`AskWire`].
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Placement {
    /// Where to ask (`telegram:-100123`); its channel must be configured.
    #[schemars(with = "Conversation")]
    conversation: String,
    /// `question` (the default), `confirm`, `approval` or `form` (with `schema`).
    #[serde(default)]
    #[schemars(extend("enum" = ["question", "confirm", "approval", "form"]))]
    kind: Option<String>,
    /// Who may answer (`telegram:42`); default: the channel's `allowed_users` when it names people.
    #[serde(default)]
    #[schemars(with = "Option<Vec<UserRef>>")]
    answerers: Option<Vec<String>>,
    /// Where askgate POSTs the outcome once it is known (the body `GET …/outcome` answers).
    #[serde(default)]
    callback: Option<CallbackBody>,
}

/// A callback: askgate POSTs the outcome there once it is known, signed (`X-Askgate-Timestamp`,
/// `X-Askgate-Signature: v1=…` as the webhook channel signs) with an `Idempotency-Key` that is
/// the same on every attempt; anything but a 2xx is tried again for 25 hours.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CallbackBody {
    /// An `https` URL to a public address, or a target `[callbacks] allow` lists.
    url: String,
    /// Headers sent with it (not askgate's own, nor HTTP's: `Host`, `Content-Length`,
    /// `Transfer-Encoding`, `Connection`, `X-Askgate-*`, `X-Forwarded-*`, …).
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    /// The secret that signs it; default: the one `gateway.callback_secret_env` names.
    #[serde(default)]
    secret: Option<String>,
}

impl CallbackBody {
    /// The callback as the engine keeps it, once checked.
    fn spec(self, state: &AppState) -> Result<CallbackSpec, ApiError> {
        let Some(rules) = &state.callback_rules else {
            return Err(ApiError::bad_request("this askgate takes no callbacks"));
        };
        let headers: Vec<(String, String)> = self.headers.into_iter().collect();
        rules.check(&self.url, &headers).map_err(ApiError::bad_request)?;
        if self.secret.as_deref().is_some_and(str::is_empty) || self.secret.is_none() && !state.callback_secret {
            return Err(ApiError::bad_request(
                "a callback is signed: give it a \"secret\", or set the variable gateway.callback_secret_env names",
            ));
        }
        Ok(CallbackSpec { url: self.url, headers, secret: self.secret })
    }
}

pub(super) async fn create(
    asker: Asker,
    State(state): State<AppState>,
    JsonBody(mut body): JsonBody<Map<String, Value>>,
) -> Result<Response, ApiError> {
    asker.asking()?;
    state.person_limits.count(&asker.0)?;
    let operator = asker.0;
    let malformed = |e: serde_json::Error| ApiError::bad_request(format!("malformed JSON body: {e}"));
    let wire = AskWire::take(&mut body).map_err(malformed)?;
    let placement: Placement = serde_json::from_value(Value::Object(body)).map_err(malformed)?;
    let conversation = Conversation::parse(&placement.conversation)
        .map_err(|e| ApiError::bad_request(format!("conversation: {e}")))?;
    operator.may_ask_in(&state.engine, &conversation)?;
    let kind = match placement.kind.as_deref() {
        None => Kind::Question,
        Some(k) => k
            .parse()
            .map_err(|_| ApiError::bad_request(format!("kind `{k}` is not question, confirm, approval or form")))?,
    };
    let mut ask = wire.into_ask(kind).map_err(ApiError::bad_request)?;
    agents_escalate_nowhere(&operator, &ask)?;
    let named = agents_name_nobody(&operator, users_param(placement.answerers.as_deref())?)?;
    ask.answerers = named.map(|users| Answerers::Users { users });
    let callback = placement.callback.map(|c| c.spec(&state)).transpose()?;
    let question =
        state.engine.asks().ask_external_with(conversation, ask, operator.user, callback).await.map_err(refused)?;
    // Just asked: its cards go out after this answer (`GET /api/questions/{id}` lists them).
    let view = snapshot_with(&question, &[]);
    Ok((StatusCode::CREATED, axum::Json(Asked { id: question.id, status: question.status, question: view }))
        .into_response())
}

/// The error an agent's refused ask answers with.
pub fn refused(error: ExternalAskError) -> ApiError {
    match error {
        ExternalAskError::Invalid(e) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_ask", e.to_string()),
        ExternalAskError::NotServed(e) => not_served(&e),
        ExternalAskError::Answerers(e) => answerers_error(&e),
        ExternalAskError::ShuttingDown => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "askgate is shutting down")
        }
        ExternalAskError::Store(e) => e.into(),
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct WaitQuery {
    /// Seconds to wait for the outcome while the question is pending (0 to 60; default 0).
    #[serde(default)]
    #[schemars(extend("maximum" = MAX_WAIT, "default" = 0))]
    wait: u64,
}

pub(super) async fn outcome(
    Asker(caller): Asker,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Params(query): Params<WaitQuery>,
) -> Result<Response, ApiError> {
    let asks = state.engine.asks();
    // A full id is watched before the question is read (to check the caller may see it), so
    // that an answer between the two is not missed and the question is read once.
    let watch = id.parse().ok().map(|full| asks.watch_outcome(full));
    let wait = Duration::from_secs(query.wait.min(MAX_WAIT));
    // A long-poll keeps this future and the watch while it waits: its checks are boxed apart (their
    // reads do not size this one) and break with the answer now, or go on with the question's id
    // and the credential that holds the wait; neither the question read nor the caller is kept.
    let (state_, id_) = (&state, &id);
    let checked = Box::pin(async move {
        let seen = find_for(state_, &caller, id_).await?;
        if !seen.is_pending() || wait.is_zero() {
            return Ok(ControlFlow::Break(outcome_of(&seen)));
        }
        // A wait ends when the token that holds it is revoked, and then says nothing of the question.
        Ok::<_, ApiError>(ControlFlow::Continue((seen.id, Held::of(state_, &caller).await?)))
    });
    let (seen, held) = match checked.await? {
        ControlFlow::Break(now) => return Ok(now),
        ControlFlow::Continue(waits) => waits,
    };
    // The question as it stands once the wait is over: gone (None), still pending (Some(None)).
    let waiting = async {
        match watch {
            Some(watch) => watch.resolution(wait).await.map(Some),
            // A prefix found the question before it was watched: watched now, and read again.
            None => Box::pin(asks.wait_outcome(seen, wait)).await.map(|q| q.map(Some)),
        }
    };
    let waited = tokio::select! {
        biased;
        () = held.ended() => return Err(Held::refusal()),
        waited = waiting => waited?,
    };
    if held.is_ended() {
        return Err(Held::refusal());
    }
    Ok(match waited {
        Some(Some(question)) => outcome_of(&question),
        Some(None) => (StatusCode::ACCEPTED, axum::Json(OutcomeView::pending(seen))).into_response(),
        None => return Err(no_question(&id)),
    })
}

/// A question's outcome as `GET …/outcome` answers it: 202 while it is pending.
fn outcome_of(question: &Question) -> Response {
    let status = if question.is_pending() { StatusCode::ACCEPTED } else { StatusCode::OK };
    (status, axum::Json(OutcomeView::from(question))).into_response()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Reply {
    /// An option (its label or 1-based number), a list for a multi-select, true/false for a
    /// confirm, `once`/`always` for an approval, or text where free text is allowed.
    value: Value,
    /// A label for whoever answered with the token: shown in quotes before the token's person
    /// (`“Alice” (api:operator)`); askgate does not vouch for it. Letters, digits, spaces,
    /// emoji and `.`, `-`, `_`, `'` (nothing that could make it read as an id or a surface:
    /// no parenthesis, quote, colon or `@`), at most 64 characters.
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Reject {
    /// Why, for the function (and the agent behind it).
    #[serde(default)]
    feedback: Option<String>,
    /// As in [`Reply`].
    #[serde(default)]
    name: Option<String>,
}

pub(super) async fn reply(
    Answerer(caller): Answerer,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Reply>,
) -> Result<Response, ApiError> {
    state.person_limits.count(&caller)?;
    let mut resolver = caller.resolver();
    resolver.name = typed_name(body.name.as_deref(), &resolver.user)?;
    let question = find_to_answer(&state, &caller, &id).await?;
    let choice = match question.choice_from_value(&body.value) {
        Ok(choice) => Some(choice),
        Err(_) if !question.is_pending() => None,
        Err(e) => return receipt_response(Receipt::InvalidChoice { id: question.id, hint: e.hint }),
    };
    let receipt = state.engine.claims().resolve_choice(&question, choice, &resolver).await?;
    receipt_response(receipt)
}

pub(super) async fn reject(
    Answerer(caller): Answerer,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Reject>,
) -> Result<Response, ApiError> {
    state.person_limits.count(&caller)?;
    let mut resolver = caller.resolver();
    resolver.name = typed_name(body.name.as_deref(), &resolver.user)?;
    let question = find_to_answer(&state, &caller, &id).await?;
    let feedback = body.feedback.filter(|f| !f.trim().is_empty());
    let receipt = state.engine.claims().resolve_choice(&question, Some(Choice::Decline(feedback)), &resolver).await?;
    receipt_response(receipt)
}

/// A receipt as a response: 200 when this attempt resolved the question, 202 when a quorum
/// approval counted it and waits for more, 409 when it was resolved before (with what it was
/// resolved to) or this approver was counted before, 422 for a choice that does not fit.
fn receipt_response(receipt: Receipt) -> Result<Response, ApiError> {
    match receipt {
        Receipt::Resolved { .. } => Ok(axum::Json(ReceiptView { receipt }).into_response()),
        // A quorum approval counted it and waits for more.
        Receipt::Counted { .. } => Ok((StatusCode::ACCEPTED, axum::Json(ReceiptView { receipt })).into_response()),
        Receipt::AlreadyCounted { .. } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_approved",
            "this approver was counted already; the approval waits for others",
        )
        .with_receipt(receipt)),
        Receipt::AlreadyResolvedSame { .. } | Receipt::AlreadyResolvedConflict { .. } | Receipt::Expired { .. } => {
            Err(ApiError::new(StatusCode::CONFLICT, "already_resolved", "the question was already resolved")
                .with_receipt(receipt))
        }
        Receipt::InvalidChoice { ref hint, .. } => {
            Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_choice", hint.clone()).with_receipt(receipt))
        }
        Receipt::Unknown { ref reason } => Err(ApiError::not_found(reason.clone())),
        Receipt::NotAuthorized { .. } => Err(not_yours()),
        Receipt::OwnRequest { .. } => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "own_request",
            "you asked for this approval; it needs approvals from others",
        )
        .with_receipt(receipt)),
    }
}

/// A name typed beside a token: a label, shown in quotes before who the token says answered
/// (`“Alice” (api:operator)`), never as a platform handle (a leading `@` is dropped), since the
/// token does not vouch for it. One that could read as another identity is refused (400).
fn typed_name(name: Option<&str>, user: &UserRef) -> Result<Option<String>, ApiError> {
    let Some(name) = name else { return Ok(None) };
    match crate::question::typed_name(name) {
        Ok(name) => Ok(name.map(|name| format!("{name} ({user})"))),
        Err(c) => Err(ApiError::bad_request(format!(
            "name: `{}` cannot be in a name (letters, digits, spaces, emoji and . - _ ' can: a name must not read \
             like an id or a surface)",
            crate::text::safe(&c.to_string())
        ))),
    }
}

/// `answerers` as the caller named them: an agent names nobody (403 `agent_answerers`). Who
/// answers an agent is the operator's choice (the channel's `allowed_users`), so an agent cannot
/// pick the people who approve what it, or a function it starts, asks for.
fn agents_name_nobody(caller: &Caller, named: Option<Vec<UserRef>>) -> Result<Option<Vec<UserRef>>, ApiError> {
    if caller.role == Role::Agent && named.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent_answerers",
            "an agent does not choose who answers: leave out `answerers` (the channel's allowed_users answer)",
        ));
    }
    Ok(named)
}

/// An agent's ask escalates only as configured (403 `agent_answerers`): naming where or to whom
/// would let it choose who approves it, as `answerers` would.
fn agents_escalate_nowhere(caller: &Caller, ask: &crate::question::Ask) -> Result<(), ApiError> {
    let named = ask.nudges.escalate_to.is_some() || ask.nudges.escalate_answerers.is_some();
    let why = "an agent does not choose who answers: leave out `escalate_to` and `escalate_answerers`";
    let refused = || ApiError::new(StatusCode::FORBIDDEN, "agent_answerers", why);
    if caller.role == Role::Agent && named { Err(refused()) } else { Ok(()) }
}

/// A list of users from a body: each `channel:id`.
fn users_param(users: Option<&[String]>) -> Result<Option<Vec<UserRef>>, ApiError> {
    users
        .map(|users| {
            users
                .iter()
                .map(|u| UserRef::parse(u).map_err(|e| ApiError::bad_request(format!("answerers: {e}"))))
                .collect()
        })
        .transpose()
}

fn not_served(e: &crate::engine::NotServed) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unknown_conversation", e.to_string())
}

fn answerers_error(e: &crate::engine::AnswerersError) -> ApiError {
    let code = match e {
        crate::engine::AnswerersError::Empty => "invalid_answerers",
        crate::engine::AnswerersError::Required { .. } => "answerers_required",
    };
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, e.to_string())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("dependentRequired" = {"answerers": ["conversation"]}))]
pub(super) struct NewRun {
    /// The configured function's name.
    function: String,
    /// Where its questions are asked; none: a headless run, answered through the API.
    #[serde(default)]
    #[schemars(with = "Option<Conversation>")]
    conversation: Option<String>,
    /// What the function is given.
    #[serde(default)]
    input: String,
    /// Answer when the run ends (200 with the run) instead of at once (202 with its id).
    #[serde(default)]
    wait: bool,
    /// Who may answer the run's questions (users as `channel:id`).
    #[serde(default)]
    #[schemars(with = "Option<Vec<UserRef>>")]
    answerers: Option<Vec<String>>,
    /// Where askgate POSTs the run (the body `GET /api/runs/{id}` answers) once it ends; not
    /// with `wait`.
    #[serde(default)]
    callback: Option<CallbackBody>,
}

pub(super) async fn start_run(
    asker: Asker,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<NewRun>,
) -> Result<Response, ApiError> {
    asker.asking()?;
    state.person_limits.count(&asker.0)?;
    let operator = asker.0;
    let conversation = conversation_param(body.conversation.as_deref())?;
    if let Some(c) = &conversation {
        operator.may_ask_in(&state.engine, c)?;
    }
    let named = agents_name_nobody(&operator, users_param(body.answerers.as_deref())?)?;
    let mut request = RunRequest::new(body.function, conversation.clone(), operator.user).input(body.input);
    match &conversation {
        Some(c) => {
            state.engine.delivery().check_served(c).map_err(|e| not_served(&e))?;
            request =
                request.answerers(state.engine.policies().api_answerers(c, named).map_err(|e| answerers_error(&e))?);
        }
        None if named.is_some() => {
            return Err(ApiError::bad_request("answerers apply to a run in a conversation; send \"conversation\" too"));
        }
        None => {}
    }
    let refused = |e: StartError| match e {
        StartError::UnknownFunction(_) => ApiError::not_found(e.to_string()),
        StartError::NotAllowed(_) => ApiError::new(StatusCode::FORBIDDEN, "not_allowed", e.to_string()),
        StartError::NotServed(e) => not_served(&e),
        StartError::ShuttingDown => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", e.to_string()),
        // Nothing was accepted: the caller can try again once the store writes again.
        StartError::Store(store) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the run could not be stored, so it was not started: {}", crate::error_chain(&store)),
        ),
        StartError::Aborted(_) => ApiError::internal(e),
    };
    let callback = body.callback.map(|c| c.spec(&state)).transpose()?;
    if body.wait {
        if callback.is_some() {
            return Err(ApiError::bad_request("a callback is for a run you do not wait for: send \"wait\": false"));
        }
        let run = state.engine.runner().run_to_end(request).await.map_err(refused)?;
        return Ok(axum::Json(RunView { run }).into_response());
    }
    // 202 only once the run is stored: its id is then found, also after a crash.
    let id = state.engine.runner().start_stored_run(request, Mode::FollowUp, callback).await.map_err(refused)?;
    Ok((StatusCode::ACCEPTED, axum::Json(RunStarted { id, status: "running" })).into_response())
}

pub(super) async fn get_run(
    Asker(caller): Asker,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id: RunId = id.parse().map_err(|_| ApiError::not_found("no such run"))?;
    // A run is first written when it first asks or ends; until then it is not found. An agent
    // finds only its own.
    let run = state.engine.records().run(id).await?.filter(|run| caller.sees_run(run));
    let run = run.ok_or_else(|| ApiError::not_found(format!("no run {id} (yet)")))?;
    Ok(axum::Json(RunView { run }).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `handler` makes.
    fn future_size<Fut>(
        _handler: impl FnOnce(Asker, State<AppState>, Path<String>, Params<WaitQuery>) -> Fut,
    ) -> usize {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_long_poll_waits_in_a_small_future() {
        // Kept up to a minute, thousands at once. Unoptimised (as tests are): 3,592 bytes with the
        // checks and the question inline, 1,744 with the checks inline alone, about 1,200 now.
        let size = future_size(outcome);
        assert!(size <= 1_536, "the long-poll's future is {size} bytes");
    }

    #[test]
    fn an_ask_refused_for_the_stop_answers_service_unavailable() {
        let error = refused(ExternalAskError::ShuttingDown);
        assert_eq!((error.status, error.code), (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"));
    }
}
