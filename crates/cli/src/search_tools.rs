//! `search_tools`: how the agent reaches deferred servers. It ranks their tools (BM25 over
//! names, descriptions and parameters), makes the matches callable, and appends their schemas to
//! the model's tool list — never rewriting what the model was already offered.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_agent::{ToolList, ToolSpec};
use warden_discovery::{SearchIndex, ServerDoc, ToolEntry};
use warden_host::HostTool;
use warden_policy::{BoxFuture, CapabilitySet, DispatchError, ToolOutput};

use crate::code_tools::{HostSlot, host_of};

/// The name of the deferred-tool search.
pub const SEARCH_TOOLS: &str = "search_tools";
/// Results when the model gives no limit.
const DEFAULT_LIMIT: usize = 5;
/// The most results one search returns.
const MAX_LIMIT: usize = 20;

/// A deferred server as the search tool's description lists it.
pub struct DeferredSummary {
    pub name: String,
    pub summary: String,
}

/// The search tool over the deferred servers of the session in `slot`; loaded tools are
/// appended to `offered`.
pub fn search_tool(
    slot: HostSlot,
    offered: ToolList,
    mut deferred: Vec<DeferredSummary>,
) -> Arc<dyn HostTool> {
    deferred.sort_by(|a, b| a.name.cmp(&b.name));
    let mut description = String::from(
        "Searches the tools of these deferred MCP servers and loads the best matches: their \
         schemas are added to your tools and you can call them by the returned names.\n",
    );
    for server in &deferred {
        description.push_str(&format!("- {}: {}\n", server.name, server.summary));
    }
    Arc::new(SearchTools {
        slot,
        offered,
        description,
        servers: deferred
            .into_iter()
            .map(|server| ServerDoc {
                name: server.name,
                summary: server.summary,
            })
            .collect(),
    })
}

struct SearchTools {
    slot: HostSlot,
    offered: ToolList,
    description: String,
    servers: Vec<ServerDoc>,
}

impl HostTool for SearchTools {
    fn name(&self) -> &str {
        SEARCH_TOOLS
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words, or its name"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let host = host_of(&self.slot)?;
            let query = arguments.get("query").and_then(Value::as_str).unwrap_or("");
            let limit = arguments
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_LIMIT, |limit| (limit as usize).clamp(1, MAX_LIMIT));
            let (tools, failures) = host.deferred_tools().await;
            let entries = tools
                .iter()
                .map(|(tool, public_name)| ToolEntry::from_mcp(tool, public_name))
                .collect();
            let hits = SearchIndex::new(entries, &self.servers).search(query, limit);
            let mut loaded = Vec::new();
            for hit in &hits {
                if let Some((tool, _)) = tools.iter().find(|(_, name)| name == &hit.public_name) {
                    loaded.extend(host.load_tools(&hit.server, std::slice::from_ref(tool)));
                }
            }
            self.offered.append(loaded.iter().map(|visible| {
                ToolSpec {
                    name: visible.descriptor.public_name.clone(),
                    description: visible
                        .tool
                        .definition
                        .description
                        .as_deref()
                        .unwrap_or("")
                        .to_owned(),
                    input_schema: visible.descriptor.input_schema.clone(),
                }
            }));
            let mut text = String::new();
            for hit in &hits {
                if loaded
                    .iter()
                    .any(|visible| visible.descriptor.public_name == hit.public_name)
                {
                    text.push_str(&hit.render());
                    text.push('\n');
                }
            }
            if text.is_empty() {
                text = format!("No deferred tool matches \"{query}\".\n");
            } else {
                text.push_str("These tools are loaded: call them by the names above.\n");
            }
            for failure in failures {
                text.push_str(&format!("(not searched: {failure})\n"));
            }
            Ok(ToolOutput::text(text))
        })
    }
}
