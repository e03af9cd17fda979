//! `[models.NAME]` and `[agents.NAME]` as written, and their walk.

use schemars::JsonSchema;
use serde::Serialize;
use toml::Table;

use super::walk::Walk;
use crate::model::{DeferMode, ModelProvider};

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
    /// Anthropic only: the model thinks before it answers, with up to this many tokens (at least 1024; sent as `thinking.budget_tokens`). Its thoughts are kept in the conversation and shown where the frontend shows them (`warden acp`). Default: no extended thinking.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024))]
    pub thinking_budget: Option<u64>,
    /// Whether answers are streamed (default true). `false` for a server that cannot stream a tool call (llama-cpp-python's `chatml-function-calling`): the whole answer then arrives at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Extra fields merged into every request body, for what a server needs beyond the API: Ollama's `options = { num_ctx = 8192 }`, vLLM's `top_k`, `repetition_penalty`. A field warden sets itself (`model`, `messages`, `tools`, `stream`…) cannot be replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Map<String, serde_json::Value>>,
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
        "thinking_budget",
        "stream",
        "request",
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
    /// Client-side tools by name (`warden service` only): declared here with a description and a JSON Schema, they have no body — when the model calls one, the call passes the gate and the run waits for the service's caller to answer it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("propertyNames" = { "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" }))]
    pub client_tools: Option<std::collections::BTreeMap<String, RawClientTool>>,
    /// Knowledge collections the agent searches with its `search_knowledge` tool (made with `warden knowledge add`); leaving the key out offers no such tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<Vec<String>>,
    /// The built-in host tools this profile's `warden service` sessions get, by name (`read_file`, `list_dir`, `glob`, `grep`, `write_file`, `edit_file`, `bash`, `run_skill_script`); each works inside the session's own folder only. Leaving the key out gives none: a tenant's session then starts no process and touches no file of this machine. `warden run` and `warden chat` ignore it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_tools: Option<Vec<String>>,
    /// A folder copied into each new `warden service` session's own folder (a tenant's files to work on); relative to this config file. Leaving it out starts each session in an empty folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_template: Option<String>,
}

impl RawAgent {
    pub const KEYS: &'static [&'static str] = &[
        "model",
        "instructions",
        "skills",
        "mcp_servers",
        "client_tools",
        "knowledge",
        "host_tools",
        "room_template",
    ];
}

/// One `[agents.NAME.client_tools.TOOL]` declaration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawClientTool {
    /// What the tool does, for the model. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object schema). Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Value>,
}

impl RawClientTool {
    pub const KEYS: &'static [&'static str] = &["description", "input_schema"];
}

impl<'a> Walk<'a> {
    /// One `[models.NAME]` entry; problems are reported, wrongly typed keys left out.
    pub(crate) fn model(&mut self, t: &Table, p: &str) -> RawModel {
        self.unknown_keys(t, p, RawModel::KEYS);
        RawModel {
            provider: self.known(t, p, "provider"),
            id: self.string(t, p, "id"),
            base_url: self.string(t, p, "base_url"),
            api_key_env: self.string(t, p, "api_key_env"),
            context_window: self.unsigned(t, p, "context_window", "a whole number of tokens"),
            defer_mode: self.known(t, p, "defer_mode"),
            allow_plain_http: self.boolean(t, p, "allow_plain_http"),
            thinking_budget: self.unsigned(t, p, "thinking_budget", "a whole number of tokens"),
            stream: self.boolean(t, p, "stream"),
            request: match t.get("request") {
                None => None,
                Some(toml::Value::Table(fields)) => match serde_json::to_value(fields) {
                    Ok(serde_json::Value::Object(fields)) => Some(fields),
                    _ => None,
                },
                Some(other) => {
                    self.wrong_type(
                        super::key_path(p, "request"),
                        "a table of request fields",
                        other,
                    );
                    None
                }
            },
        }
    }

    /// One `[agents.NAME]` profile; problems are reported, wrongly typed keys left out.
    pub(crate) fn agent(&mut self, t: &Table, p: &str) -> RawAgent {
        self.unknown_keys(t, p, RawAgent::KEYS);
        RawAgent {
            model: self.string(t, p, "model"),
            instructions: self.string(t, p, "instructions"),
            skills: self.strings(t, p, "skills"),
            mcp_servers: self.strings(t, p, "mcp_servers"),
            client_tools: self.client_tools(t, p),
            knowledge: self.strings(t, p, "knowledge"),
            host_tools: self.strings(t, p, "host_tools"),
            room_template: self.string(t, p, "room_template"),
        }
    }

    /// `client_tools` of a profile: one table per tool.
    fn client_tools(
        &mut self,
        t: &Table,
        p: &str,
    ) -> Option<std::collections::BTreeMap<String, RawClientTool>> {
        let tools = self.table(t, p, "client_tools")?;
        let base = super::key_path(p, "client_tools");
        let mut out = std::collections::BTreeMap::new();
        for (name, value) in tools {
            let path = super::key_path(&base, name);
            let Some(entry) = value.as_table() else {
                self.wrong_type(path, "a table (a client-side tool)", value);
                continue;
            };
            self.unknown_keys(entry, &path, RawClientTool::KEYS);
            let input_schema = match entry.get("input_schema") {
                None => None,
                Some(toml::Value::Table(schema)) => serde_json::to_value(schema).ok(),
                Some(other) => {
                    self.wrong_type(
                        super::key_path(&path, "input_schema"),
                        "a table (a JSON Schema)",
                        other,
                    );
                    None
                }
            };
            out.insert(
                name.clone(),
                RawClientTool {
                    description: self.string(entry, &path, "description"),
                    input_schema,
                },
            );
        }
        Some(out)
    }
}
