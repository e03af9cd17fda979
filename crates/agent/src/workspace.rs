//! The session's workspace: the roots the built-in tools work in, the read-only folders beside
//! them (warden's own artifacts), and the protected paths they never touch without a user rule.
//!
//! Every path a built-in tool is given is resolved first — relative to the working folder,
//! symlinks and `..` followed as far as the path exists — and then placed: inside a root, outside
//! every root (the gate asks), a credential file to read or a file that runs later to write (the
//! gate asks, in every mode), or protected (refused, naming the rule that would allow it).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// How a tool touches a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads a file or lists a folder.
    Read,
    /// Creates, replaces or edits a file.
    Write,
}

/// Where a resolved path stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Inside a workspace root (or, for a read, a read-only folder of the session).
    Inside,
    /// Outside every root: the gate asks before the call runs.
    Outside,
    /// A credential file (`.env`, `.netrc`, a private key, a shell history…), read: the gate asks
    /// in every mode, wherever it lies. Says what it holds.
    Secret(&'static str),
    /// A file that runs later, outside any sandbox (`.git/`, `.envrc`, editor tasks, CI
    /// workflows, agent instruction files), written: the gate asks in every mode. Says what runs
    /// it.
    RunsLater(String),
    /// A protected path: refused with this reason, which names the rule that would allow it.
    Protected(String),
}

/// A path warden's built-ins never touch unless the user's own config names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedPath {
    /// The folder or file (resolved where it exists).
    pub path: PathBuf,
    /// What it holds, for the refusal ("SSH keys").
    pub holds: String,
}

/// The session's roots and protected paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The working folder: relative paths start here.
    workdir: PathBuf,
    /// The same, resolved.
    resolved_workdir: PathBuf,
    /// Folders the tools read and write without asking (resolved).
    roots: Vec<PathBuf>,
    /// Folders the tools read without asking but never write (resolved): warden's artifacts.
    read_only_roots: Vec<PathBuf>,
    protected: Vec<ProtectedPath>,
    /// Protected paths the user's config allows (`[permissions] allow_protected`), resolved.
    allowed: Vec<PathBuf>,
    /// The operator's own files that run later, relative to a root (`[permissions]
    /// write_protected`), beside [`RUNS_LATER`].
    write_protected: Vec<PathBuf>,
    /// Where the user adds such a rule, for the refusal's fix.
    rule_hint: String,
    /// Set for a service session's room: a path outside the roots is refused with this reason
    /// instead of being asked about.
    confined: Option<String>,
}

/// What the default protected list is built from.
#[derive(Debug, Clone, Default)]
pub struct ProtectedDefaults<'a> {
    /// The user's home folder.
    pub home: Option<&'a Path>,
    /// warden's config folder (config, trust decisions).
    pub warden_config: Option<&'a Path>,
    /// warden's state folder (tokens, audit, sessions, grants).
    pub warden_state: Option<&'a Path>,
}

impl ProtectedDefaults<'_> {
    /// The never-list: warden's own files, keys and credential folders, `/proc/*/environ`-like
    /// files are matched separately (they are per process).
    pub fn paths(&self) -> Vec<ProtectedPath> {
        let mut out = Vec::new();
        let mut add = |path: PathBuf, holds: &str| {
            out.push(ProtectedPath {
                path,
                holds: holds.to_owned(),
            })
        };
        if let Some(dir) = self.warden_config {
            add(dir.to_path_buf(), "warden's own configuration");
        }
        if let Some(dir) = self.warden_state {
            add(
                dir.to_path_buf(),
                "warden's own state: tokens, trust decisions, grants, the audit trail",
            );
        }
        if let Some(home) = self.home {
            for (relative, holds) in HOME_SECRETS {
                add(home.join(relative), holds);
            }
        }
        for (path, holds) in SYSTEM_SECRETS {
            add(PathBuf::from(path), holds);
        }
        out
    }
}

