//! How a tool implemented in code describes and reads its arguments: an argument struct derives
//! `Deserialize` and `JsonSchema`; its input schema is generated from the struct (doc comments
//! become descriptions) and a call's arguments are parsed into it in one step, with an error
//! the model can act on.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The plain object schema providers accept for the argument struct `T`: `type`, `properties`,
/// `required` and `additionalProperties` in that order, each property with its `type`, range and
/// the field's doc comment as `description`. Definitions are inlined; `$schema`, `title`, the
/// struct's own description and schemars' integer `format` are dropped, and an optional field
/// is simply not required (its `null` alternative is dropped too: a missing key is absent).
pub fn arguments_schema<T: JsonSchema>() -> Value {
    let generated = SchemaSettings::draft07()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let mut plain = Map::new();
    for key in ["type", "properties", "required", "additionalProperties"] {
        let Some(value) = generated.get(key) else {
            continue;
        };
        let value = match (key, value) {
            ("properties", Value::Object(properties)) => Value::Object(
                properties
                    .iter()
                    .map(|(name, property)| (name.clone(), plain_property(property)))
                    .collect(),
            ),
            _ => value.clone(),
        };
        plain.insert(key.to_owned(), value);
    }
    Value::Object(plain)
}

/// One property's schema: `type` (without the `null` alternative of an optional field),
/// `minimum`, `maximum`, any other constraint, then `description`; schemars' `format` is dropped.
fn plain_property(property: &Value) -> Value {
    let Value::Object(generated) = property else {
        return property.clone();
    };
    let mut plain = Map::new();
    for key in ["type", "minimum", "maximum"] {
        if let Some(value) = generated.get(key) {
            let value = if key == "type" {
                without_null(value)
            } else {
                value.clone()
            };
            plain.insert(key.to_owned(), value);
        }
    }
    for (key, value) in generated {
        if !matches!(
            key.as_str(),
            "type" | "minimum" | "maximum" | "format" | "description"
        ) {
            plain.insert(key.clone(), value.clone());
        }
    }
    if let Some(description) = generated.get("description") {
        plain.insert("description".to_owned(), description.clone());
    }
    Value::Object(plain)
}

/// `["integer", "null"]` → `"integer"`; any other type unchanged.
fn without_null(kind: &Value) -> Value {
    match kind {
        Value::Array(kinds) => {
            let kept: Vec<&Value> = kinds
                .iter()
                .filter(|k| k.as_str() != Some("null"))
                .collect();
            match kept.as_slice() {
                [single] => (*single).clone(),
                _ => Value::Array(kept.into_iter().cloned().collect()),
            }
        }
        other => other.clone(),
    }
}

/// Parses a call's arguments into `T`, read in place (no copy of the whole value first); no
/// arguments at all (`null`) read as an empty object. The error names the tool and what does not
/// fit.
pub fn parse_arguments<T: DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, String> {
    let parsed = match arguments {
        Value::Null => T::deserialize(&Value::Object(Map::new())),
        arguments => T::deserialize(arguments),
    };
    parsed.map_err(|error| format!("{tool}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Arguments of a test tool.
    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Search {
        /// What to look for.
        query: String,
        /// How many results.
        #[schemars(range(min = 1, max = 20))]
        limit: Option<u64>,
    }

    #[test]
    fn the_schema_is_a_plain_object_schema_with_descriptions_and_bounds() {
        let schema = arguments_schema::<Search>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(
            schema["properties"]["query"]["description"],
            "What to look for."
        );
        assert_eq!(schema["properties"]["limit"]["maximum"], 20);
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
    }

    #[test]
    fn arguments_parse_in_one_step_or_say_what_does_not_fit() {
        let parsed: Search = parse_arguments("search", &json!({"query": "x"})).unwrap();
        assert_eq!(
            parsed,
            Search {
                query: "x".into(),
                limit: None
            }
        );
        let missing = parse_arguments::<Search>("search", &Value::Null).unwrap_err();
        assert!(
            missing.starts_with("search: missing field `query`"),
            "{missing}"
        );
        let unknown =
            parse_arguments::<Search>("search", &json!({"query": "x", "q": 1})).unwrap_err();
        assert!(unknown.contains("unknown field `q`"), "{unknown}");
    }
}
