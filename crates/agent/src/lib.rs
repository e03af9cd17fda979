//! warden's agent: model providers, the agent loop, system prompt assembly, built-in tools and sessions.

mod agent;
mod budget;
mod builtin;
mod confine;
mod conversation;
mod process;
mod prompt;
mod provider;
mod session;
mod workspace;

pub use agent::{
    Agent, AgentError, AgentEvent, AgentOptions, Checkpoint, EventSink, Events, RunOutcome,
    StopReason, ToolCallRecord, ToolCallRequest, ToolCallResult, ToolExecutor, ToolList,
    ToolRefresh,
};
pub use budget::output_reserve;
pub use builtin::{
    ArtifactSink, BashEnv, BuiltinOptions, BuiltinReach, BuiltinResult, BuiltinToolSpec,
    BuiltinTools, Capability, CommandTerminal, ConfinementReport, DirArtifacts, MAX_READ_BYTES,
    PLAN_TOOL, PlanEntry, PlanPriority, PlanStatus, TerminalRun, TextFiles, builtin_specs,
    cap_output, plan_entries,
};
pub use confine::{BashConfinement, bash_readable_roots, clean_environment, prepare_script};
pub use conversation::{Message, ToolCall, ToolSpec, Usage};
pub use process::run_confined;
pub use prompt::{
    MAX_INSTRUCTIONS_BYTES, ProjectInstructions, PromptParts, assemble_system_prompt,
    find_project_instructions,
};
pub use provider::{
    ANTHROPIC_TOOL_SEARCH_NAME, ANTHROPIC_TOOL_SEARCH_TYPE, ApiKey, DEFAULT_MAX_RETRY_AFTER,
    DeferredTools, ModelClient, ModelConfig, ModelDelta, ModelRequest, ModelResponse,
    NO_MODEL_MESSAGE, ProviderError, RetryPolicy, SelectError, Timeouts, client_for,
    no_model_message, select_model,
};
pub use session::{LoadedSession, Redactor, Session, SessionError, SessionRecord, SessionStore};
pub use warden_sandbox::{ResourceLimits, SandboxMode};
pub use workspace::{
    Access, Placement, ProtectedDefaults, ProtectedPath, ReadError, Workspace, read_regular_file,
    resolve_existing,
};
