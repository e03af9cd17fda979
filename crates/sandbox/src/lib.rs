//! warden's process sandbox: confines a child process (the agent's `bash`, skill scripts) with the
//! Linux kernel's own mechanisms and reports what the kernel actually enforces.
//!
//! A [`SandboxPolicy`] names what the child may touch; the kernel does the confining:
//!
//! - **Filesystem** — Landlock: read and execute beneath the readable roots
//!   ([`SandboxPolicy::readable_roots`]; everywhere when `None`) except the never-list
//!   ([`SandboxPolicy::readable_denied`]) and `/dev` (only `null`, `zero`, `full`, `tty`,
//!   `random`, `urandom` stay open: no `/dev/shm`, no `/dev/pts`); writes only beneath the writable roots, the private temp dir
//!   and the writable device files. A denied path inside a writable root stays denied. Landlock also
//!   keeps the child from ptrace-attaching to (or opening `/proc/<pid>/mem` of) processes outside
//!   its domain and, from ABI 6, from signalling them or reaching their abstract Unix sockets.
//!   Reading `/proc/<pid>/environ` is a weaker ptrace check that Landlock let through on the
//!   Linux 6.18 kernel this was tested on: the parent's environment is closed by the dropped capabilities (root) or a
//!   non-dumpable parent ([`make_non_dumpable`]); [`Enforcement::parent_environment`] says which.
//! - **Files that run later and hidden files** — a private mount namespace (a user namespace
//!   too, for an unprivileged caller) binds each existing [`SandboxPolicy::read_only_paths`]
//!   entry read-only over itself and `/dev/null` over each [`SandboxPolicy::hidden_files`] entry;
//!   [`Enforcement::protected_files`] says whether this machine allows it.
//! - **Network** — when [`NetworkPolicy::Denied`]: Landlock (ABI ≥ 4) refuses TCP bind and
//!   connect except the allowed connect ports; a seccomp filter refuses every socket that is not
//!   `AF_UNIX` or TCP (UDP, ICMP, raw, netlink…), TCP Fast Open sends (which Landlock does not see)
//!   and `io_uring_setup` (whose rings could open sockets behind the filter's back).
//! - **Privileges** — `no_new_privs`, and a root child loses every capability but a small
//!   file-owner set (so it cannot raise its rlimits, load modules, `mknod` a device or become
//!   another user; with `/dev` closed it cannot read a raw disk either).
//! - **Resources** — a per-command cgroup (v2 when delegated, else the v1 `pids` and `memory`
//!   hierarchies) caps processes and memory for the whole process tree; `RLIMIT_DATA` and
//!   `RLIMIT_CPU` cap each process.
//!
//! [`probe`] says what a policy would get on this machine without touching anything; [`prepare`]
//! builds everything in the parent (ruleset, filter, cgroup) and [`Prepared::apply`] installs a
//! `pre_exec` that only makes raw, async-signal-safe syscalls. Where the kernel lacks a feature,
//! [`prepare`] still succeeds and the [`Enforcement`] says plainly what is not enforced.
//! Keep the [`Prepared`] alive until the command has ended: dropping it kills whatever is left in
//! its cgroup and removes the cgroup.

mod enforcement;
mod policy;
mod prepared;

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod fs_rules;
#[cfg(target_os = "linux")]
mod host;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod sys;

pub use enforcement::{CgroupVersion, Enforcement, LandlockSupport, Limit, Protection, Rlimit};
pub use policy::{
    DEFAULT_MAX_PROCESSES, NetworkPolicy, ResourceLimits, SandboxError, SandboxMode, SandboxPolicy,
};
pub use prepared::{Prepared, make_non_dumpable, prepare, probe, raise_open_file_limit};
