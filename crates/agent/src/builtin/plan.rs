//! The `update_plan` tool: the model states its plan (entries with content, priority and
//! status, as ACP's plan entries). It touches nothing; frontends show the plan (`warden acp`
//! as a `plan` session update, A2A in a task's status metadata), and the model reads it back
//! as a checklist.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::BuiltinTools;
use super::output::BuiltinResult;
use super::spec::parse_args;

/// The most entries a plan may have.
const MAX_ENTRIES: usize = 100;
/// The longest entry, in bytes.
const MAX_ENTRY_BYTES: usize = 2000;

/// How much an entry matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    Medium,
    Low,
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanEntry {
    /// What the step does, in a line.
    pub content: String,
    pub priority: PlanPriority,
    pub status: PlanStatus,
}

/// The arguments of `update_plan`: the whole plan, each call replacing the one before.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdatePlanArgs {
    entries: Vec<PlanEntry>,
}

/// The built-in with which the model states its plan.
pub const PLAN_TOOL: &str = "update_plan";

/// The plan an `update_plan` call states, when its arguments are one (for frontends that show
/// it); `None` when they are not.
pub fn plan_entries(arguments: &Value) -> Option<Vec<PlanEntry>> {
    let args: UpdatePlanArgs = parse_args(PLAN_TOOL, arguments).ok()?;
    checked(&args.entries).ok()?;
    Some(args.entries)
}

fn checked(entries: &[PlanEntry]) -> Result<(), String> {
    if entries.len() > MAX_ENTRIES {
        return Err(format!(
            "update_plan: {} entries; a plan has at most {MAX_ENTRIES}",
            entries.len()
        ));
    }
    if let Some(entry) = entries
        .iter()
        .find(|entry| entry.content.trim().is_empty() || entry.content.len() > MAX_ENTRY_BYTES)
    {
        return Err(format!(
            "update_plan: an entry's content must be a line of 1 to {MAX_ENTRY_BYTES} bytes, not \
             {} bytes",
            entry.content.len()
        ));
    }
    Ok(())
}

impl BuiltinTools {
    pub(super) fn update_plan(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let args: UpdatePlanArgs = parse_args("update_plan", args)?;
        checked(&args.entries).map_err(BuiltinResult::error)?;
        let done = args
            .entries
            .iter()
            .filter(|entry| entry.status == PlanStatus::Completed)
            .count();
        let mut text = format!("The plan ({done} of {} done):", args.entries.len());
        for entry in &args.entries {
            let mark = match entry.status {
                PlanStatus::Pending => "[ ]",
                PlanStatus::InProgress => "[>]",
                PlanStatus::Completed => "[x]",
            };
            let priority = match entry.priority {
                PlanPriority::High => " (high)",
                PlanPriority::Medium => "",
                PlanPriority::Low => " (low)",
            };
            text.push_str(&format!("\n{mark} {}{priority}", entry.content.trim()));
        }
        Ok(self.finish("update_plan", text, false))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plan_is_read_and_a_bad_one_refused() {
        let plan = json!({"entries": [
            {"content": "Read the notes", "priority": "high", "status": "completed"},
            {"content": "Tidy them", "priority": "medium", "status": "in_progress"}
        ]});
        let entries = plan_entries(&plan).unwrap();
        assert_eq!(entries[1].status, PlanStatus::InProgress);
        assert_eq!(entries[0].priority, PlanPriority::High);
        assert!(
            plan_entries(&json!({"entries": [{"content": "x", "priority": "urgent",
            "status": "pending"}]}))
            .is_none()
        );
        assert!(
            plan_entries(&json!({"entries": [{"content": " ", "priority": "low",
            "status": "pending"}]}))
            .is_none()
        );
        assert!(plan_entries(&json!({})).is_none());
    }
}
