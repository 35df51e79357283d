//! `/api/grants`: the live grants ("allow always" and rules), listed and taken back.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;

use super::bodies::GrantList;
use super::{ApiError, AppState, Params, Reader, conversation_param};
use crate::question::Conversation;

#[derive(Deserialize, JsonSchema)]
pub(super) struct GrantsQuery {
    /// Only this conversation's grants.
    #[schemars(with = "Option<Conversation>")]
    conversation: Option<String>,
}

/// The live grants: all of them for whoever sees all; for a person, those they may take back
/// (theirs, or given on approvals they may answer), as `/revoke` in a chat.
pub(super) async fn grants(
    Reader(caller): Reader,
    State(state): State<AppState>,
    Params(query): Params<GrantsQuery>,
) -> Result<Response, ApiError> {
    let conversation = conversation_param(query.conversation.as_deref())?;
    let mut grants = state.engine.records().grants(conversation.as_ref()).await?;
    if !caller.sees_all() {
        let mut theirs = Vec::new();
        for grant in grants {
            let approval = state.engine.records().question(grant.question).await?;
            if caller.may_revoke(&grant, approval.as_ref()) {
                theirs.push(grant);
            }
        }
        grants = theirs;
    }
    Ok(axum::Json(GrantList { grants }).into_response())
}

pub(super) async fn revoke_grant(
    Reader(caller): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !caller.sees_all() {
        let grant = state.engine.records().grants(None).await?.into_iter().find(|g| g.id == id);
        let theirs = match &grant {
            Some(grant) => caller.may_revoke(grant, state.engine.records().question(grant.question).await?.as_ref()),
            None => false,
        };
        if !theirs {
            return Err(ApiError::not_found(format!("no live grant `{}` of yours", crate::text::clip(&id, 40, "…"))));
        }
    }
    if state.engine.records().revoke_grant(&id).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(format!("no live grant `{}`", crate::text::clip(&id, 40, "…"))))
    }
}
