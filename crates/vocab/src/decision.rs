//! What an operator rule decides about a tool call (allow or deny), and how a call ended.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an `[[authorization.rules]]` entry decides.
///
/// `allow` stops rule evaluation without denying: it does not widen the capability ceiling and
/// does not skip the external command, validation, hooks or approval. `deny` denies the call with
/// the rule's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(description = "What an `[[authorization.rules]]` entry decides.")]
pub enum RuleDecision {
    Allow,
    Deny,
}

impl RuleDecision {
    /// Both decisions.
    pub const ALL: [Self; 2] = [Self::Allow, Self::Deny];

    /// Every name, in the order of [`RuleDecision::ALL`].
    pub const NAMES: &'static [&'static str] = &["allow", "deny"];

    /// The name used in config and by the external authorization command.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// The decision of a name as written in config, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|decision| decision.as_str() == name)
    }
}

impl fmt::Display for RuleDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a call ended: the gate's decision as the audit trail, the model's result and every
/// frontend name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// It ran and returned a result (which may itself be a tool error).
    Allowed,
    /// A layer refused it; nothing was executed.
    Denied,
    /// It ran past its timeout and was cancelled.
    TimedOut,
    /// The caller cancelled it.
    Cancelled,
    /// It was admitted but the dispatch failed (dead server, transport error).
    Failed,
    /// Its intent was recorded before it started (a skill script); a second record, the
    /// call's own, says how it ended.
    Started,
}

impl Decision {
    /// The name stored in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Started => "started",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_decision_keeps_its_spelling_in_serde_display_and_names() {
        for (decision, name) in RuleDecision::ALL.into_iter().zip(RuleDecision::NAMES) {
            assert_eq!(decision.as_str(), *name);
            assert_eq!(decision.to_string(), *name);
            assert_eq!(RuleDecision::from_name(name), Some(decision));
            let json = serde_json::to_string(&decision).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<RuleDecision>(&json).unwrap(),
                decision
            );
        }
        assert_eq!(RuleDecision::from_name("permit"), None);
        assert!(serde_json::from_str::<RuleDecision>("\"Allow\"").is_err());
    }
}
