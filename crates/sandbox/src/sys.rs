//! The crate's only unsafe code: raw Linux syscalls for detection in the parent and the child's
//! `pre_exec` step, which makes nothing but async-signal-safe syscalls (no allocation, no lock, no
//! formatting) because the parent is a multi-threaded tokio program.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask `landlock_create_ruleset` for the ABI version.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two 32-bit words.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `struct rlimit64` as `prlimit64(2)` takes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRlimit {
    pub cur: u64,
    pub max: u64,
}

/// `RLIM_INFINITY`.
pub(crate) const RLIM_INFINITY: u64 = u64::MAX;

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The Landlock ABI the kernel offers, or why none.
pub(crate) fn landlock_abi() -> io::Result<u32> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only returns
    // the ABI number; nothing is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Whether this process is dumpable (`PR_GET_DUMPABLE`): a non-dumpable process's
/// `/proc/<pid>/environ` and memory are closed to same-uid processes without `CAP_SYS_PTRACE`.
pub(crate) fn dumpable() -> bool {
    let zero: libc::c_ulong = 0;
    // SAFETY: prctl(2) with integer arguments only.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, zero, zero, zero, zero) != 0 }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0).
pub(crate) fn set_non_dumpable() -> io::Result<()> {
    prctl(libc::PR_SET_DUMPABLE, 0)
}

/// Whether the kernel's seccomp filter mode knows `action` (`SECCOMP_GET_ACTION_AVAIL`); fails
/// when the kernel has no seccomp filters at all.
pub(crate) fn seccomp_action_available(action: u32) -> io::Result<()> {
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer, which points to a live
    // local; it changes nothing.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// This process's effective and permitted capability sets.
pub(crate) fn capabilities() -> io::Result<(u64, u64)> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget(2) with a version-3 header writes two CapData structs, which `data` holds.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let word = |f: fn(&CapData) -> u32| u64::from(f(&data[0])) | (u64::from(f(&data[1])) << 32);
    Ok((word(|d| d.effective), word(|d| d.permitted)))
}

/// The current limits of `resource` for this process.
pub(crate) fn rlimit(resource: libc::c_int) -> io::Result<RawRlimit> {
    let mut old = RawRlimit { cur: 0, max: 0 };
    // SAFETY: prlimit64(2) on ourselves (pid 0) with a null new limit only writes `old`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0 as libc::pid_t,
            resource,
            std::ptr::null::<RawRlimit>(),
            &mut old as *mut RawRlimit,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Sets the limits of `resource` for this process.
pub(crate) fn set_rlimit(resource: libc::c_int, limit: RawRlimit) -> io::Result<()> {
    // SAFETY: prlimit64(2) on ourselves (pid 0) reads one RawRlimit and writes nothing.
    let r = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0 as libc::pid_t,
            resource,
            &limit as *const RawRlimit,
            std::ptr::null_mut::<RawRlimit>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens `name` (relative to `dir`, or to the working directory) with `O_PATH`, the handle
/// Landlock rules take. With `nofollow` a final symbolic link is opened itself, not followed.
pub(crate) fn open_path(
    dir: Option<BorrowedFd<'_>>,
    name: &OsStr,
    nofollow: bool,
) -> io::Result<OwnedFd> {
    let name =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let dirfd: RawFd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    loop {
        // SAFETY: `name` is NUL-terminated and outlives the call; `dirfd` is AT_FDCWD or a
        // descriptor the caller keeps open; O_PATH needs no mode argument.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Whether this process may write into the directory `path` (`faccessat(W_OK, AT_EACCESS)`;
/// catches read-only mounts and missing permission).
pub(crate) fn writable(path: &Path) -> bool {
    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `path` is NUL-terminated and outlives the call.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// Sends `SIGKILL` to `pid`; a process already gone is not an error.
pub(crate) fn kill(pid: libc::pid_t) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: kill(2) with a positive pid signals exactly that process.
    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// Which capabilities the child keeps; every other one leaves its permitted, effective,
/// inheritable and ambient sets — and, when the parent may (`CAP_SETPCAP`), the bounding set.
/// With no_new_privs set, exec cannot hand a root child back what its permitted set lost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CapabilityDrop {
    pub keep: u64,
    /// The kernel's last capability, when the bounding set is to shrink too.
    pub bounding_last_cap: Option<u32>,
}

/// Everything the child does between fork and exec, built in the parent. Fields are plain data
/// and descriptors, so [`ChildPlan::apply`] allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct ChildPlan {
    /// `cgroup.procs` files (opened `O_WRONLY | O_CLOEXEC`); writing `0` moves the writer.
    pub cgroup_procs: Vec<OwnedFd>,
    pub rlimits: Vec<(libc::c_int, RawRlimit)>,
    pub no_new_privs: bool,
    /// A Landlock ruleset (`O_CLOEXEC`), enforced with `landlock_restrict_self(fd, 0)`.
    pub landlock: Option<OwnedFd>,
    pub capabilities: Option<CapabilityDrop>,
    pub seccomp: Option<Vec<libc::sock_filter>>,
    /// The private mount namespace: read-only and hidden paths.
    pub mounts: Option<crate::mounts::MountPlan>,
}

impl ChildPlan {
    /// Runs in the forked child, before exec: cgroups, rlimits, the mount namespace,
    /// no_new_privs, Landlock, capabilities, seccomp — in that order (rlimits and mounts before
    /// capabilities are dropped and before Landlock, which forbids mounting; seccomp last so it
    /// filters nothing of our own). Any failure aborts the spawn: a protection the
    /// report promises is never silently skipped.
    fn apply(&self) -> io::Result<()> {
        for fd in &self.cgroup_procs {
            // SAFETY: write(2) of one byte from a static buffer to a descriptor the plan owns.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        for (resource, limit) in &self.rlimits {
            // SAFETY: prlimit64(2) on ourselves reads one RawRlimit, which the plan holds.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_prlimit64,
                    0 as libc::pid_t,
                    *resource,
                    limit as *const RawRlimit,
                    std::ptr::null_mut::<RawRlimit>(),
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        if self.no_new_privs {
            prctl(libc::PR_SET_NO_NEW_PRIVS, 1)?;
        }
        if let Some(ruleset) = &self.landlock {
            // SAFETY: landlock_restrict_self(2) takes a ruleset descriptor the plan owns and no
            // pointer.
            let r = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(drop) = &self.capabilities {
            drop_capabilities(*drop)?;
        }
        if let Some(filter) = &self.seccomp {
            let program = libc::sock_fprog {
                len: u16::try_from(filter.len())
                    .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
                filter: filter.as_ptr().cast_mut(),
            };
            // SAFETY: the kernel copies `len` instructions from `filter`, which the plan keeps
            // alive; no_new_privs is set above, so an unprivileged child may install it.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &program as *const libc::sock_fprog,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Shrinks the bounding set (so exec cannot hand root its capabilities back), clears the ambient
/// set, and masks the permitted, effective and inheritable sets.
fn drop_capabilities(drop: CapabilityDrop) -> io::Result<()> {
    if let Some(last) = drop.bounding_last_cap {
        for cap in 0..=last.min(63) {
            if drop.keep & (1u64 << cap) == 0 {
                prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap))?;
            }
        }
    }
    // EINVAL: a kernel without ambient capabilities (< 4.3), where there is nothing to clear.
    if let Err(err) = prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    ) && err.raw_os_error() != Some(libc::EINVAL)
    {
        return Err(err);
    }
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget(2) with a version-3 header writes two CapData structs, which `data` holds.
    if unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let keep = [drop.keep as u32, (drop.keep >> 32) as u32];
    for (word, keep) in data.iter_mut().zip(keep) {
        word.effective &= keep;
        word.permitted &= keep;
        word.inheritable = 0;
    }
    header.version = LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    // SAFETY: capset(2) with a version-3 header reads two CapData structs from `data`.
    if unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// prctl(2) with one argument; the unused ones are passed as zero `unsigned long`s (a variadic
/// `int` would leave the upper halves of their registers undefined, and the kernel checks them).
fn prctl(option: libc::c_int, arg: libc::c_ulong) -> io::Result<()> {
    let zero: libc::c_ulong = 0;
    // SAFETY: prctl(2) with integer arguments only.
    if unsafe { libc::prctl(option, arg, zero, zero, zero) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The effective group id.
pub(crate) fn egid() -> u32 {
    // SAFETY: getegid(2) has no failure mode.
    unsafe { libc::getegid() }
}

/// The `f_flag` of statvfs(2) for `path`: how the mount it lies on is mounted.
pub(crate) fn statvfs_flags(path: &std::ffi::CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: struct statvfs is plain integers, for which all zeroes is a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(2) reads a NUL-terminated path and writes one struct statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.f_flag)
}

/// unshare(2): new namespaces for the calling process.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare(2) with flags only.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// mount(2) with no file system type and no data.
pub(crate) fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let source = source.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: mount(2) reads NUL-terminated strings the caller keeps alive.
    let r = unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// open(2), write(2) and close(2) of a small buffer: no allocation (safe between fork and exec).
pub(crate) fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open(2) of a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: write(2) from a buffer the caller owns, to the descriptor just opened.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let error = io::Error::last_os_error();
    // SAFETY: close(2) of the descriptor just opened.
    unsafe { libc::close(fd) };
    if usize::try_from(written).is_ok_and(|n| n == bytes.len()) {
        Ok(())
    } else {
        Err(error)
    }
}

/// Runs `check` in a forked child, which exits 0 when it returns true, and waits for it. `check`
/// must only make async-signal-safe calls (the parent may be multi-threaded).
pub(crate) fn fork_and_wait(check: impl Fn() -> bool) -> io::Result<bool> {
    // SAFETY: the child runs `check` (raw syscalls on data built before the fork) and _exit(2)s
    // without running the parent's destructors.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = i32::from(!check());
            // SAFETY: _exit(2) ends the forked child at once.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child, writing one int.
            let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
            if waited != pid {
                return Err(io::Error::last_os_error());
            }
            Ok(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)
        }
    }
}

/// Installs `plan` as the command's `pre_exec` step.
pub(crate) fn install(command: &mut std::process::Command, plan: Arc<ChildPlan>) {
    // SAFETY: the closure runs between fork and exec in a copy of a multi-threaded process; it
    // only reads `plan` (no allocation, no lock) and makes raw syscalls, which are
    // async-signal-safe. `io::Error::last_os_error` reads errno without allocating.
    unsafe {
        command.pre_exec(move || plan.apply());
    }
}
