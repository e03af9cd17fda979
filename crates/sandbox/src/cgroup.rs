//! Per-command cgroups: where the `pids` and `memory` controllers can be used (a delegated cgroup
//! v2 subtree, else the v1 hierarchies), one cgroup per command with its limits, killing every
//! process in it, and removing it.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::enforcement::CgroupVersion;
use crate::sys;

/// How long [`CommandCgroup::kill_all`] keeps killing before it gives up.
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// A cgroup controller the sandbox uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// Where a command's cgroup for one controller can be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Site {
    pub version: CgroupVersion,
    /// The cgroup under which the command's cgroup is created.
    pub parent: PathBuf,
    /// v2 only: the controller must first be enabled in the parent's `cgroup.subtree_control`.
    pub enable: bool,
}

/// Finds where `controller` can limit a command's processes, or says why nowhere. Reads
/// `/proc/self/mountinfo`, `/proc/self/cgroup` and cgroupfs; changes nothing.
pub(crate) fn locate(controller: Controller) -> Result<Site, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let own = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let name = controller.name();
    let mut reasons = Vec::new();

    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        match mounts.iter().find(|m| m.fstype == "cgroup2") {
            Some(mount) => match v2_site(mount, path, name) {
                Ok(site) => return Ok(site),
                Err(reason) => reasons.push(reason),
            },
            None => reasons.push("cgroup v2 is not mounted".to_owned()),
        }
    }

    let v1_path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == name).then_some(path)
    });
    if let Some(path) = v1_path {
        let mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == name));
        match mount.and_then(|m| m.dir_of(path)) {
            Some(dir) if sys::writable(&dir) => {
                return Ok(Site {
                    version: CgroupVersion::V1,
                    parent: dir,
                    enable: false,
                });
            }
            Some(dir) => reasons.push(format!(
                "cgroup v1 {name} cgroup {} is not writable",
                dir.display()
            )),
            None => reasons.push(format!("cgroup v1 {name} hierarchy is not mounted")),
        }
    }
    if reasons.is_empty() {
        reasons.push(format!("no cgroup offers the {name} controller"));
    }
    Err(reasons.join("; "))
}

/// A cgroup v2 site: our own cgroup when it is the hierarchy's root (which may hold processes
/// and children at once), else the parent of our (leaf) cgroup when it delegates the controller.
fn v2_site(mount: &Mount, own: &str, controller: &str) -> Result<Site, String> {
    let dir = mount
        .dir_of(own)
        .ok_or_else(|| format!("cgroup v2: own cgroup {own} is outside the mount"))?;
    if !words(&dir.join("cgroup.controllers")).contains(controller) {
        return Err(format!(
            "cgroup v2: the {controller} controller is not available in {}",
            dir.display()
        ));
    }
    let delegated = |d: &Path| words(&d.join("cgroup.subtree_control")).contains(controller);
    if dir == mount.mount_point {
        if !sys::writable(&dir) {
            return Err(format!("cgroup v2: {} is not writable", dir.display()));
        }
        return Ok(Site {
            version: CgroupVersion::V2,
            enable: !delegated(&dir),
            parent: dir,
        });
    }
    if let Some(parent) = dir.parent().filter(|p| p.starts_with(&mount.mount_point))
        && delegated(parent)
        && sys::writable(parent)
    {
        return Ok(Site {
            version: CgroupVersion::V2,
            parent: parent.to_path_buf(),
            enable: false,
        });
    }
    Err(format!(
        "cgroup v2: own cgroup {own} holds processes and no writable parent delegates {controller}"
    ))
}

fn words(path: &Path) -> BTreeSet<String> {
    fs::read_to_string(path)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// One line of `/proc/self/mountinfo`, the fields we need.
struct Mount {
    root: PathBuf,
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (pre, post) = line.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let mut post = post.split(' ');
        let fstype = post.next()?.to_owned();
        let _source = post.next()?;
        Some(Mount {
            root: PathBuf::from(unescape(pre.get(3)?)),
            mount_point: PathBuf::from(unescape(pre.get(4)?)),
            fstype,
            super_options: post.next()?.to_owned(),
        })
    }

    /// The directory of cgroup `path` (as `/proc/self/cgroup` names it) under this mount.
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let rel = Path::new(path).strip_prefix(&self.root).ok()?;
        if rel.as_os_str().is_empty() {
            return Some(self.mount_point.clone());
        }
        Some(self.mount_point.join(rel))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space…).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && let Ok(digits) = std::str::from_utf8(digits)
            && let Ok(v) = u8::from_str_radix(digits, 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One controller's share of a command's cgroup.
pub(crate) struct Request<'a> {
    pub controller: Controller,
    pub site: &'a Site,
    /// `pids.max` or the memory limit in bytes; `None` only tracks (pids).
    pub limit: Option<u64>,
}

/// What [`create`] made: the cgroups, the `cgroup.procs` descriptors the child writes, and the
/// controllers that could not be set up, with why.
pub(crate) struct Created {
    pub cgroup: CommandCgroup,
    pub procs: Vec<OwnedFd>,
    pub failures: Vec<(Controller, String)>,
}

/// The cgroups of one command (one per hierarchy), killed and removed on drop.
#[derive(Debug, Default)]
pub(crate) struct CommandCgroup {
    dirs: Vec<Dir>,
}

