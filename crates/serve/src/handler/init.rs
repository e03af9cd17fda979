//! What a client learns at initialization: the capabilities, identity and instructions the gateway announces, and the listeners for upstream changes it registers.

use rmcp::model::{
    Implementation, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use super::GatewayHandler;
use crate::Exposure;
use crate::changes::{Holder, Listener};

impl GatewayHandler {
    /// The `initialize` answer: capabilities (completions, logging and resource subscriptions only in passthrough), identity and the fronted server's instructions.
    ///
    /// rmcp asks for it on every request of a 2026-07-28 client, so all but the instructions is
    /// built once.
    pub(super) fn handle_get_info(&self) -> ServerConfig {
        let mut config = self.gateway.announced.clone();
        if let (Exposure::Passthrough, Some(upstream)) =
            (self.gateway.exposure, self.gateway.upstream())
            && let Ok(Some(instructions)) =
                self.gateway.host.servers().server_instructions(upstream)
        {
            config = config.with_instructions(instructions);
        }
        config
    }

    /// `notifications/initialized`: the session starts hearing upstream changes, and the gateway prepares its catalogue.
    pub(super) async fn handle_on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.gateway
            .changes
            .add(Listener::Session(context.peer.clone()));
        let gateway = self.gateway.clone();
        tokio::spawn(async move { gateway.prepare().await });
    }

    /// `subscriptions/listen` (2026-07-28): a change stream held open until the client cancels it.
    pub(super) async fn handle_listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let sink = context.sink().clone();
        let id = self.gateway.changes.add(Listener::Stream(sink.clone()));
        self.gateway.prepare().await;
        // The resources the stream names are subscribed to upstream, in the upstream's era,
        // for as long as the stream stays open (passthrough only).
        let uris = sink
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let upstream = self.passthrough_upstream().map(str::to_owned);
        let mut held = Vec::new();
        if let Some(upstream) = &upstream {
            for uri in uris {
                let params = SubscribeRequestParams::new(uri.clone());
                match self
                    .gateway
                    .host
                    .ungated_relay()
                    .subscribe(upstream, params)
                    .await
                {
                    Ok(()) => {
                        self.gateway.changes.subscribe(
                            Holder::Listen(id),
                            Listener::Stream(sink.clone()),
                            upstream.clone(),
                            uri.clone(),
                        );
                        held.push(uri);
                    }
                    Err(error) => {
                        tracing::warn!(
                            "{upstream}: could not subscribe to {uri} for a listening client: {error}"
                        );
                    }
                }
            }
        }
        context.cancelled().await;
        self.gateway.changes.remove(id);
        if let Some(upstream) = &upstream {
            for uri in held {
                if self
                    .gateway
                    .changes
                    .unsubscribe(Holder::Listen(id), upstream, &uri)
                {
                    let params = UnsubscribeRequestParams::new(uri);
                    let _ = self
                        .gateway
                        .host
                        .ungated_relay()
                        .unsubscribe(upstream, params)
                        .await;
                }
            }
        }
        Ok(())
    }
}

/// What the gateway announces besides the upstream's instructions: capabilities (completions,
/// logging and resource subscriptions only in passthrough) and its identity.
pub(crate) fn announced(exposure: Exposure) -> ServerConfig {
    let mut capabilities = json!({
        "tools": {"listChanged": true},
        "resources": {"listChanged": true},
        "prompts": {"listChanged": true},
    });
    // One fronted server: its completions, log level and resource subscriptions are relayed.
    if exposure == Exposure::Passthrough {
        capabilities["completions"] = json!({});
        capabilities["logging"] = json!({});
        capabilities["resources"]["subscribe"] = json!(true);
    }
    let capabilities: ServerCapabilities = serde_json::from_value(capabilities).unwrap_or_default();
    ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("warden", env!("CARGO_PKG_VERSION")))
}
