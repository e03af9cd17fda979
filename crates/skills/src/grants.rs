//! Skill grants: the operator's approval of the tools a remote skill names, bound to the server,
//! the skill's URI and a hash of the sorted tool list and the content; stored as JSON in the
//! state folder with atomic writes, listed and revocable.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The grants file under warden's state folder.
pub(crate) const GRANTS_FILE: &str = "skill-grants.json";

/// One approved grant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    pub server: String,
    pub resource_uri: String,
    /// The approved tools, sorted and deduplicated.
    pub tools: Vec<String>,
    /// The content hash the approval saw (`sha256:…` of the SKILL.md).
    pub content_hash: String,
    /// [`tools_hash`] of `tools` and `content_hash`: what the approval is bound to.
    pub tools_hash: String,
    /// When it was approved, in seconds since the Unix epoch.
    pub approved_at_unix: u64,
}

impl Grant {
    /// A grant for `tools` (any order, duplicates allowed) over content `content_hash`.
    pub fn new(server: &str, resource_uri: &str, tools: &[String], content_hash: &str) -> Self {
        let tools = sorted_tools(tools);
        Self {
            server: server.to_owned(),
            resource_uri: resource_uri.to_owned(),
            tools_hash: tools_hash(&tools, content_hash),
            tools,
            content_hash: content_hash.to_owned(),
            approved_at_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

fn sorted_tools(tools: &[String]) -> Vec<String> {
    let mut tools = tools.to_vec();
    tools.sort();
    tools.dedup();
    tools
}

/// `sha256:` of the sorted, deduplicated tool list and the content hash, length-prefixed so that
/// no two different inputs share an encoding.
pub fn tools_hash(tools: &[String], content_hash: &str) -> String {
    let tools = sorted_tools(tools);
    let mut hasher = Sha256::new();
    for tool in &tools {
        hasher.update((tool.len() as u64).to_be_bytes());
        hasher.update(tool.as_bytes());
    }
    hasher.update(u64::MAX.to_be_bytes());
    hasher.update(content_hash.as_bytes());
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// Why the operator must be asked again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum AskReason {
    /// No grant exists for this server and skill.
    New,
    /// The skill now names tools the approval did not cover.
    Widened { added: Vec<String> },
    /// The skill's content changed since the approval.
    Rotated,
    /// The tool list changed otherwise (narrowed); the approval is bound to the exact list.
    Changed,
}

/// The answer of [`GrantStore::check`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum GrantCheck {
    /// An approval for exactly this list and content exists.
    Approved,
    /// Ask the operator.
    Ask(AskReason),
}

/// The grants file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GrantStoreError {
    #[error("reading {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a valid grants file: {source}", .path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct GrantsFile {
    version: u32,
    grants: Vec<Grant>,
}

/// The approved grants, kept in one JSON file.
#[derive(Debug)]
pub struct GrantStore {
    path: PathBuf,
    grants: Vec<Grant>,
}

impl GrantStore {
    /// `STATE_DIR/skill-grants.json`.
    pub fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join(GRANTS_FILE)
    }

    /// Loads the file at `path` (no file: no grants).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, GrantStoreError> {
        let path = path.into();
        let file: GrantsFile = read_json_or_default(&path)?;
        Ok(Self {
            path,
            grants: file.grants,
        })
    }

    /// Every grant, sorted by server then URI.
    pub fn list(&self) -> &[Grant] {
        &self.grants
    }

    /// The grant for this server and skill URI.
    pub fn get(&self, server: &str, resource_uri: &str) -> Option<&Grant> {
        self.grants
            .iter()
            .find(|grant| grant.server == server && grant.resource_uri == resource_uri)
    }

    /// Whether the skill may use its approval as it is now: the exact tool list and content
    /// must match; a widened list or rotated content asks again.
    pub fn check(
        &self,
        server: &str,
        resource_uri: &str,
        tools: &[String],
        content_hash: &str,
    ) -> GrantCheck {
        let Some(grant) = self.get(server, resource_uri) else {
            return GrantCheck::Ask(AskReason::New);
        };
        if grant.tools_hash == tools_hash(tools, content_hash) && grant.content_hash == content_hash
        {
            return GrantCheck::Approved;
        }
        let tools = sorted_tools(tools);
        let added: Vec<String> = tools
            .iter()
            .filter(|tool| !grant.tools.contains(tool))
            .cloned()
            .collect();
        if !added.is_empty() {
            GrantCheck::Ask(AskReason::Widened { added })
        } else if grant.content_hash != content_hash {
            GrantCheck::Ask(AskReason::Rotated)
        } else {
            GrantCheck::Ask(AskReason::Changed)
        }
    }

    /// Records an approval (replacing any earlier one for the same server and URI) and saves.
    pub fn approve(&mut self, grant: Grant) -> Result<(), GrantStoreError> {
        self.grants
            .retain(|g| !(g.server == grant.server && g.resource_uri == grant.resource_uri));
        self.grants.push(grant);
        self.grants.sort_by(|a, b| {
            (a.server.as_str(), a.resource_uri.as_str())
                .cmp(&(b.server.as_str(), b.resource_uri.as_str()))
        });
        self.save()
    }

    /// Revokes the grant of a server's skill; `resource_uri: None` revokes all of the server's.
    /// Returns how many were removed (and saves when any were).
    pub fn revoke(
        &mut self,
        server: &str,
        resource_uri: Option<&str>,
    ) -> Result<usize, GrantStoreError> {
        let before = self.grants.len();
        self.grants.retain(|grant| {
            !(grant.server == server && resource_uri.is_none_or(|uri| grant.resource_uri == uri))
        });
        let removed = before - self.grants.len();
        if removed > 0 {
            self.save()?;
        }
        Ok(removed)
    }

    /// Writes the file atomically (see [`write_json_atomically`]).
    fn save(&self) -> Result<(), GrantStoreError> {
        let file = GrantsFile {
            version: 1,
            grants: self.grants.clone(),
        };
        write_json_atomically(&self.path, &file)
    }
}

/// The JSON file at `path`, or the default when there is none.
pub(crate) fn read_json_or_default<T: serde::de::DeserializeOwned + Default>(
    path: &Path,
) -> Result<T, GrantStoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| GrantStoreError::Parse {
            path: path.to_path_buf(),
            source,
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(GrantStoreError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `value` as pretty JSON to `path` atomically (warden's one atomic write: a crash leaves
/// the old file or the new one), private to the user (0600, also for a file written before).
pub(crate) fn write_json_atomically(
    path: &Path,
    value: &impl serde::Serialize,
) -> Result<(), GrantStoreError> {
    use std::os::unix::fs::PermissionsExt;
    let write_error = |source| GrantStoreError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|error| write_error(std::io::Error::other(error)))?;
    text.push('\n');
    warden_config::atomic_write(path, text.as_bytes()).map_err(write_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(write_error)
}
