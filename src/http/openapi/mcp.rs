//! `/mcp` in the document: the MCP transport's operations, whose messages MCP's own
//! specification describes.

use serde_json::{Value, json};

use super::{Schemas, operation};

/// `/mcp`, when `[mcp]` is on: the Model Context Protocol's streamable HTTP transport, whose
/// messages its own specification describes.
pub(super) fn paths(s: &mut Schemas) -> Value {
    let described = "JSON-RPC messages of the Model Context Protocol (https://modelcontextprotocol.io), \
                     served when `[mcp]` is enabled.";
    let message = s.name(
        "McpMessage",
        json!({"type": "object", "description": "A JSON-RPC 2.0 message of the Model Context Protocol, as its \
                                                 specification describes it."}),
    );
    let op = |id: &str, summary: &str, responses: Value| {
        let mut op = operation(id, summary, "mcp", json!({"description": described}), responses);
        op["parameters"] = json!([{"name": "Mcp-Session-Id", "in": "header", "required": false,
            "schema": {"type": "string"}, "description": "The session, after `initialize`."}]);
        op
    };
    let mut post = op(
        "mcpPost",
        "Send an MCP message",
        json!({
            "200": {"description": "The response, as JSON or as a stream.",
                    "content": {"application/json": {"schema": message.clone()}, "text/event-stream": {"schema": {"type": "string"}}}},
            "202": {"description": "A notification or response was taken."},
            "400": {"description": "Not a JSON-RPC message."},
            "404": {"description": "No such session (or MCP is not enabled)."},
            "406": {"description": "`Accept` must name application/json and text/event-stream."},
            "415": {"description": "The body must be application/json."},
        }),
    );
    post["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": message}}});
    let get = op(
        "mcpStream",
        "Open a session's stream of server messages",
        json!({"200": {"description": "The stream.", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
               "400": {"description": "No session named."},
               "404": {"description": "No such session (or MCP is not enabled)."},
               "405": {"description": "Not offered."},
               "406": {"description": "`Accept` must name text/event-stream."},
               "409": {"description": "The session's stream is already open."}}),
    );
    let delete = op(
        "mcpEnd",
        "End a session",
        json!({"202": {"description": "Ended."},
               "400": {"description": "No session named."},
               "404": {"description": "No such session (or MCP is not enabled)."},
               "405": {"description": "Not offered."}}),
    );
    json!({"post": post, "get": get, "delete": delete})
}
