//! Confinement against the real kernel: each test runs `bash -c …` in a prepared sandbox and checks
//! both what fails inside and what the `Enforcement` report claims. A test whose kernel feature
//! is missing fails when `CI` is set and is skipped (with the reason printed) elsewhere, by
//! warden-testkit's one skip policy.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use warden_sandbox::{
    Enforcement, NetworkPolicy, Prepared, Protection, ResourceLimits, SandboxMode, SandboxPolicy,
    prepare, probe,
};
use warden_testkit::{Missing, require_or_skip};

/// The fork-bomb test runs alone (write); the others share (read).
static EXCLUSIVE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A temp tree: `home/.ssh/id_rsa` (denied), `home/notes.txt`, a writable `work`, an `outside`
/// folder that is not writable, and the private `tmp`.
struct Fixture {
    _dir: TempDir,
    home: PathBuf,
    ssh: PathBuf,
    work: PathBuf,
    outside: PathBuf,
    tmp: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let ssh = home.join(".ssh");
        let work = root.join("work");
        let outside = root.join("outside");
        let tmp = root.join("tmp");
        for d in [&ssh, &work, &outside, &tmp] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(ssh.join("id_rsa"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
        fs::write(home.join("notes.txt"), "sibling notes\n").unwrap();
        fs::write(work.join("existing.txt"), "workspace file\n").unwrap();
        Fixture {
            _dir: dir,
            home,
            ssh,
            work,
            outside,
            tmp,
        }
    }

    fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            readable_denied: vec![self.ssh.clone()],
            writable_roots: vec![self.work.clone()],
            readable_roots: None,
            read_only_paths: Vec::new(),
            hidden_files: Vec::new(),
            private_tmp: self.tmp.clone(),
            network: NetworkPolicy::default(),
            limits: ResourceLimits::NONE,
        }
    }

    fn prepare(&self, policy: &SandboxPolicy) -> Prepared {
        let prepared = prepare(policy).unwrap();
        eprintln!("{}", prepared.enforcement().summary());
        prepared
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.status.success()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?}\nstdout: {}\nstderr: {}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `script` with bash in the sandbox, in `work`, with a clean environment.
async fn run(prepared: &Prepared, fixture: &Fixture, script: &str) -> Run {
    let mut command = tokio::process::Command::new("/bin/bash");
    command
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fixture.home)
        .env("TMPDIR", &fixture.tmp)
        .env("PY", python())
        .current_dir(&fixture.work)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    prepared.apply(&mut command);
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the command timed out")
        .expect("spawn");
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A kernel feature the test needs (taken with `require_or_skip!`: a test without it skips, or
/// fails in CI).
fn kernel_feature(available: bool, what: &str, enforcement: &Enforcement) -> Result<(), Missing> {
    Missing::unless(available, || {
        format!("{what} is not available here: {}", enforcement.summary())
    })
}

#[tokio::test]
async fn the_never_list_is_unreadable_while_its_siblings_and_the_system_stay_readable() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    std::os::unix::fs::symlink(&f.ssh, f.work.join("ssh-link")).unwrap();
    let prepared = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));

    let key = f.ssh.join("id_rsa");
    let r = run(&prepared, &f, &format!("cat '{}'", key.display())).await;
    assert!(!r.ok(), "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    assert!(!r.stdout.contains("PRIVATE KEY"), "{r:?}");

    // Listing the folder, and reaching it through a link inside the workspace, fail too.
    let r = run(&prepared, &f, &format!("ls '{}'", f.ssh.display())).await;
    assert!(!r.ok() && r.stderr.contains("Permission denied"), "{r:?}");
    let r = run(&prepared, &f, "cat ssh-link/id_rsa").await;
    assert!(!r.ok() && !r.stdout.contains("PRIVATE KEY"), "{r:?}");

    let notes = f.home.join("notes.txt");
    let r = run(
        &prepared,
        &f,
        &format!("cat '{}' && cat /etc/hostname", notes.display()),
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert!(r.stdout.starts_with("sibling notes\n"), "{r:?}");
    assert!(r.stdout.lines().count() >= 2, "{r:?}");
}

#[tokio::test]
async fn with_readable_roots_only_they_the_workspace_and_the_system_named_are_readable() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.readable_roots = Some(
        ["/usr", "/bin", "/lib", "/lib64", "/etc"]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
    );
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));
    // The home folder's other files, and the folder beside the workspace, are out of reach.
    fs::write(f.outside.join("pgpass"), "host:5432:db:user:hunter2\n").unwrap();
    let notes = f.home.join("notes.txt");
    for path in [notes, f.outside.join("pgpass")] {
        let r = run(&prepared, &f, &format!("cat '{}'", path.display())).await;
        assert!(!r.ok() && r.stderr.contains("Permission denied"), "{r:?}");
    }
    // The workspace, the private tmp and the system stay readable.
    let r = run(
        &prepared,
        &f,
        "cat existing.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && head -c 0 /etc/hostname",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert!(r.stdout.starts_with("workspace file\nt\n"), "{r:?}");
}

