//! People's own sign-in over HTTP: who a token is (`GET /api/me`), whom a `/web` link signs in
//! (`POST /api/signin/check`, which does not use it), the link exchanged for a browser session
//! once the person agreed (`POST /api/signin`), and personal tokens (and agents' tokens made at
//! run time) made, listed and revoked by an administrator (`/api/tokens`, what `askgate token`
//! calls). A revocation ends what the token holds open at once.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Admin, ApiError, AppState, Asker, JsonBody, Role};
use crate::engine::people::valid_token_name;
use crate::question::UserRef;
use crate::store::{Login, Powers};

/// Who a token is.
#[derive(Serialize, JsonSchema)]
pub(super) struct Me {
    /// Who answers or asks with it: `api:operator`, `agent:<name>`, `web:<name>`, or the chat
    /// identity a `/web` link signed in (`telegram:42`).
    #[schemars(with = "String")]
    user: UserRef,
    /// The token's name.
    name: String,
    /// `operator`, `agent` or `person`.
    role: &'static str,
    /// What it may do.
    may: Powers,
}

pub(super) async fn me(Asker(caller): Asker) -> Response {
    let role = match caller.role {
        Role::Operator => "operator",
        Role::Agent => "agent",
        Role::Person => "person",
    };
    axum::Json(Me { user: caller.user, name: caller.name, role, may: caller.may }).into_response()
}

/// A `/web` link's secret, to exchange for a session.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SignIn {
    /// What follows `#signin=` in the link.
    link: String,
    /// Whom the person agreed to be signed in as (what `POST /api/signin/check` said): a link
    /// of someone else's is refused (409 `not_this_person`) and stays unused.
    #[serde(default, rename = "as")]
    #[schemars(with = "Option<String>")]
    signs_in_as: Option<String>,
}

/// A `/web` link's secret, to see whom it signs in.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LinkCheck {
    /// What follows `#signin=` in the link.
    link: String,
}

/// Whom a `/web` link signs in, before anyone uses it.
#[derive(Serialize, JsonSchema)]
pub(super) struct LinkFor {
    /// The chat identity the link signs a browser in as (`telegram:42`).
    #[schemars(with = "String")]
    user: UserRef,
    /// Until when the link may be used, in unix milliseconds.
    expires_at: Option<i64>,
}

fn link_not_valid() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "link_not_valid",
        "this sign-in link was used already, has expired, or is not one: send /web again for a new one",
    )
}

/// Whom a link would sign in, without using it: the page shows this and signs in only once
/// the person agrees.
pub(super) async fn check_link(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<LinkCheck>,
) -> Result<Response, ApiError> {
    match state.engine.people().sign_in_link(&body.link).await? {
        Some(link) => Ok(axum::Json(LinkFor { user: link.person, expires_at: link.expires_at }).into_response()),
        None => Err(link_not_valid()),
    }
}

/// A browser session: its token, and whose it is.
#[derive(Serialize, JsonSchema)]
pub(super) struct SignedIn {
    /// The session's token: `Authorization: Bearer <token>` until it expires.
    token: String,
    /// Who answers with it (the chat identity that asked for the link).
    #[schemars(with = "String")]
    user: UserRef,
    /// What it may do.
    may: Powers,
    /// When it expires, in unix milliseconds.
    expires_at: Option<i64>,
}

pub(super) async fn sign_in(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<SignIn>,
) -> Result<Response, ApiError> {
    if let Some(agreed) = &body.signs_in_as {
        let link = state.engine.people().sign_in_link(&body.link).await?.ok_or_else(link_not_valid)?;
        if link.person.as_str() != agreed {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_this_person",
                format!("this link signs in as {}, not as {agreed}; it was not used", link.person),
            ));
        }
    }
    match state.engine.people().use_sign_in_link(&body.link).await? {
        Some((token, login)) => {
            tracing::info!(person = %login.person, session = %login.name, "a browser signed in with a link");
            Ok(axum::Json(SignedIn { token, user: login.person, may: login.may, expires_at: login.expires_at })
                .into_response())
        }
        None => Err(link_not_valid()),
    }
}

