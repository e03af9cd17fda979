//! How a tool's capability classes are derived: from MCP annotations (trusted or not) or from a built-in's declaration.

use serde::{Deserialize, Serialize};
use warden_vocab::{CapabilityClass, CapabilitySet};

/// MCP tool annotations, as the server sent them (absent hints are `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// `readOnlyHint` (spec default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// `destructiveHint` (spec default true; meaningful only when not read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// `idempotentHint` (spec default false; does not affect classes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint` (spec default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The spec's defaults, which are also the strictest reading of every hint.
const DEFAULT_READ_ONLY: bool = false;
const DEFAULT_DESTRUCTIVE: bool = true;
const DEFAULT_OPEN_WORLD: bool = true;

/// Derives a tool's classes from its annotations.
///
/// Each hint falls back to the spec's default (readOnlyHint false, destructiveHint true,
/// openWorldHint true). When `trust_annotations` is false a hint is honoured only where it is
/// stricter than the default — and as the defaults are already the strictest reading, an untrusted
/// server's tools are always `destructive` + `external`, whatever they claim.
///
/// Result: `read_only` if read-only, else `destructive` if destructive, else `write`; plus
/// `external` when open-world.
pub fn classes_from_annotations(
    annotations: &ToolAnnotations,
    trust_annotations: bool,
) -> CapabilitySet {
    // A hint counts when the server is trusted, or when it is no laxer than the default; the
    // defaults are the strictest values, so for an untrusted server that means "equal to it".
    let read_only = annotations
        .read_only_hint
        .filter(|&hint| trust_annotations || hint == DEFAULT_READ_ONLY)
        .unwrap_or(DEFAULT_READ_ONLY);
    let destructive = annotations
        .destructive_hint
        .filter(|&hint| trust_annotations || hint == DEFAULT_DESTRUCTIVE)
        .unwrap_or(DEFAULT_DESTRUCTIVE);
    let open_world = annotations
        .open_world_hint
        .filter(|&hint| trust_annotations || hint == DEFAULT_OPEN_WORLD)
        .unwrap_or(DEFAULT_OPEN_WORLD);
    let effect = if read_only {
        CapabilityClass::ReadOnly
    } else if destructive {
        CapabilityClass::Destructive
    } else {
        CapabilityClass::Write
    };
    let set = CapabilitySet::EMPTY.with(effect);
    if open_world {
        set.with(CapabilityClass::External)
    } else {
        set
    }
}

/// Makes a declared class set well-formed, failing closed: an empty set becomes
/// `destructive` + `external`, and a set with several effect classes keeps them all (so it
/// needs every one of them admitted).
pub fn normalise_declared(declared: CapabilitySet) -> CapabilitySet {
    let has_effect = [
        CapabilityClass::ReadOnly,
        CapabilityClass::Write,
        CapabilityClass::Destructive,
    ]
    .into_iter()
    .any(|class| declared.contains(class));
    if has_effect {
        declared
    } else {
        declared
            .with(CapabilityClass::Destructive)
            .with(CapabilityClass::External)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CapabilityClass::*;

    #[test]
    fn annotation_table() {
        let hints = |r, d, o| ToolAnnotations {
            read_only_hint: r,
            destructive_hint: d,
            idempotent_hint: None,
            open_world_hint: o,
        };
        // (annotations, trusted, expected)
        let table = [
            (
                hints(None, None, None),
                true,
                CapabilitySet::of(&[Destructive, External]),
            ),
            (
                hints(None, None, None),
                false,
                CapabilitySet::of(&[Destructive, External]),
            ),
            (
                hints(Some(true), None, None),
                true,
                CapabilitySet::of(&[ReadOnly, External]),
            ),
            (
                hints(Some(true), None, Some(false)),
                true,
                CapabilitySet::of(&[ReadOnly]),
            ),
            (
                hints(Some(true), None, Some(false)),
                false,
                CapabilitySet::of(&[Destructive, External]),
            ),
            (
                hints(Some(false), Some(false), None),
                true,
                CapabilitySet::of(&[Write, External]),
            ),
            (
                hints(Some(false), Some(false), Some(false)),
                true,
                CapabilitySet::of(&[Write]),
            ),
            (
                hints(Some(false), Some(false), Some(false)),
                false,
                CapabilitySet::of(&[Destructive, External]),
            ),
            (
                hints(Some(false), Some(true), Some(true)),
                false,
                CapabilitySet::of(&[Destructive, External]),
            ),
            // read-only wins over a destructive hint (the spec: destructiveHint is meaningful only
            // when not read-only)
            (
                hints(Some(true), Some(true), Some(false)),
                true,
                CapabilitySet::of(&[ReadOnly]),
            ),
        ];
        for (annotations, trusted, expected) in table {
            assert_eq!(
                classes_from_annotations(&annotations, trusted),
                expected,
                "{annotations:?} trusted={trusted}"
            );
        }
    }

    #[test]
    fn empty_declared_fails_closed() {
        assert_eq!(
            normalise_declared(CapabilitySet::EMPTY),
            CapabilitySet::of(&[Destructive, External])
        );
        assert_eq!(
            normalise_declared(CapabilitySet::of(&[External])),
            CapabilitySet::of(&[Destructive, External])
        );
        assert_eq!(
            normalise_declared(CapabilitySet::of(&[ReadOnly])),
            CapabilitySet::of(&[ReadOnly])
        );
    }
}
