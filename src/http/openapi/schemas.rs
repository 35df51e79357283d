//! The document's schemas: generated from the types the handlers read and write (schemars,
//! JSON Schema 2020-12 as OpenAPI 3.1 uses it), written the way client generators read them.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// Schemas of what askgate reads and of what it writes: a field with a default is optional
/// to send, and a field skipped when empty may be absent from a response.
pub(super) struct Schemas {
    pub(super) reads: SchemaGenerator,
    writes: SchemaGenerator,
    /// Schemas built by hand (a body that joins two types), by name.
    named: Map<String, Value>,
}

impl Schemas {
    pub(super) fn new() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        });
        Self {
            reads: settings.clone().for_deserialize().into_generator(),
            writes: settings.for_serialize().into_generator(),
            named: Map::new(),
        }
    }

    /// The schema of a body askgate reads: a reference to its component.
    pub(super) fn read<T: JsonSchema>(&mut self) -> Value {
        self.reads.subschema_for::<T>().to_value()
    }

    /// The schema of a body askgate writes: a reference to its component.
    pub(super) fn written<T: JsonSchema>(&mut self) -> Value {
        self.writes.subschema_for::<T>().to_value()
    }

    /// `schema`, built by hand, as the component `name`; a reference to it.
    pub(super) fn name(&mut self, name: &str, schema: Value) -> Value {
        self.named.insert(name.to_owned(), schema);
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    /// The query parameters a type holds, one per property.
    pub(super) fn query<T: JsonSchema>(&mut self) -> Vec<Value> {
        let schema = self.reads.root_schema_for::<T>().to_value();
        let required: Vec<&str> =
            schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
        properties
            .iter()
            .map(|(name, property)| {
                let mut property = property.clone();
                let description = property.as_object_mut().and_then(|p| p.remove("description"));
                json!({
                    "name": name,
                    "in": "query",
                    "required": required.contains(&name.as_str()),
                    "description": description.unwrap_or(Value::Null),
                    "schema": without_null(property),
                })
            })
            .map(drop_nulls)
            .collect()
    }

    /// Every named schema, from both sides; a name both use must mean one shape.
    pub(super) fn components(mut self) -> Map<String, Value> {
        let written = self.writes.take_definitions(true);
        let mut all = self.reads.take_definitions(true);
        for (name, schema) in &mut all {
            if !written.contains_key(name) {
                defaults_in_words(schema);
            }
        }
        for (name, schema) in written.into_iter().chain(self.named) {
            if let Some(read) = all.get(&name) {
                assert_eq!(read, &schema, "schema `{name}` differs between requests and responses");
            }
            all.insert(name, schema);
        }
        all
    }
}

/// Writes every closed set of strings in `value` as `enum`, which every generator reads as one.
/// schemars writes a unit enum whose variants have doc comments as a `oneOf` of `const`s (to
/// keep each variant's words); openapi-python-client 0.29 made of that a parser that takes only
/// the first value. The variants' words move into the schema's description.
pub(super) fn enums_as_enum(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.values_mut().for_each(enums_as_enum);
            as_enum(object);
        }
        Value::Array(items) => items.iter_mut().for_each(enums_as_enum),
        _ => {}
    }
}

/// `{"oneOf": [{"type": "string", "const": "a", "description": …}, …]}` as `{"type": "string",
/// "enum": ["a", …]}`; any other schema as it is.
fn as_enum(object: &mut Map<String, Value>) {
    let Some(Value::Array(alternatives)) = object.get("oneOf") else { return };
    let mut values = Vec::new();
    let mut words = Vec::new();
    for alternative in alternatives {
        let Some(alternative) = alternative.as_object() else { return };
        let Some(value) = alternative.get("const").and_then(Value::as_str) else { return };
        let plain = alternative.keys().all(|k| matches!(k.as_str(), "const" | "type" | "description"));
        if !plain || alternative.get("type").is_some_and(|t| t != "string") {
            return;
        }
        if let Some(said) = alternative.get("description").and_then(Value::as_str) {
            words.push(format!("`{value}`: {}", said.trim_end_matches('.')));
        }
        values.push(Value::from(value));
    }
    object.remove("oneOf");
    object.insert("type".into(), json!("string"));
    object.insert("enum".into(), Value::Array(values));
    if !words.is_empty() {
        let own = object.get("description").and_then(Value::as_str).map(|d| format!("{d} ")).unwrap_or_default();
        object.insert("description".into(), json!(format!("{own}{}.", words.join("; "))));
    }
}

/// A request body's defaults said in its fields' descriptions rather than as `default`:
/// openapi-typescript 7 makes a property with a `default` required wherever its schema is a
/// component (it cannot tell a request's from a response's), so a client would have to send
/// every field askgate would fill in itself. A `null` default (left out: absent) goes.
pub(super) fn defaults_in_words(schema: &mut Value) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return };
    for property in properties.values_mut() {
        let Some(property) = property.as_object_mut() else { continue };
        let Some(default) = property.remove("default") else { continue };
        let said = property.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
        let empty = [json!(null), json!(""), json!([]), json!({})].contains(&default);
        if !empty && !said.contains("default") {
            let said = match said.trim_end_matches('.') {
                "" => format!("Default: `{default}`."),
                words => format!("{words}. Default: `{default}`."),
            };
            property.insert("description".into(), json!(said));
        }
    }
}

/// A query value is never null: `{"type": ["string", "null"]}` becomes `{"type": "string"}`.
fn without_null(mut schema: Value) -> Value {
    if let Some(types) = schema.get_mut("type").and_then(Value::as_array_mut) {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            schema["type"] = types[0].clone();
        }
    }
    schema
}

fn drop_nulls(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.retain(|_, v| !v.is_null());
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    // A unit enum with doc comments on its variants.
    /// The weather.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Weather {
        /// Sun all day.
        Sunny,
        /// Rain.
        Rainy,
    }

    #[test]
    fn a_documented_enum_is_written_as_enum_with_its_variants_words() {
        let mut s = Schemas::new();
        s.written::<Weather>();
        let mut components = Value::Object(s.components());
        enums_as_enum(&mut components);
        assert_eq!(
            components["Weather"],
            json!({"type": "string", "enum": ["sunny", "rainy"], "description": "The weather. `sunny`: Sun all day; `rainy`: Rain."})
        );
    }

    #[test]
    fn alternatives_that_are_not_all_strings_stay_alternatives() {
        let mut schema = json!({"oneOf": [{"type": "integer", "minimum": 1}, {"const": "never"}]});
        let before = schema.clone();
        enums_as_enum(&mut schema);
        assert_eq!(schema, before);
    }
}
