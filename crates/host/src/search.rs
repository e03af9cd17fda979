//! The one tool search every surface offers (the agent's `search_tools`, `warden serve
//! --expose progressive`, `warden tool search` over the bridge): which tools are candidates,
//! the server summaries that rank beside them, the limits, and how results read.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use warden_discovery::one_line;
use warden_discovery::{SearchHit, SearchIndex, ServerDoc, ToolEntry};
use warden_mcp::{McpError, McpTool};
use warden_vocab::{arguments_schema, parse_arguments};

use crate::Host;

/// The tool name every surface gives the search.
pub const SEARCH_TOOLS: &str = "search_tools";
/// Results when the caller gives no limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// The most results one search returns.
pub const MAX_SEARCH_LIMIT: usize = 20;
/// Longest server summary taken from a server's instructions.
const SUMMARY_CHARS: usize = 100;

/// A server's instructions in one line: their first non-empty line, shortened. Ranking and the
/// summary of an automatically deferred server both use it.
pub fn instructions_summary(instructions: &str) -> Option<String> {
    instructions
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| one_line(line, SUMMARY_CHARS))
}

/// Which tools a search ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchScope {
    /// Only the deferred servers' tools (an agent session: the rest are in its tool list).
    Deferred,
    /// Every admitted tool of every server, deferred ones included (serve, the tool CLI).
    Everything,
}

/// What one search found: the ranked hits, the candidates they came from (so a surface can
/// load or describe a hit), and the servers that could not be listed.
#[derive(Debug, Default)]
pub struct ToolSearch {
    pub hits: Vec<SearchHit>,
    pub candidates: Vec<(McpTool, String)>,
    pub failures: Vec<String>,
}

/// The limit a caller asked for, within `1..=MAX_SEARCH_LIMIT` (the default when absent).
pub fn search_limit(requested: Option<u64>) -> usize {
    requested.map_or(DEFAULT_SEARCH_LIMIT, |limit| {
        usize::try_from(limit)
            .unwrap_or(MAX_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT)
    })
}

/// The search's arguments, the same on every surface.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArguments {
    /// What the tool should do, in a few words, or its name
    pub query: String,
    /// How many results (5 when not given)
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u64>,
}

impl SearchArguments {
    /// A call's arguments, parsed in one step.
    pub fn parse(arguments: Value) -> Result<Self, String> {
        parse_arguments(SEARCH_TOOLS, &arguments)
    }

    /// The limit asked for, within bounds.
    pub fn limit(&self) -> usize {
        search_limit(self.limit)
    }
}

/// The tool that calls a tool found by search (serve's progressive exposure; an agent's
/// `system-tools` defer mode).
pub const CALL_TOOL: &str = "call_tool";
/// The tool that shows one found tool's whole definition (serve's progressive exposure).
pub const DESCRIBE_TOOL: &str = "describe_tool";

/// `call_tool`'s arguments, the same wherever it is offered.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallToolArguments {
    /// The tool's name, as listed
    pub name: String,
    /// The tool's arguments
    #[serde(default)]
    pub arguments: Option<serde_json::Map<String, Value>>,
}

impl CallToolArguments {
    /// A call's arguments, parsed in one step.
    pub fn parse(arguments: Value) -> Result<Self, String> {
        parse_arguments(CALL_TOOL, &arguments)
    }

    /// The tool to call and its arguments (an empty object when none were given).
    pub fn into_call(self) -> (String, Value) {
        (self.name, Value::Object(self.arguments.unwrap_or_default()))
    }

    /// The input schema.
    pub fn schema() -> Value {
        arguments_schema::<Self>()
    }
}

/// `describe_tool`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeToolArguments {
    /// The tool's name, as search_tools returned it
    pub name: String,
}

impl DescribeToolArguments {
    /// A call's arguments, parsed in one step.
    pub fn parse(arguments: Value) -> Result<Self, String> {
        parse_arguments(DESCRIBE_TOOL, &arguments)
    }

    /// The input schema.
    pub fn schema() -> Value {
        arguments_schema::<Self>()
    }
}

