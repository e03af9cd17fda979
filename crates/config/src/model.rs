//! Validated model and agent-profile entries (`model`, `[models.NAME]`, `[agents.NAME]`), built from the raw structs with `TryFrom`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::entry::{Scope, is_valid_server_name};
use crate::error::{Diagnostic, Problem};
use crate::expand::is_env_name;
use crate::raw::{KnownValues, RawAgent, RawModel, key_path};

/// The wire protocol a model is reached with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum ModelProvider {
    /// OpenAI Chat Completions, and every compatible server (Ollama, llama.cpp, vLLM, LM Studio, OpenRouter).
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI Responses.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Anthropic Messages.
    #[serde(rename = "anthropic")]
    Anthropic,
}

impl ModelProvider {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelProvider::OpenAi => "openai",
            ModelProvider::OpenAiResponses => "openai-responses",
            ModelProvider::Anthropic => "anthropic",
        }
    }

    /// Whether this provider's API can carry `mode`: `reference` needs Anthropic's
    /// `tool_reference` blocks, `tool-search` a provider-side tool search (Anthropic, or OpenAI
    /// through the Responses API); `normal` and `system-tools` work everywhere.
    pub fn supports(self, mode: DeferMode) -> bool {
        match mode {
            DeferMode::Normal | DeferMode::SystemTools => true,
            DeferMode::Reference => self == ModelProvider::Anthropic,
            DeferMode::ToolSearch => matches!(
                self,
                ModelProvider::Anthropic | ModelProvider::OpenAiResponses
            ),
        }
    }

    /// The providers that can carry `mode`, for messages (`"anthropic"`, …).
    pub fn speaking(mode: DeferMode) -> Vec<&'static str> {
        [
            ModelProvider::OpenAi,
            ModelProvider::OpenAiResponses,
            ModelProvider::Anthropic,
        ]
        .into_iter()
        .filter(|provider| provider.supports(mode))
        .map(ModelProvider::as_str)
        .collect()
    }
}

impl KnownValues for ModelProvider {
    const VALUES: &'static [&'static str] = &["openai", "openai-responses", "anthropic"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::OpenAi),
            "openai-responses" => Some(Self::OpenAiResponses),
            "anthropic" => Some(Self::Anthropic),
            _ => None,
        }
    }
}

/// How deferred tools are presented to the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum DeferMode {
    /// warden's own search tool and stubs (works with every provider).
    #[default]
    #[serde(rename = "normal")]
    Normal,
    /// warden's search tool answers with `tool_reference` blocks the provider expands (Anthropic).
    #[serde(rename = "reference")]
    Reference,
    /// The provider's own tool-search tool (Anthropic, OpenAI Responses).
    #[serde(rename = "tool-search")]
    ToolSearch,
    /// Deferred tools described in the system prompt and reached through one `call_tool` tool.
    #[serde(rename = "system-tools")]
    SystemTools,
}

impl DeferMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DeferMode::Normal => "normal",
            DeferMode::Reference => "reference",
            DeferMode::ToolSearch => "tool-search",
            DeferMode::SystemTools => "system-tools",
        }
    }
}

impl KnownValues for DeferMode {
    const VALUES: &'static [&'static str] = &["normal", "reference", "tool-search", "system-tools"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "normal" => Some(Self::Normal),
            "reference" => Some(Self::Reference),
            "tool-search" => Some(Self::ToolSearch),
            "system-tools" => Some(Self::SystemTools),
            _ => None,
        }
    }
}

/// `[experimental]`, merged over the scopes (a later file wins).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExperimentalSettings {
    /// Advertise the SEP-2640 skills extension to MCP servers.
    pub skills_extension: bool,
}

impl ExperimentalSettings {
    /// Merges a file's `[experimental]` over `self`.
    pub fn merge(&mut self, later: Option<crate::raw::RawExperimental>) {
        let Some(crate::raw::RawExperimental { skills_extension }) = later else {
            return;
        };
        if let Some(enabled) = skills_extension {
            self.skills_extension = enabled;
        }
    }
}

/// `[discovery]`, merged over the scopes (a later file wins).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiscoverySettings {
    /// `None`: [`DEFAULT_AUTO_DEFER_TOKENS`]; `Some(0)`: automatic deferral is off.
    pub auto_defer_tokens: Option<u64>,
    /// `None`: [`crate::BridgeTransport::Tcp`].
    pub bridge: Option<crate::raw::BridgeTransport>,
}