#[tokio::test]
async fn read_only_paths_stay_unchanged_and_hidden_files_read_empty() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let git = f.work.join(".git");
    fs::create_dir_all(git.join("hooks")).unwrap();
    fs::write(git.join("config"), "[core]\n").unwrap();
    fs::write(f.work.join(".env"), "PASSWORD=hunter2\n").unwrap();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.read_only_paths = vec![git.clone(), f.work.join(".envrc")];
    policy.hidden_files = vec![f.work.join(".env")];
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(
        e.protected_files.is_enforced(),
        "a private mount namespace",
        e
    ));
    for script in [
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config",
        "printf '#!/bin/sh\\n' > .git/hooks/post-checkout",
        "rm .git/config",
        "mv .git .git-old",
    ] {
        let r = run(&prepared, &f, script).await;
        assert!(!r.ok(), "{script}: {r:?}");
    }
    assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
    assert!(!git.join("hooks/post-checkout").exists());
    let r = run(&prepared, &f, "cat .env; echo end").await;
    assert_eq!(r.stdout, "end\n", "{r:?}");
    // A write goes nowhere (the file seen is `/dev/null`): the real one keeps its content.
    run(&prepared, &f, "echo X > .env; rm -f .env").await;
    assert_eq!(
        fs::read_to_string(f.work.join(".env")).unwrap(),
        "PASSWORD=hunter2\n"
    );
    // The rest of the workspace stays writable, new files at its top included.
    let r = run(
        &prepared,
        &f,
        "echo new > new.txt && mkdir -p target/debug && echo o > target/debug/o && cat new.txt",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.stdout, "new\n");
    // Nothing leaked out of the child's namespace.
    assert!(fs::write(git.join("config"), "[core]\n").is_ok());
    assert_eq!(
        fs::read_to_string(f.work.join(".env")).unwrap(),
        "PASSWORD=hunter2\n"
    );
}

#[tokio::test]
async fn writes_land_only_in_the_writable_roots_and_the_private_tmp() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let prepared = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));

    let r = run(
        &prepared,
        &f,
        "echo a > new.txt && mkdir -p sub/dir && echo b > sub/dir/f && echo c > \"$TMPDIR/t\" \
         && echo d > /dev/null && mv new.txt moved.txt && cat moved.txt \
         && cat <(echo substituted) && echo to-stderr > /dev/stderr",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.stdout, "a\nsubstituted\n", "{r:?}");
    assert_eq!(r.stderr, "to-stderr\n", "{r:?}");
    assert_eq!(fs::read_to_string(f.work.join("moved.txt")).unwrap(), "a\n");
    assert_eq!(fs::read_to_string(f.tmp.join("t")).unwrap(), "c\n");

    let outside = f.outside.join("nope.txt");
    let r = run(&prepared, &f, &format!("echo x > '{}'", outside.display())).await;
    assert!(!r.ok() && r.stderr.contains("Permission denied"), "{r:?}");
    assert!(!outside.exists());

    // Root in the sandbox still cannot write system files.
    let etc = Path::new("/etc/warden-sandbox-test-must-not-exist");
    let r = run(&prepared, &f, &format!("touch '{}'", etc.display())).await;
    assert!(!r.ok(), "{r:?}");
    assert!(!etc.exists());
}

