//! Assembles an agent session for every frontend (`warden run`, chat, and the surfaces to come):
//! the model, the session host with built-in tools behind the gate, the tool list, the system
//! prompt and the transcript.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use tokio_util::sync::CancellationToken;
use warden_agent::{
    AgentEvent, BuiltinTools, Capability, Events, ModelClient, ModelConfig, PLAN_TOOL, PromptParts,
    SessionStore, ToolCallRequest, ToolCallResult, ToolExecutor, ToolList, ToolRefresh, ToolSpec,
    assemble_system_prompt, builtin_specs, client_for, find_project_instructions, select_model,
};
use warden_config::{AgentProfile, LoadedConfig};
use warden_skills::{Discovery, IndexLimits, SkillIndex, SkillRoots, discover};

use warden_codemode::CodeModeLimits;
use warden_discovery::{Availability, RoutingInputs, execution_routing_section};

use crate::tool_cli::{bridge_listen, settle_tool_cli, with_tool_cli_usage};
use warden_agent::{
    Access, BashConfinement, BashEnv, Placement, ProtectedDefaults, ResourceLimits, SandboxMode,
    Workspace,
};
use warden_bridge::Bridge;
use warden_config::SandboxModeSetting;

use crate::catalog_watch::CatalogWatch;
use crate::code_tools::code_tools;
use crate::deferral::{Deferral, SEARCH_TOOLS, tool_references};
use crate::sampling::SamplingModel;
use crate::skill_scripts::{ScriptQuota, SkillScripts, run_skill_script};
use crate::skill_tools::skill_tools;
use warden_host::{
    CallContext, CodeTool, Host, HostOptions, HostTool, Invocation, SamplingRoute, VisibleTool,
};
use warden_host::{RemoteSkills, RemoteSkillsSettings};
use warden_mcp::ServerSpec;
use warden_policy::{
    BoxFuture, CallReach, CallSurface, CapabilityClass, CapabilitySet, Decision, DispatchError,
    GuardedPath, PathConcern, ToolOutput,
};

/// What [`crate::open_prepared`] hands the session: the operator's and the frontend's choices.
pub(crate) struct SessionRequest<'a> {
    /// The loaded configuration (the frontend folds its flags in first).
    pub config: LoadedConfig,
    /// The host's options as the frontend built them: paths, workspace, the gate's policy and
    /// hooks, the approver, the elicitation handler and ad-hoc servers. The session adds its
    /// tools, skills, sampling and defer mode.
    pub host: HostOptions,
    pub model: Option<&'a str>,
    pub agent: Option<&'a str>,
    /// More workspace roots for the built-in tools (`--add-dir`).
    pub add_dirs: &'a [PathBuf],
    pub resume: Option<&'a str>,
    pub continue_latest: bool,
    /// A service session's own folder (`None`: the frontend's workspace, as for `warden run`).
    pub room: Option<Room>,
}

/// A service session's own folder: its files and its artifacts, and nothing of the host's.
/// A session opened in a room reads no project config, `AGENTS.md` or workspace skills of the
/// service's folder; its built-in host tools are only those its agent profile names
/// (`host_tools`), each confined to the room (paths outside it are refused, never asked about),
/// and `bash` runs sandboxed without network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// The folder (`…/tenants/<tenant>/sessions/<session>/`); made when missing.
    pub dir: PathBuf,
}

impl Room {
    /// The folder the session's tools work in.
    pub fn files(&self) -> PathBuf {
        self.dir.join("files")
    }

    /// The folder its large or binary tool results are saved to.
    pub fn artifacts(&self) -> PathBuf {
        self.dir.join("artifacts")
    }

    /// Makes the room when it is new: an empty `files` folder, or a copy of `template`'s
    /// regular files and folders (links and special files are left out, so nothing in the room
    /// points outside it).
    pub fn prepare(&self, template: Option<&Path>) -> std::io::Result<()> {
        let files = self.files();
        if files.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)?;
        // Made aside and renamed into place: a room is never half-copied.
        let partial = self.dir.join(".files.partial");
        if partial.exists() {
            std::fs::remove_dir_all(&partial)?;
        }
        std::fs::create_dir_all(&partial)?;
        if let Some(template) = template {
            copy_regular_tree(template, &partial, 0)?;
        }
        std::fs::rename(&partial, &files)?;
        std::fs::create_dir_all(self.artifacts())
    }

    /// Removes the room with everything in it (the session was deleted).
    pub fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}

/// Copies the regular files and folders of `from` into `to` (at most 32 levels deep).
fn copy_regular_tree(from: &Path, to: &Path, depth: usize) -> std::io::Result<()> {
    if depth > 32 {
        return Ok(());
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_regular_tree(&entry.path(), &target, depth + 1)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// An open agent session: everything the loop needs.
pub struct AgentSession {
    pub host: Arc<Host>,
    pub model: ModelConfig,
    pub client: Arc<dyn ModelClient>,
    pub store: SessionStore,
    /// The conversation so far (from `--resume`/`--continue`) and the session id to write.
    pub resumed: Option<(String, Vec<warden_agent::Message>)>,
    pub workspace: PathBuf,
    pub read_only: BTreeSet<String>,
    /// The local skills found for this workspace.
    pub skills: Arc<Discovery>,
    /// The `--agent` profile, if any.
    pub profile: Option<AgentProfile>,
    /// The model's tool list; `tool_list` fills it and a deferred-tool search appends to it.
    pub offered: ToolList,
    /// Deferred tools: the session's defer mode (kept across a model switch), automatic
    /// deferral, and how deferred tools reach the model.
    pub deferral: Arc<Deferral>,
    /// The bash tool's environment: inherited `WARDEN_BRIDGE_*` masked, the bridge exported
    /// once its handshake succeeded.
    bash_env: BashEnv,
    /// The session's tool bridge (stopped when the session is dropped), or why it did not start.
    bridge: Result<Bridge, String>,
    /// The tool CLI's availability, settled by the first handshake.
    tool_cli: tokio::sync::OnceCell<Availability>,
    /// The model that answers servers' sampling requests (switched with the session's model).
    pub sampling_model: SamplingModel,
    /// What the session has seen of its servers' tool lists, to offer tools added later.
    catalog_watch: Arc<CatalogWatch>,
    /// What the kernel enforces around the bash tool's commands.
    pub bash_confinement: warden_agent::ConfinementReport,
    /// Opened in a service session's room: no project instructions are read.
    in_room: bool,
}

/// A configuration or usage problem: reported in one line (the binary exits with code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Why an agent session could not open.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The request names something that does not exist or cannot work (exit code 2).
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error("reading the earlier session: {0}")]
    Resume(#[from] warden_agent::SessionError),
    #[error("opening the session: {0}")]
    Host(#[from] warden_host::HostError),
    #[error("preparing the session's folder: {0}")]
    Room(String),
}

impl SessionError {
    /// Whether this is a usage problem (exit code 2) rather than a failure.
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Usage(_))
    }
}

