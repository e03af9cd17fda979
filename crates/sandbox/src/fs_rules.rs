//! The Landlock ruleset: read, execute (and, from ABI 9, connect to Unix sockets) beneath the
//! readable roots (everywhere when the policy names none) but the never-list and `/dev`, write beneath the writable roots, TCP connect only to the allowed
//! ports, signals and abstract Unix sockets scoped to the sandbox.
//!
//! Landlock rules only ever add access, so "everywhere but X" is built by granting `/` minus X:
//! for each denied path, the walk from `/` down to it grants every sibling entry at each level
//! except the one leading to the denied path. Symbolic links met on the walk are never granted
//! (granting one would grant its target); their targets are covered where they live. An entry
//! created later in a walked directory is not granted, so a denied path that does not exist yet
//! stays unreachable once created.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::policy::{SandboxError, SandboxMode, SandboxPolicy};
use crate::sys;

/// The newest Landlock ABI whose features this crate asks for: filesystem (1–3, 5), TCP (4),
/// scoping (6), connecting to Unix sockets by path (9). Rights a kernel lacks are dropped by the
/// `landlock` crate's best-effort mode; [`crate::Enforcement`] reports which.
const ABI_USED: ABI = ABI::V9;
pub(crate) const ABI_USED_NUMBER: u32 = 9;

/// Device files the child may read, write and `ioctl` (terminal queries on `/dev/tty`).
const DEVICES_READ_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// Device files the child may read. Every other device stays closed: a root child could otherwise
/// read a raw disk and bypass the never-list.
const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// The policy's paths, absolute and with symbolic links resolved.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub denied: Vec<PathBuf>,
    /// Where reads are granted (`/` when the policy names no readable roots), resolved; roots
    /// that do not exist are left out.
    pub readable: Vec<PathBuf>,
    /// The writable roots (in workspace-write mode) and the private temp dir.
    pub writable: Vec<PathBuf>,
}

/// Checks and resolves the policy's paths: every path absolute and free of `..`; the writable
/// roots and the private temp dir must exist; a denied path need not.
pub(crate) fn resolve(policy: &SandboxPolicy) -> Result<Resolved, SandboxError> {
    let mut denied = Vec::new();
    for path in &policy.readable_denied {
        check(path)?;
        let resolved = canonical_lenient(path);
        if resolved == Path::new("/") {
            return Err(SandboxError::InvalidPath { path: path.clone() });
        }
        denied.push(resolved);
    }
    check(&policy.private_tmp)?;
    let tmp = canonical(&policy.private_tmp)?;
    if let Some(d) = denied.iter().find(|d| tmp.starts_with(d)) {
        return Err(SandboxError::PrivateTmpDenied {
            path: policy.private_tmp.clone(),
            denied: d.clone(),
        });
    }
    let mut writable = Vec::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        for root in &policy.writable_roots {
            check(root)?;
            writable.push(canonical(root)?);
        }
    }
    writable.push(tmp);
    let readable = match &policy.readable_roots {
        None => vec![PathBuf::from("/")],
        Some(roots) => {
            let mut readable = Vec::new();
            for root in roots {
                check(root)?;
                if let Ok(resolved) = fs::canonicalize(root) {
                    readable.push(resolved);
                }
            }
            // The writable roots, in read-only mode too, stay readable.
            for root in &policy.writable_roots {
                if let Ok(resolved) = fs::canonicalize(root) {
                    readable.push(resolved);
                }
            }
            readable
        }
    };
    Ok(Resolved {
        denied,
        readable,
        writable,
    })
}

fn check(path: &Path) -> Result<(), SandboxError> {
    if path.is_absolute() && !path.components().any(|c| c == Component::ParentDir) {
        Ok(())
    } else {
        Err(SandboxError::InvalidPath {
            path: path.to_path_buf(),
        })
    }
}

fn canonical(path: &Path) -> Result<PathBuf, SandboxError> {
    fs::canonicalize(path).map_err(|source| SandboxError::Path {
        path: path.to_path_buf(),
        source,
    })
}

