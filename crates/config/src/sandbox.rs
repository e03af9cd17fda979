//! `[sandbox]`: how the agent's `bash` commands are confined by the kernel — the mode, the
//! network, the variables they get and their resource limits. Read from the user config only.

use schemars::JsonSchema;
use serde::Serialize;

use crate::raw::KnownValues;

/// `[sandbox] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum SandboxModeSetting {
    /// No kernel confinement (the approval rules still apply).
    #[serde(rename = "off")]
    Off,
    /// Writes only inside the workspace roots and a private temp folder; no reads of the
    /// protected paths (the default where the kernel supports it).
    #[default]
    #[serde(rename = "workspace-write")]
    WorkspaceWrite,
    /// Writes only to a private temp folder.
    #[serde(rename = "read-only")]
    ReadOnly,
}

impl KnownValues for SandboxModeSetting {
    const VALUES: &'static [&'static str] = &["off", "workspace-write", "read-only"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "off" => Some(Self::Off),
            "workspace-write" => Some(Self::WorkspaceWrite),
            "read-only" => Some(Self::ReadOnly),
            _ => None,
        }
    }
}

/// `[sandbox]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSandbox {
    /// `workspace-write` (default: bash writes only inside the workspace roots and a private temp folder, and never reads the protected paths), `read-only` (writes only to the private temp folder) or `off` (no kernel confinement). What the kernel actually enforces is shown by `warden context` and recorded with every bash call in the audit trail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxModeSetting>,
    /// Whether bash commands may use the network (default false: only the session's tool bridge is reachable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Names of environment variables bash gets from warden's environment besides PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TERM, COLORTERM, TZ and NO_COLOR (model keys and tokens stay out unless named here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// Memory of one command's whole process tree, in MiB (default: half the machine's memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Processes of one command's whole process tree (default 1024).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
    /// CPU seconds each process of a command may use (default: no limit beyond the command's timeout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_sec: Option<u64>,
    /// Folders bash may read beside the workspace, the system's program and library folders, `PATH` and the usual tool caches (`~/.cargo/registry`, `~/.rustup`, `~/.npm`, …); absolute or `~/…`. The rest of the home folder is unreadable to bash by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readable: Option<Vec<std::path::PathBuf>>,
    /// Folders bash may write beside the workspace: tool caches such as `~/.cargo/registry` or `~/.npm`, so `cargo build` and `npm install` work through the agent; absolute or `~/…`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writable: Option<Vec<std::path::PathBuf>>,
}

impl RawSandbox {
    pub const KEYS: &'static [&'static str] = &[
        "mode",
        "network",
        "env",
        "memory_mb",
        "max_processes",
        "cpu_sec",
        "readable",
        "writable",
    ];
}

/// `[sandbox]` in force (`None`: the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: Option<SandboxModeSetting>,
    pub network: Option<bool>,
    pub env: Vec<String>,
    pub memory_mb: Option<u64>,
    pub max_processes: Option<u64>,
    pub cpu_sec: Option<u64>,
    /// Folders bash may read beside the defaults (expanded).
    pub readable: Vec<std::path::PathBuf>,
    /// Folders bash may write beside the workspace (expanded).
    pub writable: Vec<std::path::PathBuf>,
}

impl From<RawSandbox> for SandboxSettings {
    fn from(raw: RawSandbox) -> Self {
        let RawSandbox {
            mode,
            network,
            env,
            memory_mb,
            max_processes,
            cpu_sec,
            readable,
            writable,
        } = raw;
        Self {
            mode,
            network,
            env: env.unwrap_or_default(),
            memory_mb,
            max_processes,
            cpu_sec,
            readable: readable.unwrap_or_default(),
            writable: writable.unwrap_or_default(),
        }
    }
}

impl SandboxSettings {
    /// The mode in force.
    pub fn mode(&self) -> SandboxModeSetting {
        self.mode.unwrap_or_default()
    }
}
