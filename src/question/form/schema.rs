//! MCP elicitation's flat JSON Schema, read into a [`Form`] and written back from one.

use serde_json::{Map, Value, json};

use super::{Field, FieldOption, Form, Input, InvalidForm, TextFormat};

/// Keywords that only annotate; any other keyword askgate does not know is refused, so that a
/// rule the asker relies on is never silently dropped.
const ANNOTATIONS: &[&str] = &["$schema", "$id", "$comment", "examples", "deprecated", "readOnly", "writeOnly"];

pub(super) fn parse(schema: &Value) -> Result<Form, InvalidForm> {
    let Value::Object(schema) = schema else {
        return Err(InvalidForm::whole("the schema is not a JSON object"));
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(InvalidForm::whole("a form's schema is {\"type\": \"object\", \"properties\": {…}}"));
    }
    for key in schema.keys() {
        let known = ["type", "properties", "required", "title", "description", "additionalProperties"];
        if !known.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            return Err(InvalidForm::whole(format!("`{key}` is not part of a form's schema")));
        }
    }
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Err(InvalidForm::whole("a form's schema needs `properties`, one per field"));
    };
    let required: Vec<&str> = match schema.get("required") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(|v| v.as_str().unwrap_or_default()).collect(),
        Some(_) => return Err(InvalidForm::whole("`required` is a list of field names")),
    };
    if let Some(missing) = required.iter().find(|r| !properties.contains_key(**r)) {
        return Err(InvalidForm::of(missing, "is required but not among the properties"));
    }
    let mut fields = Vec::with_capacity(properties.len());
    for (key, property) in properties {
        let Value::Object(property) = property else {
            return Err(InvalidForm::of(key, "is not a JSON object"));
        };
        let mut field = field(key, property)?;
        field.required = required.contains(&key.as_str());
        fields.push(field);
    }
    Ok(Form { fields })
}

fn field(key: &str, p: &Map<String, Value>) -> Result<Field, InvalidForm> {
    let text = |name: &str| -> Result<Option<String>, InvalidForm> {
        match p.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(_) => Err(InvalidForm::of(key, format!("`{name}` is not text"))),
        }
    };
    let count = |name: &str| -> Result<Option<u32>, InvalidForm> {
        match p.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| InvalidForm::of(key, format!("`{name}` is not a whole number"))),
        }
    };
    let bound = |name: &str| -> Result<Option<f64>, InvalidForm> {
        match p.get(name) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| InvalidForm::of(key, format!("`{name}` is not a number"))),
        }
    };
    let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let allowed: &[&str] = match kind {
        "string" if p.contains_key("enum") || p.contains_key("oneOf") => &["enum", "enumNames", "oneOf"],
        "string" => &["minLength", "maxLength", "format"],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["items", "minItems", "maxItems", "uniqueItems"],
        other => {
            return Err(InvalidForm::of(
                key,
                format!(
                    "type `{other}`: a field is a string, number, integer, boolean, or an array of an enum \
                     (a form is flat)"
                ),
            ));
        }
    };
    for name in p.keys() {
        let common = ["type", "title", "description", "default"];
        if !common.contains(&name.as_str())
            && !allowed.contains(&name.as_str())
            && !ANNOTATIONS.contains(&name.as_str())
        {
            return Err(InvalidForm::of(key, format!("`{name}` does not apply to a {kind} field")));
        }
    }
    let default = p.get("default").filter(|d| !d.is_null());
    let wrong_default = || InvalidForm::of(key, "its `default` does not fit its type");
    let input = match kind {
        "string" if p.contains_key("enum") || p.contains_key("oneOf") => Input::Choice {
            options: options(key, p)?,
            multi: false,
            min_items: None,
            max_items: None,
            other: false,
            default: default
                .map(|d| d.as_str().map(|s| Value::String(s.to_owned())).ok_or_else(wrong_default))
                .transpose()?,
        },
        "string" => Input::Text {
            min_length: count("minLength")?,
            max_length: count("maxLength")?,
            format: text("format")?
                .map(|f| {
                    f.parse::<TextFormat>()
                        .map_err(|_| InvalidForm::of(key, format!("format `{f}`: use email, uri, date or date-time")))
                })
                .transpose()?,
            default: default.map(|d| d.as_str().map(str::to_owned).ok_or_else(wrong_default)).transpose()?,
        },
        "number" | "integer" => Input::Number {
            integer: kind == "integer",
            minimum: bound("minimum")?,
            maximum: bound("maximum")?,
            default: default.map(|d| d.as_f64().ok_or_else(wrong_default)).transpose()?,
        },
        "boolean" => Input::Boolean { default: default.map(|d| d.as_bool().ok_or_else(wrong_default)).transpose()? },
        _ => {
            let Some(Value::Object(items)) = p.get("items") else {
                return Err(InvalidForm::of(
                    key,
                    "an array field is a list of an enum: `items` with `enum` or `anyOf`",
                ));
            };
            if items.get("type").is_some_and(|t| t != "string") {
                return Err(InvalidForm::of(key, "an array field is a list of text options"));
            }
            let listed = |d: &Value| -> Result<Value, InvalidForm> {
                match d {
                    Value::Array(a) if a.iter().all(Value::is_string) => Ok(d.clone()),
                    _ => Err(wrong_default()),
                }
            };
            Input::Choice {
                options: options(key, items)?,
                multi: true,
                min_items: count("minItems")?,
                max_items: count("maxItems")?,
                other: false,
                default: default.map(listed).transpose()?,
            }
        }
    };
    Ok(Field { key: key.to_owned(), title: text("title")?, description: text("description")?, required: false, input })
}

