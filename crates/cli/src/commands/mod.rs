//! One module per `warden` subcommand.

pub(crate) mod a2a;
pub(crate) mod acp;
pub(crate) mod audit;
pub(crate) mod chat;
pub(crate) mod code;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod doctor;
pub(crate) mod knowledge;
pub(crate) mod mcp;
pub(crate) mod probe;
pub(crate) mod prompt;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod service;
pub(crate) mod skills;
pub(crate) mod tool;
