//! One supervised server: lazy connect, state machine, catalogue cache, calls, and automatic reconnection.
// Roots and sampling are deprecated by SEP-2577 but still answered for 2025-11-25 servers.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, CustomRequest, GetPromptRequestParams, GetPromptResult, InputRequest,
    InputRequiredResult, InputResponses, PaginatedRequestParams, Prompt, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate, ServerPeerInfo,
    ServerResult, Tool,
};
use rmcp::service::{ClientLifecycleMode, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::Transport;
use rmcp::{ServiceError, serve_client_with_lifecycle};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Listed, McpTool, ToolIdentity, list_pages};
use crate::client::{ClientContext, ListKind, Progress, WardenClient};
use crate::error::{FailureKind, McpError, human_duration};
use crate::guard::Tripped;
use crate::http;
use crate::runtime::{ProtocolMode, RuntimeOptions};
use crate::spec::{ServerSpec, TransportSpec};
use crate::stderr::StderrRing;
use crate::stdio::{self, ChildControl, StdioLaunch, describe_exit};
use crate::stdio_transport::StdioTransport;

/// Automatic reconnect attempts after one loss.
const RECONNECT_ATTEMPTS_PER_LOSS: u32 = 3;
/// Losses handled automatically per session before only an explicit reconnect helps.
const AUTOMATIC_RECOVERIES: u32 = 5;
/// First reconnect delay; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Largest single MCP message accepted (stdio line, SSE event, JSON body): big results fit,
/// a runaway server cannot exhaust memory.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// `input_required` rounds driven per call before giving up.
const MAX_INPUT_ROUNDS: usize = 8;
/// JSON-RPC error code of `URLElicitationRequiredError` (MCP 2025-11-25): the server did not
/// run the request; the user must first complete the URL elicitation(s) in its `data`.
pub const URL_ELICITATION_REQUIRED: i32 = -32042;
/// Retries of one call after the user completed the URL elicitations a -32042 asked for.
const URL_ELICITATION_RETRIES: u32 = 1;

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerState {
    /// Registered; nothing spawned or opened yet.
    NotConnected,
    Connecting,
    Connected,
    Reconnecting,
    /// Was connected, then stopped; its tools stay listed.
    Down,
    NeedsLogin,
    /// Never connected; the failure says why.
    Failed,
}

impl ServerState {
    /// `connected`, `connecting…`, `down`, … as shown to people.
    pub fn label(self) -> &'static str {
        match self {
            ServerState::NotConnected => "not connected",
            ServerState::Connecting => "connecting…",
            ServerState::Connected => "connected",
            ServerState::Reconnecting => "reconnecting…",
            ServerState::Down => "down",
            ServerState::NeedsLogin => "needs login",
            ServerState::Failed => "failed",
        }
    }
}

/// Item counts of the last fetched catalogue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogCounts {
    pub tools: Option<usize>,
    pub resources: Option<usize>,
    pub resource_templates: Option<usize>,
    pub prompts: Option<usize>,
}

/// A snapshot of one server for `warden mcp list` and status lines.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    pub transport: &'static str,
    pub state: ServerState,
    /// The negotiated protocol revision, e.g. `2026-07-28` or `2025-11-25`.
    pub protocol_revision: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub counts: CatalogCounts,
    /// The one-line failure when failed, down or needing login.
    pub failure: Option<String>,
    pub failure_kind: Option<FailureKind>,
    /// The last stderr lines of a stdio server, oldest first.
    pub stderr_tail: Vec<String>,
    /// Bumped each time one of its lists changes.
    pub catalog_generation: u64,
    pub warnings: Vec<String>,
    pub instructions: Option<String>,
    pub required: bool,
    pub deferred: Option<String>,
    /// The process id of a connected stdio server (the leader of its process group).
    pub pid: Option<u32>,
    /// Connect attempts so far (first connect, reconnects).
    pub connect_attempts: u64,
}

/// The result of one tool call, unconverted (see the `result` module for model text).
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub identity: ToolIdentity,
    pub result: CallToolResult,
}

impl CallOutcome {
    /// The server flagged the result as an error (`isError`).
    pub fn is_error(&self) -> bool {
        self.result.is_error.unwrap_or(false)
    }
}

/// How long a stdio server may take to exit after its stdin closes before its group is killed.
const STDIO_EXIT_GRACE: Duration = Duration::from_millis(1500);

/// What the caller of a tool call can attach: a progress channel and a cancellation token.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    pub progress: Option<mpsc::Sender<Progress>>,
    pub cancel: CancellationToken,
}

/// One open connection.
struct Live {
    epoch: u64,
    service: RunningService<RoleClient, WardenClient>,
    context: Arc<ClientContext>,
    child: Option<tokio::sync::Mutex<ChildControl>>,
    pid: Option<u32>,
    closed: CancellationToken,
    intentional_close: AtomicBool,
    /// Why the transport ended the connection, when it knows (legacy HTTP+SSE).
    close_reason: Arc<Mutex<Option<String>>>,
}

impl Live {
    fn peer_info(&self) -> Option<Arc<ServerPeerInfo>> {
        self.service.peer_info()
    }

    async fn close(&self) {
        self.intentional_close.store(true, Ordering::SeqCst);
        // Closing the service closes the child's stdin: a well-behaved server finishes what it
        // was told (a cancellation, say) and exits; the group is killed after a short grace.
        self.service.cancellation_token().cancel();
        if let Some(child) = &self.child {
            child.lock().await.close_gracefully(STDIO_EXIT_GRACE).await;
        }
    }
}

struct Cached<T> {
    items: Vec<T>,
    fetched_at: Instant,
    ttl: Option<Duration>,
    change_epoch: u64,
    connection_epoch: u64,
}

#[derive(Default)]
struct CatalogCache {
    tools: Option<Cached<Tool>>,
    resources: Option<Cached<Resource>>,
    templates: Option<Cached<ResourceTemplate>>,
    prompts: Option<Cached<Prompt>>,
    generation: u64,
    tools_epoch: u64,
    resources_epoch: u64,
    prompts_epoch: u64,
    warnings: Vec<String>,
}

impl CatalogCache {
    /// Puts a freshly fetched list in its slot; bumps the generation when the items changed.
    fn store<T: PartialEq>(
        &mut self,
        slot: impl FnOnce(&mut Self) -> &mut Option<Cached<T>>,
        fresh: Cached<T>,
    ) {
        let stored = slot(self);
        let changed = stored.as_ref().is_none_or(|old| old.items != fresh.items);
        *stored = Some(fresh);
        if changed {
            self.generation += 1;
        }
    }

    fn epoch(&self, kind: ListKind) -> u64 {
        match kind {
            ListKind::Tools => self.tools_epoch,
            ListKind::Resources => self.resources_epoch,
            ListKind::Prompts => self.prompts_epoch,
        }
    }

    fn warn(&mut self, warning: String) {
        const KEPT: usize = 20;
        if self.warnings.len() == KEPT {
            self.warnings.remove(0);
        }
        self.warnings.push(warning);
    }
}

fn is_fresh<T>(cached: &Cached<T>, change_epoch: u64, connection_epoch: u64) -> bool {
    cached.change_epoch == change_epoch
        && cached.connection_epoch == connection_epoch
        && cached
            .ttl
            .is_some_and(|ttl| cached.fetched_at.elapsed() < ttl)
}

struct SlotState {
    phase: ServerState,
    live: Option<Arc<Live>>,
    failure: Option<McpError>,
    attempts: u64,
    epoch: u64,
    recoveries_left: u32,
    protocol: Option<String>,
    server_name: Option<String>,
    server_version: Option<String>,
    instructions: Option<String>,
    shut_down: bool,
    /// Stopped by the operator: stays down (no lazy connect, no supervision) until
    /// [`ServerSlot::reconnect`] or [`ServerSlot::restart`].
    stopped: bool,
    /// Whether any connect ever succeeded: a later failure is `down`, not `failed`.
    ever_connected: bool,
}

