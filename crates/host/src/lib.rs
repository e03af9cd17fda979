//! Session assembly shared by every warden surface: loads the config's servers into the MCP
//! runtime and puts the one gate in front of them.

mod catalog;
mod code_tools;
mod dispatch;
mod index;
mod policy;
mod sampling;
mod search;
mod servers;
mod skills;
mod specs;
mod tools;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sampling::GatedSampler;
use crate::skills::SkillGatedCatalog;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadedConfig, Paths, TrustStore, VarContext};
use warden_hooks::HookRunner;
use warden_mcp::{ArtifactStore, RetentionPolicy, apply_retention};
use warden_mcp::{McpError, McpRuntime, McpTool, RuntimeOptions, ServerSpec};
use warden_policy::{
    Approver, AuditOptions, AuditSink, AuditStore, CallRequest, CallSurface, Gate, GateOutcome,
    GateParts, GatePolicy, NoApprover, ProgressSender, ToolDescriptor,
};
/// What an embedding application implements to decide calls on its own terms.
pub use warden_policy::{
    AuthorizationError, AuthorizationHandler, AuthorizationQuestion, AuthorizationVerdict,
    CapabilityClass,
};

pub use catalog::{HostTools, SessionCatalog, SessionDispatcher, host_tool_descriptor};
pub use code_tools::{CodeTool, CodeToolCall, CodeToolDefinitionError, CodeToolError};
pub use dispatch::{CallRelay, McpDispatcher, RelayRequest, RelayedAnswer, with_relay};
pub use index::{ServerFacts, ToolIndex};
pub use policy::{HookSettingsError, gate_policy, hook_runner};
pub use sampling::{
    SAMPLING_TOOL, SamplingAnswerer, SamplingArguments, SamplingResult, SamplingRoute,
    SamplingTurn, sampling_tool,
};
pub use search::{
    CALL_TOOL, CallToolArguments, DEFAULT_SEARCH_LIMIT, DESCRIBE_TOOL, DescribeToolArguments,
    MAX_SEARCH_LIMIT, SEARCH_TOOLS, SearchArguments, SearchScope, ToolSearch, instructions_summary,
    search_limit, search_schema,
};
pub use servers::{Servers, UngatedRelay};
pub use skills::{
    GrantOutcome, LoadedRemoteSkill, RemoteSkills, RemoteSkillsError, RemoteSkillsSettings,
    ServerSkills, fetch_skill_file, fetch_skill_md, register_server_skills, render_loaded,
};
pub use specs::{LoginRefusal, login_settings, oauth_settings, server_spec};
pub use tools::{
    GET_PROMPT, HostTool, Invocation, LIST_PROMPTS, LIST_RESOURCES, READ_RESOURCE, prompt_messages,
    resource_tools,
};

/// A configured server that this session will not start, and why (shown by listings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleServer {
    pub name: String,
    pub reason: String,
}

