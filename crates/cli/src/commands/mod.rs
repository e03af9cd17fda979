//! One module per `warden` subcommand.

pub mod config;
pub mod mcp;
