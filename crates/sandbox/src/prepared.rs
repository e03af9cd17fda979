//! [`probe`] and [`prepare`]: the report alone, or everything built in the parent before fork,
//! and [`Prepared`], which installs the child's `pre_exec` step and owns the command's cgroup.

use std::path::PathBuf;

use crate::enforcement::Enforcement;
use crate::policy::{SandboxError, SandboxPolicy};

#[cfg(target_os = "linux")]
use std::sync::Arc;

#[cfg(target_os = "linux")]
use crate::{
    cgroup::{self, CommandCgroup, Controller, Request},
    enforcement::{Limit, Rlimit},
    fs_rules,
    host::{self, Host, KEEP_CAPABILITIES},
    policy::{NetworkPolicy, SandboxMode},
    seccomp,
    sys::{self, CapabilityDrop, ChildPlan, RawRlimit},
};

/// What `policy` would get on this machine. Reads kernel and cgroup state only: creates,
/// writes and spawns nothing.
pub fn probe(policy: &SandboxPolicy) -> Enforcement {
    #[cfg(target_os = "linux")]
    {
        host::plan(policy, &Host::detect(policy.mode))
    }
    #[cfg(not(target_os = "linux"))]
    {
        unsupported(policy)
    }
}

/// Raises this process's soft limit of open files to its hard limit (never lowers it), so a
/// server holding many connections is not cut off at the customary 1,024 while the system would
/// allow more; the limit before and after. A process-wide change, hence the caller's decision.
/// A no-op off Linux.
pub fn raise_open_file_limit() -> std::io::Result<(u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        let limit = sys::rlimit(libc::RLIMIT_NOFILE as libc::c_int)?;
        if limit.cur < limit.max {
            sys::set_rlimit(
                libc::RLIMIT_NOFILE as libc::c_int,
                sys::RawRlimit {
                    cur: limit.max,
                    max: limit.max,
                },
            )?;
            return Ok((limit.cur, limit.max));
        }
        Ok((limit.cur, limit.cur))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok((0, 0))
    }
}

/// Makes the calling process (warden) non-dumpable, so a sandboxed child of the same uid cannot
/// read its environment (`/proc/<pid>/environ`) or memory; reported as
/// [`Enforcement::parent_environment`]. A process-wide, one-way change with side effects (no core
/// dumps; the process's `/proc/<pid>` files become root-owned), hence the caller's decision and
/// never done by [`prepare`]. A no-op off Linux.
pub fn make_non_dumpable() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        sys::set_non_dumpable()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(())
    }
}

/// A sandbox ready to wrap one command: the Landlock ruleset, the seccomp program, the
/// capability and rlimit settings and the command's cgroup, all built in the parent.
///
/// Keep it alive until the command has ended. Dropping it kills every process left in its cgroup
/// (background jobs included) and removes the cgroup; this blocks for the few milliseconds that
/// takes (at most a few seconds if processes refuse to die).
#[derive(Debug)]
pub struct Prepared {
    enforcement: Enforcement,
    #[cfg(target_os = "linux")]
    plan: Option<Arc<ChildPlan>>,
    #[cfg(target_os = "linux")]
    cgroup: CommandCgroup,
}

/// Builds everything `policy` needs in the parent. A kernel lacking a feature is not an error:
/// the returned [`Prepared::enforcement`] says what is not enforced. Errors are bad paths (not
/// absolute, missing writable root or private temp dir) and a ruleset the kernel refuses.
pub fn prepare(policy: &SandboxPolicy) -> Result<Prepared, SandboxError> {
    #[cfg(target_os = "linux")]
    {
        prepare_linux(policy)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(Prepared {
            enforcement: unsupported(policy),
        })
    }
}

