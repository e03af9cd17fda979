//! warden as an Agent Client Protocol agent: an editor (Zed, a JetBrains adapter, a Neovim plugin)
//! drives warden's agent sessions over stdio. Each ACP session is an [`AgentSession`] of
//! `warden_session` opened in the editor's folder, with the editor's MCP servers added as ad-hoc
//! servers under the operator's policy; every call goes through the one gate, and a call that
//! needs a person becomes `session/request_permission`.

mod approver;
mod convert;
mod files;
mod server;
mod terminal;

use std::path::PathBuf;
use std::sync::Arc;

use warden_mcp::ServerSpec;
use warden_policy::Approver;
use warden_session::AgentSession;
pub use warden_session::OpenError;

pub use convert::{edit_diff, mcp_server_spec, prompt_text, tool_kind, tool_locations, tool_title};
pub use server::serve_stdio;

/// What the agent asks the binary when the editor opens or loads a session.
pub struct OpenRequest {
    /// The editor's working folder: the session's workspace (the project config is read there).
    pub workspace: PathBuf,
    /// More folders the editor gave (`additionalDirectories`), added as workspace roots.
    pub add_dirs: Vec<PathBuf>,
    /// The editor's MCP servers, as ad-hoc servers of this session.
    pub servers: Vec<ServerSpec>,
    /// Asks the editor's user (through `session/request_permission`).
    pub approver: Arc<dyn Approver>,
    /// The saved session to continue (`session/load`).
    pub resume: Option<String>,
    /// The editor's files, when it offers to read and write them: the file tools go through
    /// them (open the session with [`AgentSession::open_with_text_files`]).
    pub text_files: Option<Arc<dyn warden_agent::TextFiles>>,
    /// The editor's terminal, when it offers one. Used only when the operator chose it
    /// (`[acp] terminal = "editor"`): `bash` then runs there, unconfined, asked every time
    /// (open the session with [`AgentSession::open_for_editor`]).
    pub terminal: Option<Arc<dyn warden_agent::CommandTerminal>>,
}

/// Opens the agent sessions the editor asks for: the binary supplies it, with the configuration
/// scopes, the policy flags and the model it was started with.
pub trait SessionOpener: Send + Sync + 'static {
    /// Opens one session as `request` says.
    fn open(&self, request: OpenRequest) -> Result<AgentSession, OpenError>;
}

/// Why `warden acp` stopped.
#[derive(Debug, thiserror::Error)]
#[error("the ACP connection failed: {0}")]
pub struct AcpError(pub String);
