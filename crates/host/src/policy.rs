//! The operator's gate settings from config, turned into the gate's policy and hook runner.

use warden_config::{
    Capability, HookEvent as ConfigHookEvent, PermissionMode as ConfigMode, PolicySettings,
    RuleDecision as ConfigRuleDecision, ToolGlob,
};
use warden_hooks::{HookDefinition, HookEvent, HookRunner, HookSpec, Pattern};
use warden_policy::{
    AuthorizationRule, CapabilityClass, CapabilitySet, ExternalAuthorizer, GatePolicy,
    PermissionMode, RuleDecision,
};

/// A setting that validated as config but not as a gate input (should not happen: both check
/// the same shapes; kept typed so a drift is a clear error, never a silent widening).
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct PolicyMappingError {
    pub key: String,
    pub message: String,
}

fn pattern(glob: &ToolGlob, key: &str) -> Result<Pattern, PolicyMappingError> {
    Pattern::new(glob.as_str()).map_err(|error| PolicyMappingError {
        key: key.to_owned(),
        message: error.to_string(),
    })
}

/// The gate class of a config capability.
pub fn capability_class(capability: Capability) -> CapabilityClass {
    match capability {
        Capability::ReadOnly => CapabilityClass::ReadOnly,
        Capability::Write => CapabilityClass::Write,
        Capability::Destructive => CapabilityClass::Destructive,
        Capability::External => CapabilityClass::External,
    }
}

/// The gate's policy from `[permissions]`, `[authorization]` and `[audit]`.
pub fn gate_policy(settings: &PolicySettings) -> Result<GatePolicy, PolicyMappingError> {
    let mut policy = GatePolicy::default();
    let permissions = &settings.permissions;
    policy.permissions.mode = match permissions.mode() {
        ConfigMode::Ask => PermissionMode::Ask,
        ConfigMode::ReadOnly => PermissionMode::ReadOnly,
        ConfigMode::Auto => PermissionMode::Auto,
    };
    for glob in &permissions.allow {
        policy
            .permissions
            .allow
            .push(pattern(glob, "permissions.allow")?);
    }
    for glob in &permissions.deny {
        policy
            .permissions
            .deny
            .push(pattern(glob, "permissions.deny")?);
    }
    let always_ask: Vec<CapabilityClass> = permissions
        .always_ask()
        .into_iter()
        .map(capability_class)
        .collect();
    policy.permissions.always_ask = CapabilitySet::of(&always_ask);
    for rule in &settings.authorization.rules {
        policy.rules.push(AuthorizationRule {
            tools: pattern(&rule.tools, "authorization.rules.tools")?,
            decision: match rule.decision {
                ConfigRuleDecision::Allow => RuleDecision::Allow,
                ConfigRuleDecision::Deny => RuleDecision::Deny,
            },
            reason: rule.reason.clone(),
        });
    }
    policy.external = settings
        .authorization
        .command
        .as_ref()
        .map(|command| ExternalAuthorizer {
            command: command.command.clone(),
            args: command.args.clone(),
            timeout: command.timeout,
        });
    policy.audit_full_arguments = settings.audit.full_arguments();
    Ok(policy)
}

/// The hook runner from `[[hooks.EVENT]]` (user config only; the loader refused project hooks).
pub fn hook_runner(settings: &PolicySettings) -> Result<HookRunner, PolicyMappingError> {
    let mut specs = Vec::new();
    for hook in &settings.hooks {
        let event = match hook.event {
            ConfigHookEvent::SessionStart => HookEvent::SessionStart,
            ConfigHookEvent::UserPromptSubmit => HookEvent::UserPromptSubmit,
            ConfigHookEvent::PreToolUse => HookEvent::PreToolUse,
            ConfigHookEvent::PostToolUse => HookEvent::PostToolUse,
            ConfigHookEvent::Stop => HookEvent::Stop,
            ConfigHookEvent::SessionEnd => HookEvent::SessionEnd,
        };
        let key = format!("hooks.{}", hook.event.as_str());
        let matcher = hook
            .matcher
            .as_ref()
            .map(|glob| pattern(glob, &key))
            .transpose()?;
        let spec = HookSpec::try_from(HookDefinition {
            event,
            command: hook.command.clone(),
            args: hook.args.clone(),
            matcher,
            timeout: hook.timeout,
        })
        .map_err(|error| PolicyMappingError {
            key: key.clone(),
            message: error.to_string(),
        })?;
        specs.push(spec);
    }
    let deny = settings.hooks_on_error == Some(warden_config::HookErrorPolicy::Deny);
    Ok(HookRunner::new(specs).deny_on_error(deny))
}
