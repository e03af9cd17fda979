//! What a relaying surface (`warden serve`) needs of an upstream server beyond the runtime's own
//! calls: requests sent as they are, with the server's JSON-RPC error kept (tool calls whose
//! `input_required` results go back to the caller, completions, subscriptions, log levels), and
//! the upstream's events — log messages, resource updates, catalogue changes — as a broadcast.
// Logging is deprecated by SEP-2577 but still part of 2025-11-25.
#![allow(deprecated)]

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ErrorData,
    LoggingMessageNotificationParam, RequestMetaObject as Meta, ServerResult, SetLevelRequest,
    SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::PeerRequestOptions;
use tokio::sync::broadcast;

use crate::catalog::ToolIdentity;
use crate::client::{ClientContext, ListKind};
use crate::error::{FailureKind, McpError};
use crate::runtime::McpRuntime;
use crate::server::CallOptions;

/// Events kept for a slow listener before it starts missing some.
const EVENT_BACKLOG: usize = 256;

/// Something an upstream server said on its own.
#[derive(Debug, Clone)]
pub enum UpstreamEvent {
    /// A `notifications/message` log line.
    Log {
        server: String,
        message: LoggingMessageNotificationParam,
    },
    /// A `notifications/resources/updated` for a subscribed resource.
    ResourceUpdated { server: String, uri: String },
    /// The runtime refetched a list after the server's `list_changed` (fired after the refetch,
    /// so the catalogue already holds the new list).
    CatalogChanged { server: String, kind: ListKind },
}

/// The runtime's event feed: every connection sends, any number of surfaces listen.
#[derive(Debug, Clone)]
pub struct UpstreamEvents {
    sender: broadcast::Sender<UpstreamEvent>,
}

impl Default for UpstreamEvents {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(EVENT_BACKLOG).0,
        }
    }
}

impl UpstreamEvents {
    /// A receiver of every event sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.sender.subscribe()
    }

    /// Sends to whoever listens; nobody listening is fine.
    pub(crate) fn send(&self, event: UpstreamEvent) {
        let _ = self.sender.send(event);
    }
}

/// Why a relayed request got no result.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The server answered with this JSON-RPC error: relay it as it is.
    #[error("JSON-RPC error {}: {}", .0.code.0, .0.message)]
    Rpc(ErrorData),
    /// The server could not be reached, timed out or broke the protocol.
    #[error("{0}")]
    Failed(McpError),
}

impl McpRuntime {
    /// Log messages, resource updates and catalogue changes of every server, from now on.
    pub fn upstream_events(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.options().events.subscribe()
    }