/// Folders and files under the home folder that hold credentials.
const HOME_SECRETS: &[(&str, &str)] = &[
    (".ssh", "SSH keys"),
    (".gnupg", "GnuPG keys"),
    (".aws", "AWS credentials"),
    (".azure", "Azure credentials"),
    (".config/gcloud", "Google Cloud credentials"),
    (".kube", "Kubernetes credentials"),
    (".docker/config.json", "Docker registry credentials"),
    (".netrc", "network login credentials"),
    (".git-credentials", "git credentials"),
    (".config/gh", "GitHub CLI tokens"),
    (".npmrc", "npm tokens"),
    (".pypirc", "PyPI tokens"),
    (".cargo/credentials.toml", "crates.io tokens"),
    (".cargo/credentials", "crates.io tokens"),
    (".password-store", "pass passwords"),
    (".local/share/keyrings", "desktop keyrings"),
    (".vault-token", "a Vault token"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL passwords"),
    (".config/rclone", "rclone remotes' credentials"),
    (".config/hub", "GitHub tokens"),
    (".config/op", "1Password sessions"),
    (".terraform.d", "Terraform Cloud tokens"),
    (".bash_history", "a shell history"),
    (".zsh_history", "a shell history"),
    (".python_history", "a Python history"),
    (".psql_history", "a psql history"),
    (".mysql_history", "a MySQL history"),
    (".node_repl_history", "a Node.js history"),
    (".local/share/fish/fish_history", "a shell history"),
];

/// System files that hold secrets.
const SYSTEM_SECRETS: &[(&str, &str)] = &[
    ("/etc/shadow", "password hashes"),
    ("/etc/gshadow", "password hashes"),
    ("/etc/sudoers", "sudo rules"),
    ("/etc/ssh", "the host's SSH keys"),
];

/// Files at a root's top (or beneath these folders) that a program runs or obeys later, outside
/// any sandbox, and what runs them. `.git` (anywhere) and the agent instruction files (anywhere)
/// are matched apart.
pub(crate) const RUNS_LATER: &[(&str, &str)] = &[
    (".warden", "warden reads it as the project's configuration"),
    (".mcp.json", "MCP clients start the servers it names"),
    (".envrc", "direnv runs it on entering the folder"),
    (
        ".vscode",
        "the editor runs its tasks and applies its settings",
    ),
    (".idea", "the IDE runs its run configurations"),
    (".claude", "coding agents run its hooks"),
    (
        ".github/workflows",
        "CI runs it with the repository's secrets",
    ),
    (".gitlab-ci.yml", "CI runs it with the repository's secrets"),
    (
        ".pre-commit-config.yaml",
        "pre-commit runs it at every commit",
    ),
];

/// Agent instruction files, read into a later session's prompt.
pub(crate) const AGENT_INSTRUCTIONS: &[&str] = &["AGENTS.md", "CLAUDE.md"];

/// What a credential file holds, judged by its name (and its folder's), wherever it lies: the
/// allow list a built-in read of it must pass (a person's yes, or `[permissions]
/// allow_protected`).
pub(crate) fn secret_file(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(OsStr::to_str)
        .unwrap_or("");
    let lower = name.to_ascii_lowercase();
    if lower == ".env" || lower == ".envrc" {
        return Some("environment secrets");
    }
    if let Some(variant) = lower.strip_prefix(".env.") {
        // Committed templates hold no secret.
        let template = ["example", "sample", "template", "dist", "defaults"]
            .iter()
            .any(|kind| variant.ends_with(kind));
        return (!template).then_some("environment secrets");
    }
    let by_name: &[(&str, &str)] = &[
        (".netrc", "network login credentials"),
        ("_netrc", "network login credentials"),
        (".pgpass", "PostgreSQL passwords"),
        (".my.cnf", "MySQL passwords"),
        (".git-credentials", "git credentials"),
        (".npmrc", "npm tokens"),
        (".pypirc", "PyPI tokens"),
        (".vault-token", "a Vault token"),
        ("rclone.conf", "rclone remotes' credentials"),
        ("kubeconfig", "Kubernetes credentials"),
        ("credentials", "cloud credentials"),
        ("credentials.json", "cloud credentials"),
        ("credentials.toml", "registry tokens"),
        ("id_rsa", "an SSH private key"),
        ("id_dsa", "an SSH private key"),
        ("id_ecdsa", "an SSH private key"),
        ("id_ed25519", "an SSH private key"),
        ("id_ecdsa_sk", "an SSH private key"),
        ("id_ed25519_sk", "an SSH private key"),
    ];
    if let Some((_, holds)) = by_name.iter().find(|(known, _)| lower == *known) {
        return Some(holds);
    }
    if lower.ends_with("_history") || lower == ".histfile" {
        return Some("a shell history");
    }
    let by_folder: &[(&str, &str, &str)] = &[
        (".kube", "config", "Kubernetes credentials"),
        (".docker", "config.json", "Docker registry credentials"),
        (".aws", "config", "AWS credentials"),
    ];
    if let Some((_, _, holds)) = by_folder
        .iter()
        .find(|(folder, file, _)| parent == *folder && lower == *file)
    {
        return Some(holds);
    }
    let by_extension: &[(&str, &str)] = &[
        ("pem", "a private key or certificate"),
        ("key", "a private key"),
        ("p12", "a key store"),
        ("pfx", "a key store"),
        ("jks", "a key store"),
        ("keystore", "a key store"),
        ("ppk", "a PuTTY private key"),
        ("tfvars", "Terraform variables"),
        ("tfstate", "Terraform state"),
    ];
    let extension = Path::new(&lower).extension().and_then(OsStr::to_str)?;
    by_extension
        .iter()
        .find(|(known, _)| extension == *known)
        .map(|(_, holds)| *holds)
}

/// Per-process files under `/proc` that expose a process's secrets (its environment, memory).
const PROC_SECRETS: &[&str] = &["environ", "mem", "auxv", "maps", "pagemap", "cmdline"];

impl Workspace {
    /// A workspace of one root, `workdir`, with the default protected list from `defaults`.
    pub fn new(workdir: impl Into<PathBuf>, defaults: &ProtectedDefaults<'_>) -> Self {
        let workdir = workdir.into();
        let root = resolve_existing(&workdir);
        Self {
            workdir,
            resolved_workdir: root.clone(),
            roots: vec![root],
            read_only_roots: Vec::new(),
            protected: defaults
                .paths()
                .into_iter()
                .map(|protected| ProtectedPath {
                    path: resolve_existing(&protected.path),
                    holds: protected.holds,
                })
                .collect(),
            allowed: Vec::new(),
            write_protected: Vec::new(),
            rule_hint: "[permissions] allow_protected in your user config".to_owned(),
            confined: None,
        }
    }

    /// A workspace whose tools never reach past its roots: a path outside them is refused with
    /// `reason` (a service session's room, where no one may approve a way out).
    #[must_use]
    pub fn confined_to_roots(mut self, reason: impl Into<String>) -> Self {
        self.confined = Some(reason.into());
        self
    }

    /// Adds the operator's own files that run later (`[permissions] write_protected`): paths
    /// relative to a root, each covering what lies beneath it.
    #[must_use]
    pub fn with_write_protected(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.write_protected.extend(paths);
        self
    }

    /// A workspace with no protected paths (tests of the tools' own behaviour).
    pub fn unprotected(workdir: impl Into<PathBuf>) -> Self {
        let mut workspace = Self::new(workdir, &ProtectedDefaults::default());
        workspace.protected.clear();
        workspace
    }

    /// Adds read-write roots (`--add-dir`, `[permissions] additional_directories`).
    #[must_use]
    pub fn with_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        self.roots
            .extend(roots.into_iter().map(|root| resolve_existing(&root)));
        self
    }

    /// Adds folders the tools may read without asking but never write.
    #[must_use]
    pub fn with_read_only_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        self.read_only_roots
            .extend(roots.into_iter().map(|root| resolve_existing(&root)));
        self
    }

    /// Protected paths the user's own config allows (`[permissions] allow_protected`): each
    /// path and everything beneath it is then treated like any other path (outside the roots,
    /// it still asks). `rule_hint` says where such a rule is written, for refusals.
    #[must_use]
    pub fn allowing(
        mut self,
        allowed: impl IntoIterator<Item = PathBuf>,
        rule_hint: impl Into<String>,
    ) -> Self {
        self.allowed
            .extend(allowed.into_iter().map(|path| resolve_existing(&path)));
        self.rule_hint = rule_hint.into();
        self
    }

    /// The working folder relative paths start from.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The working folder, resolved.
    pub fn resolved_workdir(&self) -> &Path {
        &self.resolved_workdir
    }

    /// The read-write roots, resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The read-only folders, resolved.
    pub fn read_only_roots(&self) -> &[PathBuf] {
        &self.read_only_roots
    }

    /// The protected paths, resolved.
    pub fn protected(&self) -> &[ProtectedPath] {
        &self.protected
    }

    /// `raw` as a tool was given it, made absolute against the working folder and resolved:
    /// symlinks followed and `..` applied as far as the path exists, the rest appended
    /// lexically (so a file about to be created resolves too).
    pub fn resolve(&self, raw: &str) -> PathBuf {
        let path = Path::new(raw);
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.workdir.join(path)
        };
        resolve_existing(&absolute)
    }

    /// Where the resolved `path` stands for `access`.
    /// warden's own read-only folders (its artifacts) come first: they may lie inside its
    /// protected state folder, and the model is pointed at them.
    pub fn place(&self, path: &Path, access: Access) -> Placement {
        let inside = |roots: &[PathBuf]| roots.iter().any(|root| path.starts_with(root));
        if access == Access::Read && inside(&self.read_only_roots) {
            return Placement::Inside;
        }
        if let Some(reason) = self.protection(path, access) {
            return Placement::Protected(reason);
        }
        if !self.is_allowed(path) {
            match access {
                Access::Read => {
                    if let Some(holds) = secret_file(path) {
                        return Placement::Secret(holds);
                    }
                }
                Access::Write => {
                    if let Some(runs) = self.runs_later(path) {
                        return Placement::RunsLater(runs);
                    }
                }
            }
        }
        if inside(&self.roots) {
            Placement::Inside
        } else if let Some(reason) = &self.confined {
            Placement::Protected(reason.clone())
        } else {
            Placement::Outside
        }
    }

    /// What runs `path` later, if it is a file that runs later inside a root: git's folder
    /// anywhere, the files in [`RUNS_LATER`] at a root's top, agent instruction files anywhere,
    /// and the operator's `[permissions] write_protected` entries.
    pub fn runs_later(&self, path: &Path) -> Option<String> {
        let relative = self
            .roots
            .iter()
            .filter_map(|root| path.strip_prefix(root).ok())
            .next()?;
        if relative
            .components()
            .any(|component| component.as_os_str() == ".git")
        {
            return Some("git runs its hooks and reads its config".to_owned());
        }
        if let Some(name) = relative.file_name().and_then(OsStr::to_str)
            && AGENT_INSTRUCTIONS.contains(&name)
        {
            return Some("agents read it as their instructions".to_owned());
        }
        if let Some((_, runs)) = RUNS_LATER
            .iter()
            .find(|(entry, _)| relative.starts_with(entry))
        {
            return Some((*runs).to_owned());
        }
        self.write_protected
            .iter()
            .any(|entry| relative.starts_with(entry))
            .then(|| "the operator protects it ([permissions] write_protected)".to_owned())
    }

    /// The paths of [`Workspace::runs_later`] under each root, as the bash sandbox keeps them
    /// read-only: git's folder, [`RUNS_LATER`], the agent instruction files at the top and the
    /// operator's entries (each whether it exists or not).
    pub fn runs_later_paths(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for root in &self.roots {
            out.push(root.join(".git"));
            out.extend(RUNS_LATER.iter().map(|(entry, _)| root.join(entry)));
            out.extend(AGENT_INSTRUCTIONS.iter().map(|name| root.join(name)));
            out.extend(self.write_protected.iter().map(|entry| root.join(entry)));
        }
        out.retain(|path| !self.is_allowed(path));
        out
    }

    /// What the credential file `path` holds, unless the user's config allows it.
    pub fn secret(&self, path: &Path) -> Option<&'static str> {
        (!self.is_allowed(path))
            .then(|| secret_file(path))
            .flatten()
    }

    /// Whether a walk (glob, grep) may enter or read `path`, an entry of a resolved folder:
    /// never a protected path, nor a symlink to one.
    pub fn walk_may_visit(&self, path: &Path, is_symlink: bool) -> bool {
        let resolved;
        let path = if is_symlink {
            resolved = resolve_existing(path);
            &resolved
        } else {
            path
        };
        !matches!(self.place(path, Access::Read), Placement::Protected(_))
    }

    /// Whether the user's config allows `path` (it lies beneath an `allow_protected` entry).
    pub fn is_allowed(&self, path: &Path) -> bool {
        self.allowed.iter().any(|allowed| path.starts_with(allowed))
    }

    /// Why `path` is refused, if it is protected and no user rule allows it.
    fn protection(&self, path: &Path, access: Access) -> Option<String> {
        if self.is_allowed(path) {
            return None;
        }
        let verb = match access {
            Access::Read => "read",
            Access::Write => "write",
        };
        if let Some(file) = proc_secret(path) {
            return Some(format!(
                "{} is a process's {file}, which warden's built-in tools never {verb}",
                path.display()
            ));
        }
        let hit = self
            .protected
            .iter()
            .find(|protected| path.starts_with(&protected.path))?;
        Some(format!(
            "{} is protected: {} holds {}, which warden's built-in tools never {verb} unless \
             your own config allows it; to allow it, add \"{}\" to {}",
            path.display(),
            hit.path.display(),
            hit.holds,
            path.display(),
            self.rule_hint
        ))
    }
}

