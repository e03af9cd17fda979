//! Questions for the downstream user: approvals of gateway calls, asked of the client that made
//! the call as a form elicitation when it supports elicitation (denied with the reason
//! otherwise), and upstream servers' elicitations and sampling requests, relayed to the client
//! whose call is running on that server — declined when no such client can be asked, or when
//! calls of more than one client run there and the request cannot be told apart. Sampling
//! crosses the gate first, as `answer_mcp_sampling` from the `server` surface.

// Sampling is deprecated by SEP-2577 but still part of 2025-11-25, which the gateway relays.
#![allow(deprecated)]

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::Peer;
use rmcp::RoleServer;
use rmcp::model::CreateMessageRequestParams;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;
use warden_host::{SamplingAnswerer, SamplingArguments, SamplingResult, sampling_tool};
use warden_mcp::{ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse};
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture, NoApprover};

/// How long a downstream person has to answer an approval.
const APPROVAL_WAIT: Duration = Duration::from_secs(600);

/// The downstream clients that can be asked, by the caller string of their calls.
#[derive(Clone, Default)]
pub struct PeerDirectory {
    peers: Arc<Mutex<HashMap<String, Peer<RoleServer>>>>,
    /// Calls running on upstream servers, oldest first, with what their clients can be asked.
    running: Arc<Mutex<Vec<RunningCall>>>,
}

struct RunningCall {
    id: u64,
    server: String,
    /// The downstream connection the call came from.
    connection: u64,
    channel: ClientChannel,
    asks: ClientAsks,
}

/// How an upstream's request reaches the client whose call it belongs to.
#[derive(Clone)]
pub(crate) enum ClientChannel {
    /// A 2025-11-25 session: asked mid-call on its peer.
    Peer(Peer<RoleServer>),
    /// A 2026-07-28 client whose call warden holds open: the request becomes one of the
    /// `inputRequests` of the `input_required` result the client gets, answered by its retry.
    Bridge(BridgeChannel),
}

/// Where a bridged call's questions go, and whether the call is held for its client's retry.
#[derive(Clone)]
pub(crate) struct BridgeChannel {
    pub asks: tokio::sync::mpsc::UnboundedSender<AskedInput>,
    /// Set while the call waits for its client's retry: its upstream, blocked on the answers,
    /// is not the one asking anything new, so such a call does not make attribution ambiguous
    /// (a client that never retries would otherwise block every other client's questions).
    pub held: Arc<std::sync::atomic::AtomicBool>,
}

impl BridgeChannel {
    fn is_held(&self) -> bool {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// One request of an upstream (of an older revision) for a bridged client to answer.
pub(crate) struct AskedInput {
    pub request: rmcp::model::InputRequest,
    pub answer: tokio::sync::oneshot::Sender<serde_json::Value>,
}

impl ClientChannel {
    /// Asks a bridged client and waits for its answer (`None`: not bridged, or no answer came).
    async fn ask_bridged(&self, request: serde_json::Value) -> Option<serde_json::Value> {
        let Self::Bridge(bridge) = self else {
            return None;
        };
        let request = serde_json::from_value(request).ok()?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        bridge.asks.send(AskedInput { request, answer }).ok()?;
        answered.await.ok()
    }
}

/// What a downstream client can be asked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClientAsks {
    pub elicitation: bool,
    pub sampling: bool,
    pub roots: bool,
}

impl ClientAsks {
    /// What the client of this request declared it can be asked.
    pub(crate) fn of(context: &rmcp::service::RequestContext<RoleServer>) -> Self {
        let capabilities = context.client_capabilities();
        let declared = |has: fn(&rmcp::model::ClientCapabilities) -> bool| {
            capabilities.as_ref().is_some_and(has)
        };
        Self {
            elicitation: declared(|capabilities| capabilities.elicitation.is_some()),
            sampling: declared(|capabilities| capabilities.sampling.is_some()),
            roots: declared(|capabilities| capabilities.roots.is_some()),
        }
    }
}

static RUNNING_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for PeerDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("PeerDirectory")
            .field("askable", &count)
            .finish()
    }
}

