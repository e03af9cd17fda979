//! `warden config`: placeholder until the subcommand lands.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {}

pub fn run(_globals: &crate::Globals, _args: ConfigArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
