//! AG-UI on the wire (protocol 1.0, as `@ag-ui/core` types it): the `RunAgentInput` askgate
//! POSTs, and the agent's event stream read up to the event that ends the run.

use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The protocol version askgate speaks.
const PROTOCOL_VERSION: &str = "1.0";
/// The most text of a run's messages kept; the rest is cut, and the reply says so.
pub(super) const MAX_TEXT: usize = 64 * 1024;
/// The most of one run's event stream read (tool calls' arguments and state snapshots
/// included); a run that streams more fails.
const MAX_STREAM: usize = 32 * 1024 * 1024;

/// What askgate asks the agent to run.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunAgentInput {
    /// The conversation: askgate's run id, the same for every run that resumes it.
    pub thread_id: String,
    /// This run: the thread and the round (`<thread>-<n>`).
    pub run_id: String,
    pub protocol_version: &'static str,
    /// The person's text, as the one user message of the thread.
    pub messages: Vec<Value>,
    pub tools: Vec<Value>,
    pub context: Vec<Value>,
    /// The answers to the interrupts that ended the previous run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume: Vec<ResumeEntry>,
}

impl RunAgentInput {
    /// Round `round` of the thread `thread`, whose person said `text`.
    pub(super) fn new(thread: &str, round: u32, text: &str, resume: Vec<ResumeEntry>) -> Self {
        Self {
            thread_id: thread.to_owned(),
            run_id: format!("{thread}-{round}"),
            protocol_version: PROTOCOL_VERSION,
            messages: vec![json!({"id": format!("{thread}-user"), "role": "user", "content": text})],
            tools: Vec::new(),
            context: Vec::new(),
            resume,
        }
    }
}

/// Something a run needs from outside before it can continue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Interrupt {
    /// What a resume entry answers it by.
    pub id: String,
    /// Why the run stopped (an open string: `tool_approval`, `input_required`, …).
    pub reason: String,
    /// A prompt for whoever answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call an approval concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Interrupt {
    /// Whether it asks to allow something (a tool call) rather than for an answer.
    pub(super) fn is_approval(&self) -> bool {
        self.tool_call_id.is_some() || self.reason.contains("approval")
    }

    /// What the person reads: the agent's prompt, else its reason.
    pub(super) fn prompt(&self) -> &str {
        self.message.as_deref().filter(|m| !m.trim().is_empty()).unwrap_or(&self.reason)
    }
}

/// Whether an interrupt was answered or abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// An answer to one interrupt, sent on the run that continues from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// How a run ended without failing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Ended {
    /// The text of its messages, in order.
    pub text: String,
    /// What it is waiting for; none: it finished.
    pub interrupts: Vec<Interrupt>,
    /// Its return value, when it finished with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// True when it ended as cancelled by the agent's side.
    #[serde(default)]
    pub cancelled: bool,
}

/// Why a run did not end well.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    /// The agent could not be reached, or its stream broke.
    #[error("could not reach the agent: {0}")]
    Unreachable(String),
    /// It refused the run.
    #[error("the agent answered {status}: {body}")]
    Refused {
        /// Its HTTP status.
        status: u16,
        /// The start of what it said.
        body: String,
    },
    /// It ended the run with `RUN_ERROR`.
    #[error("the agent failed: {0}")]
    Failed(String),
    /// It ended the run in a way AG-UI does not allow.
    #[error("the agent's run ended unreadably: {0}")]
    Unreadable(String),
    /// Its stream ended without `RUN_FINISHED` or `RUN_ERROR`.
    #[error("the agent's stream ended before the run did")]
    Unfinished,
    /// The run took longer than allowed.
    #[error("the agent's run took longer than {0:?}")]
    TooLong(Duration),
}

/// POSTs `input` to the agent at `url` and reads its events until the run ends.
pub(super) async fn run(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    input: &RunAgentInput,
    timeout: Duration,
) -> Result<Ended, RunError> {
    tokio::time::timeout(timeout, exchange(http, url, token, input)).await.map_err(|_| RunError::TooLong(timeout))?
}

async fn exchange(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    input: &RunAgentInput,
) -> Result<Ended, RunError> {
    let body = serde_json::to_vec(input).map_err(|e| RunError::Unreachable(e.to_string()))?;
    let mut request =
        http.post(url).header("content-type", "application/json").header("accept", "text/event-stream").body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| RunError::Unreachable(crate::error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(RunError::Refused { status: status.as_u16(), body: crate::agent::refusal(response).await });
    }
    // Bounded: a line that never ends would otherwise be kept whole.
    let mut read = 0usize;
    let body = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        read += chunk.len();
        if read > MAX_STREAM {
            return Err(std::io::Error::other(format!("its event stream passed {MAX_STREAM} bytes")));
        }
        Ok(chunk)
    });
    let mut events = std::pin::pin!(sse_stream::SseStream::from_bytes_stream(body));
    let mut reading = Reading::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| RunError::Unreachable(e.to_string()))?;
        let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else { continue };
        // An event that is not JSON is not AG-UI's; skipped, as events of unknown types are.
        let Ok(event) = serde_json::from_str::<Value>(&data) else { continue };
        if let Some(ended) = reading.read(&event)? {
            return Ok(ended);
        }
    }
    Err(RunError::Unfinished)
}

/// The text read so far from a run's events.
#[derive(Default)]
struct Reading {
    text: String,
    /// The message the last fragment belonged to: a new one starts a new paragraph.
    message: Option<String>,
    cut: bool,
}

