//! The operator's inputs to the gate: permission mode, allow/deny lists, rules, external command.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use warden_hooks::Pattern;

use crate::capability::{CapabilityClass, CapabilitySet};

/// How much runs without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Read-only tools run (even when also external); anything else asks.
    #[default]
    Ask,
    /// Read-only tools run; anything else is denied (and hidden).
    ReadOnly,
    /// Everything policy admits runs, except the always-ask classes, which ask.
    Auto,
}

impl PermissionMode {
    /// The host's ceiling for this mode: `read-only` admits `read_only` + `external`, the other
    /// modes admit every class (they differ in what they ask about, not in what they admit).
    pub fn ceiling(self) -> CapabilitySet {
        match self {
            Self::ReadOnly => {
                CapabilitySet::of(&[CapabilityClass::ReadOnly, CapabilityClass::External])
            }
            Self::Ask | Self::Auto => CapabilitySet::ALL,
        }
    }

    /// The name used in config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::ReadOnly => "read-only",
            Self::Auto => "auto",
        }
    }
}

/// `[permissions]` merged with `--allowed-tools` / `--disallowed-tools` (the lead concatenates
/// config lists and command-line patterns; a deny match always wins over an allow match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// The permission mode.
    pub mode: PermissionMode,
    /// Tools that run without asking (within the policy ceiling): globs over public names.
    pub allow: Vec<Pattern>,
    /// Tools that are denied: globs over public names.
    pub deny: Vec<Pattern>,
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

/// What a matching authorization rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    /// Stops rule evaluation without denying. It does not widen the capability ceiling and does
    /// not skip the external command, validation, hooks or approval.
    Allow,
    /// Denies the call with the rule's reason.
    Deny,
}

/// One `[[authorization.rules]]` entry. Rules are tried in order; the first whose glob matches
/// the public name decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRule {
    /// Glob over public names (`mcp__fs__write_*`).
    pub tools: Pattern,
    /// Allow or deny.
    pub decision: RuleDecision,
    /// Shown to the model when the rule denies.
    pub reason: Option<String>,
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
    /// Execution timeout for tools that set none.
    pub default_timeout: Duration,
    /// Store full arguments in the audit trail instead of a digest.
    pub audit_full_arguments: bool,
}

/// The default execution timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

impl Default for GatePolicy {
    fn default() -> Self {
        Self {
            permissions: Permissions::default(),
            rules: Vec::new(),
            external: None,
            default_timeout: DEFAULT_CALL_TIMEOUT,
            audit_full_arguments: false,
        }
    }
}
