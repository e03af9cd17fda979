//! Deferred tools in an agent session, by defer mode: `search_tools` (warden's search; `normal`
//! appends the loaded schemas to the tool list, `reference` answers with `tool_reference`s), the
//! provider's own tool search (`tool-search`), and `call_tool` behind a system-prompt section
//! (`system-tools`); automatic deferral of large servers; and loading a deferred tool the model
//! calls by its exact name. Nothing here rewrites what the model was already offered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use warden_agent::{ModelConfig, ToolList, ToolSpec};
use warden_config::{DeferMode, ModelProvider};
use warden_discovery::{ManifestTool, tools_array_tokens};
use warden_discovery::{SUMMARY_CHARS, one_line, parameters_of};
use warden_host::{
    CALL_TOOL, CallToolArguments, CodeTool, Host, HostTool, Invocation, SearchArguments,
    SearchScope, VisibleTool, instructions_summary, search_schema,
};
use warden_policy::{CapabilitySet, ToolOutput};

pub use warden_host::SEARCH_TOOLS;
/// Tool names a generated summary lists.
const AUTO_SUMMARY_TOOLS: usize = 6;

/// The deferred-tool state of one agent session, shared by the search tool, the executor and
/// the session: the defer mode (the session's, kept across a model switch), the automatic
/// deferral settings, and what was settled when the tool list was built.
pub struct Deferral {
    mode: DeferMode,
    offered: ToolList,
    /// `None`: automatic deferral is off.
    auto_defer_tokens: Option<u64>,
    always_load: BTreeSet<String>,
    search_description: Arc<OnceLock<String>>,
    system_section: OnceLock<String>,
    /// Deferred tools loaded on first use (called by name or through `call_tool`).
    loaded: Mutex<BTreeSet<String>>,
}

/// What [`Deferral::settle`] adds to the tool list.
pub struct Settled {
    /// `search_tools` or `call_tool`, when the mode offers one and something is deferred.
    pub extra_tools: Vec<ToolSpec>,
    /// Deferred servers that could not be listed.
    pub failures: Vec<String>,
}

