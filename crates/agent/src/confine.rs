//! How a `bash` command is confined: the clean environment it starts with, and the kernel
//! sandbox (Landlock, seccomp, cgroup, a private mount namespace) built from the session's
//! workspace — reads only in the workspace, the system's folders and the tool caches, writes only
//! inside the roots and a private temp folder, files that run later read-only, credential files
//! seen empty, no network but the tool bridge unless the operator allows it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use warden_sandbox::{
    NetworkPolicy, Prepared, ResourceLimits, SandboxError, SandboxMode, SandboxPolicy,
};

use crate::workspace::Workspace;

/// Variables `bash` gets from warden's environment by default; everything else (model keys,
/// `WARDEN_SERVE_TOKEN`, cloud credentials) stays out unless the operator names it.
pub(crate) const DEFAULT_BASH_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TZ",
    "NO_COLOR",
];

/// Whether `name` passes into bash's environment by default (the list above and the locale's
/// `LC_*` variables).
pub(crate) fn passes_by_default(name: &str) -> bool {
    DEFAULT_BASH_ENV.contains(&name) || name.starts_with("LC_")
}

/// The operator's choices for `bash` (`[sandbox]` in the user config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashConfinement {
    /// `off`, `workspace-write` (the default) or `read-only`.
    pub mode: SandboxMode,
    /// Whether commands may use the network (default: only the tool bridge).
    pub network: bool,
    /// Memory, CPU time and processes of one command's whole process tree.
    pub limits: ResourceLimits,
    /// Variable names passed from warden's environment beyond [`DEFAULT_BASH_ENV`].
    pub env: Vec<String>,
    /// Folders commands may read beside [`default_readable_roots`] (`[sandbox] readable`).
    pub readable: Vec<PathBuf>,
    /// Folders commands may write beside the workspace: tool caches (`[sandbox] writable`,
    /// such as `~/.cargo/registry` or `~/.npm`), so a build works through the agent.
    pub writable: Vec<PathBuf>,
}

impl Default for BashConfinement {
    /// `workspace-write`, no network, half the machine's memory and 1,024 processes per command.
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            limits: ResourceLimits {
                memory_bytes: half_of_physical_memory(),
                ..ResourceLimits::default()
            },
            env: Vec::new(),
            readable: Vec::new(),
            writable: Vec::new(),
        }
    }
}

/// The system's program and library folders a command reads by default.
const SYSTEM_READABLE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
    "/sys", "/nix", "/snap",
];

/// Tool installations and caches under the home folder a command reads by default (read-only:
/// `[sandbox] writable` makes one writable). Credentials beneath them stay on the never-list.
const HOME_READABLE: &[&str] = &[
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".pyenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    ".npm",
    ".cache/pip",
    ".cache/uv",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
];

/// Where a command may read by default: the system's folders, each absolute folder of `PATH`
/// that is not the home folder or above it (so `warden tool` and the tools a user installed
/// run), and the tool installations and caches of [`HOME_READABLE`]. Everything else — the rest
/// of the home folder above all — is unreadable unless the operator adds it.
pub(crate) fn default_readable_roots(
    home: Option<&Path>,
    path_var: Option<&OsStr>,
) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    if let Some(path_var) = path_var {
        let too_wide = |dir: &Path| {
            dir == Path::new("/")
                || home.is_some_and(|home| home.starts_with(dir) || dir == home.join(".local"))
        };
        for dir in std::env::split_paths(path_var) {
            if !dir.is_absolute() || too_wide(&dir) {
                continue;
            }
            // A version manager's `shims` or `bin` runs programs from the installation around
            // it (pyenv's shims run `libexec/pyenv` and `versions/…`): read the installation.
            let installation = dir
                .file_name()
                .is_some_and(|name| name == "shims" || name == "bin")
                .then(|| dir.parent().map(Path::to_path_buf))
                .flatten()
                .filter(|parent| !too_wide(parent));
            for root in [Some(dir), installation].into_iter().flatten() {
                if !roots.contains(&root) {
                    roots.push(root);
                }
            }
        }
    }
    if let Some(home) = home {
        roots.extend(HOME_READABLE.iter().map(|relative| home.join(relative)));
    }
    roots
}

/// Folders a walk for credential files never enters: version control, dependencies, builds.
const SECRET_WALK_SKIPS: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
];
/// How deep beneath a root, and how many entries in all, the walk for credential files looks.
const SECRET_WALK_DEPTH: usize = 4;
const SECRET_WALK_ENTRIES: usize = 20_000;

