//! `code_search`: browse servers, search, and describe up to 20 tools as TypeScript-like
//! signatures; only tools code mode may call are offered, and the others are named with why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_policy::CapabilitySet;

use warden_discovery::tool_signature;
use warden_discovery::{SearchIndex, ServerDoc, ToolEntry};

/// Most tools one `code_search` describes.
pub const MAX_DESCRIBED_TOOLS: usize = 20;

/// Whether code mode may call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "callable", rename_all = "snake_case")]
pub enum Callability {
    Callable,
    NotCallable { reason: String },
}

impl Callability {
    /// From the gate's capability classes: only read-only (non-destructive, non-writing)
    /// tools are callable.
    pub fn from_classes(classes: CapabilitySet) -> Self {
        if classes.is_read_only() {
            Self::Callable
        } else {
            Self::NotCallable {
                reason: format!(
                    "classified {}; code mode calls read-only tools only",
                    classes.to_names()
                ),
            }
        }
    }

    pub fn is_callable(&self) -> bool {
        matches!(self, Self::Callable)
    }
}

/// One tool as code mode sees it.
#[derive(Debug, Clone)]
pub struct CodeTool {
    pub entry: ToolEntry,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub callability: Callability,
}

impl CodeTool {
    /// From a tool definition in MCP `tools/list` form.
    pub fn from_definition(
        public_name: &str,
        server: &str,
        definition: &Value,
        callability: Callability,
    ) -> Self {
        Self {
            entry: ToolEntry::from_definition(public_name, server, definition),
            input_schema: definition
                .get("inputSchema")
                .cloned()
                .unwrap_or(Value::Null),
            output_schema: definition.get("outputSchema").cloned(),
            callability,
        }
    }

    /// From a discovered MCP tool and its public name.
    pub fn from_mcp(
        tool: &warden_mcp::McpTool,
        public_name: &str,
        callability: Callability,
    ) -> Self {
        let definition = serde_json::to_value(&tool.definition).unwrap_or(Value::Null);
        let mut code_tool =
            Self::from_definition(public_name, &tool.identity.server, &definition, callability);
        code_tool.entry.tool = tool.identity.tool.clone();
        code_tool
    }

    /// The TypeScript-like signature of the call.
    pub fn signature(&self) -> String {
        tool_signature(
            &self.entry.server,
            &self.entry.tool,
            &self.entry.description,
            &self.input_schema,
            self.output_schema.as_ref(),
        )
    }
}

/// What `code_search` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct CodeSearchRequest {
    /// Free-text search; without it (and without `tools`) servers are browsed.
    #[serde(default)]
    pub query: Option<String>,
    /// Restrict to one server (browse its tools when there is no query).
    #[serde(default)]
    pub server: Option<String>,
    /// Describe these tools (`server/tool` or public names).
    #[serde(default)]
    pub tools: Vec<String>,
    /// How many tools to describe (at most [`MAX_DESCRIBED_TOOLS`]).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The tools code mode can see, indexed for search.
pub struct CodeCatalog {
    tools: BTreeMap<String, CodeTool>,
    servers: Vec<ServerDoc>,
    index: SearchIndex,
}

impl CodeCatalog {
    /// Indexes `tools`; `servers` gives each server's one-line summary (optional).
    pub fn new(tools: Vec<CodeTool>, servers: Vec<ServerDoc>) -> Self {
        let index = SearchIndex::new(tools.iter().map(|t| t.entry.clone()).collect(), &servers);
        let tools = tools
            .into_iter()
            .map(|t| (t.entry.public_name.clone(), t))
            .collect();
        Self {
            tools,
            servers,
            index,
        }
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool called `name` (`server/tool` or public name).
    pub fn tool(&self, name: &str) -> Option<&CodeTool> {
        self.tools.get(name).or_else(|| {
            let (server, tool) = name.split_once('/')?;
            self.tools
                .values()
                .find(|t| t.entry.server == server && t.entry.tool == tool)
        })
    }

    /// Answers a `code_search` request as text for the model.
    pub fn search(&self, request: &CodeSearchRequest) -> String {
        let limit = request
            .limit
            .unwrap_or(MAX_DESCRIBED_TOOLS)
            .clamp(1, MAX_DESCRIBED_TOOLS);
        if self.tools.is_empty() {
            return "No tools are connected; code mode can still run pure JavaScript.".to_string();
        }
        let chosen: Vec<&CodeTool> = if !request.tools.is_empty() {
            let mut found = Vec::new();
            let mut unknown = Vec::new();
            for name in &request.tools {
                match self.tool(name) {
                    Some(tool) => found.push(tool),
                    None => unknown.push(name.as_str()),
                }
            }
            if !unknown.is_empty() && found.is_empty() {
                return format!("Unknown tool(s): {}.", unknown.join(", "));
            }
            found
        } else if let Some(query) = request.query.as_deref().filter(|q| !q.trim().is_empty()) {
            self.index
                .search(query, self.index.len())
                .iter()
                .filter(|hit| request.server.as_ref().is_none_or(|s| *s == hit.server))
                .filter_map(|hit| self.tools.get(&hit.public_name))
                .collect()
        } else if let Some(server) = &request.server {
            let tools: Vec<&CodeTool> = self
                .tools
                .values()
                .filter(|t| &t.entry.server == server)
                .collect();
            if tools.is_empty() {
                return format!("No server named {server:?}.\n\n{}", self.browse());
            }
            tools
        } else {
            return self.browse();
        };
        self.describe(&chosen, limit)
    }

    /// One line per server: tool counts, callable counts and summary.
    pub fn browse(&self) -> String {
        let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for tool in self.tools.values() {
            let slot = counts.entry(tool.entry.server.as_str()).or_default();
            slot.0 += 1;
            if tool.callability.is_callable() {
                slot.1 += 1;
            }
        }
        let mut out = String::from("Servers (tools, callable from code mode):\n");
        for (server, (total, callable)) in counts {
            let summary = self
                .servers
                .iter()
                .find(|s| s.name == server)
                .map(|s| warden_discovery::one_line(&s.summary, 120))
                .unwrap_or_default();
            out.push_str(&format!("- {server}: {total} tools, {callable} callable"));
            if !summary.is_empty() {
                out.push_str(&format!(" — {summary}"));
            }
            out.push('\n');
        }
        out.push_str("Search with {query}, list a server with {server}, describe with {tools}.");
        out
    }

    fn describe(&self, chosen: &[&CodeTool], limit: usize) -> String {
        if chosen.is_empty() {
            return "No tools match.".to_string();
        }
        let (callable, refused): (Vec<&&CodeTool>, Vec<&&CodeTool>) =
            chosen.iter().partition(|t| t.callability.is_callable());
        let mut out = String::new();
        if callable.is_empty() {
            out.push_str("No matching tool is callable from code mode.\n");
        } else {
            for tool in callable.iter().take(limit) {
                out.push_str(&tool.signature());
                out.push_str("\n\n");
            }
            if callable.len() > limit {
                out.push_str(&format!(
                    "({} more callable tools match; narrow the query.)\n",
                    callable.len() - limit
                ));
            }
        }
        if !refused.is_empty() {
            out.push_str("Not callable from code mode:\n");
            for tool in refused.iter().take(limit) {
                if let Callability::NotCallable { reason } = &tool.callability {
                    out.push_str(&format!(
                        "- {}/{}: {reason}\n",
                        tool.entry.server, tool.entry.tool
                    ));
                }
            }
        }
        out.trim_end().to_string()
    }
}