/// Tokens of non-deferred MCP tool schemas above which servers are deferred automatically:
/// about 10% of a 128k context.
pub const DEFAULT_AUTO_DEFER_TOKENS: u64 = 12_000;

impl DiscoverySettings {
    /// The threshold in force; `None` when automatic deferral is off.
    pub fn auto_defer_threshold(&self) -> Option<u64> {
        match self.auto_defer_tokens.unwrap_or(DEFAULT_AUTO_DEFER_TOKENS) {
            0 => None,
            tokens => Some(tokens),
        }
    }

    /// Where the session's tool bridge listens.
    pub fn bridge_transport(&self) -> crate::raw::BridgeTransport {
        self.bridge.unwrap_or_default()
    }

    /// Merges `later` over `self`.
    pub fn merge(&mut self, later: DiscoverySettings) {
        let DiscoverySettings {
            auto_defer_tokens,
            bridge,
        } = later;
        if auto_defer_tokens.is_some() {
            self.auto_defer_tokens = auto_defer_tokens;
        }
        if bridge.is_some() {
            self.bridge = bridge;
        }
    }
}

impl From<crate::raw::RawDiscovery> for DiscoverySettings {
    fn from(raw: crate::raw::RawDiscovery) -> Self {
        let crate::raw::RawDiscovery {
            auto_defer_tokens,
            bridge,
        } = raw;
        Self {
            auto_defer_tokens,
            bridge,
        }
    }
}

/// One validated `[models.NAME]` entry; `api_key_env` names a variable, its value is read when a request is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEntry {
    pub name: String,
    /// The file that declared it.
    pub source: PathBuf,
    pub provider: ModelProvider,
    /// The provider's model id, e.g. `gpt-5.1` or `claude-sonnet-4-5`.
    pub id: String,
    /// `None`: the provider's public endpoint.
    pub base_url: Option<String>,
    /// `None`: the provider's usual variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), or no key for a local server with `base_url`.
    pub api_key_env: Option<String>,
    /// Context window in tokens; `None`: the provider default the agent assumes.
    pub context_window: Option<u64>,
    pub defer_mode: DeferMode,
    /// Anthropic's extended thinking budget in tokens; `None`: no extended thinking.
    pub thinking_budget: Option<u32>,
    /// Whether answers are streamed (`stream = false` for servers that cannot stream tool calls).
    pub stream: bool,
    /// Extra request fields (`[models.NAME.request]`), merged into every request body.
    pub request: serde_json::Map<String, serde_json::Value>,
}

/// One validated `[agents.NAME]` profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    pub name: String,
    /// A project profile is loaded only once the operator approved it exactly as it is.
    pub scope: Scope,
    pub source: PathBuf,
    /// A `[models.NAME]` name; `None`: the default model.
    pub model: Option<String>,
    /// Extra instructions added to the system prompt.
    pub instructions: Option<String>,
    /// Skill names to load (checked against the discovered skills at start).
    pub skills: Vec<String>,
    /// `None`: every server; `Some([])`: none; otherwise only those.
    pub mcp_servers: Option<Vec<String>>,
    /// Client-side tools (`warden service`): declarations without a body, answered by the caller.
    pub client_tools: Vec<ClientToolSpec>,
    /// Knowledge collections its `search_knowledge` tool searches (none: no such tool).
    pub knowledge: Vec<String>,
    /// The built-in host tools its `warden service` sessions get (none unless named), each
    /// confined to the session's own folder.
    pub host_tools: Vec<String>,
    /// A folder copied into each new service session's own folder (absolute).
    pub room_template: Option<PathBuf>,
}

/// The built-in host tools an agent profile may grant its service sessions (`host_tools`).
pub const SERVICE_HOST_TOOLS: &[&str] = &[
    "read_file",
    "list_dir",
    "glob",
    "grep",
    "write_file",
    "edit_file",
    "bash",
    "run_skill_script",
];

/// One client-side tool of an agent profile: what the model sees of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: serde_json::Value,
}

impl AgentProfile {
    /// Project profiles need the operator's approval before they are loaded.
    pub fn needs_trust(&self) -> bool {
        self.scope == Scope::Project
    }