    /// Sends `request` to `server` as it is (connecting first if needed) under the server's
    /// request timeout; `meta` entries are added to the request's `_meta`. The server's JSON-RPC
    /// error comes back as [`RelayError::Rpc`].
    pub async fn relay_request(
        &self,
        server: &str,
        request: ClientRequest,
        meta: Option<Meta>,
    ) -> Result<ServerResult, RelayError> {
        let slot = self.slot(server).map_err(RelayError::Failed)?;
        let (peer, context) = slot.relay_channel().await.map_err(RelayError::Failed)?;
        let mut options = PeerRequestOptions::with_timeout(slot.spec.request_timeout);
        options.meta = meta.map(|meta| within_own_capabilities(meta, &context));
        let what = request.method().to_owned();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| relay_failure(server, &what, error))?;
        handle
            .await_response()
            .await
            .map_err(|error| relay_failure(server, &what, error))
    }

    /// A relaying client's `resources/subscribe`, said in the server's era: sent as it is to a
    /// server of 2025-11-25 or older; on 2026-07-28, which has no such method, a
    /// `subscriptions/listen` stream for that one resource. Either way its updates arrive as
    /// [`UpstreamEvent::ResourceUpdated`].
    pub async fn relay_subscribe(
        &self,
        server: &str,
        params: SubscribeRequestParams,
    ) -> Result<(), RelayError> {
        let slot = self.slot(server).map_err(RelayError::Failed)?;
        if slot.speaks_stateless().await.map_err(RelayError::Failed)? {
            return slot.listen_to_resource(&params.uri).await;
        }
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
        self.relay_request(server, request, None).await?;
        Ok(())
    }

    /// A relaying client's `resources/unsubscribe`, said in the server's era (see
    /// [`McpRuntime::relay_subscribe`]).
    pub async fn relay_unsubscribe(
        &self,
        server: &str,
        params: UnsubscribeRequestParams,
    ) -> Result<(), RelayError> {
        let slot = self.slot(server).map_err(RelayError::Failed)?;
        if slot.speaks_stateless().await.map_err(RelayError::Failed)? {
            slot.stop_listening_to_resource(&params.uri);
            return Ok(());
        }
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        self.relay_request(server, request, None).await?;
        Ok(())
    }

    /// A relaying client's `logging/setLevel`: sent to a server of 2025-11-25 or older; a
    /// 2026-07-28 server has no session level (the level travels in each request's `_meta`),
    /// so nothing is sent.
    pub async fn relay_set_level(
        &self,
        server: &str,
        params: SetLevelRequestParams,
    ) -> Result<(), RelayError> {
        let slot = self.slot(server).map_err(RelayError::Failed)?;
        if slot.speaks_stateless().await.map_err(RelayError::Failed)? {
            return Ok(());
        }
        let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(params));
        self.relay_request(server, request, None).await?;
        Ok(())
    }

    /// Calls a tool once, as `params` say (input responses and request state included; `_meta`
    /// entries from `options`), and returns the server's answer unchanged: a tool result or an
    /// `input_required` result for the caller to answer. Unlike [`McpRuntime::call_tool`]
    /// nothing is answered here. The tool must be in the server's discovered, filtered set.
    pub async fn relay_call_tool(
        &self,
        identity: &ToolIdentity,
        params: CallToolRequestParams,
        options: CallOptions,
    ) -> Result<ServerResult, RelayError> {
        let server = identity.server.as_str();
        let slot = self.slot(server).map_err(RelayError::Failed)?;
        // Resolved as a direct call is: against the tools listed, without listing again.
        if !slot
            .offers_tool(&identity.tool)
            .await
            .map_err(RelayError::Failed)?
        {
            return Err(RelayError::Failed(slot.unknown_tool(&identity.tool)));
        }
        let (peer, context) = slot.relay_channel().await.map_err(RelayError::Failed)?;
        let mut request_options = PeerRequestOptions::with_timeout(slot.spec.tool_timeout);
        request_options.meta = options
            .meta
            .map(|meta| within_own_capabilities(meta, &context));
        let what = format!("\"{}\"", identity.tool);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, request_options)
            .await
            .map_err(|error| relay_failure(server, &what, error))?;
        let _route = options
            .progress
            .map(|sender| context.route_progress(handle.progress_token.clone(), sender));
        let request_id = handle.id.clone();
        tokio::select! {
            response = handle.await_response() => {
                response.map_err(|error| relay_failure(server, &what, error))
            }
            () = options.cancel.cancelled() => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(request_id),
                        Some("cancelled by the caller".to_owned()),
                    ))
                    .await;
                Err(RelayError::Failed(McpError::new(
                    server,
                    FailureKind::Cancelled,
                    format!("the call to {what} was cancelled"),
                    None,
                )))
            }
        }
    }
}

/// The caller's client capabilities in `meta`, cut down to those warden itself offers this
/// server: a relaying client never unlocks what the operator did not (sampling, say).
fn within_own_capabilities(mut meta: Meta, context: &ClientContext) -> Meta {
    let Some(requested) = meta.client_capabilities() else {
        return meta;
    };
    let own = serde_json::to_value(context.capabilities()).unwrap_or_default();
    let mut requested = serde_json::to_value(requested).unwrap_or_default();
    if let (Some(requested), Some(own)) = (requested.as_object_mut(), own.as_object()) {
        requested.retain(|key, _| own.contains_key(key));
    }
    if let Ok(bounded) = serde_json::from_value(requested) {
        meta.set_client_capabilities(bounded);
    }
    meta
}

pub(crate) fn relay_failure(server: &str, what: &str, error: ServiceError) -> RelayError {
    match error {
        ServiceError::McpError(data) => RelayError::Rpc(data),
        ServiceError::Timeout { timeout } => {
            RelayError::Failed(McpError::timeout(server, what, timeout))
        }
        ServiceError::TransportClosed => RelayError::Failed(McpError::new(
            server,
            FailureKind::Exited,
            format!("the connection closed while {what} was on its way"),
            Some("check the server's logs, then reconnect"),
        )),
        other => RelayError::Failed(McpError::new(
            server,
            FailureKind::Protocol,
            format!("{what} failed: {other}"),
            Some("check the server's logs"),
        )),
    }
}