#[tokio::test]
async fn read_only_mode_refuses_writes_to_the_workspace() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let prepared = f.prepare(&f.policy(SandboxMode::ReadOnly));
    let e = prepared.enforcement();
    assert_eq!(e.mode, SandboxMode::ReadOnly);
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));

    let r = run(&prepared, &f, "echo x > new.txt").await;
    assert!(!r.ok() && r.stderr.contains("Permission denied"), "{r:?}");
    assert!(!f.work.join("new.txt").exists());
    let r = run(&prepared, &f, "echo x >> existing.txt").await;
    assert!(!r.ok(), "{r:?}");
    assert_eq!(
        fs::read_to_string(f.work.join("existing.txt")).unwrap(),
        "workspace file\n"
    );

    let r = run(
        &prepared,
        &f,
        "cat existing.txt && echo t > \"$TMPDIR/t\" && echo n > /dev/null",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.stdout, "workspace file\n");
}

#[tokio::test]
async fn a_denied_folder_inside_a_writable_root_is_neither_readable_nor_writable() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let secrets = f.work.join("project/.secrets");
    fs::create_dir_all(&secrets).unwrap();
    fs::write(secrets.join("token"), "TOKEN-VALUE\n").unwrap();
    fs::create_dir_all(f.work.join("project/src")).unwrap();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.readable_denied.push(secrets.clone());
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));

    for script in [
        "cat project/.secrets/token",
        "ls project/.secrets",
        "echo x > project/.secrets/new",
        "echo x >> project/.secrets/token",
        "rm project/.secrets/token",
        "mv project/.secrets/token project/src/token",
        "cp project/.secrets/token project/src/token",
    ] {
        let r = run(&prepared, &f, script).await;
        assert!(!r.ok(), "{script}: {r:?}");
        assert!(!r.stdout.contains("TOKEN-VALUE"), "{script}: {r:?}");
    }
    assert_eq!(
        fs::read_to_string(secrets.join("token")).unwrap(),
        "TOKEN-VALUE\n"
    );
    assert_eq!(fs::read_dir(&secrets).unwrap().count(), 1);

    // Its siblings stay writable.
    let r = run(
        &prepared,
        &f,
        "echo ok > project/src/main.rs && cat project/src/main.rs && echo ok > existing.txt",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    // The known cost of the technique: the folders on the way to the denied one (here `work` and
    // `work/project`) accept no new entries, since a grant on them would reach the denied folder.
    let r = run(&prepared, &f, "echo x > project/new-top-level.txt").await;
    assert!(!r.ok(), "{r:?}");
}

#[tokio::test]
async fn the_parent_is_out_of_reach_its_memory_signals_and_environment() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    // A marker from this test process's own environment (the output only ever holds what
    // `cat` read from the parent, never the child's own environment).
    let environ = fs::read("/proc/self/environ").unwrap();
    let marker = environ
        .split(|b| *b == 0)
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .find(|e| e.len() > 2 && e.contains('='))
        .expect("the test process has an environment variable");

    let mut prepared = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.filesystem.is_enforced(), "Landlock", e));
    // Landlock: no ptrace attach, hence no /proc/<pid>/mem, outside the sandbox.
    let r = run(&prepared, &f, "head -c1 /proc/$PPID/mem").await;
    assert!(!r.ok() && r.stderr.contains("Permission denied"), "{r:?}");
    // Landlock ABI 6: no signal to a process outside the sandbox, even as root.
    if e.scoping.is_enforced() {
        let r = run(&prepared, &f, "kill -0 $PPID").await;
        assert!(
            !r.ok() && r.stderr.contains("Operation not permitted"),
            "{r:?}"
        );
    }

    // The environment: closed by the capabilities a root child loses, else by a non-dumpable
    // parent.
    let made_non_dumpable = !e.parent_environment.is_enforced();
    if made_non_dumpable {
        warden_sandbox::make_non_dumpable().unwrap();
        prepared = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    }
    assert!(prepared.enforcement().parent_environment.is_enforced());
    let script = "cat /proc/$PPID/environ | tr '\\0' '\\n'; exit ${PIPESTATUS[0]}";
    let r = run(&prepared, &f, script).await;
    assert!(!r.ok(), "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    assert!(!r.stdout.contains(&marker), "{r:?}");

    // The control: unconfined, the same read shows the marker.
    if !made_non_dumpable {
        let off = f.prepare(&f.policy(SandboxMode::Off));
        let r = run(&off, &f, script).await;
        assert!(r.ok(), "{r:?}");
        assert!(r.stdout.contains(&marker), "{r:?}");
    }
}

