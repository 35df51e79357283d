//! AG-UI agents as functions (`[[functions]]` with `agui = "<url>"`): askgate is the agent's
//! client. A run of the function POSTs the person's text to the agent as a `RunAgentInput` and
//! reads its event stream; a run that ends with `RUN_FINISHED` whose outcome is `interrupt` is
//! waiting for a person, so each interrupt becomes an ask in the conversation that started it
//! (an approval when it concerns a tool call, a question otherwise), and the next run of the
//! agent carries the answers as `resume[]`. The agent's text and result of the run that
//! finishes without an interrupt are the reply.
//!
//! A function is replayed from the start after each answer, and askgate may restart while a
//! person thinks; neither may POST a run again whose interrupts are already known. So each
//! round's interrupts are kept with the run ([`Context::keep`]) before they are asked, and a
//! replay reads them back and answers them from the journal. Only the round after the last kept
//! one is POSTed: if askgate stops between sending it and reading its end, it is sent again with
//! the same `runId` and the same `resume[]`.

mod wire;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::config::{Env, RemoteAgent};
use crate::engine::{AskError, Context, Function, FunctionError};
use crate::question::Ask;
use wire::{Ended, Interrupt, ResumeEntry, ResumeStatus, RunAgentInput};

/// How long connecting to the agent may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The function that runs the AG-UI agent `agent`, configured as `name`.
pub fn function(name: &str, agent: &RemoteAgent, env: &Env) -> Arc<dyn Function> {
    Arc::new(Agui {
        name: name.to_owned(),
        url: agent.url.clone(),
        token: agent.token_env.as_deref().and_then(|v| env.get(v)),
        token_env: agent.token_env.clone(),
        timeout: agent.timeout,
        // No timeout on the client: a run streams for as long as it works, up to `timeout`.
        http: reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().unwrap_or_default(),
    })
}

/// One AG-UI agent.
struct Agui {
    name: String,
    url: String,
    token: Option<String>,
    token_env: Option<String>,
    timeout: std::time::Duration,
    http: reqwest::Client,
}

#[async_trait]
impl Function for Agui {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        if let (Some(var), None) = (&self.token_env, &self.token) {
            return Err(FunctionError::failed(format!(
                "the agent `{}` needs its token: set {var} in askgate's environment",
                self.name
            )));
        }
        let thread = ctx.run().id.to_string();
        let mut resume = Vec::new();
        let mut round = 0u32;
        loop {
            let kept = format!("agui.round.{round}");
            let ended = match ctx.kept(&kept).await? {
                Some(json) => serde_json::from_str::<Ended>(&json).map_err(|e| {
                    FunctionError::failed(format!("what askgate kept of round {round} is unreadable: {e}"))
                })?,
                None => {
                    let request = RunAgentInput::new(&thread, round, input, std::mem::take(&mut resume));
                    let ended = wire::run(&self.http, &self.url, self.token.as_deref(), &request, self.timeout)
                        .await
                        .map_err(|e| FunctionError::failed(format!("the agent `{}`: {e}", self.name)))?;
                    if ended.interrupts.is_empty() {
                        return Ok(reply(&self.name, &ended));
                    }
                    let json = serde_json::to_string(&ended).map_err(|e| FunctionError::failed(e.to_string()))?;
                    ctx.keep(&kept, &json).await?;
                    ended
                }
            };
            if !ended.text.trim().is_empty() {
                ctx.say(ended.text.clone()).await?;
            }
            resume = Vec::with_capacity(ended.interrupts.len());
            for interrupt in &ended.interrupts {
                resume.push(answer(ctx, &self.name, interrupt).await?);
            }
            round += 1;
        }
    }
}

/// Asks the person what `interrupt` waits for, and their answer as its resume entry.
async fn answer(ctx: &mut Context, agent: &str, interrupt: &Interrupt) -> Result<ResumeEntry, FunctionError> {
    let entry = |status, payload| ResumeEntry { interrupt_id: interrupt.id.clone(), status, payload };
    let detail = format!("asked by the AG-UI agent `{agent}` ({})", interrupt.reason);
    if interrupt.is_approval() {
        let ask = Ask::approval(interrupt.prompt()).detail(detail);
        return match ctx.approve(ask).await {
            Ok(_) => Ok(entry(ResumeStatus::Resolved, Some(json!({"approved": true})))),
            Err(AskError::Declined { feedback }) => {
                let mut denial = json!({"approved": false});
                if let Some(feedback) = feedback {
                    denial["feedback"] = Value::String(feedback);
                }
                Ok(entry(ResumeStatus::Resolved, Some(denial)))
            }
            Err(AskError::Timeout) => Ok(entry(ResumeStatus::Cancelled, None)),
            Err(e) => Err(e.into()),
        };
    }
    let ask = Ask::question(interrupt.prompt()).detail(detail).allow_custom(true);
    match ctx.ask(ask).await {
        Ok(answer) => Ok(entry(ResumeStatus::Resolved, Some(answer.value))),
        Err(AskError::Declined { feedback }) => {
            Ok(entry(ResumeStatus::Cancelled, feedback.map(|f| json!({"feedback": f}))))
        }
        Err(AskError::Timeout) => Ok(entry(ResumeStatus::Cancelled, None)),
        Err(e) => Err(e.into()),
    }
}

/// What the person reads when the agent's run finished: its text, and its result when it is
/// not the text again (cut as the text is, at [`wire::MAX_TEXT`] characters, saying so: a
/// result may be as large as the stream).
fn reply(agent: &str, ended: &Ended) -> String {
    let result = match &ended.result {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    let mut text = ended.text.trim().to_owned();
    if let Some(result) = result.filter(|r| !r.trim().is_empty() && !text.contains(r.trim())) {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&crate::text::clip(&result, wire::MAX_TEXT, " […cut]"));
    }
    match (text.is_empty(), ended.cancelled) {
        (_, true) => format!("The agent `{agent}` stopped the run. {text}").trim().to_owned(),
        (true, false) => format!("The agent `{agent}` finished."),
        (false, false) => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(text: &str, result: Option<Value>) -> Ended {
        Ended { text: text.to_owned(), interrupts: Vec::new(), result, cancelled: false }
    }

    #[test]
    fn the_reply_is_the_text_then_a_result_it_does_not_already_say() {
        assert_eq!(reply("a", &ended("Deleted build/.", Some(json!("Deleted build/.")))), "Deleted build/.");
        assert_eq!(reply("a", &ended("Done.", Some(json!({"files": 3})))), "Done.\n\n{\"files\":3}");
        assert_eq!(reply("a", &ended("", None)), "The agent `a` finished.");
    }

    #[test]
    fn a_large_result_is_cut_saying_so() {
        let reply = reply("a", &ended("Done.", Some(json!("x".repeat(wire::MAX_TEXT * 2)))));
        assert!(reply.chars().count() <= "Done.\n\n".len() + wire::MAX_TEXT, "{}", reply.len());
        assert!(reply.ends_with(" […cut]"));
    }
}