impl AgentSession {
    /// Picks the model and agent profile and opens the session host, with the file tools
    /// reading and writing text through `text_files` (an editor's buffers) when given and `bash`
    /// in an editor's `terminal` when given. Frontends open sessions through a
    /// [`crate::SessionOpener`].
    pub(crate) fn open_with(
        request: SessionRequest<'_>,
        text_files: Option<Arc<dyn warden_agent::TextFiles>>,
        terminal: Option<Arc<dyn warden_agent::CommandTerminal>>,
    ) -> Result<Self, SessionError> {
        let SessionRequest {
            mut config,
            host: mut options,
            room,
            ..
        } = request;
        let paths = options.paths.clone();
        let settings = config.models.clone();
        // The agent profile, and the room it works in (its files become the workspace).
        let profile = agent_profile(&settings, request.agent)?;
        if let Some(room) = &room {
            prepare_room(room, profile, &mut options)?;
        }
        let workspace = options.workspace.clone();
        // The local skills, and what the profile asks of them and of the servers.
        let skills = discover_skills(&paths, &workspace, room.is_some(), &options.skill_roots);
        if let Some(profile) = profile {
            apply_profile(profile, &skills, &mut config)?;
        }
        // The model.
        let model = choose_model(&settings, request.model, profile, &paths)?;
        let client = client_for(model.clone()).map_err(|error| UsageError(error.to_string()))?;
        // The transcript, the session's id and its artifact store.
        let secrets = known_secrets(&config, &model, &workspace);
        let store = SessionStore::new(paths.state_dir().join("sessions"), secrets);
        let resumed = resume(&store, &workspace, request.resume, request.continue_latest)?;
        let session_id = session_id(resumed.as_ref(), &options);
        let artifacts = session_artifacts(room.as_ref(), &paths, &session_id);
        // The built-in tools, and which of them the session is granted.
        let bash_env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let (tool_workspace, confinement) =
            tool_workspace(room.as_ref(), &paths, &workspace, &config, request.add_dirs)?;
        let builtins = builtin_tools(
            tool_workspace,
            confinement,
            &artifacts,
            &bash_env,
            text_files,
            terminal,
        );
        let bash_confinement = builtins.confinement_report();
        let grants = HostToolGrants::new(room.is_some(), profile, &bash_confinement);
        grants.warn_bash_left_out(&bash_confinement);
        // The host tools: the granted built-ins, the skills' tools and scripts, code mode's,
        // the profile's knowledge, the deferred tools' search and sampling.
        let mut host_tools = granted_builtins(&grants, &builtins);
        let remote_skills = remote_skills(&config, &paths, &skills);
        host_tools.extend(skill_host_tools(
            &grants,
            &config,
            &paths,
            &skills,
            &remote_skills,
            &builtins,
        ));
        host_tools.extend(code_tools());
        host_tools.extend(knowledge_tool(profile, &options, &config));
        let offered = ToolList::default();
        let deferral =
            crate::catalog_views::session_deferral(&config, model.defer_mode, offered.clone());
        host_tools.push(deferral.search_tool());
        let sampling_model = SamplingModel::new(client.clone());
        host_tools.push(Arc::new(warden_host::sampling_tool(sampling_model.clone())));
        // The host, with the session's tools behind its gate.
        options.defer_mode = Some(model.defer_mode);
        let options = with_session_tools(options, host_tools, session_id, artifacts, remote_skills);
        let host = Host::open(&config, options)?;
        let bridge = start_bridge(grants.grants("bash"), &config, &paths, &host);
        let catalog_watch = Arc::new(CatalogWatch::new(host.clone(), offered.clone()));
        Ok(Self {
            catalog_watch,
            bash_env,
            bridge,
            tool_cli: tokio::sync::OnceCell::new(),
            host,
            model,
            client,
            store,
            resumed,
            workspace,
            read_only: BTreeSet::new(),
            skills,
            profile: profile.cloned(),
            offered,
            deferral,
            sampling_model,
            bash_confinement,
            in_room: room.is_some(),
        })
    }

