//! The configuration file as written: raw structs (the source of the JSON Schema) and the TOML walk that fills them with precise errors.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;
use toml::{Table, Value};
use warden_vocab::{CapabilityClass, GLOB_SCHEMA_PATTERN, HookEvent, PermissionMode, RuleDecision};

use crate::entry::{AuthMode, RemoteTransport};
use crate::error::{Diagnostic, Problem};
use crate::model::{DeferMode, ModelProvider};

/// The `schema_version` values this build reads.
pub const SUPPORTED_SCHEMA_VERSIONS: &[i64] = &[1];

/// The `schema_version` written into new files.
pub const CURRENT_SCHEMA_VERSION: i64 = 1;

/// A whole configuration file. Adding a top-level section is one field here, one entry in
/// [`RawConfig::KEYS`] and one arm in the walk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "warden configuration",
    description = "warden's config.toml (user scope, project scope `.warden/config.toml`, or a file given with -c)."
)]
pub struct RawConfig {
    /// Version of the file format. Required; this build supports 1.
    #[schemars(range(min = 1, max = 1))]
    pub schema_version: i64,
    /// MCP servers by name (letters, digits, `_` and `-`; at most 64 characters).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub mcp_servers: BTreeMap<String, RawServer>,
    /// The default model: the name of a `[models.NAME]` table (`--model` overrides it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Models by name (user config only: an entry decides where your API key is sent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub models: BTreeMap<String, RawModel>,
    /// Agent profiles by name (`--agent NAME`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub agents: BTreeMap<String, RawAgent>,
    /// How tool calls are approved: the mode, allow/deny patterns and the always-ask classes. A project file may only tighten them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions: Option<RawPermissions>,
    /// Operator authorization rules and the external authorization command (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<RawAuthorization>,
    /// The audit trail's settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<RawAudit>,
    /// Lifecycle hooks by event (user config only: a hook runs a command with your permissions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks: Option<RawHooks>,
    /// Progressive discovery: when servers are deferred automatically.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery: Option<RawDiscovery>,
    /// Features that are not settled yet; each off unless turned on here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<RawExperimental>,
    /// Where OAuth tokens of remote servers are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<RawOAuth>,
    /// How the agent's bash commands are confined by the kernel (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::RawSandbox>,
    /// Whether skills may run the scripts they carry, and within which bounds (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_scripts: Option<crate::skill_scripts::RawSkillScripts>,
}

impl RawConfig {
    pub const KEYS: &'static [&'static str] = &[
        "schema_version",
        "mcp_servers",
        "model",
        "models",
        "agents",
        "permissions",
        "authorization",
        "audit",
        "hooks",
        "discovery",
        "experimental",
        "oauth",
        "sandbox",
        "skill_scripts",
    ];
}

/// `[experimental]`: features that are not settled yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExperimental {
    /// Advertise the SEP-2640 skills extension (`io.modelcontextprotocol/skills`, draft) to MCP servers: a server that declares it serves its skills through `skills/list` alone (default false; `--mcp-skills-extension` turns it on for one run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills_extension: Option<bool>,
}

impl RawExperimental {
    pub const KEYS: &'static [&'static str] = &["skills_extension"];
}

/// `[oauth]`: where OAuth tokens of remote servers are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    /// `auto` (default: the OS keyring when one answers — secret-tool on Linux, security on macOS — else the 0600 file under the state folder), `file` or `keyring` (fail rather than write a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_store: Option<TokenStoreSetting>,
    /// An https URL of a client ID metadata document (CIMD) used for every remote server whose entry names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

impl RawOAuth {
    pub const KEYS: &'static [&'static str] = &["token_store", "client_metadata_url"];
}

/// `[oauth] token_store`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum TokenStoreSetting {
    /// The OS keyring when it answers a probe, else the 0600 file.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Always the 0600 file.
    #[serde(rename = "file")]
    File,
    /// Always the OS keyring.
    #[serde(rename = "keyring")]
    Keyring,
}

impl KnownValues for TokenStoreSetting {
    const VALUES: &'static [&'static str] = &["auto", "file", "keyring"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "file" => Some(Self::File),
            "keyring" => Some(Self::Keyring),
            _ => None,
        }
    }
}

/// `[discovery]`: automatic deferral of large tool sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDiscovery {
    /// When the schemas of the non-deferred MCP tools exceed this many tokens (o200k), servers are deferred, largest first, until they fit (default 12000, about 10% of a 128k context; 0 turns automatic deferral off). Servers with `always_load = true` are never deferred automatically.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_defer_tokens: Option<u64>,
    /// How `warden tool` inside a session reaches the session's tool bridge: `tcp` (default: loopback on a random port) or `unix` (a Unix socket, mode 0600, in a private 0700 directory under `$XDG_RUNTIME_DIR/warden`, else the state folder's `run/`; refused on platforms without Unix sockets). Either way a fresh 32-byte token guards it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge: Option<BridgeTransport>,
}

impl RawDiscovery {
    pub const KEYS: &'static [&'static str] = &["auto_defer_tokens", "bridge"];
}

