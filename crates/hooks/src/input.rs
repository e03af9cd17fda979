//! The JSON object a hook reads on its stdin.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use warden_vocab::HookEvent;

/// The tool a tool event is about: its model-visible name and its raw identity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookTool {
    /// The name the model sees (`mcp__fs__write_file`).
    pub public_name: String,
    /// The server it belongs to (`builtin` for built-in tools).
    pub server: String,
    /// The tool's own name on that server.
    pub tool: String,
}

/// One event as a hook sees it, serialised as a single JSON object on stdin.
///
/// Note for operators: a PreToolUse or PostToolUse hook receives the live arguments and result,
/// including values that the audit trail would store only as a digest and that redaction would hide
/// elsewhere. A logging hook is therefore as sensitive as the data it logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookInput {
    /// The event name (`PreToolUse`, …).
    pub event: HookEvent,
    /// The session this event belongs to.
    pub session_id: String,
    /// The session's working folder.
    pub cwd: PathBuf,
    /// For tool events: the tool's public name, server and raw name, flattened into the object.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tool: Option<HookTool>,
    /// For tool events: the call's arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// For PostToolUse: the call's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// For UserPromptSubmit: the prompt text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

impl HookInput {
    /// An event with no tool, prompt or result (SessionStart, Stop, SessionEnd).
    pub fn session_event(event: HookEvent, session_id: &str, cwd: PathBuf) -> Self {
        Self {
            event,
            session_id: session_id.to_owned(),
            cwd,
            tool: None,
            arguments: None,
            result: None,
            prompt: None,
        }
    }
}