impl Deferral {
    pub fn new(
        mode: DeferMode,
        offered: ToolList,
        auto_defer_tokens: Option<u64>,
        always_load: BTreeSet<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            mode,
            offered,
            auto_defer_tokens,
            always_load,
            search_description: Arc::default(),
            system_section: OnceLock::new(),
            loaded: Mutex::new(BTreeSet::new()),
        })
    }

    /// The session's defer mode.
    pub fn mode(&self) -> DeferMode {
        self.mode
    }

    /// The search tool; registered with every session (it is offered only in `normal` and
    /// `reference` modes, and only when something is deferred).
    pub fn search_tool(self: &Arc<Self>) -> Arc<dyn HostTool> {
        let deferral = self.clone();
        let tool = CodeTool::builtin(
            SEARCH_TOOLS,
            SEARCH_DESCRIPTION_BEFORE_SETTLING,
            CapabilitySet::READ_ONLY,
            move |request: SearchArguments, invocation: Invocation| {
                let deferral = deferral.clone();
                async move { Ok(deferral.search(&invocation.host, &request).await) }
            },
        );
        Arc::new(tool.settled_description(self.search_description.clone()))
    }

    /// Automatic deferral: when the schemas of `tools` (the non-deferred MCP tools) cost more
    /// than the threshold, whole servers are deferred, the largest first, until the rest fit;
    /// servers with `always_load = true` never are. Returns the tools still offered outright.
    pub fn auto_defer(&self, host: &Host, tools: Vec<VisibleTool>) -> Vec<VisibleTool> {
        let Some(threshold) = self.auto_defer_tokens else {
            return tools;
        };
        let mut by_server: BTreeMap<String, Vec<&VisibleTool>> = BTreeMap::new();
        for tool in &tools {
            by_server
                .entry(tool.descriptor.identity.server().to_owned())
                .or_default()
                .push(tool);
        }
        let mut sizes: Vec<(usize, String)> = by_server
            .iter()
            .map(|(server, tools)| {
                let manifest: Vec<ManifestTool> = tools
                    .iter()
                    .map(|tool| ManifestTool::from_mcp(&tool.tool, &tool.descriptor.public_name))
                    .collect();
                (tools_array_tokens(&manifest), server.clone())
            })
            .collect();
        let mut total: usize = sizes.iter().map(|(tokens, _)| tokens).sum();
        // Largest first; ties by name, so the choice is deterministic.
        sizes.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut deferred = BTreeSet::new();
        for (tokens, server) in sizes {
            if total as u64 <= threshold {
                break;
            }
            if self.always_load.contains(&server) {
                continue;
            }
            let names: Vec<&str> = by_server[&server]
                .iter()
                .map(|tool| tool.tool.definition.name.as_ref())
                .collect();
            let instructions = host
                .servers()
                .server_status(&server)
                .ok()
                .and_then(|status| status.instructions);
            host.defer_server(&server, generated_summary(instructions.as_deref(), &names));
            total -= tokens;
            deferred.insert(server);
        }
        tools
            .into_iter()
            .filter(|tool| !deferred.contains(tool.descriptor.identity.server()))
            .collect()
    }

    /// Settles how the deferred servers reach the model, once, before the first request: the
    /// search tool's description, the deferred definitions (`reference`, `tool-search`), or the
    /// system-prompt section behind `call_tool` (`system-tools`).
    pub async fn settle(&self, host: &Host) -> Settled {
        let servers = host.deferred_servers();
        let mut settled = Settled {
            extra_tools: Vec::new(),
            failures: Vec::new(),
        };
        if servers.is_empty() {
            return settled;
        }
        let description = search_description(&servers);
        let _ = self.search_description.set(description.clone());
        let search_spec = ToolSpec {
            name: SEARCH_TOOLS.to_owned(),
            description,
            input_schema: search_schema(),
        };
        if self.mode == DeferMode::Normal {
            settled.extra_tools.push(search_spec);
            return settled;
        }
        let (tools, failures) = host.deferred_tools().await;
        settled.failures = failures.iter().map(ToString::to_string).collect();
        let mut specs: Vec<(String, ToolSpec)> = tools
            .iter()
            .map(|(tool, public_name)| {
                (
                    tool.identity.server.clone(),
                    ToolSpec {
                        name: public_name.clone(),
                        description: tool
                            .definition
                            .description
                            .as_deref()
                            .unwrap_or("")
                            .to_owned(),
                        input_schema: Value::Object((*tool.definition.input_schema).clone()),
                    },
                )
            })
            .collect();
        specs.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
        match self.mode {
            DeferMode::Normal => {}
            DeferMode::Reference => {
                settled.extra_tools.push(search_spec);
                self.offered.set_deferred(
                    DeferMode::Reference,
                    specs.into_iter().map(|(_, spec)| spec).collect(),
                );
            }
            DeferMode::ToolSearch => {
                self.offered.set_deferred(
                    DeferMode::ToolSearch,
                    specs.into_iter().map(|(_, spec)| spec).collect(),
                );
            }
            DeferMode::SystemTools => {
                let _ = self
                    .system_section
                    .set(system_tools_section(&servers, &specs));
                settled.extra_tools.push(call_tool_spec());
            }
        }
        settled
    }

    /// The `<deferred_tools>` system-prompt section (`system-tools` mode), once settled.
    pub fn system_section(&self) -> Option<&str> {
        self.system_section.get().map(String::as_str)
    }

    /// What the executor sends through the gate for a call to `name`: the tool behind
    /// `call_tool`, and a deferred tool called by its exact name loaded first (in `normal` mode
    /// its schema is then appended to the tool list). `Err` is a message for the model.
    pub async fn route(
        &self,
        host: &Host,
        name: &str,
        arguments: Value,
    ) -> Result<(String, Value), String> {
        let (target, arguments) = if name == CALL_TOOL && self.mode == DeferMode::SystemTools {
            let (target, inner) = CallToolArguments::parse(arguments)
                .map_err(|error| {
                    format!("{error}: call_tool takes the deferred tool's `name`, as listed in <deferred_tools>, and its `arguments`")
                })?
                .into_call();
            if target == CALL_TOOL {
                return Err("call_tool cannot call itself".to_owned());
            }
            (target, inner)
        } else {
            (name.to_owned(), arguments)
        };
        self.load_on_first_use(host, &target).await;
        Ok((target, arguments))
    }

    /// Loads `name` when it is a deferred tool the session has not loaded yet.
    async fn load_on_first_use(&self, host: &Host, name: &str) {
        if self.offered.contains(name)
            || host.host_tool_description(name).is_some()
            || self.loaded.lock().is_ok_and(|loaded| loaded.contains(name))
        {
            return;
        }
        let Some(visible) = host.load_deferred(name).await else {
            return;
        };
        if let Ok(mut loaded) = self.loaded.lock() {
            loaded.insert(name.to_owned());
        }
        if self.mode == DeferMode::Normal {
            self.offered.append([tool_spec(&visible)]);
        }
    }
}