/// A personal token to make.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewToken {
    /// Its name; the person is `web:<name>` (lower-case letters, digits, `.`, `_`, `-`).
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9._-]+$"))]
    name: String,
    /// What it may do: `answer`, `ask`, `admin`, comma-separated (default: `answer`).
    #[serde(default)]
    may: Option<String>,
    /// An agent's token instead (`agent:<name>`, kept as `agent:<name>`): it asks and reads
    /// what it asked (the API, `/mcp`), never answers, and can be revoked without a restart.
    #[serde(default)]
    agent: bool,
}

/// A token as listed (never its secret).
#[derive(Serialize, JsonSchema)]
pub(super) struct TokenView {
    /// Its name: a personal token's, `session:<id>` for a browser a link signed in, `link:<id>`
    /// for a link not used yet, `agent:<name>` for an agent's token.
    name: String,
    /// Whose it is.
    #[schemars(with = "String")]
    user: UserRef,
    /// What it may do.
    may: Powers,
    /// When it was made, in unix milliseconds.
    created_at: i64,
    /// When it expires (none: until revoked).
    expires_at: Option<i64>,
    /// A sign-in link not used yet.
    link: bool,
    /// How many requests it holds open on this askgate now (event streams, long-polls, MCP
    /// streams): what a revocation ends.
    open: usize,
}

impl TokenView {
    fn of(l: Login, engine: &crate::engine::Engine) -> Self {
        Self {
            open: engine.people().holding(&l.name),
            name: l.name,
            user: l.person,
            may: l.may,
            created_at: l.created_at,
            expires_at: l.expires_at,
            link: l.link,
        }
    }
}

/// The live tokens.
#[derive(Serialize, JsonSchema)]
pub(super) struct TokenList {
    /// By name.
    tokens: Vec<TokenView>,
}

/// A token just made: its secret, shown this once.
#[derive(Serialize, JsonSchema)]
pub(super) struct TokenMade {
    /// The secret: askgate keeps only its hash.
    token: String,
    /// What is kept.
    #[serde(flatten)]
    view: TokenView,
}

pub(super) async fn list_tokens(_: Admin, State(state): State<AppState>) -> Result<Response, ApiError> {
    let tokens = state.engine.people().logins().await?.into_iter().map(|l| TokenView::of(l, &state.engine)).collect();
    Ok(axum::Json(TokenList { tokens }).into_response())
}

pub(super) async fn add_token(
    Admin(caller): Admin,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<NewToken>,
) -> Result<Response, ApiError> {
    valid_token_name(&body.name).map_err(ApiError::bad_request)?;
    let made = if body.agent {
        if body.may.is_some() {
            return Err(ApiError::bad_request("an agent's token asks and never answers: leave out `may`"));
        }
        if body.name == "agent" || state.tokens.has_agent(&body.name) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "token_exists",
                format!("agent:{} has a configured token already ([[agents]], or the default agent's)", body.name),
            ));
        }
        state.engine.people().add_agent_token(&body.name).await?
    } else {
        let may = match body.may.as_deref() {
            None => Powers::ANSWER,
            Some(list) => Powers::parse(list).map_err(|e| ApiError::bad_request(format!("may: {e}")))?,
        };
        state.engine.people().add_token(&body.name, may).await?
    };
    let name = if body.agent { crate::engine::people::agent_token_name(&body.name) } else { body.name };
    match made {
        Some((token, login)) => {
            tracing::info!(token = %login.name, may = %login.may, by = %caller.user, "a personal token was made");
            let view = TokenView::of(login, &state.engine);
            Ok((StatusCode::CREATED, axum::Json(TokenMade { token, view })).into_response())
        }
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            "token_exists",
            format!("a token named `{name}` exists already: revoke it first, or choose another name"),
        )),
    }
}

pub(super) async fn revoke_token(
    Admin(caller): Admin,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    if state.engine.people().revoke_login(&name).await? {
        tracing::info!(token = %name, by = %caller.user, "a personal token was revoked");
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(format!("no token named `{}`", crate::text::clip(&name, 40, "…"))))
    }
}