/// `[discovery] bridge`: where the session's tool bridge listens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum BridgeTransport {
    /// Loopback TCP (`127.0.0.1`) on a random port.
    #[default]
    #[serde(rename = "tcp")]
    Tcp,
    /// A Unix socket (mode 0600) in a private directory (mode 0700).
    #[serde(rename = "unix")]
    Unix,
}

impl KnownValues for BridgeTransport {
    const VALUES: &'static [&'static str] = &["tcp", "unix"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "tcp" => Some(Self::Tcp),
            "unix" => Some(Self::Unix),
            _ => None,
        }
    }
}

/// `[permissions]`: the approval mode and the operator's lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPermissions {
    /// `ask` (default: read-only tools run, anything else asks), `read-only` (anything else is denied) or `auto` (runs what policy admits except the always-ask classes). A project file may set only `ask` or `read-only`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// Public tool names (globs with `*` and `?`) that run without asking. User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = { "type": "string", "pattern": GLOB_SCHEMA_PATTERN }))]
    pub allow: Option<Vec<String>>,
    /// Public tool names (globs with `*` and `?`) that are always denied; a project file's patterns are added to yours.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = { "type": "string", "pattern": GLOB_SCHEMA_PATTERN }))]
    pub deny: Option<Vec<String>>,
    /// Capability classes that always ask, even in `auto` mode (default `["destructive"]`); a project file may add classes, never remove one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_ask: Option<Vec<CapabilityClass>>,
    /// Folders the built-in tools work in beside the working folder, as absolute paths or `~/…` (`--add-dir` adds more). User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Protected paths (keys, credentials, warden's own files) the built-in tools may reach anyway, as absolute paths or `~/…`; each covers what lies beneath it. Outside the workspace they still ask. User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_protected: Option<Vec<String>>,
}

impl RawPermissions {
    pub const KEYS: &'static [&'static str] = &[
        "mode",
        "allow",
        "deny",
        "always_ask",
        "additional_directories",
        "allow_protected",
    ];
}

/// `[authorization]`: the external authorization command and, as `[[authorization.rules]]`, the operator's rules. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAuthorization {
    /// The external authorization command: an absolute path. It gets one JSON object on stdin and answers `{"decision": "allow"|"deny", "reason": ...}`; any failure denies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Seconds the command may take before the call is denied (default 10; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_sec: Option<u64>,
    /// Rules checked in order; the first whose `tools` pattern matches decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RawAuthorizationRule>>,
}

impl RawAuthorization {
    pub const KEYS: &'static [&'static str] = &["command", "args", "timeout_sec", "rules"];
}

/// One `[[authorization.rules]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAuthorizationRule {
    /// A glob (`*`, `?`) over public tool names, e.g. `mcp__fs__write_*`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = GLOB_SCHEMA_PATTERN))]
    pub tools: Option<String>,
    /// `allow` or `deny`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<RuleDecision>,
    /// Why; shown to the model with a denial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RawAuthorizationRule {
    pub const KEYS: &'static [&'static str] = &["tools", "decision", "reason"];
}

/// `[audit]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAudit {
    /// Store each call's full arguments instead of a digest (default false). User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_arguments: Option<bool>,
}

impl RawAudit {
    pub const KEYS: &'static [&'static str] = &["full_arguments"];
}

/// `[hooks]`: `[[hooks.EVENT]]` commands by event. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHooks {
    /// When a session starts.
    #[serde(rename = "SessionStart", skip_serializing_if = "Option::is_none")]
    pub session_start: Option<Vec<RawHook>>,
    /// Before a prompt is sent; exit code 2 blocks it.
    #[serde(rename = "UserPromptSubmit", skip_serializing_if = "Option::is_none")]
    pub user_prompt_submit: Option<Vec<RawHook>>,
    /// Before a tool call (after authorization); exit code 2 blocks it.
    #[serde(rename = "PreToolUse", skip_serializing_if = "Option::is_none")]
    pub pre_tool_use: Option<Vec<RawHook>>,
    /// After a tool call, with its result.
    #[serde(rename = "PostToolUse", skip_serializing_if = "Option::is_none")]
    pub post_tool_use: Option<Vec<RawHook>>,
    /// When the agent finishes its turn.
    #[serde(rename = "Stop", skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<RawHook>>,
    /// When a session ends.
    #[serde(rename = "SessionEnd", skip_serializing_if = "Option::is_none")]
    pub session_end: Option<Vec<RawHook>>,
    /// What a hook that cannot run (its program does not start, it times out, crashes or exits with another code than 0 or 2) means for a PreToolUse or UserPromptSubmit event: `proceed` (default; the failure is reported with the call) or `deny` (the call or prompt is refused: fail closed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_error: Option<crate::policy::HookErrorPolicy>,
}