/// The credential files (`.env`, keys, …) inside the workspace roots that a command sees empty:
/// found by name down to [`SECRET_WALK_DEPTH`] levels, skipping [`SECRET_WALK_SKIPS`], at most
/// [`SECRET_WALK_ENTRIES`] entries (the built-in tools ask before reading any of them anywhere).
pub(crate) fn workspace_secrets(workspace: &Workspace) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut seen = 0usize;
    for root in workspace.roots() {
        let mut stack = vec![(root.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > SECRET_WALK_ENTRIES {
                    return found;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    let skipped = SECRET_WALK_SKIPS
                        .iter()
                        .any(|skip| entry.file_name() == OsStr::new(skip));
                    if !skipped && depth + 1 < SECRET_WALK_DEPTH {
                        stack.push((path, depth + 1));
                    }
                } else if kind.is_file() && workspace.secret(&path).is_some() {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// Half the machine's physical memory, if it can be read.
pub(crate) fn half_of_physical_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024 / 2)
}

/// A private temp folder for the session's commands (0700, removed when dropped).
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    dir: OnceLock<Result<tempfile::TempDir, String>>,
}

impl PrivateTmp {
    pub(crate) fn new() -> Self {
        Self {
            dir: OnceLock::new(),
        }
    }

    /// The folder, created on first use.
    pub(crate) fn path(&self) -> Result<&Path, String> {
        self.dir
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("warden-bash-")
                    .tempdir()
                    .map_err(|error| format!("cannot create a private temp folder: {error}"))
            })
            .as_ref()
            .map(tempfile::TempDir::path)
            .map_err(Clone::clone)
    }
}

impl Default for PrivateTmp {
    fn default() -> Self {
        Self::new()
    }
}

/// The network a confined process gets: everything when `allowed`, else only TCP connections to
/// the tool bridge's loopback port (when there is one).
fn network_policy(allowed: bool, bridge_port: Option<u16>) -> NetworkPolicy {
    if allowed {
        NetworkPolicy::Allowed
    } else {
        NetworkPolicy::Denied {
            allowed_tcp_connect_ports: bridge_port.into_iter().collect(),
        }
    }
}

/// The sandbox policy of one `bash` command in `workspace` (its credential files, a walk of the
/// workspace, are added by [`prepare_command`] alone); `bridge_port` is the tool bridge's
/// loopback port, the one TCP port reachable without network.
pub(crate) fn command_policy(
    confinement: &BashConfinement,
    workspace: &Workspace,
    private_tmp: &Path,
    bridge_port: Option<u16>,
) -> SandboxPolicy {
    let mut writable_roots = workspace.roots().to_vec();
    writable_roots.extend(
        confinement
            .writable
            .iter()
            .filter(|dir| dir.is_dir())
            .cloned(),
    );
    SandboxPolicy {
        mode: confinement.mode,
        readable_denied: sandbox_never_list(workspace, &[]),
        writable_roots,
        readable_roots: Some(bash_readable_roots(confinement, workspace)),
        read_only_paths: workspace.runs_later_paths(),
        // Found when a command is prepared (`prepare_command`), not for a report.
        hidden_files: Vec::new(),
        private_tmp: private_tmp.to_path_buf(),
        network: network_policy(confinement.network, bridge_port),
        limits: confinement.limits,
    }
}

/// Where a `bash` command reads beside the workspace roots and its private temp folder (what
/// `warden doctor` shows): [`default_readable_roots`], the operator's `[sandbox] readable` and
/// `writable` folders and warden's read-only folders (its artifacts).
pub fn bash_readable_roots(confinement: &BashConfinement, workspace: &Workspace) -> Vec<PathBuf> {
    readable_roots(confinement, workspace, &[])
}

/// [`bash_readable_roots`] and `also`.
fn readable_roots(
    confinement: &BashConfinement,
    workspace: &Workspace,
    also: &[PathBuf],
) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots = default_readable_roots(home.as_deref(), std::env::var_os("PATH").as_deref());
    roots.extend(confinement.readable.iter().cloned());
    roots.extend(confinement.writable.iter().cloned());
    roots.extend(workspace.read_only_roots().iter().cloned());
    roots.extend(also.iter().cloned());
    roots.retain(|root| root.is_absolute() && !root.components().any(|c| c.as_os_str() == ".."));
    roots
}

/// The kernel sandbox for one command (see [`command_policy`]).
pub(crate) fn prepare_command(
    confinement: &BashConfinement,
    workspace: &Workspace,
    private_tmp: &Path,
    bridge_port: Option<u16>,
) -> Result<Prepared, SandboxError> {
    let mut policy = command_policy(confinement, workspace, private_tmp, bridge_port);
    policy.hidden_files = workspace_secrets(workspace);
    warden_sandbox::prepare(&policy)
}