#[derive(Debug)]
struct Dir {
    version: CgroupVersion,
    path: PathBuf,
    pids: bool,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Creates the command's cgroups: one per distinct site (a v2 site shared by both controllers
/// gets one cgroup), named `warden-<pid>-<n>`.
pub(crate) fn create(requests: &[Request<'_>]) -> Created {
    let mut created = Created {
        cgroup: CommandCgroup::default(),
        procs: Vec::new(),
        failures: Vec::new(),
    };
    let mut groups: Vec<(&Site, Vec<&Request<'_>>)> = Vec::new();
    for request in requests {
        match groups.iter_mut().find(|(site, _)| *site == request.site) {
            Some((_, members)) => members.push(request),
            None => groups.push((request.site, vec![request])),
        }
    }
    for (site, members) in groups {
        match create_one(site, &members) {
            Ok((dir, fd)) => {
                created.cgroup.dirs.push(dir);
                created.procs.push(fd);
            }
            Err(reason) => created
                .failures
                .extend(members.iter().map(|r| (r.controller, reason.clone()))),
        }
    }
    created
}

fn create_one(site: &Site, members: &[&Request<'_>]) -> Result<(Dir, OwnedFd), String> {
    if site.enable {
        for r in members {
            write(
                &site.parent.join("cgroup.subtree_control"),
                &format!("+{}", r.controller.name()),
            )
            .map_err(|e| {
                format!(
                    "cgroup v2: cannot enable {} in {}: {e}",
                    r.controller.name(),
                    site.parent.display()
                )
            })?;
        }
    }
    let path = make_unique_dir(&site.parent).map_err(|e| {
        format!(
            "cannot create a cgroup under {}: {e}",
            site.parent.display()
        )
    })?;
    let dir = Dir {
        version: site.version,
        path,
        pids: members.iter().any(|r| r.controller == Controller::Pids),
    };
    let setup = || -> io::Result<OwnedFd> {
        for r in members {
            let Some(limit) = r.limit else { continue };
            let limit = limit.to_string();
            match (r.controller, site.version) {
                (Controller::Pids, _) => write(&dir.path.join("pids.max"), &limit)?,
                (Controller::Memory, CgroupVersion::V1) => {
                    write(&dir.path.join("memory.limit_in_bytes"), &limit)?;
                    // Memory plus swap, where swap accounting is on; without it the limit
                    // above still holds for RAM.
                    let _ = write(&dir.path.join("memory.memsw.limit_in_bytes"), &limit);
                }
                (Controller::Memory, CgroupVersion::V2) => {
                    write(&dir.path.join("memory.max"), &limit)?;
                    let _ = write(&dir.path.join("memory.swap.max"), "0");
                }
            }
        }
        Ok(fs::OpenOptions::new()
            .write(true)
            .open(dir.path.join("cgroup.procs"))?
            .into())
    };
    match setup() {
        Ok(fd) => Ok((dir, fd)),
        Err(e) => {
            let _ = fs::remove_dir(&dir.path);
            Err(format!("cannot set up cgroup {}: {e}", dir.path.display()))
        }
    }
}

fn make_unique_dir(parent: &Path) -> io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..8 {
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("warden-{}-{n}", std::process::id()));
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value)
}

impl CommandCgroup {
    /// The cgroup directories.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|d| d.path.as_path())
    }

    /// The processes in the command's cgroups.
    pub(crate) fn members(&self) -> io::Result<BTreeSet<libc::pid_t>> {
        let mut pids = BTreeSet::new();
        for dir in &self.dirs {
            let text = match fs::read_to_string(dir.path.join("cgroup.procs")) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            pids.extend(
                text.lines()
                    .filter_map(|l| l.trim().parse::<libc::pid_t>().ok()),
            );
        }
        Ok(pids)
    }

    /// Kills every process in the command's cgroups and waits until they are gone. New forks are
    /// refused first (`pids.max` 0, or `cgroup.kill` on v2), so a fork bomb cannot outrun it.
    /// Afterwards the cgroup refuses new processes.
    pub(crate) fn kill_all(&self) -> io::Result<()> {
        if self.dirs.is_empty() {
            return Ok(());
        }
        for dir in &self.dirs {
            let kill_file = dir.path.join("cgroup.kill");
            if dir.version == CgroupVersion::V2 && kill_file.exists() {
                let _ = write(&kill_file, "1");
            } else if dir.pids {
                let _ = write(&dir.path.join("pids.max"), "0");
            }
        }
        let deadline = Instant::now() + KILL_DEADLINE;
        loop {
            let pids = self.members()?;
            if pids.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{} processes survive SIGKILL in {}",
                    pids.len(),
                    self.dirs[0].path.display()
                )));
            }
            for pid in pids {
                let _ = sys::kill(pid);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills what is left and removes the cgroups (retrying while the last exits settle).
    fn remove(&mut self) {
        let _ = self.kill_all();
        for dir in self.dirs.drain(..) {
            for _ in 0..100 {
                match fs::remove_dir(&dir.path) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let m =
            Mount::parse("39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids")
                .unwrap();
        assert_eq!(m.fstype, "cgroup");
        assert_eq!(m.mount_point, Path::new("/sys/fs/cgroup/pids"));
        assert_eq!(
            m.dir_of("/a/b").unwrap(),
            Path::new("/sys/fs/cgroup/pids/a/b")
        );
        let m = Mount::parse("1 2 0:1 /x /mnt/with\\040space rw - cgroup2 none rw").unwrap();
        assert_eq!(m.mount_point, Path::new("/mnt/with space"));
        assert_eq!(m.dir_of("/x/y").unwrap(), Path::new("/mnt/with space/y"));
        assert!(m.dir_of("/z").is_none());
        assert_eq!(m.dir_of("/x").unwrap().as_os_str(), "/mnt/with space");
    }
}