/// One line about an automatically deferred server: its instructions' first line, else the
/// names of its first tools.
pub fn generated_summary(instructions: Option<&str>, tool_names: &[&str]) -> String {
    if let Some(summary) = instructions.and_then(instructions_summary) {
        return summary;
    }
    let mut names: Vec<&str> = tool_names.to_vec();
    names.sort_unstable();
    let shown = names.len().min(AUTO_SUMMARY_TOOLS);
    let more = if names.len() > shown { ", …" } else { "" };
    format!("tools: {}{more}", names[..shown].join(", "))
}

/// What a frontend says when the user switches to `new_model` mid-session: the session keeps its
/// defer mode (its tools array and prompt stay as they are); a model whose provider cannot speak
/// that mode is refused, with the reason.
pub fn model_switch_notice(
    session_mode: DeferMode,
    new_model: &ModelConfig,
) -> Result<String, String> {
    let provider = new_model.provider;
    if !provider.supports(session_mode) {
        let needs = ModelProvider::speaking(session_mode).join(" or ");
        return Err(format!(
            "cannot switch to {}: this session's defer mode \"{}\" needs provider {needs}, and \"{}\" cannot speak it; start a new session to use this model",
            new_model.name,
            session_mode.as_str(),
            provider.as_str()
        ));
    }
    let own = if new_model.defer_mode == session_mode {
        String::new()
    } else {
        format!(
            " (its own defer_mode \"{}\" applies to new sessions)",
            new_model.defer_mode.as_str()
        )
    };
    Ok(format!(
        "switched to {}: this session keeps defer mode \"{}\"{own}",
        new_model.name,
        session_mode.as_str()
    ))
}

pub(crate) fn tool_spec(visible: &VisibleTool) -> ToolSpec {
    ToolSpec {
        name: visible.descriptor.public_name.clone(),
        description: visible
            .tool
            .definition
            .description
            .as_deref()
            .unwrap_or("")
            .to_owned(),
        input_schema: serde_json::Value::clone(&visible.descriptor.input_schema),
    }
}

fn search_description(servers: &[(String, String)]) -> String {
    let mut description = String::from(
        "Searches the tools of these deferred MCP servers and loads the best matches, which you \
         can then call by the returned names.\n",
    );
    for (name, summary) in servers {
        description.push_str(&format!("- {name}: {summary}\n"));
    }
    description
}

fn call_tool_spec() -> ToolSpec {
    ToolSpec {
        name: CALL_TOOL.to_owned(),
        description: "Calls one of the deferred tools listed in <deferred_tools> of the system \
                      prompt. The call is checked and approved like a direct call of that tool."
            .to_owned(),
        input_schema: CallToolArguments::schema(),
    }
}

/// `<deferred_tools>`: each deferred tool as `name(params): one line`, grouped by server in
/// name order, so the same catalogues give the same bytes.
fn system_tools_section(servers: &[(String, String)], specs: &[(String, ToolSpec)]) -> String {
    let mut out = String::from(
        "<deferred_tools>\nThese tools are not in your tool list: call one with call_tool \
         {\"name\": NAME, \"arguments\": {...}}. Parameters marked ? are optional.\n",
    );
    for (server, summary) in servers {
        out.push_str(&format!("Server {server}: {summary}\n"));
        for (_, spec) in specs.iter().filter(|(owner, _)| owner == server) {
            let params = parameters_of(&spec.input_schema)
                .iter()
                .map(|p| {
                    let optional = if p.required { "" } else { "?" };
                    format!("{}{optional}", p.name)
                })
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "- {}({params}): {}\n",
                spec.name,
                one_line(&spec.description, SUMMARY_CHARS)
            ));
        }
    }
    out.push_str("</deferred_tools>");
    out
}

const SEARCH_DESCRIPTION_BEFORE_SETTLING: &str =
    "Searches the tools of the deferred MCP servers and loads the best matches.";