#[tokio::test]
async fn privileges_are_dropped_and_limits_cannot_be_raised() {
    /// CAP_CHOWN, DAC_OVERRIDE, FOWNER, FSETID, NET_BIND_SERVICE, AUDIT_WRITE: all a child may
    /// keep.
    const KEEP: u64 = 0x2000_041b;
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.limits.cpu_seconds = Some(60);
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    assert!(e.no_new_privs && e.capabilities.is_enforced(), "{e:?}");

    let r = run(
        &prepared,
        &f,
        "grep -E '^(CapEff|CapPrm|CapBnd|CapInh|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; \
         ulimit -t unlimited && echo raised",
    )
    .await;
    let field = |name: &str| -> String {
        let line = r.stdout.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    let caps = |name: &str| u64::from_str_radix(&field(name), 16).unwrap();
    assert_eq!(field("NoNewPrivs:"), "1", "{r:?}");
    for set in ["CapEff:", "CapPrm:", "CapInh:", "CapAmb:"] {
        assert_eq!(caps(set) & !KEEP, 0, "{set} {r:?}");
    }
    let (_, parent_effective) = status_caps();
    if parent_effective & (1 << 8) != 0 {
        assert_eq!(caps("CapBnd:") & !KEEP, 0, "{r:?}");
    }
    if e.other_sockets.is_enforced() {
        assert_eq!(field("Seccomp:"), "2", "{r:?}");
    }
    assert!(
        !r.stdout.contains("raised"),
        "CAP_SYS_RESOURCE is gone: {r:?}"
    );
}

/// This process's (bounding, effective) capability sets.
fn status_caps() -> (u64, u64) {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let get = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    (get("CapBnd:"), get("CapEff:"))
}

#[tokio::test]
async fn tcp_connect_is_refused_unless_the_port_is_allowed() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let (allowed_port, other_port) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let connect = |port: u16| format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let denied = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    let e = denied.enforcement();
    let landlock_tcp = e.tcp.is_enforced() && e.landlock.used_abi().is_some_and(|a| a >= 4);
    require_or_skip!(kernel_feature(
        landlock_tcp,
        "Landlock TCP rules (ABI 4)",
        e
    ));
    let r = run(&denied, &f, &connect(allowed_port)).await;
    assert!(!r.ok() && !r.stdout.contains("connected"), "{r:?}");

    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.network = NetworkPolicy::Denied {
        allowed_tcp_connect_ports: vec![allowed_port],
    };
    let bridge = f.prepare(&policy);
    assert_eq!(bridge.enforcement().tcp, Protection::Enforced);
    let r = run(&bridge, &f, &connect(allowed_port)).await;
    assert!(r.ok() && r.stdout.contains("connected"), "{r:?}");
    let r = run(&bridge, &f, &connect(other_port)).await;
    assert!(!r.ok(), "{r:?}");

    // Binding a port is refused; so is TCP Fast Open, which connects without `connect()`.
    let bind = "$PY -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0))'";
    let r = run(&bridge, &f, bind).await;
    assert!(!r.ok() && r.stderr.contains("PermissionError"), "{r:?}");
    let fast_open = format!(
        "$PY -c 'import socket; s = socket.socket(); \
         s.sendto(b\"x\", socket.MSG_FASTOPEN, (\"127.0.0.1\", {other_port})); print(\"sent\")'"
    );
    let r = run(&bridge, &f, &fast_open).await;
    assert!(!r.ok() && r.stderr.contains("PermissionError"), "{r:?}");

    // The control: with the network allowed, both connect.
    policy.network = NetworkPolicy::Allowed;
    let open = f.prepare(&policy);
    assert_eq!(open.enforcement().tcp, Protection::NotRequested);
    let r = run(&open, &f, &connect(other_port)).await;
    assert!(r.ok(), "{r:?}");
}

