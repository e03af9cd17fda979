//! Parses a SKILL.md: the `---` YAML frontmatter and the body, with strict, line-numbered errors,
//! size limits and a ban on bidirectional and invisible Unicode.

use serde_json::{Map, Value};

use crate::unicode::{self, SuspiciousChar};

/// A skill name: 1–64 characters of `[a-z0-9-]`, no leading, trailing or doubled hyphen.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// A description: 1–1024 characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The frontmatter block (between the `---` lines): at most 16 KiB.
pub(crate) const MAX_FRONTMATTER_BYTES: usize = 16 * 1024;
/// The body of a local skill: at most 128 KiB. A skill body is instructions for the model; long
/// reference material belongs in the skill's resource files, read on demand.
pub const MAX_BODY_BYTES: usize = 128 * 1024;
/// The body of a remote (MCP) skill: at most 64 KiB.
pub(crate) const MAX_REMOTE_BODY_BYTES: usize = 64 * 1024;

/// Limits a SKILL.md is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkillLimits {
    pub max_description_chars: usize,
    pub max_frontmatter_bytes: usize,
    pub max_body_bytes: usize,
}

impl SkillLimits {
    /// Limits for skills on this machine.
    pub const LOCAL: Self = Self {
        max_description_chars: MAX_DESCRIPTION_CHARS,
        max_frontmatter_bytes: MAX_FRONTMATTER_BYTES,
        max_body_bytes: MAX_BODY_BYTES,
    };
    /// Tighter limits for skills published by MCP servers.
    pub const REMOTE: Self = Self {
        max_description_chars: MAX_DESCRIPTION_CHARS,
        max_frontmatter_bytes: MAX_FRONTMATTER_BYTES,
        max_body_bytes: MAX_REMOTE_BODY_BYTES,
    };

    /// The most bytes a whole SKILL.md may have under these limits (frontmatter, delimiters, body).
    pub fn max_file_bytes(&self) -> usize {
        self.max_frontmatter_bytes + self.max_body_bytes + 64
    }
}

impl Default for SkillLimits {
    fn default() -> Self {
        Self::LOCAL
    }
}

/// The frontmatter of a SKILL.md: the fields warden reads, plus every field as written.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    /// `allowed-tools`, split into entries. Never grants anything by itself.
    pub allowed_tools: Vec<String>,
    pub license: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    /// Every field as written, in file order (including the ones above and unknown ones).
    pub fields: Map<String, Value>,
}

/// A parsed SKILL.md.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkillDocument {
    pub frontmatter: Frontmatter,
    /// The instructions after the closing `---` line.
    pub body: String,
    /// The 1-based line where the body starts.
    pub body_line: usize,
}

/// Why a SKILL.md was refused. Every variant that has a place says its 1-based line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SkillMdError {
    #[error("line {line}: the file is not valid UTF-8")]
    NotUtf8 { line: usize },
    #[error("the file is {bytes} bytes, over the {max}-byte limit for a SKILL.md")]
    FileTooLarge { bytes: usize, max: usize },
    #[error("line 1: missing frontmatter: a SKILL.md must start with a `---` line")]
    MissingFrontmatter,
    #[error("line {line}: the frontmatter opened on line 1 is never closed by a `---` line")]
    UnterminatedFrontmatter { line: usize },
    #[error("line {line}: the frontmatter is {bytes} bytes, over the limit of {max}")]
    FrontmatterTooLarge {
        line: usize,
        bytes: usize,
        max: usize,
    },
    #[error("line {line}: malformed YAML frontmatter: {message}")]
    MalformedYaml { line: usize, message: String },
    #[error("line {line}: the frontmatter must be a mapping of fields")]
    NotAMapping { line: usize },
    #[error("line {line}: the required field `{field}` is missing")]
    MissingField { field: &'static str, line: usize },
    #[error("line {line}: the field `{field}` must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
        line: usize,
    },
    #[error("line {line}: invalid name {name:?}: {reason}")]
    InvalidName {
        name: String,
        reason: &'static str,
        line: usize,
    },
    #[error("line {line}: the description is empty")]
    EmptyDescription { line: usize },
    #[error("line {line}: the description is {chars} characters, over the limit of {max}")]
    DescriptionTooLong {
        line: usize,
        chars: usize,
        max: usize,
    },
    #[error("line {line}: the body is {bytes} bytes, over the limit of {max}")]
    BodyTooLarge {
        line: usize,
        bytes: usize,
        max: usize,
    },
    #[error("suspicious Unicode: {}", list_findings(.found))]
    SuspiciousUnicode { found: Vec<SuspiciousChar> },
}

