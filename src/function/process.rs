//! Process functions: any program that speaks the JSON-lines protocol on stdin and stdout.
//!
//! askgate starts the program with a `start` line and answers each `ask`, `confirm` and
//! `approve` with an `outcome` line. In follow-up mode, replayed steps are answered from the
//! journal at once, a new question is answered `pending`, stdin is closed, and the program is
//! expected to exit (it is killed after a grace period); the next resolution runs it again
//! from the start. In hold mode the program stays alive and the outcome arrives on stdin when
//! someone answers. Anything the program gets wrong fails its run with a message that says
//! what, with the tail of its stderr; nothing else is affected.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::child::{clean_command, spawn_tree};
use crate::engine::{AskError, Context, Function, FunctionError};
use crate::question::{Ask, AskWire, Conversation, Kind, Outcome, QuestionId, RunId, UserRef};
use crate::text::clip;

/// The longest line a program may write.
pub const MAX_LINE: usize = 64 * 1024;
/// How many lines a program may write in a burst, and per second after that.
const BURST: u32 = 1000;
const PER_SECOND: u32 = 200;
/// How long a program has to exit after `pending` or `done` before it is killed.
const GRACE: Duration = Duration::from_secs(5);
/// How much of stderr a failure message quotes.
const STDERR_TAIL_LINES: usize = 10;
const STDERR_TAIL_CHARS: usize = 1500;
/// The longest stderr line logged; the rest of a longer line is dropped.
const STDERR_LINE: usize = 8 * 1024;
/// How many stderr bytes one invocation may log; the rest is counted and dropped.
const STDERR_BYTES: usize = 1024 * 1024;

/// How to run a program.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessConfig {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables passed through from askgate's environment; the rest is not inherited.
    pub pass_env: Vec<String>,
    /// Variables set to fixed values.
    pub set_env: BTreeMap<String, String>,
    /// How long one invocation may run (time spent waiting for an answer in hold mode does
    /// not count).
    pub timeout: Duration,
    /// Keep the process alive while a question waits, instead of ending the turn.
    pub hold: bool,
    /// Show a failure's details and the tail of stderr in the conversation (for development);
    /// by default the conversation is told only that the program failed, and the log has why.
    pub show_stderr: bool,
}

/// A function that runs a program.
pub struct Process {
    name: String,
    config: ProcessConfig,
}

impl Process {
    /// A process function called `name`.
    pub fn new(name: impl Into<String>, config: ProcessConfig) -> Self {
        Self { name: name.into(), config }
    }
}

/// A message from the program.
#[derive(Debug, PartialEq)]
enum FromProgram {
    Ask(Box<Ask>),
    Say(String),
    Done(String),
    Error(String),
}

#[derive(Deserialize)]
struct SayLine {
    text: String,
}

#[derive(Deserialize)]
struct DoneLine {
    #[serde(default)]
    reply: Option<String>,
}

#[derive(Deserialize)]
struct ErrorLine {
    message: String,
}

/// Parses one line from the program. A key an ask does not know fails the line (a misspelt
/// `"option"` must not become a free-text question).
fn parse_line(line: &str) -> Result<FromProgram, String> {
    let mut value: Value =
        serde_json::from_str(line).map_err(|e| format!("malformed line from the program ({e}): {}", quote(line)))?;
    let Some(kind) = value.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return Err(format!("a line from the program has no \"type\": {}", quote(line)));
    };
    if let Value::Object(map) = &mut value {
        map.remove("type");
    }
    let bad = |e: serde_json::Error| format!("malformed `{kind}` line from the program ({e}): {}", quote(line));
    let ask = |kind: Kind, value: Value| -> Result<FromProgram, String> {
        let wire: AskWire = serde_json::from_value(value).map_err(bad)?;
        let ask = wire.into_ask(kind).map_err(|e| format!("{e}: {}", quote(line)))?;
        Ok(FromProgram::Ask(Box::new(ask)))
    };
    Ok(match kind.as_str() {
        "ask" => ask(Kind::Question, value)?,
        "confirm" => ask(Kind::Confirm, value)?,
        "approve" => ask(Kind::Approval, value)?,
        "form" => ask(Kind::Form, value)?,
        "say" => FromProgram::Say(serde_json::from_value::<SayLine>(value).map_err(bad)?.text),
        "done" => FromProgram::Done(serde_json::from_value::<DoneLine>(value).map_err(bad)?.reply.unwrap_or_default()),
        "error" => FromProgram::Error(serde_json::from_value::<ErrorLine>(value).map_err(bad)?.message),
        other => {
            return Err(format!("unknown message type `{}` from the program: {}", clip(other, 40, "…"), quote(line)));
        }
    })
}