impl RawHooks {
    /// The hook events, and `on_error`.
    pub const KEYS: &'static [&'static str] = &[
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
        "on_error",
    ];

    /// The hooks of `event`, as written.
    pub fn get(&self, event: HookEvent) -> Option<&Vec<RawHook>> {
        match event {
            HookEvent::SessionStart => self.session_start.as_ref(),
            HookEvent::UserPromptSubmit => self.user_prompt_submit.as_ref(),
            HookEvent::PreToolUse => self.pre_tool_use.as_ref(),
            HookEvent::PostToolUse => self.post_tool_use.as_ref(),
            HookEvent::Stop => self.stop.as_ref(),
            HookEvent::SessionEnd => self.session_end.as_ref(),
        }
    }

    fn slot(&mut self, event: HookEvent) -> &mut Option<Vec<RawHook>> {
        match event {
            HookEvent::SessionStart => &mut self.session_start,
            HookEvent::UserPromptSubmit => &mut self.user_prompt_submit,
            HookEvent::PreToolUse => &mut self.pre_tool_use,
            HookEvent::PostToolUse => &mut self.post_tool_use,
            HookEvent::Stop => &mut self.stop,
            HookEvent::SessionEnd => &mut self.session_end,
        }
    }
}

/// One `[[hooks.EVENT]]` command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    /// The program: an absolute path (not looked up on PATH, not expanded). Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// PreToolUse and PostToolUse only: a glob (`*`, `?`) over public tool names; absent matches every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = GLOB_SCHEMA_PATTERN))]
    pub matcher: Option<String>,
    /// Seconds the hook may run before it is stopped and counts as "no opinion" (default 60; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_sec: Option<u64>,
}

impl RawHook {
    pub const KEYS: &'static [&'static str] = &["command", "args", "matcher", "timeout_sec"];
}

/// One `[models.NAME]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// The wire protocol: `openai` (Chat Completions and compatible servers), `openai-responses` or `anthropic`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ModelProvider>,
    /// The provider's model id, e.g. `gpt-5.1`, `claude-sonnet-4-5`, `qwen3:8b`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The API base URL, e.g. `http://127.0.0.1:11434/v1` for Ollama (default: the provider's public endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default: OPENAI_API_KEY or ANTHROPIC_API_KEY; none for a local `base_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The context window in tokens (at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// How deferred tools reach the model: `normal` (default), `reference`, `tool-search` (both Anthropic/Responses only) or `system-tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defer_mode: Option<DeferMode>,
    /// Allow a plain `http://` base_url to a host that is not this machine (a LAN server you trust): the API key and every prompt then cross the network unencrypted. Default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_plain_http: Option<bool>,
}

impl RawModel {
    pub const KEYS: &'static [&'static str] = &[
        "provider",
        "id",
        "base_url",
        "api_key_env",
        "context_window",
        "defer_mode",
        "allow_plain_http",
    ];
}

/// One `[agents.NAME]` profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    /// The model: the name of a `[models.NAME]` table (default: the top-level `model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Instructions added to the system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Skills to load by name; one that does not exist fails the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// Only these servers are loaded; `[]` loads none; leaving the key out loads all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
}

impl RawAgent {
    pub const KEYS: &'static [&'static str] = &["model", "instructions", "skills", "mcp_servers"];
}

/// One `[mcp_servers.NAME]` entry: a stdio server (`command`) or a remote one (`url`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// stdio: the program to start (expanded: `${env:VAR}`, `${workspaceFolder}`, `${HOME}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments (expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// stdio: extra environment variables for the child (values expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: the child's working directory (not expanded; relative to the workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// remote: the server's http(s) URL (expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// remote: `streamable-http` (default) or `sse` for legacy HTTP+SSE servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<RemoteTransport>,
    /// remote: HTTP headers sent with every request (values expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// remote: `auto` (default: OAuth when the server asks), `oauth` or `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMode>,
    /// remote, OAuth: a pre-registered client id (otherwise the client registers itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// remote, OAuth: the environment variable holding the client secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// remote, OAuth: fixed loopback port for the redirect listener (default: any free port).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub redirect_port: Option<u16>,
    /// remote, OAuth: an https URL of a client ID metadata document (CIMD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// remote, pre-provisioned: environment variable whose value is sent as the `Authorization` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding a bearer access token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding the token's expiry (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding a refresh token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token_env: Option<String>,
    /// remote, pre-provisioned: token endpoint used to refresh the access token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
    /// remote, pre-provisioned: token revocation endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoke_url: Option<String>,
    /// Whether warden uses this server (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether a run fails when this server cannot start (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Seconds allowed for start-up and the handshake (default 30; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub startup_timeout_sec: Option<u64>,
    /// Seconds allowed for one tool call (default 1800; at least 1: there is no "never").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tool_timeout_sec: Option<u64>,
    /// Load this server's tools on demand; the text is the one-line summary the model sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defer: Option<String>,
    /// Never defer this server automatically, however large its tools are (default false; cannot be combined with `defer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_load: Option<bool>,
    /// Filter over the tools the server publishes today.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<RawToolFilter>,
    /// Capability bounds for the server, including tools it has not published yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<RawPolicy>,
    /// Whether the server's tool annotations may relax checks (default: true for user scope, false for project scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_annotations: Option<bool>,
    /// Answer the server's sampling requests (`sampling/createMessage`) with the session's model (default false: declined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<bool>,
}

impl RawServer {
    pub const KEYS: &'static [&'static str] = &[
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "transport",
        "headers",
        "auth",
        "client_id",
        "client_secret_env",
        "redirect_port",
        "client_metadata_url",
        "header_env",
        "access_token_env",
        "expires_at_env",
        "refresh_token_env",
        "refresh_url",
        "revoke_url",
        "enabled",
        "required",
        "startup_timeout_sec",
        "tool_timeout_sec",
        "defer",
        "always_load",
        "tools",
        "policy",
        "trust_annotations",
        "sampling",
    ];
}

