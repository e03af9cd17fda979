//! The `warden` binary: parses the command line and hands each subcommand to its module.

mod agent_session;
mod bridge_client;
mod catalog_views;
mod code_tools;
mod commands;
mod context;
mod sampling;
mod search_tools;
mod skill_scripts;
mod skill_tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// An agent host that puts every tool call behind one authorization boundary.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about)]
struct Cli {
    /// Use FILE as the only configuration scope (it has user authority).
    #[arg(short = 'c', long = "config", global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Advertise the SEP-2640 skills extension (draft) to MCP servers for this run (same as
    /// `[experimental] skills_extension = true`).
    #[arg(long, global = true)]
    mcp_skills_extension: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent headless on one prompt (the answer on stdout).
    Run(commands::run::RunArgs),
    /// The interactive terminal chat: streamed answers, tool calls, approvals, /tools, /mcp.
    Chat(commands::chat::ChatArgs),
    /// Manage MCP servers: add, list, get, remove, import, trust.
    Mcp(commands::mcp::McpArgs),
    /// Inspect and validate the configuration.
    Config(commands::config::ConfigArgs),
    /// Browse and call MCP tools: servers → tools → schema → call (through the gate).
    Tool(commands::tool::ToolArgs),
    /// What confines the agent's tools here: workspace roots, protected paths, the bash sandbox.
    Doctor(commands::doctor::DoctorArgs),
    /// Token counts of the MCP manifest the model would get, per server and in total.
    Context(commands::context::ContextArgs),
    /// Run JavaScript in the code-mode sandbox; its tool calls go through the gate.
    Code(commands::code::CodeArgs),
    /// Skills: list, show, check, grants, revoke.
    Skills(commands::skills::SkillsArgs),
    /// Show the audit trail: one record per gate decision.
    Audit(commands::audit::AuditArgs),
    /// Serve the gated tool surface as an MCP server (stdio or Streamable HTTP).
    Serve(commands::serve::ServeArgs),
}

/// What every subcommand may need from the global flags.
#[derive(Debug, Clone)]
pub struct Globals {
    /// `-c FILE`: the only configuration scope when set.
    pub config_file: Option<PathBuf>,
    /// `--mcp-skills-extension`: advertise the SEP-2640 skills extension.
    pub mcp_skills_extension: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let globals = Globals {
        config_file: cli.config,
        mcp_skills_extension: cli.mcp_skills_extension,
    };
    let outcome = match cli.command {
        Command::Run(args) => commands::run::run(&globals, args),
        Command::Chat(args) => commands::chat::run(&globals, args),
        Command::Mcp(args) => commands::mcp::run(&globals, args),
        Command::Config(args) => commands::config::run(&globals, args),
        Command::Tool(args) => commands::tool::run(&globals, args),
        Command::Context(args) => commands::context::run(&globals, args),
        Command::Doctor(args) => commands::doctor::run(&globals, args),
        Command::Code(args) => commands::code::run(&globals, args),
        Command::Skills(args) => commands::skills::run(&globals, args),
        Command::Audit(args) => commands::audit::run(&globals, args),
        Command::Serve(args) => commands::serve::run(&globals, args),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("warden: {error:#}");
            ExitCode::FAILURE
        }
    }
}
