//! The gateway's MCP server handler: one per downstream connection (or stateless request). Lists
//! what the exposure publishes, and sends every tool call and resource read through the gate
//! with source `gateway` and the client's identity as the caller.
// Logging and resources/subscribe are deprecated by SEP-2577 but still part of 2025-11-25.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, Prompt, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ResultType, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, InputResponses, LoggingLevel, ProtocolVersion,
    RequestMetaObject, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use warden_host::{
    CallContext, CallRelay, LIST_PROMPTS, LIST_RESOURCES, READ_RESOURCE, RelayRequest,
    RelayedAnswer, with_relay,
};
use warden_mcp::RelayError;
use warden_mcp::UpstreamEvent;
use warden_policy::{CallSource, Decision, GateOutcome, ProgressUpdate};

use crate::approval::ClientAsks;
use crate::changes::Listener;
use crate::{Exposure, Gateway, progressive};

/// Key of the provenance entry in a re-published resource's or prompt's `_meta`.
pub const PROVENANCE_META_KEY: &str = "dev.warden/server";

/// Numbers downstream connections, so two clients with the same name stay apart.
static CONNECTIONS: AtomicU64 = AtomicU64::new(1);
/// Numbers calls, so that an approval reaches the client of exactly that call.
static CALLS: AtomicU64 = AtomicU64::new(1);

/// The handler of one downstream connection.
#[derive(Clone)]
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    connection: u64,
}

