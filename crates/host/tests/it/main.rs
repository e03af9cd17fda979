//! The session host over real fixture servers: calls through the gate, MCP skills, and how config
//! entries become the runtime's HTTP auth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod code_tools;
mod mcp_skills;
mod oauth_specs;
mod session;
