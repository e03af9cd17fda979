//! A tiny glob over tool names: `*` matches any run of characters, `?` exactly one.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern was empty (or only whitespace).
    #[error("a tool pattern must not be empty")]
    Empty,
    /// The pattern held whitespace or a control character, which no tool name contains.
    #[error("tool pattern \"{0}\" contains whitespace or a control character")]
    InvalidCharacter(String),
}

/// A validated glob over public tool names (`mcp__github__*`, `read_?ile`).
///
/// Matching is over the whole name and case-sensitive; there are no character classes or
/// escapes, because public tool names are `[A-Za-z0-9_-]` only.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Checks and wraps a pattern.
    pub fn new(text: &str) -> Result<Self, PatternError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        if trimmed.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(PatternError::InvalidCharacter(trimmed.to_owned()));
        }
        Ok(Self {
            text: trimmed.to_owned(),
        })
    }

    /// Parses a comma-separated list (the `--allowed-tools a,b` form); empty items are skipped.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, PatternError> {
        text.split(',')
            .filter(|item| !item.trim().is_empty())
            .map(Self::new)
            .collect()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let pattern: Vec<char> = self.text.chars().collect();
        let name: Vec<char> = name.chars().collect();
        let (mut p, mut n) = (0, 0);
        // Position of the last `*` seen and the name position it was tried against.
        let mut backtrack: Option<(usize, usize)> = None;
        while n < name.len() {
            match pattern.get(p) {
                Some('*') => {
                    backtrack = Some((p, n));
                    p += 1;
                }
                Some(&c) if c == '?' || c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match backtrack {
                    Some((star, tried)) => {
                        p = star + 1;
                        n = tried + 1;
                        backtrack = Some((star, tried + 1));
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == '*')
    }

    /// Whether any pattern in `patterns` matches `name`.
    pub fn any_matches(patterns: &[Self], name: &str) -> bool {
        patterns.iter().any(|pattern| pattern.matches(name))
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.text)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::new(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn glob_table() {
        let table: &[(&str, &str, bool)] = &[
            ("mcp__fs__*", "mcp__fs__write_file", true),
            ("mcp__fs__*", "mcp__fs__", true),
            ("mcp__fs__*", "mcp__fsx__read", false),
            ("mcp__fs__write_file", "mcp__fs__write_file", true),
            ("mcp__fs__write_file", "mcp__fs__write_files", false),
            ("*write*", "mcp__fs__write_file", true),
            ("*write*", "mcp__fs__read_file", false),
            ("read_?ile", "read_file", true),
            ("read_?ile", "read_ile", false),
            ("*", "", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("a*b*c", "abcbc", true),
            ("*__*__*", "mcp__gh__list", true),
            ("Mcp__*", "mcp__gh__list", false),
        ];
        for (pattern, name, expected) in table {
            assert_eq!(
                Pattern::new(pattern).unwrap().matches(name),
                *expected,
                "{pattern} vs {name}"
            );
        }
    }

    #[test]
    fn refuses_empty_and_whitespace() {
        assert_eq!(Pattern::new("  "), Err(PatternError::Empty));
        assert!(matches!(
            Pattern::new("a b"),
            Err(PatternError::InvalidCharacter(_))
        ));
    }

    #[test]
    fn parses_comma_lists() {
        let list = Pattern::parse_list("mcp__a__*, mcp__b__x,,").unwrap();
        let texts: Vec<&str> = list.iter().map(Pattern::as_str).collect();
        assert_eq!(texts, ["mcp__a__*", "mcp__b__x"]);
    }
}
