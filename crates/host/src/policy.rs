//! The operator's gate settings from config, turned into the gate's policy and hook runner.

use warden_config::{HookErrorPolicy, PolicySettings};
use warden_hooks::{HookDefinition, HookRunner, HookSpec, HookSpecError};
use warden_policy::{CapabilitySet, ExternalAuthorizer, GatePolicy};

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

/// The gate's policy from `[permissions]`, `[authorization]` and `[audit]`.
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
    policy.audit_full_arguments = settings.audit.full_arguments();
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
