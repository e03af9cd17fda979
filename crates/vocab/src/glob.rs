//! The one glob over public tool names, used by `[permissions]`, authorization rules, hook matchers and the `--allowed-tools`/`--disallowed-tools` flags.
//!
//! Grammar: one or more of `[A-Za-z0-9_-]` (the characters of a public tool name) and the
//! wildcards `*` (any run of characters, also none) and `?` (exactly one). Nothing else — no
//! blanks, no character classes, no escapes — so a pattern that could never match a public name
//! (`mcp.fs.*`, `mcp__fs__[ab]`, `" mcp__fs__*"`) is refused instead of quietly matching nothing.
//! A pattern matches the whole name, case-sensitively.
//!
//! A command-line flag carries a list: patterns separated by commas, blanks around each pattern
//! ignored, empty items skipped ([`ToolGlob::parse_list`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The grammar as a JSON Schema `pattern` (the generated config schema carries it).
pub const GLOB_SCHEMA_PATTERN: &str = "^[A-Za-z0-9_*?-]+$";

const EXPECTED: &str =
    "a pattern over public tool names of letters, digits, `_`, `-` and the wildcards `*` and `?`";

/// Why a tool pattern was refused. The message says what is expected and what was given
/// (config diagnostics print it after "expected").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolGlobError {
    /// The pattern was empty.
    #[error("{EXPECTED}, not an empty string")]
    Empty,
    /// The pattern held a character no public tool name has and that is not a wildcard.
    #[error("{EXPECTED}, not \"{pattern}\" ({character:?} is not allowed)")]
    Character {
        /// The pattern as given.
        pattern: String,
        /// Its first refused character.
        character: char,
    },
}

/// A validated glob over public tool names (`mcp__github__*`, `read_?ile`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ToolGlob(String);

impl ToolGlob {
    /// Checks one pattern against the grammar.
    pub fn parse(pattern: &str) -> Result<Self, ToolGlobError> {
        if pattern.is_empty() {
            return Err(ToolGlobError::Empty);
        }
        if let Some(character) = pattern.chars().find(|c| !is_pattern_char(*c)) {
            return Err(ToolGlobError::Character {
                pattern: pattern.to_owned(),
                character,
            });
        }
        Ok(Self(pattern.to_owned()))
    }