    /// Fetches every non-deferred catalogue (in parallel) and returns the model's tool list:
    /// built-in and resource tools first, then `search_tools` or `call_tool` (by defer mode, when
    /// anything is deferred), then MCP tools; large servers are deferred automatically first.
    /// Failures and catalogue warnings (duplicate or colliding names, a listing stopped at the
    /// page limit) come back as one line each.
    pub async fn tool_list(&mut self) -> (ToolList, Vec<String>) {
        // Automatic deferral counts o200k tokens right after the fetch; building that tokenizer
        // takes ~0.2 s of CPU, so build it on a blocking thread while the servers start.
        if self
            .host
            .servers()
            .status()
            .iter()
            .any(|status| status.deferred.is_none())
        {
            tokio::task::spawn_blocking(|| warden_discovery::count_tokens(""));
        }
        let (mcp_tools, failures) = self.host.all_tools().await;
        // Large tool sets are deferred automatically; then the mode settles how deferred tools
        // reach the model (search_tools, call_tool, or definitions with defer_loading).
        let mcp_tools = self.deferral.auto_defer(&self.host, mcp_tools);
        let settled = self.deferral.settle(&self.host).await;
        let mut specs = Vec::new();
        for descriptor in self.host.host_tools() {
            if descriptor.public_name == SEARCH_TOOLS {
                continue;
            }
            if descriptor.classes().is_read_only() {
                self.read_only.insert(descriptor.public_name.clone());
            }
            specs.push(ToolSpec {
                description: self
                    .host
                    .host_tool_description(&descriptor.public_name)
                    .unwrap_or_default(),
                name: descriptor.public_name,
                input_schema: std::sync::Arc::unwrap_or_clone(descriptor.input_schema),
            });
        }
        for extra in settled.extra_tools {
            if extra.name == SEARCH_TOOLS {
                self.read_only.insert(extra.name.clone());
            }
            specs.push(extra);
        }
        for VisibleTool { tool, descriptor } in mcp_tools {
            if descriptor.classes().is_read_only() {
                self.read_only.insert(descriptor.public_name.clone());
            }
            specs.push(ToolSpec {
                name: descriptor.public_name,
                description: tool
                    .definition
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .to_owned(),
                input_schema: std::sync::Arc::unwrap_or_clone(descriptor.input_schema),
            });
        }
        self.offered.append(specs);
        let warnings = self.catalog_watch.baseline();
        let lines = failures
            .iter()
            .map(|failure| {
                let mut line = failure.to_string();
                if let Ok(status) = self.host.servers().server_status(failure.server()) {
                    for stderr in &status.stderr_tail {
                        line.push_str("\n    stderr| ");
                        line.push_str(stderr);
                    }
                }
                line
            })
            .chain(settled.failures)
            .chain(warnings)
            .collect();
        (self.offered.clone(), lines)
    }

    /// The `<execution_routing>` section: which facility suits what, and whether each is
    /// available here (the code-mode sandbox is probed; it never falls back to weaker isolation;
    /// the tool bridge is handshaken), followed by the tool CLI's usage when it is available.
    pub async fn execution_routing(&self) -> String {
        let code_mode = match warden_codemode::probe(CodeModeLimits::default()).await {
            Ok(()) => Availability::Available,
            Err(error) => Availability::Unavailable {
                reason: error.to_string(),
            },
        };
        // Local skills, or skills an MCP server publishes (known once its server connected).
        let skills =
            if self.skills.skills.is_empty() && self.host.remote_skills().commands().is_empty() {
                Availability::Unavailable {
                    reason:
                        "no skills are installed for this workspace and no MCP server publishes any"
                            .to_owned(),
                }
            } else {
                Availability::Available
            };
        let tool_cli = self.tool_cli().await;
        let section = execution_routing_section(&RoutingInputs {
            bash: Availability::Available,
            code_mode,
            skills,
            tool_cli: tool_cli.clone(),
        });
        // The tool CLI's usage only when its bridge answered; otherwise the section says why.
        with_tool_cli_usage(section, &tool_cli)
    }

    /// Tells `observer` of every call made through the session's tool bridge (the transcript
    /// records them); nothing happens when the bridge did not start.
    pub fn observe_bridge_calls(&self, observer: Arc<dyn warden_bridge::CallObserver>) {
        if let Ok(bridge) = &self.bridge {
            bridge.observe(observer);
        }
    }

    /// Settles once per session: a real handshake with the bridge, then the bridge's address
    /// and token are exported to the bash tool. Until then (and if it fails) they are not, and
    /// inherited ones stay masked.
    async fn tool_cli(&self) -> Availability {
        self.tool_cli
            .get_or_init(|| settle_tool_cli(&self.bridge, self.host.session_id(), &self.bash_env))
            .await
            .clone()
    }

    /// The system prompt in its byte-stable order.
    pub fn system_prompt(&self, execution_routing: String) -> String {
        let agent_instructions = self
            .profile
            .as_ref()
            .and_then(|profile| profile.instructions.clone());
        // Local skills, then the commands of skills MCP servers published (registered when
        // their servers were opened).
        let mut entries = self.skills.index_entries();
        let remote = self.host.remote_skills().commands();
        entries.extend(remote.iter().map(|command| command.index_entry()));
        let any_skill = !entries.is_empty();
        let index = SkillIndex::build(entries, &IndexLimits::default());
        let skills_index = any_skill.then(|| index.render());
        let server_instructions = self
            .host
            .servers()
            .status()
            .into_iter()
            .filter_map(|status| status.instructions.map(|text| (status.name, text)))
            .collect();
        let mut prompt = assemble_system_prompt(&PromptParts {
            base: None,
            agent_instructions,
            // A room's files are the tenant's: they never become instructions.
            project: if self.in_room {
                Vec::new()
            } else {
                find_project_instructions(&self.workspace)
            },
            execution_routing: Some(execution_routing),
            server_instructions,
            skills_index,
        });
        // `system-tools` mode: the deferred tools, settled with the tool list, never changed.
        if let Some(section) = self.deferral.system_section() {
            prompt.push('\n');
            prompt.push_str(section);
            prompt.push('\n');
        }
        prompt
    }

    /// Opens the session's transcript for a frontend that keeps the conversation itself (ACP,
    /// A2A): the resumed one with its messages, or a new one under the session's id.
    pub fn open_transcript(
        &mut self,
    ) -> Result<(warden_agent::Session, Vec<warden_agent::Message>), warden_agent::SessionError>
    {
        match self.resumed.take() {
            Some((id, messages)) => {
                let (transcript, _) = self.store.resume(&id)?;
                Ok((transcript, messages))
            }
            None => Ok((
                self.store.create_with_id(
                    self.host.session_id(),
                    &self.workspace,
                    Some(&self.model.name),
                )?,
                Vec::new(),
            )),
        }
    }