    /// SHA-256 (hex) of a canonical serialization of the name and every setting; scope and file
    /// are not part of it. An edited profile gets a new hash.
    pub fn trust_hash(&self) -> String {
        let declared = RawAgent {
            model: self.model.clone(),
            instructions: self.instructions.clone(),
            skills: Some(self.skills.clone()),
            mcp_servers: self.mcp_servers.clone(),
            client_tools: (!self.client_tools.is_empty()).then(|| {
                self.client_tools
                    .iter()
                    .map(|tool| {
                        (
                            tool.name.clone(),
                            crate::raw::RawClientTool {
                                description: Some(tool.description.clone()),
                                input_schema: Some(tool.input_schema.clone()),
                            },
                        )
                    })
                    .collect()
            }),
            knowledge: (!self.knowledge.is_empty()).then(|| self.knowledge.clone()),
            host_tools: (!self.host_tools.is_empty()).then(|| self.host_tools.clone()),
            room_template: self
                .room_template
                .as_ref()
                .map(|path| path.display().to_string()),
        };
        let canonical =
            serde_json::to_vec(&("warden.agent.v1", &self.name, declared)).unwrap_or_default();
        hex::encode(Sha256::digest(&canonical))
    }

    /// Whether this profile loads the server named `server`.
    pub fn loads_server(&self, server: &str) -> bool {
        self.mcp_servers
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s == server))
    }
}

/// The model and agent settings of one file, or of all scopes merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// Top-level `model = "NAME"` and the file that set it.
    pub default_model: Option<(String, PathBuf)>,
    pub models: BTreeMap<String, ModelEntry>,
    pub agents: BTreeMap<String, AgentProfile>,
}

impl ModelSettings {
    /// The model a run uses: `override_name` (`--model`), else the agent's, else the top-level `model`.
    /// `Ok(None)` when nothing is configured (the caller falls back to built-in defaults).
    pub fn select_model(
        &self,
        override_name: Option<&str>,
        agent: Option<&AgentProfile>,
    ) -> Result<Option<&ModelEntry>, String> {
        let name = override_name
            .map(str::to_string)
            .or_else(|| agent.and_then(|a| a.model.clone()))
            .or_else(|| self.default_model.as_ref().map(|(name, _)| name.clone()));
        match name {
            None => Ok(None),
            Some(name) => self.models.get(&name).map(Some).ok_or_else(|| {
                let known: Vec<&str> = self.models.keys().map(String::as_str).collect();
                if known.is_empty() {
                    format!("the model {name} is not configured: add a [models.{name}] table")
                } else {
                    format!(
                        "the model {name} is not configured; configured models: {}",
                        known.join(", ")
                    )
                }
            }),
        }
    }

    /// Merges `later` over `self` (a later entry wins a name; a later top-level `model` wins).
    pub fn merge(&mut self, later: ModelSettings) {
        let ModelSettings {
            default_model,
            models,
            agents,
        } = later;
        if default_model.is_some() {
            self.default_model = default_model;
        }
        self.models.extend(models);
        self.agents.extend(agents);
    }

    /// Every reference to a model name that no `[models.NAME]` declares.
    pub fn dangling_references(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let known: Vec<&str> = self.models.keys().map(String::as_str).collect();
        let mut check = |file: &Path, key: String, name: &str| {
            if !self.models.contains_key(name) {
                let hint = crate::raw::nearest(name, &known)
                    .map(|near| format!(" (did you mean \"{near}\"?)"))
                    .unwrap_or_default();
                out.push(Diagnostic {
                    file: file.to_path_buf(),
                    key,
                    problem: Problem::InvalidValue {
                        expected: format!(
                            "the name of a [models.NAME] table, not \"{name}\"{hint}"
                        ),
                    },
                });
            }
        };
        if let Some((name, file)) = &self.default_model {
            check(file, "model".into(), name);
        }
        for agent in self.agents.values() {
            if let Some(model) = &agent.model {
                check(
                    &agent.source,
                    key_path(&key_path("agents", &agent.name), "model"),
                    model,
                );
            }
        }
        out
    }
}

/// A raw model entry with where it came from.
#[derive(Debug, Clone)]
pub struct ScopedRawModel {
    pub name: String,
    pub scope: Scope,
    pub source: PathBuf,
    pub raw: RawModel,
}

impl TryFrom<ScopedRawModel> for ModelEntry {
    type Error = Vec<Diagnostic>;

