//! warden's lifecycle hooks: operator commands run on session, prompt and tool events.
//!
//! Hooks come from the user's config only (never from a project file). Each run gets one JSON
//! object on stdin ([`HookInput`]); exit code 2 blocks with stderr as the reason; a spawn failure,
//! a timeout (the hook's process group is killed) or any other exit is "no opinion". Hooks tighten,
//! they are never the load-bearing gate. A logging hook sees live arguments and results that the
//! audit trail would store only as a digest.

mod input;
mod process;
mod runner;
mod spec;

pub use input::{HookInput, HookTool};
pub use process::{CommandRun, CommandSpec, run_command};
pub use runner::{
    BLOCKING_EXIT_CODE, HookReport, HookRunResult, HookRunner, HookVerdict, result_value,
};
pub use spec::{HookDefinition, HookSpec, HookSpecError};
/// The shared vocabulary hooks are configured in (defined in `warden-vocab`).
pub use warden_vocab::{DEFAULT_HOOK_TIMEOUT, HookEvent, ToolGlob};
