//! What this machine offers (Landlock ABI, seccomp, capabilities, cgroups, rlimits), read without
//! side effects, and the plan: which protections a policy gets here.

use std::fs;

use crate::cgroup::{self, Controller, Site};
use crate::enforcement::{Enforcement, LandlockSupport, Limit, Protection, Rlimit};
use crate::fs_rules::ABI_USED_NUMBER;
use crate::mounts::{self, MountNamespace};
use crate::policy::{NetworkPolicy, SandboxMode, SandboxPolicy};
use crate::seccomp;
use crate::sys::{self, RLIM_INFINITY};

/// Capabilities a child keeps: file ownership and modes (root's everyday file work in the
/// workspace), binding low ports (which Landlock refuses anyway when the network is denied) and
/// audit writes. Everything else goes: `CAP_SYS_ADMIN`, `CAP_SYS_RESOURCE` (raising rlimits),
/// `CAP_SYS_RAWIO`, `CAP_MKNOD`, `CAP_NET_RAW`, `CAP_DAC_READ_SEARCH` (`open_by_handle_at`),
/// `CAP_SYS_MODULE`, `CAP_SYS_PTRACE`, and `CAP_SETUID`/`CAP_SETGID`/`CAP_KILL` (becoming, or
/// signalling, another user whose processes it could then read).
pub(crate) const KEEP_CAPABILITIES: u64 = (1 << 0) // CAP_CHOWN
    | (1 << 1) // CAP_DAC_OVERRIDE
    | (1 << 3) // CAP_FOWNER
    | (1 << 4) // CAP_FSETID
    | (1 << 10) // CAP_NET_BIND_SERVICE
    | (1 << 29); // CAP_AUDIT_WRITE
const CAP_SETPCAP: u32 = 8;

/// The Landlock ABI that first has TCP rules, scoping, and Unix-socket rules.
const ABI_TCP: u32 = 4;
const ABI_SCOPING: u32 = 6;
const ABI_UNIX_SOCKETS: u32 = 9;

/// What the kernel offers this process.
#[derive(Debug)]
pub(crate) struct Host {
    pub uid: u32,
    pub landlock: Result<u32, String>,
    /// The action for a foreign architecture, when seccomp filters are usable.
    pub seccomp: Result<u32, String>,
    /// Effective and permitted capability sets.
    pub capabilities: Result<(u64, u64), String>,
    /// `/proc/sys/kernel/cap_last_cap`.
    pub last_cap: Option<u32>,
    pub pids: Result<Site, String>,
    pub memory: Result<Site, String>,
    pub hard: HardLimits,
    /// Whether this process (the parent) is dumpable.
    pub dumpable: bool,
    /// How a child gets a mount namespace of its own, or why it cannot.
    pub mount_namespace: Result<MountNamespace, String>,
}

/// The current hard rlimits: a non-root child cannot go above them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HardLimits {
    pub cpu: u64,
    pub data: u64,
    pub nproc: u64,
}

