//! The child's private mount namespace: paths inside the writable roots bound read-only over
//! themselves (files that run later), and `/dev/null` bound read-only over each hidden file
//! (credentials inside the workspace: read, it is empty). Built in the parent as plain bytes;
//! the child only makes raw syscalls.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::sys;

/// How this process can give a child a mount namespace of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountNamespace {
    /// Root with `CAP_SYS_ADMIN`: a mount namespace alone.
    Privileged,
    /// Anyone else, where the kernel lets an unprivileged user namespace mount: a user namespace
    /// mapping the caller's own uid and gid, and a mount namespace inside it.
    UserNamespace { uid: u32, gid: u32 },
}

const CAP_SYS_ADMIN: u64 = 1 << 21;

/// Which namespace this process can give its children, or why none (probed once per process
/// for an unprivileged user: a forked child tries it and reports).
pub(crate) fn available(uid: u32, effective_caps: Option<u64>) -> Result<MountNamespace, String> {
    if uid == 0 && effective_caps.is_some_and(|caps| caps & CAP_SYS_ADMIN != 0) {
        return Ok(MountNamespace::Privileged);
    }
    static PROBED: OnceLock<Result<MountNamespace, String>> = OnceLock::new();
    PROBED.get_or_init(probe_user_namespace).clone()
}

/// Forks a child that does what a sandboxed child would (a user and mount namespace, a
/// read-only bind) and exits with its verdict.
fn probe_user_namespace() -> Result<MountNamespace, String> {
    let space = MountNamespace::UserNamespace {
        uid: sys::euid(),
        gid: sys::egid(),
    };
    let plan = MountPlan::new(&space, &[PathBuf::from("/")], &[])
        .map_err(|error| format!("cannot prepare a mount namespace: {error}"))?;
    match sys::fork_and_wait(|| plan.apply().is_ok()) {
        Ok(true) => Ok(space),
        Ok(false) => Err(
            "the kernel refuses an unprivileged user namespace a read-only bind \
                          mount (user namespaces disabled or restricted)"
                .to_owned(),
        ),
        Err(error) => Err(format!("fork: {error}")),
    }
}

/// One bind mount: `source` over `target`, then read-only with the flags the kernel keeps locked.
#[derive(Debug)]
struct Bind {
    source: CString,
    target: CString,
    /// `MS_NOSUID`, `MS_NODEV`, `MS_NOEXEC` and the atime flags of the mount it lies on: a
    /// remount inside a user namespace must keep them.
    kept_flags: libc::c_ulong,
}

/// Everything the child does to its mount namespace, as bytes.
#[derive(Debug)]
pub(crate) struct MountPlan {
    /// For a user namespace: `/proc/self/uid_map` and `gid_map` lines.
    user_maps: Option<(Vec<u8>, Vec<u8>)>,
    binds: Vec<Bind>,
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// The flags a remount of `path`'s mount must keep.
fn locked_flags(path: &Path) -> io::Result<libc::c_ulong> {
    let flags = sys::statvfs_flags(&c_path(path)?)?;
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(pairs
        .iter()
        .filter(|(st, _)| flags & st != 0)
        .fold(0, |out, (_, ms)| out | ms))
}

impl MountPlan {
    /// The plan for `space`: each existing path of `read_only` bound read-only over itself, and
    /// `/dev/null` bound read-only over each existing file of `hidden`.
    pub(crate) fn new(
        space: &MountNamespace,
        read_only: &[PathBuf],
        hidden: &[PathBuf],
    ) -> io::Result<Self> {
        let empty = Path::new("/dev/null");
        let user_maps = match space {
            MountNamespace::Privileged => None,
            MountNamespace::UserNamespace { uid, gid } => Some((
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )),
        };
        let mut binds = Vec::new();
        for path in read_only {
            if path.symlink_metadata().is_ok() {
                binds.push(Bind {
                    source: c_path(path)?,
                    target: c_path(path)?,
                    kept_flags: locked_flags(path)?,
                });
            }
        }
        for path in hidden {
            if path.metadata().is_ok_and(|meta| meta.is_file()) {
                binds.push(Bind {
                    source: c_path(empty)?,
                    target: c_path(path)?,
                    kept_flags: locked_flags(empty)?,
                });
            }
        }
        Ok(Self { user_maps, binds })
    }

    /// Whether there is anything to mount.
    pub(crate) fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// In the forked child: a new mount namespace (inside a new user namespace when
    /// unprivileged), made private so nothing propagates back, then the binds.
    pub(crate) fn apply(&self) -> io::Result<()> {
        let flags = match self.user_maps {
            Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
            None => libc::CLONE_NEWNS,
        };
        sys::unshare(flags)?;
        if let Some((uid_map, gid_map)) = &self.user_maps {
            sys::write_file(c"/proc/self/setgroups", b"deny")?;
            sys::write_file(c"/proc/self/uid_map", uid_map)?;
            sys::write_file(c"/proc/self/gid_map", gid_map)?;
        }
        sys::mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        for bind in &self.binds {
            sys::mount(
                Some(&bind.source),
                &bind.target,
                libc::MS_BIND | libc::MS_REC,
            )?;
            sys::mount(
                None,
                &bind.target,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | bind.kept_flags,
            )?;
        }
        Ok(())
    }
}
