//! The operator's gate settings from config, turned into the gate's policy and hook runner.

use warden_config::{HookErrorPolicy, PolicySettings};
use warden_hooks::{HookDefinition, HookRunner, HookSpec, HookSpecError};
use warden_policy::{
    CapabilitySet, ExternalAuthorizer, GatePolicy, ToolSettings, ToolSettingsRule,
};

/// A configured hook the hook runner refuses. Config validation checks the same rules (an
/// absolute command, a timeout of at least a second, matchers on tool events only), so this
/// names a drift between the two, never a silent widening.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {source}")]
pub struct HookSettingsError {
    /// The hook's key path, `hooks.EVENT[i]`.
    pub key: String,
    #[source]
    pub source: HookSpecError,
}

/// The gate's policy from `[permissions]`, `[authorization]`, `[tool_settings]` and `[audit]`.
pub fn gate_policy(settings: &PolicySettings) -> GatePolicy {
    let mut policy = GatePolicy::default();
    let permissions = &settings.permissions;
    policy.permissions.mode = permissions.mode();
    policy.permissions.allow = permissions.allow.clone();
    policy.permissions.deny = permissions.deny.clone();
    policy.permissions.always_ask = permissions
        .always_ask()
        .into_iter()
        .collect::<CapabilitySet>();
    policy.rules = settings
        .authorization
        .rules
        .iter()
        .map(|declared| declared.rule.clone())
        .collect();
    policy.external = settings
        .authorization
        .command
        .as_ref()
        .map(|command| ExternalAuthorizer {
            command: command.command.clone(),
            args: command.args.clone(),
            timeout: command.timeout,
        });
    policy.tool_settings = settings
        .tool_settings
        .iter()
        .map(|entry| ToolSettingsRule {
            pattern: entry.pattern.clone(),
            settings: ToolSettings {
                required_permission: entry.required_permission.clone(),
                timeout: entry.timeout,
                requires_approval: entry.requires_approval,
            },
        })
        .collect();
    policy.audit_full_arguments = settings.audit.full_arguments();
    policy.audit_required = settings.audit.required();
    policy.audit_sync = match settings.audit.sync() {
        warden_config::AuditSync::Process => warden_policy::JournalSync::Process,
        warden_config::AuditSync::Power => warden_policy::JournalSync::Power,
    };
    policy
}

/// The hook runner from `[[hooks.EVENT]]` (user config only; the loader refused project hooks).
pub fn hook_runner(settings: &PolicySettings) -> Result<HookRunner, HookSettingsError> {
    let mut specs = Vec::with_capacity(settings.hooks.len());
    for hook in &settings.hooks {
        let spec = HookSpec::try_from(HookDefinition {
            event: hook.event,
            command: hook.command.clone(),
            args: hook.args.clone(),
            matcher: hook.matcher.clone(),
            timeout: hook.timeout,
        })
        .map_err(|source| HookSettingsError {
            key: format!("hooks.{}[{}]", hook.event, hook.index),
            source,
        })?;
        specs.push(spec);
    }
    let deny = settings.hooks_on_error == Some(HookErrorPolicy::Deny);
    Ok(HookRunner::new(specs).deny_on_error(deny))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use warden_config::{HookCommand, HookEvent, PermissionMode, RuleDecision, Scope, parse_str};
    use warden_policy::{CapabilityClass, DEFAULT_HOST_TOOL_TIMEOUT, ToolGlob};

    use super::*;

    fn settings(body: &str) -> PolicySettings {
        let text = format!("schema_version = 1\n{body}");
        parse_str(&text, Path::new("/cfg/config.toml"), Scope::User)
            .unwrap()
            .policy_settings
    }

    #[test]
    fn the_gate_gets_the_configured_values_unchanged() {
        let policy = gate_policy(&settings(
            r#"
[permissions]
mode = "read-only"
allow = ["mcp__fs__read_*"]
deny = ["mcp__fs__delete_*"]
always_ask = ["external"]

[[authorization.rules]]
tools = "mcp__fs__write_*"
decision = "deny"
reason = "writes go through review"
"#,
        ));
        let glob = |pattern| ToolGlob::parse(pattern).unwrap();
        assert_eq!(policy.permissions.mode, PermissionMode::ReadOnly);
        assert_eq!(policy.permissions.allow, [glob("mcp__fs__read_*")]);
        assert_eq!(policy.permissions.deny, [glob("mcp__fs__delete_*")]);
        assert_eq!(
            policy.permissions.always_ask,
            CapabilitySet::of(&[CapabilityClass::External])
        );
        assert_eq!(policy.rules.len(), 1);
        assert_eq!(policy.rules[0].tools, glob("mcp__fs__write_*"));
        assert_eq!(policy.rules[0].decision, RuleDecision::Deny);
        assert_eq!(policy.default_timeout, DEFAULT_HOST_TOOL_TIMEOUT);
        assert_eq!(
            gate_policy(&PolicySettings::default())
                .permissions
                .always_ask,
            CapabilitySet::of(&[CapabilityClass::Destructive])
        );
    }

    #[test]
    fn a_hook_the_runner_refuses_names_its_key() {
        let mut settings = PolicySettings::default();
        settings.hooks.push(HookCommand {
            event: HookEvent::Stop,
            command: PathBuf::from("/usr/bin/true"),
            args: Vec::new(),
            matcher: None,
            timeout: Duration::ZERO,
            source: PathBuf::from("/cfg/config.toml"),
            index: 3,
        });
        let error = hook_runner(&settings).unwrap_err();
        assert_eq!(error.key, "hooks.Stop[3]");
        assert!(
            error.to_string().starts_with("hooks.Stop[3]: Stop hook"),
            "{error}"
        );
    }
}