/// `tools = { allow = [...], deny = [...] }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawToolFilter {
    /// Only these tools are exposed; absent or empty lets every tool through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// These tools are never exposed (deny wins over allow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

impl RawToolFilter {
    pub const KEYS: &'static [&'static str] = &["allow", "deny"];
}

/// `policy = { capabilities = [...], tools = { NAME = { capabilities = [...] } } }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// The capability classes any tool of this server may exercise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityClass>>,
    /// Per-tool bounds, by tool name (the tool need not exist yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeMap<String, RawToolPolicy>>,
}

impl RawPolicy {
    pub const KEYS: &'static [&'static str] = &["capabilities", "tools"];
}

/// The bounds of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawToolPolicy {
    /// The capability classes this tool may exercise (intersected with the server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityClass>>,
}

impl RawToolPolicy {
    pub const KEYS: &'static [&'static str] = &["capabilities"];
}

/// Joins a key onto a dotted path, quoting it when it is not a bare TOML key.
pub fn key_path(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

/// The nearest of `candidates` to `key`, when one is close enough to be a likely typo.
pub fn nearest<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_ascii_lowercase();
    candidates
        .iter()
        .map(|candidate| {
            let mut score = strsim::jaro_winkler(&lower, candidate);
            if lower.len() >= 3 && (candidate.contains(&lower) || lower.contains(candidate)) {
                score = score.max(0.9);
            }
            (score, *candidate)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// [`nearest`] for names whose case matters (hook events are `PreToolUse`, not `pretooluse`).
pub fn nearest_ignoring_case<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lowered: Vec<String> = candidates.iter().map(|c| c.to_ascii_lowercase()).collect();
    let borrowed: Vec<&str> = lowered.iter().map(String::as_str).collect();
    let near = nearest(key, &borrowed)?;
    let index = borrowed.iter().position(|c| *c == near)?;
    candidates.get(index).copied()
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// A value that is one of a fixed set of strings.
pub trait KnownValues: Sized {
    const VALUES: &'static [&'static str];
    fn from_name(name: &str) -> Option<Self>;
}

/// Walks a parsed TOML table into the raw structs, collecting every problem.
pub(crate) struct Walk<'a> {
    pub file: &'a Path,
    pub diagnostics: Vec<Diagnostic>,
}

impl<'a> Walk<'a> {
    pub fn new(file: &'a Path) -> Self {
        Self {
            file,
            diagnostics: Vec::new(),
        }
    }

    pub fn report(&mut self, key: String, problem: Problem) {
        self.diagnostics.push(Diagnostic {
            file: self.file.to_path_buf(),
            key,
            problem,
        });
    }

    fn unknown_keys(&mut self, table: &Table, path: &str, valid: &'static [&'static str]) {
        for key in table.keys() {
            if !valid.contains(&key.as_str()) {
                let suggestion = nearest(key, valid).map(str::to_string);
                self.report(
                    key_path(path, key),
                    Problem::UnknownKey {
                        suggestion,
                        valid: valid.to_vec(),
                    },
                );
            }
        }
    }

    fn wrong_type(&mut self, path: String, expected: &'static str, found: &Value) {
        self.report(
            path,
            Problem::WrongType {
                expected,
                found: type_name(found),
            },
        );
    }

    fn string(&mut self, table: &Table, path: &str, key: &str) -> Option<String> {
        match table.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(key_path(path, key), "a string", other);
                None
            }
        }
    }

    fn boolean(&mut self, table: &Table, path: &str, key: &str) -> Option<bool> {
        match table.get(key)? {
            Value::Boolean(b) => Some(*b),
            other => {
                self.wrong_type(key_path(path, key), "a boolean (true or false)", other);
                None
            }
        }
    }

    /// A non-negative integer; range checks beyond that belong to validation.
    fn unsigned(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
        expected: &'static str,
    ) -> Option<u64> {
        match table.get(key)? {
            Value::Integer(i) => match u64::try_from(*i) {
                Ok(value) => Some(value),
                Err(_) => {
                    self.report(
                        key_path(path, key),
                        Problem::InvalidValue {
                            expected: format!("{expected}, not {i}"),
                        },
                    );
                    None
                }
            },
            other => {
                self.wrong_type(key_path(path, key), expected, other);
                None
            }
        }
    }

    fn strings(&mut self, table: &Table, path: &str, key: &str) -> Option<Vec<String>> {
        let here = key_path(path, key);
        match table.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut ok = true;
                for (index, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        other => {
                            ok = false;
                            self.wrong_type(format!("{here}[{index}]"), "a string", other);
                        }
                    }
                }
                ok.then_some(out)
            }
            other => {
                self.wrong_type(here, "an array of strings", other);
                None
            }
        }
    }

    fn string_map(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let here = key_path(path, key);
        let inner = self.table(table, path, key)?;
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (name, value) in inner {
            match value {
                Value::String(s) => {
                    out.insert(name.clone(), s.clone());
                }
                other => {
                    ok = false;
                    self.wrong_type(key_path(&here, name), "a string", other);
                }
            }
        }
        ok.then_some(out)
    }

    fn table<'t>(&mut self, table: &'t Table, path: &str, key: &str) -> Option<&'t Table> {
        match table.get(key)? {
            Value::Table(inner) => Some(inner),
            other => {
                self.wrong_type(key_path(path, key), "a table", other);
                None
            }
        }
    }

    fn known<T: KnownValues>(&mut self, table: &Table, path: &str, key: &str) -> Option<T> {
        let name = self.string(table, path, key)?;
        self.known_value(key_path(path, key), &name)
    }

    fn known_value<T: KnownValues>(&mut self, here: String, name: &str) -> Option<T> {
        let found = T::from_name(name);
        if found.is_none() {
            let quoted: Vec<String> = T::VALUES.iter().map(|v| format!("\"{v}\"")).collect();
            let hint = nearest(name, T::VALUES)
                .map(|near| format!(" (did you mean \"{near}\"?)"))
                .unwrap_or_default();
            self.report(
                here,
                Problem::InvalidValue {
                    expected: format!("one of {}, not \"{name}\"{hint}", quoted.join(", ")),
                },
            );
        }
        found
    }

    /// `[discovery] bridge`; `unix` is refused where there are no Unix sockets.
    fn bridge_transport(&mut self, table: &Table, path: &str) -> Option<BridgeTransport> {
        let transport = self.known::<BridgeTransport>(table, path, "bridge")?;
        if transport == BridgeTransport::Unix && !cfg!(unix) {
            self.report(
                key_path(path, "bridge"),
                Problem::InvalidValue {
                    expected:
                        "\"tcp\": this platform has no Unix sockets, so \"unix\" cannot be used"
                            .into(),
                },
            );
            return None;
        }
        Some(transport)
    }

    fn known_list<T: KnownValues>(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<Vec<T>> {
        let names = self.strings(table, path, key)?;
        let here = key_path(path, key);
        let mut out = Vec::with_capacity(names.len());
        let mut ok = true;
        for (index, name) in names.iter().enumerate() {
            match self.known_value(format!("{here}[{index}]"), name) {
                Some(value) => out.push(value),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// The whole file. `schema_version` is checked first: an unknown version stops the walk.
    pub fn config(&mut self, root: &Table) -> Option<RawConfig> {
        let schema_version = match root.get("schema_version") {
            None => {
                self.report(
                    "schema_version".into(),
                    Problem::Missing {
                        expected: "schema_version = 1 at the top of the file",
                    },
                );
                return None;
            }
            Some(Value::Integer(v)) if SUPPORTED_SCHEMA_VERSIONS.contains(v) => *v,
            Some(Value::Integer(v)) => {
                self.report(
                    "schema_version".into(),
                    Problem::UnsupportedSchemaVersion {
                        found: v.to_string(),
                        supported: SUPPORTED_SCHEMA_VERSIONS,
                    },
                );
                return None;
            }
            Some(other) => {
                self.wrong_type("schema_version".into(), "an integer (1)", other);
                return None;
            }
        };
        self.unknown_keys(root, "", RawConfig::KEYS);
        let mut mcp_servers = BTreeMap::new();
        if let Some(servers) = self.table(root, "", "mcp_servers") {
            for (name, value) in servers {
                let path = key_path("mcp_servers", name);
                match value {
                    Value::Table(entry) => {
                        let before = self.diagnostics.len();
                        let server = self.server(entry, &path);
                        // An entry with wrongly typed keys is not validated further: its
                        // missing values would only produce follow-on noise.
                        if self.diagnostics.len() == before {
                            mcp_servers.insert(name.clone(), server);
                        }
                    }
                    other => self.wrong_type(path, "a table (a server entry)", other),
                }
            }
        }
        let model = self.string(root, "", "model");
        let mut models = BTreeMap::new();
        if let Some(table) = self.table(root, "", "models") {
            for (name, value) in table {
                let path = key_path("models", name);
                match value {
                    Value::Table(entry) => {
                        let before = self.diagnostics.len();
                        let parsed = self.model(entry, &path);
                        if self.diagnostics.len() == before {
                            models.insert(name.clone(), parsed);
                        }
                    }
                    other => self.wrong_type(path, "a table (a model entry)", other),
                }
            }
        }
        let mut agents = BTreeMap::new();
        if let Some(table) = self.table(root, "", "agents") {
            for (name, value) in table {
                let path = key_path("agents", name);
                match value {
                    Value::Table(entry) => {
                        let before = self.diagnostics.len();
                        let parsed = self.agent(entry, &path);
                        if self.diagnostics.len() == before {
                            agents.insert(name.clone(), parsed);
                        }
                    }
                    other => self.wrong_type(path, "a table (an agent profile)", other),
                }
            }
        }
        let permissions = self.section(root, "permissions", Self::permissions);
        let authorization = self.section(root, "authorization", Self::authorization);
        let audit = self.section(root, "audit", |walk, t, p| {
            walk.unknown_keys(t, p, RawAudit::KEYS);
            RawAudit {
                full_arguments: walk.boolean(t, p, "full_arguments"),
            }
        });
        let hooks = self.section(root, "hooks", Self::hooks);
        let discovery = self.section(root, "discovery", |walk, t, p| {
            walk.unknown_keys(t, p, RawDiscovery::KEYS);
            RawDiscovery {
                auto_defer_tokens: walk.unsigned(
                    t,
                    p,
                    "auto_defer_tokens",
                    "a whole number of tokens",
                ),
                bridge: walk.bridge_transport(t, p),
            }
        });
        let experimental = self.section(root, "experimental", |walk, t, p| {
            walk.unknown_keys(t, p, RawExperimental::KEYS);
            RawExperimental {
                skills_extension: walk.boolean(t, p, "skills_extension"),
            }
        });
        let sandbox = self.section(root, "sandbox", |walk, t, p| {
            walk.unknown_keys(t, p, crate::sandbox::RawSandbox::KEYS);
            crate::sandbox::RawSandbox {
                mode: walk.known(t, p, "mode"),
                network: walk.boolean(t, p, "network"),
                env: walk.strings(t, p, "env"),
                memory_mb: walk.unsigned(t, p, "memory_mb", "a whole number of MiB"),
                max_processes: walk.unsigned(t, p, "max_processes", "a whole number of processes"),
                cpu_sec: walk.unsigned(t, p, "cpu_sec", "a whole number of seconds"),
            }
        });
        let skill_scripts = self.section(root, "skill_scripts", |walk, t, p| {
            walk.unknown_keys(t, p, crate::skill_scripts::RawSkillScripts::KEYS);
            crate::skill_scripts::RawSkillScripts {
                enabled: walk.boolean(t, p, "enabled"),
                acknowledge_risks: walk.boolean(t, p, "acknowledge_risks"),
                interpreters: walk.string_map(t, p, "interpreters"),
                roots: walk.strings(t, p, "roots"),
                max_concurrent: walk.unsigned(t, p, "max_concurrent", "a whole number"),
                max_concurrent_per_user: walk.unsigned(
                    t,
                    p,
                    "max_concurrent_per_user",
                    "a whole number",
                ),
                timeout_sec: walk.unsigned(t, p, "timeout_sec", "a whole number of seconds"),
                max_output_kb: walk.unsigned(t, p, "max_output_kb", "a whole number of KiB"),
                max_arguments_kb: walk.unsigned(t, p, "max_arguments_kb", "a whole number of KiB"),
            }
        });
        let oauth = self.section(root, "oauth", |walk, t, p| {
            walk.unknown_keys(t, p, RawOAuth::KEYS);
            let client_metadata_url = walk.string(t, p, "client_metadata_url");
            if let Some(url) = &client_metadata_url {
                let host = url.strip_prefix("https://").unwrap_or("");
                if host.is_empty() || host.starts_with('/') {
                    walk.report(
                        key_path(p, "client_metadata_url"),
                        Problem::InvalidValue {
                            expected: format!("an https:// URL, not \"{url}\""),
                        },
                    );
                }
            }
            RawOAuth {
                token_store: walk.known(t, p, "token_store"),
                client_metadata_url,
            }
        });
        Some(RawConfig {
            skill_scripts,
            sandbox,
            oauth,
            schema_version,
            mcp_servers,
            model,
            models,
            agents,
            permissions,
            authorization,
            audit,
            hooks,
            discovery,
            experimental,
        })
    }

    /// A top-level table walked by `read`; `None` when absent or when it has any problem (its
    /// values are then not validated further, to avoid follow-on noise).
    fn section<T>(
        &mut self,
        root: &Table,
        key: &str,
        read: impl FnOnce(&mut Self, &Table, &str) -> T,
    ) -> Option<T> {
        let before = self.diagnostics.len();
        let table = self.table(root, "", key)?;
        let parsed = read(self, table, key);
        (self.diagnostics.len() == before).then_some(parsed)
    }

    /// An array of tables (`[[path.key]]`), each with its own key path (`path.key[i]`).
    fn table_array<'t>(
        &mut self,
        table: &'t Table,
        path: &str,
        key: &str,
        expected: &'static str,
    ) -> Option<Vec<(String, &'t Table)>> {
        let here = key_path(path, key);
        match table.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let item_path = format!("{here}[{index}]");
                    match item {
                        Value::Table(inner) => out.push((item_path, inner)),
                        other => self.wrong_type(item_path, expected, other),
                    }
                }
                Some(out)
            }
            other => {
                self.wrong_type(here, expected, other);
                None
            }
        }
    }

    /// `[permissions]`.
    fn permissions(&mut self, t: &Table, p: &str) -> RawPermissions {
        self.unknown_keys(t, p, RawPermissions::KEYS);
        RawPermissions {
            mode: self.known(t, p, "mode"),
            allow: self.strings(t, p, "allow"),
            deny: self.strings(t, p, "deny"),
            always_ask: self.known_list(t, p, "always_ask"),
            additional_directories: self.strings(t, p, "additional_directories"),
            allow_protected: self.strings(t, p, "allow_protected"),
        }
    }

    /// `[authorization]` and its `[[authorization.rules]]`.
    fn authorization(&mut self, t: &Table, p: &str) -> RawAuthorization {
        self.unknown_keys(t, p, RawAuthorization::KEYS);
        let rules = self
            .table_array(
                t,
                p,
                "rules",
                "an array of tables ([[authorization.rules]])",
            )
            .map(|rules| {
                rules
                    .into_iter()
                    .map(|(rule_path, rule)| {
                        self.unknown_keys(rule, &rule_path, RawAuthorizationRule::KEYS);
                        RawAuthorizationRule {
                            tools: self.string(rule, &rule_path, "tools"),
                            decision: self.known(rule, &rule_path, "decision"),
                            reason: self.string(rule, &rule_path, "reason"),
                        }
                    })
                    .collect()
            });
        RawAuthorization {
            command: self.string(t, p, "command"),
            args: self.strings(t, p, "args"),
            timeout_sec: self.unsigned(t, p, "timeout_sec", "a whole number of seconds"),
            rules,
        }
    }

    /// `[hooks]`: one array of `[[hooks.EVENT]]` tables per event; event names are case-sensitive.
    fn hooks(&mut self, t: &Table, p: &str) -> RawHooks {
        let mut hooks = RawHooks {
            on_error: self.known(t, p, "on_error"),
            ..RawHooks::default()
        };
        for (name, value) in t {
            if name == "on_error" {
                continue;
            }
            let Some(event) = HookEvent::from_name(name) else {
                let suggestion = nearest_ignoring_case(name, HookEvent::VALUES).map(str::to_string);
                self.report(
                    key_path(p, name),
                    Problem::UnknownKey {
                        suggestion,
                        valid: HookEvent::VALUES.to_vec(),
                    },
                );
                continue;
            };
            let entries = match value {
                Value::Array(_) => self
                    .table_array(t, p, name, "a table ([[hooks.EVENT]] with command = ...)")
                    .unwrap_or_default(),
                other => {
                    self.wrong_type(
                        key_path(p, name),
                        "an array of tables (write [[hooks.EVENT]], with two brackets)",
                        other,
                    );
                    continue;
                }
            };
            let parsed = entries
                .into_iter()
                .map(|(hook_path, hook)| {
                    self.unknown_keys(hook, &hook_path, RawHook::KEYS);
                    RawHook {
                        command: self.string(hook, &hook_path, "command"),
                        args: self.strings(hook, &hook_path, "args"),
                        matcher: self.string(hook, &hook_path, "matcher"),
                        timeout_sec: self.unsigned(
                            hook,
                            &hook_path,
                            "timeout_sec",
                            "a whole number of seconds",
                        ),
                    }
                })
                .collect();
            *hooks.slot(event) = Some(parsed);
        }
        hooks
    }

    /// One `[models.NAME]` entry; problems are reported, wrongly typed keys left out.
    pub fn model(&mut self, t: &Table, p: &str) -> RawModel {
        self.unknown_keys(t, p, RawModel::KEYS);
        RawModel {
            provider: self.known(t, p, "provider"),
            id: self.string(t, p, "id"),
            base_url: self.string(t, p, "base_url"),
            api_key_env: self.string(t, p, "api_key_env"),
            context_window: self.unsigned(t, p, "context_window", "a whole number of tokens"),
            defer_mode: self.known(t, p, "defer_mode"),
            allow_plain_http: self.boolean(t, p, "allow_plain_http"),
        }
    }

    /// One `[agents.NAME]` profile; problems are reported, wrongly typed keys left out.
    pub fn agent(&mut self, t: &Table, p: &str) -> RawAgent {
        self.unknown_keys(t, p, RawAgent::KEYS);
        RawAgent {
            model: self.string(t, p, "model"),
            instructions: self.string(t, p, "instructions"),
            skills: self.strings(t, p, "skills"),
            mcp_servers: self.strings(t, p, "mcp_servers"),
        }
    }

    /// One server entry; problems are reported, wrongly typed keys left out.
    pub fn server(&mut self, t: &Table, p: &str) -> RawServer {
        self.unknown_keys(t, p, RawServer::KEYS);
        const SECONDS: &str = "a whole number of seconds";
        RawServer {
            command: self.string(t, p, "command"),
            args: self.strings(t, p, "args"),
            env: self.string_map(t, p, "env"),
            cwd: self.string(t, p, "cwd"),
            url: self.string(t, p, "url"),
            transport: self.known(t, p, "transport"),
            headers: self.string_map(t, p, "headers"),
            auth: self.known(t, p, "auth"),
            client_id: self.string(t, p, "client_id"),
            client_secret_env: self.string(t, p, "client_secret_env"),
            redirect_port: self
                .unsigned(t, p, "redirect_port", "a port number (1-65535)")
                .and_then(|port| self.port(key_path(p, "redirect_port"), port)),
            client_metadata_url: self.string(t, p, "client_metadata_url"),
            header_env: self.string(t, p, "header_env"),
            access_token_env: self.string(t, p, "access_token_env"),
            expires_at_env: self.string(t, p, "expires_at_env"),
            refresh_token_env: self.string(t, p, "refresh_token_env"),
            refresh_url: self.string(t, p, "refresh_url"),
            revoke_url: self.string(t, p, "revoke_url"),
            enabled: self.boolean(t, p, "enabled"),
            required: self.boolean(t, p, "required"),
            startup_timeout_sec: self.unsigned(t, p, "startup_timeout_sec", SECONDS),
            tool_timeout_sec: self.unsigned(t, p, "tool_timeout_sec", SECONDS),
            defer: self.string(t, p, "defer"),
            always_load: self.boolean(t, p, "always_load"),
            tools: self.table(t, p, "tools").map(|inner| {
                let here = key_path(p, "tools");
                self.unknown_keys(inner, &here, RawToolFilter::KEYS);
                RawToolFilter {
                    allow: self.strings(inner, &here, "allow"),
                    deny: self.strings(inner, &here, "deny"),
                }
            }),
            policy: self
                .table(t, p, "policy")
                .map(|inner| self.policy(inner, p)),
            trust_annotations: self.boolean(t, p, "trust_annotations"),
            sampling: self.boolean(t, p, "sampling"),
        }
    }

    fn port(&mut self, here: String, port: u64) -> Option<u16> {
        match u16::try_from(port) {
            Ok(port) if port > 0 => Some(port),
            _ => {
                self.report(
                    here,
                    Problem::InvalidValue {
                        expected: format!("a port number (1-65535), not {port}"),
                    },
                );
                None
            }
        }
    }

    fn policy(&mut self, inner: &Table, server_path: &str) -> RawPolicy {
        let here = key_path(server_path, "policy");
        self.unknown_keys(inner, &here, RawPolicy::KEYS);
        let capabilities = self.known_list(inner, &here, "capabilities");
        let tools = self.table(inner, &here, "tools").map(|tools| {
            let tools_path = key_path(&here, "tools");
            let mut out = BTreeMap::new();
            for (tool, value) in tools {
                let tool_path = key_path(&tools_path, tool);
                match value {
                    Value::Table(tool_table) => {
                        self.unknown_keys(tool_table, &tool_path, RawToolPolicy::KEYS);
                        let capabilities = self.known_list(tool_table, &tool_path, "capabilities");
                        out.insert(tool.clone(), RawToolPolicy { capabilities });
                    }
                    other => {
                        self.wrong_type(tool_path, "a table like { capabilities = [...] }", other)
                    }
                }
            }
            out
        });
        RawPolicy {
            capabilities,
            tools,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn nearest_finds_typos_and_ignores_noise() {
        let keys = RawServer::KEYS;
        assert_eq!(nearest("comand", keys), Some("command"));
        assert_eq!(nearest("tool_timeout", keys), Some("tool_timeout_sec"));
        assert_eq!(nearest("header", keys), Some("headers"));
        assert_eq!(nearest("zzzzzz", keys), None);
        let events = RawHooks::KEYS;
        assert_eq!(
            nearest_ignoring_case("pretooluse", events),
            Some("PreToolUse")
        );
        assert_eq!(
            nearest_ignoring_case("PreToolCall", events),
            Some("PreToolUse")
        );
        assert_eq!(
            nearest_ignoring_case("OnSessionStart", events),
            Some("SessionStart")
        );
        assert_eq!(nearest_ignoring_case("Bogus", events), None);
    }

    #[test]
    fn key_paths_quote_odd_keys() {
        assert_eq!(key_path("mcp_servers", "gh"), "mcp_servers.gh");
        assert_eq!(key_path("a", "x.y"), "a.\"x.y\"");
        assert_eq!(key_path("", "top"), "top");
    }

    /// The walk's key lists and the generated schema describe the same keys.
    #[test]
    fn key_lists_match_the_schema() {
        let schema = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap();
        let props = |value: &serde_json::Value| -> Vec<String> {
            let mut keys: Vec<String> = value["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            keys.sort();
            keys
        };
        let sorted = |keys: &[&str]| -> Vec<String> {
            let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            keys.sort();
            keys
        };
        let defs = &schema["$defs"];
        assert_eq!(props(&schema), sorted(RawConfig::KEYS));
        assert_eq!(props(&defs["RawServer"]), sorted(RawServer::KEYS));
        assert_eq!(props(&defs["RawToolFilter"]), sorted(RawToolFilter::KEYS));
        assert_eq!(props(&defs["RawPolicy"]), sorted(RawPolicy::KEYS));
        assert_eq!(props(&defs["RawToolPolicy"]), sorted(RawToolPolicy::KEYS));
        assert_eq!(props(&defs["RawModel"]), sorted(RawModel::KEYS));
        assert_eq!(props(&defs["RawAgent"]), sorted(RawAgent::KEYS));
        assert_eq!(props(&defs["RawPermissions"]), sorted(RawPermissions::KEYS));
        assert_eq!(
            props(&defs["RawAuthorization"]),
            sorted(RawAuthorization::KEYS)
        );
        assert_eq!(
            props(&defs["RawAuthorizationRule"]),
            sorted(RawAuthorizationRule::KEYS)
        );
        assert_eq!(props(&defs["RawAudit"]), sorted(RawAudit::KEYS));
        assert_eq!(props(&defs["RawDiscovery"]), sorted(RawDiscovery::KEYS));
        assert_eq!(
            props(&defs["RawExperimental"]),
            sorted(RawExperimental::KEYS)
        );
        assert_eq!(props(&defs["RawHooks"]), sorted(RawHooks::KEYS));
        assert_eq!(props(&defs["RawHook"]), sorted(RawHook::KEYS));
        assert_eq!(props(&defs["RawOAuth"]), sorted(RawOAuth::KEYS));
    }
}