/// The first line a program reads.
#[derive(Serialize)]
struct StartLine<'a> {
    r#type: &'static str,
    run: RunId,
    function: &'a str,
    conversation: Option<&'a Conversation>,
    user: &'a UserRef,
    input: &'a str,
    can_ask: bool,
}

#[derive(Serialize)]
struct OutcomeLine<'a> {
    r#type: &'static str,
    step: u32,
    #[serde(flatten)]
    outcome: &'a Outcome,
}

#[derive(Serialize)]
struct PendingLine {
    r#type: &'static str,
    step: u32,
    status: &'static str,
    question: QuestionId,
}

fn to_line<T: Serialize>(line: &T) -> String {
    // Serialising these plain structs cannot fail: no maps with non-string keys, no floats.
    serde_json::to_string(line).unwrap_or_default()
}

/// The `outcome` line for a step.
/// How a program ended, in words: `exit code 1`, `signal 9`.
fn exit_words(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => status.to_string(),
    }
}

fn outcome_line(step: u32, outcome: &Outcome) -> String {
    to_line(&OutcomeLine { r#type: "outcome", step, outcome })
}

fn quote(line: &str) -> String {
    format!("`{}`", clip(line, 200, "…"))
}

/// The last lines of the program's stderr, for failure messages.
#[derive(Default)]
struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut tail = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tail.push_back(clip(&line, 300, "…"));
        while tail.len() > STDERR_TAIL_LINES {
            tail.pop_front();
        }
    }

    fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let joined = tail.iter().cloned().collect::<Vec<_>>().join("\n");
        let skip = joined.chars().count().saturating_sub(STDERR_TAIL_CHARS);
        joined.chars().skip(skip).collect()
    }
}

/// The lines a program may write: [`BURST`] at once, then [`PER_SECOND`] (governor's GCRA).
struct RateLimit(governor::DefaultDirectRateLimiter);

impl RateLimit {
    fn new() -> Self {
        let per_second = std::num::NonZeroU32::new(PER_SECOND).expect("not zero");
        let burst = std::num::NonZeroU32::new(BURST).expect("not zero");
        Self(governor::RateLimiter::direct(governor::Quota::per_second(per_second).allow_burst(burst)))
    }

    fn allow(&self) -> bool {
        self.0.check().is_ok()
    }
}

/// How a conversation with the program ended.
enum End {
    Reply(String),
    Pending(QuestionId),
    /// The program said what went wrong, for the person (`{"type":"error","message"}`).
    Reported(String),
    Failed(FunctionError),
}

/// The longest message of a program's own shown to the person.
const MAX_REPORTED: usize = 500;

/// A program's own error message as the person reads it: control characters gone (line breaks
/// and tabs become spaces), at most [`MAX_REPORTED`] characters.
fn for_the_person(message: &str) -> String {
    let flat: String = message
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            // Control characters, and the invisible ones that reorder or hide text (bidi
            // overrides and isolates, zero-width marks).
            c if c.is_control() => None,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' => None,
            c => Some(c),
        })
        .collect();
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&flat, MAX_REPORTED, "…")
}