    /// The executor the loop calls: every call goes through the gate with source `agent`; MCP
    /// progress and the model's plan go to `events`.
    pub fn executor(&self, events: Option<Events>) -> Arc<GateExecutor> {
        self.executor_as(CallSurface::Agent, events)
    }

    /// [`AgentSession::executor`] for a frontend that is its own call source (`a2a`): every call
    /// goes through the gate with source `surface`.
    pub fn executor_as(&self, surface: CallSurface, events: Option<Events>) -> Arc<GateExecutor> {
        Arc::new(GateExecutor {
            surface,
            host: self.host.clone(),
            read_only: self.read_only.clone(),
            events,
            deferral: self.deferral.clone(),
            catalog_watch: self.catalog_watch.clone(),
            in_flight: Mutex::default(),
            next_call: AtomicU64::new(0),
        })
    }
}

/// The agent profile `--agent` names, if it names one.
fn agent_profile<'a>(
    settings: &'a warden_config::ModelSettings,
    agent: Option<&str>,
) -> Result<Option<&'a AgentProfile>, UsageError> {
    let Some(name) = agent else {
        return Ok(None);
    };
    let profile = settings.agents.get(name).ok_or_else(|| {
        UsageError(format!(
            "no agent profile named `{name}`; define [agents.{name}] in your config"
        ))
    })?;
    Ok(Some(profile))
}

/// Makes the room when it is new (from the profile's room template, if any): its files are the
/// session's workspace.
fn prepare_room(
    room: &Room,
    profile: Option<&AgentProfile>,
    options: &mut HostOptions,
) -> Result<(), SessionError> {
    room.prepare(profile.and_then(|profile| profile.room_template.as_deref()))
        .map_err(|error| SessionError::Room(error.to_string()))?;
    options.workspace = room.files();
    Ok(())
}

/// The local skills: the standard roots, or in a room the operator's skills only (never a
/// workspace's), and those the opener adds (the tenant's). Rejected skills are logged.
fn discover_skills(
    paths: &warden_config::Paths,
    workspace: &Path,
    in_room: bool,
    extra_roots: &[warden_skills::SkillRoot],
) -> Arc<Discovery> {
    // A room's session reads the operator's skills and those its opener adds (the
    // tenant's), never a workspace's.
    let mut roots = if in_room {
        SkillRoots::new(Some(paths.config_dir().join("skills")), None)
    } else {
        SkillRoots::standard(paths, workspace)
    };
    roots.roots.extend(extra_roots.iter().cloned());
    let skills = Arc::new(discover(&roots));
    for rejection in &skills.rejections {
        tracing::warn!("skill rejected: {rejection}");
    }
    skills
}

/// What an agent profile asks of the session: every skill it names must exist, and only the
/// servers it lists (when it lists any) are registered.
fn apply_profile(
    profile: &AgentProfile,
    skills: &Discovery,
    config: &mut LoadedConfig,
) -> Result<(), UsageError> {
    if let Some(missing) = profile
        .skills
        .iter()
        .find(|name| skills.get(name).is_none())
    {
        return Err(UsageError(format!("the skill {missing} was not found")));
    }
    if let Some(servers) = &profile.mcp_servers {
        config.servers.retain(|name, _| servers.contains(name));
    }
    Ok(())
}

/// The model: `--model`, else the profile's, else the config's.
fn choose_model(
    settings: &warden_config::ModelSettings,
    name: Option<&str>,
    profile: Option<&AgentProfile>,
    paths: &warden_config::Paths,
) -> Result<ModelConfig, UsageError> {
    let env = |name: &str| std::env::var(name).ok();
    select_model(settings, name, profile, &env).map_err(|error| {
        UsageError(match error {
            // The hint names the config file this run reads, wherever WARDEN_HOME puts it.
            warden_agent::SelectError::NoModel => {
                warden_agent::no_model_message(&paths.user_config_file())
            }
            other => other.to_string(),
        })
    })
}

/// The resumed session's id, else the one the frontend chose (the service's session), else a
/// new one.
fn session_id(
    resumed: Option<&(String, Vec<warden_agent::Message>)>,
    options: &HostOptions,
) -> String {
    resumed
        .map(|(id, _)| id.clone())
        .or_else(|| options.session_id.clone())
        .unwrap_or_else(warden_host::new_session_id)
}

/// The built-in tools' workspace and `bash`'s confinement: a room's own (confined to the room,
/// sandboxed), else the session's workspace with `--add-dir`'s folders under `[sandbox]`.
fn tool_workspace(
    room: Option<&Room>,
    paths: &warden_config::Paths,
    workspace: &Path,
    config: &LoadedConfig,
    add_dirs: &[PathBuf],
) -> Result<(Workspace, BashConfinement), UsageError> {
    Ok(match room {
        Some(room) => (room_workspace(room), room_confinement(&config.sandbox)),
        None => (
            session_workspace(paths, workspace, config, add_dirs)?,
            bash_confinement(&config.sandbox),
        ),
    })
}

/// One artifact store for the session: large built-in output and large or binary MCP results
/// land in the same private folder (the room's, else the session's), under the same retention
/// and lock.
fn session_artifacts(
    room: Option<&Room>,
    paths: &warden_config::Paths,
    session_id: &str,
) -> warden_mcp::ArtifactStore {
    warden_mcp::ArtifactStore::new(match room {
        Some(room) => room.artifacts(),
        None => warden_host::session_artifacts_dir(paths.state_dir(), session_id),
    })
}

