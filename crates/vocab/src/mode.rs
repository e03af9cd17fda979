//! The permission mode (`[permissions] mode`, `--permission-mode`): how much runs without asking.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capability::{CapabilityClass, CapabilitySet};

/// The approval mode (`[permissions] mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PermissionMode {
    /// Read-only tools run; anything else asks (the default).
    #[default]
    #[serde(rename = "ask")]
    Ask,
    /// Read-only tools run; anything else is denied.
    #[serde(rename = "read-only")]
    ReadOnly,
    /// Whatever policy admits runs, except the always-ask classes.
    #[serde(rename = "auto")]
    Auto,
}

impl PermissionMode {
    /// Every mode, from the default to the loosest.
    pub const ALL: [Self; 3] = [Self::Ask, Self::ReadOnly, Self::Auto];

    /// Every name, in the order of [`PermissionMode::ALL`].
    pub const NAMES: &'static [&'static str] = &["ask", "read-only", "auto"];

    /// The name used in config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::ReadOnly => "read-only",
            Self::Auto => "auto",
        }
    }

    /// The mode of a name as written in config, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == name)
    }

    /// Higher is stricter: `auto` < `ask` < `read-only`.
    fn strictness(self) -> u8 {
        match self {
            Self::Auto => 0,
            Self::Ask => 1,
            Self::ReadOnly => 2,
        }
    }

    /// The stricter of the two modes.
    #[must_use]
    pub fn stricter(self, other: Self) -> Self {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }

    /// The host's ceiling for this mode: `read-only` admits `read_only` + `external`, the other
    /// modes admit every class (they differ in what they ask about, not in what they admit).
    pub fn ceiling(self) -> CapabilitySet {
        match self {
            Self::ReadOnly => {
                CapabilitySet::of(&[CapabilityClass::ReadOnly, CapabilityClass::External])
            }
            Self::Ask | Self::Auto => CapabilitySet::ALL,
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_mode_keeps_its_spelling_in_serde_display_and_names() {
        for (mode, name) in PermissionMode::ALL.into_iter().zip(PermissionMode::NAMES) {
            assert_eq!(mode.as_str(), *name);
            assert_eq!(mode.to_string(), *name);
            assert_eq!(PermissionMode::from_name(name), Some(mode));
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<PermissionMode>(&json).unwrap(), mode);
        }
        assert_eq!(PermissionMode::default(), PermissionMode::Ask);
        assert_eq!(PermissionMode::from_name("read_only"), None);
        assert!(serde_json::from_str::<PermissionMode>("\"ReadOnly\"").is_err());
    }

    #[test]
    fn the_stricter_mode_wins() {
        use PermissionMode::*;
        assert_eq!(Auto.stricter(Ask), Ask);
        assert_eq!(Ask.stricter(Auto), Ask);
        assert_eq!(Ask.stricter(ReadOnly), ReadOnly);
        assert_eq!(ReadOnly.stricter(Auto), ReadOnly);
    }

    #[test]
    fn read_only_caps_the_classes_and_the_others_admit_all() {
        assert_eq!(
            PermissionMode::ReadOnly.ceiling(),
            CapabilitySet::of(&[CapabilityClass::ReadOnly, CapabilityClass::External])
        );
        assert_eq!(PermissionMode::Ask.ceiling(), CapabilitySet::ALL);
        assert_eq!(PermissionMode::Auto.ceiling(), CapabilitySet::ALL);
    }
}