#[async_trait]
impl Function for Process {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let run = ctx.run().clone();
        let config = &self.config;
        let mut command = clean_command(&config.command, &config.cwd, &config.pass_env, &config.set_env);
        // Tells a helper library that stdout is the protocol's (the Python one moves print()).
        command.env("ASKGATE_PROTOCOL", "1");
        // The tree ends when this turn ends however it ends (done, pending, failure, a timeout,
        // or the turn dropped at shutdown): neither a `sleep 120 &` nor a `setsid sleep 120 &`
        // is left behind.
        let (mut child, _tree) = spawn_tree(&mut command)
            .map_err(|e| FunctionError::failed(format!("could not start `{}`: {e}", self.config.command.join(" "))))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(FunctionError::failed("the program's pipes could not be opened"));
        };
        let tail = Arc::new(StderrTail::default());
        let stderr_task = tokio::spawn(log_stderr(stderr, tail.clone(), run.id.to_string(), self.name.clone()));

        let start = to_line(&StartLine {
            r#type: "start",
            run: run.id,
            function: &self.name,
            conversation: run.conversation.as_ref(),
            user: &run.initiator,
            input,
            can_ask: ctx.can_ask(),
        });
        let end = match send(&mut stdin, &start).await {
            Ok(()) => self.converse(ctx, &mut child, &mut stdin, stdout).await,
            Err(e) => End::Failed(FunctionError::failed(format!("could not write to the program: {e}"))),
        };
        drop(stdin);
        let status = match &end {
            End::Failed(_) | End::Reported(_) => {
                let _ = child.start_kill();
                child.wait().await.ok()
            }
            _ => match tokio::time::timeout(GRACE, child.wait()).await {
                Ok(status) => status.ok(),
                Err(_) => {
                    tracing::warn!(run = %run.id, function = %self.name, "the program did not exit after its turn; killed");
                    let _ = child.start_kill();
                    child.wait().await.ok()
                }
            },
        };
        // stderr ends when the program is gone; wait for its last lines.
        let _ = tokio::time::timeout(Duration::from_secs(1), stderr_task).await;
        match end {
            End::Reply(reply) => {
                if let Some(status) = status.filter(|s| !s.success()) {
                    tracing::warn!(run = %run.id, function = %self.name, %status, "the program exited unsuccessfully after done");
                }
                Ok(reply)
            }
            End::Pending(question) => Err(AskError::Pending { question }.into()),
            End::Reported(message) => {
                // The program's message is for the person; its stderr stays in the log.
                let tail = tail.text();
                let logged = clip(&message, 1000, "…").replace(['\n', '\r'], " ");
                tracing::warn!(run = %run.id, function = %self.name, stderr = %tail, "the program reported: {logged}");
                let shown = for_the_person(&message);
                let shown = if shown.is_empty() { "the program failed without saying why".to_owned() } else { shown };
                Err(FunctionError::failed(shown))
            }
            End::Failed(FunctionError::Failed { message, .. }) => {
                let tail = tail.text();
                let detailed = if tail.is_empty() { message.clone() } else { format!("{message}\nstderr:\n{tail}") };
                if self.config.show_stderr {
                    return Err(FunctionError::failed(detailed));
                }
                // stderr may hold paths, hosts or secrets: it stays in the operator's log.
                tracing::warn!(run = %run.id, function = %self.name, "the program failed: {detailed}");
                Err(FunctionError::Hidden {
                    public: format!("the program failed (run {}; details are in askgate's log)", run.id.short()),
                    detail: message,
                })
            }
            End::Failed(e) => Err(e),
        }
    }
}

