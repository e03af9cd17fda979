//! What a relaying surface (`warden serve`) needs of an upstream server beyond the runtime's own
//! calls: requests sent as they are, with the server's JSON-RPC error kept (tool calls whose
//! `input_required` results go back to the caller, completions, subscriptions, log levels), and
//! the upstream's events — log messages, resource updates, catalogue changes — as a broadcast.
// Logging is deprecated by SEP-2577 but still part of 2025-11-25.
#![allow(deprecated)]

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ErrorData, LoggingMessageNotificationParam,
    RequestMetaObject as Meta, ServerResult, SetLevelRequest, SetLevelRequestParams,
    SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
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
        Box::pin(slot.relay_tool_call(params, options)).await
    }
}

/// The caller's client capabilities in `meta`, cut down to those warden itself offers this
/// server: a relaying client never unlocks what the operator did not (sampling, say).
pub(crate) fn within_own_capabilities(mut meta: Meta, context: &ClientContext) -> Meta {
    let Some(requested) = meta.client_capabilities() else {
        return meta;
    };
    let mut requested = serde_json::to_value(requested).unwrap_or_default();
    let Some(entries) = requested.as_object_mut() else {
        return meta;
    };
    if entries.keys().all(|key| context.offers_capability(key)) {
        return meta;
    }
    entries.retain(|key, _| context.offers_capability(key));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use serde_json::{Value, json};

    use super::*;

    /// A connection's context offering no elicitation and no sampling; the skills extension
    /// when `skills_extension`.
    fn context(skills_extension: bool) -> ClientContext {
        ClientContext {
            server: "up".to_owned(),
            client_name: "warden".to_owned(),
            client_version: "0".to_owned(),
            workspace_root: std::path::PathBuf::from("/"),
            elicitation: None,
            skills_extension,
            sampling: None,
            progress: std::sync::Arc::default(),
            list_changed: tokio::sync::mpsc::unbounded_channel().0,
            events: UpstreamEvents::default(),
        }
    }

    fn requesting(capabilities: Value) -> Meta {
        let mut meta = Meta::new();
        meta.set_client_capabilities(serde_json::from_value(capabilities).unwrap());
        meta
    }

    fn capabilities_in(meta: &Meta) -> Value {
        serde_json::to_value(meta.client_capabilities().unwrap()).unwrap()
    }

    #[test]
    fn a_relaying_client_never_unlocks_a_capability_warden_does_not_offer() {
        let asked = json!({"roots": {}, "sampling": {}, "elicitation": {"form": {}}});
        let bounded = within_own_capabilities(requesting(asked), &context(false));
        assert_eq!(capabilities_in(&bounded), json!({"roots": {}}));
    }

    #[test]
    fn capabilities_warden_offers_pass_as_the_client_sent_them() {
        let asked = json!({
            "roots": {"listChanged": true},
            "extensions": {"io.modelcontextprotocol/skills": {}},
        });
        let kept = within_own_capabilities(requesting(asked.clone()), &context(true));
        assert_eq!(capabilities_in(&kept), asked);
    }

    #[test]
    fn the_capabilities_announced_are_the_ones_offered_by_name() {
        for skills_extension in [false, true] {
            let context = context(skills_extension);
            let announced = serde_json::to_value(context.capabilities()).unwrap();
            let announced = announced.as_object().unwrap();
            for name in ["roots", "elicitation", "sampling", "extensions", "tasks"] {
                assert_eq!(
                    announced.contains_key(name),
                    context.offers_capability(name),
                    "{name}, skills extension {skills_extension}"
                );
            }
        }
    }
}