impl PeerDirectory {
    /// Makes `peer` askable for calls made as `caller` until the guard drops.
    pub(crate) fn register(&self, caller: &str, peer: Peer<RoleServer>) -> Registration {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(caller.to_owned(), peer);
        Registration {
            peers: self.peers.clone(),
            caller: caller.to_owned(),
        }
    }

    /// Records that `peer`'s call runs on `server` until the guard drops, so that the server's
    /// elicitations reach that client.
    pub(crate) fn running_on(
        &self,
        server: &str,
        connection: u64,
        channel: ClientChannel,
        asks: ClientAsks,
    ) -> RunningGuard {
        let id = RUNNING_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(RunningCall {
                id,
                server: server.to_owned(),
                connection,
                channel,
                asks,
            });
        RunningGuard {
            running: self.running.clone(),
            id,
        }
    }

    /// The client whose call caused a request `server` sent: the one client connection with
    /// calls running there, if it can be asked this way. A server's request names no call, so
    /// with calls of two clients running there it cannot be told whose it is: nobody is asked
    /// (one client never sees what another's call set off).
    fn running_client(
        &self,
        server: &str,
        can: impl Fn(ClientAsks) -> bool,
    ) -> Result<ClientChannel, Unattributed> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let asking = |call: &&RunningCall| {
            call.server == server
                && !matches!(&call.channel, ClientChannel::Bridge(bridge) if bridge.is_held())
        };
        let mut on_server = running.iter().filter(asking);
        let Some(first) = on_server.next() else {
            return Err(Unattributed::NoCall);
        };
        if on_server.any(|call| call.connection != first.connection) {
            return Err(Unattributed::SeveralClients);
        }
        running
            .iter()
            .rev()
            .filter(asking)
            .find(|call| call.connection == first.connection && can(call.asks))
            .map(|call| call.channel.clone())
            .ok_or(Unattributed::CannotAsk)
    }

    fn get(&self, caller: &str) -> Option<Peer<RoleServer>> {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(caller)
            .cloned()
    }
}

/// Why a server's request found no client to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unattributed {
    /// No client's call is running on that server.
    NoCall,
    /// Calls of more than one client run there: whose caused it is unknown.
    SeveralClients,
    /// The client whose call runs there does not support the request.
    CannotAsk,
}

impl std::fmt::Display for Unattributed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NoCall => "no client of warden serve has a call running on that server",
            Self::SeveralClients => {
                "calls of several clients of warden serve run on that server, and the request \
                 does not say whose call it belongs to"
            }
            Self::CannotAsk => {
                "the client whose call runs on that server does not support this request"
            }
        })
    }
}

/// Removes a caller from the directory when dropped.
pub(crate) struct Registration {
    peers: Arc<Mutex<HashMap<String, Peer<RoleServer>>>>,
    caller: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.caller);
    }
}

/// Forgets a running call when dropped.
pub(crate) struct RunningGuard {
    running: Arc<Mutex<Vec<RunningCall>>>,
    id: u64,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|call| call.id != self.id);
    }
}

/// Relays upstream servers' elicitations to the downstream client whose call is running there.
#[derive(Debug, Clone)]
pub struct UpstreamElicitation {
    peers: PeerDirectory,
}

impl UpstreamElicitation {
    pub fn new(peers: PeerDirectory) -> Self {
        Self { peers }
    }
}

