//! Skills published by MCP servers: skill commands (`mcp__<server>__<skill>`, alias
//! `<server>:<skill>`), the legacy `skill://` resource contract, and the bounds every remote skill
//! gets (no `allowed-tools` authority, no trigger paths, capped lengths).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::parse::{SkillLimits, SkillMdError, check_name, parse_skill_md_with};
use crate::unicode;

/// Frontmatter fields that would make a skill trigger by itself (on paths, globs, events):
/// cleared on every remote skill.
pub(crate) const TRIGGER_FIELDS: &[&str] = &[
    "paths",
    "globs",
    "trigger",
    "triggers",
    "auto-trigger",
    "auto_trigger",
    "activation",
    "when",
];

/// The longest description a remote skill command shows (characters).
pub(crate) const MAX_REMOTE_DESCRIPTION_CHARS: usize = 1024;

/// Which contract a server's skills come through. The two never mix on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contract {
    /// `skill://` resources found through `resources/list`.
    LegacyResources,
    /// The SEP-2640 `io.modelcontextprotocol/skills` extension (`skills/list`).
    Extension,
}

/// A skill a server offers, before it becomes a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteSkillCandidate {
    /// The skill name (the folder segment before `SKILL.md`).
    pub name: String,
    /// The URI of its SKILL.md.
    pub uri: String,
    pub description: String,
    /// Every other file URI the server listed for this skill (the only ones reads may use).
    pub files: Vec<String>,
}

/// A remote skill registered as a command.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillCommand {
    pub server: String,
    pub skill: String,
    /// `mcp__<server>__<skill>` (`$mcp__…` in chat).
    pub command: String,
    /// `<server>:<skill>`, when nothing else has that name.
    pub alias: Option<String>,
    /// The SKILL.md URI: reads are bound to this server and this URI's listed files.
    pub uri: String,
    pub files: Vec<String>,
    /// One line, capped at [`MAX_REMOTE_DESCRIPTION_CHARS`].
    pub description: String,
    pub contract: Contract,
}

impl SkillCommand {
    /// The prompt index entry: the command name and the capped description.
    pub fn index_entry(&self) -> crate::IndexEntry {
        crate::IndexEntry {
            name: self.command.clone(),
            description: self.description.clone(),
        }
    }

    /// The names this command takes (`mcp__…` and the alias, when given).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.command.as_str()).chain(self.alias.as_deref())
    }
}

/// Skill commands of one server, and what was skipped (MCP warnings).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Registration {
    pub commands: Vec<SkillCommand>,
    pub warnings: Vec<String>,
}

/// `server` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize_server(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__<server>__<skill>`.
pub fn command_name(server: &str, skill: &str) -> String {
    warden_vocab::join_public_name(&sanitize_server(server), skill)
}

/// Turns candidates into commands. `taken` holds every command and alias that already exists
/// (built-ins, local skills, other servers' skills): a command that clashes is skipped with a
/// warning; an alias that clashes is simply not given. Candidates are taken in URI order.
pub(crate) fn register_commands(
    server: &str,
    contract: Contract,
    mut candidates: Vec<RemoteSkillCandidate>,
    taken: &BTreeSet<String>,
) -> Registration {
    candidates.sort_by(|a, b| a.uri.cmp(&b.uri));
    let mut registration = Registration::default();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for candidate in candidates {
        if let Err(reason) = check_name(&candidate.name) {
            registration.warnings.push(format!(
                "server `{server}`: skill {} skipped: invalid name {:?}: {reason}",
                candidate.uri, candidate.name
            ));
            continue;
        }
        let command = command_name(server, &candidate.name);
        if taken.contains(&command) || used.contains(&command) {
            registration.warnings.push(format!(
                "server `{server}`: skill {} skipped: the command `{command}` already exists",
                candidate.uri
            ));
            continue;
        }
        let alias = format!("{server}:{}", candidate.name);
        let alias = (!taken.contains(&alias) && !used.contains(&alias)).then_some(alias);
        used.insert(command.clone());
        if let Some(alias) = &alias {
            used.insert(alias.clone());
        }
        registration.commands.push(SkillCommand {
            server: server.to_owned(),
            skill: candidate.name,
            command,
            alias,
            uri: candidate.uri,
            files: candidate.files,
            description: cap_description(&candidate.description),
            contract,
        });
    }
    registration
}

/// One line, bidi and invisible characters removed, at most [`MAX_REMOTE_DESCRIPTION_CHARS`].
pub(crate) fn cap_description(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter(|c| unicode::classify(*c).is_none())
        .collect();
    let joined = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(MAX_REMOTE_DESCRIPTION_CHARS).collect()
}

/// A resource as `resources/list` gives it (the fields the legacy contract reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedResource {
    pub uri: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// The skill name of a `skill://…/<name>/SKILL.md` URI (also `skill://<name>/SKILL.md`).
pub(crate) fn skill_name_from_uri(uri: &str) -> Option<&str> {
    if uri.contains(['?', '#']) {
        return None;
    }
    let rest = uri.strip_prefix("skill://")?;
    let dir = rest.strip_suffix("/SKILL.md")?;
    let name = dir.rsplit('/').next()?;
    (!name.is_empty()).then_some(name)
}

