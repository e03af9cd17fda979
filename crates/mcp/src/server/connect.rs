//! Connecting a server: lazily on first use, over stdio, Streamable HTTP or legacy HTTP+SSE, probing 2026-07-28 and falling back to `initialize`.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use rmcp::model::ProtocolVersion;
use rmcp::serve_client_with_lifecycle;
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::state::ServerState;
use super::{Live, ServerSlot};
use crate::client::{ClientContext, ListKind, WardenClient};
use crate::error::{FailureKind, McpError};
use crate::runtime::ProtocolMode;
use crate::spec::TransportSpec;
use crate::stdio::StdioLaunch;
use crate::stdio_transport::StdioTransport;
use crate::{http, stdio};

/// Largest single MCP message accepted (stdio line, SSE event, JSON body): big results fit,
/// a runaway server cannot exhaust memory.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Why opening a connection failed, and whether the plain `initialize` handshake may still work.
pub(super) enum OpenFailure {
    Failed(McpError),
    RetryWithInitialize(McpError),
}

impl OpenFailure {
    /// A discover probe answered with a result of the wrong type: the peer predates 2026-07-28.
    /// Whether the server answered `server/discover` as a server of an older revision does:
    /// with something other than a discover result, or by naming only revisions that begin
    /// with `initialize` (a server that knows of `server/discover` but does not speak
    /// 2026-07-28 answers "unsupported protocol version" with the revisions it does speak).
    fn peer_predates_discover(error: &rmcp::service::ClientInitializeError) -> bool {
        use rmcp::service::ClientInitializeError;
        match error {
            ClientInitializeError::ExpectedInitResult(_)
            | ClientInitializeError::ExpectedInitResponse(_) => true,
            ClientInitializeError::NoCompatibleProtocolVersion {
                server_supported, ..
            } => {
                !server_supported.is_empty()
                    && server_supported.iter().all(ProtocolVersion::has_initialize)
            }
            _ => false,
        }
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

/// Wraps a transport so the runtime learns when the connection ends, that a list changed the
/// moment the server says so, and routes progress as it arrives.
pub(super) struct Observed<T> {
    pub(super) inner: T,
    pub(super) closed: CancellationToken,
    /// The server whose list-change counters a `list_changed` notification moves.
    pub(super) slot: Weak<ServerSlot>,
    /// Where a progress notification is routed.
    pub(super) context: Arc<ClientContext>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Observed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    /// Cancel-safe as the inner transport is: what is done to a message here is done before
    /// it is returned, with no await in between.
    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await;
            match message {
                None => self.closed.cancel(),
                // Routed and counted here, in the order the server sent them: rmcp hands a
                // notification to a task of its own but a response straight to its waiter, so
                // a progress update or a list change sent just before a result would otherwise
                // reach its caller after the result (a tool that adds a tool would return
                // before the change is noticed, and the next model request would go out with
                // the old list).
                Some(rmcp::model::JsonRpcMessage::Notification(
                    rmcp::model::JsonRpcNotification {
                        notification:
                            rmcp::model::ServerNotification::ProgressNotification(progress),
                        ..
                    },
                )) => {
                    self.context.deliver_progress(progress.params);
                    continue;
                }
                Some(rmcp::model::JsonRpcMessage::Notification(ref notification)) => {
                    if let Some(kind) = ListKind::changed_by(&notification.notification)
                        && let Some(slot) = self.slot.upgrade()
                    {
                        slot.note_list_change(kind);
                    }
                }
                Some(_) => {}
            }
            return message;
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.cancel();
        self.inner.close().await
    }
}

/// On a 2026-07-28 connection, what rmcp puts in every request's `_meta` (the protocol
/// version, the client's identity and capabilities), for the requests written directly.
fn stateless_request_meta(
    service: &RunningService<RoleClient, WardenClient>,
) -> Option<rmcp::model::RequestMetaObject> {
    let info = service.peer_info()?;
    if info.protocol_version < ProtocolVersion::V_2026_07_28 {
        return None;
    }
    let config = rmcp::ClientHandler::get_info(service.service());
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_protocol_version(info.protocol_version.clone());
    meta.set_client_info(config.client_info);
    meta.set_client_capabilities(config.capabilities);
    Some(meta)
}

impl ServerSlot {
    /// The live connection, connecting lazily on first use. A failed or down server answers
    /// with its failure; only [`Self::reconnect`] (or supervision) tries again.
    pub(super) async fn connection(&self) -> Result<Arc<Live>, McpError> {
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
        // Boxed: only a call that must connect builds the connecting future, so every other
        // call's future stays small (it is moved whole when the call is boxed).
        Box::pin(self.connect_now(false)).await
    }

    /// Whether an OAuth server that needed a login has a stored token for its URL now.
    pub(super) fn token_saved_since(&self) -> bool {
        match &self.spec.transport {
            TransportSpec::StreamableHttp {
                auth: crate::spec::HttpAuth::OAuth(settings),
                ..
            } => settings.has_usable_token(),
            _ => false,
        }
    }

    /// Connects eagerly (for `required` servers); the failure when it cannot.
    pub(crate) async fn connect_eagerly(&self) -> Result<(), McpError> {
        self.connection().await.map(|_| ())
    }