    /// Parses a comma-separated list (`--allowed-tools 'mcp__a__*, mcp__b__x'`): blanks around
    /// each item are ignored and empty items skipped; every item must be a pattern.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, ToolGlobError> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Self::parse)
            .collect()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` (a public tool name like `mcp__fs__write_file`) matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let pattern = self.0.as_bytes();
        let name = name.as_bytes();
        let (mut p, mut n) = (0, 0);
        // The last `*` seen and the name position it was tried at, to backtrack to.
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match pattern.get(p) {
                Some(b'*') => {
                    star = Some((p, n));
                    p += 1;
                }
                Some(&c) if c == b'?' || c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match star {
                    Some((star_p, star_n)) => {
                        p = star_p + 1;
                        n = star_n + 1;
                        star = Some((star_p, star_n + 1));
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == b'*')
    }

    /// Whether any of `globs` matches `name`.
    pub fn any_matches(globs: &[Self], name: &str) -> bool {
        globs.iter().any(|glob| glob.matches(name))
    }
}

fn is_pattern_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?')
}

impl FromStr for ToolGlob {
    type Err = ToolGlobError;

    fn from_str(pattern: &str) -> Result<Self, Self::Err> {
        Self::parse(pattern)
    }
}

impl fmt::Debug for ToolGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ToolGlob({:?})", self.0)
    }
}

impl fmt::Display for ToolGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ToolGlob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ToolGlob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn glob(pattern: &str) -> ToolGlob {
        ToolGlob::parse(pattern).unwrap()
    }

    #[test]
    fn globs_match_whole_names_with_star_and_question_mark() {
        let table: &[(&str, &str, bool)] = &[
            ("mcp__fs__*", "mcp__fs__write_file", true),
            ("mcp__fs__*", "mcp__fs__", true),
            ("mcp__fs__*", "mcp__fsx__read", false),
            ("mcp__fs__write_file", "mcp__fs__write_file", true),
            ("mcp__fs__write_file", "mcp__fs__write_files", false),
            ("*write*", "mcp__fs__write_file", true),
            ("*write*", "mcp__fs__read_file", false),
            ("mcp__?s__read_file", "mcp__fs__read_file", true),
            ("mcp__?s__read_file", "mcp__s__read_file", false),
            ("read_?ile", "read_ile", false),
            ("a*b*c", "aXXbYYbc", true),
            ("a*b*c", "aXXbYYbcd", false),
            ("a*b*c", "abcbc", true),
            ("*__*__*", "mcp__gh__list", true),
            ("Mcp__*", "mcp__gh__list", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*", "", true),
            ("**", "anything", true),
        ];
        for (pattern, name, expected) in table {
            assert_eq!(
                glob(pattern).matches(name),
                *expected,
                "{pattern} vs {name}"
            );
        }
        assert!(ToolGlob::any_matches(
            &[glob("mcp__a__*"), glob("bash")],
            "bash"
        ));
        assert!(!ToolGlob::any_matches(&[], "bash"));
    }

    #[test]
    fn the_grammar_accepts_name_characters_and_wildcards() {
        for good in [
            "*",
            "?",
            "bash",
            "mcp__fs__*",
            "mcp__gh-1__get_?ssue",
            "A-Z_09",
        ] {
            assert_eq!(glob(good).as_str(), good);
            assert_eq!(good.parse::<ToolGlob>().unwrap(), glob(good));
        }
    }

    #[test]
    fn the_grammar_refuses_everything_else_and_says_what_is_expected() {
        assert_eq!(
            ToolGlob::parse("").unwrap_err().to_string(),
            "a pattern over public tool names of letters, digits, `_`, `-` and the wildcards `*` and `?`, not an empty string"
        );
        assert_eq!(
            ToolGlob::parse("mcp__fs__[ab]").unwrap_err().to_string(),
            "a pattern over public tool names of letters, digits, `_`, `-` and the wildcards `*` and `?`, not \"mcp__fs__[ab]\" ('[' is not allowed)"
        );
        let refused: &[(&str, char)] = &[
            ("mcp fs", ' '),
            (" mcp__fs__*", ' '),
            ("mcp__fs__*\t", '\t'),
            ("mcp.fs", '.'),
            ("a/b", '/'),
            ("x{y}", '{'),
            ("a,b", ','),
            ("é", 'é'),
            ("mcp__fs__\\*", '\\'),
        ];
        for (pattern, character) in refused {
            assert_eq!(
                ToolGlob::parse(pattern),
                Err(ToolGlobError::Character {
                    pattern: (*pattern).to_owned(),
                    character: *character,
                }),
                "{pattern:?}"
            );
        }
    }

    #[test]
    fn lists_split_on_commas_ignore_blanks_and_refuse_a_bad_item() {
        let list = ToolGlob::parse_list("mcp__a__*, mcp__b__x,,").unwrap();
        let texts: Vec<&str> = list.iter().map(ToolGlob::as_str).collect();
        assert_eq!(texts, ["mcp__a__*", "mcp__b__x"]);
        assert_eq!(ToolGlob::parse_list(" , ").unwrap(), []);
        assert_eq!(
            ToolGlob::parse_list("mcp__a__*,mcp.b"),
            Err(ToolGlobError::Character {
                pattern: "mcp.b".into(),
                character: '.',
            })
        );
    }

    #[test]
    fn globs_round_trip_through_serde_and_refuse_bad_patterns() {
        let json = serde_json::to_string(&glob("mcp__fs__*")).unwrap();
        assert_eq!(json, "\"mcp__fs__*\"");
        assert_eq!(
            serde_json::from_str::<ToolGlob>(&json).unwrap(),
            glob("mcp__fs__*")
        );
        let error = serde_json::from_str::<ToolGlob>("\"mcp.fs\"").unwrap_err();
        assert!(error.to_string().contains("'.' is not allowed"), "{error}");
    }

    #[test]
    fn the_schema_pattern_describes_the_same_characters() {
        assert_eq!(GLOB_SCHEMA_PATTERN, "^[A-Za-z0-9_*?-]+$");
        for c in (0u8..=127).map(char::from) {
            let in_class = c.is_ascii_alphanumeric() || "_*?-".contains(c);
            assert_eq!(is_pattern_char(c), in_class, "{c:?}");
        }
    }
}