/// One configured server and everything known about it.
pub(crate) struct ServerSlot {
    pub spec: ServerSpec,
    options: Arc<RuntimeOptions>,
    stderr: StderrRing,
    state: Mutex<SlotState>,
    connect_lock: tokio::sync::Mutex<()>,
    catalog: Mutex<CatalogCache>,
    shutdown: CancellationToken,
    weak_self: Weak<ServerSlot>,
}

/// Which list to fetch.
#[derive(Clone, Copy)]
enum ListWhich {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ServerSlot {
    pub fn new(spec: ServerSpec, options: Arc<RuntimeOptions>) -> Arc<Self> {
        Arc::new_cyclic(|weak_self| Self {
            spec,
            options,
            stderr: StderrRing::new(),
            state: Mutex::new(SlotState {
                phase: ServerState::NotConnected,
                live: None,
                failure: None,
                attempts: 0,
                epoch: 0,
                recoveries_left: AUTOMATIC_RECOVERIES,
                protocol: None,
                server_name: None,
                server_version: None,
                instructions: None,
                shut_down: false,
                stopped: false,
                ever_connected: false,
            }),
            connect_lock: tokio::sync::Mutex::new(()),
            catalog: Mutex::new(CatalogCache::default()),
            shutdown: CancellationToken::new(),
            weak_self: weak_self.clone(),
        })
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_catalog(&self) -> std::sync::MutexGuard<'_, CatalogCache> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn status(&self) -> ServerStatus {
        let state = self.lock_state();
        let catalog = self.lock_catalog();
        ServerStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport.kind(),
            state: state.phase,
            protocol_revision: state.protocol.clone(),
            server_name: state.server_name.clone(),
            server_version: state.server_version.clone(),
            counts: CatalogCounts {
                tools: catalog
                    .tools
                    .as_ref()
                    .map(|cached| self.filtered(&cached.items).len()),
                resources: catalog.resources.as_ref().map(|cached| cached.items.len()),
                resource_templates: catalog.templates.as_ref().map(|cached| cached.items.len()),
                prompts: catalog.prompts.as_ref().map(|cached| cached.items.len()),
            },
            failure: state.failure.as_ref().map(ToString::to_string),
            failure_kind: state.failure.as_ref().map(McpError::kind),
            stderr_tail: self.stderr.lines(),
            catalog_generation: catalog.generation,
            warnings: catalog.warnings.clone(),
            instructions: state.instructions.clone(),
            required: self.spec.required,
            deferred: self.spec.deferred.clone(),
            pid: state.live.as_ref().and_then(|live| live.pid),
            connect_attempts: state.attempts,
        }
    }

    fn filtered(&self, tools: &[Tool]) -> Vec<McpTool> {
        tools
            .iter()
            .filter(|tool| self.spec.tool_filter.admits(&tool.name))
            .map(|tool| McpTool {
                identity: ToolIdentity::new(self.spec.name.clone(), tool.name.to_string()),
                definition: tool.clone(),
            })
            .collect()
    }

    // ---------------------------------------------------------------- connecting

    /// The live connection, connecting lazily on first use. A failed or down server answers
    /// with its failure; only [`Self::reconnect`] (or supervision) tries again.
    async fn connection(&self) -> Result<Arc<Live>, McpError> {
        let seen_attempts = {
            let state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            if let Some(live) = &state.live {
                return Ok(live.clone());
            }
            match state.phase {
                // A reconnect under way (a renewed session, `/mcp restart`): wait for it.
                ServerState::NotConnected | ServerState::Connecting | ServerState::Reconnecting => {
                }
                // `warden mcp login` saved a token since (another terminal): use it now.
                ServerState::NeedsLogin if self.token_saved_since() => {}
                _ => return Err(self.current_failure(&state)),
            }
            (state.attempts, state.phase == ServerState::Reconnecting)
        };
        let (seen_attempts, was_reconnecting) = seen_attempts;
        let _connecting = self.connect_lock.lock().await;
        {
            let state = self.lock_state();
            if let Some(live) = &state.live {
                return Ok(live.clone());
            }
            if state.stopped || state.attempts != seen_attempts || was_reconnecting {
                return Err(self.current_failure(&state));
            }
        }
        self.connect_now(false).await
    }

    /// Whether an OAuth server that needed a login has a stored token now.
    fn token_saved_since(&self) -> bool {
        match &self.spec.transport {
            TransportSpec::StreamableHttp {
                auth: crate::spec::HttpAuth::OAuth(settings),
                ..
            } => settings.store.read().is_ok_and(|file| file.has_token()),
            _ => false,
        }
    }

    fn current_failure(&self, state: &SlotState) -> McpError {
        if state.shut_down {
            return McpError::shut_down(self.name());
        }
        state.failure.clone().unwrap_or_else(|| {
            McpError::new(
                self.name(),
                FailureKind::Exited,
                format!("is {}", state.phase.label()),
                Some(&reconnect_advice(self.name())),
            )
        })
    }

    /// Connects eagerly (for `required` servers); the failure when it cannot.
    pub async fn connect_eagerly(&self) -> Result<(), McpError> {
        self.connection().await.map(|_| ())
    }