/// The kernel sandbox for a skill's script: read-only (writes go to `private_tmp` only), the
/// protected paths unreadable except the skill's own folder (which may lie in warden's config
/// folder), network only when its grant allows it, the operator's resource limits.
pub fn prepare_script(
    confinement: &BashConfinement,
    workspace: &Workspace,
    skill_dir: &Path,
    private_tmp: &Path,
    network: bool,
) -> Result<Prepared, SandboxError> {
    let policy = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        readable_denied: sandbox_never_list(workspace, &[skill_dir.to_path_buf()]),
        writable_roots: Vec::new(),
        readable_roots: Some(readable_roots(
            confinement,
            workspace,
            &[skill_dir.to_path_buf()],
        )),
        read_only_paths: Vec::new(),
        hidden_files: Vec::new(),
        private_tmp: private_tmp.to_path_buf(),
        network: network_policy(network, None),
        limits: confinement.limits,
    };
    warden_sandbox::prepare(&policy)
}

/// The protected paths as the kernel sandbox denies them. A protected folder that holds one of
/// warden's read-only folders (the artifacts inside the state folder) or one of `also_kept` is
/// denied entry by entry around it; a protected path the user allowed whole (or beneath an
/// allowed folder) is left out.
fn sandbox_never_list(workspace: &Workspace, also_kept: &[PathBuf]) -> Vec<PathBuf> {
    let mut denied = Vec::new();
    for protected in workspace.protected() {
        let path = &protected.path;
        if workspace.is_allowed(path) {
            continue;
        }
        let kept: Vec<&PathBuf> = workspace
            .read_only_roots()
            .iter()
            .chain(also_kept)
            .filter(|root| root.starts_with(path) && *root != path)
            .collect();
        if kept.is_empty() {
            denied.push(path.clone());
        } else {
            deny_around(path, &kept, &mut denied);
        }
    }
    denied
}

/// Denies every entry of `dir` except those leading to a `kept` path, recursively.
fn deny_around(dir: &Path, kept: &[&PathBuf], denied: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if kept.iter().any(|keep| **keep == path) {
            continue;
        }
        if kept.iter().any(|keep| keep.starts_with(&path)) {
            deny_around(&path, kept, denied);
        } else {
            denied.push(path);
        }
    }
}

/// The port of a loopback `http://127.0.0.1:PORT` bridge address among `exported`, if any.
pub(crate) fn bridge_port(exported: &[(String, String)]) -> Option<u16> {
    let (_, url) = exported
        .iter()
        .find(|(name, _)| name.ends_with("_URL") && name.starts_with("WARDEN_BRIDGE"))?;
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    warden_net::is_loopback_host(host)
        .then(|| port.parse().ok())
        .flatten()
}

/// bash's environment from warden's: the default names, the operator's, none that is masked,
/// then `TMPDIR` (the private temp folder) and the session's exports.
pub fn clean_environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    operator: &[String],
    masked: impl Fn(&OsStr) -> bool,
    tmpdir: Option<&Path>,
    exported: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .into_iter()
        .filter(|(name, _)| {
            name.to_str().is_some_and(|name| {
                passes_by_default(name) || operator.iter().any(|allowed| allowed == name)
            }) && !masked(name)
        })
        .collect();
    if let Some(tmpdir) = tmpdir {
        env.retain(|(name, _)| name != "TMPDIR");
        env.push(("TMPDIR".into(), tmpdir.into()));
    }
    env.extend(
        exported
            .iter()
            .map(|(name, value)| (name.into(), value.into())),
    );
    env
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_port_is_read_from_a_loopback_url_only() {
        let url = |value: &str| vec![("WARDEN_BRIDGE_URL".to_owned(), value.to_owned())];
        assert_eq!(bridge_port(&url("http://127.0.0.1:4100")), Some(4100));
        assert_eq!(bridge_port(&url("http://127.0.0.1:4100/")), Some(4100));
        assert_eq!(bridge_port(&url("http://evil.example:4100")), None);
        assert_eq!(bridge_port(&url("unix:/run/warden/s.sock")), None);
        assert_eq!(bridge_port(&[]), None);
    }

    #[test]
    fn only_named_variables_pass_and_tmpdir_is_the_private_folder() {
        let inherited = vec![
            ("PATH".into(), "/bin".into()),
            ("LC_ALL".into(), "C".into()),
            ("OPENAI_API_KEY".into(), "sk-secret".into()),
            ("WARDEN_SERVE_TOKEN".into(), "t".into()),
            ("GOPATH".into(), "/go".into()),
            ("TMPDIR".into(), "/tmp".into()),
        ];
        let env = clean_environment(
            inherited,
            &["GOPATH".to_owned()],
            |_| false,
            Some(Path::new("/tmp/warden-bash-x")),
            &[("WARDEN_BRIDGE_TOKEN".to_owned(), "b".to_owned())],
        );
        let names: Vec<String> = env
            .iter()
            .map(|(name, value)| format!("{}={}", name.to_string_lossy(), value.to_string_lossy()))
            .collect();
        assert_eq!(
            names,
            [
                "PATH=/bin",
                "LC_ALL=C",
                "GOPATH=/go",
                "TMPDIR=/tmp/warden-bash-x",
                "WARDEN_BRIDGE_TOKEN=b"
            ]
        );
    }
}