    fn try_from(scoped: ScopedRawModel) -> Result<Self, Self::Error> {
        let ScopedRawModel {
            name,
            scope,
            source,
            raw,
        } = scoped;
        let base = key_path("models", &name);
        let mut diagnostics = Vec::new();
        let mut report = |key: &str, problem: Problem| {
            diagnostics.push(Diagnostic {
                file: source.clone(),
                key: if key.is_empty() {
                    base.clone()
                } else {
                    key_path(&base, key)
                },
                problem,
            });
        };
        if scope == Scope::Project {
            report(
                "",
                Problem::InvalidValue {
                    expected: "models only in the user config: a project file is shared, and a model entry decides where your API key is sent".into(),
                },
            );
        }
        if !is_valid_server_name(&name) {
            report(
                "",
                Problem::InvalidValue {
                    expected: "a model name of letters, digits, `_` and `-` (starting with a letter or digit, at most 64 characters)".into(),
                },
            );
        }
        let RawModel {
            provider,
            id,
            base_url,
            api_key_env,
            context_window,
            defer_mode,
            allow_plain_http,
            thinking_budget,
            stream,
            request,
        } = raw;
        if provider.is_none() {
            report(
                "provider",
                Problem::Missing {
                    expected: "provider = \"openai\", \"openai-responses\" or \"anthropic\"",
                },
            );
        }
        match &id {
            None => report(
                "id",
                Problem::Missing {
                    expected: "the provider's model id, e.g. id = \"gpt-5.1\"",
                },
            ),
            Some(id) if id.trim().is_empty() => report(
                "id",
                Problem::InvalidValue {
                    expected: "a model id, not an empty string".into(),
                },
            ),
            Some(_) => {}
        }
        if let Some(url) = &base_url {
            let rest = url
                .strip_prefix("https://")
                .or_else(|| url.strip_prefix("http://"));
            if !rest.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/')) {
                report(
                    "base_url",
                    Problem::InvalidValue {
                        expected: format!("an http:// or https:// URL, not \"{url}\""),
                    },
                );
            } else if let Some(host) = plain_http_host(url)
                && !warden_vocab::is_loopback_host(host)
                && allow_plain_http != Some(true)
            {
                report(
                    "base_url",
                    Problem::InvalidValue {
                        expected: format!(
                            "an https:// URL, or http:// to this machine (localhost, 127.0.0.1, [::1]): \
                             plain http to {host} would send the API key and every prompt unencrypted; \
                             for a LAN server you trust, set allow_plain_http = true"
                        ),
                    },
                );
            }
        }
        if let Some(var) = &api_key_env
            && !is_env_name(var)
        {
            report(
                "api_key_env",
                Problem::InvalidValue {
                    expected: format!(
                        "the name of an environment variable (like OPENAI_API_KEY), not \"{var}\"; the key is read from the environment when a request is made"
                    ),
                },
            );
        }
        if context_window == Some(0) {
            report(
                "context_window",
                Problem::InvalidValue {
                    expected: "a positive number of tokens".into(),
                },
            );
        }
        let thinking_budget = match thinking_budget {
            None => None,
            Some(_) if provider.is_some_and(|p| p != ModelProvider::Anthropic) => {
                report(
                    "thinking_budget",
                    Problem::InvalidValue {
                        expected: format!(
                            "no thinking_budget for provider \"{}\": only \"anthropic\" takes \
                             one (other providers' reasoning is shown when they stream it)",
                            provider.map_or("", ModelProvider::as_str)
                        ),
                    },
                );
                None
            }
            Some(budget) => match u32::try_from(budget) {
                Ok(budget) if (1024..=1_000_000).contains(&budget) => Some(budget),
                _ => {
                    report(
                        "thinking_budget",
                        Problem::InvalidValue {
                            expected: format!(
                                "between 1024 and 1000000 tokens (Anthropic's least budget is \
                                 1024), not {budget}"
                            ),
                        },
                    );
                    None
                }
            },
        };
        let defer_mode = defer_mode.unwrap_or_default();
        if let Some(provider) = provider
            && !provider.supports(defer_mode)
        {
            let needs = ModelProvider::speaking(defer_mode)
                .iter()
                .map(|name| format!("\"{name}\""))
                .collect::<Vec<_>>()
                .join(" or ");
            report(
                "defer_mode",
                Problem::InvalidValue {
                    expected: format!(
                        "a mode the provider \"{}\" can speak: \"{}\" needs provider {needs}; use \"normal\" or \"system-tools\"",
                        provider.as_str(),
                        defer_mode.as_str()
                    ),
                },
            );
        }
        match (provider, id) {
            (Some(provider), Some(id)) if diagnostics.is_empty() => Ok(ModelEntry {
                name,
                source,
                provider,
                id,
                base_url,
                api_key_env,
                context_window,
                defer_mode,
                thinking_budget,
                stream: stream.unwrap_or(true),
                request: request.unwrap_or_default(),
            }),
            _ => Err(diagnostics),
        }
    }
}

