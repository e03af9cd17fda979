//! The fixed catalogue the conformance scenarios look for: tool, resource, template and prompt
//! definitions, and the content they return, as the scenarios' published expectations state them.

use serde_json::{Value, json};

/// A 1x1 red PNG, the image the image scenarios expect.
pub const IMAGE_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV header, the audio the audio scenario expects.
pub const AUDIO_WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

pub const STATIC_TEXT_URI: &str = "test://static-text";
pub const STATIC_TEXT: &str = "This is the content of the static text resource.";
pub(super) const STATIC_BINARY_URI: &str = "test://static-binary";
pub(super) const WATCHED_URI: &str = "test://watched-resource";
pub(super) const WATCHED_TEXT: &str = "Watched resource content";
pub(super) const TEMPLATE_URI: &str = "test://template/{id}/data";
pub(super) const TEMPLATE_PREFIX: &str = "test://template/";
pub(super) const TEMPLATE_SUFFIX: &str = "/data";

/// A tool taking no arguments.
fn no_arguments(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}})
}

/// A tool taking one required string argument.
fn one_string(name: &str, description: &str, argument: &str, about: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {argument: {"type": "string", "description": about}},
            "required": [argument]
        }
    })
}

/// The input schema of `json_schema_2020_12_tool`: 2020-12 keywords that must survive `tools/list`.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// Every tool, as `tools/list` publishes it.
pub(super) fn tools() -> Vec<Value> {
    vec![
        no_arguments("test_simple_text", "Tests simple text content response"),
        no_arguments("test_image_content", "Tests image content response"),
        no_arguments("test_audio_content", "Tests audio content response"),
        no_arguments(
            "test_embedded_resource",
            "Tests embedded resource content response",
        ),
        no_arguments(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
        ),
        no_arguments(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
        ),
        no_arguments(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
        ),
        no_arguments("test_error_handling", "Tests error response handling"),
        no_arguments(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699)",
        ),
        one_string(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            "prompt",
            "The prompt to send to the LLM",
        ),
        one_string(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            "message",
            "The message to show the user",
        ),
        no_arguments(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
        ),
        no_arguments(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
        ),
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            "inputSchema": json_schema_2020_12()
        }),
        json!({
            "name": "test_custom_headers",
            "description": "Echoes its `region`; the argument is mirrored in the Mcp-Param-Region header (SEP-2243)",
            "inputSchema": {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"]
            }
        }),
        no_arguments(
            "test_missing_capability",
            "Needs the client's sampling capability",
        ),
        no_arguments(
            "test_input_required_result_elicitation",
            "MRTR: asks for a name through an elicitation input request",
        ),
        no_arguments(
            "test_input_required_result_sampling",
            "MRTR: asks for a completion through a sampling input request",
        ),
        no_arguments(
            "test_input_required_result_list_roots",
            "MRTR: asks for the client's roots through a roots/list input request",
        ),
        no_arguments(
            "test_input_required_result_request_state",
            "MRTR: returns an input request together with a requestState",
        ),
        no_arguments(
            "test_input_required_result_multiple_inputs",
            "MRTR: asks for elicitation, sampling and roots in one round",
        ),
        no_arguments(
            "test_input_required_result_multi_round",
            "MRTR: two rounds of elicitation",
        ),
        no_arguments(
            "test_input_required_result_tampered_state",
            "MRTR: rejects a requestState it did not issue",
        ),
        no_arguments(
            "test_input_required_result_capabilities",
            "MRTR: only asks for input the client declared it can give",
        ),
        no_arguments(
            "test_streaming_elicitation",
            "Streams a progress notification before its result",
        ),
        no_arguments(
            "test_logging_tool",
            "Logs only when the request asks for a log level",
        ),
        no_arguments(
            "test_trigger_tool_change",
            "Announces a tools list change to listeners",
        ),
        no_arguments(
            "test_trigger_prompt_change",
            "Announces a prompts list change to listeners",
        ),
    ]
}

/// Every static resource, as `resources/list` publishes it.
pub(super) fn resources() -> Vec<Value> {
    vec![
        json!({"uri": STATIC_TEXT_URI, "name": "static-text", "title": "Static Text Resource",
               "description": "A static text resource for testing", "mimeType": "text/plain"}),
        json!({"uri": STATIC_BINARY_URI, "name": "static-binary", "title": "Static Binary Resource",
               "description": "A static binary resource (image) for testing", "mimeType": "image/png"}),
        json!({"uri": WATCHED_URI, "name": "watched-resource", "title": "Watched Resource",
               "description": "A resource whose updates subscribers are told about", "mimeType": "text/plain"}),
    ]
}

/// Every resource template, as `resources/templates/list` publishes it.
pub(super) fn resource_templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": TEMPLATE_URI,
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json"
    })]
}

