//! The one way every frontend opens an agent session: a [`SessionSpec`] of what the frontend
//! decides (who asks, who approves, its servers and tools, its folder), a [`SessionOpener`] that
//! reads what the operator decided (the configuration and the policy), and [`ConfigOpener`], the
//! opener the binary and embedding applications use. `warden-service` wraps any opener with its
//! tenant rules, so an embedding gets what `warden service run` enforces.

use std::path::PathBuf;
use std::sync::Arc;

use warden_config::{LoadRequest, LoadedConfig, Paths, PolicySettings};
use warden_host::{HostOptions, HostTool, SessionPrincipal, gate_policy, hook_runner};
use warden_mcp::{ElicitationHandler, ServerSpec};
use warden_policy::{Approver, AuditSink, GatePolicy, PermissionMode};
use warden_vocab::ToolGlob;

use crate::agent::{AgentSession, Room, SessionError, SessionRequest};

/// What a frontend decides for one session; everything else comes from the opener.
#[derive(Default)]
pub struct SessionSpec {
    /// The folder the session works in (`None`: the opener's own, the folder warden started
    /// in). Its project config is read unless the session is in a [`Room`].
    pub workspace: Option<PathBuf>,
    /// A `[models.NAME]` entry (`None`: the opener's, else the profile's, else the default).
    pub model: Option<String>,
    /// An `[agents.NAME]` profile (`None`: the opener's, else the default agent).
    pub agent: Option<String>,
    /// Whom the session's calls belong to (the service's tenant and caller, an A2A token).
    pub principal: SessionPrincipal,
    /// The id the session takes (the service's session); `None`: a new one, or the resumed.
    pub session_id: Option<String>,
    /// Who answers approvals; `None`: nobody is asked and what needs a person is denied.
    pub approver: Option<Arc<dyn Approver>>,
    /// An interactive frontend's elicitation handler.
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// The frontend's own servers (`--mcp`, an editor's), beside the configured ones.
    pub servers: Vec<ServerSpec>,
    /// Tools the frontend adds (a service profile's client-side tools).
    pub tools: Vec<Arc<dyn HostTool>>,
    /// More folders the built-in tools may reach (`--add-dir`, an editor's roots).
    pub add_dirs: Vec<PathBuf>,
    /// Which earlier session to continue.
    pub resume: Resume,
    /// A service session's own folder (its workspace and artifacts).
    pub room: Option<Room>,
    /// An editor's files and terminal, when it offers them.
    pub editor: EditorIo,
}

/// Which earlier session a new one continues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Resume {
    /// None: a new conversation.
    #[default]
    New,
    /// The session with this id (`--resume ID`, ACP's `session/load`).
    Id(String),
    /// The latest session of the workspace (`--continue`).
    Latest,
}

/// What an editor lends a session: its buffers for the file tools and its terminal for `bash`.
#[derive(Default)]
pub struct EditorIo {
    /// The file tools read and write text through the editor (its unsaved buffers included);
    /// the workspace checks and the gate stay.
    pub text_files: Option<Arc<dyn warden_agent::TextFiles>>,
    /// `bash` runs in the editor's terminal, unconfined and asked every time — only when the
    /// operator chose it (`[acp] terminal = "editor"`); otherwise it is not used.
    pub terminal: Option<Arc<dyn warden_agent::CommandTerminal>>,
}

/// What an opener read for a session before it opens: the configuration (its servers may still
/// be narrowed) and the host's options (paths, policy, hooks, audit, the embedding's tools).
pub struct Prepared {
    pub config: LoadedConfig,
    pub host: HostOptions,
    /// The model a spec that names none gets (`--model`).
    pub default_model: Option<String>,
    /// The profile a spec that names none gets (`--agent`).
    pub default_agent: Option<String>,
}

/// Why a session could not open: said to the frontend's client as the request's error.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The configuration is invalid (the client cannot fix it, but it is no crash: exit 2).
    #[error(transparent)]
    Config(#[from] warden_config::ConfigError),
    /// `[hooks]` names a hook that cannot run.
    #[error("reading [hooks]: {0}")]
    Hooks(#[from] warden_host::HookSettingsError),
    /// The session itself could not open (an unknown profile or model is a usage problem).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Anything an embedding application's opener reports.
    #[error("{0}")]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl OpenError {
    /// Whether the request (or the configuration it reads) is at fault rather than the
    /// machine: a client's invalid params, the binary's exit code 2.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Config(_) | Self::Hooks(_) => true,
            Self::Session(error) => error.is_usage(),
            Self::Other(_) => false,
        }
    }
}

impl From<crate::agent::UsageError> for OpenError {
    fn from(error: crate::agent::UsageError) -> Self {
        Self::Session(error.into())
    }
}

/// Opens agent sessions. [`SessionOpener::prepare`] reads what the operator decided;
/// [`SessionOpener::open`] adds what the frontend decided and opens. A wrapper (the service's
/// tenant rules) narrows what `prepare` returned before opening.
pub trait SessionOpener: Send + Sync + 'static {
    /// The configuration and host options for a session of `spec`.
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError>;

    /// Opens a session of `spec`.
    fn open(&self, spec: SessionSpec) -> Result<AgentSession, OpenError> {
        let prepared = self.prepare(&spec)?;
        open_prepared(prepared, spec)
    }
}

