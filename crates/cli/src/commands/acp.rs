//! `warden acp`: warden as an Agent Client Protocol agent on standard input and output, for
//! editors (Zed's `agent_servers`, JetBrains through an adapter, Neovim plugins). Each session
//! the editor opens is an agent session in the editor's folder, with the editor's MCP servers as
//! ad-hoc servers under the operator's policy; the editor answers the gate's questions.

use std::process::ExitCode;
use std::sync::Arc;

use warden_acp::{OpenError, OpenRequest, SessionOpener, serve_stdio};
use warden_session::{AgentSession, SessionRequest};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, host_options, load_config_in, open_failure};

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
    // A typo in a policy flag is said at once, not at the editor's first session.
    args.policy
        .policy(&warden_config::PolicySettings::default())?;
    let opener = Arc::new(CliOpener {
        globals: globals.clone(),
        args,
    });
    let runtime = async_runtime()?;
    runtime.block_on(serve_stdio(opener))?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the editor's sessions as `warden run` opens its own: the config scopes of the
/// editor's folder with the command line's flags folded in.
struct CliOpener {
    globals: Globals,
    args: AcpArgs,
}

impl SessionOpener for CliOpener {
    fn open(&self, request: OpenRequest) -> Result<AgentSession, OpenError> {
        let (paths, workspace, config) =
            load_config_in(&self.globals, request.workspace).map_err(open_failure)?;
        let terminal_choice = config.acp_terminal;
        let mut options =
            host_options(paths, workspace, &config, &self.args.policy).map_err(open_failure)?;
        options.extra_servers = request.servers;
        options.approver = Some(request.approver);
        let session = SessionRequest {
            config,
            host: options,
            model: self.args.model.as_deref(),
            agent: self.args.agent.as_deref(),
            add_dirs: &request.add_dirs,
            resume: request.resume.as_deref(),
            continue_latest: false,
            room: None,
        };
        // The editor's terminal runs commands outside warden's sandbox: only when the
        // operator chose it in the user config.
        let terminal = request
            .terminal
            .filter(|_| terminal_choice == warden_config::AcpTerminal::Editor);
        AgentSession::open_for_editor(session, request.text_files, terminal).map_err(|error| {
            match error {
                // An id that names no saved session is the editor's mistake, said as such.
                warden_session::SessionError::Resume(_) => OpenError::Usage(error.to_string()),
                error => OpenError::from(error),
            }
        })
    }
}