/// Everything a surface decides before the session opens.
pub struct HostOptions {
    pub paths: Paths,
    /// The workspace folder (the current directory): project config, roots, `${workspaceFolder}`.
    pub workspace: PathBuf,
    /// The operator's policy for this session (config plus command-line flags).
    pub policy: GatePolicy,
    /// Who answers approvals; `None` is headless: a call that needs approval is denied.
    pub approver: Option<Arc<dyn Approver>>,
    /// Operator hooks (user config only).
    pub hooks: HookRunner,
    /// Ad-hoc servers for this session only (`--mcp`), trusted as the operator's own.
    pub extra_servers: Vec<ServerSpec>,
    /// Resume an existing session id instead of creating one.
    pub session_id: Option<String>,
    /// Tools implemented in code that this surface offers: the agent's built-ins, and an
    /// embedding application's [`CodeTool`]s (an agent session keeps the application's and adds
    /// its own; a built-in of the same name wins).
    pub tools: Vec<Arc<dyn HostTool>>,
    /// The embedding application's authorization handler, asked about every call once its
    /// arguments are valid; `None` allows every call the operator's policy admits.
    pub authorization: Option<Arc<dyn AuthorizationHandler>>,
    /// Skills from MCP servers (the surface may hold a clone for its skill tools); a default
    /// one when `None`.
    pub remote_skills: Option<Arc<RemoteSkills>>,
    /// More folders of local skills for this session, after the standard ones (a service
    /// tenant's skills).
    pub skill_roots: Vec<warden_skills::SkillRoot>,
    /// Advertise the SEP-2640 skills extension at connection.
    pub skills_extension: bool,
    /// An interactive frontend's elicitation handler; servers are offered elicitation only
    /// when one is installed.
    pub elicitation: Option<Arc<dyn warden_mcp::ElicitationHandler>>,
    /// Who the session's calls belong to when their surface names nobody (the service's tenant
    /// and the caller whose key started the run).
    pub principal: SessionPrincipal,
    /// Who answers sampling requests of servers whose entry has `sampling = true`.
    pub sampling: SamplingRoute,
    /// Which protocol lifecycle to speak to the servers (default: probe 2026-07-28, fall back).
    pub protocol: warden_mcp::ProtocolMode,
    /// The session's artifact store when the surface made it first (its built-in tools spill
    /// into it too); its root is `STATE/artifacts/<session id>`. `None`: the host makes it.
    pub artifacts: Option<ArtifactStore>,
    /// Where the gate's audit goes; `None`: `STATE/audit.db` (SQLite). `warden service` on
    /// PostgreSQL gives the database every instance shares.
    pub audit: Option<Arc<dyn AuditSink>>,
    /// An agent session's defer mode (`None`: no agent, e.g. the command line): how an
    /// "unknown tool" answer tells the caller to reach a deferred server's tools.
    pub defer_mode: Option<warden_config::DeferMode>,
    /// Where an agent profile's collections are looked up, in order (a service tenant's own
    /// first — a file, or its collections on PostgreSQL — then the operator's
    /// `STATE/knowledge.db`).
    pub knowledge: Vec<warden_knowledge::KnowledgePlace>,
}

impl HostOptions {
    /// Headless defaults: the config's servers, the default policy, nobody to ask, no hooks.
    pub fn new(paths: Paths, workspace: PathBuf) -> Self {
        Self {
            knowledge: vec![warden_knowledge::KnowledgePlace::File(
                paths.state_dir().join("knowledge.db"),
            )],
            paths,
            workspace,
            policy: GatePolicy::default(),
            approver: None,
            hooks: HookRunner::new(Vec::new()),
            extra_servers: Vec::new(),
            session_id: None,
            tools: Vec::new(),
            authorization: None,
            remote_skills: None,
            skill_roots: Vec::new(),
            skills_extension: false,
            elicitation: None,
            principal: SessionPrincipal::default(),
            sampling: SamplingRoute::Declined,
            protocol: warden_mcp::ProtocolMode::Auto,
            defer_mode: None,
            artifacts: None,
            audit: None,
        }
    }
}

/// Why a prompt could not be had: the gate's reason (a denial, an unknown prompt, a missing
/// argument, a server that is down), as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PromptRefused(pub String);

/// Why a session could not open.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("reading trusted project servers: {0}")]
    Trust(#[from] warden_config::TrustError),
}

/// One session: the runtime with every startable server registered (nothing spawned yet),
/// the tool index, and the gate every call goes through.
pub struct Host {
    session_id: String,
    runtime: McpRuntime,
    index: Arc<ToolIndex>,
    host_tools: Arc<HostTools>,
    gate: Arc<Gate>,
    /// The audit trail the gate writes (also where a skill script's intent is recorded).
    audit: Arc<dyn AuditSink>,
    hooks: HookRunner,
    idle: Vec<IdleServer>,
    remote_skills: Arc<RemoteSkills>,
    principal: SessionPrincipal,
    /// Naming warnings (duplicate or colliding tool names) per server, each kept once.
    naming_warnings: std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>,
    /// Servers deferred automatically this session (server → generated summary).
    auto_deferred: std::sync::RwLock<std::collections::BTreeMap<String, String>>,
}