impl Host {
    /// Reads what the kernel offers; changes nothing. Cgroups are only looked up for a confined
    /// mode.
    pub(crate) fn detect(mode: SandboxMode) -> Host {
        let landlock = sys::landlock_abi().map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSYS) => "not built into this kernel".to_owned(),
            Some(libc::EOPNOTSUPP) => "disabled at boot (not in the lsm= list)".to_owned(),
            _ => e.to_string(),
        });
        let seccomp = match seccomp::AUDIT_ARCH {
            None => Err("no seccomp filter for this architecture".to_owned()),
            Some(_) => match sys::seccomp_action_available(libc::SECCOMP_RET_KILL_PROCESS) {
                Ok(()) => Ok(libc::SECCOMP_RET_KILL_PROCESS),
                Err(_) => sys::seccomp_action_available(libc::SECCOMP_RET_ERRNO)
                    .map(|()| libc::SECCOMP_RET_KILL_THREAD)
                    .map_err(|e| format!("seccomp filters unavailable: {e}")),
            },
        };
        let (pids, memory) = if mode == SandboxMode::Off {
            let off = || Err("sandbox off".to_owned());
            (off(), off())
        } else {
            (
                cgroup::locate(Controller::Pids),
                cgroup::locate(Controller::Memory),
            )
        };
        let hard = |resource| {
            sys::rlimit(resource)
                .map(|l| l.max)
                .unwrap_or(RLIM_INFINITY)
        };
        let uid = sys::euid();
        let capabilities = sys::capabilities().map_err(|e| format!("capget: {e}"));
        let mount_namespace = if mode == SandboxMode::Off {
            Err("sandbox off".to_owned())
        } else {
            mounts::available(
                uid,
                capabilities.as_ref().ok().map(|(effective, _)| *effective),
            )
        };
        Host {
            uid,
            landlock,
            seccomp,
            capabilities,
            mount_namespace,
            last_cap: fs::read_to_string("/proc/sys/kernel/cap_last_cap")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            pids,
            memory,
            hard: HardLimits {
                cpu: hard(libc::RLIMIT_CPU as libc::c_int),
                data: hard(libc::RLIMIT_DATA as libc::c_int),
                nproc: hard(libc::RLIMIT_NPROC as libc::c_int),
            },
            dumpable: sys::dumpable(),
        }
    }

    /// The kernel's last capability, when this process may shrink a child's bounding set.
    pub(crate) fn bounding_last_cap(&self) -> Option<u32> {
        let (effective, _) = self.capabilities.as_ref().ok()?;
        (effective & (1 << CAP_SETPCAP) != 0).then_some(self.last_cap?)
    }
}

