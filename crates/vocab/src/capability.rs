//! Capability classes (`read_only`, `write`, `destructive`, `external`) and sets of them.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One capability class a tool may exercise.
///
/// Every tool has exactly one *effect* class (`read_only`, `write` or `destructive`) and may also
/// be `external` (it reaches beyond the host: network, other systems — MCP's `openWorldHint`).
/// The snake_case name is the one config files (`always_ask`, `policy.capabilities`), the audit
/// trail and JSON use.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(
    rename = "Capability",
    description = "A capability class a tool may exercise."
)]
pub enum CapabilityClass {
    // Reads only; changes nothing. (Plain comments on the variants: a doc comment would change
    // the generated config schema.)
    ReadOnly,
    // Changes state additively (not destructive).
    Write,
    // May delete or overwrite.
    Destructive,
    // Talks to the world outside the host.
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

    /// Every name, in the order of [`CapabilityClass::ALL`].
    pub const NAMES: &'static [&'static str] = &["read_only", "write", "destructive", "external"];

    /// The name used in config, audit and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Write => "write",
            Self::Destructive => "destructive",
            Self::External => "external",
        }
    }

    /// The class of a name as written in config, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use CapabilityClass::*;

    #[test]
    fn every_class_keeps_its_spelling_in_serde_display_and_names() {
        for (class, name) in CapabilityClass::ALL.into_iter().zip(CapabilityClass::NAMES) {
            assert_eq!(class.as_str(), *name);
            assert_eq!(class.to_string(), *name);
            assert_eq!(CapabilityClass::from_name(name), Some(class));
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<CapabilityClass>(&json).unwrap(),
                class
            );
        }
        assert_eq!(CapabilityClass::from_name("read-only"), None);
        assert!(serde_json::from_str::<CapabilityClass>("\"ReadOnly\"").is_err());
    }

    #[test]
    fn sets_round_trip_as_lists_of_names() {
        let set = CapabilitySet::of(&[External, ReadOnly]);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["read_only","external"]"#);
        assert_eq!(serde_json::from_str::<CapabilitySet>(&json).unwrap(), set);
        assert_eq!(set.to_names(), "read_only,external");
        assert_eq!(set.to_string(), "read_only,external");
        assert_eq!(CapabilitySet::EMPTY.to_string(), "(none)");
    }

    #[test]
    fn read_only_means_no_write_effect() {
        assert!(CapabilitySet::of(&[ReadOnly, External]).is_read_only());
        assert!(!CapabilitySet::of(&[ReadOnly, Write]).is_read_only());
        assert!(!CapabilitySet::of(&[External]).is_read_only());
    }
}