/// The file name under `/proc/<pid>/` (or `/proc/<pid>/task/<tid>/`) that exposes a process's
/// secrets, if `path` is one.
fn proc_secret(path: &Path) -> Option<&str> {
    let mut components = path.components();
    if components.next() != Some(Component::RootDir)
        || components.next() != Some(Component::Normal(OsStr::new("proc")))
    {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    PROC_SECRETS.contains(&name).then_some(name)
}

/// Why a file cannot be read by a built-in tool.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("it is not a regular file (it is {0}); the built-in tools read regular files only")]
    NotRegular(&'static str),
    #[error(
        "it is {size} bytes, over the {limit}-byte limit; read parts of it with bash (head, tail, sed -n)"
    )]
    TooLarge { size: u64, limit: u64 },
    #[error("the read was cancelled")]
    Cancelled,
}

/// Reads a regular file of at most `limit` bytes, without ever blocking on a FIFO or a device
/// (it is opened non-blocking and checked before a byte is read), and stops between chunks when
/// `cancel` fires.
pub fn read_regular_file(
    path: &Path,
    limit: u64,
    cancel: Option<&tokio_util::sync::CancellationToken>,
) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a named pipe"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(ReadError::NotRegular(what));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        if cancel.is_some_and(|cancel| cancel.is_cancelled()) {
            return Err(ReadError::Cancelled);
        }
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() as u64 + n as u64 > limit {
            return Err(ReadError::TooLarge {
                size: out.len() as u64 + n as u64,
                limit,
            });
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// `path` (absolute) with symlinks followed and `..` applied as far as it exists; the part
/// that does not exist yet is appended with `.` dropped and `..` applied lexically.
pub fn resolve_existing(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    // Find the longest existing ancestor, resolve it, and re-apply the rest.
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut current = path;
    loop {
        match current.parent() {
            Some(parent) => {
                if let Some(name) = current.file_name() {
                    missing.push(name);
                } else if current.ends_with("..") {
                    missing.push(OsStr::new(".."));
                }
                if let Ok(resolved) = std::fs::canonicalize(parent) {
                    let mut out = resolved;
                    for part in missing.iter().rev() {
                        if *part == ".." {
                            out.pop();
                        } else {
                            out.push(part);
                        }
                    }
                    return out;
                }
                current = parent;
            }
            None => return lexical(path),
        }
    }
}

/// `path` with `.` dropped and `..` applied, without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn fixture() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let workspace = Workspace::new(
            &work,
            &ProtectedDefaults {
                home: Some(&home),
                ..ProtectedDefaults::default()
            },
        );
        (dir, workspace)
    }

    #[test]
    fn relative_paths_and_dot_dot_resolve_against_the_working_folder() {
        let (dir, workspace) = fixture();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(workspace.resolve("a/b.txt"), root.join("work/a/b.txt"));
        assert_eq!(
            workspace.resolve("../outside.txt"),
            root.join("outside.txt")
        );
        assert_eq!(
            workspace.place(&workspace.resolve("new/file.txt"), Access::Write),
            Placement::Inside
        );
        assert_eq!(
            workspace.place(&workspace.resolve("../outside.txt"), Access::Read),
            Placement::Outside
        );
        assert_eq!(
            workspace.place(&workspace.resolve("a/../../x"), Access::Read),
            Placement::Outside
        );
    }

    #[test]
    fn a_symlink_that_leaves_the_workspace_is_placed_where_it_points() {
        let (dir, workspace) = fixture();
        let work = dir.path().join("work");
        std::os::unix::fs::symlink(dir.path().join("home/.ssh/id_rsa"), work.join("key")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("home"), work.join("home")).unwrap();
        assert!(matches!(
            workspace.place(&workspace.resolve("key"), Access::Read),
            Placement::Protected(_)
        ));
        assert!(matches!(
            workspace.place(&workspace.resolve("home/.ssh/new"), Access::Write),
            Placement::Protected(_)
        ));
        assert_eq!(
            workspace.place(&workspace.resolve("home/notes.txt"), Access::Read),
            Placement::Outside
        );
    }

    #[test]
    fn protected_paths_are_refused_with_the_rule_that_would_allow_them() {
        let (dir, workspace) = fixture();
        let key = workspace.resolve(&dir.path().join("home/.ssh/id_rsa").display().to_string());
        let Placement::Protected(reason) = workspace.place(&key, Access::Read) else {
            panic!("not protected");
        };
        assert!(reason.contains("SSH keys"), "{reason}");
        assert!(reason.contains("allow_protected"), "{reason}");
        let allowed = workspace.clone().allowing(
            [dir.path().join("home/.ssh/id_rsa")],
            "[permissions] allow_protected in /x/config.toml",
        );
        assert_eq!(allowed.place(&key, Access::Read), Placement::Outside);
    }

    #[test]
    fn process_secrets_under_proc_are_protected() {
        let workspace = Workspace::new("/tmp", &ProtectedDefaults::default());
        for path in [
            "/proc/self/environ",
            "/proc/1/environ",
            "/proc/1/task/1/mem",
        ] {
            let resolved = workspace.resolve(path);
            assert!(
                matches!(
                    workspace.place(&resolved, Access::Read),
                    Placement::Protected(_)
                ),
                "{path}"
            );
        }
        assert_eq!(
            workspace.place(Path::new("/proc/cpuinfo"), Access::Read),
            Placement::Outside
        );
    }

    #[test]
    fn read_only_roots_admit_reads_but_not_writes() {
        let (dir, workspace) = fixture();
        let artifacts = dir.path().join("artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        let workspace = workspace.with_read_only_roots([artifacts.clone()]);
        let file = workspace.resolve(&artifacts.join("out.txt").display().to_string());
        assert_eq!(workspace.place(&file, Access::Read), Placement::Inside);
        assert_eq!(workspace.place(&file, Access::Write), Placement::Outside);
    }

    #[test]
    fn credential_files_are_known_by_name_wherever_they_lie_and_templates_are_not() {
        for path in [
            "/w/.env",
            "/w/app/.env.production",
            "/w/.envrc",
            "/home/u/.pgpass",
            "/w/deploy/id_ed25519",
            "/w/certs/server.key",
            "/w/tls/cert.pem",
            "/home/u/.kube/config",
            "/home/u/.docker/config.json",
            "/w/infra/prod.tfvars",
            "/home/u/.zsh_history",
            "/w/.netrc",
            "/home/u/.config/rclone/rclone.conf",
        ] {
            assert!(secret_file(Path::new(path)).is_some(), "{path}");
        }
        for path in [
            "/w/.env.example",
            "/w/.env.sample",
            "/w/.env.template",
            "/w/src/env.rs",
            "/w/deploy/id_ed25519.pub",
            "/w/config",
            "/w/README.md",
            "/w/.environment",
        ] {
            assert!(secret_file(Path::new(path)).is_none(), "{path}");
        }
    }

    #[test]
    fn a_credential_read_and_a_write_that_runs_later_are_placed_apart_and_allow_protected_lifts_them()
     {
        let (dir, workspace) = fixture();
        let work = std::fs::canonicalize(dir.path().join("work")).unwrap();
        let workspace = workspace.with_write_protected([PathBuf::from("scripts/deploy.sh")]);
        let env = work.join(".env");
        assert_eq!(
            workspace.place(&env, Access::Read),
            Placement::Secret("environment secrets")
        );
        assert_eq!(workspace.place(&env, Access::Write), Placement::Inside);
        for later in [
            ".git/hooks/post-checkout",
            ".git/config",
            "sub/.git/config",
            ".warden/config.toml",
            ".envrc",
            ".vscode/tasks.json",
            ".github/workflows/ci.yml",
            "AGENTS.md",
            "docs/CLAUDE.md",
            ".mcp.json",
            "scripts/deploy.sh",
        ] {
            assert!(
                matches!(
                    workspace.place(&work.join(later), Access::Write),
                    Placement::RunsLater(_)
                ),
                "{later}"
            );
            assert_ne!(
                workspace.place(&work.join(later), Access::Read),
                Placement::RunsLater(String::new()),
                "{later}: reading it is fine"
            );
        }
        for plain in [
            "src/main.rs",
            ".github/README.md",
            "scripts/build.sh",
            "gitignore",
        ] {
            assert_eq!(
                workspace.place(&work.join(plain), Access::Write),
                Placement::Inside,
                "{plain}"
            );
        }
        let lifted = workspace.allowing([env.clone(), work.join(".git")], "hint");
        assert_eq!(lifted.place(&env, Access::Read), Placement::Inside);
        assert_eq!(
            lifted.place(&work.join(".git/config"), Access::Write),
            Placement::Inside
        );
        let paths = lifted.runs_later_paths();
        assert!(!paths.contains(&work.join(".git")), "{paths:?}");
        assert!(paths.contains(&work.join("AGENTS.md")), "{paths:?}");
        assert!(paths.contains(&work.join("scripts/deploy.sh")), "{paths:?}");
    }
}
