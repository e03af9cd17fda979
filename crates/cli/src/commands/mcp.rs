//! `warden mcp`: placeholder until the subcommand lands.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct McpArgs {}

pub fn run(_globals: &crate::Globals, _args: McpArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