impl GatewayHandler {
    pub(crate) fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            gateway,
            connection: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub(crate) fn gateway(&self) -> &Gateway {
        &self.gateway
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

    /// Sends one call through the gate as this client; approvals are asked of it when it
    /// supports elicitation, and progress is forwarded to it.
    pub(crate) async fn gated_call(
        &self,
        public_name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> Gated {
        self.gated_call_with(public_name, arguments, context, RelayRequest::default())
            .await
    }

    /// [`GatewayHandler::gated_call`] with what the relay asks of the upstream call (the
    /// client's input responses, say). The upstream server's log messages while the call runs
    /// are forwarded to this client.
    pub(crate) async fn gated_call_with(
        &self,
        public_name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        request: RelayRequest,
    ) -> Gated {
        self.gateway.prepare().await;
        let caller = self.caller(context);
        let capabilities = context.client_capabilities();
        let asks = ClientAsks {
            elicitation: capabilities
                .as_ref()
                .is_some_and(|capabilities| capabilities.elicitation.is_some()),
            sampling: capabilities
                .as_ref()
                .is_some_and(|capabilities| capabilities.sampling.is_some()),
        };
        let _registration = asks
            .elicitation
            .then(|| self.gateway.peers.register(&caller, context.peer.clone()));
        let server = self.gateway.server_of(public_name);
        let _running = server.as_ref().map(|server| {
            self.gateway
                .peers
                .running_on(server, context.peer.clone(), asks)
        });
        let mut call = CallContext::new(CallSource::Gateway, context.ct.child_token());
        call.caller = Some(caller);
        // Progress goes to the client from this task, beside the call (no task per call), and
        // always before the call's answer.
        let mut progress = context.meta.get_progress_token().map(|token| {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            call.progress = Some(sender);
            (token, receiver)
        });
        let logs = LogFilter::of(context);
        // Only a call whose client may hear the server's log lines listens for them.
        let mut events = server
            .as_ref()
            .filter(|_| logs.admits_any())
            .map(|_| self.gateway.host.servers().upstream_events());
        let relay = CallRelay::new(request);
        // Boxed: the gate's future is large, and this one is polled beside the event feed.
        let mut gated = Box::pin(with_relay(
            relay.clone(),
            self.gateway.host.call_with(call, public_name, arguments),
        ));
        // Whether the server sent this call's client anything while it ran.
        let mut heard = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut gated => break outcome,
                Some((token, update)) = next_progress(&mut progress) => {
                    forward_progress(token, update, &context.peer).await;
                    heard = true;
                }
                Some(event) = next_event(&mut events) => match event {
                    Ok(event) => {
                        heard |= forward_log(event, server.as_deref(), logs, &context.peer).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => events = None,
                },
            }
        };
        // Progress and log lines the server sent just before its answer. The MCP client handles
        // each notification on a task of its own while the answer reaches the call directly, so
        // a notification sent before the answer may still be on its way. A call that heard
        // from its server waits until the feeds have been quiet for a moment (bounded); one that
        // heard nothing (most calls) only takes what has already arrived.
        let deadline = tokio::time::Instant::now()
            + if heard {
                TRAILING_NOTIFICATIONS_CAP
            } else {
                std::time::Duration::ZERO
            };
        // Bounded in count too, so a server that never stops talking cannot hold the answer.
        let mut trailing = 0usize;
        while (progress.is_some() || events.is_some()) && trailing < MAX_TRAILING_NOTIFICATIONS {
            trailing += 1;
            let quiet = (tokio::time::Instant::now() + TRAILING_NOTIFICATIONS_QUIET).min(deadline);
            let next = tokio::select! {
                biased;
                Some((token, update)) = next_progress(&mut progress) => {
                    forward_progress(token, update, &context.peer).await;
                    true
                }
                Some(event) = next_event(&mut events) => {
                    match event {
                        Ok(event) => {
                            forward_log(event, server.as_deref(), logs, &context.peer).await;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => events = None,
                    }
                    true
                }
                () = tokio::time::sleep_until(quiet) => false,
            };
            // What is already queued is always taken (the select is biased towards it); past
            // the deadline nothing more is waited for.
            if !next {
                break;
            }
        }
        // The upstream's JSON-RPC error is a failed dispatch at the gate; any other answer is an
        // allowed call's.
        let answer = relay.take_answer().filter(|answer| match answer {
            RelayedAnswer::Error(_) => outcome.decision == Decision::Failed,
            _ => outcome.decision == Decision::Allowed,
        });
        Gated { outcome, answer }
    }

    /// The published tools of this exposure.
    async fn tools(&self) -> Vec<Tool> {
        let host = &self.gateway.host;
        match self.gateway.exposure {
            Exposure::Passthrough => {
                let Some(upstream) = self.gateway.upstream() else {
                    return Vec::new();
                };
                match host.server_tools(upstream).await {
                    Ok(tools) => tools.into_iter().map(|tool| tool.tool.definition).collect(),
                    Err(error) => {
                        tracing::warn!("listing the tools of {upstream}: {error}");
                        Vec::new()
                    }
                }
            }
            Exposure::Flat => {
                let (tools, failures) = host.all_tools().await;
                for failure in failures {
                    tracing::warn!("listing tools: {failure}");
                }
                self.gateway.remember_servers(
                    tools
                        .iter()
                        .map(|tool| (&tool.descriptor.public_name, &tool.tool.identity.server)),
                );
                tools
                    .into_iter()
                    .map(|visible| {
                        let mut definition = visible.tool.definition;
                        definition.name = visible.descriptor.public_name.into();
                        definition
                    })
                    .collect()
            }
            Exposure::Progressive => progressive::tools(self),
        }
    }

    /// The public name the gate knows for a downstream tool name.
    async fn public_name(&self, name: &str) -> String {
        match (self.gateway.exposure, self.gateway.upstream()) {
            (Exposure::Passthrough, Some(upstream)) => {
                if let Some(public) = self.gateway.host.public_name(upstream, name) {
                    return public;
                }
                // The catalogue was not fetched yet in this process: fetch it, then resolve.
                let _ = self.gateway.host.server_tools(upstream).await;
                self.gateway
                    .host
                    .public_name(upstream, name)
                    .unwrap_or_else(|| warden_mcp::naming::public_name_for(upstream, name))
            }
            _ => name.to_owned(),
        }
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

    /// Reads a resource of `server` through the gate (source `resource-read`).
    async fn gated_read(
        &self,
        server: &str,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, String> {
        let gated = self
            .gated_call(
                READ_RESOURCE,
                json!({"server": server, "uri": uri}),
                context,
            )
            .await;
        let (outcome, raw) = gated.into_parts();
        let raw = raw.ok_or_else(|| outcome.model_text())?;
        let contents: Vec<ResourceContents> = raw
            .content
            .into_iter()
            .filter_map(|block| match block {
                ContentBlock::Resource(embedded) => Some(embedded.resource),
                _ => None,
            })
            .collect();
        let mut result = ReadResourceResult::new(contents);
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }
}

impl GatewayHandler {
    /// One server's listing through the gate (`list_mcp_resources`, `list_mcp_prompts`): the
    /// items the tool returned under `key`, as their server sent them; `Err` is the gate's or
    /// the server's reason.
    async fn gated_listing<T: serde::de::DeserializeOwned>(
        &self,
        tool: &str,
        server: &str,
        key: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<T>, String> {
        let gated = self
            .gated_call(tool, json!({ "server": server }), context)
            .await;
        let outcome = gated.outcome;
        let items = outcome
            .output
            .as_ref()
            .filter(|output| !output.is_error)
            .and_then(|output| output.content.as_ref())
            .and_then(|content| content.get(key))
            .cloned()
            .ok_or_else(|| outcome.model_text())?;
        let rows: Vec<Value> = serde_json::from_value(items).map_err(|error| error.to_string())?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                // Resources come with their server beside them; prompts as they are.
                let item = row.get("resource").cloned().unwrap_or(row);
                serde_json::from_value(item).ok()
            })
            .collect())
    }
}

/// A gated call's outcome, and the upstream's answer as it sent it when the call ran.
pub(crate) struct Gated {
    pub outcome: GateOutcome,
    pub answer: Option<RelayedAnswer>,
}

impl Gated {
    /// The gate's outcome, and the upstream's tool result as it sent it when the call ran and
    /// completed.
    fn into_parts(self) -> (GateOutcome, Option<CallToolResult>) {
        let raw = match self.answer {
            Some(RelayedAnswer::Tool(result)) => Some(result),
            _ => None,
        };
        (self.outcome, raw)
    }

    /// The downstream answer of a gated tool call: the upstream's answer unchanged when the call
    /// ran (a result, an `input_required` result, or its JSON-RPC error), else an error result
    /// with the gate's reason.
    pub(crate) fn response(self) -> Result<CallToolResponse, McpError> {
        match self.answer {
            Some(RelayedAnswer::InputRequired(input)) => Ok(CallToolResponse::InputRequired(input)),
            Some(RelayedAnswer::Error(error)) => Err(error),
            answer => Ok(CallToolResponse::Complete(
                Self {
                    outcome: self.outcome,
                    answer,
                }
                .call_result(),
            )),
        }
    }

    /// The downstream result of a gated call: the upstream's result unchanged when it ran,
    /// else a result with the gate's text (an error result when it did not run).
    pub(crate) fn call_result(self) -> CallToolResult {
        let (outcome, raw) = self.into_parts();
        let mut result = match raw {
            Some(raw) => raw,
            None if outcome.decision == Decision::Allowed => {
                let text = outcome.model_text();
                if outcome.is_error() {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                }
            }
            None => CallToolResult::error(vec![ContentBlock::text(outcome.model_text())]),
        };
        result.result_type = Some(ResultType::COMPLETE);
        result
    }
}

/// Whether the downstream request speaks 2026-07-28 or later (stateless: no mid-call requests to
/// the client, which answers `input_required` results itself).
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What the upstream request carries from the downstream one. On 2026-07-28 the upstream's
/// `input_required` results go back to the client, which answers and retries; the client's
/// capabilities (cut down to warden's own) and log level go upstream in `_meta`. Older clients
/// are asked mid-call instead, through warden's own handlers.
fn relay_request(
    context: &RequestContext<RoleServer>,
    input_responses: Option<InputResponses>,
    request_state: Option<String>,
) -> RelayRequest {
    if !is_stateless(context) {
        return RelayRequest::default();
    }
    RelayRequest {
        pass_input_required: true,
        input_responses,
        request_state,
        meta: Some(client_meta(context)),
    }
}

/// The downstream client's capabilities and log level, as `_meta` entries of an upstream request.
fn client_meta(context: &RequestContext<RoleServer>) -> RequestMetaObject {
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
fn relay_error(error: RelayError) -> McpError {
    match error {
        RelayError::Rpc(error) => error,
        RelayError::Failed(error) => McpError::internal_error(error.to_string(), None),
    }
}

/// Which upstream log lines a call's client hears.
#[derive(Debug, Clone, Copy)]
enum LogFilter {
    /// A 2025-11-25 session: its level was relayed upstream (`logging/setLevel`).
    Session,
    /// A 2026-07-28 request: only when its `_meta` names a level, at that level or above.
    AtLeast(Option<LoggingLevel>),
}

impl LogFilter {
    fn of(context: &RequestContext<RoleServer>) -> Self {
        if is_stateless(context) {
            Self::AtLeast(context.meta.log_level())
        } else {
            Self::Session
        }
    }

    /// Whether any log line may pass.
    fn admits_any(self) -> bool {
        !matches!(self, Self::AtLeast(None))
    }

    fn admits(self, level: LoggingLevel) -> bool {
        match self {
            Self::Session => true,
            Self::AtLeast(None) => false,
            Self::AtLeast(Some(threshold)) => severity(level) >= severity(threshold),
        }
    }
}

/// RFC 5424 order of log levels, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A call's progress channel and the client's token for it.
type ProgressFeed = (
    ProgressToken,
    tokio::sync::mpsc::UnboundedReceiver<ProgressUpdate>,
);

/// How long the feeds must stay quiet after a call's answer before it is sent on.
const TRAILING_NOTIFICATIONS_QUIET: std::time::Duration = std::time::Duration::from_millis(10);
/// The most notifications sent on after a call's answer arrived.
const MAX_TRAILING_NOTIFICATIONS: usize = 1024;
/// The longest a call's answer waits for trailing notifications.
const TRAILING_NOTIFICATIONS_CAP: std::time::Duration = std::time::Duration::from_millis(100);

/// The next progress update of the call, with its token; `None` when there is no feed or it
/// closed (a `select!` branch then stays idle).
async fn next_progress(feed: &mut Option<ProgressFeed>) -> Option<(ProgressToken, ProgressUpdate)> {
    let (token, receiver) = feed.as_mut()?;
    let update = receiver.recv().await?;
    Some((token.clone(), update))
}

/// The next upstream event, when this call listens for them.
async fn next_event(
    events: &mut Option<tokio::sync::broadcast::Receiver<UpstreamEvent>>,
) -> Option<Result<UpstreamEvent, tokio::sync::broadcast::error::RecvError>> {
    Some(events.as_mut()?.recv().await)
}

/// Sends one progress notification to the client of the call.
async fn forward_progress(token: ProgressToken, update: ProgressUpdate, peer: &Peer<RoleServer>) {
    let mut param = ProgressNotificationParam::new(token, update.progress);
    if let Some(total) = update.total {
        param = param.with_total(total);
    }
    if let Some(message) = update.message {
        param = param.with_message(message);
    }
    let _ = peer.notify_progress(param).await;
}

/// Forwards an upstream log line to `peer` when it comes from `server` and the filter admits it;
/// returns whether it did.
async fn forward_log(
    event: UpstreamEvent,
    server: Option<&str>,
    filter: LogFilter,
    peer: &Peer<RoleServer>,
) -> bool {
    if let UpstreamEvent::Log {
        server: from,
        message,
    } = event
        && server == Some(from.as_str())
        && filter.admits(message.level)
    {
        let _ = peer.notify_logging_message(message).await;
        return true;
    }
    false
}

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

/// The resource URI of a local skill's instructions.
fn skill_uri(name: &str) -> String {
    format!("skill://{name}/SKILL.md")
}

/// A prompt's name in flat exposure: `mcp__<server>__<prompt>`.
fn flat_prompt_name(server: &str, prompt: &str) -> String {
    warden_mcp::naming::public_name_for(server, prompt)
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true},
            "prompts": {"listChanged": true},
        });
        // One fronted server: its completions, log level and resource subscriptions are relayed.
        if self.gateway.exposure == Exposure::Passthrough {
            capabilities["completions"] = json!({});
            capabilities["logging"] = json!({});
            capabilities["resources"]["subscribe"] = json!(true);
        }
        let capabilities: ServerCapabilities =
            serde_json::from_value(capabilities).unwrap_or_default();
        let mut config = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("warden", env!("CARGO_PKG_VERSION")));
        if let (Exposure::Passthrough, Some(upstream)) =
            (self.gateway.exposure, self.gateway.upstream())
            && let Ok(status) = self.gateway.host.servers().server_status(upstream)
            && let Some(instructions) = status.instructions
        {
            config = config.with_instructions(instructions);
        }
        config
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.gateway
            .changes
            .add(Listener::Session(context.peer.clone()));
        let gateway = self.gateway.clone();
        tokio::spawn(async move { gateway.prepare().await });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let id = self
            .gateway
            .changes
            .add(Listener::Stream(context.sink().clone()));
        self.gateway.prepare().await;
        context.cancelled().await;
        self.gateway.changes.remove(id);
        Ok(())
    }

    async fn complete(
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

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        };
        self.gateway
            .host
            .ungated_relay()
            .set_level(upstream, request)
            .await
            .map_err(relay_error)?;
        Ok(())
    }

    async fn subscribe(
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
            self.connection,
            context.peer.clone(),
            upstream.to_owned(),
            uri,
        );
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(upstream) = self.passthrough_upstream() else {
            return Err(McpError::method_not_found::<
                rmcp::model::UnsubscribeRequestMethod,
            >());
        };
        // Upstream, the subscription ends with the last downstream client that held it.
        if self
            .gateway
            .changes
            .unsubscribe(self.connection, upstream, &request.uri)
        {
            self.gateway
                .host
                .ungated_relay()
                .unsubscribe(upstream, request)
                .await
                .map_err(relay_error)?;
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.tools().await;
        self.gateway.remember_tools(&tools);
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.gateway.remembered_tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        if self.gateway.exposure == Exposure::Progressive {
            let result = progressive::call(self, request.name.as_ref(), arguments, &context).await;
            return Ok(CallToolResponse::Complete(result));
        }
        let public_name = self.public_name(request.name.as_ref()).await;
        let relay = relay_request(
            &context,
            request.input_responses.clone(),
            request.request_state.clone(),
        );
        self.gated_call_with(&public_name, arguments, &context, relay)
            .await
            .response()
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<Resource> = Vec::new();
        for server in self.servers() {
            // Through the gate, as the bridge lists them: a rule that denies the listing holds.
            match self
                .gated_listing::<Resource>(LIST_RESOURCES, &server, "resources", &context)
                .await
            {
                Ok(rows) => resources.extend(rows.into_iter().map(|resource| {
                    if self.flat() {
                        with_provenance(resource, &server)
                    } else {
                        resource
                    }
                })),
                Err(error) => tracing::warn!("listing the resources of {server}: {error}"),
            }
        }
        for skill in self.skills() {
            let resource: Result<Resource, _> = serde_json::from_value(json!({
                "uri": skill_uri(&skill.name),
                "name": skill.name,
                "description": format!("[skill] {}", skill.description),
                "mimeType": "text/markdown",
            }));
            if let Ok(resource) = resource {
                resources.push(resource);
            }
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates: Vec<ResourceTemplate> = Vec::new();
        for server in self.servers() {
            match self
                .gateway
                .host
                .servers()
                .resource_templates(&server)
                .await
            {
                Ok(found) => templates.extend(found.into_iter().map(|template| {
                    if self.flat() {
                        with_provenance(template, &server)
                    } else {
                        template
                    }
                })),
                Err(error) => tracing::warn!("listing the templates of {server}: {error}"),
            }
        }
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(skill) = self
            .skills()
            .iter()
            .find(|skill| skill_uri(&skill.name) == request.uri)
        {
            let text = self.load_skill(&skill.name, &context).await?;
            let mut result = ReadResourceResult::new(vec![
                ResourceContents::text(text, request.uri.clone()).with_mime_type("text/markdown"),
            ]);
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(ReadResourceResponse::Complete(result));
        }
        let servers = self.servers();
        // The server that lists the URI, else each server whose templates may match it.
        let mut owner = None;
        for server in &servers {
            let listed = self
                .gateway
                .host
                .servers()
                .resources(Some(server))
                .await
                .unwrap_or_default();
            if listed.iter().any(|row| row.resource.uri == request.uri) {
                owner = Some(server.clone());
                break;
            }
        }
        let candidates = match owner {
            Some(server) => vec![server],
            None => servers,
        };
        let mut last_failure = None;
        for server in candidates {
            match self.gated_read(&server, &request.uri, &context).await {
                Ok(result) => return Ok(ReadResourceResponse::Complete(result)),
                Err(failure) => last_failure = Some(failure),
            }
        }
        Err(McpError::resource_not_found(
            last_failure.unwrap_or_else(|| "Resource not found".to_owned()),
            Some(json!({"uri": request.uri})),
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut prompts: Vec<Prompt> = Vec::new();
        for server in self.servers() {
            match self
                .gated_listing::<Prompt>(LIST_PROMPTS, &server, "prompts", &context)
                .await
            {
                Ok(found) => prompts.extend(found.into_iter().map(|prompt| {
                    if self.flat() {
                        let mut prompt = with_provenance(prompt, &server);
                        prompt.name = flat_prompt_name(&server, &prompt.name);
                        prompt
                    } else {
                        prompt
                    }
                })),
                Err(error) => tracing::warn!("listing the prompts of {server}: {error}"),
            }
        }
        for skill in self.skills() {
            let mut prompt = Prompt::new(
                skill.name.clone(),
                Some(format!("[skill] {}", skill.description)),
                None,
            );
            prompt.title = Some(format!("Skill: {}", skill.name));
            prompts.push(prompt);
        }
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if self.skills().iter().any(|skill| skill.name == request.name) {
            let text = self.load_skill(&request.name, &context).await?;
            let mut result: GetPromptResult = serde_json::from_value(json!({
                "description": format!("The skill {}", request.name),
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            }))
            .map_err(|error| McpError::internal_error(error.to_string(), None))?;
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(GetPromptResponse::Complete(result));
        }
        let runtime = self.gateway.host.servers();
        let mut target = None;
        if self.flat() {
            'servers: for server in self.servers() {
                for prompt in runtime.prompts(&server).await.unwrap_or_default() {
                    if flat_prompt_name(&server, &prompt.name) == request.name {
                        target = Some((server.clone(), prompt.name));
                        break 'servers;
                    }
                }
            }
        } else if let Some(upstream) = self.gateway.upstream() {
            target = Some((upstream.to_owned(), request.name.clone()));
        }
        let Some((server, name)) = target else {
            return Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        };
        let arguments: BTreeMap<String, String> = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| {
                let text = match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                (key, text)
            })
            .collect();
        // Through the gate like every prompt get (audited as `prompt-get`, with this client).
        let mut call = CallContext::new(CallSource::PromptGet, context.ct.clone());
        call.caller = Some(self.caller(&context));
        let host = &self.gateway.host;
        if is_stateless(&context) && self.passthrough_upstream().is_some() {
            // Relayed as it is: an `input_required` result or the upstream's JSON-RPC error
            // goes back to the client unchanged.
            let relay = CallRelay::new(RelayRequest {
                pass_input_required: true,
                input_responses: request.input_responses.clone(),
                request_state: request.request_state.clone(),
                meta: Some(client_meta(&context)),
            });
            let gated = with_relay(
                relay.clone(),
                host.get_prompt(call, &server, &name, arguments),
            )
            .await;
            return match (relay.take_answer(), gated) {
                (Some(RelayedAnswer::Prompt(mut result)), _) | (None, Ok(mut result)) => {
                    result.result_type = Some(ResultType::COMPLETE);
                    Ok(GetPromptResponse::Complete(result))
                }
                (Some(RelayedAnswer::InputRequired(input)), _) => {
                    Ok(GetPromptResponse::InputRequired(input))
                }
                (Some(RelayedAnswer::Error(error)), _) => Err(error),
                (_, Err(refused)) => Err(McpError::invalid_params(refused.to_string(), None)),
                (Some(RelayedAnswer::Tool(_)), Ok(_)) => Err(McpError::internal_error(
                    format!("{server} answered prompts/get with a tool result"),
                    None,
                )),
            };
        }
        match host.get_prompt(call, &server, &name, arguments).await {
            Ok(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(GetPromptResponse::Complete(result))
            }
            Err(refused) => Err(McpError::invalid_params(refused.to_string(), None)),
        }
    }
}
