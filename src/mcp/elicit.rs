//! The agent's own client as one more surface: when the client can show a form (the
//! elicitation capability) and `[mcp] elicitation = true`, a waiting question is also shown
//! there. The first answer wins, in the chat or in the client; a form that lost is cancelled,
//! and a form the person dismisses leaves the question waiting in the chat. Approvals are not
//! offered to the client that asked for them (unless it is listed among their answerers).

use rmcp::RoleServer;
use rmcp::model::ClientResult;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ServerRequest};
use rmcp::service::{PeerRequestOptions, RequestContext};
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::engine::{Engine, Resolver};
use crate::question::{Choice, Kind, Question, Surface, UserRef};

/// Whether the client said it can show forms.
pub(super) fn supported(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// Shows `question` in the client until it is answered there, dismissed, or the guard drops.
/// An approval is never shown to the client that asked for it unless that client is one of
/// its answerers: nobody approves their own request.
pub(super) fn show(
    engine: Engine,
    question: Question,
    answerer: UserRef,
    context: &RequestContext<RoleServer>,
) -> Option<DropGuard> {
    if question.kind == Kind::Approval && !question.admits(&answerer, None) {
        return None;
    }
    let (message, schema) = form(&question)?;
    let schema: ElicitationSchema = match serde_json::from_value(schema) {
        Ok(schema) => schema,
        Err(e) => {
            tracing::warn!(question = %question.id, error = %e, "could not build a form for the client");
            return None;
        }
    };
    let request =
        ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        }));
    let stop = CancellationToken::new();
    let (peer, ended) = (context.peer.clone(), stop.clone());
    tokio::spawn(async move {
        let mut handle = match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
            Ok(handle) => handle,
            Err(e) => return tracing::debug!(question = %question.id, error = %e, "the client did not take the form"),
        };
        let response = tokio::select! {
            response = &mut handle.rx => response,
            () = ended.cancelled() => {
                // Answered elsewhere, or the call ended: take the form away.
                let _ = handle.cancel(Some("answered elsewhere".to_owned())).await;
                return;
            }
        };
        let result = match response {
            Ok(Ok(ClientResult::ElicitResult(result))) => result,
            Ok(Ok(other)) => return tracing::debug!(?other, "the client answered a form with something else"),
            Ok(Err(e)) => return tracing::debug!(question = %question.id, error = %e, "the form failed"),
            Err(_) => return,
        };
        if result.action != ElicitationAction::Accept {
            // Dismissed: the question still waits in the chat.
            return;
        }
        let Some(choice) = result.content.as_ref().and_then(|c| choice(&question, c)) else {
            return tracing::info!(question = %question.id, "the client's form came back without a usable answer");
        };
        let resolver = Resolver::asker(answerer, Surface::Mcp);
        if let Err(e) = engine.resolve_choice(&question, Some(choice), &resolver).await {
            tracing::error!(question = %question.id, error = %e, "could not record the answer from the client's form");
        }
    });
    Some(stop.drop_guard())
}

/// The form's message and flat schema; none for what a flat form cannot hold (multi-select).
fn form(question: &Question) -> Option<(String, Value)> {
    let message = match &question.detail {
        Some(detail) => format!("{}\n\n{detail}", question.prompt),
        None => question.prompt.clone(),
    };
    let properties = match question.kind {
        Kind::Question if question.multi => return None,
        Kind::Question if question.options.is_empty() || question.allow_custom => {
            let mut answer = json!({"type": "string", "title": "Your answer"});
            if !question.options.is_empty() {
                answer["description"] = json!(format!("one of: {}, or your own", question.options.join(", ")));
            }
            json!({"answer": answer})
        }
        Kind::Question => json!({"answer": {"type": "string", "title": "Your answer", "enum": question.options}}),
        Kind::Confirm => json!({"answer": {"type": "boolean", "title": "Yes?"}}),
        Kind::Approval => json!({
            "decision": {"type": "string", "title": "Decision", "enum": ["once", "always", "reject"],
                         "enumNames": ["Allow once", "Allow always", "Reject"]},
            "feedback": {"type": "string", "title": "Why (when rejecting)"},
        }),
    };
    let required = if question.kind == Kind::Approval { json!(["decision"]) } else { json!(["answer"]) };
    Some((message, json!({"type": "object", "properties": properties, "required": required})))
}

/// What the person chose in the form.
fn choice(question: &Question, content: &Value) -> Option<Choice> {
    if question.kind == Kind::Approval {
        let feedback = content.get("feedback").and_then(Value::as_str).map(str::trim).filter(|f| !f.is_empty());
        return match content.get("decision")?.as_str()? {
            "reject" => Some(Choice::Decline(feedback.map(str::to_owned))),
            decision => question.choice_from_value(&json!(decision)).ok(),
        };
    }
    question.choice_from_value(content.get("answer")?).ok()
}
