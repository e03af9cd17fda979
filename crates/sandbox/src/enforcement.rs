//! The report of what the kernel actually enforces for a policy, and its one-line summary for a
//! session header or an audit record.

use std::fmt::Write as _;

use crate::policy::SandboxMode;

/// Whether Landlock is usable on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandlockSupport {
    /// `kernel_abi` is what the kernel offers; `used_abi` the part of it this crate uses (at most
    /// ABI 9: filesystem, TCP, scoping, Unix sockets by path).
    Available {
        kernel_abi: u32,
        used_abi: u32,
    },
    Unavailable {
        reason: String,
    },
}

impl LandlockSupport {
    /// The ABI whose features are enforced, if any.
    pub fn used_abi(&self) -> Option<u32> {
        match self {
            LandlockSupport::Available { used_abi, .. } => Some(*used_abi),
            LandlockSupport::Unavailable { .. } => None,
        }
    }
}

/// One protection and how far the kernel enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protection {
    /// The policy does not ask for it (mode off, network allowed…).
    NotRequested,
    /// The kernel enforces it.
    Enforced,
    /// The kernel enforces it, except for the named gap.
    Partial { gap: String },
    /// Asked for, not enforced, and why.
    NotEnforced { reason: String },
}

impl Protection {
    /// True when the kernel enforces it, fully or with a named gap.
    pub fn is_enforced(&self) -> bool {
        matches!(self, Protection::Enforced | Protection::Partial { .. })
    }
}

/// Which cgroup interface carries a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        }
    }
}

/// A per-process resource limit the child gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    Cpu,
    Data,
    Nproc,
}

impl Rlimit {
    pub fn as_str(self) -> &'static str {
        match self {
            Rlimit::Cpu => "RLIMIT_CPU",
            Rlimit::Data => "RLIMIT_DATA",
            Rlimit::Nproc => "RLIMIT_NPROC",
        }
    }
}

/// One resource limit and what enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    NotRequested,
    /// `max` (bytes, seconds or processes) is enforced by a cgroup for the whole process tree,
    /// by an rlimit on each process, or both; `note` names a caveat.
    Enforced {
        max: u64,
        cgroup: Option<CgroupVersion>,
        rlimit: Option<Rlimit>,
        note: Option<String>,
    },
    /// Asked for, not enforced, and why.
    NotEnforced {
        max: u64,
        reason: String,
    },
}

impl Limit {
    /// True when something in the kernel enforces the limit.
    pub fn is_enforced(&self) -> bool {
        matches!(self, Limit::Enforced { .. })
    }

    /// True when a cgroup caps the whole process tree at `max`.
    pub fn is_cgroup(&self, expected_max: u64) -> bool {
        matches!(self, Limit::Enforced { max, cgroup: Some(_), .. } if *max == expected_max)
    }
}

/// What the kernel actually enforces for one policy on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    pub mode: SandboxMode,
    pub landlock: LandlockSupport,
    /// `PR_SET_NO_NEW_PRIVS`: setuid binaries and file capabilities do not elevate the child.
    pub no_new_privs: bool,
    /// Reads outside the never-list, writes only where the policy allows (Landlock).
    pub filesystem: Protection,
    /// TCP bind refused, connect only to the allowed ports (Landlock ABI ≥ 4, or seccomp
    /// refusing every TCP socket when Landlock cannot filter ports).
    pub tcp: Protection,
    /// Every socket that is not `AF_UNIX` or TCP refused (seccomp).
    pub other_sockets: Protection,
    /// No signals to, and no abstract Unix sockets of, processes outside the sandbox (Landlock
    /// ABI ≥ 6).
    pub scoping: Protection,
    /// A root child keeps no capability beyond the file-owner set.
    pub capabilities: Protection,
    /// The read-only paths (files that run later) and hidden files (credentials in the
    /// workspace), through a private mount namespace.
    pub protected_files: Protection,
    /// The parent's environment and memory (`/proc/<pid>/environ`, `/proc/<pid>/mem`, ptrace),
    /// where warden's API keys live. Landlock refuses ptrace attach and `/proc/<pid>/mem` of
    /// processes outside the sandbox, but kernels differ on `/proc/<pid>/environ` (6.18 allows
    /// it); what closes it is a parent the child cannot match: a root parent holding capabilities
    /// the child lost, or a non-dumpable parent ([`crate::make_non_dumpable`]).
    pub parent_environment: Protection,
    pub processes: Limit,
    /// In bytes.
    pub memory: Limit,
    /// In seconds of CPU time per process.
    pub cpu: Limit,
}

impl Enforcement {
    /// The report for [`SandboxMode::Off`]: nothing is applied.
    pub(crate) fn off(landlock: LandlockSupport) -> Self {
        Enforcement {
            mode: SandboxMode::Off,
            landlock,
            no_new_privs: false,
            filesystem: Protection::NotRequested,
            tcp: Protection::NotRequested,
            other_sockets: Protection::NotRequested,
            scoping: Protection::NotRequested,
            capabilities: Protection::NotRequested,
            protected_files: Protection::NotRequested,
            parent_environment: Protection::NotRequested,
            processes: Limit::NotRequested,
            memory: Limit::NotRequested,
            cpu: Limit::NotRequested,
        }
    }