impl Deferral {
    /// `search_tools`: searches the deferred servers and loads the hits the gate shows.
    async fn search(&self, host: &Host, request: &SearchArguments) -> ToolOutput {
        let query = request.query.as_str();
        let mut search = host
            .search_tools(SearchScope::Deferred, query, request.limit())
            .await;
        let mut loaded = Vec::new();
        for hit in &search.hits {
            if let Some(tool) = search.candidate(&hit.public_name) {
                loaded.extend(host.load_tools(&hit.server, std::slice::from_ref(tool)));
            }
        }
        if let Ok(mut names) = self.loaded.lock() {
            names.extend(
                loaded
                    .iter()
                    .map(|visible| visible.descriptor.public_name.clone()),
            );
        }
        // Only `normal` appends schemas; `reference` reveals the definitions already in the
        // request with tool_reference blocks, so the tools array never changes.
        if self.mode == DeferMode::Normal {
            self.offered.append(loaded.iter().map(tool_spec));
        }
        // Only the hits the gate shows once loaded are offered.
        search.hits.retain(|hit| {
            loaded
                .iter()
                .any(|visible| visible.descriptor.public_name == hit.public_name)
        });
        let references: Vec<String> = search
            .hits
            .iter()
            .map(|hit| hit.public_name.clone())
            .collect();
        let text = search.render(
            &format!("No deferred tool matches \"{query}\"."),
            "These tools are loaded: call them by the names above.",
        );
        let mut output = ToolOutput::text(text);
        if self.mode == DeferMode::Reference && !references.is_empty() {
            output.content = Some(json!({ "tool_references": references }));
        }
        output
    }
}

/// The tools a search result reveals, for the executor (`reference` mode).
pub fn tool_references(content: Option<&Value>) -> Vec<String> {
    content
        .and_then(|content| content.get("tool_references"))
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn generated_summaries_prefer_instructions_then_tool_names() {
        assert_eq!(
            generated_summary(Some("\n  Files of the workspace.\nMore."), &["a"]),
            "Files of the workspace."
        );
        assert_eq!(generated_summary(None, &["b", "a", "c"]), "tools: a, b, c");
        let many = ["t1", "t2", "t3", "t4", "t5", "t6", "t7"];
        assert_eq!(
            generated_summary(Some("   "), &many),
            "tools: t1, t2, t3, t4, t5, t6, …"
        );
    }

    #[test]
    fn a_model_switch_keeps_the_session_mode_or_is_refused() {
        let mut claude = ModelConfig::new(ModelProvider::Anthropic, "claude", "http://x/v1");
        claude.name = "claude".into();
        claude.defer_mode = DeferMode::Reference;
        let mut local = ModelConfig::new(ModelProvider::OpenAi, "qwen", "http://x/v1");
        local.name = "local".into();
        local.defer_mode = DeferMode::SystemTools;
        let notice = model_switch_notice(DeferMode::Normal, &local).unwrap();
        assert!(notice.contains("keeps defer mode \"normal\""), "{notice}");
        assert!(
            notice.contains("\"system-tools\" applies to new sessions"),
            "{notice}"
        );
        let refused = model_switch_notice(DeferMode::Reference, &local).unwrap_err();
        assert!(refused.contains("needs provider anthropic"), "{refused}");
        assert!(
            model_switch_notice(DeferMode::Reference, &claude)
                .unwrap()
                .ends_with("keeps defer mode \"reference\"")
        );
    }

    #[test]
    fn the_system_section_is_stable_and_lists_every_deferred_tool() {
        let servers = vec![("fx".to_owned(), "Echo things".to_owned())];
        let specs = vec![(
            "fx".to_owned(),
            ToolSpec {
                name: "mcp__fx__echo".into(),
                description: "Returns the text it is given.\nSecond line.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "text": {"type": "string"}, "n": {"type": "integer"}}, "required": ["text"]}),
            },
        )];
        let section = system_tools_section(&servers, &specs);
        assert_eq!(section, system_tools_section(&servers, &specs));
        assert!(section.starts_with("<deferred_tools>\n"), "{section}");
        assert!(section.contains("Server fx: Echo things\n"), "{section}");
        assert!(section.contains("- mcp__fx__echo("), "{section}");
        assert!(section.contains("text"), "{section}");
        assert!(section.contains("n?"), "{section}");
        assert!(section.ends_with("</deferred_tools>"), "{section}");
    }
}
