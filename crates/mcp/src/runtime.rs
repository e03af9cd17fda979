//! `McpRuntime`: the registry of supervised servers and the one API the rest of warden uses.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{GetPromptResult, Prompt, ReadResourceResult, ResourceTemplate};
use serde_json::{Map, Value};

use crate::catalog::{Catalog, McpTool, ResourceRow, ToolIdentity, ToolSet, uri_matches_template};
use crate::client::ElicitationHandler;
use crate::error::{FailureKind, McpError};
use crate::server::{CallOptions, CallOutcome, ServerSlot, ServerState, ServerStatus};
use crate::spec::ServerSpec;

/// Counters of one server's connection and of its resources and prompts `list_changed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListEpochs {
    pub connection: u64,
    pub resources: u64,
    pub prompts: u64,
}

/// Counters of one server's connection and of its tools `list_changed`: a tool list read under
/// older counters may be out of date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolListEpoch {
    pub connection: u64,
    pub tools: u64,
}

/// Which protocol lifecycle to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProtocolMode {
    /// Probe 2026-07-28 (`server/discover`), fall back to the 2025-11-25 `initialize` handshake.
    #[default]
    Auto,
    /// Only the 2025-11-25 `initialize` handshake.
    Legacy,
    /// Only 2026-07-28 (`server/discover`, per-request metadata).
    Stateless,
}

/// Session-wide settings of the runtime.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// The workspace folder: the default cwd of stdio servers and the one root offered to servers.
    pub workspace_root: PathBuf,
    /// Where this session's artifacts go (`…/artifacts/<session>`).
    pub artifacts_dir: PathBuf,
    pub session_id: String,
    pub client_name: String,
    pub client_version: String,
    pub protocol: ProtocolMode,
    /// An interactive frontend; elicitation is advertised only when present.
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// Log in from inside a connection when an OAuth server answers 401 (and step up on a 403
    /// `insufficient_scope`), getting the redirect back this way. `None` (the default): a 401
    /// leaves the server in "needs login" and `warden mcp login NAME` is the cure.
    pub inline_login: Option<warden_oauth::RedirectMode>,
    /// Advertise the SEP-2640 skills extension (`io.modelcontextprotocol/skills`) at connection:
    /// only when the operator enabled it (`--mcp-skills-extension`, `[experimental]
    /// skills_extension = true`).
    pub skills_extension: bool,
    /// Bounds on SSE responses (events per stream, total bytes).
    pub sse_limits: crate::guard::SseLimits,
    /// Answers `sampling/createMessage` for servers whose spec enables sampling; without one,
    /// every sampling request is declined.
    pub sampling: Option<Arc<dyn crate::client::SamplingHandler>>,
    /// Where every connection of this runtime reports its server's log messages, resource
    /// updates and catalogue changes (see [`crate::upstream`]).
    pub events: crate::upstream::UpstreamEvents,
}

impl RuntimeOptions {
    /// Defaults for `workspace_root`: artifacts under its `.warden/artifacts`, client `warden`.
    pub fn new(workspace_root: impl Into<PathBuf>) -> Self {
        let workspace_root = workspace_root.into();
        Self {
            artifacts_dir: workspace_root.join(".warden").join("artifacts"),
            workspace_root,
            session_id: "session".to_owned(),
            client_name: "warden".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol: ProtocolMode::Auto,
            elicitation: None,
            inline_login: None,
            skills_extension: false,
            sse_limits: crate::guard::SseLimits::default(),
            sampling: None,
            events: crate::upstream::UpstreamEvents::default(),
        }
    }
}

impl fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("workspace_root", &self.workspace_root)
            .field("artifacts_dir", &self.artifacts_dir)
            .field("session_id", &self.session_id)
            .field("client_name", &self.client_name)
            .field("client_version", &self.client_version)
            .field("protocol", &self.protocol)
            .field("elicitation", &self.elicitation.is_some())
            .field("inline_login", &self.inline_login)
            .field("sse_limits", &self.sse_limits)
            .field("sampling", &self.sampling.is_some())
            .field("skills_extension", &self.skills_extension)
            .finish()
    }
}

