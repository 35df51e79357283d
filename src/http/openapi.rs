//! `/api/openapi.json`: the HTTP API as an OpenAPI 3.1 document. The bodies' schemas are
//! generated from the types the handlers read and write (schemars, JSON Schema 2020-12 as
//! OpenAPI 3.1 uses it); the operations below name those types, their statuses and errors.
//! `docs/openapi.json` holds a copy, kept current by a test.

use serde_json::{Map, Value, json};

use super::api::{ListQuery, NewRun, Placement, Reject, Reply, WaitQuery};
use super::bodies::{
    Asked, ErrorBody, GrantList, Health, Live, OutcomeView, QuestionPage, QuestionView, ReceiptView, RunStarted,
    RunView, WebhookReply,
};
use super::events::EventsQuery;
use super::grants::GrantsQuery;

mod mcp;
mod people;
mod reference;
mod schemas;

use schemas::{Schemas, enums_as_enum};

use crate::channel::webhook::{InboundMessage, MAX_SKEW_SECS, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::question::{AskWire, Question};
use crate::run::Run;
use people::limited;

/// The document, built once.
pub fn document() -> &'static Value {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOCUMENT.get_or_init(build)
}

/// A JSON response.
fn json_body(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

/// An error response: `{"error":{"code","message"}}`.
fn error(description: &str) -> Value {
    json_body(description, json!({"$ref": "#/components/schemas/ErrorBody"}))
}

/// What every route may answer when askgate listens on loopback and the request named
/// another host.
fn misdirected() -> Value {
    json!({"421": error("askgate listens on a loopback address and the request named another host.")})
}

/// What reading a JSON body may answer, with the limits [`super::read_body`] applies.
fn body_errors() -> Value {
    json!({
        "408": error(&format!("The body did not arrive within {} s.", super::server::BODY_TIMEOUT.as_secs())),
        "413": error(&format!("The body is larger than {} KiB.", super::MAX_BODY / 1024)),
    })
}

fn path_id(description: &str) -> Value {
    path_param("id", description)
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string", "minLength": 1}})
}

/// The prefix rule's number is `QuestionId::MIN_PREFIX` (a unit test holds them together).
const QUESTION_ID: &str = "The question's id, or a unique prefix of at least 4 characters (cards show 8).";

/// An operation behind the API token, with the errors every such operation may answer.
fn operation(id: &str, summary: &str, tag: &str, mut op: Value, responses: Value) -> Value {
    let mut all = json!({
        "401": error("No token, or not one of askgate's tokens (`Authorization: Bearer <token>`)."),
        "403": error(
            "A token that may not do this: an agent's where answering, listing or administering is asked \
             (`agent_token`), or a person's own without the power (`may_not_answer`, `may_not_ask`, `not_admin`).",
        ),
        "500": error("The store failed; nothing was changed."),
    });
    merge(&mut all, misdirected());
    merge(&mut all, responses);
    op["operationId"] = json!(id);
    op["summary"] = json!(summary);
    op["tags"] = json!([tag]);
    op["security"] = json!([{"bearer": []}]);
    op["responses"] = all;
    op
}

/// An operation that reads a JSON body, with the errors reading it may give.
fn with_body(id: &str, summary: &str, tag: &str, schema: Value, responses: Value) -> Value {
    let mut all = json!({"400": error("The body is not JSON, or not of this shape.")});
    merge(&mut all, body_errors());
    merge(&mut all, responses);
    let op = json!({"requestBody": {"required": true, "content": {"application/json": {"schema": schema}}}});
    operation(id, summary, tag, op, all)
}

/// Named example bodies: what a client sends, for the bundled `channels.toml` (where
/// `console:local` and the function `demo` exist).
fn with_examples(mut op: Value, examples: &[(&str, Value)]) -> Value {
    let examples: Map<String, Value> =
        examples.iter().map(|(name, value)| ((*name).to_owned(), json!({"value": value}))).collect();
    op["requestBody"]["content"]["application/json"]["examples"] = Value::Object(examples);
    op
}

/// Links from a response to the operations that take the id it holds, at `pointer`.
fn link(op: &mut Value, status: &str, pointer: &str, to: &[&str]) {
    let links: Map<String, Value> = to
        .iter()
        .map(|id| {
            ((*id).to_owned(), json!({"operationId": id, "parameters": {"id": format!("$response.body#{pointer}")}}))
        })
        .collect();
    op["responses"][status]["links"] = Value::Object(links);
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// `POST /api/questions`' body: the API's own keys and an ask's, flat in one object (the
/// component `NewQuestion`).
fn new_question(schemas: &mut Schemas) -> Value {
    let placement = schemas.reads.root_schema_for::<Placement>().to_value();
    let ask = schemas.reads.root_schema_for::<AskWire>().to_value();
    let mut properties = placement["properties"].as_object().cloned().unwrap_or_default();
    properties.extend(ask["properties"].as_object().cloned().unwrap_or_default());
    // `action` is `prompt` by another name, as an approval says it.
    properties.insert("action".into(), json!({"description": "`prompt`, as an approval names it.", "type": "string"}));
    // `prompt` (or `action`, not both) is needed unless `questions` are given: askgate answers
    // 400 when it is missing. Said in words, not as a `oneOf` of `required`s, which generators
    // read as a body of no type.
    let mut schema = json!({
        "type": "object",
        "description": "A question to ask in a conversation: where (`conversation`, `kind`, \
                        `answerers`) and what (the ask). `prompt` or `action` (not both), unless \
                        `questions` are given.",
        "properties": properties,
        "required": ["conversation"],
        "additionalProperties": false,
    });
    // No `default`s: a generator that sent `prompt`'s beside `action` would be refused (one
    // field twice).
    schemas::defaults_in_words(&mut schema);
    schemas.name("NewQuestion", schema)
}

fn build() -> Value {
    let mut s = Schemas::new();
    // Every error refers to it.
    s.written::<ErrorBody>();
    let id = path_id(QUESTION_ID);
    let answered = |s: &mut Schemas, id: &str, what: &str, body: Value| {
        with_body(
            id,
            what,
            "questions",
            body,
            json!({
                "200": json_body("This attempt resolved the question.", s.written::<ReceiptView>()),
                "202": json_body(
                    "A quorum approval counted this approval and waits for more (`receipt.approvals` of `receipt.quorum`).",
                    s.written::<ReceiptView>(),
                ),
                "403": error(
                    "The caller may not answer it: the question's answerers do not include them \
                     (`not_authorized`), they asked for this quorum approval themselves (`own_request`), or the \
                     token is an agent's, which asks but never answers (`agent_token`).",
                ),
                "404": error("No question has this id, or the prefix names several."),
                "409": error("It was resolved before (`error.receipt` says how), or this approver was counted before."),
                "422": error("The value does not fit the question (`error.receipt.hint` says what does)."),
                "429": limited(),
            }),
        )
    };
    let body = s.read::<Reply>();
    let mut reply = with_examples(
        answered(&mut s, "replyQuestion", "Answer a question", body),
        &[("option", json!({"value": 1})), ("confirm", json!({"value": true, "name": "Alice"}))],
    );
    reply["parameters"] = json!([id, surface_header()]);
    let body = s.read::<Reject>();
    let mut reject = with_examples(
        answered(&mut s, "rejectQuestion", "Decline a question (reject an approval)", body),
        &[("feedback", json!({"feedback": "not on a Friday"}))],
    );
    reject["parameters"] = json!([id, surface_header()]);

    let list = {
        let mut op = operation(
            "listQuestions",
            "List questions",
            "questions",
            json!({}),
            json!({
                "200": json_body("A page of questions.", s.written::<QuestionPage>()),
                "400": error("A parameter is malformed, or the cursor is not one askgate gave."),
            }),
        );
        op["parameters"] = Value::Array(s.query::<ListQuery>());
        op
    };
    let body = new_question(&mut s);
    let create = with_body(
        "askQuestion",
        "Ask a question",
        "questions",
        body,
        json!({
            "201": json_body("Asked: stored and being shown in the conversation.", s.written::<Asked>()),
            "422": error("The ask is not valid, the conversation is not served, or nobody may answer it \
                          (`invalid_ask`, `unknown_conversation`, `answerers_required`, `invalid_answerers`)."),
            "429": limited(),
            "503": error("askgate is shutting down."),
        }),
    );
    let mut create = with_examples(
        create,
        &[
            (
                "question",
                json!({"conversation": "console:local", "prompt": "Which database?",
                                "options": ["postgres", "sqlite"], "timeout": 600}),
            ),
            (
                "confirm",
                json!({"conversation": "console:local", "kind": "confirm", "prompt": "Deploy to production?",
                               "default": false}),
            ),
            (
                "approval",
                json!({"conversation": "console:local", "kind": "approval", "action": "rm -rf build/",
                                "detail": "cleans the build tree", "timeout": "never"}),
            ),
        ],
    );
    link(&mut create, "201", "/id", &["getQuestion", "getOutcome", "replyQuestion", "rejectQuestion"]);
    let mut get_one = operation(
        "getQuestion",
        "Get a question",
        "questions",
        json!({}),
        json!({
            "200": json_body("The question and its cards.", s.written::<QuestionView>()),
            "404": error("No question has this id, or the prefix names several."),
        }),
    );
    get_one["parameters"] = json!([id]);
    let mut outcome = operation(
        "getOutcome",
        "Get a question's outcome (long-poll)",
        "questions",
        json!({}),
        json!({
            "200": json_body("It has ended.", s.written::<OutcomeView>()),
            "202": json_body("It is still pending (after `wait` seconds).", s.written::<OutcomeView>()),
            "400": error("`wait` is not a number of seconds."),
            "404": error("No question has this id, or the prefix names several."),
        }),
    );
    let mut params = vec![id.clone()];
    params.extend(s.query::<WaitQuery>());
    outcome["parameters"] = Value::Array(params);

    let event = json!({
        "description": "One event. `data` is JSON: the question (`question.*`), the run (`run.*`), or `{}`.",
        "type": "object",
        "properties": {
            "event": {"type": "string", "enum": ["question.asked", "question.counted", "question.replied", "question.rejected", "question.expired",
                               "question.cancelled", "run.started", "run.resumed", "run.waiting", "run.finished",
                               "run.failed", "run.cancelled", "replay.done"]},
            "data": {"type": "string", "contentMediaType": "application/json",
                     "contentSchema": {"anyOf": [s.written::<Question>(), s.written::<Run>(),
                                                 {"type": "object", "maxProperties": 0}]}},
            "id": {"type": "string", "description": "For `Last-Event-ID`."},
        },
        "required": ["event", "data"],
    });
    let event = s.name("Event", event);
    let mut events = operation(
        "streamEvents",
        "Stream events",
        "events",
        json!({"description": "Server-sent events: every pending question as `question.asked`, then \
                               `replay.done`, then `question.*` and `run.*` as they happen. Each event's data is JSON; each live event has an id for `Last-Event-ID`."}),
        json!({
            "200": {"description": "The stream.", "content": {"text/event-stream": {"schema": event}}},
            "400": error("A parameter is malformed."),
            "503": error("Too many event streams are open (`gateway.max_event_streams`)."),
        }),
    );
    let mut params = s.query::<EventsQuery>();
    params.push(json!({"name": "Last-Event-ID", "in": "header", "required": false,
        "description": "The id of the last event received: a reconnecting client gets what it missed.",
        "schema": {"type": "string"}}));
    events["parameters"] = Value::Array(params);

    let mut grants = operation(
        "listGrants",
        "List allow-always grants",
        "grants",
        json!({}),
        json!({
            "200": json_body("The live grants.", s.written::<GrantList>()),
            "400": error("A parameter is malformed."),
        }),
    );
    grants["parameters"] = Value::Array(s.query::<GrantsQuery>());
    let mut revoke = operation(
        "revokeGrant",
        "Revoke a grant",
        "grants",
        json!({}),
        json!({
            "204": {"description": "Revoked: the next such approval asks again."},
            "404": error("No live grant has this id."),
        }),
    );
    revoke["parameters"] = json!([path_id("The grant's id.")]);

    let run_body = s.read::<NewRun>();
    let start_run = with_body(
        "startRun",
        "Start a run of a function",
        "runs",
        run_body,
        json!({
            "200": json_body("With `wait`: the run has ended.", s.written::<RunView>()),
            "202": json_body("Stored and started.", s.written::<RunStarted>()),
            "403": error("The function may not be started here (`allowed_users`)."),
            "404": error("No function has this name."),
            "422": error("The conversation is not served, or nobody may answer its questions."),
            "429": limited(),
            "503": error("askgate is shutting down, or the run could not be stored; nothing was started."),
        }),
    );
    let mut start_run = with_examples(
        start_run,
        &[("in a conversation", json!({"function": "demo", "conversation": "console:local"}))],
    );
    link(&mut start_run, "202", "/id", &["getRun"]);
    link(&mut start_run, "200", "/run/id", &["getRun"]);
    let mut get_run = operation(
        "getRun",
        "Get a run",
        "runs",
        json!({}),
        json!({
            "200": json_body("The run.", s.written::<RunView>()),
            "404": error("No run has this id (a run is stored when it first asks or ends)."),
        }),
    );
    get_run["parameters"] = json!([path_id("The run's id.")]);

    let mut webhook = json!({
        "operationId": "webhookMessage",
        "summary": "A message from a text channel's bridge (signed)",
        "tags": ["channels"],
        "parameters": [
            path_param("name", "The webhook channel's name (`[channels.webhook.<name>]`)."),
            {"name": TIMESTAMP_HEADER, "in": "header", "required": true, "schema": {"type": "string"},
             "description": format!("Unix seconds; within {MAX_SKEW_SECS} s of askgate's clock.")},
            {"name": SIGNATURE_HEADER, "in": "header", "required": true, "schema": {"type": "string"},
             "description": "`v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>` under the channel's secret."},
        ],
        "requestBody": {"required": true, "content": {"application/json": {"schema": s.read::<InboundMessage>()}}},
    });
    let mut responses = json!({
        "200": json_body("Taken; `reply` is also sent to the bridge.", s.written::<WebhookReply>()),
        "400": error("The body is not a message."),
        "401": error("The signature is missing, wrong, stale or replayed."),
        "404": error("No webhook channel has this name."),
        "500": error("The store failed; nothing was done."),
    });
    merge(&mut responses, body_errors());
    merge(&mut responses, misdirected());
    webhook["responses"] = responses;
    // Signed with the channel's shared secret, not a token.
    webhook["security"] = json!([]);

    let text = |description: &str, media: &str| json!({"description": description, "content": {media: {"schema": {"type": "string"}}}});
    let public = |id: &str, summary: &str, tag: &str, responses: Value| {
        let mut responses = responses;
        merge(&mut responses, misdirected());
        json!({"operationId": id, "summary": summary, "tags": [tag], "security": [], "responses": responses})
    };
    let health = s.written::<Health>();
    let paths = json!({
        "/api/questions": {"get": list, "post": create},
        "/api/questions/{id}": {"get": get_one},
        "/api/questions/{id}/outcome": {"get": outcome},
        "/api/questions/{id}/reply": {"post": reply},
        "/api/questions/{id}/reject": {"post": reject},
        "/api/events": {"get": events},
        "/api/grants": {"get": grants},
        "/api/grants/{id}": {"delete": revoke},
        "/api/runs": {"post": start_run},
        "/api/runs/{id}": {"get": get_run},
        "/api/openapi.json": {"get": public("getOpenApi", "This document", "operations",
            json!({"200": json_body("OpenAPI 3.1.", json!({"type": "object"}))}))},
        "/healthz": {"get": public("healthz", "Readiness", "operations", json!({
            "200": json_body("The store answers, no channel is down and no MCP upstream is starting.", health.clone()),
            "503": json_body("The store fails, a channel is down, or an MCP upstream makes its first start.", health),
        }))},
        "/livez": {"get": public("livez", "Liveness", "operations",
            json!({"200": json_body("The process runs.", s.written::<Live>())}))},
        "/metrics": {"get": public("metrics", "Prometheus metrics", "operations", json!({
            "200": text("OpenMetrics 1.0 text (Prometheus reads it).", "application/openmetrics-text"),
            "500": error("The store failed."),
        }))},
        "/": {"get": public("page", "The web page of question cards", "page", json!({"200": text("The page.", "text/html")}))},
        "/page.js": {"get": public("pageScript", "The page's script", "page", json!({"200": text("The script.", "text/javascript")}))},
        "/page.css": {"get": public("pageStyles", "The page's styles", "page", json!({"200": text("The styles.", "text/css")}))},
        "/docs": {"get": public("apiReference", "This document as a page to read", "operations",
            json!({"200": text("The API reference.", "text/html")}))},
        "/channels/webhook/{name}": {"post": webhook},
        "/mcp": mcp::paths(&mut s),
    });
    let mut paths = paths;
    merge(&mut paths, people::paths(&mut s));
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "askgate",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Ask a person from a running function, on the chat channels where people are. \
                            Every /api route needs `Authorization: Bearer <token>`; errors are \
                            `{\"error\":{\"code\",\"message\"}}`.",
            "license": {"name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0"},
        },
        // Relative: the askgate that serves this document.
        "servers": [{"url": "/", "description": "the askgate serving this document"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": s.components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "The operator token (`ASKGATE_API_TOKEN`, or `askgate.token` beside the database): \
                                administers, and answers where the operator is an answerer. Or an agent token \
                                (`ASKGATE_AGENT_TOKEN` or `askgate-agent.token`, or an `[[agents]]` entry's): asks \
                                questions and runs and reads its own; never answers. Or a person's own token \
                                (`askgate token add`, or the session a `/web` link signed in): answers as that \
                                person, asks or administers when it may."}},
        },
    });
    platform_surfaces(&mut document);
    enums_as_enum(&mut document);
    document
}

/// The chat platforms' surfaces, first among those an answer came from: the question module
/// knows only the core ones.
fn platform_surfaces(document: &mut Value) {
    let Some(Value::Array(alternatives)) = document.pointer_mut("/components/schemas/Surface/oneOf") else {
        return;
    };
    let platforms = crate::channel::PLATFORMS
        .iter()
        .map(|p| json!({"type": "string", "const": p.name(), "description": p.answered_on()}));
    alternatives.splice(0..0, platforms);
}

/// The page marks its answers as given on the web, the TUI as given in the TUI; without it they
/// are given through the API.
fn surface_header() -> Value {
    json!({"name": super::SURFACE_HEADER, "in": "header", "required": false,
           "description": "`web` when a person answers on askgate's page, `tui` in `askgate tui`.",
           "schema": {"type": "string", "enum": ["web", "tui", "api"]}})
}

/// Serves the document (no token: it describes, it does not reveal).
pub(super) async fn serve() -> axum::Json<&'static Value> {
    axum::Json(document())
}

