//! opencode's prompts as asks: a permission (`permission.asked`, or `permission.updated` of
//! servers from before the permission rework) as an approval, a question prompt's questions
//! as one ask.

use serde_json::{Value, json};

use crate::question::Ask;

/// A permission prompt as an approval: what opencode would do, what "always" would allow, where.
pub(super) fn permission(properties: &Value, directory: Option<&str>) -> Ask {
    let kind = properties.get("permission").and_then(Value::as_str).unwrap_or("permission");
    let strings = |key: &str| -> Vec<String> {
        properties
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let metadata = properties.get("metadata").cloned().unwrap_or(Value::Null);
    let what = metadata
        .get("command")
        .or_else(|| metadata.get("filepath"))
        .and_then(Value::as_str)
        .map_or_else(|| strings("patterns").join(" "), str::to_owned);
    let mut detail = Vec::new();
    if let Some(diff) = metadata.get("diff").and_then(Value::as_str) {
        detail.push(format!("```\n{}\n```", crate::text::clip(diff, 3000, "…")));
    }
    let always = strings("always");
    if !always.is_empty() {
        detail.push(format!("Allow always lets {} through in opencode.", always.join(", ")));
    }
    let session: String =
        properties.get("sessionID").and_then(Value::as_str).unwrap_or_default().chars().take(12).collect();
    detail.push(match directory {
        Some(directory) => format!("in {directory} · session {session}"),
        None => format!("session {session}"),
    });
    Ask::approval(format!("{kind}: {what}")).detail(detail.join("\n"))
}

/// A `permission.updated` prompt ({id, type, pattern, title, metadata}) in the shape of
/// `permission.asked`: its `type` is the permission, its `pattern` (one or a list) the patterns.
pub(super) fn reworked(properties: &Value) -> Value {
    let mut reworked = properties.clone();
    if let Some(object) = reworked.as_object_mut() {
        let permission = properties.get("type").cloned().unwrap_or(Value::Null);
        let patterns = match properties.get("pattern") {
            Some(Value::String(p)) => json!([p]),
            Some(list @ Value::Array(_)) => list.clone(),
            _ => json!([]),
        };
        object.insert("permission".into(), permission);
        object.insert("patterns".into(), patterns);
    }
    reworked
}

/// A question prompt's questions as one ask: one alone is an ordinary question, several are
/// answered together; none when they cannot be asked.
pub(super) fn questions(properties: &Value) -> Option<Ask> {
    let questions = properties.get("questions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    match questions {
        [one] => {
            let multi = one.get("multiple").and_then(Value::as_bool).unwrap_or(false);
            crate::agent::hook::choices(one, multi, one.get("custom").and_then(Value::as_bool).unwrap_or(true), None)
        }
        many => match crate::agent::hook::together(many, "multiple", true) {
            Ok(ask) => Some(ask),
            Err(e) => {
                tracing::warn!(error = %e, "opencode's questions cannot be asked");
                None
            }
        },
    }
}
