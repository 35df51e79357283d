//! The console: the reference text-only channel, on stdin and stdout.
//!
//! Every line read is a message from `console:local` in conversation `console:local`. Cards,
//! replies and resolutions are printed. End of input stops the console, not the server.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::{Channel, ChannelError, ChannelState};
use crate::engine::{Engine, Inbound};
use crate::question::{Conversation, Question, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

pub mod terminal;

/// The console's conversation and user id.
pub const LOCAL: &str = crate::question::CONSOLE_OPERATOR;

/// The longest the console waits for a run's turn before it reads the next line.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The longest line the console reads; longer lines are refused, not cut.
const MAX_LINE: usize = 16 * 1024;

type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The console channel's outbound half.
pub struct Console {
    out: Mutex<Output>,
    clock: Clock,
    /// When it was made: the questions it lists at start are those asked before, whose cards
    /// an earlier askgate printed. One asked since has its card printed through the outbox.
    made_at: i64,
}

impl Console {
    /// A console writing to `out` (stdout in the binary).
    pub fn new(out: Output, clock: Clock) -> Arc<Self> {
        let made_at = clock.now_ms();
        Arc::new(Self { out: Mutex::new(out), clock, made_at })
    }

    /// Prints `text` and a line break. Asker text reaches it made safe already; it is made safe
    /// again here, so that nothing printed (a person's own words echoed back included) can
    /// move the terminal's cursor or change its screen.
    async fn print(&self, text: &str) -> Result<(), ChannelError> {
        let text = crate::text::safe(text);
        let mut out = self.out.lock().await;
        let mut bytes = text.trim_end().as_bytes().to_vec();
        bytes.push(b'\n');
        out.write_all(&bytes).await.map_err(|e| ChannelError::permanent(e.to_string()))?;
        out.flush().await.map_err(|e| ChannelError::permanent(e.to_string()))
    }

    /// Reads lines from `input` and hands each to the engine until input ends or `stop`
    /// fires; prints each response.
    pub async fn read_loop(
        self: Arc<Self>,
        engine: Engine,
        mut input: Box<dyn AsyncBufRead + Send + Unpin>,
        stop: CancellationToken,
    ) {
        let conversation = Conversation::parse(LOCAL).unwrap_or_else(|_| unreachable!("LOCAL is well-formed"));
        let user = UserRef::operator();
        // Up for as long as askgate runs: after the input ends, it still prints.
        engine.delivery().set_channel_state(self.name(), ChannelState::Up);
        self.show_waiting(&engine, &conversation).await;
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = tokio::select! {
                r = read_line(&mut input, &mut line) => r,
                () = stop.cancelled() => break,
            };
            let text = match read {
                Ok(None) => break,
                Ok(Some(text)) => text,
                Err(message) => {
                    self.report(&message).await;
                    continue;
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            let inbound = Inbound::text(conversation.clone(), user.clone(), Surface::CONSOLE, text);
            let response = engine.router().handle(inbound).await;
            if let Some(message) = response.text {
                self.report(&message).await;
            }
            // Read the next line only once the runs this one started or resumed have asked or
            // ended, as a person would: piped input then answers the questions it follows.
            tokio::select! {
                () = engine.runner().settled(&conversation, SETTLE_LIMIT) => {}
                () = stop.cancelled() => break,
            }
        }
    }

    /// At start: the questions that still wait for an answer here (after a restart, the cards
    /// printed before it have scrolled away or are in another terminal).
    async fn show_waiting(&self, engine: &Engine, conversation: &Conversation) {
        match engine.records().pending_for(Some(conversation), wording::LISTED + 1).await {
            Ok(mut waiting) => {
                // Asked since askgate started (an agent can ask before this loop runs): its
                // card is printed already, or on its way.
                waiting.retain(|q| q.created_at < self.made_at);
                if waiting.is_empty() {
                    return;
                }
                let (shown, more) = wording::listed(&waiting);
                let n = shown.len();
                self.report(&if more {
                    format!("More than {n} questions still wait for your answer; the {n} oldest (the web page lists them all):")
                } else {
                    format!("{n} question{} still wait{} for your answer:", plural(n), if n == 1 { "s" } else { "" })
                })
                .await;
                let now = self.clock.now_ms();
                for q in shown {
                    self.report(&wording::card(q, now)).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not list the questions waiting on the console"),
        }
    }

    async fn report(&self, message: &str) {
        if let Err(e) = self.print(message).await {
            tracing::warn!(error = %e, "console output failed");
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads one line of at most [`MAX_LINE`] bytes. `Ok(None)` at end of input; an error message
/// for a line that is too long or not UTF-8 (the rest of that line is skipped).
///
/// Written by hand rather than with `LinesCodec::new_with_max_length`: through `FramedRead`
/// the codec's first error (a line too long, or not UTF-8) ends the stream, and the console
/// would stop taking input at one bad line where it should say so and read on.
async fn read_line(input: &mut (dyn AsyncBufRead + Send + Unpin), buf: &mut Vec<u8>) -> Result<Option<String>, String> {
    let mut too_long = false;
    loop {
        let chunk = match input.fill_buf().await {
            Ok(c) => c,
            Err(e) => return Err(format!("could not read input: {e}")),
        };
        if chunk.is_empty() {
            if buf.is_empty() && !too_long {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > MAX_LINE + 1 {
            too_long = true;
        } else {
            buf.extend_from_slice(&chunk[..take]);
        }
        input.consume(take);
        if done {
            break;
        }
    }
    if too_long {
        return Err(format!("that line is longer than {MAX_LINE} bytes; nothing was done"));
    }
    String::from_utf8(std::mem::take(buf))
        .map(|s| Some(s.trim_end_matches(['\n', '\r']).to_owned()))
        .map_err(|_| "that line is not valid UTF-8; nothing was done".to_owned())
}

#[async_trait]
impl Channel for Console {
    fn name(&self) -> &'static str {
        "console"
    }

    fn surface(&self) -> Surface {
        Surface::CONSOLE
    }

    fn serves(&self, conversation: &Conversation) -> bool {
        conversation.as_str() == LOCAL
    }

    fn served(&self) -> Vec<String> {
        vec![LOCAL.to_owned()]
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        self.print(&wording::card(question, self.clock.now_ms())).await?;
        Ok(vec![Delivery::card(question.id, Surface::CONSOLE, "local", question.id.short())])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        if cards.is_empty() {
            return Ok(());
        }
        self.print(&wording::resolved_line(question)).await
    }

    async fn send_text(&self, _conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.print(text).await
    }
}
