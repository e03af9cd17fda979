//! Manifest token counts (o200k): what the tools array costs now, with deferred servers reduced
//! to one line each behind the search tool, and what it would cost with every schema loaded.

use serde::Serialize;
use serde_json::{Value, json};

use crate::search::one_line;

/// Name of warden's own deferred-loading search tool.
pub(crate) const SEARCH_TOOL_NAME: &str = "search_tools";
/// Longest deferred-server summary kept in the search tool's index.
pub(crate) const SUMMARY_MAX_CHARS: usize = 60;

/// One tool as a model API receives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestTool {
    /// The server it belongs to (not sent to the model).
    #[serde(skip)]
    pub server: String,
    /// The model-visible name.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

impl ManifestTool {
    /// From an MCP `tools/list` definition and its public name.
    pub fn from_definition(server: &str, public_name: &str, definition: &Value) -> Self {
        Self {
            server: server.to_string(),
            name: public_name.to_string(),
            description: definition
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: definition
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"})),
        }
    }
}

impl ManifestTool {
    /// From a discovered MCP tool and its public name.
    pub fn from_mcp(tool: &warden_mcp::McpTool, public_name: &str) -> Self {
        let definition = serde_json::to_value(&tool.definition).unwrap_or(Value::Null);
        Self::from_definition(&tool.identity.server, public_name, &definition)
    }
}

/// A deferred server: its one-line summary and (for the all-loaded figure) its tools.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredServer {
    pub name: String,
    pub summary: String,
    pub tools: Vec<ManifestTool>,
}

/// The o200k token count of `text`.
pub fn count_tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// Token count of a tools array as sent (`[{name, description, input_schema}, …]`).
pub fn tools_array_tokens(tools: &[ManifestTool]) -> usize {
    if tools.is_empty() {
        return 0;
    }
    count_tokens(&serde_json::to_string(tools).unwrap_or_default())
}

/// The index line of a deferred server: `- name (N tools): summary`.
pub(crate) fn deferred_line(server: &DeferredServer) -> String {
    let summary = one_line(&server.summary, SUMMARY_MAX_CHARS);
    format!(
        "- {} ({} tools): {summary}",
        server.name,
        server.tools.len()
    )
}

/// The search tool, with one index line per deferred server in its description (sorted by
/// server name, so the bytes are stable).
pub(crate) fn search_tool(deferred: &[DeferredServer]) -> ManifestTool {
    let mut lines: Vec<String> = deferred.iter().map(deferred_line).collect();
    lines.sort();
    ManifestTool {
        server: String::new(),
        name: SEARCH_TOOL_NAME.to_string(),
        description: format!(
            "Find tools of the servers below, whose schemas are not loaded yet. Returns matching tools with their parameters; found tools become callable by name.\nServers:\n{}",
            lines.join("\n")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, or its name"},
                "limit": {"type": "integer", "description": "Most results (default 5)"}
            },
            "required": ["query"]
        }),
    }
}

/// Tokens of one server in a manifest report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerTokens {
    pub name: String,
    pub tools: usize,
    /// Its schemas when loaded; its index line when deferred.
    pub tokens: usize,
    pub deferred: bool,
}

/// The shape of `warden context --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestReport {
    /// What the model gets now: loaded schemas plus the search tool (when anything is deferred).
    pub total_tokens: usize,
    /// What it would get with every schema loaded.
    pub all_loaded_tokens: usize,
    /// The fixed deferred part: the search tool with its index lines (0 when nothing is deferred).
    pub deferred_fixed_tokens: usize,
    pub servers: Vec<ServerTokens>,
}

impl ManifestReport {
    /// Tokens saved against loading every schema.
    pub fn saving(&self) -> usize {
        self.all_loaded_tokens.saturating_sub(self.total_tokens)
    }
}

/// Counts the manifest of `loaded` tools plus `deferred` servers (servers sorted by name).
pub fn manifest_tokens(loaded: &[ManifestTool], deferred: &[DeferredServer]) -> ManifestReport {
    let mut servers: Vec<ServerTokens> = Vec::new();
    let mut names: Vec<&str> = loaded.iter().map(|t| t.server.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let tools: Vec<ManifestTool> = loaded
            .iter()
            .filter(|t| t.server == name)
            .cloned()
            .collect();
        servers.push(ServerTokens {
            name: name.to_string(),
            tools: tools.len(),
            tokens: tools_array_tokens(&tools),
            deferred: false,
        });
    }
    for server in deferred {
        servers.push(ServerTokens {
            name: server.name.clone(),
            tools: server.tools.len(),
            tokens: count_tokens(&deferred_line(server)),
            deferred: true,
        });
    }
    servers.sort_by(|a, b| a.name.cmp(&b.name));

    let search = (!deferred.is_empty()).then(|| search_tool(deferred));
    let deferred_fixed_tokens = search
        .as_ref()
        .map(|tool| tools_array_tokens(std::slice::from_ref(tool)))
        .unwrap_or(0);
    let mut now: Vec<ManifestTool> = loaded.to_vec();
    now.extend(search);
    let mut everything: Vec<ManifestTool> = loaded.to_vec();
    everything.extend(deferred.iter().flat_map(|s| s.tools.iter().cloned()));
    ManifestReport {
        total_tokens: tools_array_tokens(&now),
        all_loaded_tokens: tools_array_tokens(&everything),
        deferred_fixed_tokens,
        servers,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn tool(server: &str, name: &str) -> ManifestTool {
        ManifestTool::from_definition(
            server,
            name,
            &json!({"name": name, "description": "Does a thing with a fairly long description.",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        )
    }

    #[test]
    fn counts_known_text() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
    }

    #[test]
    fn deferring_a_server_replaces_its_schemas_by_one_line() {
        let loaded = vec![tool("a", "mcp__a__one")];
        let deferred = vec![DeferredServer {
            name: "b".to_string(),
            summary: "Second server.\nIgnored second line".to_string(),
            tools: (0..30)
                .map(|i| tool("b", &format!("mcp__b__t{i}")))
                .collect(),
        }];
        let report = manifest_tokens(&loaded, &deferred);
        assert_eq!(report.servers.len(), 2);
        assert!(!report.servers[0].deferred);
        assert!(report.servers[1].deferred);
        assert_eq!(report.servers[1].tools, 30);
        assert_eq!(
            report.servers[1].tokens,
            count_tokens("- b (30 tools): Second server.")
        );
        assert!(report.total_tokens < report.all_loaded_tokens);
        assert!(report.deferred_fixed_tokens > 0);
        let nothing_deferred = manifest_tokens(&loaded, &[]);
        assert_eq!(
            nothing_deferred.total_tokens,
            nothing_deferred.all_loaded_tokens
        );
        assert_eq!(nothing_deferred.deferred_fixed_tokens, 0);
        let json = serde_json::to_value(&report).unwrap();
        assert!(json["servers"][0]["deferred"].is_boolean());
        assert!(json["total_tokens"].is_u64() && json["all_loaded_tokens"].is_u64());
    }
}
