//! Per-tool settings the operator gives by name or pattern (`[tool_settings."mcp__github__*"]`):
//! the permission a tool requires, its timeout, and whether it always asks.

use std::time::Duration;

use warden_vocab::ToolGlob;

/// What one `[tool_settings]` entry sets; an unset key leaves the tool's own value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolSettings {
    /// The permission passed to the application's authorization handler and the external
    /// authorization command.
    pub required_permission: Option<String>,
    /// The execution timeout (it replaces the server's `tool_timeout_sec`).
    pub timeout: Option<Duration>,
    /// `Some(true)`: the gate asks before every call, whatever the mode, lists and grants say.
    pub requires_approval: Option<bool>,
}

/// One entry: the pattern it is written for and what it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettingsRule {
    /// A tool glob over public names (an exact name is a glob without wildcards).
    pub pattern: ToolGlob,
    /// What it sets.
    pub settings: ToolSettings,
}

impl ToolSettingsRule {
    /// How specific the pattern is: a name with no wildcard beats every pattern, else the one
    /// with more literal characters.
    fn specificity(&self) -> (bool, usize) {
        let text = self.pattern.as_str();
        let wildcards = text.chars().filter(|c| matches!(c, '*' | '?')).count();
        (wildcards == 0, text.len() - wildcards)
    }
}

/// The settings of a call whose names (see [`warden_vocab::policy_names`]) are `names`: for each
/// key, the most specific matching entry that sets it (ties: the pattern first in text order);
/// `requires_approval` is true when any matching entry says so.
pub fn settings_for(rules: &[ToolSettingsRule], names: &[String]) -> ToolSettings {
    let mut matching: Vec<&ToolSettingsRule> = rules
        .iter()
        .filter(|rule| names.iter().any(|name| rule.pattern.matches(name)))
        .collect();
    matching.sort_by(|a, b| {
        b.specificity()
            .cmp(&a.specificity())
            .then_with(|| a.pattern.as_str().cmp(b.pattern.as_str()))
    });
    ToolSettings {
        required_permission: matching
            .iter()
            .find_map(|rule| rule.settings.required_permission.clone()),
        timeout: matching.iter().find_map(|rule| rule.settings.timeout),
        requires_approval: matching
            .iter()
            .any(|rule| rule.settings.requires_approval == Some(true))
            .then_some(true),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rule(pattern: &str, settings: ToolSettings) -> ToolSettingsRule {
        ToolSettingsRule {
            pattern: ToolGlob::parse(pattern).unwrap(),
            settings,
        }
    }

    #[test]
    fn the_most_specific_entry_sets_each_key_and_any_entry_can_require_approval() {
        let rules = [
            rule(
                "mcp__github__*",
                ToolSettings {
                    required_permission: Some("github".into()),
                    timeout: Some(Duration::from_secs(60)),
                    requires_approval: Some(true),
                },
            ),
            rule(
                "mcp__github__create_*",
                ToolSettings {
                    required_permission: Some("github.write".into()),
                    ..ToolSettings::default()
                },
            ),
            rule(
                "mcp__github__create_issue",
                ToolSettings {
                    timeout: Some(Duration::from_secs(5)),
                    requires_approval: Some(false),
                    ..ToolSettings::default()
                },
            ),
        ];
        let names = ["mcp__github__create_issue".to_owned()];
        let settled = settings_for(&rules, &names);
        assert_eq!(settled.required_permission.as_deref(), Some("github.write"));
        assert_eq!(settled.timeout, Some(Duration::from_secs(5)));
        assert_eq!(settled.requires_approval, Some(true));

        let other = settings_for(&rules, &["mcp__github__list_issues".to_owned()]);
        assert_eq!(other.required_permission.as_deref(), Some("github"));
        assert_eq!(other.timeout, Some(Duration::from_secs(60)));

        assert_eq!(
            settings_for(&rules, &["mcp__fs__read".to_owned()]),
            ToolSettings::default()
        );
    }
}