    /// Connects under the start-up deadline; the caller holds `connect_lock`.
    pub(super) async fn connect_now(&self, is_reconnect: bool) -> Result<Arc<Live>, McpError> {
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

    pub(super) fn lifecycle(&self) -> ClientLifecycleMode {
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

    pub(super) fn client_context(&self) -> (Arc<ClientContext>, mpsc::UnboundedReceiver<ListKind>) {
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
    pub(super) async fn open_any_era(&self, epoch: u64) -> Result<Arc<Live>, McpError> {
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

    pub(super) async fn open(
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
                let stdio = StdioTransport::new(
                    self.name(),
                    spawned.stdout,
                    spawned.stdin,
                    MAX_MESSAGE_BYTES,
                );
                let direct = stdio.direct_calls();
                let transport = Observed {
                    inner: stdio,
                    closed: closed.clone(),
                    slot: self.weak_self.clone(),
                    context: context.clone(),
                };
                match serve_client_with_lifecycle(handler, transport, lifecycle).await {
                    Ok(service) => {
                        if let Some(meta) = stateless_request_meta(&service) {
                            direct.set_request_meta(meta);
                        }
                        Live {
                            epoch,
                            service,
                            context,
                            child: Some(tokio::sync::Mutex::new(control)),
                            pid,
                            closed,
                            intentional_close: AtomicBool::new(false),
                            close_reason: Arc::default(),
                            resource_listens: Mutex::default(),
                            direct: Some(direct),
                        }
                    }
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
                let egress = self.spec.egress.as_ref();
                http::check_egress(self.name(), &url, egress).map_err(OpenFailure::Failed)?;
                let client = http::build_client(self.name(), self.spec.startup_timeout, egress)
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
                    egress,
                )
                .await
                .map_err(OpenFailure::Failed)?;
                let transport = Observed {
                    inner: http::transport(authorizing, &url, headers.clone()),
                    closed: closed.clone(),
                    slot: self.weak_self.clone(),
                    context: context.clone(),
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
                        resource_listens: Mutex::default(),
                        direct: None,
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
                        if let Some(refused) = http::egress_failure(self.name(), &error) {
                            return Err(OpenFailure::Failed(refused));
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
                    self.spec.egress.as_ref(),
                )
                .await
                .map_err(OpenFailure::Failed)?;
                let close_reason = transport.close_reason();
                let transport = Observed {
                    inner: transport,
                    closed: closed.clone(),
                    slot: self.weak_self.clone(),
                    context: context.clone(),
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
                    resource_listens: Mutex::default(),
                    direct: None,
                }
            }
        };
        let live = Arc::new(live);
        self.watch_list_changes(list_changes, epoch);
        Ok(live)
    }

    /// The open connection's peer and client context (connecting first if needed), for requests
    /// relayed as they are (`crate::upstream`).
    pub(crate) async fn relay_channel(
        &self,
    ) -> Result<(rmcp::Peer<RoleClient>, Arc<ClientContext>), McpError> {
        let live = self.connection().await?;
        Ok((live.service.peer().clone(), live.context.clone()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use rmcp::model::{JsonRpcMessage, NumberOrString, ProgressToken};
    use serde_json::json;
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn line(message: serde_json::Value) -> Vec<u8> {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        line
    }

    fn progress(token: i64, progress: f64) -> Vec<u8> {
        line(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": progress}}))
    }

    #[tokio::test]
    async fn progress_reaches_its_route_before_the_answer_sent_after_it() {
        let (mut server, client) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(client);
        let (list_changed, _changes) = mpsc::unbounded_channel();
        let context = Arc::new(ClientContext {
            server: "t".to_owned(),
            client_name: "warden".to_owned(),
            client_version: "0".to_owned(),
            workspace_root: std::path::PathBuf::from("/"),
            elicitation: None,
            skills_extension: false,
            sampling: None,
            progress: Arc::default(),
            list_changed,
            events: crate::upstream::UpstreamEvents::default(),
        });
        let mut transport = Observed {
            inner: StdioTransport::new("t", read, write, 100_000),
            closed: CancellationToken::new(),
            slot: Weak::new(),
            context: context.clone(),
        };
        let (sender, mut updates) = mpsc::channel(8);
        let route = context.route_progress(ProgressToken(NumberOrString::Number(7)), sender);
        let mut input = progress(7, 1.0);
        input.extend(progress(7, 2.0));
        // An update for a request whose route is not set yet is kept for it.
        input.extend(progress(8, 5.0));
        input.extend(line(json!({"jsonrpc": "2.0", "id": 1,
                                 "result": {"content": [{"type": "text", "text": "done"}]}})));
        server.write_all(&input).await.unwrap();
        // The progress notifications are routed here and not handed on: the answer comes first.
        let answer = transport.receive().await.expect("the answer");
        assert!(matches!(answer, JsonRpcMessage::Response(_)));
        assert_eq!(updates.try_recv().unwrap().progress, 1.0);
        assert_eq!(updates.try_recv().unwrap().progress, 2.0);
        assert!(updates.try_recv().is_err());
        let (late_sender, mut late) = mpsc::channel(8);
        let _late_route =
            context.route_progress(ProgressToken(NumberOrString::Number(8)), late_sender);
        assert_eq!(late.try_recv().unwrap().progress, 5.0);
        // The finished request's route goes the moment its guard does.
        drop(route);
        let still_routed = context
            .progress
            .lock()
            .unwrap()
            .contains_key(&ProgressToken(NumberOrString::Number(7)));
        assert!(!still_routed);
        drop(server);
        assert!(transport.receive().await.is_none());
        assert!(transport.closed.is_cancelled());
    }
}