/// Which protections `policy` gets on `host`. Pure: [`crate::probe`] and [`crate::prepare`]
/// share it, the latter after marking what it failed to set up.
pub(crate) fn plan(policy: &SandboxPolicy, host: &Host) -> Enforcement {
    let landlock = match &host.landlock {
        Ok(kernel_abi) => LandlockSupport::Available {
            kernel_abi: *kernel_abi,
            used_abi: (*kernel_abi).min(ABI_USED_NUMBER),
        },
        Err(reason) => LandlockSupport::Unavailable {
            reason: reason.clone(),
        },
    };
    if policy.mode == SandboxMode::Off {
        return Enforcement::off(landlock);
    }
    let abi = landlock.used_abi();
    let no_landlock = || Protection::NotEnforced {
        reason: "Landlock unavailable".to_owned(),
    };
    let filesystem = match abi {
        None => no_landlock(),
        Some(abi) => {
            let mut gaps = Vec::new();
            if abi < 3 {
                gaps.push("truncate(2) is not mediated before Landlock ABI 3");
            }
            if abi < 5 {
                gaps.push("device ioctls are not mediated before Landlock ABI 5");
            }
            if abi < ABI_UNIX_SOCKETS {
                gaps.push(
                    "Unix sockets stay connectable by path, even under the never-list \
                     (Landlock ABI 9 mediates them)",
                );
            }
            if gaps.is_empty() {
                Protection::Enforced
            } else {
                Protection::Partial {
                    gap: gaps.join("; "),
                }
            }
        }
    };
    let scoping = match abi {
        None => no_landlock(),
        Some(abi) if abi >= ABI_SCOPING => Protection::Enforced,
        Some(abi) => Protection::NotEnforced {
            reason: format!("needs Landlock ABI {ABI_SCOPING}, the kernel has {abi}"),
        },
    };
    let (tcp, other_sockets) = match &policy.network {
        NetworkPolicy::Allowed => (Protection::NotRequested, Protection::NotRequested),
        NetworkPolicy::Denied {
            allowed_tcp_connect_ports: ports,
        } => {
            let landlock_tcp = abi.is_some_and(|a| a >= ABI_TCP);
            let tcp = match (&host.seccomp, landlock_tcp) {
                (_, true) => Protection::Enforced,
                (Ok(_), false) if ports.is_empty() => Protection::Enforced,
                (Ok(_), false) => Protection::Partial {
                    gap: format!(
                        "Landlock cannot filter TCP ports here (needs ABI {ABI_TCP}), so seccomp \
                         refuses every TCP socket, allowed ports {ports:?} included"
                    ),
                },
                (Err(reason), false) => Protection::NotEnforced {
                    reason: format!(
                        "Landlock has no TCP rules here (needs ABI {ABI_TCP}) and {reason}"
                    ),
                },
            };
            let other = match &host.seccomp {
                Ok(_) => Protection::Enforced,
                Err(reason) => Protection::NotEnforced {
                    reason: reason.clone(),
                },
            };
            (tcp, other)
        }
    };
    let capabilities = match &host.capabilities {
        Ok(_) => Protection::Enforced,
        Err(reason) => Protection::NotEnforced {
            reason: reason.clone(),
        },
    };
    let privileged_root = host.uid == 0
        && capabilities.is_enforced()
        && host
            .capabilities
            .as_ref()
            .is_ok_and(|(_, permitted)| permitted & !KEEP_CAPABILITIES != 0);
    let parent_environment = if privileged_root {
        // The child lost capabilities the parent holds, so ptrace_may_access refuses it.
        Protection::Enforced
    } else if !host.dumpable {
        Protection::Partial {
            gap: format!(
                "other processes of uid {} (MCP servers…) stay readable through \
                 /proc/<pid>/environ",
                host.uid
            ),
        }
    } else {
        Protection::NotEnforced {
            reason: format!(
                "processes of uid {}, warden included, stay readable through \
                 /proc/<pid>/environ (Landlock refuses ptrace attach and /proc/<pid>/mem only); \
                 make the parent non-dumpable",
                host.uid
            ),
        }
    };
    let limits = policy.limits;
    let processes = match (limits.max_processes, &host.pids) {
        (None, _) => Limit::NotRequested,
        (Some(max), Ok(site)) => Limit::Enforced {
            max,
            cgroup: Some(site.version),
            rlimit: None,
            note: None,
        },
        (Some(max), Err(reason)) if host.uid != 0 => Limit::Enforced {
            max: max.min(host.hard.nproc),
            cgroup: None,
            rlimit: Some(Rlimit::Nproc),
            note: Some(format!(
                "counts every process of uid {}, not only this command's; no cgroup: {reason}",
                host.uid
            )),
        },
        (Some(max), Err(reason)) => Limit::NotEnforced {
            max,
            reason: format!(
                "no usable pids cgroup ({reason}); the kernel ignores RLIMIT_NPROC for root"
            ),
        },
    };
    let memory = match (limits.memory_bytes, &host.memory) {
        (None, _) => Limit::NotRequested,
        (Some(max), Ok(site)) => Limit::Enforced {
            max,
            cgroup: Some(site.version),
            rlimit: Some(Rlimit::Data),
            note: None,
        },
        (Some(max), Err(reason)) => Limit::Enforced {
            max: max.min(host.hard.data),
            cgroup: None,
            rlimit: Some(Rlimit::Data),
            note: Some(format!("per process; no cgroup: {reason}")),
        },
    };
    let cpu = match limits.cpu_seconds {
        None => Limit::NotRequested,
        Some(max) => Limit::Enforced {
            max: max.min(host.hard.cpu),
            cgroup: None,
            rlimit: Some(Rlimit::Cpu),
            note: Some("per process".to_owned()),
        },
    };
    let protected_files = if policy.read_only_paths.is_empty() && policy.hidden_files.is_empty() {
        Protection::NotRequested
    } else {
        match &host.mount_namespace {
            Ok(_) => Protection::Enforced,
            Err(reason) => Protection::NotEnforced {
                reason: format!("no private mount namespace: {reason}"),
            },
        }
    };
    Enforcement {
        mode: policy.mode,
        landlock,
        no_new_privs: true,
        filesystem,
        tcp,
        other_sockets,
        scoping,
        capabilities,
        protected_files,
        parent_environment,
        processes,
        memory,
        cpu,
    }
}
