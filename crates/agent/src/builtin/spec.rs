//! What the model and the gate see of each built-in tool: its name, description, capability classes and the input schema generated from its argument struct.

use serde::de::DeserializeOwned;
use serde_json::Value;
pub use warden_config::CapabilityClass as Capability;
use warden_vocab::arguments_schema as input_schema;

use super::bash::BashArgs;
use super::files::{EditFileArgs, ListDirArgs, ReadFileArgs, WriteFileArgs};
use super::output::BuiltinResult;
use super::plan::UpdatePlanArgs;
use super::search::{GlobArgs, GrepArgs};
use crate::conversation::ToolSpec;

/// A built-in tool as the model and the gate see it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
    /// The capability classes the gate classifies the tool with.
    pub capabilities: Vec<Capability>,
}

impl BuiltinToolSpec {
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            input_schema: self.input_schema.clone(),
        }
    }

    pub fn is_read_only(&self) -> bool {
        self.capabilities == [Capability::ReadOnly]
    }
}

/// Every built-in tool, in a fixed order.
pub fn builtin_specs() -> Vec<BuiltinToolSpec> {
    use Capability::*;
    vec![
        BuiltinToolSpec {
            name: "bash",
            description: "Run a command with `bash -c` in the working directory. Output (stdout and stderr together) over the cap is saved to a file and a preview returned. The command's whole process group is killed on timeout or cancellation.",
            input_schema: input_schema::<BashArgs>(),
            capabilities: vec![Write, Destructive, External],
        },
        BuiltinToolSpec {
            name: "read_file",
            description: "Read a text file, with line numbers. `offset` is the first line (1-based), `limit` the number of lines (default 2000).",
            input_schema: input_schema::<ReadFileArgs>(),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "write_file",
            description: "Create or replace a file with `content` (parent directories are created). Replacing an existing file counts as destructive.",
            input_schema: input_schema::<WriteFileArgs>(),
            capabilities: vec![Write],
        },
        BuiltinToolSpec {
            name: "edit_file",
            description: "Replace an exact string in a file. `old_string` must occur exactly once unless `replace_all` is true.",
            input_schema: input_schema::<EditFileArgs>(),
            // It always replaces existing content.
            capabilities: vec![Destructive],
        },
        BuiltinToolSpec {
            name: "list_dir",
            description: "List a directory (default: the working directory); directories end with `/`.",
            input_schema: input_schema::<ListDirArgs>(),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "glob",
            description: "Find files whose path relative to `path` (default: the working directory) matches a glob: `*` and `?` within a name, `**` across directories, `{a,b}` alternatives. `.git` is skipped.",
            input_schema: input_schema::<GlobArgs>(),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "grep",
            description: "Search file contents with a regular expression (Rust regex syntax). Prints `path:line:text`. `path` is a file or directory (default: the working directory); `glob` filters file paths; binary files and `.git` are skipped.",
            input_schema: input_schema::<GrepArgs>(),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "update_plan",
            description: "State your plan for the task, or update it as you go: the whole list each time, every entry with `content` (one line), `priority` (`high`, `medium`, `low`) and `status` (`pending`, `in_progress`, `completed`). Use it for work of several steps; it touches nothing, the user sees the plan.",
            input_schema: input_schema::<UpdatePlanArgs>(),
            capabilities: vec![ReadOnly],
        },
    ]
}

/// `arguments` read as `tool`'s argument struct, or an error result the model reads (e.g.
/// "read_file: missing field `path`"). No arguments at all (`null`) read as an empty object.
pub(super) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
) -> Result<T, BuiltinResult> {
    warden_vocab::parse_arguments(tool, arguments).map_err(BuiltinResult::error)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The schemas models have always been given, written out by hand: the generated ones must
    /// stay exactly these (names, types, ranges, required lists, key order).
    fn published_schemas() -> Vec<(&'static str, Value)> {
        vec![
            (
                "bash",
                json!({
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command line."},
                        "timeout_sec": {"type": "integer", "minimum": 1, "maximum": 600,
                            "description": "Seconds before the command is killed (default 120)."}
                    },
                    "required": ["command"],
                    "additionalProperties": false
                }),
            ),
            (
                "read_file",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "offset": {"type": "integer", "minimum": 1},
                        "limit": {"type": "integer", "minimum": 1}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            (
                "write_file",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            ),
            (
                "edit_file",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"},
                        "replace_all": {"type": "boolean"}
                    },
                    "required": ["path", "old_string", "new_string"],
                    "additionalProperties": false
                }),
            ),
            (
                "list_dir",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "additionalProperties": false
                }),
            ),
            (
                "glob",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "description": "e.g. `**/*.rs`"},
                        "path": {"type": "string"}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            ),
            (
                "grep",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string"},
                        "path": {"type": "string"},
                        "glob": {"type": "string"},
                        "ignore_case": {"type": "boolean"}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            ),
            (
                "update_plan",
                json!({
                    "type": "object",
                    "properties": {
                        "entries": {
                            "type": "array",
                            "items": {
                                "description": "One step of the plan.",
                                "type": "object",
                                "properties": {
                                    "content": {"description": "What the step does, in a line.",
                                        "type": "string"},
                                    "priority": {"description": "How much an entry matters.",
                                        "type": "string", "enum": ["high", "medium", "low"]},
                                    "status": {"description": "Where an entry stands.",
                                        "type": "string",
                                        "enum": ["pending", "in_progress", "completed"]}
                                },
                                "additionalProperties": false,
                                "required": ["content", "priority", "status"]
                            }
                        }
                    },
                    "required": ["entries"],
                    "additionalProperties": false
                }),
            ),
        ]
    }

    #[test]
    fn generated_schemas_are_the_published_ones_byte_for_byte() {
        let specs = builtin_specs();
        let published = published_schemas();
        assert_eq!(specs.len(), published.len());
        for (spec, (name, schema)) in specs.iter().zip(published) {
            assert_eq!(spec.name, name);
            assert_eq!(
                spec.input_schema.to_string(),
                schema.to_string(),
                "the schema of {name} changed"
            );
        }
    }

    #[test]
    fn arguments_that_do_not_fit_are_refused_with_the_tool_and_field() {
        let missing = parse_args::<ReadFileArgs>("read_file", &json!({})).unwrap_err();
        assert_eq!(missing.text, "read_file: missing field `path`");
        assert!(missing.is_error);
        let unknown =
            parse_args::<ReadFileArgs>("read_file", &json!({"path": "a", "lines": 3})).unwrap_err();
        assert!(
            unknown.text.starts_with("read_file: unknown field `lines`"),
            "{}",
            unknown.text
        );
        let mistyped = parse_args::<BashArgs>("bash", &json!({"command": "ls", "timeout_sec": -1}))
            .unwrap_err();
        assert!(
            mistyped
                .text
                .starts_with("bash: invalid value: integer `-1`"),
            "{}",
            mistyped.text
        );
        // No arguments at all are an empty object; `null` stands for an absent optional one.
        parse_args::<ListDirArgs>("list_dir", &Value::Null).unwrap();
        parse_args::<EditFileArgs>(
            "edit_file",
            &json!({"path": "a", "old_string": "x", "new_string": "y", "replace_all": null}),
        )
        .unwrap();
    }
}