/// The built-in tools on `workspace` under `confinement`, with the file tools reading and
/// writing through `text_files` and `bash` running in `terminal` when given. Where `bash` is
/// sandboxed, warden makes itself non-dumpable.
fn builtin_tools(
    workspace: Workspace,
    confinement: BashConfinement,
    artifacts: &warden_mcp::ArtifactStore,
    bash_env: &BashEnv,
    text_files: Option<Arc<dyn warden_agent::TextFiles>>,
    terminal: Option<Arc<dyn warden_agent::CommandTerminal>>,
) -> Arc<BuiltinTools> {
    let mut builtins = BuiltinTools::new(workspace, Arc::new(SessionArtifacts(artifacts.clone())))
        .with_bash_env(bash_env.clone())
        .with_confinement(confinement);
    if let Some(files) = text_files {
        builtins = builtins.with_text_files(files);
    }
    if let Some(terminal) = terminal {
        builtins = builtins.with_terminal(terminal);
    }
    let builtins = Arc::new(builtins);
    if builtins.confinement().mode != SandboxMode::Off {
        // A sandboxed command of the same user must not read warden's own environment (the
        // model keys) through /proc: warden makes itself non-dumpable.
        if let Err(error) = warden_sandbox::make_non_dumpable() {
            tracing::warn!(%error, "could not make warden non-dumpable");
        }
    }
    builtins
}

/// Which built-in host tools a session is given. In a room, only the host tools the profile
/// grants (and `update_plan`, which touches nothing), and `bash` only where the kernel confines
/// it; elsewhere every built-in.
struct HostToolGrants<'a> {
    in_room: bool,
    profile: Option<&'a AgentProfile>,
    bash_enforced: bool,
}

impl<'a> HostToolGrants<'a> {
    /// The grants of a session in a room or not, under `profile`, with `bash` confined as
    /// `confinement` reports.
    fn new(
        in_room: bool,
        profile: Option<&'a AgentProfile>,
        confinement: &warden_agent::ConfinementReport,
    ) -> Self {
        Self {
            in_room,
            profile,
            bash_enforced: confinement.enforced,
        }
    }

    /// Whether the session has the built-in `name`.
    fn grants(&self, name: &str) -> bool {
        !self.in_room
            || !warden_config::SERVICE_HOST_TOOLS.contains(&name)
            || (self.profile_names(name) && (name != "bash" || self.bash_enforced))
    }

    /// Whether the profile names `name` among its host tools.
    fn profile_names(&self, name: &str) -> bool {
        self.profile
            .is_some_and(|profile| profile.host_tools.iter().any(|tool| tool == name))
    }

    /// Warns when a room's profile names `bash` and the sandbox that would confine it is not
    /// enforced here.
    fn warn_bash_left_out(&self, confinement: &warden_agent::ConfinementReport) {
        if self.in_room && !self.bash_enforced && self.profile_names("bash") {
            tracing::warn!(
                "bash is left out of this service session: the sandbox is not enforced here ({})",
                confinement.summary
            );
        }
    }
}

/// The built-ins the session is granted, as host tools.
fn granted_builtins(
    grants: &HostToolGrants<'_>,
    builtins: &Arc<BuiltinTools>,
) -> Vec<Arc<dyn HostTool>> {
    builtin_specs()
        .into_iter()
        .filter(|spec| grants.grants(spec.name))
        .map(|spec| builtin_host_tool(spec, builtins))
        .collect()
}

/// One of the agent's built-ins as a host tool, offered through the gate.
pub(crate) fn builtin_host_tool(
    spec: warden_agent::BuiltinToolSpec,
    builtins: &Arc<BuiltinTools>,
) -> Arc<dyn HostTool> {
    let name = spec.name;
    let (assessed, run) = (builtins.clone(), builtins.clone());
    let tool = CodeTool::builtin_with_schema(
        name,
        spec.description,
        spec.input_schema,
        capability_classes(&spec.capabilities),
        move |arguments: Value, invocation: Invocation| {
            run_builtin(run.clone(), name, arguments, invocation.cancel)
        },
    );
    Arc::new(tool.assessed_by(move |arguments| assess_builtin(&assessed, name, arguments)))
}

/// The skills the session's servers publish: their names may not take a local skill's.
fn remote_skills(
    config: &LoadedConfig,
    paths: &warden_config::Paths,
    skills: &Discovery,
) -> Arc<RemoteSkills> {
    Arc::new(RemoteSkills::new(RemoteSkillsSettings {
        // `--mcp-skills-extension` is folded into the config by `load_config`.
        extension_enabled: config.experimental.skills_extension,
        grants_path: Some(warden_skills::GrantStore::path_in(paths.state_dir())),
        reserved: skills
            .skills
            .iter()
            .map(|skill| skill.name.clone())
            .collect(),
    }))
}

/// The skills' tools (local and remote), and the tool that runs the skills' scripts under
/// `[skill_scripts]` and its quota when the session is granted it.
fn skill_host_tools(
    grants: &HostToolGrants<'_>,
    config: &LoadedConfig,
    paths: &warden_config::Paths,
    skills: &Arc<Discovery>,
    remote_skills: &Arc<RemoteSkills>,
    builtins: &Arc<BuiltinTools>,
) -> Vec<Arc<dyn HostTool>> {
    let mut tools = skill_tools(skills.clone(), remote_skills.clone());
    let settings = config.skill_scripts.clone();
    let quota = ScriptQuota::new(settings.max_concurrent, settings.max_concurrent_per_user);
    let scripts = Arc::new(run_skill_script(Arc::new(SkillScripts {
        settings,
        discovery: skills.clone(),
        operator_root: paths.config_dir().join("skills"),
        grants_path: warden_skills::ScriptGrantStore::path_in(paths.state_dir()),
        builtins: builtins.clone(),
        quota,
        user: std::env::var("USER").unwrap_or_else(|_| "local".to_owned()),
    })));
    if grants.grants("run_skill_script") {
        tools.push(scripts);
    }
    tools
}

/// The knowledge search over the profile's collections, when it names any.
fn knowledge_tool(
    profile: Option<&AgentProfile>,
    options: &HostOptions,
    config: &LoadedConfig,
) -> Option<Arc<dyn HostTool>> {
    let profile = profile.filter(|profile| !profile.knowledge.is_empty())?;
    Some(Arc::new(crate::knowledge::search_knowledge(
        profile.knowledge.clone(),
        options.knowledge.clone(),
        crate::knowledge::RetrievalConfig::of(config),
    )))
}

