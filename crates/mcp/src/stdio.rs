//! Spawning a stdio server: safe environment, own process group, piped stderr, kill with its children.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::{FailureKind, McpError};
use crate::stderr::StderrRing;

/// The only parent variables a stdio server inherits.
pub const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// What a child is started with, borrowed from its spec.
pub(crate) struct StdioLaunch<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub cwd: Option<&'a Path>,
    pub default_cwd: &'a Path,
}

/// A running child: its pipes and the handle that watches and kills it.
pub(crate) struct SpawnedChild {
    pub stdout: ChildStdout,
    pub stdin: ChildStdin,
    pub control: ChildControl,
}

/// Watches a child's exit and kills its whole process group when dropped or told to.
pub(crate) struct ChildControl {
    exit: watch::Receiver<Option<Option<ExitStatus>>>,
    stderr_done: watch::Receiver<bool>,
    kill: CancellationToken,
    _kill_on_drop: DropGuard,
    pub pid: Option<u32>,
}

impl ChildControl {
    /// Lets the child exit by itself within `grace` (its stdin is already closed, as the MCP
    /// stdio transport prescribes for shutdown), then kills the process group either way, so
    /// nothing it started outlives it.
    pub(crate) async fn close_gracefully(&mut self, grace: std::time::Duration) {
        let _ = tokio::time::timeout(grace, self.wait_exit()).await;
        self.kill().await;
    }

    /// Kills the process group and waits (bounded) for the exit.
    pub(crate) async fn kill(&mut self) {
        self.kill.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), self.wait_exit()).await;
    }

    /// Waits until the child has exited; its status when known.
    pub(crate) async fn wait_exit(&mut self) -> Option<ExitStatus> {
        match self.exit.wait_for(Option::is_some).await {
            Ok(status) => (*status).flatten(),
            Err(_) => None,
        }
    }

    /// Waits until stderr reached its end, so its last line is known.
    pub(crate) async fn wait_stderr(&mut self) {
        let _ = self.stderr_done.wait_for(|done| *done).await;
    }
}

/// Kills the group (the server and anything it started) when dropped.
struct GroupKillOnDrop(Box<dyn ChildWrapper>);

impl Drop for GroupKillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// The child's environment: the safe parent variables plus the entry's, without `WARDEN_*`.
pub fn child_environment(entry_env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for key in INHERITED_ENV {
        if let Some(value) = std::env::var_os(key) {
            env.insert(key.to_owned(), value.to_string_lossy().into_owned());
        }
    }
    for (key, value) in entry_env {
        env.insert(key.clone(), value.clone());
    }
    env.retain(|key, _| !key.starts_with("WARDEN_"));
    env
}

/// Starts the child in its own process group with piped stdio; stderr feeds `ring`.
pub(crate) fn spawn(launch: &StdioLaunch<'_>, ring: &StderrRing) -> Result<SpawnedChild, McpError> {
    let folder: PathBuf = launch.cwd.unwrap_or(launch.default_cwd).to_path_buf();
    if !folder.is_dir() {
        return Err(McpError::new(
            launch.server,
            FailureKind::SpawnFailed,
            format!(
                "can't start \"{}\": working folder {} does not exist",
                launch.command,
                folder.display()
            ),
            Some("check the server's cwd"),
        ));
    }
    let mut command = tokio::process::Command::new(launch.command);
    command
        .args(launch.args)
        .env_clear()
        .envs(child_environment(launch.env))
        .current_dir(&folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let mut child = wrapped
        .spawn()
        .map_err(|error| spawn_failure(launch, &error))?;

    let pipes = (
        child.inner_mut().stdout().take(),
        child.inner_mut().stdin().take(),
        child.inner_mut().stderr().take(),
    );
    let (Some(stdout), Some(stdin), stderr) = pipes else {
        let _ = child.start_kill();
        return Err(McpError::new(
            launch.server,
            FailureKind::SpawnFailed,
            format!(
                "can't start \"{}\": its stdio pipes were not available",
                launch.command
            ),
            None,
        ));
    };
    let pid = child.id();

    let (stderr_tx, stderr_done) = watch::channel(false);
    match stderr {
        Some(stderr) => {
            let ring = ring.clone();
            tokio::spawn(async move {
                ring.drain(stderr).await;
                let _ = stderr_tx.send(true);
            });
        }
        None => {
            let _ = stderr_tx.send(true);
        }
    }

    let (exit_tx, exit) = watch::channel(None);
    let kill = CancellationToken::new();
    let kill_requested = kill.clone();
    let mut guard = GroupKillOnDrop(child);
    tokio::spawn(async move {
        let waited = tokio::select! {
            status = guard.0.wait() => Some(status.ok()),
            () = kill_requested.cancelled() => None,
        };
        let status = match waited {
            Some(status) => status,
            None => {
                let _ = guard.0.start_kill();
                guard.0.wait().await.ok()
            }
        };
        // Anything the server left behind in its group goes with it.
        let _ = guard.0.start_kill();
        let _ = exit_tx.send(Some(status));
    });

    Ok(SpawnedChild {
        stdout,
        stdin,
        control: ChildControl {
            exit,
            stderr_done,
            _kill_on_drop: kill.clone().drop_guard(),
            kill,
            pid,
        },
    })
}

fn spawn_failure(launch: &StdioLaunch<'_>, error: &std::io::Error) -> McpError {
    match error.kind() {
        std::io::ErrorKind::NotFound => McpError::new(
            launch.server,
            FailureKind::CommandNotFound,
            format!("can't start \"{}\": command not found", launch.command),
            Some(
                "check that it is installed and on PATH (the server sees only HOME, LOGNAME, PATH, SHELL, TERM, USER and its own env)",
            ),
        ),
        std::io::ErrorKind::PermissionDenied => McpError::new(
            launch.server,
            FailureKind::SpawnFailed,
            format!("can't start \"{}\": permission denied", launch.command),
            Some("check that the file is executable"),
        ),
        _ => McpError::new(
            launch.server,
            FailureKind::SpawnFailed,
            format!("can't start \"{}\": {error}", launch.command),
            Some("check the command and its arguments"),
        ),
    }
}

/// `status 3`, `signal 9` or `an unknown status`.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("status {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "an unknown status".to_owned(),
        },
        None => "an unknown status".to_owned(),
    }
}