#[cfg(target_os = "linux")]
fn prepare_linux(policy: &SandboxPolicy) -> Result<Prepared, SandboxError> {
    let mut host = Host::detect(policy.mode);
    if policy.mode == SandboxMode::Off {
        return Ok(Prepared {
            enforcement: host::plan(policy, &host),
            plan: None,
            cgroup: CommandCgroup::default(),
        });
    }
    let resolved = fs_rules::resolve(policy)?;

    // The cgroup first: what cannot be set up downgrades the plan below. A pids cgroup is made
    // even without a process limit, to find and kill every process of the command.
    let mut requests = Vec::new();
    if let Ok(site) = &host.pids {
        requests.push(Request {
            controller: Controller::Pids,
            site,
            limit: policy.limits.max_processes,
        });
    }
    if let (Some(bytes), Ok(site)) = (policy.limits.memory_bytes, &host.memory) {
        requests.push(Request {
            controller: Controller::Memory,
            site,
            limit: Some(bytes),
        });
    }
    let created = cgroup::create(&requests);
    drop(requests);
    for (controller, reason) in created.failures {
        match controller {
            Controller::Pids => host.pids = Err(reason),
            Controller::Memory => host.memory = Err(reason),
        }
    }
    let mut enforcement = host::plan(policy, &host);

    // What the kernel unexpectedly refuses is marked on `host` and planned again, so the report
    // stays true.
    let mut landlock = None;
    if enforcement.filesystem.is_enforced() {
        let ports = match &policy.network {
            NetworkPolicy::Denied {
                allowed_tcp_connect_ports,
            } => Some(allowed_tcp_connect_ports.as_slice()),
            NetworkPolicy::Allowed => None,
        };
        landlock = fs_rules::ruleset(&resolved, ports)?;
        if landlock.is_none() {
            host.landlock = Err("the kernel refused a Landlock ruleset".to_owned());
            enforcement = host::plan(policy, &host);
        }
    }
    let mut seccomp = None;
    if let (Ok(kill), true) = (&host.seccomp, enforcement.other_sockets.is_enforced()) {
        // Landlock confines TCP ports from ABI 4; below it, seccomp refuses TCP sockets too.
        let landlock_tcp = enforcement.landlock.used_abi().is_some_and(|abi| abi >= 4);
        seccomp = seccomp::program(!landlock_tcp, *kill);
        if seccomp.is_none() {
            host.seccomp = Err("no seccomp program for this architecture".to_owned());
            enforcement = host::plan(policy, &host);
        }
    }

    let capabilities = enforcement
        .capabilities
        .is_enforced()
        .then(|| CapabilityDrop {
            keep: KEEP_CAPABILITIES,
            bounding_last_cap: host.bounding_last_cap(),
        });

    let mut rlimits = Vec::new();
    for limit in [
        &enforcement.processes,
        &enforcement.memory,
        &enforcement.cpu,
    ] {
        if let Limit::Enforced {
            max,
            rlimit: Some(which),
            ..
        } = limit
        {
            let (resource, hard) = match which {
                Rlimit::Nproc => (libc::RLIMIT_NPROC as libc::c_int, *max),
                Rlimit::Data => (libc::RLIMIT_DATA as libc::c_int, *max),
                // SIGXCPU at the soft limit, SIGKILL two seconds later.
                Rlimit::Cpu => (
                    libc::RLIMIT_CPU as libc::c_int,
                    max.saturating_add(2).min(host.hard.cpu),
                ),
            };
            rlimits.push((
                resource,
                RawRlimit {
                    cur: *max,
                    max: hard,
                },
            ));
        }
    }

    let mut mounts = None;
    if let (Ok(space), true) = (
        &host.mount_namespace,
        enforcement.protected_files.is_enforced(),
    ) {
        let plan =
            crate::mounts::MountPlan::new(space, &policy.read_only_paths, &policy.hidden_files)
                .map_err(|source| SandboxError::Path {
                    path: policy
                        .read_only_paths
                        .first()
                        .or(policy.hidden_files.first())
                        .cloned()
                        .unwrap_or_default(),
                    source,
                })?;
        mounts = (!plan.is_empty()).then_some(plan);
    }

    let plan = ChildPlan {
        cgroup_procs: created.procs,
        rlimits,
        no_new_privs: enforcement.no_new_privs,
        landlock,
        capabilities,
        seccomp,
        mounts,
    };
    Ok(Prepared {
        enforcement,
        plan: Some(Arc::new(plan)),
        cgroup: created.cgroup,
    })
}