impl Reading {
    /// Reads one event; the end of the run when it is one.
    fn read(&mut self, event: &Value) -> Result<Option<Ended>, RunError> {
        let str_of = |key: &str| event.get(key).and_then(Value::as_str);
        match str_of("type").unwrap_or_default() {
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_CHUNK" => {
                let role = str_of("role").unwrap_or("assistant");
                if role == "assistant" {
                    self.append(str_of("messageId"), str_of("delta").unwrap_or_default());
                }
                Ok(None)
            }
            "RUN_ERROR" => Err(RunError::Failed(str_of("message").unwrap_or("no reason given").to_owned())),
            "RUN_FINISHED" => self.finished(event).map(Some),
            _ => Ok(None),
        }
    }

    fn append(&mut self, message: Option<&str>, delta: &str) {
        if message.is_some() && message != self.message.as_deref() {
            if !self.text.is_empty() {
                self.text.push_str("\n\n");
            }
            self.message = message.map(str::to_owned);
        }
        if self.text.len() + delta.len() > MAX_TEXT {
            self.cut = true;
            return;
        }
        self.text.push_str(delta);
    }

    /// The end of the run `event` finishes. An `interrupt` outcome carries at least one
    /// interrupt (AG-UI says so): one without any is refused rather than read as a finished run,
    /// which would skip the person the agent was waiting for.
    fn finished(&mut self, event: &Value) -> Result<Ended, RunError> {
        let outcome = event.get("outcome");
        let kind = outcome.and_then(|o| o.get("type")).and_then(Value::as_str);
        let interrupts: Vec<Interrupt> = match kind {
            Some("interrupt") => interrupts_of(outcome.and_then(|o| o.get("interrupts")))?,
            _ => Vec::new(),
        };
        let mut text = std::mem::take(&mut self.text);
        if self.cut {
            text.push_str(" […cut]");
        }
        Ok(Ended {
            text,
            interrupts,
            result: event.get("result").filter(|r| !r.is_null()).cloned(),
            cancelled: kind == Some("cancelled"),
        })
    }
}

/// The interrupts of an `interrupt` outcome: one at least, each with its id and reason.
fn interrupts_of(interrupts: Option<&Value>) -> Result<Vec<Interrupt>, RunError> {
    let bad = |why: String| RunError::Unreadable(format!("its `interrupt` outcome {why}"));
    let Some(interrupts) = interrupts else { return Err(bad("has no `interrupts`".into())) };
    let interrupts: Vec<Interrupt> =
        serde_json::from_value(interrupts.clone()).map_err(|e| bad(format!("has unreadable `interrupts`: {e}")))?;
    if interrupts.is_empty() {
        return Err(bad("has no interrupt in `interrupts` (AG-UI asks for one at least)".into()));
    }
    Ok(interrupts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_outcome_is_read_with_the_text_before_it() {
        let mut reading = Reading::default();
        let events = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "t-0"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "I will clean "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "up."}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "t-0", "outcome": {"type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "tool_approval", "message": "rm -rf build", "toolCallId": "c1"}]}}),
        ];
        let ended = events.iter().find_map(|e| reading.read(e).unwrap()).unwrap();
        assert_eq!(ended.text, "I will clean up.");
        assert_eq!(ended.interrupts.len(), 1);
        assert!(ended.interrupts[0].is_approval());
        assert_eq!(ended.interrupts[0].prompt(), "rm -rf build");
    }

    #[test]
    fn an_interrupt_outcome_without_interrupts_is_refused() {
        for interrupts in [None, Some(json!([])), Some(json!([{"message": "no id"}])), Some(json!("x"))] {
            let mut outcome = json!({"type": "interrupt"});
            if let Some(interrupts) = interrupts {
                outcome["interrupts"] = interrupts;
            }
            let event = json!({"type": "RUN_FINISHED", "outcome": outcome});
            let error = Reading::default().read(&event).unwrap_err();
            assert!(matches!(error, RunError::Unreadable(_)), "{error}");
            assert!(error.to_string().contains("interrupt"), "{error}");
        }
    }

    #[test]
    fn a_run_error_fails_with_the_agents_words() {
        let mut reading = Reading::default();
        let error = reading.read(&json!({"type": "RUN_ERROR", "message": "out of tokens"})).unwrap_err();
        assert_eq!(error.to_string(), "the agent failed: out of tokens");
    }

    #[test]
    fn a_finish_without_outcome_is_a_success() {
        let mut reading = Reading::default();
        let ended = reading.read(&json!({"type": "RUN_FINISHED", "result": "done"})).unwrap().unwrap();
        assert!(ended.interrupts.is_empty() && !ended.cancelled);
        assert_eq!(ended.result, Some(json!("done")));
    }

    #[test]
    fn the_input_carries_resume_entries_in_the_protocols_names() {
        let entry = ResumeEntry {
            interrupt_id: "i1".into(),
            status: ResumeStatus::Resolved,
            payload: Some(json!({"approved": true})),
        };
        let input = serde_json::to_value(RunAgentInput::new("t", 1, "clean", vec![entry])).unwrap();
        assert_eq!(input["runId"], "t-1");
        assert_eq!(input["resume"][0]["interruptId"], "i1");
        assert_eq!(input["resume"][0]["status"], "resolved");
        assert_eq!(input["messages"][0]["role"], "user");
    }
}