#[tokio::test]
async fn udp_and_raw_sockets_are_refused_when_the_network_is_denied() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let udp =
        "$PY -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print(\"udp\")'";
    let ping = "$PY -c 'import socket; \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)'";
    let raw = "$PY -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'";
    let unix = "$PY -c 'import socket; socket.socket(socket.AF_UNIX); print(\"unix\")'";

    let denied = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    let e = denied.enforcement();
    require_or_skip!(kernel_feature(e.other_sockets.is_enforced(), "seccomp", e));
    for script in [udp, ping, raw] {
        let r = run(&denied, &f, script).await;
        assert!(!r.ok(), "{script}: {r:?}");
        assert!(r.stderr.contains("PermissionError"), "{script}: {r:?}");
    }
    let r = run(&denied, &f, unix).await;
    assert!(r.ok() && r.stdout.contains("unix"), "{r:?}");

    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.network = NetworkPolicy::Allowed;
    let open = f.prepare(&policy);
    assert_eq!(open.enforcement().other_sockets, Protection::NotRequested);
    let r = run(&open, &f, udp).await;
    assert!(r.ok() && r.stdout.contains("udp"), "{r:?}");
}

#[tokio::test]
async fn a_fork_bomb_is_contained_and_nothing_survives_the_sandbox() {
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.limits.max_processes = Some(64);
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(
        e.processes.is_cgroup(64),
        "a writable pids cgroup",
        e
    ));
    let cgroup = prepared.cgroup_dirs()[0].clone();
    let _alone = EXCLUSIVE.write().await;
    reaper::adopt_orphans();

    let r = run(
        &prepared,
        &f,
        "timeout 10 bash -c ':(){ :|:& };:' >/dev/null 2>&1; echo launched",
    )
    .await;
    assert!(r.ok() && r.stdout.contains("launched"), "{r:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let current: u64 = fs::read_to_string(cgroup.join("pids.current"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = prepared.processes().unwrap().len();
    eprintln!("fork bomb after 2 s: pids.current {current}, {alive} processes");
    assert!(current <= 64, "pids.current {current}");
    assert!(alive >= 2, "the bomb should still be running: {alive}");

    prepared.kill_all().unwrap();
    assert_eq!(prepared.processes(), Some(Vec::new()));
    drop(prepared);
    assert!(!cgroup.exists(), "{} was not removed", cgroup.display());
    reaper::reap_orphans();
}

#[tokio::test]
async fn background_jobs_die_with_the_sandbox() {
    let f = Fixture::new();
    let prepared = f.prepare(&f.policy(SandboxMode::WorkspaceWrite));
    require_or_skip!(kernel_feature(
        !prepared.cgroup_dirs().is_empty(),
        "a writable pids cgroup",
        prepared.enforcement()
    ));
    let cgroup = prepared.cgroup_dirs()[0].clone();
    let _alone = EXCLUSIVE.write().await;
    reaper::adopt_orphans();
    let r = run(
        &prepared,
        &f,
        "nohup sleep 300 >/dev/null 2>&1 & echo started",
    )
    .await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(prepared.processes().unwrap().len(), 1, "the sleep lives on");
    drop(prepared);
    assert!(!cgroup.exists());
    reaper::reap_orphans();
}