impl Host {
    /// Registers the config's servers (trusted, enabled, variables expanded) with a new runtime.
    /// Servers that cannot start are kept as [`IdleServer`]s with their reason.
    pub fn open(config: &LoadedConfig, mut options: HostOptions) -> Result<Arc<Self>, HostError> {
        let session_id = options.session_id.clone().unwrap_or_else(new_session_id);
        // The servers: the config's that may start and the ad-hoc ones; the others idle.
        let oauth_context =
            warden_oauth::OAuthContext::from_config(options.paths.state_dir(), config);
        let trust = TrustStore::open(&options.paths)?;
        let vars = VarContext::from_process(&options.workspace);
        let mut servers = ConfiguredServers::from_config(config, &trust, &vars, &oauth_context);
        servers.add_extra(std::mem::take(&mut options.extra_servers));
        servers.widen_backstop(&options.policy);
        // The session's artifact store, and the runtime's options.
        let state_dir = options.paths.state_dir();
        let artifacts = options
            .artifacts
            .clone()
            .unwrap_or_else(|| ArtifactStore::new(session_artifacts_dir(state_dir, &session_id)));
        let mut runtime_options = runtime_options(&options, &artifacts, &session_id);
        settle_artifacts(state_dir, &artifacts, options.session_id.is_some());
        // Built around its own weak handle: host tools get the host with each call, and gated
        // sampling calls back into it.
        Ok(Arc::new_cyclic(|host: &Weak<Host>| {
            runtime_options.sampling = sampling_handler(&options.sampling, host);
            let ConfiguredServers { specs, facts, idle } = servers;
            let runtime = McpRuntime::new(specs, runtime_options);
            let index = Arc::new(ToolIndex::new(facts).with_defer_mode(options.defer_mode));
            let host_tools = session_host_tools(options.tools, &runtime, &artifacts);
            let audit = options.audit.unwrap_or_else(|| {
                let options = AuditOptions {
                    sync: options.policy.audit_sync,
                    ..AuditOptions::default()
                };
                Arc::new(AuditStore::open_lazily_with(
                    &state_dir.join("audit.db"),
                    options,
                )) as Arc<dyn AuditSink>
            });
            let remote_skills = options.remote_skills.unwrap_or_else(|| {
                Arc::new(RemoteSkills::new(RemoteSkillsSettings {
                    extension_enabled: options.skills_extension,
                    grants_path: Some(warden_skills::GrantStore::path_in(state_dir)),
                    reserved: Default::default(),
                }))
            });
            let approver = options
                .approver
                .unwrap_or_else(|| Arc::new(NoApprover) as Arc<dyn Approver>);
            let gate = Gate::new(GateParts {
                catalog: Arc::new(SkillGatedCatalog {
                    inner: SessionCatalog {
                        host_tools: host_tools.clone(),
                        index: index.clone(),
                    },
                    skills: remote_skills.clone(),
                }),
                dispatcher: Arc::new(SessionDispatcher {
                    host_tools: host_tools.clone(),
                    mcp: McpDispatcher::new(runtime.clone(), artifacts),
                    host: host.clone(),
                }),
                approver: approver.clone(),
                audit: audit.clone(),
                hooks: options.hooks.clone(),
                policy: options.policy,
                cwd: options.workspace,
            });
            let gate = Arc::new(match options.authorization {
                Some(handler) => gate.with_authorization(handler),
                None => gate,
            });
            remote_skills.bind(
                runtime.clone(),
                session_id.clone(),
                options.principal.clone(),
                &gate,
                approver,
                audit.clone(),
            );
            Self {
                session_id,
                runtime,
                index,
                host_tools,
                gate,
                audit,
                hooks: options.hooks,
                idle,
                remote_skills,
                principal: options.principal,
                naming_warnings: Default::default(),
                auto_deferred: Default::default(),
            }
        }))
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The identity of the tool `public_name` resolves to in this session, if any.
    pub fn tool_identity(&self, public_name: &str) -> Option<warden_policy::ToolIdentity> {
        match self.host_tools.get(public_name) {
            Some(tool) => Some(warden_policy::ToolIdentity::host(
                tool.source(),
                tool.name(),
            )),
            None => self
                .index
                .descriptor(public_name)
                .map(|descriptor| descriptor.identity),
        }
    }

    /// The session's audit trail.
    pub fn audit(&self) -> Arc<dyn warden_policy::AuditSink> {
        self.audit.clone()
    }

    /// `descriptor` as the gate governs it: the operator's `[tool_settings]` applied (approval,
    /// timeout, classes), nothing called.
    pub fn governed(&self, descriptor: ToolDescriptor) -> ToolDescriptor {
        self.gate.governed(descriptor)
    }

    /// Allows `identities` for the rest of this session without asking (the answers "allow for
    /// this session" a person gave in an earlier run of the same session). The gate's other
    /// layers still apply to every call.
    pub fn allow_for_session(
        &self,
        identities: impl IntoIterator<Item = warden_policy::ToolIdentity>,
    ) {
        self.gate
            .remember_for_session(self.session_id(), identities);
    }

    /// Skills published by this session's MCP servers.
    pub fn remote_skills(&self) -> &Arc<RemoteSkills> {
        &self.remote_skills
    }

    /// The operator's hooks, for the session events a surface runs itself (SessionStart,
    /// UserPromptSubmit, Stop, SessionEnd); the gate runs the tool events.
    pub fn hooks(&self) -> &HookRunner {
        &self.hooks
    }

    /// Runs the hooks of a session event; the verdict of UserPromptSubmit may block.
    pub async fn session_event(
        &self,
        event: warden_hooks::HookEvent,
        cwd: &std::path::Path,
        prompt: Option<String>,
    ) -> warden_hooks::HookVerdict {
        let mut input =
            warden_hooks::HookInput::session_event(event, &self.session_id, cwd.to_path_buf());
        input.prompt = prompt;
        input.tenant = self.principal.tenant.clone();
        input.caller = self.principal.caller.clone();
        self.hooks.run(&input).await
    }

    /// Configured servers this session does not start, with the reason.
    pub fn idle_servers(&self) -> &[IdleServer] {
        &self.idle
    }

    /// Fetches one server's tools (connecting it if needed) and records them in the index.
    /// Returns the tools the gate would show, with their public names.
    pub async fn server_tools(&self, server: &str) -> Result<Vec<VisibleTool>, McpError> {
        let tools = self.runtime.server_tools(server).await?;
        self.remote_skills.refresh_server(server).await;
        Ok(self.admit(server, &tools))
    }

    /// Fetches the tools of every non-deferred server in parallel.
    pub async fn all_tools(&self) -> (Vec<VisibleTool>, Vec<McpError>) {
        let set = self.runtime.tools().await;
        self.remote_skills.refresh().await;
        let mut by_server: std::collections::BTreeMap<String, Vec<McpTool>> = Default::default();
        for tool in set.tools {
            by_server
                .entry(tool.identity.server.clone())
                .or_default()
                .push(tool);
        }
        let mut visible = Vec::new();
        for (server, tools) in &by_server {
            visible.extend(self.admit(server, tools));
        }
        (visible, set.failures)
    }

    fn admit(&self, server: &str, tools: &[McpTool]) -> Vec<VisibleTool> {
        let warnings = self.index.record(server, tools);
        self.note_naming_warnings(server, warnings);
        self.shown(tools)
    }

    /// Logs and keeps naming warnings not seen before (a refetch names the same ones again).
    fn note_naming_warnings(&self, server: &str, warnings: Vec<warden_mcp::NameWarning>) {
        let mut kept = self
            .naming_warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let known = kept.entry(server.to_owned()).or_default();
        for warning in warnings {
            let line = warning.to_string();
            if !known.contains(&line) {
                tracing::warn!("{line}");
                known.push(line);
            }
        }
    }

    /// What went wrong while listing `server`'s catalogue, one line each, `MCP <server>: …`:
    /// tool names that were duplicated or collided, a listing stopped at the page limit, a
    /// refresh after `list_changed` that failed. Empty for a server never listed.
    pub fn catalog_warnings(&self, server: &str) -> Vec<String> {
        let mut lines = self
            .naming_warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(server)
            .cloned()
            .unwrap_or_default();
        if let Ok(status) = self.runtime.server_status(server) {
            lines.extend(
                status
                    .warnings
                    .into_iter()
                    .map(|warning| format!("MCP {server}: {warning}")),
            );
        }
        lines
    }

    /// Those of `tools` the index knows and the gate would show, with their descriptors.
    fn shown(&self, tools: &[McpTool]) -> Vec<VisibleTool> {
        tools
            .iter()
            .filter(|tool| {
                !self
                    .remote_skills
                    .hides(&tool.identity.server, &tool.identity.tool)
            })
            .filter_map(|tool| {
                let public_name = self
                    .index
                    .public_name(&tool.identity.server, &tool.identity.tool)?;
                let descriptor = self.index.descriptor(&public_name)?;
                self.gate.visible(&descriptor).then(|| VisibleTool {
                    tool: tool.clone(),
                    descriptor,
                })
            })
            .collect()
    }

    /// The host tools the gate would show: the surface's own tools, and the resource tools when
    /// a connected server advertises resources.
    pub fn host_tools(&self) -> Vec<ToolDescriptor> {
        let any_resources = self
            .runtime
            .status()
            .iter()
            .any(|status| status.counts.resources.unwrap_or(0) > 0);
        self.host_tools
            .values()
            .filter(|tool| any_resources || ![LIST_RESOURCES, READ_RESOURCE].contains(&tool.name()))
            .filter(|tool| tool.offered())
            .map(|tool| host_tool_descriptor(tool.as_ref()))
            .filter(|descriptor| self.gate.visible(descriptor))
            .collect()
    }

    /// The description of a host tool, for the model's tool list.
    pub fn host_tool_description(&self, name: &str) -> Option<String> {
        self.host_tools
            .get(name)
            .map(|tool| tool.description().to_owned())
    }

    /// Defers a server for the rest of the session (automatic deferral: its tools were fetched
    /// but are too many to offer outright); `summary` is what the model sees of it.
    pub fn defer_server(&self, server: &str, summary: String) {
        self.index.mark_deferred(server);
        if let Ok(mut deferred) = self.auto_deferred.write() {
            deferred.insert(server.to_owned(), summary);
        }
    }

    /// Every deferred server with its one-line summary, configured (`defer`) or automatic,
    /// sorted by name.
    pub fn deferred_servers(&self) -> Vec<(String, String)> {
        let mut servers: std::collections::BTreeMap<String, String> = self
            .runtime
            .status()
            .into_iter()
            .filter_map(|status| status.deferred.map(|summary| (status.name, summary)))
            .collect();
        if let Ok(automatic) = self.auto_deferred.read() {
            servers.extend(automatic.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        servers.into_iter().collect()
    }

    /// The tools of every deferred server (connecting them), named but not callable, each with
    /// its public name: what a deferred-tool search ranks. Only tools the gate would show are
    /// among them (not one the policy could never admit, nor one a skill still hides), so a
    /// search never names what a call would refuse. Failures come back beside them.
    pub async fn deferred_tools(&self) -> (Vec<(McpTool, String)>, Vec<McpError>) {
        let deferred: Vec<String> = self
            .deferred_servers()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let fetched = futures::future::join_all(
            deferred
                .iter()
                .map(|server| async move { self.runtime.server_tools(server).await }),
        )
        .await;
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        for result in fetched {
            match result {
                Ok(server_tools) => {
                    self.index.name_only(&server_tools);
                    for tool in server_tools {
                        let Some(name) = self
                            .index
                            .public_name(&tool.identity.server, &tool.identity.tool)
                        else {
                            continue;
                        };
                        let hidden = self
                            .remote_skills
                            .hides(&tool.identity.server, &tool.identity.tool);
                        let admissible = self
                            .index
                            .describe_unpublished(&name, &tool)
                            .is_some_and(|descriptor| self.gate.visible(&descriptor));
                        if admissible && !hidden {
                            tools.push((tool, name));
                        }
                    }
                }
                Err(failure) => failures.push(failure),
            }
        }
        (tools, failures)
    }

    /// Makes these tools of a deferred server callable for the rest of the session and returns
    /// the ones the gate shows.
    pub fn load_tools(&self, server: &str, tools: &[McpTool]) -> Vec<VisibleTool> {
        let warnings = self.index.load(server, tools);
        self.note_naming_warnings(server, warnings);
        self.shown(tools)
    }

    /// Loads the deferred tool with this exact public name (a model that calls it without a
    /// search first): makes it callable and returns it as the gate shows it; `None` when no
    /// deferred server has a tool of that name.
    pub async fn load_deferred(&self, public_name: &str) -> Option<VisibleTool> {
        let (tools, _) = self.deferred_tools().await;
        let (tool, _) = tools.into_iter().find(|(_, name)| name == public_name)?;
        let server = tool.identity.server.clone();
        self.load_tools(&server, &[tool]).into_iter().next()
    }

    /// The public name of a raw identity whose catalogue was fetched this session.
    pub fn public_name(&self, server: &str, tool: &str) -> Option<String> {
        self.index.public_name(server, tool)
    }

    /// Gets prompt `name` of `server` through the gate (tool `get_mcp_prompt`, audited with
    /// source `prompt-get` and the context's caller): how every surface gets a prompt the user
    /// chose.
    pub async fn get_prompt(
        &self,
        context: CallContext,
        server: &str,
        name: &str,
        arguments: std::collections::BTreeMap<String, String>,
    ) -> Result<rmcp::model::GetPromptResult, PromptRefused> {
        let outcome = self
            .call_with(
                context,
                GET_PROMPT,
                serde_json::json!({ "server": server, "name": name, "arguments": arguments }),
            )
            .await;
        if outcome.is_error() {
            return Err(PromptRefused(outcome.model_text()));
        }
        let content = outcome
            .output
            .and_then(|output| output.content)
            .ok_or_else(|| PromptRefused("the prompt came back empty".to_owned()))?;
        serde_json::from_value(content)
            .map_err(|error| PromptRefused(format!("reading the prompt: {error}")))
    }

    /// The prompts `server` offers, listed through the gate (tool `list_mcp_prompts`, audited
    /// with the context's caller): how a frontend shows a person the prompts to pick from, so a
    /// deny rule on the server covers its prompts too.
    pub async fn list_prompts(
        &self,
        context: CallContext,
        server: &str,
    ) -> Result<Vec<rmcp::model::Prompt>, PromptRefused> {
        let outcome = self
            .call_with(
                context,
                LIST_PROMPTS,
                serde_json::json!({ "server": server }),
            )
            .await;
        if outcome.is_error() {
            return Err(PromptRefused(outcome.model_text()));
        }
        let prompts = outcome
            .output
            .and_then(|output| output.content)
            .and_then(|mut content| content.get_mut("prompts").map(Value::take))
            .ok_or_else(|| PromptRefused("the prompt listing came back empty".to_owned()))?;
        serde_json::from_value(prompts)
            .map_err(|error| PromptRefused(format!("reading the prompt listing: {error}")))
    }

    /// Sends one call through the gate: the only way any surface reaches a tool.
    pub async fn call(
        &self,
        source: CallSurface,
        public_name: &str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> GateOutcome {
        self.call_with(CallContext::new(source, cancel), public_name, arguments)
            .await
    }

    /// [`Host::call`] with everything a surface may attach: caller identity, progress channel.
    pub async fn call_with(
        &self,
        context: CallContext,
        public_name: &str,
        arguments: Value,
    ) -> GateOutcome {
        // A host tool that reaches a single MCP server names it as the call's server.
        let subject_server = self
            .host_tools
            .get(public_name)
            .and_then(|tool| tool.subject_server(&arguments));
        self.gate
            .call(CallRequest {
                session_id: self.session_id.clone(),
                surface: context.surface,
                approval_scope: context.approval_scope,
                caller: context.caller.or_else(|| self.principal.caller.clone()),
                tenant: context.tenant.or_else(|| self.principal.tenant.clone()),
                public_name: public_name.to_owned(),
                arguments,
                cancel: context.cancel,
                progress: context.progress,
                subject_server,
                approval_watch: context.approval_watch,
            })
            .await
    }

    /// Stops every server this session started (children and their process groups).
    pub async fn shutdown(&self) {
        self.gate.end_session(&self.session_id);
        self.runtime.shutdown().await;
    }
}

/// The servers a session registers: the specs of those that start, what the tool index knows of
/// each, and those kept idle with why.
struct ConfiguredServers {
    specs: Vec<ServerSpec>,
    facts: HashMap<String, ServerFacts>,
    idle: Vec<IdleServer>,
}

impl ConfiguredServers {
    /// The config's servers: a disabled one, one not trusted and one whose entry cannot be
    /// expanded stay idle, with why.
    fn from_config(
        config: &LoadedConfig,
        trust: &TrustStore,
        vars: &VarContext,
        oauth_context: &warden_oauth::OAuthContext,
    ) -> Self {
        let mut specs = Vec::new();
        let mut facts = HashMap::new();
        let mut idle = Vec::new();
        for entry in config.servers.values() {
            if !entry.enabled {
                idle.push(IdleServer {
                    name: entry.name.clone(),
                    reason: "disabled in the config (enabled = false)".to_owned(),
                });
                continue;
            }
            if let Some(reason) = trust.state(entry).idle_reason(&entry.name) {
                idle.push(IdleServer {
                    name: entry.name.clone(),
                    reason,
                });
                continue;
            }
            match server_spec(entry, vars, oauth_context) {
                Ok(spec) => {
                    facts.insert(entry.name.clone(), ServerFacts::from_entry(entry));
                    specs.push(spec);
                }
                Err(error) => idle.push(IdleServer {
                    name: entry.name.clone(),
                    reason: error.to_string(),
                }),
            }
        }
        Self { specs, facts, idle }
    }

    /// Adds the session's ad-hoc servers (`--mcp`), each in place of a configured server of its
    /// name.
    fn add_extra(&mut self, extra: Vec<ServerSpec>) {
        for spec in extra {
            self.facts
                .insert(spec.name.clone(), ServerFacts::ad_hoc(spec.tool_timeout));
            self.specs.retain(|existing| existing.name != spec.name);
            self.specs.push(spec);
        }
    }

    /// The gate times each call (a `[tool_settings]` timeout replaces the server's); the
    /// runtime's own deadline is a backstop behind it, so it must not end a call the settings
    /// give longer.
    fn widen_backstop(&mut self, policy: &GatePolicy) {
        if let Some(longest) = policy
            .tool_settings
            .iter()
            .filter_map(|rule| rule.settings.timeout)
            .max()
        {
            for spec in &mut self.specs {
                spec.tool_timeout = spec.tool_timeout.max(longest);
            }
        }
    }
}

/// The MCP runtime's options for the session (its sampling handler is set once the host exists).
fn runtime_options(
    options: &HostOptions,
    artifacts: &ArtifactStore,
    session_id: &str,
) -> RuntimeOptions {
    let mut runtime_options = RuntimeOptions::new(options.workspace.clone());
    runtime_options.artifacts_dir = artifacts.root().to_path_buf();
    runtime_options.session_id = session_id.to_owned();
    runtime_options.client_version = env!("CARGO_PKG_VERSION").to_owned();
    runtime_options.skills_extension = options.skills_extension;
    runtime_options.elicitation = options.elicitation.clone();
    runtime_options.protocol = options.protocol;
    runtime_options
}

/// Artifact retention, before this session writes its first artifact; a resumed session then
/// shields its earlier artifacts from other sessions' retention (a new session takes its
/// folder's lock with its first artifact).
fn settle_artifacts(state_dir: &std::path::Path, artifacts: &ArtifactStore, resumed: bool) {
    let retention = apply_retention(&state_dir.join("artifacts"), RetentionPolicy::default());
    for problem in &retention.problems {
        tracing::warn!("artifact retention: {problem}");
    }
    if resumed
        && artifacts.root().is_dir()
        && let Err(error) = artifacts.hold_session_lock()
    {
        tracing::warn!("artifacts: {error}");
    }
}

/// Who answers the servers' sampling requests: nobody, or the gate of `host`.
fn sampling_handler(
    route: &SamplingRoute,
    host: &Weak<Host>,
) -> Option<Arc<dyn warden_mcp::SamplingHandler>> {
    match route {
        SamplingRoute::Declined => None,
        SamplingRoute::ThroughGate => {
            Some(Arc::new(GatedSampler { host: host.clone() })
                as Arc<dyn warden_mcp::SamplingHandler>)
        }
    }
}

/// The session's tools implemented in code, by name: the surface's, then the resource tools.
fn session_host_tools(
    tools: Vec<Arc<dyn HostTool>>,
    runtime: &McpRuntime,
    artifacts: &ArtifactStore,
) -> Arc<HostTools> {
    let mut host_tools = HostTools::new();
    for tool in tools.into_iter().chain(resource_tools(runtime, artifacts)) {
        host_tools.insert(tool.name().to_owned(), tool);
    }
    Arc::new(host_tools)
}

/// Who a session's calls belong to when their surface names nobody: the authorization handler,
/// the external authorizer and the audit see them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPrincipal {
    pub tenant: Option<String>,
    pub caller: Option<String>,
}

/// Who makes a call and what they attach to it.
pub struct CallContext {
    pub surface: CallSurface,
    /// Who within the surface (a gateway client, a script), if known.
    pub caller: Option<String>,
    /// The tenant the call belongs to, when the surface knows one (the service fills it); the
    /// authorization handler sees it.
    pub tenant: Option<String>,
    /// Where approvals "for this session" and skill grants are remembered: a serve client's
    /// connection. `None`: the session.
    pub approval_scope: Option<String>,
    pub cancel: CancellationToken,
    /// Where progress notifications go.
    pub progress: Option<ProgressSender>,
    /// Told when the gate asks a person about the call and when the answer comes.
    pub approval_watch: Option<warden_policy::ApprovalWatcher>,
}

impl CallContext {
    pub fn new(surface: CallSurface, cancel: CancellationToken) -> Self {
        Self {
            surface,
            caller: None,
            tenant: None,
            approval_scope: None,
            cancel,
            progress: None,
            approval_watch: None,
        }
    }
}

/// A tool as a surface lists it: the server's definition and the gate's descriptor.
#[derive(Debug, Clone)]
pub struct VisibleTool {
    pub tool: McpTool,
    pub descriptor: ToolDescriptor,
}

/// A new session id: sortable by time, unique per process.
/// Where a session's artifacts live: `STATE/artifacts/<session id>`.
pub fn session_artifacts_dir(state_dir: &std::path::Path, session_id: &str) -> PathBuf {
    state_dir.join("artifacts").join(session_id)
}

pub fn new_session_id() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let nanos = now.subsec_nanos();
    format!(
        "{}-{:08x}{:04x}",
        now.as_secs(),
        nanos ^ std::process::id().rotate_left(16),
        std::process::id() & 0xffff
    )
}
