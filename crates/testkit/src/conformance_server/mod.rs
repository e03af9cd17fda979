//! The conformance fixture server behind `fixture-server`: the tools, resources, prompts and
//! behaviours the MCP conformance suite's server scenarios expect, for protocol revisions
//! 2025-11-25 (sessions) and 2026-07-28 (stateless, multi round-trip), over stdio or Streamable HTTP.

// Logging and sampling are deprecated in the newest revision (SEP-2577) but still exercised by the
// 2025-11-25 scenarios, which this fixture must serve.
#![allow(deprecated)]

mod catalog;
mod input_required;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
        CompleteRequestParams, CompleteResult, CreateMessageRequestParams, ElicitRequestParams,
        GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
        LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
        ProgressToken, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, RequestId,
        ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
        SubscriptionFilter, Tool, UnsubscribeRequestParams,
    },
    service::{RequestContext, SubscriptionContext, SubscriptionSink},
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use catalog::{AUDIO_WAV_BASE64, IMAGE_PNG_BASE64, STATIC_TEXT, STATIC_TEXT_URI};
use input_required::{RequestStates, Round, ToolRound};

/// The name the server gives in `initialize` and `server/discover`.
pub const SERVER_NAME: &str = "warden-conformance-fixture";
/// Browser origins accepted over HTTP: loopback only, any port (DNS rebinding protection).
pub const LOOPBACK_ORIGINS: [&str; 3] =
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];
/// `Host` values accepted over HTTP: loopback only (DNS rebinding protection).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// The logger name on the server's log notifications.
const LOGGER: &str = "conformance-test-server";
/// Pause between the notifications of the logging and progress tools.
const STEP_PAUSE: Duration = Duration::from_millis(50);

/// Why the conformance fixture stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceServerError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("MCP handshake failed: {0}")]
    Handshake(Box<rmcp::service::ServerInitializeError>),
    #[error("the server task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl From<rmcp::service::ServerInitializeError> for ConformanceServerError {
    fn from(error: rmcp::service::ServerInitializeError) -> Self {
        ConformanceServerError::Handshake(Box::new(error))
    }
}

/// State shared by every handler instance (one per HTTP session or stateless request).
#[derive(Debug, Clone, Default)]
struct Shared {
    /// The newest revision served (`None`: every revision rmcp knows).
    newest_revision: Option<ProtocolVersion>,
    request_states: RequestStates,
    listeners: Arc<Mutex<Vec<SubscriptionSink>>>,
}

/// The conformance fixture's MCP server handler.
#[derive(Debug, Clone, Default)]
pub struct ConformanceServer {
    shared: Shared,
    /// The level set by `logging/setLevel`, per session (each session gets its own handler).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

impl ConformanceServer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A server that speaks no revision newer than `newest` (it advertises and negotiates only
    /// those), as a server written before a later revision does.
    pub fn up_to(newest: ProtocolVersion) -> Self {
        let mut server = Self::default();
        server.shared.newest_revision = Some(newest);
        server
    }

    /// A handler for a new session or stateless request: shared state, its own log level.
    fn for_new_session(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            log_level: Arc::default(),
        }
    }

