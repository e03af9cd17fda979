//! warden configuration: files, scopes, layering, variable expansion, validation, trust and comment-preserving edits.

mod acp;
mod describe;
mod edit;
mod entry;
mod error;
mod expand;
mod import;
mod load;
mod model;
mod paths;
mod policy;
mod raw;
mod sandbox;
mod schema;
mod service;
mod skill_scripts;
mod tenancy;
mod trust;

#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod tests;

pub use acp::{AcpTerminal, RawAcp};
pub use describe::{READS_ENV_LABEL, TrustLine};
pub use edit::{
    EditError, add_server, add_servers, add_servers_to_file, atomic_write, declares_server,
    remove_server, remove_server_from_file, server_table,
};
pub use entry::{
    AuthMode, AuthState, MAX_SERVER_NAME_LEN, OAuthClientConfig, RemoteTransport,
    ResolvedTransport, Scope, ScopedRawServer, ServerEntry, ServerPolicy, ToolFilter, ToolPolicy,
    Transport, is_valid_server_name, is_web_origin, timeout_seconds,
};
pub use error::{ConfigError, Diagnostic, Problem};
pub use expand::{
    ExpandError, ExpandErrorKind, Secret, Segment, TemplateError, VarContext, Variable,
    escape_literal, expand, is_authorization_header, is_env_name, is_reference_only,
    is_scheme_reference, is_shareable_header_value, parse_template,
};
pub use import::{ImportError, ImportedServer, parse_mcp_json};
pub use load::{ConfigFile, LoadRequest, LoadedConfig, load, parse_str, read_file};
pub use model::{
    AgentProfile, ClientToolSpec, DEFAULT_AUTO_DEFER_TOKENS, DeferMode, DiscoverySettings,
    EmbeddingsSpec, ExperimentalSettings, KnowledgeSettings, ModelEntry, ModelProvider,
    ModelSettings, RerankerSpec, SERVICE_HOST_TOOLS, ScopedRawAgent, ScopedRawModel, is_entry_name,
};
pub use paths::{Paths, PathsError};
pub use policy::{
    AuditSettings, AuthorizationCommand, AuthorizationSettings, DEFAULT_ALWAYS_ASK, DeclaredRule,
    HookCommand, HookErrorPolicy, PermissionSettings, PolicySettings, ScopedRawPolicy,
    ToolSettingsEntry, user_path,
};
pub use raw::{
    AuditSync, BridgeTransport, CURRENT_SCHEMA_VERSION, RawAgent, RawAudit, RawAuthorization,
    RawAuthorizationRule, RawClientTool, RawConfig, RawDiscovery, RawExperimental, RawHook,
    RawHooks, RawModel, RawOAuth, RawPermissions, RawPolicy, RawServer, RawService, RawToolFilter,
    RawToolPolicy, RawToolSettings, SUPPORTED_SCHEMA_VERSIONS, TokenStoreSetting, nearest,
};
pub use sandbox::{RawSandbox, SandboxModeSetting, SandboxSettings};
pub use schema::schema_json;
pub use service::{DATABASE_URL_FORMS, DatabaseUrl, DatabaseUrlError, redact_database_url};
pub use skill_scripts::{MAX_SCRIPT_TIMEOUT, RawSkillScripts, SkillScriptSettings};
pub use tenancy::{
    DEFAULT_CLIENT_CALL_TIMEOUT_SECS, Quotas, RawQuotas, RawTenant, Tenancy, is_host_rule,
};
pub use trust::{Approval, ApprovalKind, TrustError, TrustState, TrustStore};
/// The shared vocabulary the validated settings are written in (defined in `warden-vocab`).
pub use warden_vocab::{
    AuthorizationRule, CapabilityClass, DEFAULT_AUTHORIZATION_TIMEOUT, DEFAULT_HOOK_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, HookEvent, MAX_TIMEOUT, PermissionMode,
    RuleDecision, ToolGlob, ToolGlobError,
};