    /// True when nothing at all is applied to the child.
    pub fn enforces_nothing(&self) -> bool {
        !self.no_new_privs
            && ![
                &self.filesystem,
                &self.tcp,
                &self.other_sockets,
                &self.scoping,
                &self.capabilities,
                &self.protected_files,
                &self.parent_environment,
            ]
            .iter()
            .any(|p| p.is_enforced())
            && ![&self.processes, &self.memory, &self.cpu]
                .iter()
                .any(|l| l.is_enforced())
    }

    /// One line for a session header or an audit record, saying what is enforced and, plainly,
    /// what is not.
    pub fn summary(&self) -> String {
        let landlock = match &self.landlock {
            LandlockSupport::Available {
                kernel_abi,
                used_abi,
            } if kernel_abi == used_abi => format!("landlock ABI {kernel_abi}"),
            LandlockSupport::Available {
                kernel_abi,
                used_abi,
            } => format!("landlock ABI {kernel_abi} (using {used_abi})"),
            LandlockSupport::Unavailable { reason } => format!("landlock unavailable ({reason})"),
        };
        if self.mode == SandboxMode::Off {
            return format!(
                "sandbox off: nothing enforced (no filesystem, network, privilege or resource \
                 confinement; {landlock})"
            );
        }
        let mut line = format!("sandbox {}: {landlock}", self.mode);
        let mut push = |part: String| {
            let _ = write!(line, "; {part}");
        };
        if self.no_new_privs {
            push("no-new-privs".to_owned());
        }
        push(protection("filesystem", "confined", &self.filesystem));
        push(protection("tcp", "confined", &self.tcp));
        push(protection(
            "udp/raw/other sockets",
            "refused",
            &self.other_sockets,
        ));
        push(protection(
            "signals/abstract sockets",
            "scoped",
            &self.scoping,
        ));
        push(protection(
            "privileged capabilities",
            "dropped",
            &self.capabilities,
        ));
        push(protection(
            "files that run later and credentials",
            "read-only/hidden",
            &self.protected_files,
        ));
        push(protection(
            "parent environment",
            "protected",
            &self.parent_environment,
        ));
        push(limit("processes", &self.processes, |n| n.to_string()));
        push(limit("memory", &self.memory, bytes));
        push(limit("cpu", &self.cpu, |s| format!("{s} s")));
        line
    }
}

fn protection(what: &str, enforced: &str, protection: &Protection) -> String {
    match protection {
        Protection::NotRequested => format!("{what} not confined (not requested)"),
        Protection::Enforced => format!("{what} {enforced}"),
        Protection::Partial { gap } => format!("{what} {enforced} (gap: {gap})"),
        Protection::NotEnforced { reason } => format!("{what} NOT {enforced} ({reason})"),
    }
}

fn limit(what: &str, limit: &Limit, show: impl Fn(u64) -> String) -> String {
    match limit {
        Limit::NotRequested => format!("{what} unlimited"),
        Limit::Enforced {
            max,
            cgroup,
            rlimit,
            note,
        } => {
            let by: Vec<&str> = [
                cgroup.map(CgroupVersion::as_str),
                rlimit.map(Rlimit::as_str),
            ]
            .into_iter()
            .flatten()
            .collect();
            let note = note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default();
            format!("{what} max {} ({}{note})", show(*max), by.join(" + "))
        }
        Limit::NotEnforced { max, reason } => {
            format!("{what} NOT limited to {} ({reason})", show(*max))
        }
    }
}

fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB && n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else if n >= MIB {
        format!("{:.0} MiB", n as f64 / MIB as f64)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn off_says_nothing_is_enforced() {
        let e = Enforcement::off(LandlockSupport::Available {
            kernel_abi: 7,
            used_abi: 6,
        });
        assert!(e.enforces_nothing());
        assert!(e.summary().starts_with("sandbox off: nothing enforced"));
    }

    #[test]
    fn summary_names_gaps_and_mechanisms() {
        let mut e = Enforcement::off(LandlockSupport::Unavailable {
            reason: "ENOSYS".into(),
        });
        e.mode = SandboxMode::WorkspaceWrite;
        e.filesystem = Protection::NotEnforced {
            reason: "no Landlock".into(),
        };
        e.processes = Limit::Enforced {
            max: 64,
            cgroup: Some(CgroupVersion::V1),
            rlimit: None,
            note: None,
        };
        e.memory = Limit::Enforced {
            max: 1 << 30,
            cgroup: Some(CgroupVersion::V2),
            rlimit: Some(Rlimit::Data),
            note: None,
        };
        let s = e.summary();
        assert!(s.contains("filesystem NOT confined (no Landlock)"), "{s}");
        assert!(s.contains("processes max 64 (cgroup v1)"), "{s}");
        assert!(
            s.contains("memory max 1 GiB (cgroup v2 + RLIMIT_DATA)"),
            "{s}"
        );
        assert!(s.contains("cpu unlimited"), "{s}");
        assert!(!s.contains('\n'));
    }
}
