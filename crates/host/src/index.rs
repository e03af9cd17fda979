//! The session's tool index: public names → descriptors the gate resolves, appended as catalogues arrive.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use warden_config::{CapabilityClass, DeferMode, ServerEntry};
use warden_mcp::McpTool;
use warden_mcp::ToolIdentity as RawIdentity;
use warden_mcp::{NameTable, NameWarning};
use warden_policy::{Catalog, ServerPolicy, ToolAnnotations, ToolDescriptor, ToolIdentity};

/// What the gate needs to know about one server, taken from its config entry.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub policy: ServerPolicy,
    /// Deferred: its tools are callable only once a search has loaded them.
    pub deferred: bool,
    pub trust_annotations: bool,
    pub tool_timeout: Duration,
}

impl ServerFacts {
    /// The facts of a configured entry.
    pub fn from_entry(entry: &ServerEntry) -> Self {
        let classes = |list: &Option<Vec<CapabilityClass>>| {
            list.as_ref().map(|list| list.iter().copied().collect())
        };
        Self {
            policy: ServerPolicy {
                capabilities: classes(&entry.policy.capabilities),
                tools: entry
                    .policy
                    .tools
                    .iter()
                    .filter_map(|(tool, policy)| {
                        classes(&policy.capabilities).map(|set| (tool.clone(), set))
                    })
                    .collect(),
            },
            trust_annotations: entry.effective_trust_annotations(),
            tool_timeout: entry.tool_timeout,
            deferred: entry.defer.is_some(),
        }
    }

    /// The facts of an ad-hoc server given on the command line (the operator's own: trusted).
    pub fn ad_hoc(tool_timeout: Duration) -> Self {
        Self {
            policy: ServerPolicy::default(),
            trust_annotations: true,
            tool_timeout,
            deferred: false,
        }
    }
}

#[derive(Default)]
struct IndexState {
    names: NameTable,
    descriptors: HashMap<String, ToolDescriptor>,
    /// Raw identities currently published, per server (a tool gone from a server is kept in
    /// `descriptors` so the model's earlier view stays valid, but marked withdrawn here).
    published: BTreeMap<String, Vec<String>>,
}

/// Public names and descriptors of every MCP tool seen this session; never renames a tool.
pub struct ToolIndex {
    facts: HashMap<String, ServerFacts>,
    state: RwLock<IndexState>,
    /// The agent session's defer mode (`None`: no agent session): what "unknown tool" advises.
    defer_mode: Option<DeferMode>,
    /// Servers deferred automatically this session (beside those configured with `defer`).
    auto_deferred: RwLock<BTreeSet<String>>,
}

impl ToolIndex {
    /// An empty index over servers with these facts.
    pub fn new(facts: HashMap<String, ServerFacts>) -> Self {
        Self {
            facts,
            state: RwLock::new(IndexState::default()),
            defer_mode: None,
            auto_deferred: RwLock::new(BTreeSet::new()),
        }
    }

    /// The agent session's defer mode, so an unknown deferred tool gets advice that fits how
    /// this session reaches deferred tools (`None`: not an agent session).
    pub fn with_defer_mode(mut self, mode: Option<DeferMode>) -> Self {
        self.defer_mode = mode;
        self
    }

    /// Records that `server` was deferred automatically (its tools are reached as a deferred
    /// server's are).
    pub fn mark_deferred(&self, server: &str) {
        if let Ok(mut deferred) = self.auto_deferred.write() {
            deferred.insert(server.to_owned());
        }
    }

    /// Whether `server` is deferred, by its config entry or automatically.
    pub fn is_deferred(&self, server: &str) -> bool {
        self.facts.get(server).is_some_and(|facts| facts.deferred)
            || self
                .auto_deferred
                .read()
                .is_ok_and(|deferred| deferred.contains(server))
    }

