//! Who is calling: the bearer token read once per request, as the operator, an agent, or a
//! person with a credential of their own (a personal token from `askgate token add`, or the
//! browser session a `/web` link became), and what each may do.
//!
//! - The operator token administers and answers where the operator is an answerer.
//! - An agent token asks and reads what it asked; it never answers.
//! - A person answers the questions whose answerers include them (as `web:<name>`, or the chat
//!   identity a link signed in), asks when their credential may, and administers only when it
//!   says `admin`. Without `admin` they see only the questions they may answer.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState, Role, SURFACE_HEADER};
use crate::channel::web::own_conversation;
use crate::engine::Resolver;
use crate::question::{Conversation, Question, Surface, UserRef};
use crate::run::Run;
use crate::store::Powers;

/// Who a bearer token says is calling.
#[derive(Clone, Debug)]
pub struct Caller {
    /// `api:operator`, `agent:<name>`, or the person (`web:alice`, `telegram:42`).
    pub user: UserRef,
    /// The token's name.
    pub name: String,
    /// What kind of token it is.
    pub role: Role,
    /// What a person's credential may do (everything for the operator, asking for an agent).
    pub may: Powers,
    /// Where: `web` from askgate's page, `api` otherwise.
    pub via: Surface,
    /// The credential from the store (a personal token, a browser session, an agent token
    /// made at run time): what a long-lived request holds, so that it ends when that is
    /// revoked or expires. None for the configured tokens, which change only with a restart.
    pub credential: Option<Credential>,
}

/// A credential kept in the store, as a request found it.
#[derive(Clone, Debug)]
pub struct Credential {
    /// Its name (`alice`, `session:…`, `agent:ci`): what a revocation names.
    pub name: String,
    /// The SHA-256 of its secret.
    pub digest: String,
    /// When it expires, in unix milliseconds.
    pub expires_at: Option<i64>,
    /// How many revocations askgate had heard of before it was read.
    pub heard: u64,
}

/// What a request that outlasts its check holds of its caller's credential: [`Held::ended`]
/// completes when that is revoked or expires, never for a configured token.
pub(super) struct Held(Option<crate::engine::Hold>);

impl Held {
    /// Nothing held: for a request that does not wait.
    pub(super) fn none() -> Self {
        Self(None)
    }

    /// Holds `caller`'s credential, if it has one from the store.
    pub(super) async fn of(state: &AppState, caller: &Caller) -> Result<Self, ApiError> {
        let Some(c) = &caller.credential else { return Ok(Self(None)) };
        Ok(Self(Some(state.engine.people().hold_login(&c.name, &c.digest, c.expires_at, c.heard).await?)))
    }

    /// Completes when the credential no longer works.
    pub(super) async fn ended(&self) {
        match &self.0 {
            Some(hold) => hold.ended().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the credential no longer works.
    pub(super) fn is_ended(&self) -> bool {
        self.0.as_ref().is_some_and(crate::engine::Hold::is_ended)
    }

    /// The answer to a request whose credential stopped working while it waited.
    pub(super) fn refusal() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the token was revoked or expired while the request waited",
        )
    }
}

impl Caller {
    /// The caller as someone answering: the operator is a person like any other, who answers
    /// where the question's answerers include them.
    pub fn resolver(&self) -> Resolver {
        Resolver::person(self.user.clone(), self.via)
    }

    /// Whether it sees every question and run (the operator, or a person who administers).
    pub fn sees_all(&self) -> bool {
        self.role == Role::Operator || self.role == Role::Person && self.may.admin
    }

    /// Whether it may see `question`: everyone who sees all; an agent, what it asked (checked
    /// by the caller, which knows the runs); a person, those they may answer and those of
    /// their own conversation.
    pub fn sees(&self, question: &Question) -> bool {
        self.sees_all()
            || self.role == Role::Person
                && (question.admits(&self.user, None)
                    || question.conversation.is_some() && question.conversation == own_conversation(&self.user))
    }

    /// Whether it may take back `grant` (given on `approval`, when that is still stored):
    /// everyone who sees all; a person who may answer, when they set it or may answer the
    /// approvals it stands for (as `/revoke` in a chat, but never as "anyone in a group").
    pub fn may_revoke(&self, grant: &crate::store::Grant, approval: Option<&Question>) -> bool {
        self.sees_all()
            || self.role == Role::Person
                && self.may.answer
                && (self.user.is(&grant.granted_by) || approval.is_some_and(|q| q.admits(&self.user, None)))
    }