impl Process {
    async fn converse(
        &self,
        ctx: &mut Context,
        child: &mut Child,
        stdin: &mut ChildStdin,
        stdout: tokio::process::ChildStdout,
    ) -> End {
        // The protocol is UTF-8 JSON, one object per line: a line that is too long or not
        // UTF-8 fails the run.
        let mut out = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE));
        let rate = RateLimit::new();
        let mut deadline = Instant::now() + self.config.timeout;
        let failed = |m: String| End::Failed(FunctionError::failed(m));
        loop {
            let line = tokio::select! {
                line = out.next() => line,
                () = tokio::time::sleep_until(deadline) => {
                    return failed(format!("the program ran longer than its timeout of {}s", self.config.timeout.as_secs()));
                }
            };
            let line = match line {
                Some(Ok(line)) => line,
                None => {
                    let status = tokio::time::timeout(GRACE, child.wait()).await;
                    return failed(match status {
                        Ok(Ok(s)) if s.success() => "the program exited without sending done".to_owned(),
                        Ok(Ok(s)) => format!("the program exited with {} before sending done", exit_words(s)),
                        _ => "the program closed its output without sending done".to_owned(),
                    });
                }
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    return failed(format!("the program wrote a line longer than {MAX_LINE} bytes"));
                }
                Some(Err(LinesCodecError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return failed("the program wrote a line that is not UTF-8".to_owned());
                }
                Some(Err(LinesCodecError::Io(e))) => {
                    return failed(format!("could not read the program's output: {e}"));
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            if !rate.allow() {
                return failed(format!("the program wrote more than {PER_SECOND} lines per second"));
            }
            let message = match parse_line(&line) {
                Ok(m) => m,
                Err(e) => return failed(e),
            };
            match message {
                FromProgram::Ask(ask) => {
                    let ask = *ask;
                    let step = ctx.next_step();
                    let outcome = if self.config.hold {
                        let waiting_since = Instant::now();
                        let outcome = tokio::select! {
                            outcome = ctx.ask_outcome(ask) => outcome,
                            status = child.wait() => {
                                let reason = "the program exited while waiting for the answer";
                                if let Err(e) = ctx.abandon_wait(reason).await {
                                    return End::Failed(e.into());
                                }
                                let status = status.map(exit_words).unwrap_or_else(|e| e.to_string());
                                return failed(format!("{reason} ({status})"));
                            }
                        };
                        deadline += waiting_since.elapsed();
                        outcome
                    } else {
                        ctx.ask_outcome(ask).await
                    };
                    let reply = match outcome {
                        Ok(outcome) => outcome_line(step, &outcome),
                        Err(AskError::Pending { question }) => {
                            let line = PendingLine { r#type: "outcome", step, status: "pending", question };
                            // A program that already left is fine: it had nothing more to say.
                            let _ = send(stdin, &to_line(&line)).await;
                            return End::Pending(question);
                        }
                        Err(e) => return End::Failed(e.into()),
                    };
                    if let Err(e) = send(stdin, &reply).await {
                        return failed(format!("could not write to the program: {e}"));
                    }
                }
                FromProgram::Say(text) => {
                    if let Err(e) = ctx.say(text).await {
                        return End::Failed(e.into());
                    }
                }
                FromProgram::Done(reply) => return End::Reply(reply),
                FromProgram::Error(message) => return End::Reported(message),
            }
        }
    }
}

async fn send(stdin: &mut ChildStdin, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    stdin.write_all(&bytes).await?;
    stdin.flush().await
}

/// Logs the program's stderr, within limits: lines of at most [`STDERR_LINE`] bytes, the
/// usual line rate after a burst, and [`STDERR_BYTES`] per invocation. The rest is read (so the
/// program never blocks on a full pipe), counted, and dropped with one log line.
async fn log_stderr(stderr: tokio::process::ChildStderr, tail: Arc<StderrTail>, run: String, function: String) {
    let mut lines = BufReader::new(stderr);
    let rate = RateLimit::new();
    let (mut logged, mut dropped_lines, mut dropped_bytes) = (0usize, 0u64, 0u64);
    loop {
        let (line, length) = match read_capped(&mut lines, STDERR_LINE).await {
            Ok(Some(read)) => read,
            Ok(None) | Err(_) => break,
        };
        if logged + line.len() > STDERR_BYTES || !rate.allow() {
            dropped_lines += 1;
            dropped_bytes += length as u64;
            continue;
        }
        logged += line.len();
        let shown =
            if length > line.len() { format!("{line} [{} more bytes dropped]", length - line.len()) } else { line };
        tracing::info!(%run, %function, "stderr: {shown}");
        tail.push(shown);
    }
    if dropped_lines > 0 {
        tracing::warn!(%run, %function, "dropped {dropped_lines} stderr lines ({dropped_bytes} bytes) over the limits");
    }
}

/// Reads one line, keeping at most `cap` bytes of it; returns the kept text and the line's
/// whole length. `None` at the end.
///
/// Written by hand rather than with `LinesCodec`: stderr is not the protocol, it may hold any
/// bytes, and the codec ends its stream at the first line that is not UTF-8; then nothing
/// would read the pipe and the program would block on a full one.
async fn read_capped(input: &mut (impl AsyncBufRead + Unpin), cap: usize) -> std::io::Result<Option<(String, usize)>> {
    let mut kept = Vec::new();
    let mut length = 0;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok((length > 0).then(|| (String::from_utf8_lossy(&kept).into_owned(), length)));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..take.min(room)]);
        length += take;
        input.consume(if done { take + 1 } else { take });
        if done {
            let text = String::from_utf8_lossy(&kept);
            return Ok(Some((text.trim_end_matches('\r').to_owned(), length.max(1))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Timeout;

    #[test]
    fn an_ask_line_becomes_an_ask() {
        let m = parse_line(
            r#"{"type":"ask","prompt":"Which?","options":["a","b"],"allow_custom":true,"timeout":60,"default":null}"#,
        );
        let Ok(FromProgram::Ask(ask)) = m else { panic!("{m:?}") };
        assert_eq!(ask.prompt, "Which?");
        assert_eq!(ask.options, ["a", "b"]);
        assert!(ask.allow_custom);
        assert_eq!(ask.timeout, Timeout::Seconds(60));
        assert_eq!(ask.default, None);
    }

    #[test]
    fn malformed_and_unknown_lines_are_quoted_in_the_error() {
        let e = parse_line("{not json").unwrap_err();
        assert!(e.starts_with("malformed line from the program") && e.contains("`{not json`"), "{e}");
        let e = parse_line(r#"{"type":"dance"}"#).unwrap_err();
        assert!(e.starts_with("unknown message type `dance`"), "{e}");
        let e = parse_line(r#"{"type":"ask"}"#).unwrap_err();
        assert!(e.contains("the prompt is empty"), "{e}");
        let e = parse_line(r#"{"type":"ask","prompt":"x","timeout":-3}"#).unwrap_err();
        assert!(e.contains("timeout -3"), "{e}");
        let e = parse_line(r#"{"type":"ask","prompt":"Which?","option":["a","b"]}"#).unwrap_err();
        assert!(e.contains("unknown field `option`"), "a misspelt key is named: {e}");
        let e = parse_line(r#"{"type":"confirm","prompt":"Sure?","defualt":true}"#).unwrap_err();
        assert!(e.contains("unknown field `defualt`"), "{e}");
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;
        use crate::question::Timeout;

        proptest! {
            #[test]
            fn any_line_is_parsed_or_refused_without_panicking(line in "\\PC{0,200}") {
                let _ = parse_line(&line);
            }

            #[test]
            fn any_json_object_is_parsed_or_refused_without_panicking(
                kind in prop_oneof![Just("ask"), Just("confirm"), Just("approve"), Just("say"), Just("done"), Just("x")],
                key in "[a-z_]{1,12}",
                value in prop_oneof![Just(json!(null)), Just(json!(1)), Just(json!("s")), Just(json!([1, "a"])), Just(json!({}))],
            ) {
                let _ = parse_line(&json!({"type": kind, "prompt": "p", "action": "a", key: value}).to_string());
            }

            #[test]
            fn an_ask_line_written_as_a_program_writes_it_parses_back_to_the_same_ask(
                prompt in "[^\\x00-\\x1f\"\\\\]{1,40}",
                options in proptest::collection::vec("[a-z0-9 ]{1,10}", 0..5),
                multi in any::<bool>(),
                allow_custom in any::<bool>(),
                timeout in proptest::option::of(1u64..100_000),
                detail in proptest::option::of("[a-z ]{0,20}"),
            ) {
                let line = json!({
                    "type": "ask", "prompt": prompt, "options": options, "multi": multi,
                    "allow_custom": allow_custom, "timeout": timeout, "detail": detail,
                });
                let Ok(FromProgram::Ask(ask)) = parse_line(&line.to_string()) else {
                    return Err(TestCaseError::fail(format!("refused {line}")));
                };
                let written = json!({
                    "type": "ask", "prompt": ask.prompt, "options": ask.options, "multi": ask.multi,
                    "allow_custom": ask.allow_custom,
                    "timeout": match ask.timeout { Timeout::Seconds(s) => json!(s), _ => json!(null) },
                    "detail": ask.detail,
                });
                prop_assert_eq!(parse_line(&written.to_string()), Ok(FromProgram::Ask(ask)));
            }
        }
    }

    #[test]
    fn outcome_lines_carry_type_step_and_the_outcome() {
        let line = outcome_line(2, &Outcome::Declined { feedback: Some("not now".into()) });
        assert_eq!(line, r#"{"type":"outcome","step":2,"status":"declined","feedback":"not now"}"#);
        let line = outcome_line(0, &Outcome::Expired { value: Some(Value::Bool(false)) });
        assert!(line.contains(r#""status":"expired""#) && line.contains(r#""value":false"#), "{line}");
    }
}
