//! Authorization: the capability ceiling (mode ∩ server policy ∩ tool policy) and operator rules.
//!
//! A tool is admitted only when *every* one of its classes is admitted by *every* level of the
//! ceiling. A tool with some classes admitted and others not is denied — and not shown to the
//! model — exactly as if none were admitted (fail closed). Levels are intersected, never unioned,
//! so a wider server policy widens nothing.

use warden_vocab::{AuthorizationRule, CapabilitySet, PermissionMode, RuleDecision};

use crate::tool::ToolDescriptor;

/// The classes the host admits for `descriptor` under `mode`: the mode's ceiling ∩ the server's
/// `policy.capabilities` ∩ the tool's `policy.tools` entry.
pub fn admitted_classes(descriptor: &ToolDescriptor, mode: PermissionMode) -> CapabilitySet {
    mode.ceiling().intersection(
        descriptor
            .server_policy
            .admitted_for(&descriptor.identity.tool),
    )
}

/// Checks the tool's classes against the ceiling; `Err` carries the reason shown to the model.
pub fn check_ceiling(
    descriptor: &ToolDescriptor,
    mode: PermissionMode,
) -> Result<CapabilitySet, String> {
    let classes = descriptor.classes();
    let admitted = admitted_classes(descriptor, mode);
    let missing = classes.difference(admitted);
    if classes.is_empty() || !missing.is_empty() {
        return Err(format!(
            "{} ({}) is not permitted: its capability classes are {classes}, but the host admits only {admitted} \
             for it (permission mode {}, server policy of \"{}\"); not admitted: {missing}",
            descriptor.public_name,
            descriptor.identity,
            mode.as_str(),
            descriptor.identity.server(),
        ));
    }
    Ok(classes)
}

/// The first rule whose glob matches `public_name`, with its position.
pub fn first_matching_rule<'r>(
    rules: &'r [AuthorizationRule],
    public_name: &str,
) -> Option<(usize, &'r AuthorizationRule)> {
    rules
        .iter()
        .enumerate()
        .find(|(_, rule)| rule.matches(public_name))
}

/// Applies the rules: `Err` with the reason when the first match denies.
pub fn check_rules(
    rules: &[AuthorizationRule],
    public_name: &str,
) -> Result<Option<usize>, String> {
    match first_matching_rule(rules, public_name) {
        Some((index, rule)) if rule.decision == RuleDecision::Deny => Err(match &rule.reason {
            Some(reason) => format!("{public_name} is denied by the operator: {reason}"),
            None => format!(
                "{public_name} is denied by the operator's authorization rule #{} (\"{}\")",
                index + 1,
                rule.tools
            ),
        }),
        Some((index, _)) => Ok(Some(index)),
        None => Ok(None),
    }
}