/// The search's input schema, the same on every surface.
pub fn search_schema() -> Value {
    arguments_schema::<SearchArguments>()
}

impl ToolSearch {
    /// The hits as text, one `name (server) — summary` block each followed by `found` (when
    /// not empty), or `empty` when nothing matched; then a line per server that could not be
    /// searched.
    pub fn render(&self, empty: &str, found: &str) -> String {
        let mut text: String = self.hits.iter().map(|hit| hit.render() + "\n").collect();
        if text.is_empty() {
            text = format!("{empty}\n");
        } else if !found.is_empty() {
            text.push_str(found);
            text.push('\n');
        }
        for failure in &self.failures {
            text.push_str(&format!("(not searched: {failure})\n"));
        }
        text
    }

    /// The candidate behind a hit.
    pub fn candidate(&self, public_name: &str) -> Option<&McpTool> {
        self.candidates
            .iter()
            .find(|(_, name)| name == public_name)
            .map(|(tool, _)| tool)
    }
}

impl Host {
    /// Ranks the candidate tools of `scope` against `query`: exact name, then name prefix, then
    /// BM25F over names, descriptions, parameters and each server's summary (a deferred
    /// server's summary, else the first line of its instructions). Only tools the gate admits
    /// are candidates.
    pub async fn search_tools(&self, scope: SearchScope, query: &str, limit: usize) -> ToolSearch {
        let (candidates, failures) = match scope {
            SearchScope::Deferred => self.deferred_tools().await,
            SearchScope::Everything => self.reachable_tools().await,
        };
        let entries = candidates
            .iter()
            .map(|(tool, public_name)| ToolEntry::from_mcp(tool, public_name))
            .collect();
        let hits = SearchIndex::new(entries, &self.server_docs()).search(query, limit);
        ToolSearch {
            hits,
            candidates,
            failures: failures.iter().map(ToString::to_string).collect(),
        }
    }

    /// Every tool a caller may reach, with its public name: the admitted tools of active
    /// servers, then the deferred servers' tools (named, loaded when called). Failures come back
    /// beside them.
    pub async fn reachable_tools(&self) -> (Vec<(McpTool, String)>, Vec<McpError>) {
        let (visible, mut failures) = self.all_tools().await;
        let mut tools: Vec<(McpTool, String)> = visible
            .into_iter()
            .map(|visible| (visible.tool, visible.descriptor.public_name))
            .collect();
        let (deferred, deferred_failures) = self.deferred_tools().await;
        tools.extend(deferred);
        failures.extend(deferred_failures);
        (tools, failures)
    }

    /// Every server's one-line summary for ranking: a deferred server's summary, else the
    /// first non-empty line of its instructions.
    fn server_docs(&self) -> Vec<ServerDoc> {
        let deferred: std::collections::BTreeMap<String, String> =
            self.deferred_servers().into_iter().collect();
        self.runtime
            .status()
            .into_iter()
            .map(|status| {
                let summary = deferred.get(&status.name).cloned().or_else(|| {
                    status
                        .instructions
                        .as_deref()
                        .and_then(instructions_summary)
                });
                ServerDoc {
                    name: status.name,
                    summary: summary.unwrap_or_default(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_clamped_and_default_to_five() {
        assert_eq!(search_limit(None), DEFAULT_SEARCH_LIMIT);
        assert_eq!(search_limit(Some(0)), 1);
        assert_eq!(search_limit(Some(7)), 7);
        assert_eq!(search_limit(Some(10_000)), MAX_SEARCH_LIMIT);
        assert_eq!(search_limit(Some(u64::MAX)), MAX_SEARCH_LIMIT);
    }

    #[test]
    fn an_empty_search_says_so_and_names_what_was_not_searched() {
        let search = ToolSearch {
            failures: vec!["MCP fx: not running".into()],
            ..ToolSearch::default()
        };
        assert_eq!(
            search.render("No tool matches \"x\".", "unused when nothing matched"),
            "No tool matches \"x\".\n(not searched: MCP fx: not running)\n"
        );
    }
}
