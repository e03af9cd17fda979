//! Where a server stands as others see it: `ServerState`, the `ServerStatus` snapshot with catalogue counts, and the call types (`CallOptions`, `CallOutcome`).

use rmcp::model::CallToolResult;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ServerSlot;
use crate::catalog::ToolIdentity;
use crate::client::Progress;
use crate::error::{FailureKind, McpError};

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerState {
    /// Registered; nothing spawned or opened yet.
    NotConnected,
    Connecting,
    Connected,
    Reconnecting,
    /// Was connected, then stopped; its tools stay listed.
    Down,
    NeedsLogin,
    /// Never connected; the failure says why.
    Failed,
}

impl ServerState {
    /// `connected`, `connecting…`, `down`, … as shown to people.
    pub fn label(self) -> &'static str {
        match self {
            ServerState::NotConnected => "not connected",
            ServerState::Connecting => "connecting…",
            ServerState::Connected => "connected",
            ServerState::Reconnecting => "reconnecting…",
            ServerState::Down => "down",
            ServerState::NeedsLogin => "needs login",
            ServerState::Failed => "failed",
        }
    }
}

/// Item counts of the last fetched catalogue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogCounts {
    pub tools: Option<usize>,
    pub resources: Option<usize>,
    pub resource_templates: Option<usize>,
    pub prompts: Option<usize>,
}

/// A snapshot of one server for `warden mcp list` and status lines.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    pub transport: &'static str,
    pub state: ServerState,
    /// The negotiated protocol revision, e.g. `2026-07-28` or `2025-11-25`.
    pub protocol_revision: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub counts: CatalogCounts,
    /// The one-line failure when failed, down or needing login.
    pub failure: Option<String>,
    pub failure_kind: Option<FailureKind>,
    /// The last stderr lines of a stdio server, oldest first.
    pub stderr_tail: Vec<String>,
    /// Bumped each time one of its lists changes.
    pub catalog_generation: u64,
    pub warnings: Vec<String>,
    pub instructions: Option<String>,
    pub required: bool,
    pub deferred: Option<String>,
    /// The process id of a connected stdio server (the leader of its process group).
    pub pid: Option<u32>,
    /// Connect attempts so far (first connect, reconnects).
    pub connect_attempts: u64,
}

/// The result of one tool call, unconverted (see the `result` module for model text).
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub identity: ToolIdentity,
    pub result: CallToolResult,
}

impl CallOutcome {
    /// The server flagged the result as an error (`isError`).
    pub fn is_error(&self) -> bool {
        self.result.is_error.unwrap_or(false)
    }
}

/// What the caller of a tool call can attach: a progress channel, a cancellation token, and
/// `_meta` entries for each request the call sends (a relaying client's log level, say).
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    pub progress: Option<mpsc::Sender<Progress>>,
    pub cancel: CancellationToken,
    pub meta: Option<rmcp::model::RequestMetaObject>,
}

impl ServerSlot {
    /// The protocol revision the connection speaks, once connected.
    pub(crate) fn protocol_revision(&self) -> Option<String> {
        self.lock_state().protocol.clone()
    }

    /// The instructions the server gave at initialization, once connected.
    pub(crate) fn instructions(&self) -> Option<String> {
        self.lock_state().instructions.clone()
    }

    pub(crate) fn status(&self) -> ServerStatus {
        let state = self.lock_state();
        let catalog = self.lock_catalog();
        ServerStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport.kind(),
            state: state.phase,
            protocol_revision: state.protocol.clone(),
            server_name: state.server_name.clone(),
            server_version: state.server_version.clone(),
            counts: CatalogCounts {
                tools: catalog
                    .tools
                    .as_ref()
                    .map(|cached| self.filtered(&cached.items).len()),
                resources: catalog.resources.as_ref().map(|cached| cached.items.len()),
                resource_templates: catalog.templates.as_ref().map(|cached| cached.items.len()),
                prompts: catalog.prompts.as_ref().map(|cached| cached.items.len()),
            },
            failure: state.failure.as_ref().map(ToString::to_string),
            failure_kind: state.failure.as_ref().map(McpError::kind),
            stderr_tail: self.stderr.lines(),
            catalog_generation: catalog.generation,
            warnings: catalog.warnings.clone(),
            instructions: state.instructions.clone(),
            required: self.spec.required,
            deferred: self.spec.deferred.clone(),
            pid: state.live.as_ref().and_then(|live| live.pid),
            connect_attempts: state.attempts,
        }
    }
}
