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

impl HookTool {
    /// The names a hook's matcher is tried against: the public name and, for a tool that
    /// reaches one MCP server on the caller's behalf (`server` is not `builtin` but the name is
    /// not that server's), `mcp__<server>__<tool>` — see [`warden_vocab::policy_names`].
    pub fn matcher_names(&self) -> Vec<String> {
        let subject = (!warden_vocab::HOST_TOOL_SOURCES.contains(&self.server.as_str())
            && warden_vocab::split_public_name(&self.public_name).is_none())
        .then_some((self.server.as_str(), self.tool.as_str()));
        warden_vocab::policy_names(&self.public_name, subject)
    }
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
    /// The tenant the session belongs to, when the surface knows one (`warden service`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Who within the surface made the call or sent the prompt (an API key's caller, a
    /// gateway client), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
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
            tenant: None,
            caller: None,
        }
    }
}
