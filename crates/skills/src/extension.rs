//! The client side of the SEP-2640 skills extension (`io.modelcontextprotocol/skills`), as pure
//! functions: contract choice, `skills/list` paging, entry validation, and verification of every
//! read against the listed size, `sha256:` digest and frontmatter. Nothing here reads a file:
//! bodies are fetched only when a skill is loaded.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::parse::{SkillLimits, check_name};
use crate::remote::{
    Contract, MAX_REMOTE_FILE_BYTES, Registration, RemoteSkillCandidate, RemoteSkillError,
    RemoteSkillLoad, SkillCommand, is_plain_relative, load_remote, register_commands,
    sha256_digest,
};
use crate::unicode;

/// The extension identifier under `capabilities.extensions`.
pub const SKILLS_EXTENSION_ID: &str = "io.modelcontextprotocol/skills";
/// The draft revision this client implements (logged with each server's negotiation result).
pub const SKILLS_EXTENSION_REVISION: &str = "SEP-2640 draft of 2026-06-09 (spec commit 2e04c48d)";
/// `skills/list` is followed for at most this many pages.
pub const MAX_LIST_PAGES: usize = 64;
/// A skill lists at most this many files.
pub(crate) const MAX_FILES_PER_SKILL: usize = 512;
/// A skill's files add up to at most 16 MiB.
pub(crate) const MAX_SKILL_TOTAL_BYTES: u64 = 16 * 1024 * 1024;

/// Whether server capabilities (the `capabilities` object of `initialize` or `server/discover`)
/// declare the extension.
pub fn server_declares_extension(capabilities: &Value) -> bool {
    capabilities
        .get("extensions")
        .and_then(Value::as_object)
        .is_some_and(|extensions| extensions.contains_key(SKILLS_EXTENSION_ID))
}

/// Which contract serves a server's skills: the extension alone when the operator enabled it and
/// the server declares it (even when its listing turns out empty); otherwise `skill://` resources.
pub fn choose_contract(operator_enabled: bool, capabilities: &Value) -> Contract {
    if operator_enabled && server_declares_extension(capabilities) {
        Contract::Extension
    } else {
        Contract::LegacyResources
    }
}

/// One file of a listed skill.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileEntry {
    pub uri: String,
    pub digest: String,
    pub size: u64,
}

/// A skill as `skills/list` described it, after validation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListedSkill {
    /// The SKILL.md URI.
    pub uri: String,
    pub name: String,
    pub description: String,
    /// The listing's frontmatter, which the fetched file must match field by field.
    pub frontmatter: Map<String, Value>,
    /// The SKILL.md entry.
    pub skill_md: FileEntry,
    /// Every other file, sorted by URI.
    pub files: Vec<FileEntry>,
}

/// `skills/list` could not be followed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ListingError {
    #[error("skills/list page {page}: {message}")]
    MalformedPage { page: usize, message: String },
}

/// What to do after a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextPage {
    /// Ask `skills/list` again with `{"cursor": …}`.
    Fetch(String),
    /// The listing is complete (or was cut, with a warning).
    Done,
}

/// Follows `skills/list` pages: feed each result to [`SkillsListing::accept_page`] until it
/// returns [`NextPage::Done`], then [`SkillsListing::finish`].
#[derive(Debug, Default)]
pub struct SkillsListing {
    pages: usize,
    cursors: BTreeSet<String>,
    raw: Vec<Value>,
    warnings: Vec<String>,
    done: bool,
}

impl SkillsListing {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one `skills/list` result object. Stops at [`MAX_LIST_PAGES`] pages or a repeated
    /// cursor (with a warning), or at the last page.
    pub fn accept_page(&mut self, result: &Value) -> Result<NextPage, ListingError> {
        if self.done {
            return Ok(NextPage::Done);
        }
        self.pages += 1;
        let page = self.pages;
        let skills = result
            .get("skills")
            .and_then(Value::as_array)
            .ok_or_else(|| ListingError::MalformedPage {
                page,
                message: "the result has no `skills` array".to_owned(),
            })?;
        self.raw.extend(skills.iter().cloned());
        let cursor = match result.get("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) if cursor.is_empty() => None,
            Some(Value::String(cursor)) => Some(cursor.clone()),
            Some(_) => {
                return Err(ListingError::MalformedPage {
                    page,
                    message: "`nextCursor` is not a string".to_owned(),
                });
            }
        };
        let Some(cursor) = cursor else {
            self.done = true;
            return Ok(NextPage::Done);
        };
        if !self.cursors.insert(cursor.clone()) {
            self.warnings.push(format!(
                "skills/list repeated the cursor {cursor:?} on page {page}; the listing stops there"
            ));
            self.done = true;
            return Ok(NextPage::Done);
        }
        if self.pages >= MAX_LIST_PAGES {
            self.warnings.push(format!(
                "skills/list has more than {MAX_LIST_PAGES} pages; the rest is ignored"
            ));
            self.done = true;
            return Ok(NextPage::Done);
        }
        Ok(NextPage::Fetch(cursor))
    }

