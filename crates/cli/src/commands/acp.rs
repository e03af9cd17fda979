//! `warden acp`: warden as an Agent Client Protocol agent on standard input and output, for
//! editors (Zed's `agent_servers`, JetBrains through an adapter, Neovim plugins). Each session
//! the editor opens is an agent session in the editor's folder, with the editor's MCP servers as
//! ad-hoc servers under the operator's policy; the editor answers the gate's questions.

use std::process::ExitCode;
use std::sync::Arc;

use warden_acp::serve_stdio;

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, config_opener};

#[derive(Debug, clap::Args)]
pub(crate) struct AcpArgs {
    /// A `[models.NAME]` entry to use instead of the default.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// An `[agents.NAME]` profile: its model, instructions, skills and servers.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    #[command(flatten)]
    policy: PolicyFlags,
}

pub(crate) fn run(globals: &Globals, args: AcpArgs) -> anyhow::Result<ExitCode> {
    // A typo in a policy flag is said at once, not at the editor's first session. Each
    // session the editor opens reads the config scopes of its own folder.
    let opener = config_opener(globals, &args.policy)?.with_defaults(args.model, args.agent);
    let runtime = async_runtime()?;
    runtime.block_on(serve_stdio(Arc::new(opener)))?;
    Ok(ExitCode::SUCCESS)
}
