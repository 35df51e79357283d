//! `askgate mcp`: an MCP server on stdin/stdout for clients that only start local processes.
//! It holds nothing itself: every message goes to a running askgate's `/mcp` (streamable
//! HTTP, with the API token) and every answer comes back, so questions live where every other
//! question lives. It never opens the database. A client's channel may add lines of its own to
//! the stream ([`Channel`]: Claude Code's, in `crate::agent::claude_code::channel`).

use std::collections::HashSet;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, JsonRpcError, JsonRpcResponse, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;

use super::lines::{Line, Lines, Oversized};

/// How long the first connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long ending the session with askgate may take once everything is answered.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest line read from the agent. askgate's `/mcp` takes much less and says so for
/// each message (HTTP 413); this only bounds what the bridge holds, as rmcp's stdio does.
const MAX_LINE: usize = DEFAULT_MAX_LINE_LENGTH;

/// Why the bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// Nothing listens at the URL.
    #[error("no askgate answers at {url}: {reason}")]
    Unreachable {
        /// `/mcp` of the askgate it tried.
        url: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// askgate went away, or the agent's side of stdin/stdout broke.
    #[error("askgate at {url} failed: {reason}")]
    Failed {
        /// As above.
        url: String,
        /// What failed.
        reason: String,
    },
}

/// What a client's channel adds to the bridge: notifications of its own on stdin, which never
/// go to `/mcp`, capabilities in the `initialize` answer, and messages of its own on stdout.
pub trait Channel: Send + Sync {
    /// The params of `line` when it is the channel's own notification.
    fn claim(&self, line: &[u8]) -> Option<Value>;

    /// Handles a notification [`Channel::claim`] took; what it writes back goes to `out`.
    fn take(&self, params: Value, out: UnboundedSender<Value>);

    /// The `initialize` answer as the client reads it. What the channel pushes from then on
    /// goes to `out`.
    fn initialized(&self, answer: &ServerJsonRpcMessage, out: UnboundedSender<Value>) -> Value;
}

/// Bridges stdin/stdout to `url` (askgate's `/mcp`) until either side ends. When stdin ends,
/// every request read before it is still answered (a held `ask_user` waits for its person),
/// then the bridge closes its side and returns.
///
/// One bad message does not end it: a line that is not JSON gets a parse error (id null), one
/// that is not an MCP message or is too long gets an invalid-request error, and a request
/// askgate refuses (a body over its limit, say) gets an error for its id; the bridge goes on.
///
/// # Errors
/// [`BridgeError`] when askgate cannot be reached or goes away, or stdout cannot be written.
/// Requests still owed an answer when askgate goes away are answered with an error first.
pub async fn run(url: &str, token: &str, channel: Option<&dyn Channel>) -> Result<(), BridgeError> {
    reachable(url).await?;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    let mut upstream = StreamableHttpClientTransport::from_config(config);
    let mut lines = Lines::new(tokio::io::stdin(), MAX_LINE);
    let mut stdout = tokio::io::stdout();
    let failed = |e: &dyn std::fmt::Display| BridgeError::Failed { url: url.to_owned(), reason: e.to_string() };
    let (decided, mut decisions) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let mut initialize = None;
    // The requests sent to askgate whose answer has not been written yet.
    let mut owed: HashSet<RequestId> = HashSet::new();
    let mut input_ended = false;
    while !(input_ended && owed.is_empty()) {
        tokio::select! {
            line = lines.next(), if !input_ended => {
                let Some(line) = line.map_err(|e| failed(&format!("reading stdin: {e}")))? else {
                    input_ended = true;
                    continue;
                };
                let message = match read(line, channel) {
                    Read::Message(message) => message,
                    Read::Answer(error) => {
                        write(&mut stdout, &error).await.map_err(|e| failed(&e))?;
                        continue;
                    }
                    Read::Channel(params) => {
                        if let Some(channel) = channel {
                            channel.take(params, decided.clone());
                        }
                        continue;
                    }
                    Read::Skip => continue,
                };
                let id = request_id(&message);
                if let ClientJsonRpcMessage::Request(request) = &*message
                    && matches!(request.request, ClientRequest::InitializeRequest(_))
                {
                    initialize = id.clone();
                }
                match Transport::<RoleClient>::send(&mut upstream, *message).await {
                    Ok(()) => owed.extend(id),
                    Err(e) if gone(&e) => {
                        return Err(unanswered(&mut stdout, id.into_iter().chain(owed), failed(&e)).await);
                    }
                    Err(e) => match id {
                        Some(id) => {
                            let reason = format!("askgate did not take this message: {e}");
                            let error = error(Some(id), ErrorCode::INTERNAL_ERROR, &reason);
                            write(&mut stdout, &error).await.map_err(|e| failed(&e))?;
                        }
                        // A notification or a response gets no answer; the agent has nothing
                        // waiting on it.
                        None => tracing::warn!(error = %e, "askgate did not take a notification or response"),
                    },
                }
            }
            message = Transport::<RoleClient>::receive(&mut upstream) => {
                let Some(message) = message else {
                    return Err(unanswered(&mut stdout, owed, failed(&"the connection ended")).await);
                };
                match &message {
                    ServerJsonRpcMessage::Response(JsonRpcResponse { id, .. })
                    | ServerJsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) => {
                        owed.remove(id);
                    }
                    _ => {}
                }
                match (&message, channel) {
                    (ServerJsonRpcMessage::Response(response), Some(channel)) if initialize.as_ref() == Some(&response.id) => {
                        initialize = None;
                        write(&mut stdout, &channel.initialized(&message, decided.clone())).await.map_err(|e| failed(&e))?;
                    }
                    _ => write(&mut stdout, &message).await.map_err(|e| failed(&e))?,
                }
            }
            Some(decision) = decisions.recv(), if !input_ended => {
                write(&mut stdout, &decision).await.map_err(|e| failed(&e))?;
            }
        }
    }
    // Ending the session is a courtesy: askgate ends an idle one by itself.
    if tokio::time::timeout(CLOSE_TIMEOUT, Transport::<RoleClient>::close(&mut upstream)).await.is_err() {
        tracing::debug!("askgate did not confirm the end of the session in time");
    }
    Ok(())
}

