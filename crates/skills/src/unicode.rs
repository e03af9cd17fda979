//! Finds bidirectional controls and invisible characters that could hide text from a reviewer.

use std::fmt;

/// Why a character is suspicious.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuspiciousClass {
    /// Reorders displayed text: embeddings, overrides, isolates, marks (U+202A–202E, U+2066–2069,
    /// U+200E, U+200F, U+061C).
    Bidirectional,
    /// Renders as nothing: zero-width spaces and joiners, word joiner, invisible operators, soft
    /// hyphen, a byte-order mark after the start, Mongolian vowel separator.
    Invisible,
    /// Unicode tag characters (U+E0000–E007F), which can carry a hidden ASCII message.
    Tag,
}

/// One suspicious character and where it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SuspiciousChar {
    /// The code point, e.g. `0x202E`.
    pub code_point: u32,
    /// 1-based line in the scanned file.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    pub class: SuspiciousClass,
}

impl SuspiciousChar {
    /// `U+202E`.
    pub fn code_point_label(&self) -> String {
        format!("U+{:04X}", self.code_point)
    }
}

impl fmt::Display for SuspiciousChar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.class {
            SuspiciousClass::Bidirectional => "bidirectional control",
            SuspiciousClass::Invisible => "invisible character",
            SuspiciousClass::Tag => "tag character",
        };
        write!(
            f,
            "{} ({class}) at line {}, column {}",
            self.code_point_label(),
            self.line,
            self.column
        )
    }
}

/// The class of `ch` when it is suspicious. A byte-order mark is judged by the caller's position.
pub(crate) fn classify(ch: char) -> Option<SuspiciousClass> {
    match ch {
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => Some(SuspiciousClass::Bidirectional),
        '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{00AD}'
        | '\u{180E}'
        | '\u{034F}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}'
        | '\u{206A}'..='\u{206F}' => Some(SuspiciousClass::Invisible),
        '\u{E0000}'..='\u{E007F}' => Some(SuspiciousClass::Tag),
        _ => None,
    }
}

/// At most this many findings are kept per scan (the first ones, in text order).
pub(crate) const MAX_FINDINGS: usize = 64;

/// Every suspicious character of `text`, whose first line is `first_line` (1-based). A
/// byte-order mark as the very first character of a file is allowed when `bom_allowed`.
pub fn scan(text: &str, first_line: usize, bom_allowed: bool) -> Vec<SuspiciousChar> {
    let mut found = Vec::new();
    let mut line = first_line;
    let mut column = 0usize;
    for (index, ch) in text.chars().enumerate() {
        if ch == '\n' {
            line += 1;
            column = 0;
            continue;
        }
        column += 1;
        if index == 0 && bom_allowed && ch == '\u{FEFF}' {
            continue;
        }
        if let Some(class) = classify(ch) {
            found.push(SuspiciousChar {
                code_point: u32::from(ch),
                line,
                column,
                class,
            });
            if found.len() >= MAX_FINDINGS {
                break;
            }
        }
    }
    found
}

/// Whether `text` holds any suspicious character (the fuzz target checks parsed documents
/// with it).
pub fn has_suspicious(text: &str) -> bool {
    text.chars().any(|ch| classify(ch).is_some())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn reports_code_point_line_and_column() {
        let found = scan("ok\nab\u{202E}c\n", 1, false);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].code_point_label(), "U+202E");
        assert_eq!((found[0].line, found[0].column), (2, 3));
        assert_eq!(found[0].class, SuspiciousClass::Bidirectional);
    }

    #[test]
    fn a_leading_bom_is_allowed_only_when_asked() {
        assert!(scan("\u{FEFF}text", 1, true).is_empty());
        assert_eq!(scan("\u{FEFF}text", 1, false).len(), 1);
        assert_eq!(scan("te\u{FEFF}xt", 1, true)[0].code_point, 0xFEFF);
    }

    #[test]
    fn plain_text_and_ordinary_unicode_pass() {
        assert!(scan("héllo — 東京 ✓ \t tabs", 1, false).is_empty());
    }
}
