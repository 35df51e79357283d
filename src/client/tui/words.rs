//! The TUI's own words about questions: the short id, a receipt, how a question ended.

use serde_json::Value;

/// The 8 characters cards show of a question's id.
pub fn short(q: &Value) -> String {
    q["id"].as_str().unwrap_or_default().chars().take(8).collect()
}

/// What a receipt says, briefly.
pub(super) fn receipt_note(receipt: &Value) -> Option<String> {
    match receipt["receipt"].as_str()? {
        "resolved" => Some("answered".to_owned()),
        "counted" => Some(format!(
            "counted: {} of {} approvals",
            receipt["approvals"].as_u64().unwrap_or(0),
            receipt["quorum"].as_u64().unwrap_or(0)
        )),
        other => Some(other.replace('_', " ")),
    }
}

/// How a question ended, in one line: `✅ date-fns — web:bob via api`.
pub fn outcome_line(q: &Value) -> String {
    let status = q["status"].as_str().unwrap_or("resolved");
    let mark = match status {
        "answered" => "✅",
        "declined" => "❌",
        "expired" => "⌛",
        _ => "✖",
    };
    let value = match &q["outcome"]["value"] {
        Value::Null => status.to_owned(),
        value => shown(value),
    };
    let by = q["answered_name"].as_str().or(q["answered_by"].as_str());
    let via = q["answered_via"].as_str().map(|v| format!(" via {v}")).unwrap_or_default();
    match by {
        Some(by) => format!("{mark} {value} — {by}{via}"),
        None => format!("{mark} {value}"),
    }
}

/// An answer in words: `yes`, `unit, lint`, and a form's as `name: Ada · plan: pro`.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(yes) => (if *yes { "yes" } else { "no" }).to_owned(),
        Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(", "),
        Value::Object(fields) => {
            fields.iter().map(|(k, v)| format!("{k}: {}", shown(v))).collect::<Vec<_>>().join(" · ")
        }
        other => other.to_string(),
    }
}