/// The MCP client runtime. Cheap to clone; every clone sees the same servers.
#[derive(Clone)]
pub struct McpRuntime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    options: Arc<RuntimeOptions>,
    servers: BTreeMap<String, Arc<ServerSlot>>,
    order: Vec<String>,
}

impl fmt::Debug for McpRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpRuntime")
            .field("servers", &self.inner.order)
            .field("options", &self.inner.options)
            .finish()
    }
}

impl McpRuntime {
    /// Registers the servers; spawns nothing and opens no socket.
    /// A later spec with the same name replaces an earlier one.
    pub fn new(specs: Vec<ServerSpec>, options: RuntimeOptions) -> Self {
        let options = Arc::new(options);
        let mut servers = BTreeMap::new();
        let mut order = Vec::new();
        for spec in specs {
            if !servers.contains_key(&spec.name) {
                order.push(spec.name.clone());
            }
            servers.insert(spec.name.clone(), ServerSlot::new(spec, options.clone()));
        }
        Self {
            inner: Arc::new(RuntimeInner {
                options,
                servers,
                order,
            }),
        }
    }

    pub fn options(&self) -> &RuntimeOptions {
        &self.inner.options
    }

    /// Configured server names, in configuration order.
    pub fn server_names(&self) -> Vec<String> {
        self.inner.order.clone()
    }

    pub(crate) fn slot(&self, server: &str) -> Result<&Arc<ServerSlot>, McpError> {
        self.inner
            .servers
            .get(server)
            .ok_or_else(|| McpError::unknown_server(server, &self.inner.order))
    }

    fn slots(&self) -> impl Iterator<Item = &Arc<ServerSlot>> {
        self.inner
            .order
            .iter()
            .filter_map(|name| self.inner.servers.get(name))
    }

    /// Connects every `required` server now (in parallel); the first failure stops start-up.
    pub async fn connect_required(&self) -> Result<(), McpError> {
        let required: Vec<_> = self
            .slots()
            .filter(|slot| slot.spec.required)
            .cloned()
            .collect();
        let results = futures::future::join_all(
            required
                .iter()
                .map(|slot| async move { slot.connect_eagerly().await }),
        )
        .await;
        results
            .into_iter()
            .collect::<Result<Vec<()>, McpError>>()
            .map(|_| ())
    }

    /// Connects one server now (even a deferred one); its failure when it cannot.
    pub async fn connect(&self, server: &str) -> Result<(), McpError> {
        self.slot(server)?.connect_eagerly().await
    }

