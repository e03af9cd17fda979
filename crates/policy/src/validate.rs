//! Validates call arguments against the tool's input schema (JSON Schema, 2020-12 by default).

use serde_json::Value;

/// At most this many schema violations are named in one error.
const MAX_REPORTED: usize = 5;

/// Checks `arguments` against `schema`. The draft is taken from `$schema` when present and is
/// 2020-12 otherwise; remote `$ref`s are not fetched. A schema that cannot be compiled rejects the
/// call (fail closed). A `null` schema (none given) accepts any object.
///
/// The error names each failing location as a JSON pointer into the arguments (`/path`, or
/// `(root)`), e.g. `at /path: 42 is not of type "string"`.
pub fn validate_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    if schema.is_null() {
        return check_without_schema(arguments);
    }
    let validator = compile_schema(schema)?;
    check_arguments(&validator, arguments)
}

/// What a missing (`null`) schema admits: any object.
pub(crate) fn check_without_schema(arguments: &Value) -> Result<(), String> {
    if arguments.is_object() {
        Ok(())
    } else {
        Err(format!(
            "arguments must be a JSON object, got {}",
            json_kind(arguments)
        ))
    }
}

/// Compiles a tool's input schema, or says why it cannot be used (the call is refused).
pub(crate) fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|error| {
        format!("the tool's input schema cannot be used, so no call can be checked: {error}")
    })
}

/// Checks `arguments` against a compiled schema; the error names each failing location.
pub(crate) fn check_arguments(
    validator: &jsonschema::Validator,
    arguments: &Value,
) -> Result<(), String> {
    if validator.is_valid(arguments) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .take(MAX_REPORTED + 1)
        .map(|error| {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                "(root)".to_owned()
            } else {
                path
            };
            format!("at {at}: {error}")
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let shown = problems
        .iter()
        .take(MAX_REPORTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    let more = if problems.len() > MAX_REPORTED {
        "; …"
    } else {
        ""
    };
    Err(format!("invalid arguments: {shown}{more}"))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "options": {"type": "object", "properties": {"depth": {"type": "integer", "minimum": 0}}}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(
            validate_arguments(&schema(), &json!({"path": "/tmp", "options": {"depth": 2}})),
            Ok(())
        );
    }

    #[test]
    fn errors_name_the_path() {
        let error = validate_arguments(
            &schema(),
            &json!({"path": "/tmp", "options": {"depth": -1}}),
        )
        .unwrap_err();
        assert!(error.contains("at /options/depth:"), "{error}");
        let error = validate_arguments(&schema(), &json!({"path": 7})).unwrap_err();
        assert!(
            error.contains("at /path:") && error.contains("string"),
            "{error}"
        );
        let error = validate_arguments(&schema(), &json!({})).unwrap_err();
        assert!(
            error.contains("at (root):") && error.contains("path"),
            "{error}"
        );
    }

    #[test]
    fn uses_2020_12_by_default() {
        // `prefixItems` exists only from 2020-12 on.
        let schema = json!({"type": "object", "properties": {"pair": {"prefixItems": [{"type": "string"}]}}});
        assert!(validate_arguments(&schema, &json!({"pair": [1]})).is_err());
        assert!(validate_arguments(&schema, &json!({"pair": ["a"]})).is_ok());
    }

    #[test]
    fn an_unusable_schema_rejects() {
        let error = validate_arguments(&json!({"type": 12}), &json!({})).unwrap_err();
        assert!(error.contains("input schema cannot be used"), "{error}");
    }

    #[test]
    fn no_schema_still_wants_an_object() {
        assert!(validate_arguments(&Value::Null, &json!({"x": 1})).is_ok());
        assert!(validate_arguments(&Value::Null, &json!([1])).is_err());
    }
}