impl ElicitationHandler for UpstreamElicitation {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>> {
        Box::pin(async move {
            let Ok(channel) = self
                .peers
                .running_client(&request.server, |asks| asks.elicitation)
            else {
                return ElicitationResponse::Decline;
            };
            let params = match request.kind {
                ElicitationKind::Form { message, schema } => json!({
                    "mode": "form", "message": message, "requestedSchema": schema
                }),
                ElicitationKind::Url { message, url } => json!({
                    "mode": "url", "message": message, "url": url,
                    "elicitationId": format!("warden-{}", RUNNING_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                }),
            };
            let answer = match channel {
                ClientChannel::Peer(peer) => {
                    let Ok(params) = serde_json::from_value::<ElicitRequestParams>(params) else {
                        return ElicitationResponse::Decline;
                    };
                    peer.create_elicitation_with_timeout(params, Some(APPROVAL_WAIT))
                        .await
                        .map_err(|_| ())
                }
                bridge @ ClientChannel::Bridge(_) => bridge
                    .ask_bridged(json!({"method": "elicitation/create", "params": params}))
                    .await
                    .and_then(|answer| serde_json::from_value::<ElicitResult>(answer).ok())
                    .ok_or(()),
            };
            match answer {
                Ok(answer) => match answer.action {
                    ElicitationAction::Accept => ElicitationResponse::Accept(
                        answer
                            .content
                            .and_then(|content| match content {
                                serde_json::Value::Object(fields) => Some(fields),
                                _ => None,
                            })
                            .unwrap_or_default(),
                    ),
                    ElicitationAction::Cancel => ElicitationResponse::Cancel,
                    _ => ElicitationResponse::Decline,
                },
                Err(_) => ElicitationResponse::Decline,
            }
        })
    }

    /// A bridged 2026-07-28 client answers `roots/list` for the call it runs on the server
    /// (its roots come back in its retry); any other server gets warden's workspace root.
    fn roots(
        &self,
        server: &str,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<rmcp::model::Root>>> + Send + '_>> {
        let channel = self.peers.running_client(server, |asks| asks.roots);
        Box::pin(async move {
            let channel = channel.ok()?;
            let answer = channel
                .ask_bridged(json!({"method": "roots/list", "params": {}}))
                .await?;
            serde_json::from_value::<rmcp::model::ListRootsResult>(answer)
                .ok()
                .map(|result| result.roots)
        })
    }
}

/// Sets up `options` so the clients of `warden serve` answer what its host needs asked:
/// approvals go to the calling client (`approver`), an upstream's elicitation to the client
/// whose call runs there, and an upstream's sampling request — once the gate admitted it as
/// `answer_mcp_sampling` — to that client's model.
pub fn relay_to_clients(options: &mut warden_host::HostOptions, approver: &ElicitingApprover) {
    options.approver = Some(Arc::new(approver.clone()));
    options.elicitation = Some(Arc::new(UpstreamElicitation::new(approver.directory())));
    options
        .tools
        .push(Arc::new(sampling_tool(RelaySampling::new(
            approver.directory(),
        ))));
    options.sampling = warden_host::SamplingRoute::ThroughGate;
}

/// Who answers `answer_mcp_sampling` under `warden serve`: a server's sampling request (for
/// servers whose entry enables sampling), once the gate admitted it, relayed to the downstream
/// client whose call is running there — that client's model answers.
#[derive(Debug, Clone)]
pub struct RelaySampling {
    peers: PeerDirectory,
}

impl RelaySampling {
    pub fn new(peers: PeerDirectory) -> Self {
        Self { peers }
    }

