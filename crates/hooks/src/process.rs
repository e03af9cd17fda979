//! Runs one operator command with a JSON document on stdin, in its own process group, under a timeout.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// At most this many bytes of stdout or stderr are kept; the rest is read and dropped.
pub(crate) const OUTPUT_CAP: usize = 64 * 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// The program (an absolute path for operator commands).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// The working folder, when it exists; otherwise the host's own.
    pub cwd: Option<PathBuf>,
    /// Written to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Whether stdout is captured (otherwise it goes to /dev/null).
    pub capture_stdout: bool,
    /// After this long the whole process group is killed.
    pub timeout: Duration,
}

/// How a run ended.
#[derive(Debug)]
pub enum CommandRun {
    /// The process could not be started.
    SpawnFailed(std::io::Error),
    /// The process (group) outlived its timeout and was killed.
    TimedOut,
    /// The process ended on its own.
    Finished {
        /// The exit code; None when it was ended by a signal.
        code: Option<i32>,
        /// Captured stdout (empty unless asked for), at most [`OUTPUT_CAP`] bytes.
        stdout: Vec<u8>,
        /// Captured stderr, at most [`OUTPUT_CAP`] bytes.
        stderr: Vec<u8>,
    },
}

/// Runs `spec` to completion or timeout. Never panics; every failure is a [`CommandRun`] variant.
pub async fn run_command(spec: CommandSpec<'_>) -> CommandRun {
    let mut command = tokio::process::Command::new(spec.program);
    command
        .args(spec.args)
        .stdin(Stdio::piped())
        .stdout(if spec.capture_stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped());
    if let Some(cwd) = spec.cwd.filter(|dir| dir.is_dir()) {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let mut child = match wrapped.spawn() {
        Ok(child) => child,
        Err(error) => return CommandRun::SpawnFailed(error),
    };
    let stdin = child.stdin().take();
    let stdout = child.stdout().take();
    let stderr = child.stderr().take();
    let payload = spec.stdin;

    let work = async {
        let write = async move {
            if let Some(mut stdin) = stdin {
                // A command that does not read its stdin closes the pipe early; that is its right.
                let _ = stdin.write_all(&payload).await;
                let _ = stdin.shutdown().await;
            }
        };
        let ((), stdout, stderr) = tokio::join!(write, read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (status, stdout, stderr)
    };
    match tokio::time::timeout(spec.timeout, work).await {
        Ok((Ok(status), stdout, stderr)) => CommandRun::Finished {
            code: status.code(),
            stdout,
            stderr,
        },
        Ok((Err(error), _, _)) => CommandRun::SpawnFailed(error),
        Err(_elapsed) => {
            // Kill the whole group: a shell's children would otherwise keep the pipes open.
            let _ = child.start_kill();
            let _ = child.wait().await;
            CommandRun::TimedOut
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> Vec<u8> {
    let Some(mut reader) = reader else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0_u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
        }
    }
    kept
}
