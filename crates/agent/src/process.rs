//! Runs one confined command to its end: its own process group, stdout and stderr in one pipe,
//! optional bytes on stdin, a timeout and the caller's cancellation that kill the whole group,
//! output kept up to a limit, and the kernel sandbox's cgroup emptied and removed afterwards.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use warden_sandbox::Prepared;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited (`None`: killed by a signal).
    Exited(Option<i32>),
    /// It ran past its timeout; its process group was killed.
    TimedOut(Duration),
    /// The caller cancelled it; its process group was killed.
    Cancelled,
    /// Waiting for it failed.
    WaitFailed(String),
}

impl CommandEnd {
    /// Whether it exited with status 0.
    pub fn succeeded(&self) -> bool {
        *self == CommandEnd::Exited(Some(0))
    }

    /// A bracketed note for the model, empty for a clean exit.
    pub fn note(&self, what: &str) -> String {
        match self {
            CommandEnd::Exited(Some(0)) => String::new(),
            CommandEnd::Exited(Some(code)) => format!("[exit code {code}]"),
            CommandEnd::Exited(None) => "[killed by a signal]".to_owned(),
            CommandEnd::TimedOut(after) => format!(
                "[timed out after {} s; the {what}'s process group was killed]",
                after.as_secs()
            ),
            CommandEnd::Cancelled => format!("[cancelled; the {what}'s process group was killed]"),
            CommandEnd::WaitFailed(error) => format!("[waiting for the {what} failed: {error}]"),
        }
    }
}

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct CommandRun {
    /// stdout and stderr as written, up to the limit.
    pub output: Vec<u8>,
    /// Bytes past the limit, counted and dropped.
    pub dropped: u64,
    pub end: CommandEnd,
}

impl CommandRun {
    /// The output as text, with a note when some of it was dropped.
    pub fn output_text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.output).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n[{} more bytes of output were not kept]",
                self.dropped
            ));
        }
        text
    }
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(#[from] std::io::Error);

/// Runs `command` (already given its program, arguments, folder and environment; `prepared`
/// already applied to it) to its end.
pub async fn run_confined(
    mut command: tokio::process::Command,
    prepared: Option<Prepared>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    cancel: &CancellationToken,
    output_limit: usize,
) -> Result<CommandRun, StartError> {
    // One pipe for stdout and stderr, as a terminal has: the reader sees lines in the order the
    // command wrote them, never one stream's line cut by the other's.
    let (output_reader, output_writer) = std::io::pipe()?;
    command
        .stdout(output_writer.try_clone()?)
        .stderr(output_writer)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let mut child = wrapped.spawn()?;
    // The command holds the parent's copies of the write end: drop it so the reader sees the end
    // of the output once the command's process group is gone.
    drop(wrapped);
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin().take()) {
        // Written beside the wait, so a command that does not read its input cannot block it.
        tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        });
    }
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(output_reader.into())?;
    let buffer = Arc::new(Mutex::new(Captured::default()));
    let task = tokio::spawn(read_into(
        Box::new(reader) as Box<dyn AsyncRead + Send + Unpin>,
        buffer.clone(),
        output_limit,
    ));
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => CommandEnd::Exited(status.code()),
            Err(e) => CommandEnd::WaitFailed(e.to_string()),
        },
        _ = tokio::time::sleep(timeout) => CommandEnd::TimedOut(timeout),
        _ = cancel.cancelled() => CommandEnd::Cancelled,
    };
    // Kill the whole group: background children would otherwise keep running and hold the pipe.
    let _ = child.start_kill();
    let _ = child.wait().await;
    let abort = task.abort_handle();
    if tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .is_err()
    {
        abort.abort();
    }
    // Whatever is left in the command's cgroup (a child that left the group) is killed and the
    // cgroup removed, off the async workers (it may wait a moment for processes to die).
    if let Some(prepared) = prepared {
        let _ = tokio::task::spawn_blocking(move || drop(prepared)).await;
    }
    let captured = std::mem::take(&mut *buffer.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(CommandRun {
        output: captured.bytes,
        dropped: captured.dropped,
        end,
    })
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
}

async fn read_into(
    mut reader: Box<dyn AsyncRead + Send + Unpin>,
    buffer: Arc<Mutex<Captured>>,
    limit: usize,
) {
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut captured = buffer.lock().unwrap_or_else(PoisonError::into_inner);
                let room = limit.saturating_sub(captured.bytes.len());
                let keep = n.min(room);
                captured.bytes.extend_from_slice(&chunk[..keep]);
                captured.dropped += (n - keep) as u64;
            }
        }
    }
}
