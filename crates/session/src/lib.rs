//! An agent session, the same for every frontend: the model and its client, the host with the
//! built-in, skill, skill-script, code-mode, deferred-search and sampling tools behind the one
//! gate, the model's tool list, the byte-stable system prompt, the transcript store and the tool
//! CLI's bridge. `warden run`, `warden chat` and `warden serve` open it; so will the service.

mod agent;
mod catalog_views;
mod catalog_watch;
mod code_tools;
mod deferral;
pub mod knowledge;
mod opener;
mod sampling;
mod skill_scripts;
mod skill_tools;
mod tool_cli;
mod turn;

pub use agent::{
    AgentSession, GateExecutor, Room, SessionError, UsageError, ad_hoc_servers, bash_confinement,
    session_workspace, split_command,
};
pub use catalog_views::{ServerTools, apply_auto_deferral, every_server, session_deferral};
pub use code_tools::{CODE_EXECUTE, CODE_SEARCH, GateCodeHost, code_tools};
pub use deferral::{
    Deferral, SEARCH_TOOLS, Settled, generated_summary, model_switch_notice, tool_references,
};
pub use opener::{
    ConfigOpener, EditorIo, OpenError, PolicyOverrides, Prepared, Resume, SessionOpener,
    SessionSpec, open_prepared,
};
pub use sampling::SamplingModel;
pub use skill_scripts::{RUN_SKILL_SCRIPT, ScriptQuota, SkillScripts, run_skill_script};
pub use skill_tools::{READ_SKILL_FILE, USE_SKILL, skill_tools};
pub use tool_cli::{TOOL_CLI_USAGE, bridge_listen, settle_tool_cli, with_tool_cli_usage};
pub use turn::{MAX_TURNS, RESULT_LIMIT, Turn, TurnEnd, TurnError, clip_result};
pub use warden_host::SessionPrincipal;
