//! Operator approvals of project-scope server entries and agent profiles, each bound to a hash of the exact entry.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::edit::atomic_write;
use crate::entry::ServerEntry;
use crate::model::AgentProfile;
use crate::paths::Paths;

/// Whether an entry may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    /// User scope (or `-c FILE`): the operator's own entry.
    NotRequired,
    /// A project entry the operator approved exactly as it is.
    Trusted,
    /// A project entry never approved.
    Untrusted,
    /// A project entry approved once, edited since.
    Changed,
}

impl TrustState {
    pub fn as_str(self) -> &'static str {
        match self {
            TrustState::NotRequired => "not_required",
            TrustState::Trusted => "trusted",
            TrustState::Untrusted => "untrusted",
            TrustState::Changed => "changed",
        }
    }

    /// Whether the entry may start.
    pub fn allows_start(self) -> bool {
        matches!(self, TrustState::NotRequired | TrustState::Trusted)
    }

    /// Why an entry in this state is idle, for `warden mcp list` and the runtime.
    pub fn idle_reason(self, name: &str) -> Option<String> {
        match self {
            TrustState::NotRequired | TrustState::Trusted => None,
            TrustState::Untrusted => Some(format!(
                "project server not approved; review it (`warden mcp get {name}`) and run `warden mcp trust {name}`"
            )),
            TrustState::Changed => Some(format!(
                "project server changed since it was approved; review it (`warden mcp get {name}`) and run `warden mcp trust {name}`"
            )),
        }
    }
}

impl TrustState {
    /// Why a project agent profile in this state is not loaded, for the load's warnings.
    pub fn agent_idle_reason(self, name: &str) -> Option<String> {
        match self {
            TrustState::NotRequired | TrustState::Trusted => None,
            TrustState::Untrusted => Some(format!(
                "project agent profile not approved, so it is not loaded; review it and run \
                 `warden config trust-agent {name}`"
            )),
            TrustState::Changed => Some(format!(
                "project agent profile changed since it was approved, so it is not loaded; \
                 review it and run `warden config trust-agent {name}`"
            )),
        }
    }
}

/// Reading or writing the approvals failed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is damaged ({message}); remove it to approve project servers again", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct TrustFile {
    version: u32,
    approvals: Vec<Approval>,
}

/// What an approval is of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// An `[mcp_servers.NAME]` entry (approvals written before kinds existed are of servers).
    #[default]
    Server,
    /// An `[agents.NAME]` profile.
    Agent,
}

impl ApprovalKind {
    fn is_server(&self) -> bool {
        *self == ApprovalKind::Server
    }
}

/// One approval: this file's entry (or profile) of this name, with this hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    #[serde(default, skip_serializing_if = "ApprovalKind::is_server")]
    pub kind: ApprovalKind,
    pub file: PathBuf,
    pub name: String,
    pub hash: String,
    /// Unix seconds.
    pub approved_at: u64,
}

/// The approvals, kept in `STATE_DIR/trusted-servers.json`.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
    approvals: Vec<Approval>,
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl TrustStore {
    /// Opens the store of `paths` (a missing file means no approvals yet).
    pub fn open(paths: &Paths) -> Result<Self, TrustError> {
        Self::open_at(paths.trust_file())
    }

    /// Opens the store at a given file.
    pub fn open_at(path: PathBuf) -> Result<Self, TrustError> {
        let approvals = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: TrustFile =
                    serde_json::from_slice(&bytes).map_err(|error| TrustError::Corrupt {
                        path: path.clone(),
                        message: error.to_string(),
                    })?;
                file.approvals
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        Ok(Self { path, approvals })
    }

    /// The trust state of an entry.
    pub fn state(&self, entry: &ServerEntry) -> TrustState {
        if !entry.needs_trust() {
            return TrustState::NotRequired;
        }
        self.state_of(
            ApprovalKind::Server,
            &entry.source,
            &entry.name,
            &entry.trust_hash(),
        )
    }

    /// The trust state of an agent profile (a project profile loads only when `Trusted`).
    pub fn agent_state(&self, profile: &AgentProfile) -> TrustState {
        if !profile.needs_trust() {
            return TrustState::NotRequired;
        }
        self.state_of(
            ApprovalKind::Agent,
            &profile.source,
            &profile.name,
            &profile.trust_hash(),
        )
    }

    fn state_of(&self, kind: ApprovalKind, source: &Path, name: &str, hash: &str) -> TrustState {
        let file = canonical(source);
        match self
            .approvals
            .iter()
            .find(|a| a.kind == kind && a.name == name && a.file == file)
        {
            Some(approval) if approval.hash == hash => TrustState::Trusted,
            Some(_) => TrustState::Changed,
            None => TrustState::Untrusted,
        }
    }

    /// Whether the entry may start (user entries always may).
    pub fn is_trusted(&self, entry: &ServerEntry) -> bool {
        self.state(entry).allows_start()
    }

    /// Approves the entry exactly as it is now, replacing an earlier approval, and saves.
    ///
    /// Another warden process may have approved other entries since this store was opened: under
    /// an exclusive lock on `<file>.lock`, the file is read again and this approval merged into
    /// what it holds now, so neither approval is lost.
    pub fn trust(&mut self, entry: &ServerEntry) -> Result<(), TrustError> {
        self.approve(
            ApprovalKind::Server,
            &entry.source,
            &entry.name,
            entry.trust_hash(),
        )
    }

    /// Approves the agent profile exactly as it is now, as [`TrustStore::trust`] does an entry.
    pub fn trust_agent(&mut self, profile: &AgentProfile) -> Result<(), TrustError> {
        self.approve(
            ApprovalKind::Agent,
            &profile.source,
            &profile.name,
            profile.trust_hash(),
        )
    }

    fn approve(
        &mut self,
        kind: ApprovalKind,
        source: &Path,
        name: &str,
        hash: String,
    ) -> Result<(), TrustError> {
        let _lock = self.lock()?;
        self.approvals = Self::open_at(self.path.clone())?.approvals;
        let file = canonical(source);
        self.approvals
            .retain(|a| !(a.kind == kind && a.name == name && a.file == file));
        self.approvals.push(Approval {
            kind,
            file,
            name: name.to_string(),
            hash,
            approved_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        });
        self.save()
    }

    /// Takes the store's advisory lock, held until the returned file is dropped.
    fn lock(&self) -> Result<std::fs::File, TrustError> {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let write_error = |source| TrustError::Write {
            path: lock_path.clone(),
            source,
        };
        if let Some(parent) = lock_path.parent() {
            std::fs::create_dir_all(parent).map_err(write_error)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(write_error)?;
        file.lock().map_err(write_error)?;
        Ok(file)
    }

    fn save(&self) -> Result<(), TrustError> {
        let file = TrustFile {
            version: 1,
            approvals: self.approvals.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|error| TrustError::Write {
            path: self.path.clone(),
            source: io::Error::other(error),
        })?;
        bytes.push(b'\n');
        atomic_write(&self.path, &bytes).map_err(|source| TrustError::Write {
            path: self.path.clone(),
            source,
        })
    }
}
