//! The gateway's MCP server handler: one per downstream connection (or stateless request). Lists
//! what the exposure publishes, and sends every tool call and resource read through the gate
//! with source `gateway` and the client's identity as the caller. The MCP methods are answered
//! by concern: initialization (`init.rs`), tools (`tools.rs`), resources (`resources.rs`),
//! prompts (`prompts.rs`), the passthrough relays (`relay.rs`); `gated.rs` holds the gated call.
// Logging and resources/subscribe are deprecated by SEP-2577 but still part of 2025-11-25.
#![allow(deprecated)]

mod bridge;
mod gated;
mod init;
mod prompts;
mod relay;
mod resources;
mod tools;

pub(crate) use bridge::ParkedCalls;
pub(crate) use gated::severity;
pub(crate) use init::announced;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use warden_host::CallContext;
use warden_policy::CallSurface;

use crate::{Exposure, Gateway};

/// Key of the provenance entry in a re-published resource's or prompt's `_meta`.
pub const PROVENANCE_META_KEY: &str = "dev.warden/server";

/// The handler of one downstream connection.
#[derive(Clone)]
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    connection: u64,
    /// The log level this connection set with `logging/setLevel` (2025-11-25 sessions; until
    /// one is set, every line is wanted).
    log_level: Arc<std::sync::Mutex<Option<rmcp::model::LoggingLevel>>>,
}

// Every request's handler is boxed: rmcp spawns a task per request whose future is as large as
// its largest arm, and moves it whole into the task. Unboxed, the gated tool call made every
// request's future 60 KB, copied on each spawn.
impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        self.handle_get_info()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        Box::pin(self.handle_on_initialized(context)).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        Box::pin(self.handle_listen(context)).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Box::pin(self.handle_complete(request, context)).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.handle_set_level(request)).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.handle_subscribe(request, context)).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.handle_unsubscribe(request)).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Box::pin(self.handle_list_tools()).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.gateway.remembered_tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Box::pin(self.handle_call_tool(request, context)).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Box::pin(self.handle_list_resources(&context)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Box::pin(self.handle_list_resource_templates()).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Box::pin(self.handle_read_resource(request, context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Box::pin(self.handle_list_prompts(&context)).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Box::pin(self.handle_get_prompt(request, context)).await
    }
}

impl GatewayHandler {
    pub(crate) fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            gateway,
            connection: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
            log_level: Arc::default(),
        }
    }

    pub(crate) fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// A gateway call of this connection: approvals "for this session" and skill grants are
    /// remembered for this client connection alone.
    fn call_context(&self, cancel: tokio_util::sync::CancellationToken) -> CallContext {
        let mut call = CallContext::new(CallSurface::Gateway, cancel);
        call.approval_scope = Some(format!("serve-connection-{}", self.connection));
        call
    }

    /// Who is calling, for the audit record: the client's name and version, its HTTP session,
    /// this connection's number and the call's.
    fn caller(&self, context: &RequestContext<RoleServer>) -> String {
        let client = context
            .client_info()
            .map(|info| format!("{}/{}", info.name, info.version))
            .unwrap_or_else(|| "unknown-client".to_owned());
        let session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(|id| format!(" session={id}"))
            .unwrap_or_default();
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        format!(
            "{client}{session} connection={} call={call}",
            self.connection
        )
    }

    /// The servers whose resources and prompts this exposure publishes.
    fn servers(&self) -> Vec<String> {
        self.gateway.published_servers()
    }

    /// The local skills this exposure publishes (progressive only).
    fn skills(&self) -> &[crate::SkillSummary] {
        if self.gateway.exposure == Exposure::Progressive {
            &self.gateway.skills
        } else {
            &[]
        }
    }

    /// A skill's instructions, loaded through the gate (audited as a skill load).
    async fn load_skill(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, McpError> {
        let Some(loader) = self.gateway.skill_loader.as_deref() else {
            return Err(McpError::invalid_params("no skills are published", None));
        };
        let outcome = self
            .gated_call(loader, json!({"name": name}), context)
            .await
            .outcome;
        if outcome.is_error() {
            return Err(McpError::invalid_params(outcome.model_text(), None));
        }
        Ok(outcome.model_text())
    }

    /// The fronted server, in passthrough.
    fn passthrough_upstream(&self) -> Option<&str> {
        match self.gateway.exposure {
            Exposure::Passthrough => self.gateway.upstream(),
            _ => None,
        }
    }

    fn flat(&self) -> bool {
        self.gateway.exposure != Exposure::Passthrough
    }
}

/// Numbers downstream connections, so two clients with the same name stay apart.
static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// Numbers calls, so that an approval reaches the client of exactly that call.
static CALLS: AtomicU64 = AtomicU64::new(1);

/// Adds the server as provenance: `_meta["dev.warden/server"]`, and `[server]` before the
/// description.
fn with_provenance<T>(item: T, server: &str) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    let Ok(mut value) = serde_json::to_value(&item) else {
        return item;
    };
    if let Value::Object(fields) = &mut value {
        let meta = fields
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(PROVENANCE_META_KEY.to_owned(), json!(server));
        }
        let description = fields
            .get("description")
            .and_then(Value::as_str)
            .map(|text| format!("[{server}] {text}"))
            .unwrap_or_else(|| format!("[{server}]"));
        fields.insert("description".to_owned(), json!(description));
    }
    serde_json::from_value(value).unwrap_or(item)
}