    /// Refuses (403) a person asking in a conversation that is not theirs: their own web
    /// conversation, or one whose channel lets them start runs (`allowed_users`). Everyone
    /// else is checked as before.
    pub(super) fn may_ask_in(
        &self,
        engine: &crate::engine::Engine,
        conversation: &Conversation,
    ) -> Result<(), ApiError> {
        if self.role != Role::Person || self.may.admin {
            return Ok(());
        }
        let own = own_conversation(&self.user).as_ref() == Some(conversation);
        if own || conversation.channel() != "web" && engine.policies().lets_in(conversation, &self.user) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_your_conversation",
            format!(
                "{} may ask in its own conversation ({}) and where the channel's allowed_users name it",
                self.user,
                own_conversation(&self.user).map_or_else(|| "none".to_owned(), |c| c.to_string())
            ),
        ))
    }

    /// Whether it may see `run`: everyone who sees all, and whoever started it.
    pub fn sees_run(&self, run: &Run) -> bool {
        self.sees_all() || run.initiator == self.user
    }
}

/// The bearer token of a request, or why there is none.
fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    // The scheme is case-insensitive (RFC 9110): `bearer` and `BEARER` are `Bearer`.
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "send Authorization: Bearer <token>"))
}

/// Checks the bearer token: the configured ones first (kept in memory), then the people's
/// credentials in the store, so a token added or revoked while askgate runs counts at once.
pub(super) async fn authorize(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let given = bearer(headers)?;
    // The surfaces an API client can be: the page, the TUI, or any other client. A client
    // names its own surface (the token still says who answers); none of the platforms'.
    let via = match headers.get(SURFACE_HEADER).map(|v| v.to_str()) {
        None | Some(Ok("api")) => Surface::API,
        Some(Ok("web")) => Surface::WEB,
        Some(Ok("tui")) => Surface::TUI,
        Some(_) => return Err(ApiError::bad_request(format!("{SURFACE_HEADER} is `web`, `tui` or `api`"))),
    };
    if let Some(token) = state.tokens.find(given) {
        let user = UserRef::parse(&token.holder()).map_err(ApiError::internal)?;
        let may = match token.role() {
            Role::Agent => Powers { ask: true, ..Powers::default() },
            _ => Powers { answer: true, ask: true, admin: true },
        };
        return Ok(Caller { user, name: token.name().to_owned(), role: token.role(), may, via, credential: None });
    }
    let heard = state.engine.people().revocations_heard();
    let Some(login) = state.engine.people().login(given).await? else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "the token is not valid"));
    };
    let credential = Credential { name: login.name.clone(), digest: login.digest, expires_at: login.expires_at, heard };
    // An agent's token made at run time (`askgate token add <name> --agent`) is an agent's
    // like a configured one: it asks as `agent:<name>`, never answers.
    let (role, name, may) = match crate::engine::people::agent_name(&login.person) {
        Some(agent) => (Role::Agent, agent.to_owned(), Powers { ask: true, ..Powers::default() }),
        None => (Role::Person, login.name, login.may),
    };
    Ok(Caller { user: login.person, name, role, may, via, credential: Some(credential) })
}