    /// How to reach a deferred server's tools in this session, for an "unknown tool" answer.
    fn deferred_advice(&self) -> &'static str {
        match self.defer_mode {
            Some(DeferMode::Normal | DeferMode::Reference) => {
                "find and load its tools with search_tools first"
            }
            Some(DeferMode::ToolSearch) => {
                "find its tools with the tool search tool, then call one by the exact name it returns"
            }
            Some(DeferMode::SystemTools) => {
                "its tools are listed in <deferred_tools>; call one through call_tool with its exact name"
            }
            None => {
                "find its tools with `warden tool search QUERY`, then call one by its server and tool name"
            }
        }
    }

    /// Records a server's current catalogue: new tools are appended with fresh public names,
    /// known tools keep theirs, and what it no longer publishes is withdrawn. Returns naming
    /// warnings (duplicates, collisions).
    pub fn record(&self, server: &str, tools: &[McpTool]) -> Vec<NameWarning> {
        self.publish(server, tools, true)
    }

    /// Names tools without making them callable: a deferred server's catalogue, for search.
    pub fn name_only(&self, tools: &[McpTool]) -> Vec<NameWarning> {
        let Ok(mut state) = self.state.write() else {
            return Vec::new();
        };
        state.names.extend(
            tools
                .iter()
                .map(|tool| RawIdentity::new(&tool.identity.server, &tool.identity.tool)),
        )
    }

    /// Makes these tools of `server` callable in addition to what it already publishes (a
    /// deferred server's tools, loaded by a search). Returns naming warnings.
    pub fn load(&self, server: &str, tools: &[McpTool]) -> Vec<NameWarning> {
        self.publish(server, tools, false)
    }

    /// Names `tools`, describes them for the gate and publishes them — replacing what `server`
    /// published before, or adding to it — under one lock, so no call sees a half-made state.
    fn publish(&self, server: &str, tools: &[McpTool], replace: bool) -> Vec<NameWarning> {
        let Some(facts) = self.facts.get(server) else {
            return Vec::new();
        };
        let Ok(mut state) = self.state.write() else {
            return Vec::new();
        };
        let warnings = state.names.extend(
            tools
                .iter()
                .map(|tool| RawIdentity::new(&tool.identity.server, &tool.identity.tool)),
        );
        if replace {
            state.published.insert(server.to_owned(), Vec::new());
        }
        for tool in tools {
            let raw = RawIdentity::new(&tool.identity.server, &tool.identity.tool);
            let Some(public_name) = state.names.public_name(&raw).map(|n| n.to_string()) else {
                continue;
            };
            let descriptor = describe(&public_name, tool, facts);
            state.descriptors.insert(public_name, descriptor);
            let published = state.published.entry(server.to_owned()).or_default();
            if !published.contains(&tool.identity.tool) {
                published.push(tool.identity.tool.clone());
            }
        }
        warnings
    }

    /// The public name of a raw (server, tool) identity, once its catalogue was recorded.
    pub fn public_name(&self, server: &str, tool: &str) -> Option<String> {
        let state = self.state.read().ok()?;
        state
            .names
            .public_name(&RawIdentity::new(server, tool))
            .map(|name| name.to_string())
    }

    /// Whether the server still publishes this tool (false once `list_changed` withdrew it).
    pub fn is_published(&self, server: &str, tool: &str) -> bool {
        self.state.read().is_ok_and(|state| {
            state
                .published
                .get(server)
                .is_some_and(|tools| tools.iter().any(|name| name == tool))
        })
    }

    /// How the gate would describe `tool` under `public_name` if it were published (a deferred
    /// server's tool, before a search loads it): for deciding whether to list it at all.
    pub fn describe_unpublished(
        &self,
        public_name: &str,
        tool: &McpTool,
    ) -> Option<ToolDescriptor> {
        let facts = self.facts.get(&tool.identity.server)?;
        Some(describe(public_name, tool, facts))
    }

    /// The descriptor behind a public name, whether or not it is still published.
    pub fn descriptor(&self, public_name: &str) -> Option<ToolDescriptor> {
        let state = self.state.read().ok()?;
        state.descriptors.get(public_name).cloned()
    }
}

impl Catalog for ToolIndex {
    /// MCP tools reach what their server reaches; the gate's classes and approval cover them.
    fn assess(
        &self,
        _descriptor: &ToolDescriptor,
        _arguments: &serde_json::Value,
    ) -> warden_policy::CallReach {
        warden_policy::CallReach::default()
    }

    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor> {
        let descriptor = self.descriptor(public_name)?;
        let server = descriptor.identity.server().to_owned();
        // A tool the server no longer offers resolves to nothing: "unknown tool", never sent.
        self.is_published(&server, &descriptor.identity.tool)
            .then_some(descriptor)
    }

