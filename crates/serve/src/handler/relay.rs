//! The passthrough relays that call no tool (completion, log level, resource subscriptions) and what an upstream request carries from the downstream one.

use std::sync::PoisonError;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, InputResponses, LoggingLevel, ProtocolVersion,
    RequestMetaObject, ResultType, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use warden_host::RelayRequest;
use warden_mcp::RelayError;

use super::GatewayHandler;
use crate::changes::{Holder, Listener};

impl GatewayHandler {
    /// `completion/complete`, relayed to the fronted server (passthrough only; empty otherwise).
    pub(super) async fn handle_complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Ok(CompleteResult::default());
        };
        let mut result = self
            .gateway
            .host
            .ungated_relay()
            .complete(upstream, request, Some(client_meta(&context)))
            .await
            .map_err(relay_error)?;
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }

    /// `logging/setLevel`: this connection's level, which filters the upstream's log lines it
    /// hears (passthrough only). A 2025-11-25 upstream is told the most verbose level any client
    /// asked for, so that each client still hears what it asked for; a 2026-07-28 upstream gets
    /// the level in each request's `_meta` instead.
    pub(super) async fn handle_set_level(
        &self,
        request: SetLevelRequestParams,
    ) -> Result<(), McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        };
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(request.level);
        let Some(level) = self.gateway.widen_upstream_log_level(request.level) else {
            return Ok(());
        };
        self.gateway
            .host
            .ungated_relay()
            .set_level(upstream, SetLevelRequestParams::new(level))
            .await
            .map_err(relay_error)?;
        Ok(())
    }

    /// This connection's log level (2025-11-25 sessions); `debug` until it set one.
    pub(super) fn session_log_level(&self) -> LoggingLevel {
        self.log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(LoggingLevel::Debug)
    }

    /// What the upstream request carries from the downstream one. On 2026-07-28 the upstream's
    /// `input_required` results go back to the client, which answers and retries; the client's
    /// capabilities (cut down to warden's own) and log level go upstream in `_meta`. Older
    /// clients are asked mid-call instead, through warden's own handlers, and their session's
    /// log level goes upstream in `_meta` (which a 2026-07-28 upstream needs to log at all).
    pub(super) fn relay_request(
        &self,
        context: &RequestContext<RoleServer>,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> RelayRequest {
        if !is_stateless(context) {
            let mut meta = RequestMetaObject::new();
            meta.set_log_level(self.session_log_level());
            return RelayRequest {
                meta: Some(meta),
                ..RelayRequest::default()
            };
        }
        RelayRequest {
            pass_input_required: true,
            input_responses,
            request_state,
            meta: Some(client_meta(context)),
        }
    }

    /// `resources/subscribe`, relayed to the fronted server and remembered for this connection (passthrough only).
    pub(super) async fn handle_subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Err(McpError::method_not_found::<
                rmcp::model::SubscribeRequestMethod,
            >());
        };
        let uri = request.uri.clone();
        self.gateway
            .host
            .ungated_relay()
            .subscribe(upstream, request)
            .await
            .map_err(relay_error)?;
        self.gateway.changes.subscribe(
            Holder::Connection(self.connection),
            Listener::Session(context.peer.clone()),
            upstream.to_owned(),
            uri,
        );
        Ok(())
    }

    /// `resources/unsubscribe`, relayed once no downstream client holds the subscription (passthrough only).
    pub(super) async fn handle_unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
    ) -> Result<(), McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Err(McpError::method_not_found::<
                rmcp::model::UnsubscribeRequestMethod,
            >());
        };
        // Upstream, the subscription ends with the last downstream client that held it.
        if self.gateway.changes.unsubscribe(
            Holder::Connection(self.connection),
            upstream,
            &request.uri,
        ) {
            self.gateway
                .host
                .ungated_relay()
                .unsubscribe(upstream, request)
                .await
                .map_err(relay_error)?;
        }
        Ok(())
    }
}

/// Whether the downstream request speaks 2026-07-28 or later (stateless: no mid-call requests to
/// the client, which answers `input_required` results itself).
pub(super) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The downstream client's capabilities and log level, as `_meta` entries of an upstream request.
pub(super) fn client_meta(context: &RequestContext<RoleServer>) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    if let Some(capabilities) = context.client_capabilities() {
        meta.set_client_capabilities(capabilities);
    }
    if let Some(level) = context.meta.log_level() {
        meta.set_log_level(level);
    }
    meta
}

/// The upstream's JSON-RPC error as it is; any other failure as an internal error.
pub(super) fn relay_error(error: RelayError) -> McpError {
    match error {
        RelayError::Rpc(error) => error,
        RelayError::Failed(error) => McpError::internal_error(error.to_string(), None),
    }
}