fn list_findings(found: &[SuspiciousChar]) -> String {
    found
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl SkillMdError {
    /// The 1-based line the error is about, when it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::NotUtf8 { line }
            | Self::UnterminatedFrontmatter { line }
            | Self::FrontmatterTooLarge { line, .. }
            | Self::MalformedYaml { line, .. }
            | Self::NotAMapping { line }
            | Self::MissingField { line, .. }
            | Self::WrongType { line, .. }
            | Self::InvalidName { line, .. }
            | Self::EmptyDescription { line }
            | Self::DescriptionTooLong { line, .. }
            | Self::BodyTooLarge { line, .. } => Some(*line),
            Self::MissingFrontmatter => Some(1),
            Self::SuspiciousUnicode { found } => found.first().map(|f| f.line),
            Self::FileTooLarge { .. } => None,
        }
    }
}

/// Parses SKILL.md bytes under the local limits.
pub fn parse_skill_md(bytes: &[u8]) -> Result<SkillDocument, SkillMdError> {
    parse_skill_md_with(bytes, &SkillLimits::LOCAL)
}

/// Parses SKILL.md bytes under `limits`.
pub fn parse_skill_md_with(
    bytes: &[u8],
    limits: &SkillLimits,
) -> Result<SkillDocument, SkillMdError> {
    if bytes.len() > limits.max_file_bytes() {
        return Err(SkillMdError::FileTooLarge {
            bytes: bytes.len(),
            max: limits.max_file_bytes(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|error| SkillMdError::NotUtf8 {
        line: line_of_byte(bytes, error.valid_up_to()),
    })?;
    let found = unicode::scan(text, 1, true);
    if !found.is_empty() {
        return Err(SkillMdError::SuspiciousUnicode { found });
    }
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let (yaml, body, closing_line) = split_frontmatter(text)?;
    if yaml.len() > limits.max_frontmatter_bytes {
        return Err(SkillMdError::FrontmatterTooLarge {
            line: 2,
            bytes: yaml.len(),
            max: limits.max_frontmatter_bytes,
        });
    }
    let body_line = closing_line + 1;
    if body.len() > limits.max_body_bytes {
        return Err(SkillMdError::BodyTooLarge {
            line: body_line,
            bytes: body.len(),
            max: limits.max_body_bytes,
        });
    }
    let fields = parse_yaml_mapping(yaml)?;
    let frontmatter = read_fields(yaml, fields, closing_line, limits)?;
    Ok(SkillDocument {
        frontmatter,
        body: body.to_owned(),
        body_line,
    })
}

/// Splits `---\n<yaml>\n---\n<body>`; returns the YAML, the body and the closing line's number.
fn split_frontmatter(text: &str) -> Result<(&str, &str, usize), SkillMdError> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if !is_delimiter(first) {
        return Err(SkillMdError::MissingFrontmatter);
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    let mut line_number = 1;
    for line in lines {
        line_number += 1;
        if is_delimiter(line) {
            let yaml = &text[yaml_start..offset];
            let body = &text[offset + line.len()..];
            return Ok((yaml, body, line_number));
        }
        offset += line.len();
    }
    Err(SkillMdError::UnterminatedFrontmatter { line: line_number })
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r'])
        .trim_end_matches([' ', '\t'])
        == "---"
}

fn line_of_byte(bytes: &[u8], index: usize) -> usize {
    1 + bytes[..index.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

fn parse_yaml_mapping(yaml: &str) -> Result<Map<String, Value>, SkillMdError> {
    if yaml.trim().is_empty() {
        return Err(SkillMdError::MissingField {
            field: "name",
            line: 2,
        });
    }
    let value: Value = yaml_serde::from_str(yaml).map_err(|error| {
        let line = error.location().map_or(2, |l| l.line() + 1);
        SkillMdError::MalformedYaml {
            line,
            message: strip_location(&error.to_string()),
        }
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(SkillMdError::NotAMapping { line: 2 }),
    }
}

/// yaml_serde appends "at line N column M" counted inside the frontmatter; our line replaces it.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}

/// The 1-based file line of the top-level key `key` (the frontmatter starts on line 2).
fn key_line(yaml: &str, key: &str, fallback: usize) -> usize {
    for (index, line) in yaml.lines().enumerate() {
        let unquoted = line
            .strip_prefix(key)
            .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
            .or_else(|| line.strip_prefix(&format!("'{key}'")));
        if let Some(rest) = unquoted
            && rest.trim_start().starts_with(':')
        {
            return index + 2;
        }
    }
    fallback
}

/// The 1-based line of the top-level frontmatter field `key` in a SKILL.md, when it is there.
pub(crate) fn field_line(bytes: &[u8], key: &str) -> Option<usize> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(&text);
    let (_, rest) = text.split_once('\n')?;
    let line = key_line(rest, key, 0);
    (line != 0).then_some(line)
}

fn read_fields(
    yaml: &str,
    fields: Map<String, Value>,
    closing_line: usize,
    limits: &SkillLimits,
) -> Result<Frontmatter, SkillMdError> {
    // Escapes such as "\u202E" in quoted YAML decode to characters the raw scan cannot see.
    let mut hidden = Vec::new();
    for (key, value) in &fields {
        let line = key_line(yaml, key, 2);
        collect_hidden(key, line, &mut hidden);
        walk_strings(value, &mut |text| collect_hidden(text, line, &mut hidden));
    }
    if !hidden.is_empty() {
        return Err(SkillMdError::SuspiciousUnicode { found: hidden });
    }

    let string_field = |field: &'static str| -> Result<Option<(String, usize)>, SkillMdError> {
        let line = key_line(yaml, field, 2);
        match fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some((text.clone(), line))),
            Some(_) => Err(SkillMdError::WrongType {
                field: field.to_owned(),
                expected: "a string",
                line,
            }),
        }
    };

    let (name, name_line) = string_field("name")?.ok_or(SkillMdError::MissingField {
        field: "name",
        line: closing_line,
    })?;
    if let Err(reason) = check_name(&name) {
        return Err(SkillMdError::InvalidName {
            name,
            reason,
            line: name_line,
        });
    }
    let (description, description_line) =
        string_field("description")?.ok_or(SkillMdError::MissingField {
            field: "description",
            line: closing_line,
        })?;
    if description.trim().is_empty() {
        return Err(SkillMdError::EmptyDescription {
            line: description_line,
        });
    }
    let chars = description.chars().count();
    if chars > limits.max_description_chars {
        return Err(SkillMdError::DescriptionTooLong {
            line: description_line,
            chars,
            max: limits.max_description_chars,
        });
    }
    let license = string_field("license")?.map(|(text, _)| text);
    let metadata = match fields.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map.clone()),
        Some(_) => {
            return Err(SkillMdError::WrongType {
                field: "metadata".to_owned(),
                expected: "a mapping",
                line: key_line(yaml, "metadata", 2),
            });
        }
    };
    let allowed_tools = match fields.get("allowed-tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => split_tool_list(text),
        Some(Value::Array(items)) => {
            let mut tools = Vec::new();
            for item in items {
                match item {
                    Value::String(text) => tools.extend(split_tool_list(text)),
                    _ => {
                        return Err(SkillMdError::WrongType {
                            field: "allowed-tools".to_owned(),
                            expected: "a string or a list of strings",
                            line: key_line(yaml, "allowed-tools", 2),
                        });
                    }
                }
            }
            tools
        }
        Some(_) => {
            return Err(SkillMdError::WrongType {
                field: "allowed-tools".to_owned(),
                expected: "a string or a list of strings",
                line: key_line(yaml, "allowed-tools", 2),
            });
        }
    };
    Ok(Frontmatter {
        name,
        description,
        allowed_tools,
        license,
        metadata,
        fields,
    })
}

