//! Questions for the downstream user: approvals of gateway calls, asked of the client that made
//! the call as a form elicitation when it supports elicitation (denied with the reason
//! otherwise), and upstream servers' elicitations, relayed to the client whose call is running
//! on that server (declined when there is none that supports elicitation).

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
use rmcp::model::{ElicitRequestParams, ElicitationAction};
use serde_json::json;
use warden_mcp::{
    ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse, SamplingAnswer,
    SamplingHandler, SamplingRequest, SamplingRole,
};
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
    peer: Peer<RoleServer>,
    asks: ClientAsks,
}

/// What a downstream client can be asked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClientAsks {
    pub elicitation: bool,
    pub sampling: bool,
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
        peer: Peer<RoleServer>,
        asks: ClientAsks,
    ) -> RunningGuard {
        let id = RUNNING_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(RunningCall {
                id,
                server: server.to_owned(),
                peer,
                asks,
            });
        RunningGuard {
            running: self.running.clone(),
            id,
        }
    }

    /// The client of the most recent call running on `server` that can be asked this way.
    fn running_client(
        &self,
        server: &str,
        can: impl Fn(ClientAsks) -> bool,
    ) -> Option<Peer<RoleServer>> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .find(|call| call.server == server && can(call.asks))
            .map(|call| call.peer.clone())
    }

    fn get(&self, caller: &str) -> Option<Peer<RoleServer>> {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(caller)
            .cloned()
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
            let Some(peer) = self
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
            let Ok(params) = serde_json::from_value::<ElicitRequestParams>(params) else {
                return ElicitationResponse::Decline;
            };
            match peer
                .create_elicitation_with_timeout(params, Some(APPROVAL_WAIT))
                .await
            {
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
}

/// Relays upstream servers' sampling requests (for servers whose entry enables sampling) to
/// the downstream client whose call is running there: that client's model answers.
#[derive(Debug, Clone)]
pub struct UpstreamSampling {
    peers: PeerDirectory,
}

impl UpstreamSampling {
    pub fn new(peers: PeerDirectory) -> Self {
        Self { peers }
    }
}

impl SamplingHandler for UpstreamSampling {
    fn sample(
        &self,
        request: SamplingRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SamplingAnswer, String>> + Send + '_>> {
        Box::pin(async move {
            let Some(peer) = self
                .peers
                .running_client(&request.server, |asks| asks.sampling)
            else {
                return Err(format!(
                    "no client of warden serve that supports sampling has a call running on {}",
                    request.server
                ));
            };
            let messages: Vec<serde_json::Value> = request
                .turns
                .iter()
                .map(|turn| {
                    let role = match turn.role {
                        SamplingRole::User => "user",
                        SamplingRole::Assistant => "assistant",
                    };
                    json!({"role": role, "content": {"type": "text", "text": turn.text}})
                })
                .collect();
            let mut params = json!({"messages": messages, "maxTokens": request.max_tokens});
            if let Some(system) = &request.system_prompt {
                params["systemPrompt"] = json!(system);
            }
            if let Some(temperature) = request.temperature {
                params["temperature"] = json!(temperature);
            }
            if !request.stop_sequences.is_empty() {
                params["stopSequences"] = json!(request.stop_sequences);
            }
            let params: CreateMessageRequestParams = serde_json::from_value(params)
                .map_err(|error| format!("warden could not relay the request: {error}"))?;
            let answer = peer
                .create_message(params)
                .await
                .map_err(|error| format!("the client's model did not answer: {error}"))?;
            let answer = serde_json::to_value(&answer).unwrap_or_default();
            let text = answer
                .pointer("/content/text")
                .or_else(|| answer.pointer("/content/0/text"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Ok(SamplingAnswer {
                text,
                model: answer["model"].as_str().unwrap_or("unknown").to_owned(),
                stop_reason: answer["stopReason"].as_str().map(str::to_owned),
            })
        })
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