    /// Validates every entry: the good ones in URI order, a warning for each one skipped.
    pub fn finish(self) -> (Vec<ListedSkill>, Vec<String>) {
        let mut warnings = self.warnings;
        let mut skills: Vec<ListedSkill> = Vec::new();
        let mut seen = BTreeSet::new();
        for (index, entry) in self.raw.iter().enumerate() {
            match validate_entry(entry) {
                Ok(skill) => {
                    if seen.insert(skill.uri.clone()) {
                        skills.push(skill);
                    } else {
                        warnings.push(format!(
                            "skill {} is listed twice; the first entry is kept",
                            skill.uri
                        ));
                    }
                }
                Err(message) => {
                    let label = entry
                        .get("uri")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("skills[{index}]"), str::to_owned);
                    warnings.push(format!("skill {label} skipped: {message}"));
                }
            }
        }
        skills.sort_by(|a, b| a.uri.cmp(&b.uri));
        (skills, warnings)
    }
}

/// Checks one `skills/list` (or `skills/get`) entry without reading any file.
pub fn validate_entry(entry: &Value) -> Result<ListedSkill, String> {
    let uri = entry
        .get("uri")
        .and_then(Value::as_str)
        .ok_or("the entry has no `uri` string")?;
    let name_in_uri = crate::remote::skill_name_from_uri(uri)
        .ok_or("the uri is not skill://…/<name>/SKILL.md")?;
    let frontmatter = entry
        .get("frontmatter")
        .and_then(Value::as_object)
        .ok_or("the entry has no `frontmatter` object")?;
    let name = frontmatter
        .get("name")
        .and_then(Value::as_str)
        .ok_or("the frontmatter has no `name` string")?;
    check_name(name).map_err(|reason| format!("invalid name {name:?}: {reason}"))?;
    if name != name_in_uri {
        return Err(format!(
            "the uri names `{name_in_uri}`, the frontmatter `{name}`"
        ));
    }
    let description = frontmatter
        .get("description")
        .and_then(Value::as_str)
        .ok_or("the frontmatter has no `description` string")?;
    if description.trim().is_empty() {
        return Err("the description is empty".to_owned());
    }
    let limits = SkillLimits::REMOTE;
    if description.chars().count() > limits.max_description_chars {
        return Err(format!(
            "the description is over {} characters",
            limits.max_description_chars
        ));
    }
    if let Some(found) = first_suspicious(&Value::Object(frontmatter.clone())) {
        return Err(format!("the frontmatter holds suspicious Unicode {found}"));
    }
    let resources = match entry.get("resources") {
        Some(Value::Array(items)) => items,
        Some(Value::String(marker)) if marker == "dynamic" => {
            return Err("its resources are \"dynamic\" (no digests), and warden loads only verifiable skills".to_owned());
        }
        _ => return Err("the entry has no `resources` list".to_owned()),
    };
    if resources.len() > MAX_FILES_PER_SKILL {
        return Err(format!("it lists more than {MAX_FILES_PER_SKILL} files"));
    }
    let root = &uri[..uri.len() - "SKILL.md".len()];
    let mut files = Vec::new();
    let mut skill_md = None;
    let mut seen = BTreeSet::new();
    let mut total: u64 = 0;
    for item in resources {
        let file: FileEntry = serde_json::from_value(item.clone())
            .map_err(|error| format!("a resource entry is malformed: {error}"))?;
        if !is_sha256_digest(&file.digest) {
            return Err(format!(
                "{} has a malformed digest {:?}",
                file.uri, file.digest
            ));
        }
        if !seen.insert(file.uri.clone()) {
            return Err(format!("{} is listed twice", file.uri));
        }
        total = total.saturating_add(file.size);
        if file.uri == uri {
            if file.size > limits.max_file_bytes() as u64 {
                return Err(format!(
                    "its SKILL.md is {} bytes, over the {}-byte limit",
                    file.size,
                    limits.max_file_bytes()
                ));
            }
            skill_md = Some(file);
            continue;
        }
        let inside = file.uri.strip_prefix(root).is_some_and(is_plain_relative);
        if !inside {
            return Err(format!(
                "{} is not inside the skill's folder {root}",
                file.uri
            ));
        }
        files.push(file);
    }
    if total > MAX_SKILL_TOTAL_BYTES {
        return Err(format!(
            "its files add up to {total} bytes, over {MAX_SKILL_TOTAL_BYTES}"
        ));
    }
    let skill_md = skill_md.ok_or("its resources do not list its own SKILL.md")?;
    files.sort_by(|a, b| a.uri.cmp(&b.uri));
    Ok(ListedSkill {
        uri: uri.to_owned(),
        name: name.to_owned(),
        description: description.to_owned(),
        frontmatter: frontmatter.clone(),
        skill_md,
        files,
    })
}