/// A raw agent profile with where it came from.
#[derive(Debug, Clone)]
pub struct ScopedRawAgent {
    pub name: String,
    pub scope: Scope,
    pub source: PathBuf,
    pub raw: RawAgent,
}

impl TryFrom<ScopedRawAgent> for AgentProfile {
    type Error = Vec<Diagnostic>;

    fn try_from(scoped: ScopedRawAgent) -> Result<Self, Self::Error> {
        let ScopedRawAgent {
            name,
            scope,
            source,
            raw,
        } = scoped;
        let base = key_path("agents", &name);
        let mut diagnostics = Vec::new();
        let mut report = |key: String, problem: Problem| {
            diagnostics.push(Diagnostic {
                file: source.clone(),
                key,
                problem,
            });
        };
        if !is_valid_server_name(&name) {
            report(
                base.clone(),
                Problem::InvalidValue {
                    expected: "an agent name of letters, digits, `_` and `-` (starting with a letter or digit, at most 64 characters)".into(),
                },
            );
        }
        let RawAgent {
            model,
            instructions,
            skills,
            mcp_servers,
            client_tools: raw_client_tools,
            knowledge,
            host_tools,
            room_template,
        } = raw;
        let mut client_tools = Vec::new();
        for (tool, declared) in raw_client_tools.unwrap_or_default() {
            let path = key_path(&key_path(&base, "client_tools"), &tool);
            if !is_valid_server_name(&tool) {
                report(
                    path.clone(),
                    Problem::InvalidValue {
                        expected: "a tool name of letters, digits, `_` and `-` (starting with a letter or digit, at most 64 characters)".into(),
                    },
                );
            }
            let description = declared.description.filter(|text| !text.trim().is_empty());
            if description.is_none() {
                report(
                    key_path(&path, "description"),
                    Problem::InvalidValue {
                        expected: "a description of what the tool does, for the model".into(),
                    },
                );
            }
            let schema_is_object = declared.input_schema.as_ref().is_some_and(|schema| {
                schema.get("type").and_then(|kind| kind.as_str()) == Some("object")
            });
            if !schema_is_object {
                report(
                    key_path(&path, "input_schema"),
                    Problem::InvalidValue {
                        expected: "a JSON Schema of the arguments with type = \"object\" (e.g. input_schema = { type = \"object\", properties = { place = { type = \"string\" } } })".into(),
                    },
                );
            }
            if let (Some(description), Some(input_schema), true) =
                (description, declared.input_schema, schema_is_object)
            {
                client_tools.push(ClientToolSpec {
                    name: tool,
                    description,
                    input_schema,
                });
            }
        }
        if let Some(model) = &model
            && model.trim().is_empty()
        {
            report(
                key_path(&base, "model"),
                Problem::InvalidValue {
                    expected: "the name of a [models.NAME] table, not an empty string".into(),
                },
            );
        }
        let skills = skills.unwrap_or_default();
        for (i, skill) in skills.iter().enumerate() {
            if skill.trim().is_empty() {
                report(
                    format!("{}[{i}]", key_path(&base, "skills")),
                    Problem::InvalidValue {
                        expected: "a skill name, not an empty string".into(),
                    },
                );
            }
        }
        for (i, server) in mcp_servers.iter().flatten().enumerate() {
            if !is_valid_server_name(server) {
                report(
                    format!("{}[{i}]", key_path(&base, "mcp_servers")),
                    Problem::InvalidValue {
                        expected: format!("a server name, not \"{server}\""),
                    },
                );
            }
        }
        let knowledge = knowledge.unwrap_or_default();
        for (i, collection) in knowledge.iter().enumerate() {
            if !is_valid_server_name(collection) {
                report(
                    format!("{}[{i}]", key_path(&base, "knowledge")),
                    Problem::InvalidValue {
                        expected: format!(
                            "a collection name of letters, digits, `_` and `-` (as `warden knowledge list` shows), not \"{collection}\""
                        ),
                    },
                );
            }
        }
        let host_tools = host_tools.unwrap_or_default();
        for (i, tool) in host_tools.iter().enumerate() {
            if !SERVICE_HOST_TOOLS.contains(&tool.as_str()) {
                report(
                    format!("{}[{i}]", key_path(&base, "host_tools")),
                    Problem::InvalidValue {
                        expected: format!(
                            "one of {}, not \"{tool}\"",
                            SERVICE_HOST_TOOLS
                                .iter()
                                .map(|name| format!("\"{name}\""))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    },
                );
            }
        }
        let room_template = room_template.map(|folder| {
            let folder = PathBuf::from(folder);
            if folder.is_absolute() {
                folder
            } else {
                source
                    .parent()
                    .map(|dir| dir.join(&folder))
                    .unwrap_or(folder)
            }
        });
        if let Some(folder) = &room_template
            && !folder.is_dir()
        {
            report(
                key_path(&base, "room_template"),
                Problem::InvalidValue {
                    expected: format!(
                        "a folder to copy into each new service session (relative to this file), but {} is not one",
                        folder.display()
                    ),
                },
            );
        }
        if diagnostics.is_empty() {
            Ok(AgentProfile {
                name,
                scope,
                source,
                model,
                instructions,
                skills,
                mcp_servers,
                client_tools,
                knowledge,
                host_tools,
                room_template,
            })
        } else {
            Err(diagnostics)
        }
    }
}

/// The host of a plain `http://` URL (without port or brackets), if it is one.
fn plain_http_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next();
    }
    authority.split(':').next()
}