fn collect_hidden(text: &str, line: usize, into: &mut Vec<SuspiciousChar>) {
    if into.len() >= unicode::MAX_FINDINGS {
        return;
    }
    for mut found in unicode::scan(text, 1, false) {
        found.line = line;
        into.push(found);
    }
}

/// Calls `visit` on every string (keys included) inside `value`.
fn walk_strings(value: &Value, visit: &mut dyn FnMut(&str)) {
    match value {
        Value::String(text) => visit(text),
        Value::Array(items) => items.iter().for_each(|item| walk_strings(item, visit)),
        Value::Object(map) => {
            for (key, item) in map {
                visit(key);
                walk_strings(item, visit);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Checks a skill name: 1–64 of `[a-z0-9-]`, no leading, trailing or doubled hyphen.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a name must not be empty");
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err("a name has at most 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("a name uses only lowercase letters a-z, digits and hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("a name must not start or end with a hyphen");
    }
    if name.contains("--") {
        return Err("a name must not contain two hyphens in a row");
    }
    Ok(())
}

/// Splits `allowed-tools` text on whitespace and commas outside parentheses:
/// `Read, Bash(git add:*) Grep` → `Read`, `Bash(git add:*)`, `Grep`.
pub fn split_tool_list(text: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for ch in text.chars() {
        match ch {
            '(' => {
                depth += 1;
                current.push(ch);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(ch);
            }
            ',' | ' ' | '\t' | '\n' | '\r' if depth == 0 => {
                if !current.is_empty() {
                    tools.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(ch),
        }
    }
    if !current.is_empty() {
        tools.push(current);
    }
    tools
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_fields_body_and_unknown_keys() {
        let text = "---\nname: pdf-tools\ndescription: Work with PDFs\nallowed-tools: Read, Bash(git add:*) Grep\nlicense: MIT\nmetadata:\n  version: 2\nx-custom: [1, 2]\n---\n# Body\nDo things.\n";
        let doc = parse_skill_md(text.as_bytes()).unwrap();
        let fm = &doc.frontmatter;
        assert_eq!(fm.name, "pdf-tools");
        assert_eq!(fm.description, "Work with PDFs");
        assert_eq!(fm.allowed_tools, ["Read", "Bash(git add:*)", "Grep"]);
        assert_eq!(fm.license.as_deref(), Some("MIT"));
        assert_eq!(fm.metadata.as_ref().unwrap()["version"], 2);
        assert_eq!(fm.fields["x-custom"], serde_json::json!([1, 2]));
        assert_eq!(doc.body, "# Body\nDo things.\n");
        assert_eq!(doc.body_line, 10);
    }

    #[test]
    fn crlf_and_a_leading_bom_are_accepted() {
        let text = "\u{FEFF}---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n";
        let doc = parse_skill_md(text.as_bytes()).unwrap();
        assert_eq!(doc.frontmatter.name, "a");
        assert_eq!(doc.body, "body\r\n");
    }

    #[test]
    fn list_form_of_allowed_tools() {
        let text = "---\nname: a\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(ls)\n---\n";
        let doc = parse_skill_md(text.as_bytes()).unwrap();
        assert_eq!(doc.frontmatter.allowed_tools, ["Read", "Bash(ls)"]);
    }

    #[test]
    fn name_rules() {
        for good in ["a", "pdf-2", &"x".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "A",
            "a_b",
            "a.b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn yaml_errors_carry_the_file_line() {
        let text = "---\nname: a\ndescription: d\nbad: [unclosed\n---\nbody\n";
        let error = parse_skill_md(text.as_bytes()).unwrap_err();
        assert!(
            matches!(error, SkillMdError::MalformedYaml { line, .. } if line >= 4),
            "{error:?}"
        );
    }

    #[test]
    fn wrong_types_name_the_field_and_line() {
        let text = "---\nname: a\ndescription: [1]\n---\n";
        let error = parse_skill_md(text.as_bytes()).unwrap_err();
        assert_eq!(
            error,
            SkillMdError::WrongType {
                field: "description".into(),
                expected: "a string",
                line: 3
            }
        );
    }
}

#[cfg(test)]
mod hostile_yaml_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn alias_expansion_bombs_are_refused() {
        let mut yaml =
            String::from("---\nname: a\ndescription: d\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let prev = level - 1;
            yaml.push_str(&format!(
                "l{level}: &l{level} [*l{prev}, *l{prev}, *l{prev}, *l{prev}, *l{prev}, *l{prev}, *l{prev}, *l{prev}, *l{prev}]\n"
            ));
        }
        yaml.push_str("---\n");
        let error = parse_skill_md(yaml.as_bytes()).unwrap_err();
        assert!(
            matches!(error, SkillMdError::MalformedYaml { .. }),
            "{error}"
        );
    }

    #[test]
    fn error_messages_name_the_line() {
        let error = parse_skill_md(b"---\nname: a\ndescription: [x\n---\n").unwrap_err();
        println!("{error}");
        assert!(error.to_string().starts_with("line "));
    }
}
