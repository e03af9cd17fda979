//! The operator's inputs to the gate: permission mode, allow/deny lists, rules, external command.

use std::path::PathBuf;
use std::time::Duration;

use crate::tool_settings::ToolSettingsRule;

use warden_vocab::{
    AuthorizationRule, CapabilityClass, CapabilitySet, DEFAULT_HOST_TOOL_TIMEOUT, PermissionMode,
    ToolGlob,
};

/// `[permissions]` merged with `--allowed-tools` / `--disallowed-tools` (the lead concatenates
/// config lists and command-line patterns; a deny match always wins over an allow match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// The permission mode.
    pub mode: PermissionMode,
    /// Tools that run without asking (within the policy ceiling): globs over public names.
    pub allow: Vec<ToolGlob>,
    /// Tools that are denied: globs over public names.
    pub deny: Vec<ToolGlob>,
    /// Classes that always ask in `auto` mode (default: `destructive`).
    pub always_ask: CapabilitySet,
}

impl Default for Permissions {
    fn default() -> Self {
        Self {
            mode: PermissionMode::Ask,
            allow: Vec::new(),
            deny: Vec::new(),
            always_ask: CapabilitySet::of(&[CapabilityClass::Destructive]),
        }
    }
}

/// The optional external authorization command: it reads one JSON object on stdin and answers
/// `{"decision": "allow"|"deny", "reason": "…"}` on stdout. Any failure denies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAuthorizer {
    /// Absolute path of the command.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// How long it may take; past that the call is denied.
    pub timeout: Duration,
}

/// Everything the operator decides about calls, gathered for the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatePolicy {
    /// Mode, allow/deny lists, always-ask classes.
    pub permissions: Permissions,
    /// Authorization rules, in order.
    pub rules: Vec<AuthorizationRule>,
    /// The external authorization command, if configured.
    pub external: Option<ExternalAuthorizer>,
    /// Execution timeout for tools that set none (the host tools; default
    /// [`DEFAULT_HOST_TOOL_TIMEOUT`]).
    pub default_timeout: Duration,
    /// Store full arguments in the audit trail instead of a digest.
    pub audit_full_arguments: bool,
    /// Refuse a call whose intent the audit trail cannot record (`[audit] required = true`);
    /// by default the call goes on and the failure is reported.
    pub audit_required: bool,
    /// When a record appended to the audit journal counts as durable (`[audit] sync`): once
    /// written (survives the process being killed) or once on disk (survives power loss).
    pub audit_sync: crate::JournalSync,
    /// `[tool_settings]`: required permission, timeout and approval by tool name or pattern.
    pub tool_settings: Vec<ToolSettingsRule>,
}

impl Default for GatePolicy {
    fn default() -> Self {
        Self {
            permissions: Permissions::default(),
            rules: Vec::new(),
            external: None,
            default_timeout: DEFAULT_HOST_TOOL_TIMEOUT,
            audit_full_arguments: false,
            audit_required: false,
            audit_sync: crate::JournalSync::Process,
            tool_settings: Vec::new(),
        }
    }
}