/// The canonical form of the longest existing prefix, followed by the rest as written.
fn canonical_lenient(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(mut resolved) = fs::canonicalize(&existing) {
            resolved.extend(tail.iter().rev());
            return resolved;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Builds the ruleset and returns its descriptor (`None` when the kernel has no Landlock).
/// `tcp_ports` is `Some` when the network is denied: TCP bind is refused and connect allowed to
/// these ports only.
pub(crate) fn ruleset(
    resolved: &Resolved,
    tcp_ports: Option<&[u16]>,
) -> Result<Option<OwnedFd>, SandboxError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_USED))?;
    if tcp_ports.is_some() {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_USED))?;
    }
    let mut created = ruleset.scope(Scope::from_all(ABI_USED))?.create()?;

    // Connecting to a Unix socket by path counts as reading here: allowed outside the never-list.
    let read = AccessFs::from_read(ABI_USED) | AccessFs::ResolveUnix;
    let write = read
        | (AccessFs::from_write(ABI_USED)
            & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev));
    let mut read_denied = resolved.denied.clone();
    read_denied.push(PathBuf::from("/dev"));
    for root in &resolved.readable {
        grant(&mut created, root, read, &read_denied)?;
    }

    let device_rw =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let devices = DEVICES_READ_WRITE.iter().map(|d| (d, device_rw)).chain(
        DEVICES_READ
            .iter()
            .map(|d| (d, AccessFs::ReadFile | AccessFs::IoctlDev)),
    );
    for (device, access) in devices {
        grant(&mut created, Path::new(device), access, &resolved.denied)?;
    }
    for root in &resolved.writable {
        grant(&mut created, root, write, &resolved.denied)?;
    }
    for port in tcp_ports.unwrap_or_default() {
        (&mut created).add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
    }
    Ok(created.into())
}

/// Grants `access` beneath `root`, except beneath the denied paths.
fn grant(
    ruleset: &mut RulesetCreated,
    root: &Path,
    access: BitFlags<AccessFs>,
    denied: &[PathBuf],
) -> Result<(), SandboxError> {
    if denied.iter().any(|d| root.starts_with(d)) {
        return Ok(());
    }
    let fd = match sys::open_path(None, root.as_os_str(), false) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SandboxError::Path {
                path: root.to_path_buf(),
                source,
            });
        }
    };
    let beneath: Vec<&Path> = denied
        .iter()
        .filter(|d| d.starts_with(root))
        .map(PathBuf::as_path)
        .collect();
    grant_fd(ruleset, fd, root, access, &beneath)
}

/// Grants `access` on the hierarchy behind `fd` (at `path`), splitting around `beneath`: the
/// denied paths under it. Entries are opened relative to their directory's descriptor without
/// following links, so a directory swapped for a link during the walk is skipped, not followed.
fn grant_fd(
    ruleset: &mut RulesetCreated,
    fd: OwnedFd,
    path: &Path,
    access: BitFlags<AccessFs>,
    beneath: &[&Path],
) -> Result<(), SandboxError> {
    let file = File::from(fd);
    let Ok(meta) = file.metadata() else {
        return Ok(());
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Ok(());
    }
    let fd = OwnedFd::from(file);
    if beneath.is_empty() {
        let access = if kind.is_dir() {
            access
        } else {
            access & AccessFs::from_file(ABI_USED)
        };
        (&mut *ruleset).add_rule(PathBeneath::new(fd, access))?;
        return Ok(());
    }
    if !kind.is_dir() {
        return Ok(());
    }
    // The directory as this descriptor holds it, not as the path names it now.
    let listing = fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|source| {
        SandboxError::Path {
            path: path.to_path_buf(),
            source,
        }
    })?;
    for entry in listing.flatten() {
        let name = entry.file_name();
        let child = path.join(&name);
        if beneath.contains(&child.as_path()) {
            continue;
        }
        let below: Vec<&Path> = beneath
            .iter()
            .copied()
            .filter(|d| d.starts_with(&child))
            .collect();
        // Gone or unopenable since the listing: nothing to grant.
        let Ok(child_fd) = sys::open_path(Some(fd.as_fd()), &name, true) else {
            continue;
        };
        grant_fd(ruleset, child_fd, &child, access, &below)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_be_absolute_and_plain() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = SandboxPolicy::new(dir.path());
        policy.readable_denied = vec![PathBuf::from("relative/.ssh")];
        assert!(matches!(
            resolve(&policy),
            Err(SandboxError::InvalidPath { .. })
        ));
        policy.readable_denied = vec![dir.path().join("a/../b")];
        assert!(matches!(
            resolve(&policy),
            Err(SandboxError::InvalidPath { .. })
        ));
        policy.readable_denied = vec![PathBuf::from("/")];
        assert!(matches!(
            resolve(&policy),
            Err(SandboxError::InvalidPath { .. })
        ));
        policy.readable_denied = vec![dir.path().to_path_buf()];
        assert!(matches!(
            resolve(&policy),
            Err(SandboxError::PrivateTmpDenied { .. })
        ));
        policy.readable_denied = vec![];
        policy.writable_roots = vec![dir.path().join("missing")];
        assert!(matches!(resolve(&policy), Err(SandboxError::Path { .. })));
    }

    #[test]
    fn denied_paths_resolve_links_and_may_not_exist_yet() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let canonical_dir = fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            canonical_lenient(&dir.path().join("link/not/yet")),
            canonical_dir.join("real/not/yet")
        );
    }
}
