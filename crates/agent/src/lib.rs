//! warden's agent: model providers, the agent loop, system prompt assembly, built-in tools and sessions.

mod agent;
pub mod budget;
pub mod builtin;
pub mod confine;
mod conversation;
pub mod process;
pub mod prompt;
pub mod provider;
pub mod session;
pub mod workspace;

pub use agent::{
    Agent, AgentError, AgentEvent, AgentOptions, RunOutcome, StopReason, ToolCallRecord,
    ToolCallRequest, ToolCallResult, ToolExecutor, ToolList,
};
pub use builtin::{
    ArtifactSink, BashEnv, BuiltinOptions, BuiltinReach, BuiltinResult, BuiltinToolSpec,
    BuiltinTools, Capability, ConfinementReport, DirArtifacts, builtin_specs, cap_output,
};
pub use confine::BashConfinement;
pub use conversation::{Message, ToolCall, ToolSpec, Usage};
pub use prompt::{
    ProjectInstructions, PromptParts, assemble_system_prompt, find_project_instructions,
};
pub use provider::{
    ANTHROPIC_TOOL_SEARCH_NAME, ANTHROPIC_TOOL_SEARCH_TYPE, ApiKey, DeferredTools, ModelClient,
    ModelConfig, ModelDelta, ModelRequest, ModelResponse, NO_MODEL_MESSAGE, ProviderError,
    RetryPolicy, SelectError, client_for, select_model,
};
pub use session::{LoadedSession, Redactor, Session, SessionError, SessionRecord, SessionStore};
pub use warden_sandbox::{ResourceLimits, SandboxMode};
pub use workspace::{
    Access, Placement, ProtectedDefaults, ProtectedPath, ReadError, Workspace, read_regular_file,
};
