//! What the caller asks of the sandbox: the mode, the never-list, the writable roots, the network
//! and the resource limits; and the typed errors of preparing it.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// How much the child is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Nothing is applied: no filesystem, network, privilege or resource confinement.
    Off,
    /// Read everywhere but the never-list; write beneath the writable roots and the private temp
    /// dir. The default where the kernel supports it.
    #[default]
    WorkspaceWrite,
    /// Read everywhere but the never-list; write only to the private temp dir and the writable
    /// device files (`/dev/null`…).
    ReadOnly,
}

impl SandboxMode {
    /// The mode's name as configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The child's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// No network but TCP connections to these ports (the tool bridge's loopback port). Landlock
    /// matches ports, not addresses: an allowed port is allowed on every address.
    Denied { allowed_tcp_connect_ports: Vec<u16> },
    /// No network rule at all.
    Allowed,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        NetworkPolicy::Denied {
            allowed_tcp_connect_ports: Vec::new(),
        }
    }
}

/// The process limit [`ResourceLimits::default`] sets: enough for builds, small enough that a fork
/// bomb stays a nuisance.
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;

/// Resource limits for the child and everything it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Memory: a cgroup cap on the whole tree when a cgroup is writable, and `RLIMIT_DATA` (heap
    /// and private mappings; not `RLIMIT_AS`, which breaks runtimes that reserve address space) on
    /// each process.
    pub memory_bytes: Option<u64>,
    /// CPU time of each process (`RLIMIT_CPU`: `SIGXCPU`, then `SIGKILL` two seconds later).
    pub cpu_seconds: Option<u64>,
    /// Processes (and threads) of the whole tree: a cgroup `pids.max`; without a cgroup,
    /// `RLIMIT_NPROC` for a non-root user (which counts all of that user's processes), nothing for
    /// root (the kernel ignores `RLIMIT_NPROC` for root).
    pub max_processes: Option<u64>,
}

impl ResourceLimits {
    /// No limit at all.
    pub const NONE: ResourceLimits = ResourceLimits {
        memory_bytes: None,
        cpu_seconds: None,
        max_processes: None,
    };
}

impl Default for ResourceLimits {
    /// [`DEFAULT_MAX_PROCESSES`] processes; memory and CPU unlimited.
    fn default() -> Self {
        ResourceLimits {
            max_processes: Some(DEFAULT_MAX_PROCESSES),
            ..ResourceLimits::NONE
        }
    }
}

/// Everything the sandbox needs to confine one command. Paths must be absolute; symbolic links
/// are resolved when the sandbox is prepared (a denied link protects its target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The never-list: neither readable nor writable, even inside a writable root (e.g. `~/.ssh`,
    /// `~/.gnupg`, `~/.aws`, warden's own config and state folders). A path that does not exist
    /// yet stays unreachable if it is created later.
    ///
    /// The cost of Landlock's allow-only rules: the folders on the way to a denied path are
    /// granted entry by entry, as they are when the sandbox is prepared, so the child cannot
    /// create new entries directly in them — for a denied `<workspace>/.warden`, no new file at
    /// the top of the workspace (its subfolders are unaffected).
    pub readable_denied: Vec<PathBuf>,
    /// Workspace roots, writable with everything beneath them (ignored in
    /// [`SandboxMode::ReadOnly`]). Must exist.
    pub writable_roots: Vec<PathBuf>,
    /// What the child may read and execute beside the writable roots, the private temp dir and
    /// the open device files: the system's program and library folders, the tool caches a build
    /// needs. `None` reads everywhere but the never-list. A root that does not exist is skipped;
    /// the never-list still applies beneath each.
    pub readable_roots: Option<Vec<PathBuf>>,
    /// Paths inside the writable roots the child may read but never change, nor create where
    /// they do not exist yet (`.git`, `.envrc`, editor tasks…): a private mount namespace binds
    /// each existing one read-only over itself; the caller removes what a command created at a
    /// missing one.
    pub read_only_paths: Vec<PathBuf>,
    /// Files the child sees empty and cannot change (credential files inside the workspace): an
    /// empty read-only file is bound over each in the same mount namespace.
    pub hidden_files: Vec<PathBuf>,
    /// A private temp dir, always writable; the caller also sets it as `TMPDIR`. Must exist.
    pub private_tmp: PathBuf,
    pub network: NetworkPolicy,
    pub limits: ResourceLimits,
}

impl SandboxPolicy {
    /// The default policy around `private_tmp`: [`SandboxMode::WorkspaceWrite`] with no writable
    /// root yet, an empty never-list, network denied and the default limits.
    pub fn new(private_tmp: impl Into<PathBuf>) -> Self {
        SandboxPolicy {
            mode: SandboxMode::default(),
            readable_denied: Vec::new(),
            writable_roots: Vec::new(),
            readable_roots: None,
            read_only_paths: Vec::new(),
            hidden_files: Vec::new(),
            private_tmp: private_tmp.into(),
            network: NetworkPolicy::default(),
            limits: ResourceLimits::default(),
        }
    }
}

/// Why a sandbox could not be prepared. A kernel that lacks a feature is not an error: the
/// [`crate::Enforcement`] says what is not enforced.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox path {} must be absolute and free of `..`", path.display())]
    InvalidPath { path: PathBuf },
    #[error("sandbox path {}: {source}", path.display())]
    Path {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the private temp dir {} lies under the never-readable {}",
        path.display(),
        denied.display()
    )]
    PrivateTmpDenied { path: PathBuf, denied: PathBuf },
    #[cfg(target_os = "linux")]
    #[error("landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cgroup {}: {source}", path.display())]
    Cgroup {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
