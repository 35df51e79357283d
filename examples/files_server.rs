//! A small MCP server with file tools, to put behind askgate's approvals (`[[mcp.upstream]]`;
//! see docs/src/gating.md): on stdin/stdout, or over streamable HTTP with
//! `--http 127.0.0.1:9000` (it prints `listening on http://…/mcp`). It works inside the
//! directory given as its last argument and writes its process id to `files_server.pid` there.
//!
//! Tools: `read_file` and `delete_file` (a `path` inside the directory), `format_disk` (does
//! nothing; it is there to be denied), `wait` (answers after `seconds`; it writes `waiting` in
//! the directory when it starts and `cancelled` when the client cancels it), `grow` (offers one
//! more tool, `echo`, and tells the client that the list changed), `big` (answers with a text
//! of `bytes` bytes).
//!
//! Every call it receives is appended to `calls.log` in the directory (the tool's name, as
//! sent). With `--normalise`, it runs a tool whatever the spelling of its name, as a
//! hand-written server may: letters in any case, fullwidth forms and ligatures (NFKC), `-` for
//! `_`, white space and invisible characters ignored — so only askgate's own rules stand
//! between an agent and `delete_file`.
//!
//! It speaks MCP 2026-07-28 and the revisions before it; with `--legacy`, only those up to
//! 2025-11-25 (the `initialize` handshake). Each call writes the revision it came in by to
//! `revision` in the directory. With `--slow-start SECONDS` it waits that long before it
//! answers anything, as a server that loads a while does.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone)]
struct Files {
    root: Arc<PathBuf>,
    grown: Arc<AtomicBool>,
    normalise: bool,
    legacy: bool,
}

/// The tool a sloppy server takes `name` for (see `--normalise`).
fn normalised(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    name.nfkc()
        .filter(|c| {
            !c.is_whitespace() && !c.is_control() && !matches!(c, '\u{200B}'..='\u{200F}' | '\u{00AD}' | '\u{FEFF}')
        })
        .map(|c| if c == '-' { '_' } else { c.to_ascii_lowercase() })
        .collect()
}

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let required: Vec<&String> = properties.as_object().map(|p| p.keys().collect()).unwrap_or_default();
    let Value::Object(schema) = json!({"type": "object", "properties": properties, "required": required}) else {
        unreachable!("a schema is an object")
    };
    Tool::new(name, description, Arc::new(schema))
}

fn text(message: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(message.into())])
}

fn error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl Files {
    /// `path` inside the root, or none when it would leave it.
    fn inside(&self, arguments: &JsonObject) -> Option<PathBuf> {
        let path = Path::new(arguments.get("path")?.as_str()?);
        path.components().all(|c| matches!(c, Component::Normal(_))).then(|| self.root.join(path))
    }

    async fn run(&self, name: &str, arguments: &JsonObject, context: &RequestContext<RoleServer>) -> CallToolResult {
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(self.root.join("calls.log"));
        if let Ok(log) = log.as_mut() {
            use std::io::Write;
            let _ = writeln!(log, "{name:?}");
        }
        if let Some(revision) = context.protocol_version() {
            let _ = std::fs::write(self.root.join("revision"), revision.as_str());
        }
        let name = if self.normalise { normalised(name) } else { name.to_owned() };
        match name.as_str() {
            "read_file" => match self.inside(arguments) {
                Some(path) => std::fs::read_to_string(&path).map_or_else(|e| error(e.to_string()), text),
                None => error("`path` must be a relative path inside the directory"),
            },
            "delete_file" => match self.inside(arguments) {
                Some(path) => std::fs::remove_file(&path)
                    .map_or_else(|e| error(e.to_string()), |()| text(format!("deleted {}", path.display()))),
                None => error("`path` must be a relative path inside the directory"),
            },
            "format_disk" => {
                let _ = std::fs::write(self.root.join("formatted"), "");
                text("nothing was formatted")
            }
            "wait" => {
                let seconds = arguments.get("seconds").and_then(Value::as_u64).unwrap_or(1);
                let _ = std::fs::write(self.root.join("waiting"), seconds.to_string());
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(seconds)) => text(format!("waited {seconds}s")),
                    () = context.ct.cancelled() => {
                        let _ = std::fs::write(self.root.join("cancelled"), seconds.to_string());
                        error("cancelled")
                    }
                }
            }
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                match context.peer.notify_tool_list_changed().await {
                    Ok(()) => text("echo is offered now"),
                    Err(e) => error(e.to_string()),
                }
            }
            "big" => {
                let bytes = arguments.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                text("x".repeat(usize::try_from(bytes).unwrap_or(0)))
            }
            "echo" if self.grown.load(Ordering::SeqCst) => text(Value::Object(arguments.clone()).to_string()),
            _ => error(format!("no tool {name}")),
        }
    }
}

impl ServerHandler for Files {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("files", "1"))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        let newest = if self.legacy { ProtocolVersion::V_2025_11_25 } else { ProtocolVersion::LATEST };
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&newest))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let path = json!({"type": "string", "description": "a path inside the directory"});
        let mut tools = vec![
            tool("read_file", "Read a text file", json!({"path": path})),
            tool("delete_file", "Delete a file", json!({"path": path})),
            tool("format_disk", "Format the disk", json!({})),
            tool("wait", "Answer after some seconds", json!({"seconds": {"type": "integer"}})),
            tool("grow", "Offer one more tool, echo", json!({})),
            tool("big", "Answer with a text of some bytes", json!({"bytes": {"type": "integer"}})),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool("echo", "Answer with the arguments", json!({})));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.run(&request.name, &request.arguments.unwrap_or_default(), &context).await.into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let normalise = args.iter().any(|a| a == "--normalise");
    let legacy = args.iter().any(|a| a == "--legacy");
    args.retain(|a| a != "--normalise" && a != "--legacy");
    if let Some(at) = args.iter().position(|a| a == "--slow-start") {
        let seconds: u64 = args.get(at + 1).and_then(|s| s.parse().ok()).unwrap_or(1);
        args.drain(at..=at + 1);
        tokio::time::sleep(Duration::from_secs(seconds)).await;
    }
    let root = PathBuf::from(args.last().cloned().unwrap_or_else(|| ".".to_owned()));
    std::fs::write(root.join("files_server.pid"), std::process::id().to_string())?;
    let files = Files { root: Arc::new(root), grown: Arc::default(), normalise, legacy };
    if let [flag, address, _] = args.as_slice()
        && flag == "--http"
    {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
        let listener = tokio::net::TcpListener::bind(address).await?;
        println!("listening on http://{}/mcp", listener.local_addr()?);
        let service = StreamableHttpService::new(
            move || Ok(files.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await?;
        return Ok(());
    }
    let server = files.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
