//! One operator authorization rule (`[[authorization.rules]]`): a tool glob, a decision, a reason.

use crate::decision::RuleDecision;
use crate::glob::ToolGlob;

/// One `[[authorization.rules]]` entry as the gate applies it. Rules are tried in order; the
/// first whose glob matches the public name decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRule {
    /// Glob over public names (`mcp__fs__write_*`).
    pub tools: ToolGlob,
    /// Allow or deny.
    pub decision: RuleDecision,
    /// Shown to the model when the rule denies.
    pub reason: Option<String>,
}

impl AuthorizationRule {
    /// Whether this rule is about `public_name`.
    pub fn matches(&self, public_name: &str) -> bool {
        self.tools.matches(public_name)
    }
}