    /// Sends a log notification unless the client's level filters it out. On 2026-07-28 a
    /// request gets logs only when its `_meta` names a level; on older revisions the level set
    /// by `logging/setLevel` applies, and everything is sent until one is set.
    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: Value) {
        let threshold = if is_stateless(context) {
            match context.meta.log_level() {
                Some(threshold) => Some(threshold),
                None => return,
            }
        } else {
            *self
                .log_level
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if threshold.is_some_and(|threshold| severity(level) < severity(threshold)) {
            return;
        }
        let param: Result<LoggingMessageNotificationParam, _> =
            decode(json!({"level": level, "logger": LOGGER, "data": data}));
        if let Ok(param) = param {
            // A client that went away cannot be told; the tool still answers.
            let _ = context.peer.notify_logging_message(param).await;
        }
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        if let Some(result) = catalog::fixed_tool_result(name) {
            return complete(decode_complete(result)?);
        }
        let client_capabilities = context.client_capabilities();
        let round = ToolRound {
            name,
            responses: request.input_responses.as_ref(),
            request_state: request.request_state.as_deref(),
            client_capabilities: client_capabilities.as_ref(),
        };
        if !is_stateless(&context)
            && let Some(answer) =
                input_required::ask_mid_call(name, &context.peer, client_capabilities.as_ref())
                    .await
        {
            return answer.map(CallToolResponse::Complete);
        }
        if let Some(answer) = input_required::call_tool(&round, &self.shared.request_states) {
            return answer.map(|round| match round {
                Round::Complete(result) => CallToolResponse::Complete(result),
                Round::InputRequired(result) => CallToolResponse::InputRequired(result),
            });
        }
        let arguments = request.arguments.as_ref();
        let string_argument = |key: &str| {
            arguments
                .and_then(|arguments| arguments.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        // A 2026-07-28 request cannot be answered by asking the client mid-call: the tools that
        // do so on older revisions return an input_required result instead.
        if is_stateless(&context)
            && let Some(answer) = input_required::asking_tool(
                &round,
                &string_argument("prompt"),
                &string_argument("message"),
            )
        {
            return answer.map(|round| match round {
                Round::Complete(result) => CallToolResponse::Complete(result),
                Round::InputRequired(result) => CallToolResponse::InputRequired(result),
            });
        }
        match name {
            "test_tool_with_logging" => {
                for (index, message) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if index > 0 {
                        tokio::time::sleep(STEP_PAUSE).await;
                    }
                    self.log(&context, LoggingLevel::Info, json!(message)).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                if let Some(token) = &token {
                    for (index, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                        if index > 0 {
                            tokio::time::sleep(STEP_PAUSE).await;
                        }
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), done)
                                    .with_total(100.0)
                                    .with_message(format!("Completed step {done} of 100")),
                            )
                            .await;
                    }
                }
                let shown = token
                    .and_then(|token| serde_json::to_value(token).ok())
                    .map_or_else(
                        || "0".to_owned(),
                        |value| match value {
                            Value::String(text) => text,
                            other => other.to_string(),
                        },
                    );
                text(shown)
            }
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text(
                    "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
                )
            }
            "test_sampling" => {
                let params: CreateMessageRequestParams = decode(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": string_argument("prompt")}}],
                    "maxTokens": 100
                }))?;
                #[allow(deprecated)]
                let answer = context.peer.create_message(params).await;
                match answer {
                    Ok(result) => {
                        let value = serde_json::to_value(&result).unwrap_or_default();
                        let said = value
                            .pointer("/content/text")
                            .or_else(|| value.pointer("/content/0/text"))
                            .and_then(Value::as_str)
                            .unwrap_or("No response")
                            .to_owned();
                        text(format!("LLM response: {said}"))
                    }
                    Err(error) => text(format!("Sampling not supported or error: {error}")),
                }
            }
            "test_elicitation"
            | "test_elicitation_sep1034_defaults"
            | "test_elicitation_sep1330_enums" => {
                let params = catalog::elicitation_params(name, &string_argument("message"))
                    .ok_or_else(|| {
                        McpError::internal_error("no elicitation for this tool", None)
                    })?;
                let params: ElicitRequestParams = decode(params)?;
                let prefix = if name == "test_elicitation" {
                    "User response"
                } else {
                    "Elicitation completed"
                };
                match context.peer.create_elicitation(params).await {
                    Ok(result) => {
                        let value = serde_json::to_value(&result).unwrap_or_default();
                        let action = value["action"].as_str().unwrap_or("unknown").to_owned();
                        let content = value.get("content").cloned().unwrap_or_else(|| json!({}));
                        text(format!("{prefix}: action={action}, content={content}"))
                    }
                    Err(error) => text(format!("Elicitation not supported or error: {error}")),
                }
            }
            "json_schema_2020_12_tool" => text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                arguments.map_or_else(
                    || "{}".to_owned(),
                    |arguments| Value::Object(arguments.clone()).to_string()
                )
            )),
            "test_custom_headers" => text(format!("region: {}", string_argument("region"))),
            "test_missing_capability" => {
                let has_sampling = client_capabilities
                    .as_ref()
                    .is_some_and(|caps| caps.sampling.is_some());
                if has_sampling {
                    text("Success")
                } else {
                    let required: ClientCapabilities = decode(json!({"sampling": {}}))?;
                    Err(McpError::missing_required_client_capability(required))
                }
            }
            "test_streaming_elicitation" => {
                // A progress notification on the response stream, then the result: the stream
                // carries notifications and the response, never an independent request.
                let token = context.meta.get_progress_token().unwrap_or_else(|| {
                    ProgressToken(rmcp::model::NumberOrString::String(
                        "streaming-elicitation".into(),
                    ))
                });
                let _ = context
                    .peer
                    .notify_progress(ProgressNotificationParam::new(token, 50.0).with_total(100.0))
                    .await;
                text("Streaming complete")
            }
            "test_logging_tool" => {
                // Sent only when the request's `_meta` asks for logs (see `log`).
                self.log(
                    &context,
                    LoggingLevel::Info,
                    json!("Diagnostic trace logging activated"),
                )
                .await;
                text("Logging evaluated")
            }
            "test_trigger_tool_change" | "test_trigger_prompt_change" => {
                let listeners: Vec<SubscriptionSink> = self
                    .shared
                    .listeners
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                for sink in listeners {
                    // Only listeners that asked for this kind accept it; the rest refuse.
                    let _ = if name == "test_trigger_tool_change" {
                        sink.notify_tool_list_changed().await
                    } else {
                        sink.notify_prompt_list_changed().await
                    };
                }
                text("Mutation triggered")
            }
            _ => Err(McpError::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            )),
        }
    }
}