#[tokio::test]
async fn a_4_gib_allocation_fails_under_a_1_gib_limit() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.limits.memory_bytes = Some(1 << 30);
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.memory.is_enforced(), "a memory limit", e));
    let r = run(
        &prepared,
        &f,
        "$PY -c 'b = bytearray(4 << 30); print(\"allocated\")'",
    )
    .await;
    assert!(!r.ok(), "{r:?}");
    assert!(!r.stdout.contains("allocated"), "{r:?}");
    assert!(
        r.stderr.contains("MemoryError") || r.status.signal() == Some(libc::SIGKILL),
        "{r:?}"
    );

    // The cgroup caps the tree: two 700 MiB processes fit RLIMIT_DATA one by one, not together.
    if e.memory.is_cgroup(1 << 30) {
        let script = "$PY -c 'import time; b = bytearray(700 << 20); time.sleep(2)' & a=$!; \
                      $PY -c 'import time; b = bytearray(700 << 20); time.sleep(2)'; s2=$?; \
                      wait $a; s1=$?; echo \"$s1 $s2\"";
        let r = run(&prepared, &f, script).await;
        assert!(r.ok(), "{r:?}");
        eprintln!(
            "two 700 MiB processes under 1 GiB: exit statuses {}",
            r.stdout.trim()
        );
        assert_ne!(r.stdout.trim(), "0 0", "one of them must be stopped: {r:?}");
    }
}

#[tokio::test]
async fn cpu_time_is_capped_per_process() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::WorkspaceWrite);
    policy.limits.cpu_seconds = Some(1);
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    require_or_skip!(kernel_feature(e.cpu.is_enforced(), "RLIMIT_CPU", e));
    let r = run(&prepared, &f, "exec $PY -c 'while True: pass'").await;
    assert!(
        matches!(r.status.signal(), Some(libc::SIGXCPU | libc::SIGKILL)),
        "{r:?}"
    );
}

#[tokio::test]
async fn off_mode_allows_everything_and_says_so() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = f.policy(SandboxMode::Off);
    policy.limits = ResourceLimits::default();
    let prepared = f.prepare(&policy);
    let e = prepared.enforcement();
    assert!(e.enforces_nothing(), "{e:?}");
    assert!(e.summary().starts_with("sandbox off: nothing enforced"));
    assert!(prepared.cgroup_dirs().is_empty());

    let outside = f.outside.join("written.txt");
    let script = format!(
        "cat '{}' && echo x > '{}' && $PY -c 'import socket; socket.socket(socket.AF_INET, \
         socket.SOCK_DGRAM)'",
        f.ssh.join("id_rsa").display(),
        outside.display()
    );
    let r = run(&prepared, &f, &script).await;
    assert!(r.ok(), "{r:?}");
    assert!(r.stdout.contains("PRIVATE KEY"));
    assert!(outside.exists());
}

#[tokio::test]
async fn probe_predicts_prepare_without_side_effects() {
    let _shared = EXCLUSIVE.read().await;
    let f = Fixture::new();
    let mut policy = SandboxPolicy::new(&f.tmp);
    policy.readable_denied = vec![f.ssh.clone()];
    policy.writable_roots = vec![f.work.clone()];
    let probed = probe(&policy);
    eprintln!("default policy: {}", probed.summary());
    let prepared = prepare(&policy).unwrap();
    assert_eq!(&probed, prepared.enforcement());
    assert_eq!(probed.mode, SandboxMode::WorkspaceWrite);
    assert!(!probed.summary().contains('\n'));
}

/// Orphans of a sandboxed command (a fork bomb's, a background job's) are re-parented to this
/// test process instead of an init that might never reap them, and reaped here.
#[allow(unsafe_code)]
mod reaper {
    use std::time::{Duration, Instant};

    pub(crate) fn adopt_orphans() {
        let one: libc::c_ulong = 1;
        // SAFETY: prctl(2) with integer arguments only.
        let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, one, 0u64, 0u64, 0u64) };
        assert_eq!(r, 0, "PR_SET_CHILD_SUBREAPER");
    }

    /// Reaps exited children until none is left (called only while no other test runs, so
    /// no tokio-managed child can be taken).
    pub(crate) fn reap_orphans() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut status = 0;
            // SAFETY: waitpid(2) with a valid pointer to a local status word.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid > 0 {
                continue;
            }
            if pid < 0 || Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