fn first_suspicious(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => unicode::scan(text, 1, false)
            .first()
            .map(|found| found.code_point_label()),
        Value::Array(items) => items.iter().find_map(first_suspicious),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            unicode::scan(key, 1, false)
                .first()
                .map(|found| found.code_point_label())
                .or_else(|| first_suspicious(item))
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

/// Whether `digest` is `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Skill commands for a server served by the extension.
pub fn extension_skill_commands(
    server: &str,
    skills: &[ListedSkill],
    taken: &BTreeSet<String>,
) -> Registration {
    let candidates = skills
        .iter()
        .map(|skill| RemoteSkillCandidate {
            name: skill.name.clone(),
            uri: skill.uri.clone(),
            description: skill.description.clone(),
            files: skill.files.iter().map(|file| file.uri.clone()).collect(),
        })
        .collect();
    register_commands(server, Contract::Extension, candidates, taken)
}

/// Checks bytes against a listed entry: the size first, then the digest.
pub(crate) fn verify_bytes(entry: &FileEntry, bytes: &[u8]) -> Result<(), RemoteSkillError> {
    let actual = bytes.len() as u64;
    if actual != entry.size {
        return Err(RemoteSkillError::Size {
            uri: entry.uri.clone(),
            expected: entry.size,
            actual,
        });
    }
    let digest = sha256_digest(bytes);
    if digest != entry.digest {
        return Err(RemoteSkillError::Digest {
            uri: entry.uri.clone(),
            expected: entry.digest.clone(),
            actual: digest,
        });
    }
    Ok(())
}

/// Verifies a fetched SKILL.md of a listed skill: size, digest, frontmatter parsed and compared
/// field by field with the listing, the remote limits; then bounds it. Call on every read; on an
/// error the content must not be used (and no other file of the skill read).
pub fn verify_skill_md(
    command: &SkillCommand,
    listed: &ListedSkill,
    bytes: &[u8],
) -> Result<RemoteSkillLoad, RemoteSkillError> {
    if command.uri != listed.uri {
        return Err(RemoteSkillError::Unlisted {
            uri: command.uri.clone(),
        });
    }
    verify_bytes(&listed.skill_md, bytes)?;
    let (load, fields) = load_remote(command, bytes)?;
    let keys: BTreeSet<&String> = fields.keys().chain(listed.frontmatter.keys()).collect();
    for key in keys {
        let in_file = fields.get(key).unwrap_or(&Value::Null);
        let in_listing = listed.frontmatter.get(key).unwrap_or(&Value::Null);
        if in_file != in_listing {
            return Err(RemoteSkillError::FrontmatterMismatch {
                uri: listed.uri.clone(),
                field: key.clone(),
            });
        }
    }
    Ok(load)
}

/// The entry for a listed file of `listed` (origin-bound: anything not listed is refused).
pub fn listed_file<'a>(
    listed: &'a ListedSkill,
    uri: &str,
) -> Result<&'a FileEntry, RemoteSkillError> {
    listed
        .files
        .iter()
        .find(|file| file.uri == uri)
        .ok_or_else(|| RemoteSkillError::Unlisted {
            uri: uri.to_owned(),
        })
}

/// Verifies a fetched resource file of a loaded skill: listed, within the per-read cap, size and
/// digest. Call on every read.
pub fn verify_skill_file(
    listed: &ListedSkill,
    uri: &str,
    bytes: &[u8],
) -> Result<(), RemoteSkillError> {
    let entry = listed_file(listed, uri)?;
    if entry.size > MAX_REMOTE_FILE_BYTES || bytes.len() as u64 > MAX_REMOTE_FILE_BYTES {
        return Err(RemoteSkillError::TooLarge {
            uri: uri.to_owned(),
            actual: entry.size.max(bytes.len() as u64),
            max: MAX_REMOTE_FILE_BYTES,
        });
    }
    verify_bytes(entry, bytes)
}

/// The tools a listed skill's frontmatter names in `allowed-tools` (sorted, deduplicated): the
/// tools kept hidden until the skill is loaded. Grants nothing by itself.
pub fn listed_allowed_tools(listed: &ListedSkill) -> Vec<String> {
    let mut tools = match listed.frontmatter.get("allowed-tools") {
        Some(Value::String(text)) => crate::parse::split_tool_list(text),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .flat_map(crate::parse::split_tool_list)
            .collect(),
        _ => Vec::new(),
    };
    tools.sort();
    tools.dedup();
    tools
}
