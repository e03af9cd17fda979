//! Capability classes (`read_only`, `write`, `destructive`, `external`) and how a tool's are derived.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One capability class.
///
/// Every tool has exactly one *effect* class (`read_only`, `write` or `destructive`) and may also
/// be `external` (it reaches beyond the host: network, other systems — MCP's `openWorldHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapabilityClass {
    /// Reads only; changes nothing.
    ReadOnly,
    /// Changes state additively (not destructive).
    Write,
    /// May delete or overwrite.
    Destructive,
    /// Talks to the world outside the host.
    External,
}

impl CapabilityClass {
    /// Every class, in a fixed order.
    pub const ALL: [Self; 4] = [
        Self::ReadOnly,
        Self::Write,
        Self::Destructive,
        Self::External,
    ];

    /// The name used in config, audit and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Write => "write",
            Self::Destructive => "destructive",
            Self::External => "external",
        }
    }

    /// Parses a class name as written in config.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == text)
    }

    fn bit(self) -> u8 {
        match self {
            Self::ReadOnly => 1,
            Self::Write => 2,
            Self::Destructive => 4,
            Self::External => 8,
        }
    }
}

impl fmt::Display for CapabilityClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CapabilityClass {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CapabilityClass {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown capability class \"{text}\" (expected read_only, write, destructive or external)"
            ))
        })
    }
}

/// A set of capability classes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CapabilitySet {
    bits: u8,
}

impl CapabilitySet {
    /// No class.
    pub const EMPTY: Self = Self { bits: 0 };
    /// Every class.
    pub const ALL: Self = Self { bits: 15 };
    /// Only `read_only`: what a tool that changes nothing declares.
    pub const READ_ONLY: Self = Self { bits: 1 };

    /// The set of the given classes.
    pub fn of(classes: &[CapabilityClass]) -> Self {
        classes
            .iter()
            .fold(Self::EMPTY, |set, &class| set.with(class))
    }

    /// This set plus `class`.
    #[must_use]
    pub fn with(self, class: CapabilityClass) -> Self {
        Self {
            bits: self.bits | class.bit(),
        }
    }

    /// Whether `class` is in the set.
    pub fn contains(self, class: CapabilityClass) -> bool {
        self.bits & class.bit() != 0
    }

    /// Classes in both sets.
    #[must_use]
    pub fn intersection(self, other: Self) -> Self {
        Self {
            bits: self.bits & other.bits,
        }
    }

    /// Classes in either set.
    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self {
            bits: self.bits | other.bits,
        }
    }

    /// Classes of `self` not in `other`.
    #[must_use]
    pub fn difference(self, other: Self) -> Self {
        Self {
            bits: self.bits & !other.bits,
        }
    }

    /// Whether every class of `self` is in `other`.
    pub fn is_subset(self, other: Self) -> bool {
        self.difference(other).is_empty()
    }

    /// Whether the set has no class.
    pub fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// Whether the tool's effect is reading only: it has `read_only` and neither `write` nor
    /// `destructive` (it may also be `external`).
    pub fn is_read_only(self) -> bool {
        self.contains(CapabilityClass::ReadOnly)
            && !self.contains(CapabilityClass::Write)
            && !self.contains(CapabilityClass::Destructive)
    }

    /// The classes in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = CapabilityClass> {
        CapabilityClass::ALL
            .into_iter()
            .filter(move |class| self.contains(*class))
    }

    /// Comma-separated names (`read_only,external`), the form stored in the audit trail.
    pub fn to_names(self) -> String {
        self.iter()
            .map(CapabilityClass::as_str)
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Debug for CapabilitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for CapabilitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("(none)")
        } else {
            f.write_str(&self.to_names())
        }
    }
}

impl FromIterator<CapabilityClass> for CapabilitySet {
    fn from_iter<I: IntoIterator<Item = CapabilityClass>>(iter: I) -> Self {
        iter.into_iter().fold(Self::EMPTY, Self::with)
    }
}

impl Serialize for CapabilitySet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for CapabilitySet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<CapabilityClass>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

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

    #[test]
    fn read_only_means_no_write_effect() {
        assert!(CapabilitySet::of(&[ReadOnly, External]).is_read_only());
        assert!(!CapabilitySet::of(&[ReadOnly, Write]).is_read_only());
        assert!(!CapabilitySet::of(&[External]).is_read_only());
    }
}