    /// Drops any connection and connects again now.
    pub async fn reconnect(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.recoveries_left = AUTOMATIC_RECOVERIES;
            state.stopped = false;
            state.live.take()
        };
        if let Some(previous) = previous {
            previous.close().await;
        }
        self.connect_now(true).await.map(|_| ())
    }

    /// Disconnects the server and keeps it down: no lazy connect and no supervised recovery
    /// until [`Self::reconnect`] or [`Self::restart`]. Its catalogue stays, so its tools stay
    /// listed; a call to one answers that the server was stopped and how to reconnect it.
    /// Calls in flight end with the connection.
    pub async fn stop(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let live = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.stopped = true;
            state.phase = ServerState::Down;
            state.failure = Some(self.stopped_failure());
            state.live.take()
        };
        if let Some(live) = live {
            live.close().await;
        }
        Ok(())
    }

    /// Drops the connection and the retained catalogue (tools, resources, templates, prompts);
    /// nothing reconnects now: the next request connects lazily and fetches fresh lists. Clears
    /// a stop.
    pub async fn restart(&self) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            state.stopped = false;
            state.recoveries_left = AUTOMATIC_RECOVERIES;
            state.phase = ServerState::NotConnected;
            state.failure = None;
            state.live.take()
        };
        {
            let mut catalog = self.lock_catalog();
            catalog.tools = None;
            catalog.resources = None;
            catalog.templates = None;
            catalog.prompts = None;
            catalog.warnings.clear();
            catalog.generation += 1;
        }
        if let Some(previous) = previous {
            previous.close().await;
        }
        Ok(())
    }

    /// The failure a stopped server answers with.
    fn stopped_failure(&self) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::Stopped,
            "stopped by the operator",
            Some(&self.reconnect_hint()),
        )
    }

    fn reconnect_hint(&self) -> String {
        reconnect_advice(self.name())
    }

    /// Connects under the start-up deadline; the caller holds `connect_lock`.
    async fn connect_now(&self, is_reconnect: bool) -> Result<Arc<Live>, McpError> {
        let epoch = {
            let mut state = self.lock_state();
            state.attempts += 1;
            state.epoch += 1;
            state.phase = if is_reconnect || state.phase == ServerState::Down {
                ServerState::Reconnecting
            } else {
                ServerState::Connecting
            };
            state.epoch
        };
        let deadline = self.spec.startup_timeout;
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(deadline, self.open_any_era(epoch)) => outcome,
            () = self.shutdown.cancelled() => Ok(Err(McpError::shut_down(self.name()))),
        };
        let outcome = match outcome {
            Ok(result) => result,
            Err(_elapsed) => Err(self.startup_timeout_failure(deadline)),
        };
        if let Ok(live) = &outcome {
            // Before the connection is published: no caller may use it until the server has
            // acknowledged the listen, or a change that caller makes could go unannounced.
            self.listen_for_list_changes(live).await;
        }
        let connected = {
            let mut state = self.lock_state();
            match outcome {
                Ok(live) => {
                    let info = live.peer_info();
                    state.protocol = info.as_ref().map(|info| info.protocol_version.to_string());
                    state.server_name = info.as_ref().and_then(|info| {
                        info.server_info.as_ref().map(|server| server.name.clone())
                    });
                    state.server_version = info.as_ref().and_then(|info| {
                        info.server_info
                            .as_ref()
                            .map(|server| server.version.clone())
                    });
                    state.instructions = info.as_ref().and_then(|info| info.instructions.clone());
                    state.phase = ServerState::Connected;
                    state.ever_connected = true;
                    state.failure = None;
                    state.live = Some(live.clone());
                    Ok(live)
                }
                Err(failure) => {
                    state.phase = if failure.kind() == FailureKind::NeedsLogin {
                        ServerState::NeedsLogin
                    } else if failure.kind() == FailureKind::ShutDown {
                        state.phase
                    } else if state.ever_connected {
                        ServerState::Down
                    } else {
                        ServerState::Failed
                    };
                    state.failure = Some(failure.clone());
                    Err(failure)
                }
            }
        };
        if let Ok(live) = &connected {
            self.watch_connection(live);
        }
        connected
    }

    fn startup_timeout_failure(&self, deadline: Duration) -> McpError {
        let (what, hint) = match &self.spec.transport {
            TransportSpec::Stdio { command, .. } => (
                format!(
                    "\"{command}\" did not finish the MCP handshake within {}",
                    human_duration(deadline)
                ),
                "check that the command starts an MCP server on stdio (and writes only MCP to stdout), or raise startup_timeout",
            ),
            TransportSpec::StreamableHttp { url, .. } | TransportSpec::LegacySse { url, .. } => (
                format!(
                    "{url} did not finish the MCP handshake within {}",
                    human_duration(deadline)
                ),
                "check the url, and that the server is running, or raise startup_timeout",
            ),
        };
        let what = match self.stderr.last_line() {
            Some(line) => format!("{what} (its last stderr line: \"{line}\")"),
            None => what,
        };
        McpError::new(self.name(), FailureKind::StartupTimeout, what, Some(hint))
    }

    fn lifecycle(&self) -> ClientLifecycleMode {
        match self.options.protocol {
            ProtocolMode::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            ProtocolMode::Legacy => ClientLifecycleMode::Initialize,
            ProtocolMode::Stateless => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        }
    }

    fn client_context(&self) -> (Arc<ClientContext>, mpsc::UnboundedReceiver<ListKind>) {
        let (list_changed, receiver) = mpsc::unbounded_channel();
        let context = Arc::new(ClientContext {
            server: self.spec.name.clone(),
            client_name: self.options.client_name.clone(),
            client_version: self.options.client_version.clone(),
            workspace_root: self.options.workspace_root.clone(),
            elicitation: self.options.elicitation.clone(),
            skills_extension: self.options.skills_extension,
            sampling: self
                .spec
                .sampling
                .then(|| self.options.sampling.clone())
                .flatten(),
            progress: Arc::default(),
            list_changed,
            events: self.options.events.clone(),
        });
        (context, receiver)
    }

    /// Opens with the configured lifecycle. In `Auto`, a server that answers `server/discover`
    /// with something other than a discover result (some answer every unknown method with `{}`)
    /// is reopened with the plain `initialize` handshake.
    async fn open_any_era(&self, epoch: u64) -> Result<Arc<Live>, McpError> {
        match self.open(epoch, self.lifecycle()).await {
            Ok(live) => Ok(live),
            Err(OpenFailure::RetryWithInitialize(_))
                if self.options.protocol == ProtocolMode::Auto =>
            {
                self.open(epoch, ClientLifecycleMode::Initialize)
                    .await
                    .map_err(OpenFailure::into_error)
            }
            Err(failure) => Err(failure.into_error()),
        }
    }

    async fn open(
        &self,
        epoch: u64,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Arc<Live>, OpenFailure> {
        let (context, list_changes) = self.client_context();
        let handler = WardenClient {
            context: context.clone(),
        };
        let closed = CancellationToken::new();
        let live = match &self.spec.transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                self.stderr.clear();
                let launch = StdioLaunch {
                    server: self.name(),
                    command,
                    args,
                    env,
                    cwd: cwd.as_deref(),
                    default_cwd: &self.options.workspace_root,
                };
                let spawned = stdio::spawn(&launch, &self.stderr).map_err(OpenFailure::Failed)?;
                let mut control = spawned.control;
                let pid = control.pid;
                let transport = Observed {
                    inner: StdioTransport::new(
                        self.name(),
                        spawned.stdout,
                        spawned.stdin,
                        MAX_MESSAGE_BYTES,
                    ),
                    closed: closed.clone(),
                };
                match serve_client_with_lifecycle(handler, transport, lifecycle).await {
                    Ok(service) => Live {
                        epoch,
                        service,
                        context,
                        child: Some(tokio::sync::Mutex::new(control)),
                        pid,
                        closed,
                        intentional_close: AtomicBool::new(false),
                        close_reason: Arc::default(),
                    },
                    Err(error) => {
                        if OpenFailure::peer_predates_discover(&error) {
                            control.kill().await;
                            return Err(OpenFailure::RetryWithInitialize(
                                self.era_mismatch(&error),
                            ));
                        }
                        let failure = self
                            .stdio_startup_failure(command, &mut control, &error)
                            .await;
                        return Err(OpenFailure::classify(&error, failure));
                    }
                }
            }
            TransportSpec::StreamableHttp { url, headers, auth } => {
                let url = http::check_url(self.name(), url).map_err(OpenFailure::Failed)?;
                let client = http::build_client(self.name(), self.spec.startup_timeout)
                    .map_err(OpenFailure::Failed)?;
                let headers =
                    http::header_map(self.name(), headers).map_err(OpenFailure::Failed)?;
                let authorizing = crate::http_auth::authorizing_client(
                    self.name(),
                    &url,
                    client.clone(),
                    auth,
                    self.options.inline_login.as_ref(),
                    self.options.sse_limits,
                )
                .await
                .map_err(OpenFailure::Failed)?;
                let transport = Observed {
                    inner: http::transport(authorizing, &url, headers.clone()),
                    closed: closed.clone(),
                };
                match serve_client_with_lifecycle(handler, transport, lifecycle).await {
                    Ok(service) => Live {
                        epoch,
                        service,
                        context,
                        child: None,
                        pid: None,
                        closed,
                        intentional_close: AtomicBool::new(false),
                        close_reason: Arc::default(),
                    },
                    Err(error) => {
                        if OpenFailure::peer_predates_discover(&error) {
                            return Err(OpenFailure::RetryWithInitialize(
                                self.era_mismatch(&error),
                            ));
                        }
                        if error.is_authorization_required() || error.auth_challenge().is_some() {
                            return Err(OpenFailure::Failed(http::unauthorized(
                                self.name(),
                                &url,
                                auth,
                            )));
                        }
                        let diagnosis = http::diagnose(
                            self.name(),
                            &client,
                            &url,
                            &headers,
                            self.spec.startup_timeout,
                        )
                        .await;
                        let diagnosis = diagnosis.map(|failure| {
                            if failure.kind() == FailureKind::NeedsLogin {
                                http::unauthorized(self.name(), &url, auth)
                            } else {
                                failure
                            }
                        });
                        let failure = diagnosis.unwrap_or_else(|| {
                            McpError::new(
                                self.name(),
                                FailureKind::HandshakeFailed,
                                format!("the MCP handshake with {url} failed: {error}"),
                                Some("check the url, and that the server speaks MCP over Streamable HTTP"),
                            )
                        });
                        return Err(OpenFailure::classify(&error, failure));
                    }
                }
            }
            // Legacy HTTP+SSE servers predate `server/discover`: always the `initialize` handshake.
            TransportSpec::LegacySse { url, headers } => {
                use crate::sse_legacy::LegacySseTransport;
                let transport = LegacySseTransport::connect(
                    self.name(),
                    url,
                    headers,
                    self.spec.startup_timeout,
                    self.options.sse_limits,
                )
                .await
                .map_err(OpenFailure::Failed)?;
                let close_reason = transport.close_reason();
                let transport = Observed {
                    inner: transport,
                    closed: closed.clone(),
                };
                let service = serve_client_with_lifecycle(
                    handler,
                    transport,
                    ClientLifecycleMode::Initialize,
                )
                .await
                .map_err(|error| {
                    let reason = close_reason
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    OpenFailure::Failed(LegacySseTransport::handshake_failure(
                        self.name(),
                        url,
                        &error,
                        reason.as_deref(),
                    ))
                })?;
                Live {
                    epoch,
                    service,
                    context,
                    child: None,
                    pid: None,
                    closed,
                    intentional_close: AtomicBool::new(false),
                    close_reason,
                }
            }
        };
        let live = Arc::new(live);
        self.watch_list_changes(list_changes, epoch);
        Ok(live)
    }

    fn era_mismatch(&self, error: &rmcp::service::ClientInitializeError) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::HandshakeFailed,
            format!("the MCP handshake failed: {error}"),
            Some("check that the server speaks MCP 2025-11-25 or 2026-07-28"),
        )
    }

    async fn stdio_startup_failure(
        &self,
        command: &str,
        control: &mut ChildControl,
        error: &rmcp::service::ClientInitializeError,
    ) -> McpError {
        let exited = tokio::time::timeout(Duration::from_secs(2), control.wait_exit()).await;
        let _ = tokio::time::timeout(Duration::from_millis(500), control.wait_stderr()).await;
        let last = self.stderr.last_line();
        let with_stderr = |what: String| match &last {
            Some(line) => format!("{what} (its last stderr line: \"{line}\")"),
            None => what,
        };
        match exited {
            Ok(status) => McpError::new(
                self.name(),
                FailureKind::ExitedDuringStartup,
                with_stderr(format!(
                    "\"{command}\" exited during start-up with {}",
                    describe_exit(status)
                )),
                Some(
                    "check the command, its arguments and env, and run it by hand to see its output",
                ),
            ),
            Err(_still_running) => {
                control.kill().await;
                McpError::new(
                    self.name(),
                    FailureKind::HandshakeFailed,
                    with_stderr(format!(
                        "\"{command}\" did not complete the MCP handshake: {error}"
                    )),
                    Some("check that the command starts an MCP server on stdio"),
                )
            }
        }
    }

    fn watch_connection(&self, live: &Arc<Live>) {
        let weak = self.weak_self.clone();
        let closed = live.closed.clone();
        let epoch = live.epoch;
        tokio::spawn(async move {
            closed.cancelled().await;
            if let Some(slot) = weak.upgrade() {
                slot.connection_lost(epoch).await;
            }
        });
    }

    /// A 2026-07-28 server sends `list_changed` only on a `subscriptions/listen` stream: open one
    /// for the lists it says can change. The connection is ready only once the server has
    /// acknowledged it, so no change made after connecting can slip by unnoticed. A failed
    /// listen is a warning, never fatal.
    async fn listen_for_list_changes(&self, live: &Arc<Live>) {
        use rmcp::model::{ServerNotification, SubscriptionFilter};
        let Some(info) = live.peer_info() else {
            return;
        };
        if info.protocol_version < ProtocolVersion::V_2026_07_28 {
            return;
        }
        let capabilities = &info.capabilities;
        let mut filter = SubscriptionFilter::builder();
        let mut wanted = false;
        if capabilities
            .tools
            .as_ref()
            .and_then(|tools| tools.list_changed)
            .unwrap_or(false)
        {
            filter = filter.tools_list_changed();
            wanted = true;
        }
        if capabilities
            .resources
            .as_ref()
            .and_then(|resources| resources.list_changed)
            .unwrap_or(false)
        {
            filter = filter.resources_list_changed();
            wanted = true;
        }
        if capabilities
            .prompts
            .as_ref()
            .and_then(|prompts| prompts.list_changed)
            .unwrap_or(false)
        {
            filter = filter.prompts_list_changed();
            wanted = true;
        }
        if !wanted {
            return;
        }
        let filter = filter.build();
        let peer = live.service.peer().clone();
        let changes = live.context.list_changed.clone();
        let closed = live.closed.clone();
        let timeout = self.spec.request_timeout;
        let subscription = match tokio::time::timeout(timeout, peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(error)) => {
                self.lock_catalog().warn(format!(
                    "subscriptions/listen failed, list changes will not be noticed: {error}"
                ));
                return;
            }
            Err(_elapsed) => {
                self.lock_catalog().warn(
                    "subscriptions/listen was not acknowledged; list changes will not be noticed"
                        .to_owned(),
                );
                return;
            }
        };
        tokio::spawn(async move {
            let mut subscription = subscription;
            loop {
                let next = tokio::select! {
                    () = closed.cancelled() => break,
                    next = subscription.next() => next,
                };
                let kind = match next {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => ListKind::Tools,
                    Ok(Some(ServerNotification::ResourceListChangedNotification(_))) => {
                        ListKind::Resources
                    }
                    Ok(Some(ServerNotification::PromptListChangedNotification(_))) => {
                        ListKind::Prompts
                    }
                    Ok(Some(_other)) => continue,
                    Ok(None) | Err(_) => break,
                };
                if changes.send(kind).is_err() {
                    break;
                }
            }
        });
    }

    fn watch_list_changes(&self, mut changes: mpsc::UnboundedReceiver<ListKind>, epoch: u64) {
        let weak = self.weak_self.clone();
        tokio::spawn(async move {
            while let Some(kind) = changes.recv().await {
                let Some(slot) = weak.upgrade() else {
                    break;
                };
                slot.list_changed(kind, epoch).await;
            }
        });
    }

    /// The connection closed: record why, mark the server down, and start supervised recovery.
    async fn connection_lost(&self, epoch: u64) {
        let live = {
            let mut state = self.lock_state();
            let current = state.live.as_ref().is_some_and(|live| live.epoch == epoch);
            if !current || state.shut_down {
                return;
            }
            if state
                .live
                .as_ref()
                .is_some_and(|live| live.intentional_close.load(Ordering::SeqCst))
            {
                return;
            }
            state.live.take()
        };
        let Some(live) = live else {
            return;
        };
        let what = match &live.child {
            Some(child) => {
                let mut child = child.lock().await;
                let status = tokio::time::timeout(Duration::from_secs(2), child.wait_exit()).await;
                let _ = tokio::time::timeout(Duration::from_millis(500), child.wait_stderr()).await;
                match status {
                    Ok(status) => format!("exited with {}", describe_exit(status)),
                    Err(_) => {
                        child.kill().await;
                        "closed its stdout".to_owned()
                    }
                }
            }
            None => live
                .close_reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_else(|| "closed the connection".to_owned()),
        };
        let what = match self.stderr.last_line() {
            Some(line) if live.child.is_some() => {
                format!("{what} (its last stderr line: \"{line}\")")
            }
            _ => what,
        };
        live.close().await;
        let failure = McpError::new(
            self.name(),
            FailureKind::Exited,
            what,
            Some(&format!(
                "check the server's logs, then {}",
                reconnect_advice(self.name())
            )),
        );
        let supervise = {
            let mut state = self.lock_state();
            state.phase = ServerState::Down;
            state.failure = Some(failure);
            if state.recoveries_left > 0 {
                state.recoveries_left -= 1;
                true
            } else {
                false
            }
        };
        if supervise && let Some(slot) = self.weak_self.upgrade() {
            tokio::spawn(async move { slot.supervise().await });
        }
    }

    /// Reconnects a down server with capped backoff and a bounded number of attempts.
    async fn supervise(self: Arc<Self>) {
        let mut delay = FIRST_BACKOFF;
        for _attempt in 0..RECONNECT_ATTEMPTS_PER_LOSS {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.shutdown.cancelled() => return,
            }
            delay = (delay * 2).min(MAX_BACKOFF);
            let _connecting = self.connect_lock.lock().await;
            {
                let state = self.lock_state();
                if state.live.is_some()
                    || state.shut_down
                    || state.stopped
                    || state.phase != ServerState::Down
                {
                    return;
                }
            }
            if self.connect_now(true).await.is_ok() {
                return;
            }
        }
    }

    /// A `list_changed` notification: refetch that list under the generation counter.
    async fn list_changed(&self, kind: ListKind, epoch: u64) {
        {
            let mut catalog = self.lock_catalog();
            match kind {
                ListKind::Tools => catalog.tools_epoch += 1,
                ListKind::Resources => catalog.resources_epoch += 1,
                ListKind::Prompts => catalog.prompts_epoch += 1,
            }
        }
        let live = {
            let state = self.lock_state();
            match &state.live {
                Some(live) if live.epoch == epoch => live.clone(),
                _ => return,
            }
        };
        let which: &[ListWhich] = match kind {
            ListKind::Tools => &[ListWhich::Tools],
            ListKind::Resources => &[ListWhich::Resources, ListWhich::Templates],
            ListKind::Prompts => &[ListWhich::Prompts],
        };
        for list in which {
            if let Err(error) = self.refresh(&live, *list).await {
                self.lock_catalog().warn(format!(
                    "refreshing the list after list_changed failed: {error}"
                ));
            }
        }
        self.options
            .events
            .send(crate::upstream::UpstreamEvent::CatalogChanged {
                server: self.spec.name.clone(),
                kind,
            });
    }

    // ---------------------------------------------------------------- catalogue

    fn supports(&self, live: &Live, list: ListWhich) -> bool {
        let Some(info) = live.peer_info() else {
            return true;
        };
        let capabilities = &info.capabilities;
        match list {
            ListWhich::Tools => capabilities.tools.is_some(),
            ListWhich::Resources | ListWhich::Templates => capabilities.resources.is_some(),
            ListWhich::Prompts => capabilities.prompts.is_some(),
        }
    }

    /// Fetches one list now and stores it; bumps the generation when it changed.
    async fn refresh(&self, live: &Live, list: ListWhich) -> Result<(), McpError> {
        if !self.supports(live, list) {
            let mut catalog = self.lock_catalog();
            match list {
                ListWhich::Tools => catalog.tools = Some(empty_cache(live.epoch)),
                ListWhich::Resources => catalog.resources = Some(empty_cache(live.epoch)),
                ListWhich::Templates => catalog.templates = Some(empty_cache(live.epoch)),
                ListWhich::Prompts => catalog.prompts = Some(empty_cache(live.epoch)),
            }
            return Ok(());
        }
        let kind = match list {
            ListWhich::Tools => ListKind::Tools,
            ListWhich::Resources | ListWhich::Templates => ListKind::Resources,
            ListWhich::Prompts => ListKind::Prompts,
        };
        let change_epoch = self.lock_catalog().epoch(kind);
        let peer = live.service.peer().clone();
        let timeout = self.spec.request_timeout;
        let name = self.name().to_owned();
        let page =
            move |cursor: Option<String>| PaginatedRequestParams::default().with_cursor(cursor);
        let label = match list {
            ListWhich::Tools => "tools/list",
            ListWhich::Resources => "resources/list",
            ListWhich::Templates => "resources/templates/list",
            ListWhich::Prompts => "prompts/list",
        };
        macro_rules! fetch {
            ($method:ident, $field:ident) => {{
                let listed = list_pages(|cursor| {
                    let peer = peer.clone();
                    let params = page(cursor);
                    async move {
                        let result = peer.$method(Some(params)).await?;
                        Ok((result.$field, result.next_cursor, result.ttl_ms))
                    }
                });
                bounded(&name, label, timeout, listed).await?
            }};
        }
        let now_epoch = live.epoch;
        let mut catalog_warning = None;
        let note_truncation = |truncated: bool, warning: &mut Option<String>| {
            if truncated {
                *warning = Some(format!(
                    "{label} stopped after {} pages (the safety limit); the list may be incomplete",
                    crate::catalog::PAGE_LIMIT
                ));
            }
        };
        macro_rules! fetch_and_store {
            ($method:ident, $field:ident, $slot:ident) => {{
                let listed = fetch!($method, $field);
                note_truncation(listed.truncated, &mut catalog_warning);
                self.lock_catalog().store(
                    |catalog| &mut catalog.$slot,
                    cache_of(listed, change_epoch, now_epoch),
                );
            }};
        }
        match list {
            ListWhich::Tools => fetch_and_store!(list_tools, tools, tools),
            ListWhich::Resources => fetch_and_store!(list_resources, resources, resources),
            ListWhich::Templates => {
                fetch_and_store!(list_resource_templates, resource_templates, templates)
            }
            ListWhich::Prompts => fetch_and_store!(list_prompts, prompts, prompts),
        }
        if let Some(warning) = catalog_warning {
            tracing::warn!(server = %self.name(), "{warning}");
            self.lock_catalog().warn(warning);
        }
        Ok(())
    }

    /// Whether the cached list is usable without refetching.
    fn cached_fresh(&self, list: ListWhich, connection_epoch: u64) -> bool {
        let catalog = self.lock_catalog();
        match list {
            ListWhich::Tools => catalog
                .tools
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.tools_epoch, connection_epoch)),
            ListWhich::Resources => catalog
                .resources
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.resources_epoch, connection_epoch)),
            ListWhich::Templates => catalog
                .templates
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.resources_epoch, connection_epoch)),
            ListWhich::Prompts => catalog
                .prompts
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.prompts_epoch, connection_epoch)),
        }
    }

    /// Makes sure `list` is current: connects lazily, refetches when stale. A down server
    /// keeps its last lists; the failure is returned only when there is nothing to show.
    async fn ensure_list(&self, list: ListWhich) -> Result<(), McpError> {
        let live = match self.connection().await {
            Ok(live) => live,
            Err(failure) => {
                if self.has_cached(list) {
                    return Ok(());
                }
                return Err(failure);
            }
        };
        if self.cached_fresh(list, live.epoch) {
            return Ok(());
        }
        match self.refresh(&live, list).await {
            Ok(()) => Ok(()),
            Err(error) if self.has_cached(list) => {
                self.lock_catalog().warn(format!(
                    "refreshing a list failed, the last one is kept: {error}"
                ));
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    fn has_cached(&self, list: ListWhich) -> bool {
        let catalog = self.lock_catalog();
        match list {
            ListWhich::Tools => catalog.tools.is_some(),
            ListWhich::Resources => catalog.resources.is_some(),
            ListWhich::Templates => catalog.templates.is_some(),
            ListWhich::Prompts => catalog.prompts.is_some(),
        }
    }

    /// The filtered tools, fetched when stale.
    pub async fn tools(&self) -> Result<Vec<McpTool>, McpError> {
        self.ensure_list(ListWhich::Tools).await?;
        let catalog = self.lock_catalog();
        Ok(catalog
            .tools
            .as_ref()
            .map(|cached| self.filtered(&cached.items))
            .unwrap_or_default())
    }

    /// The items of `list` in the cache `slot`, fetched when stale; empty when there are none.
    async fn current_items<T: Clone>(
        &self,
        list: ListWhich,
        slot: fn(&CatalogCache) -> &Option<Cached<T>>,
    ) -> Result<Vec<T>, McpError> {
        self.ensure_list(list).await?;
        let catalog = self.lock_catalog();
        Ok(slot(&catalog)
            .as_ref()
            .map(|cached| cached.items.clone())
            .unwrap_or_default())
    }

    pub async fn resources(&self) -> Result<Vec<Resource>, McpError> {
        self.current_items(ListWhich::Resources, |catalog| &catalog.resources)
            .await
    }

    pub async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, McpError> {
        self.current_items(ListWhich::Templates, |catalog| &catalog.templates)
            .await
    }

    pub async fn prompts(&self) -> Result<Vec<Prompt>, McpError> {
        self.current_items(ListWhich::Prompts, |catalog| &catalog.prompts)
            .await
    }

    /// Every list of this server (connecting it even when deferred).
    pub async fn catalog(&self) -> Result<Catalog, McpError> {
        let tools = self.tools().await?;
        let resources = self.or_warn(self.resources().await, "resources");
        let resource_templates =
            self.or_warn(self.resource_templates().await, "resource templates");
        let prompts = self.or_warn(self.prompts().await, "prompts");
        let instructions = self.lock_state().instructions.clone();
        let catalog = self.lock_catalog();
        Ok(Catalog {
            server: self.spec.name.clone(),
            tools,
            resources,
            resource_templates,
            prompts,
            instructions,
            generation: catalog.generation,
            warnings: catalog.warnings.clone(),
        })
    }

    /// A list that could not be fetched is empty, with a warning: never the end of the catalogue.
    fn or_warn<T>(&self, listed: Result<Vec<T>, McpError>, what: &str) -> Vec<T> {
        listed.unwrap_or_else(|error| {
            self.lock_catalog()
                .warn(format!("listing {what} failed: {}", error.what()));
            Vec::new()
        })
    }

    pub fn warnings(&self) -> Vec<String> {
        self.lock_catalog().warnings.clone()
    }

    // ---------------------------------------------------------------- calls

    /// Calls one tool: resolves it in the discovered, filtered set first; never re-sends.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        options: CallOptions,
    ) -> Result<CallOutcome, McpError> {
        let known = {
            let has_tools = self.lock_catalog().tools.is_some();
            if !has_tools {
                self.ensure_list(ListWhich::Tools).await?;
            }
            let catalog = self.lock_catalog();
            catalog
                .tools
                .as_ref()
                .is_some_and(|cached| cached.items.iter().any(|known| known.name == tool))
        };
        if !known || !self.spec.tool_filter.admits(tool) {
            return Err(McpError::new(
                self.name(),
                FailureKind::UnknownTool,
                format!("offers no tool named \"{tool}\""),
                Some("list the server's tools to see what it offers"),
            ));
        }
        let live = self.connection().await.map_err(|failure| {
            if failure.kind() == FailureKind::Stopped {
                McpError::new(
                    self.name(),
                    FailureKind::Stopped,
                    format!("was stopped by the operator; \"{tool}\" was not called"),
                    Some(&self.reconnect_hint()),
                )
            } else {
                failure
            }
        })?;
        let deadline = tokio::time::Instant::now() + self.spec.tool_timeout;
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let mut url_retries_left = URL_ELICITATION_RETRIES;
        for _round in 0..MAX_INPUT_ROUNDS {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Err(McpError::timeout(
                    self.name(),
                    &format!("\"{tool}\""),
                    self.spec.tool_timeout,
                ));
            }
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let handle = live
                .service
                .peer()
                .send_request_with_option(request, PeerRequestOptions::with_timeout(remaining))
                .await
                .map_err(|error| self.request_failure(tool, &error))?;
            let _route = options.progress.clone().map(|sender| {
                live.context
                    .route_progress(handle.progress_token.clone(), sender)
            });
            let request_id = handle.id.clone();
            let peer = handle.peer.clone();
            let response = tokio::select! {
                response = handle.await_response() => response,
                () = options.cancel.cancelled() => {
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(request_id),
                            Some("cancelled by the caller".to_owned()),
                        ))
                        .await;
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Cancelled,
                        format!("the call to \"{tool}\" was cancelled"),
                        None,
                    ));
                }
            };
            match response {
                Ok(ServerResult::CallToolResult(result)) => {
                    return Ok(CallOutcome {
                        identity: ToolIdentity::new(self.spec.name.clone(), tool.to_owned()),
                        result,
                    });
                }
                Ok(ServerResult::InputRequiredResult(input)) => {
                    let (responses, state) = self.answer_input_requests(&live, tool, input).await?;
                    params.input_responses = responses;
                    params.request_state = state;
                }
                Ok(ServerResult::EmptyResult(_)) => {
                    return Ok(CallOutcome {
                        identity: ToolIdentity::new(self.spec.name.clone(), tool.to_owned()),
                        result: CallToolResult::success(Vec::new()),
                    });
                }
                Ok(_other) => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Protocol,
                        format!(
                            "answered the call to \"{tool}\" with something that is not a tool result"
                        ),
                        Some("check the server's version and logs"),
                    ));
                }
                Err(ServiceError::Timeout { .. }) => {
                    return Err(McpError::timeout(
                        self.name(),
                        &format!("\"{tool}\""),
                        self.spec.tool_timeout,
                    ));
                }
                // Retrying here is not an implicit re-send of a call that may have applied an
                // effect: -32042 (URLElicitationRequiredError) means the server refused to run
                // the request until the user completes the URL elicitation(s) it names. The
                // call is sent again only after the user said they completed them, at most
                // `URL_ELICITATION_RETRIES` times and within the call's own deadline.
                Err(ServiceError::McpError(data)) if data.code.0 == URL_ELICITATION_REQUIRED => {
                    let elicitations = url_elicitations(&data);
                    self.complete_url_elicitations(
                        &live,
                        tool,
                        &data.message,
                        &elicitations,
                        url_retries_left,
                        deadline,
                        &options.cancel,
                    )
                    .await?;
                    url_retries_left -= 1;
                }
                Err(error) => return Err(self.call_failure(&live, tool, &error).await),
            }
        }
        Err(McpError::new(
            self.name(),
            FailureKind::Protocol,
            format!("kept asking for input on \"{tool}\" for {MAX_INPUT_ROUNDS} rounds"),
            Some("check the server's logs"),
        ))
    }

    /// A call answered -32042: asks the installed handler to have the user open each URL. `Ok`
    /// when the user completed every one and a retry is still allowed; otherwise the failure,
    /// which names every URL (headless: no handler, so fail closed with where to go).
    #[allow(clippy::too_many_arguments)]
    async fn complete_url_elicitations(
        &self,
        live: &Live,
        tool: &str,
        server_message: &str,
        elicitations: &[UrlElicitation],
        retries_left: u32,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<(), McpError> {
        let urls = elicitations
            .iter()
            .map(|elicitation| elicitation.url.as_str())
            .collect::<Vec<_>>()
            .join(" and ");
        let needs = |why: &str| {
            let what = if urls.is_empty() {
                format!(
                    "\"{tool}\" needs a URL elicitation the server did not describe ({server_message}); {why}"
                )
            } else {
                format!("\"{tool}\" needs you to open {urls} first ({server_message}); {why}")
            };
            McpError::new(
                self.name(),
                FailureKind::ElicitationRequired,
                what,
                Some("open the URL in a browser, finish what it asks, then call the tool again"),
            )
        };
        if elicitations.is_empty() {
            return Err(needs("the server did not run the call"));
        }
        let Some(handler) = live.context.elicitation.clone() else {
            return Err(needs("the server did not run the call"));
        };
        if retries_left == 0 {
            return Err(needs(
                "the server asked again after the retry, so the call was not sent a third time",
            ));
        }
        for elicitation in elicitations {
            let request = crate::client::ElicitationRequest {
                server: self.name().to_owned(),
                kind: crate::client::ElicitationKind::Url {
                    message: elicitation.message.clone(),
                    url: elicitation.url.clone(),
                },
            };
            let answer = tokio::select! {
                answer = tokio::time::timeout_at(deadline, handler.elicit(request)) => answer,
                () = cancel.cancelled() => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Cancelled,
                        format!("the call to \"{tool}\" was cancelled while waiting for {}", elicitation.url),
                        None,
                    ));
                }
            };
            match answer {
                Ok(crate::client::ElicitationResponse::Accept(_)) => {}
                Ok(_declined_or_cancelled) => {
                    return Err(needs(
                        "the user did not complete it, so the call was not sent again",
                    ));
                }
                Err(_elapsed) => {
                    return Err(McpError::timeout(
                        self.name(),
                        &format!("\"{tool}\" (waiting for {})", elicitation.url),
                        self.spec.tool_timeout,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Answers an `input_required` result: elicitation through the installed handler, roots; sampling declined.
    async fn answer_input_requests(
        &self,
        live: &Live,
        tool: &str,
        input: InputRequiredResult,
    ) -> Result<(Option<InputResponses>, Option<String>), McpError> {
        let requests = input.input_requests.unwrap_or_default();
        if requests.is_empty() && input.request_state.is_none() {
            return Err(McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("asked for input on \"{tool}\" without saying what it needs"),
                None,
            ));
        }
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    serde_json::to_value(live.context.elicit(request.params).await)
                }
                InputRequest::ListRoots(_) => serde_json::to_value(live.context.roots()),
                InputRequest::CreateMessage(request) => {
                    match live.context.sample(request.params).await {
                        Ok(result) => serde_json::to_value(result),
                        Err(declined) => {
                            return Err(McpError::new(
                                self.name(),
                                FailureKind::Protocol,
                                format!(
                                    "\"{tool}\" asked the client to sample a model: {}",
                                    declined.message
                                ),
                                Some(
                                    "only for a server you trust: set `sampling = true` in its entry",
                                ),
                            ));
                        }
                    }
                }
                _ => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Protocol,
                        format!("\"{tool}\" asked for a kind of input warden does not know"),
                        Some("check the server's version"),
                    ));
                }
            };
            let answer = answer.map_err(|error| {
                McpError::new(
                    self.name(),
                    FailureKind::Protocol,
                    format!("can't encode an input response: {error}"),
                    None,
                )
            })?;
            responses.insert(key, answer);
        }
        Ok((
            (!responses.is_empty()).then_some(responses),
            input.request_state,
        ))
    }

    /// The server forgot the session while `tool` was on its way: the call is not re-sent; the
    /// connection is renewed now (supervised on failure) so the next call finds a session.
    async fn session_forgotten(&self, live: &Live, tool: &str) -> McpError {
        let renewed = self.renew_session(live.epoch).await;
        let hint = match &renewed {
            Ok(()) => {
                "a new session is open; check whether the call took effect before calling again"
                    .to_owned()
            }
            Err(error) => format!(
                "reconnecting failed ({}); warden keeps trying",
                error.what()
            ),
        };
        McpError::new(
            self.name(),
            FailureKind::SessionForgotten,
            format!(
                "the server forgot the session; the call to \"{tool}\" may or may not have run — not re-sent"
            ),
            Some(&hint),
        )
    }

    /// Replaces the connection of `epoch` by a new one, unless that already happened. A failed
    /// reconnect leaves the server down under supervision.
    async fn renew_session(&self, epoch: u64) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            if state.stopped {
                return Err(self.stopped_failure());
            }
            if state.live.as_ref().is_none_or(|live| live.epoch != epoch) {
                return Ok(());
            }
            state.live.take()
        };
        if let Some(previous) = previous {
            previous.close().await;
        }
        let outcome = self.connect_now(true).await.map(|_| ());
        if outcome.is_err() {
            let supervise = {
                let mut state = self.lock_state();
                if state.recoveries_left > 0 && state.phase == ServerState::Down {
                    state.recoveries_left -= 1;
                    true
                } else {
                    false
                }
            };
            if supervise && let Some(slot) = self.weak_self.upgrade() {
                tokio::spawn(async move { slot.supervise().await });
            }
        }
        outcome
    }

    fn request_failure(&self, what: &str, error: &ServiceError) -> McpError {
        if let ServiceError::McpError(data) = error
            && let Some(tripped) = Tripped::from_error(data)
        {
            return guard_failure(self.name(), &format!("\"{what}\""), &tripped);
        }
        match error {
            ServiceError::McpError(data) => McpError::new(
                self.name(),
                FailureKind::Rpc,
                rpc_failure(&format!("\"{what}\""), data),
                None,
            ),
            ServiceError::Timeout { timeout } => {
                McpError::timeout(self.name(), &format!("\"{what}\""), *timeout)
            }
            ServiceError::TransportClosed => McpError::new(
                self.name(),
                FailureKind::Exited,
                "the connection is closed",
                Some("check the server's logs, then reconnect"),
            ),
            other => McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("\"{what}\" failed: {other}"),
                Some("check the server's logs"),
            ),
        }
    }

    /// A call failed in flight. When the connection died, the error says the server exited
    /// (with its last stderr line) and that the call was not re-sent.
    async fn call_failure(&self, live: &Live, tool: &str, error: &ServiceError) -> McpError {
        if let ServiceError::McpError(data) = error {
            return match Tripped::from_error(data) {
                Some(Tripped::SessionForgotten) => self.session_forgotten(live, tool).await,
                Some(tripped) => guard_failure(self.name(), &format!("\"{tool}\""), &tripped),
                None => self.request_failure(tool, error),
            };
        }
        let connection_gone = matches!(
            error,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) || live.closed.is_cancelled();
        if !connection_gone {
            return self.request_failure(tool, error);
        }
        if self.lock_state().stopped {
            return McpError::new(
                self.name(),
                FailureKind::Stopped,
                format!(
                    "was stopped by the operator while \"{tool}\" was running; it may or may not have run — not re-sent"
                ),
                Some(&self.reconnect_hint()),
            );
        }
        // Let the supervisor record why the connection ended (bounded wait).
        let _ = tokio::time::timeout(Duration::from_secs(4), async {
            while self
                .lock_state()
                .live
                .as_ref()
                .is_some_and(|current| current.epoch == live.epoch)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let cause = {
            let state = self.lock_state();
            state
                .failure
                .as_ref()
                .filter(|failure| failure.kind() == FailureKind::Exited)
                .map(|failure| failure.what().to_owned())
        };
        let cause = cause.unwrap_or_else(|| match self.stderr.last_line() {
            Some(line) => format!("closed the connection (its last stderr line: \"{line}\")"),
            None => "closed the connection".to_owned(),
        });
        McpError::new(
            self.name(),
            FailureKind::Exited,
            format!("{cause} while \"{tool}\" was running; the call was not re-sent"),
            Some(&format!(
                "check the server's logs, then {}",
                reconnect_advice(self.name())
            )),
        )
    }

    /// The open connection's peer and client context (connecting first if needed), for requests
    /// relayed as they are (`crate::upstream`).
    pub(crate) async fn relay_channel(
        &self,
    ) -> Result<(rmcp::Peer<RoleClient>, Arc<ClientContext>), McpError> {
        let live = self.connection().await?;
        Ok((live.service.peer().clone(), live.context.clone()))
    }

    /// Reads one resource; the caller checked it is advertised.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let live = self.connection().await?;
        let params = ReadResourceRequestParams::new(uri.to_owned());
        bounded(
            self.name(),
            uri,
            self.spec.request_timeout,
            live.service.read_resource(params),
        )
        .await
    }

    /// The server's declared capabilities as JSON (connecting it if needed).
    pub async fn server_capabilities(&self) -> Result<Value, McpError> {
        let live = self.connection().await?;
        Ok(live
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or(Value::Null))
    }

    /// One raw `skills/list` page, whatever its shape: the skills layer validates it.
    pub async fn skills_list_page(&self, cursor: Option<&str>) -> Result<Value, McpError> {
        let live = self.connection().await?;
        let params = cursor.map(|cursor| serde_json::json!({ "cursor": cursor }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("skills/list", params));
        let result = bounded(
            self.name(),
            "skills/list",
            self.spec.request_timeout,
            live.service.send_request(request),
        )
        .await?;
        serde_json::to_value(&result).map_err(|error| {
            McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("skills/list answered with an unreadable result: {error}"),
                None,
            )
        })
    }

    /// The connection and list-change counters (see [`crate::ListEpochs`]).
    pub fn list_epochs(&self) -> crate::runtime::ListEpochs {
        let connection = self.lock_state().epoch;
        let catalog = self.lock_catalog();
        crate::runtime::ListEpochs {
            connection,
            resources: catalog.resources_epoch,
            prompts: catalog.prompts_epoch,
        }
    }

    /// Gets one prompt with its arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<GetPromptResult, McpError> {
        let live = self.connection().await?;
        let params = GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments);
        bounded(
            self.name(),
            name,
            self.spec.request_timeout,
            live.service.get_prompt(params),
        )
        .await
    }

    /// Closes the connection and kills the process group; the slot stays closed.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let live = {
            let mut state = self.lock_state();
            state.shut_down = true;
            state.live.take()
        };
        if let Some(live) = live {
            live.close().await;
        }
    }
}

