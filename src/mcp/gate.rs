//! The gate: an upstream's tools offered as askgate's own, each call straight through or after
//! a person approved it (see `[[mcp.upstream]]`).

use rmcp::model::{CallToolResponse, CallToolResult, CreateTaskResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::upstream::{Resolved, Upstream, UpstreamError};
use super::waiting::{AskKey, Waiter};
use super::{Server, agent, ask_refused, asker, failure, tasks_supported, unknown_tool};
use crate::config::GrantScope;
use crate::question::{Answerers, Ask, Outcome, Question, UserRef};

impl Server {
    /// A call of a tool that is not askgate's own: an upstream's, or none.
    pub(super) async fn gated(
        &self,
        name: &str,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.upstreams.resolve(name) {
            Resolved::Tool(upstream, tool) => {
                let asker = asker(context);
                if upstream.config.gates(&tool) && tasks_supported(context) {
                    // The approval may take a while: a task the client polls.
                    let server = self.clone();
                    let tasks = self.tasks.of(&agent(context));
                    let task = tasks.spawn(TaskOptions::new().with_ttl_ms(None), move |task| {
                        Box::pin(async move {
                            let waiter = Waiter::Task(task.clone());
                            let result = server.proxy(&upstream, tool, arguments, asker, waiter).await;
                            if task.is_cancel_requested() { Err(TaskExit::Cancelled) } else { Ok(result) }
                        })
                    });
                    return Ok(CreateTaskResult::new(task).into());
                }
                let waiter = Waiter::call(context, agent(context), &self.cancels);
                Ok(self.proxy(&upstream, tool, arguments, asker, waiter).await.into())
            }
            // Refused before asking anyone: the call could not be made.
            Resolved::Down(down) => Ok(failure(down.to_string()).into()),
            Resolved::Nothing => Err(ErrorData::invalid_params(unknown_tool(name), None)),
        }
    }

    /// A call of an upstream's tool: straight through, or after a person approved it.
    async fn proxy(
        &self,
        upstream: &Upstream,
        tool: String,
        arguments: JsonObject,
        asker: UserRef,
        mut waiter: Waiter,
    ) -> CallToolResult {
        let mut approval = None;
        if upstream.config.gates(&tool) {
            let question = match self.ask_approval(upstream, &tool, &arguments, asker, &mut waiter).await {
                Ok(question) => question,
                Err(failed) => return failed,
            };
            let who = question.answered_name.clone().or_else(|| question.answered_by.clone()).unwrap_or_default();
            match question.outcome {
                Some(Outcome::Answered { .. }) => {}
                Some(Outcome::Declined { feedback }) => {
                    return failure(match feedback {
                        Some(feedback) => format!("{who} rejected the call: {feedback}"),
                        None => format!("{who} rejected the call"),
                    });
                }
                Some(Outcome::Expired { .. }) => {
                    return failure("the approval expired: nobody answered in time, and the call was not made");
                }
                Some(Outcome::Cancelled { reason }) => {
                    return failure(format!("the approval was cancelled ({reason}); the call was not made"));
                }
                None => return failure("the approval has no outcome; the call was not made"),
            }
            approval = Some(question);
        }
        let call = upstream.call(&tool, arguments);
        tokio::pin!(call);
        let mut ticks = tokio::time::interval(self.config.progress_every);
        ticks.tick().await;
        loop {
            tokio::select! {
                result = &mut call => return match result {
                    Ok(result) => result,
                    // Approved, but it went down meanwhile: an "always" lets through only
                    // calls that were made.
                    Err(e @ UpstreamError::Down(_)) => match approval {
                        Some(approval) => self.not_made(&approval, &e).await,
                        None => failure(e.to_string()),
                    },
                    Err(e) => failure(e.to_string()),
                },
                // Dropping the call cancels it upstream.
                () = waiter.cancelled() => return failure("the call was cancelled"),
                _ = ticks.tick() => waiter.report(format!("waiting for {} on `{}`", tool, upstream.config.name)).await,
            }
        }
    }

    /// An approved call that could not be made: the grant its approval gave is withdrawn.
    async fn not_made(&self, approval: &Question, error: &UpstreamError) -> CallToolResult {
        match self.engine.records().withdraw_grants(approval).await {
            Ok(0) => failure(format!("{error}; the call was not made")),
            Ok(_) => failure(format!("{error}; the call was not made, so the \"always\" given for it was withdrawn")),
            Err(e) => {
                tracing::error!(question = %approval.id, error = %e, "could not withdraw the grant of a call not made");
                failure(format!("{error}; the call was not made"))
            }
        }
    }

    /// Asks the approval of a gated call and waits for its outcome. The card names the
    /// upstream, the tool and the arguments; an "allow always" covers the tool, or the tool with
    /// these arguments (`grant = "arguments"`).
    async fn ask_approval(
        &self,
        upstream: &Upstream,
        tool: &str,
        arguments: &JsonObject,
        asker: UserRef,
        waiter: &mut Waiter,
    ) -> Result<Question, CallToolResult> {
        let name = &upstream.config.name;
        let key = AskKey::gated(&asker, &format!("{name}__{tool}"), arguments);
        if let Some(question) = self.attach(&key).await {
            return self.settled(question, waiter).await;
        }
        let arguments = Value::Object(arguments.clone());
        let action = match upstream.config.grant {
            GrantScope::Tool => format!("{name}__{tool}"),
            GrantScope::Arguments => format!("{name}__{tool} {arguments}"),
        };
        let detail = approval_detail(&asker, name, tool, &arguments, upstream.config.grant);
        let mut ask = Ask::approval(action).detail(detail);
        ask.answerers = self.config.answerers.clone().map(|users| Answerers::Users { users });
        let conversation = upstream.config.conversation.clone().unwrap_or_else(|| self.config.conversation.clone());
        let question = match self.engine.asks().ask_gated(conversation, ask, asker, name).await {
            Ok(question) => question,
            Err(e) => return Err(failure(ask_refused(&e))),
        };
        self.open.asked(key, &question);
        self.settled(question, waiter).await
    }

    /// The question once resolved (at once when it is), its outcome taken by this call.
    async fn settled(&self, question: Question, waiter: &mut Waiter) -> Result<Question, CallToolResult> {
        let question = if question.is_pending() { self.settle(question, waiter).await? } else { question };
        self.open.taken(question.id);
        Ok(question)
    }
}

/// How much of a gated call's arguments its card shows (surfaces shorten it further).
const MAX_ARGUMENTS_SHOWN: usize = 3000;

/// A gated call's card detail: who calls what, the arguments as a code block (pretty JSON,
/// shortened past [`MAX_ARGUMENTS_SHOWN`] with a note outside the code), and what "Allow
/// always" would let through.
fn approval_detail(asker: &UserRef, upstream: &str, tool: &str, arguments: &Value, grant: GrantScope) -> String {
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    let shown = crate::text::clip(&pretty, MAX_ARGUMENTS_SHOWN, "…");
    let note = if shown.len() < pretty.len() { "\n(shortened here; the call is made with all of it)" } else { "" };
    let always = match grant {
        GrantScope::Tool => format!("every later {tool} call on {upstream}, whatever its arguments,"),
        GrantScope::Arguments => format!("later {tool} calls on {upstream} with exactly these arguments"),
    };
    format!(
        "{asker} wants to call {tool} on {upstream} with:\n```json\n{shown}\n```{note}\n\
         Allow always lets {always} through in this conversation."
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::text::{Piece, pieces};

    #[test]
    fn a_gated_calls_arguments_are_code_and_long_ones_are_shortened_with_a_note_outside() {
        let asker = UserRef::parse("mcp:agent").unwrap();
        let detail = approval_detail(&asker, "files", "delete_file", &json!({"path": "a.txt"}), GrantScope::Tool);
        assert_eq!(
            pieces(&detail),
            vec![
                Piece::Text("mcp:agent wants to call delete_file on files with:"),
                Piece::Code("{\n  \"path\": \"a.txt\"\n}"),
                Piece::Text(
                    "Allow always lets every later delete_file call on files, whatever its arguments, through in this \
                     conversation."
                ),
            ]
        );
        let long = json!({"text": "z".repeat(10_000)});
        let detail = approval_detail(&asker, "files", "write_file", &long, GrantScope::Arguments);
        let shown = pieces(&detail);
        assert!(
            matches!(shown[1], Piece::Code(code) if code.ends_with('…') && code.chars().count() == MAX_ARGUMENTS_SHOWN)
        );
        assert_eq!(
            shown[2],
            Piece::Text(
                "(shortened here; the call is made with all of it)\nAllow always lets later write_file calls on \
                 files with exactly these arguments through in this conversation."
            )
        );
    }
}