/// An enum's options: `enum` (titled by `enumNames`, the older form), `oneOf` or `anyOf` of
/// `{const, title}`.
fn options(key: &str, p: &Map<String, Value>) -> Result<Vec<FieldOption>, InvalidForm> {
    let bad = |why: &str| InvalidForm::of(key, why.to_owned());
    if let Some(values) = p.get("enum") {
        let values = values.as_array().ok_or_else(|| bad("`enum` is not a list"))?;
        let names = match p.get("enumNames") {
            None => Vec::new(),
            Some(Value::Array(n)) if n.len() == values.len() => {
                n.iter().map(|v| v.as_str().map(str::to_owned)).collect()
            }
            Some(_) => return Err(bad("`enumNames` has one name per value")),
        };
        return values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = v.as_str().ok_or_else(|| bad("an enum value is not text"))?;
                Ok(FieldOption { value: value.to_owned(), title: names.get(i).cloned().flatten(), description: None })
            })
            .collect();
    }
    let Some(Value::Array(choices)) = p.get("oneOf").or_else(|| p.get("anyOf")) else {
        return Err(bad("the options are `enum`, `oneOf` or `anyOf` of {\"const\", \"title\"}"));
    };
    choices
        .iter()
        .map(|c| {
            let value = c.get("const").and_then(Value::as_str).ok_or_else(|| bad("an option has no text `const`"))?;
            let title = c.get("title").and_then(Value::as_str).map(str::to_owned);
            let description = c.get("description").and_then(Value::as_str).map(str::to_owned);
            Ok(FieldOption { value: value.to_owned(), title, description })
        })
        .collect()
}

pub(super) fn write(form: &Form) -> Value {
    let mut properties = Map::new();
    for field in &form.fields {
        let mut p = Map::new();
        match &field.input {
            Input::Text { min_length, max_length, format, default } => {
                p.insert("type".into(), json!("string"));
                put(&mut p, "minLength", min_length.map(Value::from));
                put(&mut p, "maxLength", max_length.map(Value::from));
                put(&mut p, "format", format.map(|f| Value::from(f.as_str())));
                put(&mut p, "default", default.clone().map(Value::String));
            }
            Input::Number { integer, minimum, maximum, .. } => {
                p.insert("type".into(), json!(if *integer { "integer" } else { "number" }));
                put(&mut p, "minimum", minimum.map(|n| super::answer::number(n, *integer)));
                put(&mut p, "maximum", maximum.map(|n| super::answer::number(n, *integer)));
                put(&mut p, "default", field.default_value());
            }
            Input::Boolean { default } => {
                p.insert("type".into(), json!("boolean"));
                put(&mut p, "default", default.map(Value::Bool));
            }
            Input::Choice { options, multi, min_items, max_items, default, .. } => {
                // Titled options as MCP's titled enums, untitled ones as a plain `enum`.
                let titled = options.iter().any(|o| o.title.is_some());
                let values: Vec<&str> = options.iter().map(|o| o.value.as_str()).collect();
                let choices: Vec<Value> = options
                    .iter()
                    .map(|o| match &o.description {
                        Some(d) => json!({"const": o.value, "title": o.label(), "description": d}),
                        None => json!({"const": o.value, "title": o.label()}),
                    })
                    .collect();
                if *multi {
                    p.insert("type".into(), json!("array"));
                    let items =
                        if titled { json!({"anyOf": choices}) } else { json!({"type": "string", "enum": values}) };
                    p.insert("items".into(), items);
                    put(&mut p, "minItems", min_items.map(Value::from));
                    put(&mut p, "maxItems", max_items.map(Value::from));
                } else if titled {
                    p.insert("type".into(), json!("string"));
                    p.insert("oneOf".into(), Value::Array(choices));
                } else {
                    p.insert("type".into(), json!("string"));
                    p.insert("enum".into(), json!(values));
                }
                put(&mut p, "default", default.clone());
            }
        }
        put(&mut p, "title", field.title.clone().map(Value::String));
        put(&mut p, "description", field.description.clone().map(Value::String));
        properties.insert(field.key.clone(), Value::Object(p));
    }
    let required: Vec<&str> = form.fields.iter().filter(|f| f.required).map(|f| f.key.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required})
}

fn put(p: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        p.insert(key.to_owned(), value);
    }
}
