//! TypeScript-like signatures from JSON Schemas: the input schema becomes the argument object
//! type, an output schema the return type (`unknown` without one).

use serde_json::Value;

/// Deepest nesting of object types spelled out; deeper objects become `object`.
pub(crate) const MAX_TYPE_DEPTH: usize = 3;
/// Longest property description kept in a signature comment.
const PROPERTY_COMMENT_CHARS: usize = 100;

/// The TypeScript-like type of a JSON Schema, with nested objects spelled out up to
/// [`MAX_TYPE_DEPTH`] levels below `depth`.
pub fn type_of(schema: &Value, depth: usize) -> String {
    let Some(object) = schema.as_object() else {
        return match schema {
            Value::Bool(false) => "never".to_string(),
            _ => "unknown".to_string(),
        };
    };
    if let Some(constant) = object.get("const") {
        return literal(constant);
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array)
        && !values.is_empty()
    {
        return values.iter().map(literal).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(variants) = object.get(key).and_then(Value::as_array)
            && !variants.is_empty()
        {
            return union(variants.iter().map(|v| type_of(v, depth)));
        }
    }
    if let Some(all) = object.get("allOf").and_then(Value::as_array)
        && all.len() == 1
    {
        return type_of(&all[0], depth);
    }
    match object.get("type") {
        Some(Value::String(kind)) => type_for_kind(kind, object, depth),
        Some(Value::Array(kinds)) => union(
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|kind| type_for_kind(kind, object, depth)),
        ),
        _ if object.contains_key("properties") => type_for_kind("object", object, depth),
        _ => "unknown".to_string(),
    }
}

fn type_for_kind(kind: &str, object: &serde_json::Map<String, Value>, depth: usize) -> String {
    match kind {
        "string" => "string".to_string(),
        "number" | "integer" => "number".to_string(),
        "boolean" => "boolean".to_string(),
        "null" => "null".to_string(),
        "array" => {
            let item = object
                .get("items")
                .map(|items| type_of(items, depth + 1))
                .unwrap_or_else(|| "unknown".to_string());
            if item.contains(' ') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        "object" => object_type(object, depth, false),
        _ => "unknown".to_string(),
    }
}

fn union(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for part in parts {
        if !seen.contains(&part) {
            seen.push(part);
        }
    }
    if seen.is_empty() {
        "unknown".to_string()
    } else {
        seen.join(" | ")
    }
}

fn literal(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "unknown".to_string())
}

/// `{ a: string; b?: number }`, or `Record<string, T>` for a map, or `object` too deep down.
/// With `commented`, each property goes on its own line with its description.
fn object_type(object: &serde_json::Map<String, Value>, depth: usize, commented: bool) -> String {
    let properties = object.get("properties").and_then(Value::as_object);
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        return match object.get("additionalProperties") {
            Some(extra @ Value::Object(_)) => {
                format!("Record<string, {}>", type_of(extra, depth + 1))
            }
            Some(Value::Bool(false)) => "{}".to_string(),
            _ => "Record<string, unknown>".to_string(),
        };
    };
    if depth >= MAX_TYPE_DEPTH {
        return "object".to_string();
    }
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let members: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let member = format!(
                "{}{optional}: {}",
                property_key(name),
                type_of(property, depth + 1)
            );
            let description = property
                .get("description")
                .and_then(Value::as_str)
                .map(|d| crate::search::one_line(d, PROPERTY_COMMENT_CHARS))
                .unwrap_or_default();
            if commented && !description.is_empty() {
                format!("  {member}; // {description}")
            } else if commented {
                format!("  {member};")
            } else {
                member
            }
        })
        .collect();
    if commented {
        format!("{{\n{}\n}}", members.join("\n"))
    } else {
        format!("{{ {} }}", members.join("; "))
    }
}

fn property_key(name: &str) -> String {
    let plain = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain {
        name.to_string()
    } else {
        literal(&Value::String(name.to_string()))
    }
}

/// The argument type of a tool: its input schema's object type, one commented line per
/// top-level property. An empty or missing schema gives `{}`.
pub(crate) fn arguments_type(input_schema: &Value) -> String {
    match input_schema.as_object() {
        Some(object) if object.contains_key("properties") => object_type(object, 0, true),
        Some(object) if object.contains_key("additionalProperties") => object_type(object, 0, true),
        _ => "{}".to_string(),
    }
}

/// The return type: an output schema's type (structured content), `unknown` without one.
pub(crate) fn return_type(output_schema: Option<&Value>) -> String {
    output_schema
        .map(|schema| type_of(schema, 0))
        .unwrap_or_else(|| "unknown".to_string())
}

/// The code-mode signature of one tool:
///
/// ```text
/// /** Summary line. */
/// tools.call("server", "tool", args: { … }): Promise<ReturnType>
/// ```
pub fn tool_signature(
    server: &str,
    tool: &str,
    description: &str,
    input_schema: &Value,
    output_schema: Option<&Value>,
) -> String {
    let summary = crate::search::one_line(description, crate::search::SUMMARY_CHARS);
    let head = if summary.is_empty() {
        String::new()
    } else {
        format!("/** {} */\n", summary.replace("*/", "* /"))
    };
    format!(
        "{head}tools.call({}, {}, args: {}): Promise<{}>",
        literal(&Value::String(server.to_string())),
        literal(&Value::String(tool.to_string())),
        arguments_type(input_schema),
        return_type(output_schema)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types_map_to_typescript() {
        assert_eq!(type_of(&json!({"type": "integer"}), 0), "number");
        assert_eq!(type_of(&json!({"enum": ["a", "b"]}), 0), "\"a\" | \"b\"");
        assert_eq!(
            type_of(&json!({"type": "array", "items": {"type": "string"}}), 0),
            "string[]"
        );
        assert_eq!(
            type_of(&json!({"type": ["string", "null"]}), 0),
            "string | null"
        );
        assert_eq!(
            type_of(
                &json!({"type": "object", "properties": {"a": {"type": "number"}, "b-c": {}}, "required": ["a"]}),
                0
            ),
            "{ a: number; \"b-c\"?: unknown }"
        );
        assert_eq!(
            type_of(
                &json!({"type": "object", "additionalProperties": {"type": "string"}}),
                0
            ),
            "Record<string, string>"
        );
        assert_eq!(type_of(&json!({}), 0), "unknown");
    }

    #[test]
    fn signature_has_arguments_and_return_type() {
        let input = json!({"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": "integer"}}, "required": ["city"]});
        let output = json!({"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]});
        assert_eq!(
            tool_signature(
                "weather",
                "forecast",
                "Forecast. More.",
                &input,
                Some(&output)
            ),
            "/** Forecast. */\ntools.call(\"weather\", \"forecast\", args: {\n  city: string; // City name\n  days?: number;\n}): Promise<{ temp: number }>"
        );
        assert_eq!(
            tool_signature("s", "t", "", &json!({"type": "object"}), None),
            "tools.call(\"s\", \"t\", args: {}): Promise<unknown>"
        );
    }
}