    fn explain_unresolved(&self, public_name: &str) -> Option<String> {
        let Some(descriptor) = self.descriptor(public_name) else {
            let state = self.state.read().ok()?;
            // Named by a search but not loaded, or (the message only — nothing is routed by it)
            // shaped like a name of one of this session's servers.
            let server = match state.names.resolve(public_name) {
                Some(identity) => identity.server.clone(),
                None => {
                    let mut servers: Vec<&String> = self.facts.keys().collect();
                    // The longest prefix wins (`mcp__a_b__` over `mcp__a__`).
                    servers.sort_by_key(|server| std::cmp::Reverse(server.len()));
                    servers
                        .into_iter()
                        .find(|server| {
                            public_name.starts_with(&format!(
                                "mcp__{}__",
                                warden_mcp::sanitize_name_part(server)
                            ))
                        })?
                        .clone()
                }
            };
            if self.is_deferred(&server) {
                return Some(format!(
                    "unknown tool \"{public_name}\": the MCP server \"{server}\" is deferred; {}",
                    self.deferred_advice()
                ));
            }
            // Nothing to search for: the server's tools were offered outright (said only once
            // its catalogue is known; otherwise the gate's plain "unknown tool").
            if !state.published.contains_key(&server) {
                return None;
            }
            let known: Vec<&str> = state
                .published
                .get(&server)
                .map(|tools| tools.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let tool = public_name.rsplit("__").next().unwrap_or(public_name);
            let near = warden_config::nearest(tool, &known)
                .map(|near| {
                    let name = warden_mcp::public_name_for(&server, near);
                    format!("; did you mean \"{name}\"?")
                })
                .unwrap_or_default();
            return Some(format!(
                "unknown tool \"{public_name}\": the MCP server \"{server}\" has no tool of that name{near}"
            ));
        };
        // Known to this session but no longer published: the model saw it, so say what changed.
        Some(format!(
            "the MCP server \"{}\" no longer offers the tool \"{}\" (it was withdrawn during this session)",
            descriptor.identity.server(),
            descriptor.identity.tool
        ))
    }
}

fn describe(public_name: &str, tool: &McpTool, facts: &ServerFacts) -> ToolDescriptor {
    let definition = &tool.definition;
    let annotations = definition
        .annotations
        .as_ref()
        .map(|hints| ToolAnnotations {
            read_only_hint: hints.read_only_hint,
            destructive_hint: hints.destructive_hint,
            idempotent_hint: hints.idempotent_hint,
            open_world_hint: hints.open_world_hint,
        })
        .unwrap_or_default();
    ToolDescriptor {
        identity: ToolIdentity::mcp(&tool.identity.server, &tool.identity.tool),
        public_name: public_name.to_owned(),
        input_schema: Arc::new(serde_json::Value::Object(
            (*definition.input_schema).clone(),
        )),
        annotations,
        declared_classes: None,
        server_policy: facts.policy.clone(),
        trust_annotations: facts.trust_annotations,
        required_permission: None,
        effect: None,
        requires_approval: false,
        timeout: Some(facts.tool_timeout),
        kind: warden_policy::CallKind::Tool,
        surfaces: warden_policy::SurfaceSet::CALLERS,
        audit_required: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use super::*;

    fn tool(server: &str, name: &str) -> McpTool {
        let schema = serde_json::json!({"type": "object"});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        McpTool {
            identity: RawIdentity::new(server, name),
            definition: rmcp::model::Tool::new(name.to_owned(), "a tool", Arc::new(schema)),
        }
    }

    fn facts(deferred: bool) -> ServerFacts {
        ServerFacts {
            deferred,
            ..ServerFacts::ad_hoc(Duration::from_secs(5))
        }
    }

    /// An index with `big` deferred by its config and `echo` offered outright and listed.
    fn index(mode: Option<DeferMode>) -> ToolIndex {
        let index = ToolIndex::new(HashMap::from([
            ("big".to_owned(), facts(true)),
            ("echo".to_owned(), facts(false)),
        ]))
        .with_defer_mode(mode);
        index.record("echo", &[tool("echo", "echo")]);
        index
    }

    #[test]
    fn deferred_advice_fits_each_mode() {
        let cases = [
            (Some(DeferMode::Normal), "search_tools"),
            (Some(DeferMode::Reference), "search_tools"),
            (Some(DeferMode::ToolSearch), "tool search tool"),
            (Some(DeferMode::SystemTools), "call_tool"),
            (None, "warden tool search"),
        ];
        for (mode, advice) in cases {
            let message = index(mode).explain_unresolved("mcp__big__nosuch").unwrap();
            assert!(
                message.contains("\"big\" is deferred"),
                "{mode:?}: {message}"
            );
            assert!(message.contains(advice), "{mode:?}: {message}");
            if !matches!(mode, Some(DeferMode::Normal | DeferMode::Reference)) {
                assert!(!message.contains("search_tools"), "{mode:?}: {message}");
            }
            if mode != Some(DeferMode::SystemTools) {
                assert!(!message.contains("call_tool"), "{mode:?}: {message}");
            }
        }
    }

    #[test]
    fn a_tool_named_by_a_search_but_not_loaded_gets_the_same_advice() {
        let index = index(Some(DeferMode::SystemTools));
        index.name_only(&[tool("big", "create")]);
        let message = index.explain_unresolved("mcp__big__create").unwrap();
        assert!(message.contains("<deferred_tools>"), "{message}");
    }

    #[test]
    fn automatically_deferred_servers_are_deferred_too() {
        let index = index(Some(DeferMode::Normal));
        index.record("echo", &[tool("echo", "echo")]);
        index.mark_deferred("echo");
        let message = index.explain_unresolved("mcp__echo__nosuch").unwrap();
        assert!(message.contains("\"echo\" is deferred"), "{message}");
        assert!(message.contains("search_tools"), "{message}");
    }

    #[test]
    fn without_deferral_nothing_advises_a_search() {
        for mode in [
            Some(DeferMode::Normal),
            Some(DeferMode::ToolSearch),
            Some(DeferMode::SystemTools),
            None,
        ] {
            let index = ToolIndex::new(HashMap::from([("echo".to_owned(), facts(false))]))
                .with_defer_mode(mode);
            // Before its catalogue is known, the gate's plain "unknown tool" stands.
            assert_eq!(index.explain_unresolved("mcp__echo__nosuch"), None);
            index.record("echo", &[tool("echo", "echo")]);
            let message = index.explain_unresolved("mcp__echo__nosuch").unwrap();
            assert_eq!(
                message,
                "unknown tool \"mcp__echo__nosuch\": the MCP server \"echo\" has no tool of that name"
            );
            assert_eq!(index.explain_unresolved("unrelated"), None);
        }
    }
}
