//! warden as an A2A agent (`warden serve --a2a ADDR`): other agents and A2A platforms fetch its
//! card, send it messages and follow its tasks over A2A's JSON-RPC binding, v1.0 (`SendMessage`
//! …) and v0.3 (`message/send` …) on the same endpoint. One A2A
//! context is one `warden_session` agent session (a follow-up message continues its
//! conversation); one task is one agent turn. Every tool call goes through the gate with source
//! `a2a` and the client's identity; a call that needs a person turns the task
//! `input-required`, and the client's next message in that task answers it.

mod http;
mod protocol;
mod tasks;
mod v03;

use std::sync::Arc;

use warden_policy::Approver;
use warden_session::AgentSession;
pub use warden_session::OpenError;

pub use http::{A2A_PATH, A2aSettings, CARD_PATH, DEFAULT_MAX_CONTEXTS, serve_a2a};
pub use protocol::{PROTOCOL_VERSION, TaskState};

/// What the server asks the binary when a client's first message opens a context.
pub struct OpenRequest {
    /// The agent profile the message picked (`metadata["warden/agent"]`), or `None` for the
    /// default agent.
    pub agent: Option<String>,
    /// Asks the client (the task turns `input-required`).
    pub approver: Arc<dyn Approver>,
    /// Who is calling, for the gate and the audit: the token's fingerprint and the context.
    pub caller: String,
}

/// One agent the card offers as a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The `[agents.NAME]` name, or `default`.
    pub id: String,
    pub description: String,
}

/// Opens the agent sessions clients ask for: the binary supplies it, with the configuration,
/// the policy flags and the model it was started with.
pub trait SessionOpener: Send + Sync + 'static {
    /// The agents offered: the default one first, then each `[agents.NAME]` profile.
    fn profiles(&self) -> Vec<Profile>;

    /// Opens one session as `request` says.
    fn open(&self, request: OpenRequest) -> Result<AgentSession, OpenError>;
}

/// Why `warden serve --a2a` stopped.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error("--insecure-no-auth is only accepted on a loopback address, not {0}")]
    InsecureOffLoopback(std::net::SocketAddr),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