/// Answers each of `owed` with an error saying askgate went away (as far as stdout still takes
/// them), and returns `failed`.
async fn unanswered(
    stdout: &mut (impl AsyncWrite + Unpin),
    owed: impl IntoIterator<Item = RequestId>,
    failed: BridgeError,
) -> BridgeError {
    for id in owed {
        let reason = format!("no answer: {failed}");
        if write(stdout, &error(Some(id), ErrorCode::INTERNAL_ERROR, &reason)).await.is_err() {
            break;
        }
    }
    failed
}

/// What a line from the agent is.
enum Read {
    /// An MCP message, for askgate (boxed: it is ten times the size of the others).
    Message(Box<ClientJsonRpcMessage>),
    /// Refused here: the error to write back.
    Answer(Value),
    /// A notification of the client's channel: its params.
    Channel(Value),
    /// Nothing to send or answer (a blank line, a notification that is not MCP's).
    Skip,
}

fn read(line: Line, channel: Option<&dyn Channel>) -> Read {
    let line = match line {
        Line::Whole(line) => line,
        Line::TooLong(Oversized { id, method, bytes }) => {
            let reason = format!("the message is {bytes} bytes, larger than the {MAX_LINE} bytes `askgate mcp` reads");
            return match (id, method) {
                (id @ Some(_), true) | (id @ None, false) => {
                    Read::Answer(error(id, ErrorCode::INVALID_REQUEST, &reason))
                }
                // A notification (no id), or a response (no method): nothing waits for an answer.
                _ => {
                    tracing::warn!(bytes, "dropped a notification or response larger than `askgate mcp` reads");
                    Read::Skip
                }
            };
        }
    };
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&line);
    if line.trim_ascii().is_empty() {
        return Read::Skip;
    }
    if let Some(params) = channel.and_then(|c| c.claim(line)) {
        return Read::Channel(params);
    }
    match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(message) => Read::Message(Box::new(message)),
        Err(e) if e.is_syntax() || e.is_eof() => {
            Read::Answer(error(None, ErrorCode::PARSE_ERROR, &format!("the line is not JSON: {e}")))
        }
        Err(e) => {
            let value: Value = serde_json::from_slice(line).unwrap_or_default();
            let id = value.get("id").and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
            if value.get("method").is_some() && value.get("id").is_none() {
                // A notification askgate does not know: ignored, as rmcp's stdio does.
                return Read::Skip;
            }
            Read::Answer(error(id, ErrorCode::INVALID_REQUEST, &format!("not an MCP message: {e}")))
        }
    }
}

/// The id of a request, which is owed an answer.
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// Whether a failed send means askgate itself is gone (rather than refusing this message):
/// the transport closed, or the connection was refused.
fn gone<E: std::error::Error + Send + Sync + 'static>(error: &StreamableHttpError<E>) -> bool {
    match error {
        StreamableHttpError::TransportChannelClosed => true,
        StreamableHttpError::Client(e) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
            while let Some(e) = source {
                if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
                {
                    return true;
                }
                source = e.source();
            }
            false
        }
        _ => false,
    }
}

/// A JSON-RPC error response; `id` null when the message's id could not be read.
fn error(id: Option<RequestId>, code: ErrorCode, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
}

/// Writes one message as a line of JSON.
async fn write(out: &mut (impl AsyncWrite + Unpin), message: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}

/// Connects once to the URL's address, so that a missing askgate is one clear line.
async fn reachable(url: &str) -> Result<(), BridgeError> {
    let unreachable = |reason: String| BridgeError::Unreachable { url: url.to_owned(), reason };
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
        .ok_or_else(|| unreachable("not an http:// URL".to_owned()))?;
    let address = if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!("no connection within {}s", CONNECT_TIMEOUT.as_secs()))),
    }
}