impl Prepared {
    /// What the kernel enforces for this command.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Installs the sandbox as `command`'s `pre_exec` step (nothing in [`crate::SandboxMode::Off`]).
    /// Apply once per command; every command applied joins this sandbox's cgroup. If a step
    /// fails in the child, the spawn fails with its error.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        self.apply_std(command.as_std_mut());
    }

    /// [`Prepared::apply`] for a `std::process::Command`.
    pub fn apply_std(&self, command: &mut std::process::Command) {
        #[cfg(target_os = "linux")]
        if let Some(plan) = &self.plan {
            sys::install(command, Arc::clone(plan));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = command;
    }

    /// The command's cgroup directories (one per hierarchy; none without a usable cgroup).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        #[cfg(target_os = "linux")]
        {
            self.cgroup.paths().map(PathBuf::from).collect()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Vec::new()
        }
    }

    /// The pids of the processes in the command's cgroup (`None` without a cgroup).
    pub fn processes(&self) -> Option<Vec<u32>> {
        #[cfg(target_os = "linux")]
        {
            self.cgroup.paths().next()?;
            let members = self.cgroup.members().ok()?;
            Some(
                members
                    .into_iter()
                    .filter_map(|p| u32::try_from(p).ok())
                    .collect(),
            )
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Kills every process in the command's cgroup and waits until they are gone (new forks are
    /// refused first, so a fork bomb cannot outrun it; afterwards the cgroup admits no new
    /// process). Without a cgroup there is nothing to do: kill the child's process group instead.
    pub fn kill_all(&self) -> Result<(), SandboxError> {
        #[cfg(target_os = "linux")]
        {
            self.cgroup
                .kill_all()
                .map_err(|source| SandboxError::Cgroup {
                    path: self.cgroup_dirs().into_iter().next().unwrap_or_default(),
                    source,
                })
        }
        #[cfg(not(target_os = "linux"))]
        {
            Ok(())
        }
    }
}

/// The report off Linux: Landlock, seccomp and cgroups are Linux mechanisms.
#[cfg(not(target_os = "linux"))]
fn unsupported(policy: &SandboxPolicy) -> Enforcement {
    use crate::enforcement::{LandlockSupport, Limit, Protection};
    use crate::policy::{NetworkPolicy, SandboxMode};
    let landlock = LandlockSupport::Unavailable {
        reason: "not Linux".to_owned(),
    };
    let mut e = Enforcement::off(landlock);
    if policy.mode == SandboxMode::Off {
        return e;
    }
    e.mode = policy.mode;
    let not = || Protection::NotEnforced {
        reason: "the sandbox is Linux-only".to_owned(),
    };
    e.filesystem = not();
    e.scoping = not();
    e.capabilities = not();
    e.parent_environment = not();
    if !policy.read_only_paths.is_empty() || !policy.hidden_files.is_empty() {
        e.protected_files = not();
    }
    if let NetworkPolicy::Denied { .. } = policy.network {
        e.tcp = not();
        e.other_sockets = not();
    }
    let limit = |max: Option<u64>| match max {
        None => Limit::NotRequested,
        Some(max) => Limit::NotEnforced {
            max,
            reason: "the sandbox is Linux-only".to_owned(),
        },
    };
    e.processes = limit(policy.limits.max_processes);
    e.memory = limit(policy.limits.memory_bytes);
    e.cpu = limit(policy.limits.cpu_seconds);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_crosses_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Prepared>();
        send_sync::<Enforcement>();
    }
}