/// The contents of resource `uri`, or `None` when there is no such resource.
pub(super) fn read_resource(uri: &str) -> Option<Value> {
    let contents = match uri {
        STATIC_TEXT_URI => json!({"uri": uri, "mimeType": "text/plain", "text": STATIC_TEXT}),
        STATIC_BINARY_URI => json!({"uri": uri, "mimeType": "image/png", "blob": IMAGE_PNG_BASE64}),
        WATCHED_URI => json!({"uri": uri, "mimeType": "text/plain", "text": WATCHED_TEXT}),
        _ => {
            let id = uri
                .strip_prefix(TEMPLATE_PREFIX)?
                .strip_suffix(TEMPLATE_SUFFIX)
                .filter(|id| !id.is_empty() && !id.contains('/'))?;
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            json!({"uri": uri, "mimeType": "application/json", "text": body.to_string()})
        }
    };
    Some(json!({"contents": [contents]}))
}

/// Every prompt, as `prompts/list` publishes it.
pub(super) fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "test_simple_prompt", "title": "Simple Test Prompt",
               "description": "A simple prompt without arguments"}),
        json!({"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
        "description": "A prompt with required arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": true},
            {"name": "arg2", "description": "Second test argument", "required": true}
        ]}),
        json!({"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
               "description": "A prompt that includes an embedded resource",
               "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]}),
        json!({"name": "test_prompt_with_image", "title": "Prompt With Image",
               "description": "A prompt that includes image content"}),
        json!({"name": "test_input_required_result_prompt",
               "description": "MRTR: a prompt that needs context from the user first"}),
    ]
}

/// A prompt argument as a string (`""` when absent).
fn argument<'a>(arguments: Option<&'a serde_json::Map<String, Value>>, name: &str) -> &'a str {
    arguments
        .and_then(|arguments| arguments.get(name))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The messages of prompt `name` (the MRTR prompt is answered elsewhere), or `None` if unknown.
pub(super) fn prompt_messages(
    name: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Option<Value> {
    let user = |content: Value| json!({"role": "user", "content": content});
    let text = |text: String| json!({"type": "text", "text": text});
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing.".into()))],
        "test_prompt_with_arguments" => vec![user(text(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            argument(arguments, "arg1"),
            argument(arguments, "arg2")
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(json!({"type": "resource", "resource": {
                "uri": argument(arguments, "resourceUri"),
                "mimeType": "text/plain",
                "text": "Embedded resource content for testing."
            }})),
            user(text("Please process the embedded resource above.".into())),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": IMAGE_PNG_BASE64, "mimeType": "image/png"})),
            user(text("Please analyze the image above.".into())),
        ],
        _ => return None,
    };
    Some(json!({"messages": messages}))
}

/// The fixed result of a tool whose answer needs no client round trip, or `None`.
pub(super) fn fixed_tool_result(name: &str) -> Option<Value> {
    let result = match name {
        "test_simple_text" => json!({"content": [
            {"type": "text", "text": "This is a simple text response for testing."}
        ]}),
        "test_image_content" => json!({"content": [
            {"type": "image", "data": IMAGE_PNG_BASE64, "mimeType": "image/png"}
        ]}),
        "test_audio_content" => json!({"content": [
            {"type": "audio", "data": AUDIO_WAV_BASE64, "mimeType": "audio/wav"}
        ]}),
        "test_embedded_resource" => json!({"content": [
            {"type": "resource", "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }}
        ]}),
        "test_multiple_content_types" => json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": IMAGE_PNG_BASE64, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string()
            }}
        ]}),
        "test_error_handling" => json!({"isError": true, "content": [
            {"type": "text", "text": "This tool intentionally returns an error for testing"}
        ]}),
        _ => return None,
    };
    Some(result)
}

/// The `elicitation/create` parameters each elicitation tool sends.
pub(super) fn elicitation_params(tool: &str, message: &str) -> Option<Value> {
    let params = match tool {
        "test_elicitation" => json!({
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"]
            }
        }),
        "test_elicitation_sep1034_defaults" => json!({
            "message": "Please review and update the form fields with defaults",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status",
                               "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                },
                "required": []
            }
        }),
        "test_elicitation_sep1330_enums" => json!({
            "message": "Please select options from the enum fields",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "description": "Select one option",
                                       "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "description": "Select one option with titles",
                                     "oneOf": [
                                         {"const": "value1", "title": "First Option"},
                                         {"const": "value2", "title": "Second Option"},
                                         {"const": "value3", "title": "Third Option"}
                                     ]},
                    "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                                   "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "description": "Select multiple options",
                                      "minItems": 1, "maxItems": 3,
                                      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                                    "minItems": 1, "maxItems": 3,
                                    "items": {"anyOf": [
                                        {"const": "value1", "title": "First Choice"},
                                        {"const": "value2", "title": "Second Choice"},
                                        {"const": "value3", "title": "Third Choice"}
                                    ]}}
                },
                "required": []
            }
        }),
        _ => return None,
    };
    Some(params)
}
