//! warden MCP client runtime: connections, catalogues, calls and result conversion.

pub mod artifacts;
pub mod naming;
pub mod result;
