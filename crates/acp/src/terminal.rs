//! The editor's terminal: with `[acp] terminal = "editor"` and an editor that offers
//! `terminal/*`, the built-in `bash` runs its command there (`terminal/create` with
//! `bash -c`, `terminal/wait_for_exit`, `terminal/output`, `terminal/kill` on a timeout or a
//! cancelled turn, `terminal/release` always). The editor runs it outside warden's sandbox, so
//! the gate asks a person before every such command; the editor's tool call shows the
//! terminal.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, ReleaseTerminalRequest, SessionNotification,
    SessionUpdate, Terminal, TerminalId, TerminalOutputRequest, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest,
};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use warden_agent::{CommandTerminal, TerminalRun};

use crate::approver::Live;

/// Runs one session's `bash` commands in the editor's terminal.
pub(crate) struct EditorTerminal {
    pub(crate) connection: ConnectionTo<Client>,
    /// Set once the session is open (its id is warden's).
    pub(crate) session_id: OnceLock<String>,
    /// The session's running calls, to show the terminal in the call that runs it.
    pub(crate) live: Arc<Live>,
}

impl EditorTerminal {
    fn session_id(&self) -> Result<String, String> {
        self.session_id
            .get()
            .cloned()
            .ok_or_else(|| "the session is not open yet".to_owned())
    }

    /// Shows the terminal in the editor's tool call that runs `command`.
    fn show(&self, session_id: &str, terminal: &TerminalId, command: &str) {
        let Some(call) = self.live.bash_call(command) else {
            return;
        };
        let update = ToolCallUpdate::new(
            call,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::InProgress)
                .content(vec![ToolCallContent::Terminal(Terminal::new(
                    terminal.clone(),
                ))]),
        );
        let notification =
            SessionNotification::new(session_id.to_owned(), SessionUpdate::ToolCallUpdate(update));
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::warn!("showing the terminal in the tool call: {error}");
        }
    }
}

/// A terminal the editor holds for warden: killed and released when dropped unfinished (the
/// gate drops a cancelled call's future after a short grace), so no command outlives its call.
struct Lease {
    connection: ConnectionTo<Client>,
    session_id: String,
    terminal: TerminalId,
    released: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let connection = self.connection.clone();
        let kill = KillTerminalRequest::new(self.session_id.clone(), self.terminal.clone());
        let release = ReleaseTerminalRequest::new(self.session_id.clone(), self.terminal.clone());
        tokio::spawn(async move {
            let _ = connection.send_request(kill).block_task().await;
            if let Err(error) = connection.send_request(release).block_task().await {
                tracing::warn!("terminal/release: {error}");
            }
        });
    }
}

/// How the wait for the command ended.
enum Waited {
    Exited,
    TimedOut,
    Cancelled,
    Failed(String),
}

impl CommandTerminal for EditorTerminal {
    fn run<'a>(
        &'a self,
        command: &'a str,
        cwd: &'a Path,
        timeout: Duration,
        output_limit: usize,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalRun, String>> {
        Box::pin(async move {
            let session_id = self.session_id()?;
            // Cancelled before the editor was asked: nothing starts.
            if cancel.is_cancelled() {
                return Ok(TerminalRun {
                    cancelled: true,
                    ..TerminalRun::default()
                });
            }
            let create = CreateTerminalRequest::new(session_id.clone(), "bash")
                .args(vec!["-c".to_owned(), command.to_owned()])
                .cwd(cwd.to_path_buf())
                .output_byte_limit(u64::try_from(output_limit).unwrap_or(u64::MAX));
            let terminal = self
                .connection
                .send_request(create)
                .block_task()
                .await
                .map_err(|error| format!("terminal/create failed ({error})"))?
                .terminal_id;
            let mut lease = Lease {
                connection: self.connection.clone(),
                session_id: session_id.clone(),
                terminal: terminal.clone(),
                released: false,
            };
            self.show(&session_id, &terminal, command);
            let wait = self
                .connection
                .send_request(WaitForTerminalExitRequest::new(
                    session_id.clone(),
                    terminal.clone(),
                ))
                .block_task();
            let waited = tokio::select! {
                exited = wait => match exited {
                    Ok(_) => Waited::Exited,
                    Err(error) => Waited::Failed(format!("terminal/wait_for_exit failed ({error})")),
                },
                () = tokio::time::sleep(timeout) => Waited::TimedOut,
                () = cancel.cancelled() => Waited::Cancelled,
            };
            if !matches!(waited, Waited::Exited) {
                let kill = KillTerminalRequest::new(session_id.clone(), terminal.clone());
                if let Err(error) = self.connection.send_request(kill).block_task().await {
                    tracing::warn!("terminal/kill: {error}");
                }
            }
            let output = self
                .connection
                .send_request(TerminalOutputRequest::new(
                    session_id.clone(),
                    terminal.clone(),
                ))
                .block_task()
                .await;
            let release = ReleaseTerminalRequest::new(session_id, terminal);
            lease.released = true;
            if let Err(error) = self.connection.send_request(release).block_task().await {
                tracing::warn!("terminal/release: {error}");
            }
            if let Waited::Failed(reason) = waited {
                return Err(reason);
            }
            let output = output.map_err(|error| format!("terminal/output failed ({error})"))?;
            let status = output.exit_status;
            Ok(TerminalRun {
                output: output.output,
                truncated: output.truncated,
                exit_code: status.as_ref().and_then(|status| status.exit_code),
                signal: status.and_then(|status| status.signal),
                timed_out: matches!(waited, Waited::TimedOut),
                cancelled: matches!(waited, Waited::Cancelled),
            })
        })
    }
}