/// Whether the request speaks 2026-07-28 or later (no mid-call requests to the client).
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The rank of a log level, least severe first.
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

/// Decodes a value built from the catalogue into an rmcp model type.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(format!("fixture built a bad value: {error}"), None)
    })
}

/// Decodes a complete result, marking it `resultType: "complete"` (required on 2026-07-28;
/// rmcp strips it again for older peers).
fn decode_complete<T: DeserializeOwned>(mut value: Value) -> Result<T, McpError> {
    if let Value::Object(fields) = &mut value {
        fields.insert("resultType".into(), json!("complete"));
    }
    decode(value)
}

fn complete(result: CallToolResult) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(result))
}

fn text(text: impl Into<String>) -> Result<CallToolResponse, McpError> {
    complete(decode_complete(
        json!({"content": [{"type": "text", "text": text.into()}]}),
    )?)
}

fn decode_all<T: DeserializeOwned>(values: Vec<Value>) -> Result<Vec<T>, McpError> {
    values.into_iter().map(decode).collect()
}

fn capabilities() -> ServerCapabilities {
    serde_json::from_value(json!({
        "tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
        "logging": {},
        "completions": {}
    }))
    .unwrap_or_default()
}

impl ServerHandler for ConformanceServer {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match &self.shared.newest_revision {
            Some(newest) => std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(newest)),
            None => std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(capabilities())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(decode_all(
            catalog::tools(),
        )?))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::tools()
            .into_iter()
            .find(|tool| tool["name"] == name)
            .and_then(|tool| serde_json::from_value(tool).ok())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(decode_all(
            catalog::resources(),
        )?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(decode_all(
            catalog::resource_templates(),
        )?))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match catalog::read_resource(&request.uri) {
            Some(result) => Ok(ReadResourceResponse::Complete(decode_complete(result)?)),
            None => Err(McpError::resource_not_found(
                "Resource not found",
                Some(json!({"uri": request.uri})),
            )),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.log(
            &context,
            LoggingLevel::Info,
            json!(format!("Subscribed to resource: {}", request.uri)),
        )
        .await;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.log(
            &context,
            LoggingLevel::Info,
            json!(format!("Unsubscribed from resource: {}", request.uri)),
        )
        .await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(decode_all(
            catalog::prompts(),
        )?))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name == "test_input_required_result_prompt" && !is_stateless(&context) {
            return input_required::prompt_asking_mid_call(&context.peer)
                .await
                .map(GetPromptResponse::Complete);
        }
        if request.name == "test_input_required_result_prompt" {
            return input_required::get_prompt(request.input_responses.as_ref()).map(|round| {
                match round {
                    Round::Complete(result) => GetPromptResponse::Complete(result),
                    Round::InputRequired(result) => GetPromptResponse::InputRequired(result),
                }
            });
        }
        match catalog::prompt_messages(&request.name, request.arguments.as_ref()) {
            Some(result) => Ok(GetPromptResponse::Complete(decode_complete(result)?)),
            None => Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            )),
        }
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        decode_complete(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(request.level);
        self.log(
            &context,
            LoggingLevel::Info,
            json!(format!(
                "Log level set to: {}",
                json!(request.level).as_str().unwrap_or("?")
            )),
        )
        .await;
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let sink = context.sink().clone();
        let id: RequestId = sink.id().clone();
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sink);
        context.cancelled().await;
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|sink| sink.id() != &id);
        Ok(())
    }
}

/// The Streamable HTTP settings: loopback `Host` and `Origin` only, SSE retry hints on.
pub fn http_config() -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(LOOPBACK_HOSTS)
        .with_allowed_origins(LOOPBACK_ORIGINS)
}

/// Serves the conformance fixture over stdio, or over Streamable HTTP at `http` (path `/mcp`),
/// printing `listening on http://ADDR/mcp` to stderr once bound.
pub async fn run(
    http: Option<SocketAddr>,
    newest_revision: Option<ProtocolVersion>,
) -> Result<(), ConformanceServerError> {
    let server = newest_revision.map_or_else(ConformanceServer::new, ConformanceServer::up_to);
    match http {
        None => {
            let running = server.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
            Ok(())
        }
        Some(addr) => {
            let service: StreamableHttpService<ConformanceServer, LocalSessionManager> =
                StreamableHttpService::new(
                    move || Ok(server.for_new_session()),
                    Arc::new(LocalSessionManager::default()),
                    http_config(),
                );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = crate::fixtures::bind_and_announce(addr).await?;
            crate::fixtures::serve_router(listener, router).await?;
            Ok(())
        }
    }
}
