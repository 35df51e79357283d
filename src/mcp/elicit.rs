//! The agent's own client as one more surface: when the client can show a form (the
//! elicitation capability) and `[mcp] elicitation = true`, a waiting question is also shown
//! there, in each revision's own way:
//!
//! - **2025-11-25**: askgate sends `elicitation/create` while the call waits. The first answer
//!   wins, in the chat or in the client; a form that lost is taken away (cancelled).
//! - **2026-07-28**: servers send clients no requests. The call answers `input_required` with
//!   the form, and the client calls again with the person's input and the `requestState`
//!   askgate gave (the question's id). The same call again attaches to the same question, so
//!   nobody is asked twice; a form that lost cannot be taken away, and what it brings back
//!   then is refused and the call returns the answer that won.
//!
//! A form the person dismisses leaves the question waiting in the chat. Approvals are not
//! offered to the client that asked for them (unless it is listed among their answerers).

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::ServerRequest;
use rmcp::model::{CallToolRequestParams, ClientResult, InputRequest, InputRequiredResult, ProtocolVersion};
use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::{PeerRequestOptions, RequestContext};
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::engine::{Engine, Resolver};
use crate::question::{Choice, Kind, Question, Surface, UserRef};

/// The key of askgate's one input request in an `input_required` result.
const INPUT: &str = "answer";

/// Whether the client said it can show forms.
pub(super) fn supported(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// Whether this request speaks 2026-07-28 or later, where forms travel as `input_required`.
pub(super) fn inline(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The form `answerer`'s client may show for `question`; none for what a flat form cannot
/// hold, and for an approval of which `answerer` is not an answerer: nobody approves their own
/// request.
fn offer(question: &Question, answerer: &UserRef) -> Option<ElicitRequestParams> {
    if question.kind == Kind::Approval && !question.admits(answerer, None) {
        return None;
    }
    let (message, schema) = form(question)?;
    match serde_json::from_value::<ElicitationSchema>(schema) {
        Ok(requested_schema) => {
            Some(ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema })
        }
        Err(e) => {
            tracing::warn!(question = %question.id, error = %e, "could not build a form for the client");
            None
        }
    }
}

/// Records what the person did in the client's form: an answer is resolved as theirs (it loses
/// to one that came first); a dismissed form leaves the question waiting.
async fn apply(engine: &Engine, question: &Question, answerer: UserRef, result: &ElicitResult) {
    if result.action != ElicitationAction::Accept {
        return;
    }
    let Some(choice) = result.content.as_ref().and_then(|c| choice(question, c)) else {
        return tracing::info!(question = %question.id, "the client's form came back without a usable answer");
    };
    let resolver = Resolver::asker(answerer, Surface::MCP);
    if let Err(e) = engine.claims().resolve_choice(question, Some(choice), &resolver).await {
        tracing::info!(question = %question.id, error = %e, "the answer from the client's form was not taken");
    }
}

/// 2026-07-28: the `input_required` result that asks the client to show `question`'s form;
/// none when no form may be offered.
pub(super) fn input_required(question: &Question, answerer: &UserRef) -> Option<InputRequiredResult> {
    let params = offer(question, answerer)?;
    let requests = BTreeMap::from([(INPUT.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)))]);
    Some(InputRequiredResult::new(Some(requests), Some(question.id.to_string())))
}

/// 2026-07-28: the form a retried call brings back for `question`, recorded; whether the call
/// brought one. Its `requestState` must be the question's id, and the question the one this
/// call attached to (the same agent's same ask): the client's echo is not trusted further.
pub(super) async fn returned(
    engine: &Engine,
    question: &Question,
    answerer: &UserRef,
    request: &CallToolRequestParams,
) -> bool {
    let Some(responses) = &request.input_responses else { return false };
    if request.request_state.as_deref() != Some(question.id.to_string().as_str()) {
        tracing::info!(question = %question.id, "a retried call's requestState is not its question's; ignored");
        return false;
    }
    if offer(question, answerer).is_none() {
        return false;
    }
    match responses.get(INPUT).map(|r| serde_json::from_value::<ElicitResult>(r.clone())) {
        Some(Ok(result)) => apply(engine, question, answerer.clone(), &result).await,
        Some(Err(e)) => tracing::info!(question = %question.id, error = %e, "a retried call's form is malformed"),
        None => tracing::info!(question = %question.id, "a retried call brought no answer to the form"),
    }
    true
}

/// 2025-11-25: shows `question` in the client until it is answered there, dismissed, or the
/// guard drops.
pub(super) fn show(
    engine: Engine,
    question: Question,
    answerer: UserRef,
    context: &RequestContext<RoleServer>,
) -> Option<DropGuard> {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(offer(&question, &answerer)?));
    let stop = CancellationToken::new();
    let (peer, ended, tasks) = (context.peer.clone(), stop.clone(), engine.tasks().clone());
    tasks.spawn(async move {
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
        match response {
            Ok(Ok(ClientResult::ElicitResult(result))) => apply(&engine, &question, answerer, &result).await,
            Ok(Ok(other)) => tracing::debug!(?other, "the client answered a form with something else"),
            Ok(Err(e)) => tracing::debug!(question = %question.id, error = %e, "the form failed"),
            Err(_) => {}
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
    if let Some(form) = &question.form {
        // A form, or several questions: the client shows the fields as askgate has them.
        return Some((message, form.to_schema()));
    }
    let properties = match question.kind {
        Kind::Form => return None,
        Kind::Question if question.multi => return None,
        Kind::Question if question.options.is_empty() || question.allow_custom => {
            let mut answer = json!({"type": "string", "title": "Your answer"});
            if !question.options.is_empty() {
                answer["description"] = json!(format!("one of: {}, or your own", question.options.join(", ")));
            }
            json!({"answer": answer})
        }
        Kind::Question => {
            let mut answer = json!({"type": "string", "title": "Your answer", "enum": question.options});
            if !question.descriptions.is_empty() {
                // Each option's title says what it is: `dayjs — 2 kB, no plugins`.
                let titles = (question.options.iter().enumerate())
                    .map(|(i, o)| question.description(i).map_or_else(|| o.clone(), |d| format!("{o} — {d}")));
                answer["enumNames"] = json!(titles.collect::<Vec<_>>());
            }
            json!({"answer": answer})
        }
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
    if question.form.is_some() {
        return question.choice_from_value(content).ok();
    }
    if question.kind == Kind::Approval {
        let feedback = content.get("feedback").and_then(Value::as_str).map(str::trim).filter(|f| !f.is_empty());
        return match content.get("decision")?.as_str()? {
            "reject" => Some(Choice::Decline(feedback.map(str::to_owned))),
            decision => question.choice_from_value(&json!(decision)).ok(),
        };
    }
    question.choice_from_value(content.get("answer")?).ok()
}
