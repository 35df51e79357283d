//! The API reference people read: the OpenAPI document rendered as Markdown (the book's
//! `docs/src/api.md`, kept current by a test) and as the HTML page `/docs` serves.

use std::fmt::Write;

use serde_json::Value;

/// The document as Markdown: each operation with its parameters, body and responses; then each
/// schema's properties.
pub fn markdown(doc: &Value) -> String {
    let mut out = String::from("# HTTP API reference\n\n");
    let _ = writeln!(out, "{}\n", text(&doc["info"]["description"]));
    out.push_str(
        "Generated from the OpenAPI document askgate serves at `/api/openapi.json` (a copy is \
         `docs/openapi.json`); a running askgate shows this page at `/docs`.\n",
    );
    let mut by_tag: Vec<(String, Vec<Operation<'_>>)> = Vec::new();
    for (path, ops) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in ops.as_object().into_iter().flatten() {
            let tag = op["tags"][0].as_str().unwrap_or("other").to_owned();
            let entry = match by_tag.iter_mut().find(|(t, _)| *t == tag) {
                Some(entry) => entry,
                None => {
                    by_tag.push((tag, Vec::new()));
                    by_tag.last_mut().expect("just pushed")
                }
            };
            entry.1.push((method.to_uppercase(), path.clone(), op));
        }
    }
    for (tag, ops) in by_tag {
        let _ = writeln!(out, "\n## {}\n", capitalised(&tag));
        for (method, path, op) in ops {
            operation(&mut out, doc, &method, &path, op);
        }
    }
    out.push_str("\n## Schemas\n");
    for (name, schema) in doc["components"]["schemas"].as_object().into_iter().flatten() {
        let _ = writeln!(out, "\n### {name}\n");
        if let Some(d) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_line(d));
        }
        if schema.get("enum").is_some() {
            let _ = writeln!(out, "One of {}.\n", type_of(schema));
        }
        properties(&mut out, schema);
    }
    out
}

/// An operation under its tag: its method, its path and what the document says of it.
type Operation<'a> = (String, String, &'a Value);

/// The Markdown as a page: what `/docs` serves.
pub fn html(doc: &Value) -> String {
    let body = markdown(doc);
    let mut rendered = String::new();
    let options = pulldown_cmark::Options::ENABLE_TABLES;
    pulldown_cmark::html::push_html(&mut rendered, pulldown_cmark::Parser::new_ext(&body, options));
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>askgate HTTP API</title><style>{STYLE}</style></head>\n<body><main>{rendered}</main></body></html>\n"
    )
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}\
main{max-width:60rem;margin:0 auto;padding:1rem 1.5rem}\
code{background:#f2f2f4;padding:0 .2em;border-radius:3px}\
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}\
h3{margin-top:2rem;border-top:1px solid #eee;padding-top:1rem}";

fn operation(out: &mut String, doc: &Value, method: &str, path: &str, op: &Value) {
    let _ = writeln!(out, "### `{method} {path}`\n");
    let _ = writeln!(out, "{}.", text(&op["summary"]).trim_end_matches('.'));
    if let Some(d) = op["description"].as_str() {
        let _ = writeln!(out, " {}", one_line(d));
    }
    let public = op["security"].as_array().is_some_and(Vec::is_empty);
    let _ = writeln!(out, "\n{}\n", if public { "No token." } else { "Needs a token (`Authorization: Bearer …`)." });
    let params: Vec<&Value> = op["parameters"].as_array().into_iter().flatten().collect();
    if !params.is_empty() {
        out.push_str("| parameter | in | type | |\n|---|---|---|---|\n");
        for p in params {
            let required = if p["required"].as_bool() == Some(true) { " (required)" } else { "" };
            let _ = writeln!(
                out,
                "| `{}`{required} | {} | {} | {} |",
                text(&p["name"]),
                text(&p["in"]),
                type_of(&p["schema"]),
                cell(p["description"].as_str().unwrap_or_default())
            );
        }
        out.push('\n');
    }
    if let Some(content) = op["requestBody"]["content"].as_object() {
        for (media, body) in content {
            let _ = writeln!(out, "Body (`{media}`): {}\n", type_of(&body["schema"]));
            // The fields here too, where the body is named: what to send, on one page.
            properties(out, resolved(doc, &body["schema"]));
        }
    }
    out.push_str("| status | meaning | body |\n|---|---|---|\n");
    let mut responses: Vec<(&String, &Value)> = op["responses"].as_object().into_iter().flatten().collect();
    responses.sort_by(|a, b| a.0.cmp(b.0));
    for (status, response) in responses {
        let body = response["content"]
            .as_object()
            .and_then(|c| c.iter().next())
            .map(|(media, c)| format!("{} `{media}`", type_of(&c["schema"])))
            .unwrap_or_default();
        let _ = writeln!(out, "| {status} | {} | {body} |", cell(response["description"].as_str().unwrap_or_default()));
    }
    out.push('\n');
}

/// The schema a `$ref` names, or `schema` itself.
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let named = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/"));
    named.map_or(schema, |name| &doc["components"]["schemas"][name])
}

/// A table of an object schema's own properties (nothing for other schemas).
fn properties(out: &mut String, schema: &Value) {
    let Some(props) = schema["properties"].as_object() else { return };
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    out.push_str("| field | type | |\n|---|---|---|\n");
    for (name, p) in props {
        let mark = if required.contains(&name.as_str()) { " (required)" } else { "" };
        let _ = writeln!(
            out,
            "| `{name}`{mark} | {} | {} |",
            type_of(p),
            cell(p["description"].as_str().unwrap_or_default())
        );
    }
    out.push('\n');
}

/// A schema's type in a few words: a reference by its name, a type with its bounds.
fn type_of(schema: &Value) -> String {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alternatives) = schema[key].as_array() {
            return alternatives.iter().map(type_of).collect::<Vec<_>>().join(" or ");
        }
    }
    if let Some(value) = schema.get("const") {
        return format!("`{value}`");
    }
    if let Some(values) = schema["enum"].as_array() {
        return values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
    }
    let kind = match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ if schema.get("properties").is_some() => "object".to_owned(),
        _ => "any".to_owned(),
    };
    let kind = if kind == "array" { format!("array of {}", type_of(&schema["items"])) } else { kind };
    let mut bounds = Vec::new();
    for (key, word) in [("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤")]
    {
        if let Some(n) = schema[key].as_number() {
            bounds.push(format!("{word} {n}"));
        }
    }
    if let Some(d) = schema.get("default").filter(|d| !d.is_null()) {
        bounds.push(format!("default `{d}`"));
    }
    if bounds.is_empty() { kind } else { format!("{kind} ({})", bounds.join(", ")) }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text fit for a table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