    /// A snapshot of every server, in configuration order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.slots().map(|slot| slot.status()).collect()
    }

    /// A snapshot of one server.
    pub fn server_status(&self, server: &str) -> Result<ServerStatus, McpError> {
        Ok(self.slot(server)?.status())
    }

    /// The protocol revision `server`'s connection speaks (`None` before it first connected):
    /// what [`Self::server_status`] says of it, without building the rest of the snapshot.
    pub fn protocol_revision(&self, server: &str) -> Result<Option<String>, McpError> {
        Ok(self.slot(server)?.protocol_revision())
    }

    /// The instructions `server` gave at initialization (`None` before it connected, or when
    /// it gave none), without building the rest of [`Self::server_status`]'s snapshot.
    pub fn server_instructions(&self, server: &str) -> Result<Option<String>, McpError> {
        Ok(self.slot(server)?.instructions())
    }

    /// Everything one server publishes (connecting it if needed, even when deferred).
    pub async fn catalog(&self, server: &str) -> Result<Catalog, McpError> {
        self.slot(server)?.catalog().await
    }

    /// The filtered tools of one server (connecting it if needed, even when deferred).
    pub async fn server_tools(&self, server: &str) -> Result<Vec<McpTool>, McpError> {
        self.slot(server)?.tools().await
    }

    /// The tools of every non-deferred server, fetched in parallel. A server that fails adds
    /// its failure; a down server keeps its last tools.
    pub async fn tools(&self) -> ToolSet {
        let active: Vec<_> = self
            .slots()
            .filter(|slot| slot.spec.deferred.is_none())
            .cloned()
            .collect();
        let results =
            futures::future::join_all(active.iter().map(|slot| async move { slot.tools().await }))
                .await;
        let mut set = ToolSet::default();
        for (slot, result) in active.iter().zip(results) {
            match result {
                Ok(tools) => {
                    set.tools.extend(tools);
                    // A down server keeps its tools listed; say why it is down.
                    let status = slot.status();
                    if matches!(status.state, ServerState::Down | ServerState::Reconnecting)
                        && let Some(failure) = status.failure
                    {
                        set.warnings.push(failure);
                    }
                }
                Err(failure) => set.failures.push(failure),
            }
            set.warnings.extend(
                slot.warnings()
                    .into_iter()
                    .map(|warning| format!("MCP {}: {warning}", slot.spec.name)),
            );
        }
        set
    }

    /// Calls a tool by its raw identity. The tool must be in the server's discovered, filtered set.
    pub async fn call_tool(
        &self,
        identity: &ToolIdentity,
        arguments: Map<String, Value>,
        options: CallOptions,
    ) -> Result<CallOutcome, McpError> {
        self.slot(&identity.server)?
            .call_tool(&identity.tool, arguments, options)
            .await
    }

    /// Resources of one server, or of every non-deferred server (failures skipped).
    pub async fn resources(&self, server: Option<&str>) -> Result<Vec<ResourceRow>, McpError> {
        let targets: Vec<Arc<ServerSlot>> = match server {
            Some(name) => vec![self.slot(name)?.clone()],
            None => self
                .slots()
                .filter(|slot| slot.spec.deferred.is_none())
                .cloned()
                .collect(),
        };
        let results = futures::future::join_all(
            targets
                .iter()
                .map(|slot| async move { slot.resources().await }),
        )
        .await;
        let mut rows = Vec::new();
        for (slot, result) in targets.iter().zip(results) {
            match result {
                Ok(resources) => rows.extend(resources.into_iter().map(|resource| ResourceRow {
                    server: slot.spec.name.clone(),
                    resource,
                })),
                Err(failure) if server.is_some() => return Err(failure),
                Err(_) => {}
            }
        }
        Ok(rows)
    }

    /// Resource templates of one server.
    pub async fn resource_templates(
        &self,
        server: &str,
    ) -> Result<Vec<ResourceTemplate>, McpError> {
        self.slot(server)?.resource_templates().await
    }

    /// Reads a resource the server advertised (listed, or matching one of its templates).
    /// `skill://` resources are refused: skills have their own path.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<ReadResourceResult, McpError> {
        let slot = self.slot(server)?;
        if uri.to_ascii_lowercase().starts_with("skill://") {
            return Err(McpError::new(
                server,
                FailureKind::NotAdvertised,
                format!("{uri} is a skill resource, which is not readable this way"),
                Some("load skills through the skills tools"),
            ));
        }
        let listed = slot
            .resources()
            .await?
            .iter()
            .any(|resource| resource.uri == uri);
        let templated = !listed
            && slot
                .resource_templates()
                .await
                .unwrap_or_default()
                .iter()
                .any(|template| uri_matches_template(&template.uri_template, uri));
        if !listed && !templated {
            return Err(McpError::new(
                server,
                FailureKind::NotAdvertised,
                format!("does not advertise the resource {uri}"),
                Some("list the server's resources and templates to see what it offers"),
            ));
        }
        slot.read_resource(uri).await
    }

    /// Prompts of one server.
    pub async fn prompts(&self, server: &str) -> Result<Vec<Prompt>, McpError> {
        self.slot(server)?.prompts().await
    }

    /// Gets a prompt; its required arguments are checked before the request.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, McpError> {
        let slot = self.slot(server)?;
        let prompts = slot.prompts().await?;
        let Some(prompt) = prompts.iter().find(|prompt| prompt.name == name) else {
            return Err(McpError::new(
                server,
                FailureKind::UnknownTool,
                format!("offers no prompt named \"{name}\""),
                Some("list the server's prompts to see what it offers"),
            ));
        };
        let missing: Vec<&str> = prompt
            .arguments
            .iter()
            .flatten()
            .filter(|argument| {
                argument.required.unwrap_or(false) && !arguments.contains_key(&argument.name)
            })
            .map(|argument| argument.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(McpError::new(
                server,
                FailureKind::InvalidArguments,
                format!(
                    "prompt \"{name}\" needs the argument(s) {}",
                    missing.join(", ")
                ),
                Some("pass them as key=value"),
            ));
        }
        let arguments: Map<String, Value> = arguments
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect();
        slot.get_prompt(name, arguments).await
    }

    /// The server's declared capabilities as JSON (connecting it if needed).
    pub async fn server_capabilities(&self, server: &str) -> Result<Value, McpError> {
        self.slot(server)?.server_capabilities().await
    }

    /// One raw `skills/list` page (SEP-2640), for the skills layer to validate. Sent only when
    /// the operator enabled the extension and the server declared it.
    pub async fn skills_list_page(
        &self,
        server: &str,
        cursor: Option<&str>,
    ) -> Result<Value, McpError> {
        let slot = self.slot(server)?;
        if !self.inner.options.skills_extension {
            return Err(McpError::new(
                server,
                FailureKind::NotAdvertised,
                "skills/list is not sent: the skills extension is not enabled".to_owned(),
                Some(
                    "enable it with --mcp-skills-extension or [experimental] skills_extension = true",
                ),
            ));
        }
        slot.skills_list_page(cursor).await
    }

    /// Reads a skill file for the skills layer, which has checked that this server published
    /// it and listed this URI (origin-bound reads). No other path reads `skill://` resources.
    pub async fn read_skill_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<ReadResourceResult, McpError> {
        self.slot(server)?.read_resource(uri).await
    }

    /// Counters that move when the server's connection is replaced or it sends a resources or
    /// prompts `list_changed`: a skills registration older than them is re-made.
    pub fn skill_list_epochs(&self, server: &str) -> Result<ListEpochs, McpError> {
        Ok(self.slot(server)?.list_epochs())
    }

    /// Counters that move when the server's connection is replaced or it announces that its
    /// tools changed (bumped when the notification arrives, before the list is refetched).
    pub fn tool_list_epoch(&self, server: &str) -> Result<ToolListEpoch, McpError> {
        Ok(self.slot(server)?.tool_list_epoch())
    }

    /// Drops the server's connection (if any) and connects again now.
    pub async fn reconnect(&self, server: &str) -> Result<(), McpError> {
        self.slot(server)?.reconnect().await
    }

    /// Disconnects the server and keeps it down (state `down`, "stopped by the operator"): its
    /// tools stay listed, and a call to one answers that it was stopped and how to reconnect.
    /// [`Self::reconnect`] or [`Self::restart`] bring it back.
    pub async fn stop(&self, server: &str) -> Result<(), McpError> {
        self.slot(server)?.stop().await
    }

    /// Drops the server's connection and its retained catalogue; it reconnects (and lists
    /// afresh) on the next request, not now. Clears a stop.
    pub async fn restart(&self, server: &str) -> Result<(), McpError> {
        self.slot(server)?.restart().await
    }

    /// Closes every connection and kills every stdio server with its children.
    pub async fn shutdown(&self) {
        futures::future::join_all(
            self.slots()
                .map(|slot| async move { slot.shutdown().await }),
        )
        .await;
    }
}
