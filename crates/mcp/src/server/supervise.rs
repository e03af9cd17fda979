//! Supervision and the operator's lifecycle commands: a lost connection noticed and recovered with capped backoff, stop, restart, reconnect and shutdown.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::state::ServerState;
use super::{AUTOMATIC_RECOVERIES, Live, ServerSlot};
use crate::error::{FailureKind, McpError};
use crate::stdio::describe_exit;

/// Automatic reconnect attempts after one loss.
pub(super) const RECONNECT_ATTEMPTS_PER_LOSS: u32 = 3;

/// First reconnect delay; doubles up to [`MAX_BACKOFF`].
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(500);

pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl ServerSlot {
    /// Drops any connection and connects again now.
    pub(crate) async fn reconnect(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.recoveries_left = AUTOMATIC_RECOVERIES;
            state.stopped = false;
            state.live.take()
        };
        if let Some(previous) = previous {
            previous.close().await;
        }
        self.connect_now(true).await.map(|_| ())
    }

    /// Disconnects the server and keeps it down: no lazy connect and no supervised recovery
    /// until [`Self::reconnect`] or [`Self::restart`]. Its catalogue stays, so its tools stay
    /// listed; a call to one answers that the server was stopped and how to reconnect it.
    /// Calls in flight end with the connection.
    pub(crate) async fn stop(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let live = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.stopped = true;
            state.phase = ServerState::Down;
            state.failure = Some(self.stopped_failure());
            state.live.take()
        };
        if let Some(live) = live {
            live.close().await;
        }
        Ok(())
    }

    /// Drops the connection and the retained catalogue (tools, resources, templates, prompts);
    /// nothing reconnects now: the next request connects lazily and fetches fresh lists. Clears
    /// a stop.
    pub(crate) async fn restart(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.stopped = false;
            state.recoveries_left = AUTOMATIC_RECOVERIES;
            state.phase = ServerState::NotConnected;
            state.failure = None;
            state.live.take()
        };
        {
            let mut catalog = self.lock_catalog();
            catalog.tools = None;
            catalog.resources = None;
            catalog.templates = None;
            catalog.prompts = None;
            catalog.warnings.clear();
            catalog.generation += 1;
        }
        if let Some(previous) = previous {
            previous.close().await;
        }
        Ok(())
    }

    pub(super) fn watch_connection(&self, live: &Arc<Live>) {
        let weak = self.weak_self.clone();
        let closed = live.closed.clone();
        let epoch = live.epoch;
        tokio::spawn(async move {
            closed.cancelled().await;
            if let Some(slot) = weak.upgrade() {
                slot.connection_lost(epoch).await;
            }
        });
    }

    /// The connection closed: record why, mark the server down, and start supervised recovery.
    pub(super) async fn connection_lost(&self, epoch: u64) {
        let live = {
            let mut state = self.lock_state();
            let current = state.live.as_ref().is_some_and(|live| live.epoch == epoch);
            if !current || state.shut_down {
                return;
            }
            if state
                .live
                .as_ref()
                .is_some_and(|live| live.intentional_close.load(Ordering::SeqCst))
            {
                return;
            }
            state.live.take()
        };
        let Some(live) = live else {
            return;
        };
        let what = match &live.child {
            Some(child) => {
                let mut child = child.lock().await;
                let status = tokio::time::timeout(Duration::from_secs(2), child.wait_exit()).await;
                let _ = tokio::time::timeout(Duration::from_millis(500), child.wait_stderr()).await;
                match status {
                    Ok(status) => format!("exited with {}", describe_exit(status)),
                    Err(_) => {
                        child.kill().await;
                        "closed its stdout".to_owned()
                    }
                }
            }
            None => live
                .close_reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_else(|| "closed the connection".to_owned()),
        };
        let what = match self.stderr.last_line() {
            Some(line) if live.child.is_some() => {
                format!("{what} (its last stderr line: \"{line}\")")
            }
            _ => what,
        };
        live.close().await;
        let failure = McpError::new(
            self.name(),
            FailureKind::Exited,
            what,
            Some(&format!(
                "check the server's logs, then {}",
                reconnect_advice(self.name())
            )),
        );
        let supervise = {
            let mut state = self.lock_state();
            state.phase = ServerState::Down;
            state.failure = Some(failure);
            if state.recoveries_left > 0 {
                state.recoveries_left -= 1;
                true
            } else {
                false
            }
        };
        if supervise && let Some(slot) = self.weak_self.upgrade() {
            tokio::spawn(async move { slot.supervise().await });
        }
    }

    /// Reconnects a down server with capped backoff and a bounded number of attempts.
    pub(super) async fn supervise(self: Arc<Self>) {
        let mut delay = FIRST_BACKOFF;
        for _attempt in 0..RECONNECT_ATTEMPTS_PER_LOSS {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.shutdown.cancelled() => return,
            }
            delay = (delay * 2).min(MAX_BACKOFF);
            let _connecting = self.connect_lock.lock().await;
            {
                let state = self.lock_state();
                if state.live.is_some()
                    || state.shut_down
                    || state.stopped
                    || state.phase != ServerState::Down
                {
                    return;
                }
            }
            if self.connect_now(true).await.is_ok() {
                return;
            }
        }
    }

    /// Closes the connection and kills the process group; the slot stays closed.
    pub(crate) async fn shutdown(&self) {
        self.shutdown.cancel();
        let live = {
            let mut state = self.lock_state();
            state.shut_down = true;
            state.live.take()
        };
        if let Some(live) = live {
            live.close().await;
        }
    }
}

/// How an operator reconnects a server that went down: the words every "down" failure ends with.
pub(super) fn reconnect_advice(server: &str) -> String {
    format!(
        "reconnect it: run the command again (a new session connects afresh), or in \
         `warden chat` use `/mcp restart {server}`"
    )
}