/// Serves the document as a page to read (`/docs`).
pub(super) async fn reference() -> axum::response::Html<&'static str> {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    axum::response::Html(PAGE.get_or_init(|| reference::html(document())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy in the repository is the document askgate serves with every platform built
    /// in; a stale one is rewritten (commit it) and fails the test.
    #[test]
    #[cfg(feature = "full")]
    fn the_repository_copy_is_current() {
        current_in("docs/openapi.json", &format!("{}\n", serde_json::to_string_pretty(document()).unwrap()));
    }

    /// The file at `path` (in the repository) holds `current`; a stale one is rewritten
    /// (commit it) and fails the test.
    #[cfg(feature = "full")]
    fn current_in(path: &str, current: &str) {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        if std::fs::read_to_string(&file).unwrap_or_default() != current {
            std::fs::write(&file, current).unwrap();
            panic!("{path} was stale; it is rewritten now: commit it");
        }
    }

    /// The book's API chapter is the document rendered with every platform built in; a stale
    /// one is rewritten (commit it).
    #[test]
    #[cfg(feature = "full")]
    fn the_books_api_reference_is_current() {
        current_in("docs/src/api.md", &reference::markdown(document()));
    }

    /// The prefix rule is one number: the engine's, in the document's words.
    #[test]
    fn the_id_prefix_rule_is_the_engines() {
        let min = crate::question::QuestionId::MIN_PREFIX;
        assert!(QUESTION_ID.contains(&format!("at least {min} characters")), "{QUESTION_ID}");
    }

    /// Every `$ref` points at a schema the document holds.
    #[test]
    fn every_reference_resolves() {
        fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r);
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let document = document();
        let mut found = Vec::new();
        refs(document, &mut found);
        assert!(found.len() > 10, "{found:?}");
        for r in found {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{r}"));
            assert!(document["components"]["schemas"].get(name).is_some(), "{r} is not in components");
        }
    }
}
