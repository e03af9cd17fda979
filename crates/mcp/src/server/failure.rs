//! Failures as one-line `McpError`s: start-up failures, request and call failures, guard trips, and the bounded request that maps them.

use std::time::Duration;

use rmcp::ServiceError;

use super::call::{URL_ELICITATION_REQUIRED, url_elicitations};
use super::supervise::reconnect_advice;
use super::{Live, ServerSlot, SlotState};
use crate::error::{FailureKind, McpError, human_duration};
use crate::guard::Tripped;
use crate::spec::TransportSpec;
use crate::stdio::{ChildControl, describe_exit};

impl ServerSlot {
    pub(super) fn current_failure(&self, state: &SlotState) -> McpError {
        if state.shut_down {
            return McpError::shut_down(self.name());
        }
        state.failure.clone().unwrap_or_else(|| {
            McpError::new(
                self.name(),
                FailureKind::Exited,
                format!("is {}", state.phase.label()),
                Some(&reconnect_advice(self.name())),
            )
        })
    }

    /// The failure a stopped server answers with.
    pub(super) fn stopped_failure(&self) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::Stopped,
            "stopped by the operator",
            Some(&self.reconnect_hint()),
        )
    }

    pub(super) fn reconnect_hint(&self) -> String {
        reconnect_advice(self.name())
    }

    pub(super) fn startup_timeout_failure(&self, deadline: Duration) -> McpError {
        let (what, hint) = match &self.spec.transport {
            TransportSpec::Stdio { command, .. } => (
                format!(
                    "\"{command}\" did not finish the MCP handshake within {}",
                    human_duration(deadline)
                ),
                "check that the command starts an MCP server on stdio (and writes only MCP to stdout), or raise startup_timeout_sec in its entry",
            ),
            TransportSpec::StreamableHttp { url, .. } | TransportSpec::LegacySse { url, .. } => (
                format!(
                    "{url} did not finish the MCP handshake within {}",
                    human_duration(deadline)
                ),
                "check the url, and that the server is running, or raise startup_timeout_sec in its entry",
            ),
        };
        let what = match self.stderr.last_line() {
            Some(line) => format!("{what} (its last stderr line: \"{line}\")"),
            None => what,
        };
        McpError::new(self.name(), FailureKind::StartupTimeout, what, Some(hint))
    }

    pub(super) fn era_mismatch(&self, error: &rmcp::service::ClientInitializeError) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::HandshakeFailed,
            format!("the MCP handshake failed: {error}"),
            Some("check that the server speaks MCP 2025-11-25 or 2026-07-28"),
        )
    }

    pub(super) async fn stdio_startup_failure(
        &self,
        command: &str,
        control: &mut ChildControl,
        error: &rmcp::service::ClientInitializeError,
    ) -> McpError {
        let exited = tokio::time::timeout(Duration::from_secs(2), control.wait_exit()).await;
        let _ = tokio::time::timeout(Duration::from_millis(500), control.wait_stderr()).await;
        let last = self.stderr.last_line();
        let with_stderr = |what: String| match &last {
            Some(line) => format!("{what} (its last stderr line: \"{line}\")"),
            None => what,
        };
        match exited {
            Ok(status) => McpError::new(
                self.name(),
                FailureKind::ExitedDuringStartup,
                with_stderr(format!(
                    "\"{command}\" exited during start-up with {}",
                    describe_exit(status)
                )),
                Some(
                    "check the command, its arguments and env, and run it by hand to see its output",
                ),
            ),
            Err(_still_running) => {
                control.kill().await;
                McpError::new(
                    self.name(),
                    FailureKind::HandshakeFailed,
                    with_stderr(format!(
                        "\"{command}\" did not complete the MCP handshake: {error}"
                    )),
                    Some("check that the command starts an MCP server on stdio"),
                )
            }
        }
    }

    /// The server forgot the session while `tool` was on its way: the call is not re-sent; the
    /// connection is renewed now (supervised on failure) so the next call finds a session.
    pub(super) async fn session_forgotten(&self, live: &Live, tool: &str) -> McpError {
        let renewed = self.renew_session(live.epoch).await;
        let hint = match &renewed {
            Ok(()) => {
                "a new session is open; check whether the call took effect before calling again"
                    .to_owned()
            }
            Err(error) => format!(
                "reconnecting failed ({}); warden keeps trying",
                error.what()
            ),
        };
        McpError::new(
            self.name(),
            FailureKind::SessionForgotten,
            format!(
                "the server forgot the session; the call to \"{tool}\" may or may not have run — not re-sent"
            ),
            Some(&hint),
        )
    }

    pub(super) fn request_failure(&self, what: &str, error: &ServiceError) -> McpError {
        if let ServiceError::McpError(data) = error
            && let Some(tripped) = Tripped::from_error(data)
        {
            return guard_failure(self.name(), &format!("\"{what}\""), &tripped);
        }
        match error {
            ServiceError::McpError(data) => McpError::new(
                self.name(),
                FailureKind::Rpc,
                rpc_failure(&format!("\"{what}\""), data),
                None,
            ),
            ServiceError::Timeout { timeout } => {
                McpError::timeout(self.name(), &format!("\"{what}\""), *timeout)
            }
            ServiceError::TransportClosed => McpError::new(
                self.name(),
                FailureKind::Exited,
                "the connection is closed",
                Some("check the server's logs, then reconnect"),
            ),
            other => McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("\"{what}\" failed: {other}"),
                Some("check the server's logs"),
            ),
        }
    }

    /// A call failed in flight. When the connection died, the error says the server exited
    /// (with its last stderr line) and that the call was not re-sent.
    pub(super) async fn call_failure(
        &self,
        live: &Live,
        tool: &str,
        error: &ServiceError,
    ) -> McpError {
        if let ServiceError::McpError(data) = error {
            return match Tripped::from_error(data) {
                Some(Tripped::SessionForgotten) => self.session_forgotten(live, tool).await,
                Some(tripped) => guard_failure(self.name(), &format!("\"{tool}\""), &tripped),
                None => self.request_failure(tool, error),
            };
        }
        let connection_gone = matches!(
            error,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) || live.closed.is_cancelled();
        if !connection_gone {
            return self.request_failure(tool, error);
        }
        if self.lock_state().stopped {
            return McpError::new(
                self.name(),
                FailureKind::Stopped,
                format!(
                    "was stopped by the operator while \"{tool}\" was running; it may or may not have run — not re-sent"
                ),
                Some(&self.reconnect_hint()),
            );
        }
        // Let the supervisor record why the connection ended (bounded wait).
        let _ = tokio::time::timeout(Duration::from_secs(4), async {
            while self
                .lock_state()
                .live
                .as_ref()
                .is_some_and(|current| current.epoch == live.epoch)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let cause = {
            let state = self.lock_state();
            state
                .failure
                .as_ref()
                .filter(|failure| failure.kind() == FailureKind::Exited)
                .map(|failure| failure.what().to_owned())
        };
        let cause = cause.unwrap_or_else(|| match self.stderr.last_line() {
            Some(line) => format!("closed the connection (its last stderr line: \"{line}\")"),
            None => "closed the connection".to_owned(),
        });
        McpError::new(
            self.name(),
            FailureKind::Exited,
            format!("{cause} while \"{tool}\" was running; the call was not re-sent"),
            Some(&format!(
                "check the server's logs, then {}",
                reconnect_advice(self.name())
            )),
        )
    }
}

/// `<what> failed: <message> (JSON-RPC error <code>)`; a -32042 also names the URL(s) to open,
/// so no path drops them.
pub(super) fn rpc_failure(what: &str, data: &rmcp::model::ErrorData) -> String {
    let failed = format!(
        "{what} failed: {} (JSON-RPC error {})",
        data.message, data.code.0
    );
    if data.code.0 != URL_ELICITATION_REQUIRED {
        return failed;
    }
    let urls = url_elicitations(data)
        .into_iter()
        .map(|elicitation| elicitation.url)
        .collect::<Vec<_>>();
    if urls.is_empty() {
        failed
    } else {
        format!(
            "{failed}; open {} first, then try again",
            urls.join(" and ")
        )
    }
}

/// Runs one request under its deadline; dropping it on timeout sends `notifications/cancelled`.
pub(super) async fn bounded<T, F>(
    server: &str,
    what: &str,
    deadline: Duration,
    future: F,
) -> Result<T, McpError>
where
    F: std::future::Future<Output = Result<T, ServiceError>>,
{
    match tokio::time::timeout(deadline, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(ServiceError::McpError(data))) if Tripped::from_error(&data).is_some() => {
            let tripped = Tripped::from_error(&data).unwrap_or(Tripped::SessionForgotten);
            Err(guard_failure(server, what, &tripped))
        }
        Ok(Err(ServiceError::McpError(data))) => Err(McpError::new(
            server,
            FailureKind::Rpc,
            rpc_failure(what, &data),
            None,
        )),
        Ok(Err(ServiceError::TransportClosed)) => Err(McpError::new(
            server,
            FailureKind::Exited,
            format!("the connection closed during {what}"),
            Some("check the server's logs, then reconnect"),
        )),
        Ok(Err(other)) => Err(McpError::new(
            server,
            FailureKind::Protocol,
            format!("{what} failed: {other}"),
            Some("check the server's logs"),
        )),
        Err(_elapsed) => Err(McpError::timeout(server, what, deadline)),
    }
}

/// A guard that ended a request, as the one-line failure.
pub(super) fn guard_failure(server: &str, what: &str, tripped: &Tripped) -> McpError {
    match tripped {
        Tripped::SessionForgotten => McpError::new(
            server,
            FailureKind::SessionForgotten,
            format!("the server forgot the session during {what}; it was not re-sent"),
            Some("try again: warden opens a new session"),
        ),
        limit => McpError::new(
            server,
            FailureKind::ResponseLimit,
            format!(
                "the response to {what} streamed {}; the request was ended",
                limit.describe()
            ),
            Some("the server sent far more than one answer needs; check the server"),
        ),
    }
}