/// The frontend's host options with what the session adds: its tools (after the embedding
/// application's, so a built-in of the same name wins), its id, artifact store and remote
/// skills, and sampling through the gate.
fn with_session_tools(
    mut options: HostOptions,
    host_tools: Vec<Arc<dyn HostTool>>,
    session_id: String,
    artifacts: warden_mcp::ArtifactStore,
    remote_skills: Arc<RemoteSkills>,
) -> HostOptions {
    // The embedding application's tools come first, so a built-in of the same name wins.
    let mut application_tools = std::mem::take(&mut options.tools);
    application_tools.extend(host_tools);
    options.tools = application_tools;
    options.session_id = Some(session_id);
    options.artifacts = Some(artifacts);
    options.remote_skills = Some(remote_skills);
    options.sampling = SamplingRoute::ThroughGate;
    options
}

/// The tool bridge that serves `warden tool` to bash, or why there is none: a room without
/// bash has no use for it.
fn start_bridge(
    bash_granted: bool,
    config: &LoadedConfig,
    paths: &warden_config::Paths,
    host: &Arc<Host>,
) -> Result<Bridge, String> {
    if bash_granted {
        let listen = bridge_listen(&config.discovery, paths.state_dir());
        Bridge::start_on(host.clone(), listen).map_err(|error| error.to_string())
    } else {
        Err("bash is not among this session's tools".to_owned())
    }
}

/// The built-in tools' workspace: the project root (the working folder's git root unless that
/// is the home folder or `/`; else the working folder), the operator's extra folders, warden's
/// artifacts to read, and the protected paths with the user's exceptions.
pub fn session_workspace(
    paths: &warden_config::Paths,
    workdir: &Path,
    config: &LoadedConfig,
    add_dirs: &[PathBuf],
) -> Result<Workspace, UsageError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut extra = Vec::new();
    for dir in add_dirs {
        let absolute = if dir.is_absolute() {
            dir.clone()
        } else {
            workdir.join(dir)
        };
        if !absolute.is_dir() {
            return Err(UsageError(format!(
                "--add-dir {}: no such folder",
                dir.display()
            )));
        }
        extra.push(absolute);
    }
    let permissions = &config.policy.permissions;
    extra.extend(permissions.additional_directories.iter().cloned());
    // A git root that holds the home folder (a dotfiles repository in ~, or `/`) is no project.
    let project_root = workdir
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .filter(|root| !home.as_deref().is_some_and(|home| home.starts_with(root)))
        .map(Path::to_path_buf);
    let defaults = ProtectedDefaults {
        home: home.as_deref(),
        warden_config: Some(paths.config_dir()),
        warden_state: Some(paths.state_dir()),
    };
    let rule_hint = format!(
        "[permissions] allow_protected in {}",
        paths.user_config_file().display()
    );
    Ok(Workspace::new(workdir, &defaults)
        .with_roots(project_root)
        .with_roots(extra)
        .with_read_only_roots([paths.state_dir().join("artifacts")])
        .allowing(permissions.allow_protected.iter().cloned(), rule_hint)
        .with_write_protected(permissions.write_protected.iter().cloned()))
}

/// A room's workspace: its files the one root, its artifacts readable, and every path outside
/// refused (never asked about: no one in a tenant may open the host to a session).
fn room_workspace(room: &Room) -> Workspace {
    Workspace::new(room.files(), &ProtectedDefaults::default())
        .with_read_only_roots([room.artifacts()])
        .confined_to_roots(
            "outside this session's own folder: a service session reaches only its files",
        )
}

/// `bash` in a room: sandboxed whatever `[sandbox] mode` says (workspace-write where it is
/// off), never with network, within `[sandbox]`'s limits.
fn room_confinement(settings: &warden_config::SandboxSettings) -> BashConfinement {
    let mut confinement = bash_confinement(settings);
    if confinement.mode == SandboxMode::Off {
        confinement.mode = SandboxMode::WorkspaceWrite;
    }
    confinement.network = false;
    confinement
}

/// The bash tool's confinement from `[sandbox]`.
pub fn bash_confinement(settings: &warden_config::SandboxSettings) -> BashConfinement {
    let defaults = BashConfinement::default();
    let mode = match settings.mode() {
        SandboxModeSetting::Off => SandboxMode::Off,
        SandboxModeSetting::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        SandboxModeSetting::ReadOnly => SandboxMode::ReadOnly,
    };
    BashConfinement {
        mode,
        network: settings.network.unwrap_or(defaults.network),
        limits: ResourceLimits {
            memory_bytes: settings
                .memory_mb
                .map(|mib| mib.saturating_mul(1024 * 1024))
                .or(defaults.limits.memory_bytes),
            cpu_seconds: settings.cpu_sec.or(defaults.limits.cpu_seconds),
            max_processes: settings.max_processes.or(defaults.limits.max_processes),
        },
        env: settings.env.clone(),
        readable: settings.readable.clone(),
        writable: settings.writable.clone(),
    }
}

/// Where the built-in tools spill large output: the session's artifact store, beside the MCP
/// results (`<session>/mcp/builtin/<tool>/`).
struct SessionArtifacts(warden_mcp::ArtifactStore);

impl warden_agent::ArtifactSink for SessionArtifacts {
    fn save(&self, tool: &str, content: &[u8]) -> std::io::Result<std::path::PathBuf> {
        self.0
            .write("builtin", tool, "txt", content)
            .map(|artifact| artifact.path)
            .map_err(std::io::Error::other)
    }
}

fn capability_classes(capabilities: &[Capability]) -> CapabilitySet {
    capabilities.iter().copied().collect()
}

