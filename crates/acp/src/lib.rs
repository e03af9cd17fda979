//! warden as an Agent Client Protocol agent: an editor (Zed, a JetBrains adapter, a Neovim plugin)
//! drives warden's agent sessions over stdio. Each ACP session is an agent session of
//! `warden_session` opened in the editor's folder, with the editor's MCP servers added as ad-hoc
//! servers under the operator's policy; every call goes through the one gate, and a call that
//! needs a person becomes `session/request_permission`.

mod approver;
mod convert;
mod files;
mod server;
mod terminal;

pub use warden_session::{OpenError, SessionOpener};

pub use convert::{edit_diff, mcp_server_spec, prompt_text, tool_kind, tool_locations, tool_title};
pub use server::serve_stdio;

/// Why `warden acp` stopped.
#[derive(Debug, thiserror::Error)]
#[error("the ACP connection failed: {0}")]
pub struct AcpError(pub String);