    async fn relay(&self, request: SamplingArguments) -> Result<SamplingResult, String> {
        let channel = self
            .peers
            .running_client(&request.server, |asks| asks.sampling)
            .map_err(|why| format!("sampling request of {} declined: {why}", request.server))?;
        let messages: Vec<serde_json::Value> = request
            .turns
            .iter()
            .map(|turn| json!({"role": turn.role, "content": {"type": "text", "text": turn.text}}))
            .collect();
        let mut params = json!({"messages": messages, "maxTokens": request.max_tokens});
        if let Some(system) = &request.system_prompt {
            params["systemPrompt"] = json!(system);
        }
        let answer = match channel {
            ClientChannel::Peer(peer) => {
                let params: CreateMessageRequestParams = serde_json::from_value(params)
                    .map_err(|error| format!("warden could not relay the request: {error}"))?;
                let answer = peer
                    .create_message(params)
                    .await
                    .map_err(|error| format!("the client's model did not answer: {error}"))?;
                serde_json::to_value(&answer).unwrap_or_default()
            }
            bridge @ ClientChannel::Bridge(_) => bridge
                .ask_bridged(json!({"method": "sampling/createMessage", "params": params}))
                .await
                .ok_or_else(|| "the client's model did not answer".to_owned())?,
        };
        let text = answer
            .pointer("/content/text")
            .or_else(|| answer.pointer("/content/0/text"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(SamplingResult {
            text,
            model: answer["model"].as_str().unwrap_or("unknown").to_owned(),
        })
    }
}

impl SamplingAnswerer for RelaySampling {
    fn description(&self) -> &str {
        "Answers an MCP server's sampling request with the model of the client whose call runs on that server."
    }

    fn answer<'a>(
        &'a self,
        request: SamplingArguments,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<SamplingResult, String>> {
        Box::pin(self.relay(request))
    }
}

/// The gate's approver for `warden serve`.
#[derive(Debug, Clone, Default)]
pub struct ElicitingApprover {
    peers: PeerDirectory,
}

impl ElicitingApprover {
    pub fn new() -> Self {
        Self::default()
    }

    /// The directory the gateway registers its askable clients in.
    pub fn directory(&self) -> PeerDirectory {
        self.peers.clone()
    }
}

impl Approver for ElicitingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let peer = request
                .caller
                .as_deref()
                .and_then(|caller| self.peers.get(caller));
            let Some(peer) = peer else {
                return match NoApprover.approve(request).await {
                    ApprovalAnswer::NobodyToAsk { reason } => ApprovalAnswer::NobodyToAsk {
                        reason: format!(
                            "{reason}; the MCP client does not support elicitation, so warden \
                             cannot ask its user"
                        ),
                    },
                    other => other,
                };
            };
            let message = format!(
                "warden: allow {} ({} on server {}; {})?\narguments: {}",
                request.public_name,
                request.identity.tool,
                request.identity.server(),
                request.reason,
                request.arguments
            );
            let mut choices = vec!["allow once", "allow for this session"];
            if request.offers_always {
                choices.push("always allow");
            }
            choices.push("deny");
            let params: Result<ElicitRequestParams, _> = serde_json::from_value(json!({
                "mode": "form",
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "decision": {
                            "type": "string",
                            "title": "Decision",
                            "enum": choices,
                            "default": "deny"
                        }
                    },
                    "required": ["decision"]
                }
            }));
            let Ok(params) = params else {
                return ApprovalAnswer::NobodyToAsk {
                    reason: "warden could not build the approval question".to_owned(),
                };
            };
            match peer
                .create_elicitation_with_timeout(params, Some(APPROVAL_WAIT))
                .await
            {
                Ok(answer) if answer.action == ElicitationAction::Accept => {
                    let decision = answer
                        .content
                        .as_ref()
                        .and_then(|content| content.get("decision"))
                        .and_then(|value| value.as_str())
                        .unwrap_or("deny");
                    match decision {
                        "allow once" => ApprovalAnswer::AllowOnce,
                        "allow for this session" => ApprovalAnswer::AllowForSession,
                        "always allow" if request.offers_always => ApprovalAnswer::AllowAlways,
                        _ => ApprovalAnswer::Deny {
                            reason: Some("the user denied it".to_owned()),
                        },
                    }
                }
                Ok(_) => ApprovalAnswer::Deny {
                    reason: Some("the user declined the approval request".to_owned()),
                },
                Err(error) => ApprovalAnswer::NobodyToAsk {
                    reason: format!("asking the MCP client's user failed: {error}"),
                },
            }
        })
    }
}