/// What a call of the built-in `name` reaches: a path outside the workspace or protected, a
/// file it replaces, a command the editor runs outside the sandbox.
fn assess_builtin(tools: &BuiltinTools, name: &'static str, arguments: &Value) -> CallReach {
    // A command the editor runs in its terminal: outside the sandbox, asked every time.
    if let Some(why) = tools.runs_unconfined(name) {
        return CallReach {
            unconfined: Some(why.to_owned()),
            ..CallReach::default()
        };
    }
    let Some(reach) = tools.reach(name, arguments) else {
        return CallReach::default();
    };
    let mut assessed = CallReach::default();
    if reach.replaces_existing {
        assessed.added_classes = CapabilitySet::of(&[CapabilityClass::Destructive]);
    }
    let concern = match reach.placement {
        Placement::Inside => None,
        Placement::Outside => Some(PathConcern::Outside),
        Placement::Secret(holds) => Some(PathConcern::Secret {
            holds: holds.to_owned(),
        }),
        Placement::RunsLater(runs) => Some(PathConcern::RunsLater { runs }),
        Placement::Protected(reason) => {
            return CallReach::refused(format!("{name} was refused: {reason}"));
        }
    };
    assessed.guarded = concern.map(|concern| GuardedPath {
        // A listing or a walk reads a folder: an answer for the session covers beneath it.
        folder: matches!(name, "list_dir" | "glob" | "grep") && reach.path.is_dir(),
        writes: reach.access == Access::Write,
        path: reach.path,
        concern,
    });
    assessed
}

/// Runs one admitted call of the built-in `name`: the gate's dispatch is the one place a
/// built-in runs.
async fn run_builtin(
    tools: Arc<BuiltinTools>,
    name: &'static str,
    arguments: Value,
    cancel: CancellationToken,
) -> Result<ToolOutput, DispatchError> {
    #[allow(clippy::disallowed_methods)]
    let result = tools.execute(name, arguments, cancel).await;
    Ok(ToolOutput {
        size_bytes: result.text.len() as u64,
        text: result.text,
        is_error: result.is_error,
        content: None,
        confinement: result.confinement,
    })
}

/// The loop's executor: the gate, with MCP progress and the model's plan reported as events,
/// and each call in flight known by its server (so a frontend can cancel a server's calls).
pub struct GateExecutor {
    surface: CallSurface,
    host: Arc<Host>,
    read_only: BTreeSet<String>,
    events: Option<Events>,
    deferral: Arc<Deferral>,
    catalog_watch: Arc<CatalogWatch>,
    /// The calls running now: a number, the server (or `built-in`), the call's token.
    in_flight: Mutex<Vec<(u64, String, CancellationToken)>>,
    next_call: AtomicU64,
}

impl GateExecutor {
    /// Cancels the calls in flight to `server` (`built-in` for warden's own tools); how many.
    pub fn cancel_calls_to(&self, server: &str) -> usize {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        in_flight
            .iter()
            .filter(|(_, source, _)| source == server)
            .map(|(_, _, token)| token.cancel())
            .count()
    }

    /// Runs one routed call through the gate, known as in flight meanwhile.
    async fn call_tracked(
        &self,
        context: CallContext,
        public_name: &str,
        arguments: Value,
    ) -> warden_policy::GateOutcome {
        let token = context.cancel.clone();
        let number = self.next_call.fetch_add(1, Ordering::Relaxed);
        let server = warden_vocab::split_public_name(public_name)
            .map_or_else(|| BUILT_IN.to_owned(), |(server, _)| server.to_owned());
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((number, server, token));
        let outcome = self.host.call_with(context, public_name, arguments).await;
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(entry, _, _)| *entry != number);
        outcome
    }
}

/// What the calls of warden's own tools are filed under.
const BUILT_IN: &str = "built-in";

impl ToolExecutor for GateExecutor {
    fn is_read_only(&self, public_name: &str) -> bool {
        self.read_only.contains(public_name)
    }

    fn refresh_tools(&self) -> BoxFuture<'_, ToolRefresh> {
        Box::pin(self.catalog_watch.refresh())
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            let mut context = CallContext::new(self.surface, cancel);
            let forwarder = self.events.clone().map(|events| {
                let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
                context.progress = Some(sender);
                let id = call.id.clone();
                tokio::spawn(async move {
                    while let Some(update) = receiver.recv().await {
                        events.emit(AgentEvent::ToolProgress {
                            id: id.clone(),
                            message: update.message,
                            progress: Some(update.progress),
                            total: update.total,
                        });
                    }
                })
            });
            if let Some(events) = &self.events {
                context.approval_watch =
                    Some(warden_policy::ApprovalWatcher(Arc::new(ApprovalEvents {
                        events: events.clone(),
                        id: call.id.clone(),
                    })));
            }
            // `call_tool` reaches the tool behind it, and a deferred tool called by its exact
            // name is loaded first: either way the gate sees (and audits) the tool itself.
            let (public_name, arguments) = match self
                .deferral
                .route(&self.host, &call.public_name, call.arguments)
                .await
            {
                Ok(routed) => routed,
                Err(message) => return ToolCallResult::error(message),
            };
            let plan = (public_name == PLAN_TOOL)
                .then(|| warden_agent::plan_entries(&arguments))
                .flatten();
            let outcome = self.call_tracked(context, &public_name, arguments).await;
            if let Some(forwarder) = forwarder {
                forwarder.abort();
            }
            let denial = (outcome.decision != Decision::Allowed)
                .then(|| outcome.reason.clone())
                .flatten();
            let references = if public_name == SEARCH_TOOLS {
                tool_references(outcome.output.as_ref().and_then(|o| o.content.as_ref()))
            } else {
                Vec::new()
            };
            let result = ToolCallResult {
                text: outcome.model_text(),
                is_error: outcome.is_error(),
                decision: outcome.decision,
                denial,
                tool_references: references,
                warnings: outcome.warnings,
            };
            // The model's plan, once the gate let the call through and the tool took it.
            if let (Some(entries), Some(events)) = (plan, &self.events)
                && result.decision == Decision::Allowed
                && !result.is_error
            {
                events.emit(AgentEvent::PlanUpdated {
                    id: call.id.clone(),
                    entries,
                });
            }
            result
        })
    }
}