#[cfg(test)]
mod plain_http_tests {
    use super::*;
    use warden_vocab::is_loopback_host;

    #[test]
    fn only_loopback_hosts_count_as_this_machine() {
        assert_eq!(
            plain_http_host("http://127.0.0.1:11434/v1"),
            Some("127.0.0.1")
        );
        assert_eq!(plain_http_host("http://[::1]:8080"), Some("::1"));
        assert_eq!(plain_http_host("http://user@10.0.0.5/v1"), Some("10.0.0.5"));
        assert_eq!(plain_http_host("https://api.example.com"), None);
        assert!(is_loopback_host("localhost"));
        assert!(is_loopback_host("127.0.0.2"));
        assert!(is_loopback_host("::1"));
        assert!(!is_loopback_host("10.0.0.5"));
        assert!(!is_loopback_host("localhost.evil.example"));
    }
}

/// An embeddings endpoint (`[embeddings.NAME]`): OpenAI-compatible `/v1/embeddings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingsSpec {
    /// The API base URL; the endpoint is `{base_url}/embeddings`.
    pub base_url: String,
    /// The embedding model's id.
    pub model: String,
    /// The environment variable holding the API key, if one is sent.
    pub api_key_env: Option<String>,
    /// Texts in one request at most.
    pub batch: Option<usize>,
    /// Put before a query when it is embedded (e5: `"query: "`).
    pub query_prefix: Option<String>,
    /// Put before a chunk's text when it is embedded (e5: `"passage: "`).
    pub passage_prefix: Option<String>,
    /// Sent as `input_type` with a query.
    pub query_input_type: Option<String>,
    /// Sent as `input_type` with passages.
    pub passage_input_type: Option<String>,
}

/// A reranker (`[rerankers.NAME]`): a `/v1/rerank` endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerankerSpec {
    /// The API base URL; the endpoint is `{base_url}/rerank`.
    pub base_url: String,
    /// The reranking model's id.
    pub model: String,
    /// The environment variable holding the API key, if one is sent.
    pub api_key_env: Option<String>,
}

/// `[knowledge]` and `[rerankers.NAME]` (user config only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnowledgeSettings {
    /// Commands that turn a file of an extension (lowercase, no dot) into text: the program
    /// and its arguments, `{path}` standing for the file.
    pub converters: BTreeMap<String, Vec<String>>,
    /// The `[rerankers.NAME]` entry each search's candidates are reordered by.
    pub reranker: Option<String>,
    /// The `[rerankers.NAME]` entries.
    pub rerankers: BTreeMap<String, RerankerSpec>,
}

/// Whether `name` may name an entry (`[embeddings.NAME]`, `[rerankers.NAME]`): letters, digits,
/// `_` and `-`, starting with a letter or digit, at most 64.
pub fn is_entry_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