/// Legacy contract: every `skill://…/<name>/SKILL.md` resource is a skill; other `skill://`
/// resources under the same folder are its files.
pub(crate) fn legacy_candidates(resources: &[ListedResource]) -> Vec<RemoteSkillCandidate> {
    let mut candidates = Vec::new();
    for resource in resources {
        let Some(name) = skill_name_from_uri(&resource.uri) else {
            continue;
        };
        let root = &resource.uri[..resource.uri.len() - "SKILL.md".len()];
        let mut files: Vec<String> = resources
            .iter()
            .filter(|other| other.uri != resource.uri && other.uri.starts_with(root))
            .filter(|other| is_plain_relative(&other.uri[root.len()..]))
            .map(|other| other.uri.clone())
            .collect();
        files.sort();
        files.dedup();
        candidates.push(RemoteSkillCandidate {
            name: name.to_owned(),
            uri: resource.uri.clone(),
            description: resource.description.clone().unwrap_or_default(),
            files,
        });
    }
    candidates
}

/// Skill commands for a server on the legacy contract.
pub fn legacy_skill_commands(
    server: &str,
    resources: &[ListedResource],
    taken: &BTreeSet<String>,
) -> Registration {
    register_commands(
        server,
        Contract::LegacyResources,
        legacy_candidates(resources),
        taken,
    )
}

/// A relative URI path with no empty, `.` or `..` segment, encoded dot or slash, query or fragment.
pub(crate) fn is_plain_relative(path: &str) -> bool {
    if path.is_empty() || path.contains(['?', '#', '\\']) {
        return false;
    }
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2e") || lower.contains("%2f") || lower.contains("%5c") {
        return false;
    }
    path.split('/')
        .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// A remote SKILL.md after it was verified and bounded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RemoteSkillLoad {
    pub server: String,
    pub uri: String,
    pub name: String,
    pub description: String,
    pub body: String,
    /// The tools the skill's `allowed-tools` names, sorted and deduplicated: what a grant asks
    /// the operator for. It grants nothing by itself.
    pub requested_tools: Vec<String>,
    /// `sha256:<hex>` of the SKILL.md bytes: what a grant is bound to besides the tools.
    pub content_hash: String,
    /// The skill's other files (URIs); only these may be read, only from this server.
    pub files: Vec<String>,
    /// What bounding cleared.
    pub notes: Vec<String>,
}

/// A remote skill read failed verification; the content must not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RemoteSkillError {
    #[error("{uri} is {actual} bytes, the listing says {expected}")]
    Size {
        uri: String,
        expected: u64,
        actual: u64,
    },
    #[error("{uri} has digest {actual}, the listing says {expected}")]
    Digest {
        uri: String,
        expected: String,
        actual: String,
    },
    #[error("{uri}: {source}")]
    Invalid { uri: String, source: SkillMdError },
    #[error("{uri}: frontmatter field `{field}` differs from the listing")]
    FrontmatterMismatch { uri: String, field: String },
    #[error("{uri}: the file's name `{found}` is not the skill's name `{expected}`")]
    NameMismatch {
        uri: String,
        expected: String,
        found: String,
    },
    #[error("{uri} is not a file this server listed for this skill")]
    Unlisted { uri: String },
    #[error("{uri} is {actual} bytes, over the {max}-byte limit for a skill file")]
    TooLarge { uri: String, actual: u64, max: u64 },
}

/// `sha256:<64 lowercase hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Parses a remote SKILL.md under the remote limits and bounds it. `expected_name` is the name
/// the command was registered under.
pub(crate) fn load_remote(
    command: &SkillCommand,
    bytes: &[u8],
) -> Result<(RemoteSkillLoad, serde_json::Map<String, Value>), RemoteSkillError> {
    let document = parse_skill_md_with(bytes, &SkillLimits::REMOTE).map_err(|source| {
        RemoteSkillError::Invalid {
            uri: command.uri.clone(),
            source,
        }
    })?;
    if document.frontmatter.name != command.skill {
        return Err(RemoteSkillError::NameMismatch {
            uri: command.uri.clone(),
            expected: command.skill.clone(),
            found: document.frontmatter.name,
        });
    }
    let original_fields = document.frontmatter.fields.clone();
    let mut notes = Vec::new();
    let mut requested_tools = document.frontmatter.allowed_tools.clone();
    requested_tools.sort();
    requested_tools.dedup();
    if !requested_tools.is_empty() {
        notes.push(format!(
            "allowed-tools ({}) grants nothing by itself: loading asks the operator to approve a grant",
            requested_tools.join(", ")
        ));
    }
    for field in TRIGGER_FIELDS {
        if original_fields.contains_key(*field) {
            notes.push(format!(
                "trigger rule `{field}` cleared: remote skills never trigger by themselves"
            ));
        }
    }
    Ok((
        RemoteSkillLoad {
            server: command.server.clone(),
            uri: command.uri.clone(),
            name: document.frontmatter.name,
            description: cap_description(&document.frontmatter.description),
            body: document.body,
            requested_tools,
            content_hash: sha256_digest(bytes),
            files: command.files.clone(),
            notes,
        },
        original_fields,
    ))
}

/// Verifies a legacy `skill://` SKILL.md read (no digests exist on this contract): UTF-8,
/// frontmatter, the name, the remote limits; then bounds it. Call on every read.
pub fn verify_legacy_skill_md(
    command: &SkillCommand,
    bytes: &[u8],
) -> Result<RemoteSkillLoad, RemoteSkillError> {
    load_remote(command, bytes).map(|(load, _)| load)
}

/// The most bytes one remote skill file read may have: 1 MiB.
pub const MAX_REMOTE_FILE_BYTES: u64 = 1024 * 1024;

/// Checks that `uri` is one of `command`'s listed files (origin-bound reads): call before the read.
pub fn check_legacy_file(command: &SkillCommand, uri: &str) -> Result<(), RemoteSkillError> {
    if command.files.iter().any(|file| file == uri) {
        Ok(())
    } else {
        Err(RemoteSkillError::Unlisted {
            uri: uri.to_owned(),
        })
    }
}