/// A call's approval told to the session's event stream, under the model's call id.
struct ApprovalEvents {
    events: Events,
    id: String,
}

impl warden_policy::ApprovalWatch for ApprovalEvents {
    fn asked(&self, request: &warden_policy::ApprovalRequest) {
        self.events.emit(AgentEvent::ToolApprovalAsked {
            id: self.id.clone(),
            name: request.public_name.clone(),
            reason: request.reason.clone(),
        });
    }

    fn decided(
        &self,
        request: &warden_policy::ApprovalRequest,
        verdict: &warden_policy::ApprovalVerdict,
    ) {
        self.events.emit(AgentEvent::ToolApprovalDecided {
            id: self.id.clone(),
            name: request.public_name.clone(),
            allowed: verdict.allowed,
            answered_by: verdict.answered_by.clone(),
            reason: verdict.reason.clone(),
        });
    }
}

/// Values that must never reach a transcript: expanded header and env values of the configured
/// servers, and the model's API key.
fn known_secrets(config: &LoadedConfig, model: &ModelConfig, workspace: &Path) -> Vec<String> {
    let vars = warden_config::VarContext::from_process(workspace);
    let mut secrets = Vec::new();
    for entry in config.servers.values() {
        match entry.resolve(&vars) {
            Ok(warden_config::ResolvedTransport::Stdio { env, .. }) => {
                secrets.extend(env.values().map(|value| value.expose().to_owned()));
            }
            Ok(warden_config::ResolvedTransport::Http { headers, .. }) => {
                secrets.extend(headers.iter().map(|(_, value)| value.expose().to_owned()));
            }
            Err(_) => {}
        }
    }
    if let warden_agent::ApiKey::Env(name) = &model.api_key
        && let Ok(value) = std::env::var(name)
    {
        secrets.push(value);
    }
    secrets
}

fn resume(
    store: &SessionStore,
    workspace: &Path,
    id: Option<&str>,
    continue_latest: bool,
) -> Result<Option<(String, Vec<warden_agent::Message>)>, SessionError> {
    let id = match (id, continue_latest) {
        (Some(id), _) => id.to_owned(),
        (None, true) => match store.latest_for(workspace)? {
            Some(id) => id,
            None => {
                return Err(UsageError(format!(
                    "no earlier session in {} to continue",
                    workspace.display()
                ))
                .into());
            }
        },
        (None, false) => return Ok(None),
    };
    let loaded = store.load(&id)?;
    Ok(Some((loaded.id, loaded.messages)))
}

/// Whether an http(s) URL names a legacy HTTP+SSE endpoint: its path ends in `/sse` (as other
/// hosts' `--mcp` read it); every other URL is Streamable HTTP.
fn is_legacy_sse_url(target: &str) -> bool {
    let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    else {
        return false;
    };
    let without_query = rest.split(['?', '#']).next().unwrap_or(rest);
    without_query.trim_end_matches('/').ends_with("/sse")
}

/// `--mcp` values: `URL` (Streamable HTTP, or legacy HTTP+SSE when its path ends in `/sse`),
/// `COMMAND ARGS…`, or either behind `NAME=`.
pub fn ad_hoc_servers(values: &[String]) -> Result<Vec<ServerSpec>, UsageError> {
    let mut unnamed = 0;
    let mut specs = Vec::new();
    for value in values {
        let (name, target) = match value.split_once('=') {
            Some((name, target))
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                (name.to_owned(), target.trim())
            }
            _ => {
                unnamed += 1;
                let name = if unnamed == 1 {
                    "mcp".to_owned()
                } else {
                    format!("mcp{unnamed}")
                };
                (name, value.trim())
            }
        };
        let spec = if is_legacy_sse_url(target) {
            ServerSpec::with_transport(
                name,
                warden_mcp::TransportSpec::LegacySse {
                    url: target.to_owned(),
                    headers: Vec::new(),
                },
            )
        } else if target.starts_with("http://") || target.starts_with("https://") {
            ServerSpec::http(name, target)
        } else {
            let words = split_command(target)
                .ok_or_else(|| UsageError(format!("--mcp {value}: unbalanced quotes")))?;
            let Some((command, args)) = words.split_first() else {
                return Err(UsageError(format!("--mcp {value}: empty command")));
            };
            ServerSpec::stdio(name, command.clone()).with_args(args.to_vec())
        };
        specs.push(spec);
    }
    Ok(specs)
}

/// Splits a command line on whitespace, honouring single and double quotes and backslashes.
pub fn split_command(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => current.push(chars.next()?),
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                current.push(chars.next()?);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(current);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::{ad_hoc_servers, split_command};

    #[test]
    fn a_url_ending_in_sse_is_a_legacy_sse_server() {
        let specs = ad_hoc_servers(&[
            "old=http://127.0.0.1:3001/sse".to_owned(),
            "https://mcp.example.com/sse/?key=1".to_owned(),
            "http://127.0.0.1:3000/mcp".to_owned(),
            "http://127.0.0.1:3000/ssex".to_owned(),
        ])
        .unwrap();
        let kinds: Vec<(&str, &str)> = specs
            .iter()
            .map(|spec| (spec.name.as_str(), spec.transport.kind()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("old", "sse"),
                ("mcp", "sse"),
                ("mcp2", "http"),
                ("mcp3", "http")
            ]
        );
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_command(r#"npx -y "@scope/pkg" 'a b' c\ d"#).unwrap(),
            ["npx", "-y", "@scope/pkg", "a b", "c d"]
        );
        assert!(split_command("unbalanced 'quote").is_none());
        assert_eq!(split_command("  ").unwrap(), Vec::<String>::new());
    }
}