/// `<what> failed: <message> (JSON-RPC error <code>)`; a -32042 also names the URL(s) to open,
/// so no path drops them.
fn rpc_failure(what: &str, data: &rmcp::model::ErrorData) -> String {
    let failed = format!(
        "{what} failed: {} (JSON-RPC error {})",
        data.message, data.code.0
    );
    if data.code.0 != URL_ELICITATION_REQUIRED {
        return failed;
    }
    let urls = url_elicitations(data)
        .into_iter()
        .map(|elicitation| elicitation.url)
        .collect::<Vec<_>>();
    if urls.is_empty() {
        failed
    } else {
        format!(
            "{failed}; open {} first, then try again",
            urls.join(" and ")
        )
    }
}

/// One URL elicitation named in the data of a -32042 error.
#[derive(Debug, Clone)]
struct UrlElicitation {
    url: String,
    message: String,
}

/// The URL elicitations of a -32042 error (`data.elicitations[]`, each `mode: "url"` with `url`,
/// `message`, `elicitationId`); entries without a URL are skipped.
fn url_elicitations(error: &rmcp::model::ErrorData) -> Vec<UrlElicitation> {
    error
        .data
        .as_ref()
        .and_then(|data| data.get("elicitations"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| {
            entry
                .get("mode")
                .and_then(Value::as_str)
                .is_none_or(|mode| mode == "url")
        })
        .filter_map(|entry| {
            let url = entry.get("url").and_then(Value::as_str)?;
            Some(UrlElicitation {
                url: url.to_owned(),
                message: entry
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            })
        })
        .collect()
}

fn empty_cache<T>(connection_epoch: u64) -> Cached<T> {
    Cached {
        items: Vec::new(),
        fetched_at: Instant::now(),
        ttl: None,
        change_epoch: 0,
        connection_epoch,
    }
}

fn cache_of<T>(listed: Listed<T>, change_epoch: u64, connection_epoch: u64) -> Cached<T> {
    Cached {
        items: listed.items,
        fetched_at: Instant::now(),
        ttl: listed.ttl_ms.map(Duration::from_millis),
        change_epoch,
        connection_epoch,
    }
}

/// Runs one request under its deadline; dropping it on timeout sends `notifications/cancelled`.
async fn bounded<T, F>(
    server: &str,
    what: &str,
    deadline: Duration,
    future: F,
) -> Result<T, McpError>
where
    F: std::future::Future<Output = Result<T, ServiceError>>,
{
    match tokio::time::timeout(deadline, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(ServiceError::McpError(data))) if Tripped::from_error(&data).is_some() => {
            let tripped = Tripped::from_error(&data).unwrap_or(Tripped::SessionForgotten);
            Err(guard_failure(server, what, &tripped))
        }
        Ok(Err(ServiceError::McpError(data))) => Err(McpError::new(
            server,
            FailureKind::Rpc,
            rpc_failure(what, &data),
            None,
        )),
        Ok(Err(ServiceError::TransportClosed)) => Err(McpError::new(
            server,
            FailureKind::Exited,
            format!("the connection closed during {what}"),
            Some("check the server's logs, then reconnect"),
        )),
        Ok(Err(other)) => Err(McpError::new(
            server,
            FailureKind::Protocol,
            format!("{what} failed: {other}"),
            Some("check the server's logs"),
        )),
        Err(_elapsed) => Err(McpError::timeout(server, what, deadline)),
    }
}