/// Opens a session of `spec` on what an opener prepared: the frontend's approver, servers,
/// tools, principal and folders join the operator's options.
pub fn open_prepared(prepared: Prepared, spec: SessionSpec) -> Result<AgentSession, OpenError> {
    let Prepared {
        config,
        mut host,
        default_model,
        default_agent,
    } = prepared;
    let SessionSpec {
        workspace: _,
        model,
        agent,
        principal,
        session_id,
        approver,
        elicitation,
        servers,
        tools,
        add_dirs,
        resume,
        room,
        editor,
    } = spec;
    if approver.is_some() {
        host.approver = approver;
    }
    if elicitation.is_some() {
        host.elicitation = elicitation;
    }
    if principal.tenant.is_some() || principal.caller.is_some() {
        host.principal = principal;
    }
    if session_id.is_some() {
        host.session_id = session_id;
    }
    host.extra_servers.extend(servers);
    host.tools.extend(tools);
    // The editor's terminal runs commands outside warden's sandbox: only when the operator
    // chose it in the user config.
    let terminal = editor
        .terminal
        .filter(|_| config.acp_terminal == warden_config::AcpTerminal::Editor);
    let (resume_id, continue_latest) = match &resume {
        Resume::New => (None, false),
        Resume::Id(id) => (Some(id.as_str()), false),
        Resume::Latest => (None, true),
    };
    let model = model.or(default_model);
    let agent = agent.or(default_agent);
    let request = SessionRequest {
        config,
        host,
        model: model.as_deref(),
        agent: agent.as_deref(),
        add_dirs: &add_dirs,
        resume: resume_id,
        continue_latest,
        room,
    };
    Ok(AgentSession::open_with(
        request,
        editor.text_files,
        terminal,
    )?)
}

/// The command line's changes to the configured policy (`--permission-mode`,
/// `--allowed-tools`, `--disallowed-tools`): the operator's, so its mode wins and its patterns
/// are added.
#[derive(Debug, Clone, Default)]
pub struct PolicyOverrides {
    pub mode: Option<PermissionMode>,
    pub allow: Vec<ToolGlob>,
    pub deny: Vec<ToolGlob>,
}

impl PolicyOverrides {
    /// The gate's policy: `settings` with these changes.
    pub fn policy(&self, settings: &PolicySettings) -> GatePolicy {
        let mut policy = gate_policy(settings);
        if let Some(mode) = self.mode {
            policy.permissions.mode = mode;
        }
        policy.permissions.allow.extend(self.allow.iter().cloned());
        policy.permissions.deny.extend(self.deny.iter().cloned());
        policy
    }
}

/// Opens sessions from warden's configuration, read anew for each session (an edit applies to
/// the next one): the scopes of the session's folder, the operator's policy with the command
/// line's overrides, the hooks, and the skills extension.
#[derive(Clone)]
pub struct ConfigOpener {
    paths: Paths,
    workspace: PathBuf,
    config_file: Option<PathBuf>,
    overrides: PolicyOverrides,
    skills_extension: bool,
    model: Option<String>,
    agent: Option<String>,
    audit: Option<Arc<dyn AuditSink>>,
}

impl ConfigOpener {
    /// An opener for sessions in `workspace` (unless a spec names its own folder).
    pub fn new(paths: Paths, workspace: PathBuf) -> Self {
        Self {
            paths,
            workspace,
            config_file: None,
            overrides: PolicyOverrides::default(),
            skills_extension: false,
            model: None,
            agent: None,
            audit: None,
        }
    }

    /// `-c FILE`: the only configuration scope, with the user's authority.
    pub fn with_config_file(mut self, file: Option<PathBuf>) -> Self {
        self.config_file = file;
        self
    }

    /// The command line's policy flags.
    pub fn with_policy(mut self, overrides: PolicyOverrides) -> Self {
        self.overrides = overrides;
        self
    }

    /// `--mcp-skills-extension`: the skills extension on whatever the config says.
    pub fn with_skills_extension(mut self, enabled: bool) -> Self {
        self.skills_extension = enabled;
        self
    }

    /// The model and profile a spec that names none gets (`--model`, `--agent`).
    pub fn with_defaults(mut self, model: Option<String>, agent: Option<String>) -> Self {
        self.model = model;
        self.agent = agent;
        self
    }

    /// Where the gate's audit goes (the service's shared database); `None`: `STATE/audit.db`.
    pub fn with_audit(mut self, audit: Option<Arc<dyn AuditSink>>) -> Self {
        self.audit = audit;
        self
    }

    /// warden's folders.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The folder sessions open in unless their spec names one.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// Every scope for `workspace`, validated, with the command line's config keys folded in;
    /// what a project file set without the authority to is warned about, naming the key.
    pub fn load_config(&self, workspace: PathBuf) -> Result<LoadedConfig, OpenError> {
        let mut config = warden_config::load(&LoadRequest {
            paths: self.paths.clone(),
            workspace,
            explicit_file: self.config_file.clone(),
        })?;
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        if self.skills_extension {
            config.experimental.skills_extension = true;
        }
        Ok(config)
    }

    /// The host's options for `config` in `workspace`: the policy with the overrides, the
    /// hooks, the skills extension and the audit. Every surface that opens a host starts here.
    pub fn host_options(
        &self,
        workspace: PathBuf,
        config: &LoadedConfig,
    ) -> Result<HostOptions, OpenError> {
        let mut options = HostOptions::new(self.paths.clone(), workspace);
        options.policy = self.overrides.policy(&config.policy);
        options.hooks = hook_runner(&config.policy)?;
        options.skills_extension = config.experimental.skills_extension;
        if let Some(audit) = &self.audit {
            options.audit = Some(audit.clone());
        }
        Ok(options)
    }
}

impl SessionOpener for ConfigOpener {
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        let workspace = spec
            .workspace
            .clone()
            .unwrap_or_else(|| self.workspace.clone());
        let config = self.load_config(workspace.clone())?;
        let host = self.host_options(workspace, &config)?;
        Ok(Prepared {
            config,
            host,
            default_model: self.model.clone(),
            default_agent: self.agent.clone(),
        })
    }
}