/// Refuses a request to `/mcp` (which has no extractor of ours) without an agent token: 401
/// without a valid token, 403 with the operator's or a person's, which could answer the
/// agent's own questions. The agent's name goes to the MCP server in the request's extensions.
/// A request with an agent token made at run time ends when that is revoked: its response
/// stops (a held call, a session's stream), and its session is closed as the client's `DELETE`
/// would close it (`mcp`, the MCP service itself, takes that `DELETE`).
pub(super) async fn agents_only(
    State((state, mcp)): State<(AppState, crate::mcp::McpService)>,
    mut request: Request,
    next: axum::middleware::Next,
) -> Response {
    match authorize(&state, request.headers()).await {
        Ok(caller) if caller.role == Role::Agent => {
            request.extensions_mut().insert(crate::mcp::AgentName(caller.name.clone()));
            let token = crate::mcp::Token(match &caller.credential {
                Some(credential) => credential.digest.clone(),
                None => format!("configured:{}", caller.name),
            });
            request.extensions_mut().insert(token.clone());
            if caller.credential.is_none() {
                return next.run(request).await;
            }
            let held = match Held::of(&state, &caller).await {
                Ok(held) => held,
                Err(e) => return e.into_response(),
            };
            let mut session = McpSession::of(request.headers(), token);
            let Some(response) = answer_while_held(&held, next.run(request)).await else {
                session.close(mcp).await;
                return Held::refusal().into_response();
            };
            // A new session is named in the answer to its `initialize`.
            if session.id.is_none() {
                session.id = response.headers().get(MCP_SESSION).cloned();
            }
            cut_when_ended(response, held, async move {
                tracing::info!(agent = %caller.name, "an agent's revoked token ended its MCP session");
                session.close(mcp).await;
            })
        }
        Ok(_) => ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_token",
            "/mcp takes an agent token, not the operator's or a person's: an agent holding a token that answers could \
             answer its own questions. Use ASKGATE_AGENT_TOKEN or askgate-agent.token beside the database (askgate \
             mcp reads them), or an [[agents]] token",
        )
        .into_response(),
        Err(e) => {
            let mut response = e.into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Ends what a request with a token made at run time holds when that is revoked (a Claude
/// Code hook waiting for a person, its message stream): 401 before it answered, its answer cut
/// after. The handler checks the token itself and answers a refusal as it does.
pub(super) async fn until_revoked(
    State(state): State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let held = match authorize(&state, request.headers()).await {
        Ok(caller) if caller.credential.is_some() => match Held::of(&state, &caller).await {
            Ok(held) => held,
            Err(e) => return e.into_response(),
        },
        _ => return next.run(request).await,
    };
    let Some(response) = answer_while_held(&held, next.run(request)).await else {
        return Held::refusal().into_response();
    };
    cut_when_ended(response, held, async {})
}

/// The answer `respond` gives, unless `held` ends first (the answer is then dropped, and with
/// it what the handler held).
async fn answer_while_held(held: &Held, respond: impl Future<Output = Response>) -> Option<Response> {
    tokio::select! {
        biased;
        () = held.ended() => None,
        response = respond => Some(response),
    }
}

/// `response`, whose body ends when `held` does (an event stream, a held MCP call); `then` runs
/// once it has.
fn cut_when_ended(response: Response, held: Held, then: impl Future<Output = ()> + Send + 'static) -> Response {
    let (parts, body) = response.into_parts();
    let ended = async move {
        held.ended().await;
        then.await;
    };
    let body = futures_util::StreamExt::take_until(body.into_data_stream(), Box::pin(ended));
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// The header that names an MCP session.
const MCP_SESSION: &str = "mcp-session-id";

/// The MCP session a request belongs to, with the protocol revision it speaks and the token
/// it was opened with.
struct McpSession {
    id: Option<header::HeaderValue>,
    version: Option<header::HeaderValue>,
    token: crate::mcp::Token,
}

impl McpSession {
    fn of(headers: &HeaderMap, token: crate::mcp::Token) -> Self {
        Self { id: headers.get(MCP_SESSION).cloned(), version: headers.get("mcp-protocol-version").cloned(), token }
    }

    /// Ends the session, if there is one (2026-07-28 calls have none), as the client's
    /// `DELETE` would.
    async fn close(&self, mut mcp: crate::mcp::McpService) {
        use tower_service::Service;
        let Some(id) = &self.id else { return };
        let mut delete = Request::new(axum::body::Body::empty());
        *delete.method_mut() = axum::http::Method::DELETE;
        delete.headers_mut().insert(MCP_SESSION, id.clone());
        if let Some(version) = &self.version {
            delete.headers_mut().insert("mcp-protocol-version", version.clone());
        }
        // The session takes a DELETE only with its own token.
        delete.extensions_mut().insert(self.token.clone());
        // A Router is always ready, and answers every request (an error is a response too).
        let ready = std::future::poll_fn(|cx| Service::<Request>::poll_ready(&mut mcp, cx)).await;
        if ready.is_ok() {
            let closed = mcp.call(delete).await.map(|r| r.status());
            tracing::debug!(?closed, "a revoked agent's MCP session was closed");
        }
    }
}

/// A caller who may answer: the operator token, or a person whose credential may. As an
/// extractor it runs before the body is read, so an unauthorized request is refused as such
/// whatever its body; an agent token gets 403.
pub struct Answerer(pub Caller);

impl axum::extract::FromRequestParts<AppState> for Answerer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = authorize(state, &parts.headers).await?;
        match caller.role {
            Role::Agent => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "agent_token",
                "an agent token asks and reads what it asked; answering takes the operator token or a person's own",
            )),
            Role::Person if !caller.may.answer => {
                Err(ApiError::new(StatusCode::FORBIDDEN, "may_not_answer", "this token may not answer"))
            }
            _ => Ok(Self(caller)),
        }
    }
}

/// A caller who reads the questions: the operator, or any person (who sees those they may
/// answer). An agent token gets 403: it reads only what it asked, one by one.
pub struct Reader(pub Caller);

impl axum::extract::FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = authorize(state, &parts.headers).await?;
        if caller.role == Role::Agent {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "agent_token",
                "an agent token asks and reads what it asked; listing and following questions take the operator token \
                 or a person's own",
            ));
        }
        Ok(Self(caller))
    }
}

/// A caller who administers: the operator token, or a person whose credential says `admin`.
pub struct Admin(pub Caller);

impl axum::extract::FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = authorize(state, &parts.headers).await?;
        if !caller.sees_all() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_admin",
                "administering takes the operator token or a person's own token made with --may admin",
            ));
        }
        Ok(Self(caller))
    }
}

/// The caller, authorized by any token: asking (questions, runs) and reading what it asked.
pub struct Asker(pub Caller);

impl axum::extract::FromRequestParts<AppState> for Asker {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        authorize(state, &parts.headers).await.map(Asker)
    }
}

impl Asker {
    /// Refuses a person whose credential may not ask (403).
    pub(super) fn asking(&self) -> Result<(), ApiError> {
        if self.0.may.ask {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "may_not_ask",
            "this token may not ask questions or start runs (askgate token add <name> --may answer,ask)",
        ))
    }
}
