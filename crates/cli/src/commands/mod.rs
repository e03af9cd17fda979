//! One module per `warden` subcommand.

pub mod audit;
pub mod chat;
pub mod code;
pub mod config;
pub mod context;
pub mod doctor;
pub mod mcp;
pub mod probe;
pub mod prompt;
pub mod run;
pub mod serve;
pub mod skills;
pub mod tool;
