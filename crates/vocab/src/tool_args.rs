//! How a tool implemented in code describes and reads its arguments: an argument struct derives
//! `Deserialize` and `JsonSchema`; its input schema is generated from the struct (doc comments
//! become descriptions) and a call's arguments are parsed into it in one step, with an error
//! the model can act on.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The input schema of an argument struct as model APIs take it: a plain JSON Schema object
/// with subschemas inlined and no `$schema` or `title`.
pub fn arguments_schema<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
        object.remove("definitions");
        object.remove("$defs");
    }
    schema
}

/// Parses a call's arguments into `T`; the error names the tool and what does not fit.
pub fn parse_arguments<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, String> {
    let arguments = match arguments {
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other,
    };
    serde_json::from_value(arguments).map_err(|error| format!("{tool}: {error}"))
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
        let parsed: Search = parse_arguments("search", json!({"query": "x"})).unwrap();
        assert_eq!(
            parsed,
            Search {
                query: "x".into(),
                limit: None
            }
        );
        let missing = parse_arguments::<Search>("search", Value::Null).unwrap_err();
        assert!(
            missing.starts_with("search: missing field `query`"),
            "{missing}"
        );
        let unknown =
            parse_arguments::<Search>("search", json!({"query": "x", "q": 1})).unwrap_err();
        assert!(unknown.contains("unknown field `q`"), "{unknown}");
    }
}