/// A guard that ended a request, as the one-line failure.
fn guard_failure(server: &str, what: &str, tripped: &Tripped) -> McpError {
    match tripped {
        Tripped::SessionForgotten => McpError::new(
            server,
            FailureKind::SessionForgotten,
            format!("the server forgot the session during {what}; it was not re-sent"),
            Some("try again: warden opens a new session"),
        ),
        limit => McpError::new(
            server,
            FailureKind::ResponseLimit,
            format!(
                "the response to {what} streamed {}; the request was ended",
                limit.describe()
            ),
            Some("the server sent far more than one answer needs; check the server"),
        ),
    }
}

/// Why opening a connection failed, and whether the plain `initialize` handshake may still work.
enum OpenFailure {
    Failed(McpError),
    RetryWithInitialize(McpError),
}

impl OpenFailure {
    /// A discover probe answered with a result of the wrong type: the peer predates 2026-07-28.
    fn peer_predates_discover(error: &rmcp::service::ClientInitializeError) -> bool {
        use rmcp::service::ClientInitializeError;
        matches!(
            error,
            ClientInitializeError::ExpectedInitResult(_)
                | ClientInitializeError::ExpectedInitResponse(_)
        )
    }

    fn classify(error: &rmcp::service::ClientInitializeError, failure: McpError) -> Self {
        if Self::peer_predates_discover(error) {
            OpenFailure::RetryWithInitialize(failure)
        } else {
            OpenFailure::Failed(failure)
        }
    }

    fn into_error(self) -> McpError {
        match self {
            OpenFailure::Failed(error) | OpenFailure::RetryWithInitialize(error) => error,
        }
    }
}

/// Wraps a transport so the runtime learns when the connection ends.
struct Observed<T> {
    inner: T,
    closed: CancellationToken,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Observed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        if message.is_none() {
            self.closed.cancel();
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.cancel();
        self.inner.close().await
    }
}

/// How an operator reconnects a server that went down: the words every "down" failure ends with.
fn reconnect_advice(server: &str) -> String {
    format!(
        "reconnect it: run the command again (a new session connects afresh), or in \
         `warden chat` use `/mcp restart {server}`"
    )
}
