//! The only views of the MCP runtime a surface gets: [`Servers`] (statuses, catalogues,
//! connection control) and [`UngatedRelay`] (the protocol messages that call nothing). Neither
//! can call a tool, read a resource or get a prompt: those go through [`Host::call`] and the
//! gate. `Host` keeps the runtime private, so the compiler holds every surface to this.
// Logging and `resources/subscribe` are legacy in 2026-07-28; a fronted server may still speak them.
#![allow(deprecated)]

use rmcp::model::{
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, ErrorData, Prompt,
    RequestMetaObject as Meta, ResourceTemplate, ServerResult, SetLevelRequestParams,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use tokio::sync::broadcast;
use warden_mcp::{
    Catalog, McpError, McpRuntime, RelayError, ResourceRow, ServerStatus, ToolListEpoch,
    UpstreamEvent,
};

use crate::Host;

/// The session's servers as a surface may see and steer them.
#[derive(Clone, Copy)]
pub struct Servers<'a> {
    runtime: &'a McpRuntime,
}

impl Servers<'_> {
    /// Every startable server's name.
    pub fn names(&self) -> Vec<String> {
        self.runtime.server_names()
    }

    /// Every server's state, counts, instructions and recent stderr.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.runtime.status()
    }

    /// One server's status.
    pub fn server_status(&self, server: &str) -> Result<ServerStatus, McpError> {
        self.runtime.server_status(server)
    }

    /// The protocol revision one server's connection speaks (`None` before it connected).
    pub fn protocol_revision(&self, server: &str) -> Result<Option<String>, McpError> {
        self.runtime.protocol_revision(server)
    }

    /// The instructions one server gave at initialization (`None` before it connected).
    pub fn server_instructions(&self, server: &str) -> Result<Option<String>, McpError> {
        self.runtime.server_instructions(server)
    }

    /// Connects every server whose entry is `required`; the first that fails is the error.
    pub async fn connect_required(&self) -> Result<(), McpError> {
        self.runtime.connect_required().await
    }

    /// Every list of one server (connecting it, even when deferred).
    pub async fn catalog(&self, server: &str) -> Result<Catalog, McpError> {
        self.runtime.catalog(server).await
    }

    /// The resources one server (or every non-deferred server) advertises.
    pub async fn resources(&self, server: Option<&str>) -> Result<Vec<ResourceRow>, McpError> {
        self.runtime.resources(server).await
    }

    /// One server's resource templates.
    pub async fn resource_templates(
        &self,
        server: &str,
    ) -> Result<Vec<ResourceTemplate>, McpError> {
        self.runtime.resource_templates(server).await
    }

    /// One server's prompts (their names and arguments; getting one goes through the gate).
    pub async fn prompts(&self, server: &str) -> Result<Vec<Prompt>, McpError> {
        self.runtime.prompts(server).await
    }

    /// Drops the server's connection and connects again.
    pub async fn reconnect(&self, server: &str) -> Result<(), McpError> {
        self.runtime.reconnect(server).await
    }

    /// Stops the server for the rest of the session (until restarted).
    pub async fn stop(&self, server: &str) -> Result<(), McpError> {
        self.runtime.stop(server).await
    }

    /// Starts a stopped server again.
    pub async fn restart(&self, server: &str) -> Result<(), McpError> {
        self.runtime.restart(server).await
    }

    /// The counters of one server's connection and tools `list_changed`: when they moved, the
    /// tools a surface listed under the old ones may be out of date.
    pub fn tool_list_epoch(&self, server: &str) -> Result<ToolListEpoch, McpError> {
        self.runtime.tool_list_epoch(server)
    }

    /// Log messages, resource updates and catalogue changes of every server, from now on.
    pub fn upstream_events(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.runtime.upstream_events()
    }
}

/// The protocol messages relayed to one server as they are, without the gate, because they
/// call nothing: argument completion, the log level and resource subscriptions.
#[derive(Clone, Copy)]
pub struct UngatedRelay<'a> {
    runtime: &'a McpRuntime,
}

impl UngatedRelay<'_> {
    /// `completion/complete`; `meta` entries are added to the request's `_meta`.
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
        meta: Option<Meta>,
    ) -> Result<CompleteResult, RelayError> {
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match self.runtime.relay_request(server, request, meta).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(RelayError::Rpc(ErrorData::internal_error(
                format!("{server} answered completion/complete with something else"),
                None,
            ))),
        }
    }

    /// `logging/setLevel`, in the server's era (nothing is sent to a 2026-07-28 server, whose
    /// requests carry their level in `_meta`).
    pub async fn set_level(
        &self,
        server: &str,
        params: SetLevelRequestParams,
    ) -> Result<(), RelayError> {
        self.runtime.relay_set_level(server, params).await
    }

    /// `resources/subscribe`, in the server's era (a `subscriptions/listen` stream on
    /// 2026-07-28).
    pub async fn subscribe(
        &self,
        server: &str,
        params: SubscribeRequestParams,
    ) -> Result<(), RelayError> {
        self.runtime.relay_subscribe(server, params).await
    }

    /// `resources/unsubscribe`, in the server's era.
    pub async fn unsubscribe(
        &self,
        server: &str,
        params: UnsubscribeRequestParams,
    ) -> Result<(), RelayError> {
        self.runtime.relay_unsubscribe(server, params).await
    }
}

impl Host {
    /// The session's servers: statuses, catalogues and connection control.
    pub fn servers(&self) -> Servers<'_> {
        Servers {
            runtime: &self.runtime,
        }
    }

    /// The protocol messages that call nothing, relayed to a server without the gate.
    pub fn ungated_relay(&self) -> UngatedRelay<'_> {
        UngatedRelay {
            runtime: &self.runtime,
        }
    }
}
