//! The gate's dispatcher for MCP tools: sends an admitted call by identity and converts the result.
//!
//! A surface that relays results (`warden serve`) runs its gated call inside [`with_relay`]: the
//! dispatcher then hands the server's answer as it was sent to that [`CallRelay`], out of band,
//! so that the text, hooks, audit and model only ever see the converted result (no base64).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorData, InputRequiredResult, InputResponses,
    RequestMetaObject, ServerResult,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_mcp::artifacts::ArtifactStore;
use warden_mcp::result::{ConversionContext, convert_tool_result};
use warden_mcp::{
    CallOptions, FailureKind, McpRuntime, Progress, RelayError, ToolIdentity as RawIdentity,
};
use warden_policy::{
    BoxFuture, DispatchCall, DispatchError, Dispatcher, ProgressSender, ProgressUpdate, ToolOutput,
    ToolSource,
};

tokio::task_local! {
    /// The relay of the gated call running in this task, if its surface gave one.
    static CALL_RELAY: CallRelay;
}

/// What a relaying surface asks of one MCP call beyond its arguments.
#[derive(Debug, Clone, Default)]
pub struct RelayRequest {
    /// Return the server's `input_required` result to the surface (whose client answers it and
    /// retries) instead of answering it here.
    pub pass_input_required: bool,
    /// The client's answers to an earlier `input_required` result.
    pub input_responses: Option<InputResponses>,
    /// The opaque state of an earlier `input_required` result, as the client sent it back.
    pub request_state: Option<String>,
    /// Entries added to the upstream request's `_meta` (the client's capabilities, log level).
    pub meta: Option<RequestMetaObject>,
}

/// The server's answer as it was sent, for the surface to relay unchanged.
#[derive(Debug, Clone)]
pub enum RelayedAnswer {
    Tool(CallToolResult),
    InputRequired(InputRequiredResult),
    /// The server's JSON-RPC error (with its code).
    Error(ErrorData),
}

/// A side channel between a relaying surface and the dispatcher for one gated call: the request
/// goes in, the server's raw answer comes out. Never part of the gate's outcome, so hooks,
/// audit and the model do not see it.
#[derive(Debug, Clone, Default)]
pub struct CallRelay {
    request: RelayRequest,
    answer: Arc<Mutex<Option<RelayedAnswer>>>,
}

impl CallRelay {
    pub fn new(request: RelayRequest) -> Self {
        Self {
            request,
            answer: Arc::default(),
        }
    }

    /// The server's answer, once the call ran (taken: a second look finds none).
    pub fn take_answer(&self) -> Option<RelayedAnswer> {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn put(&self, answer: RelayedAnswer) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    }
}

/// Runs `call` (a gated call) with `relay` as its side channel.
pub async fn with_relay<F: Future>(relay: CallRelay, call: F) -> F::Output {
    CALL_RELAY.scope(relay, call).await
}

fn current_relay() -> Option<CallRelay> {
    CALL_RELAY.try_with(CallRelay::clone).ok()
}

/// Dispatches MCP calls through the runtime; built-in tools are not its business.
pub struct McpDispatcher {
    runtime: McpRuntime,
    artifacts: ArtifactStore,
}

impl McpDispatcher {
    pub fn new(runtime: McpRuntime, artifacts: ArtifactStore) -> Self {
        Self { runtime, artifacts }
    }
}

/// Bridges the runtime's progress notifications to the caller's channel.
fn forward_progress(sink: ProgressSender) -> tokio::sync::mpsc::Sender<Progress> {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Progress>(64);
    tokio::spawn(async move {
        while let Some(update) = receiver.recv().await {
            let forwarded = ProgressUpdate {
                progress: update.progress,
                total: update.total,
                message: update.message,
            };
            if sink.send(forwarded).is_err() {
                break;
            }
        }
    });
    sender
}

/// Converts a result for the model on a blocking thread (it may write artifact files). The
/// result as sent goes to the call's relay, if any.
pub(crate) async fn convert_off_thread(
    result: CallToolResult,
    server: String,
    tool: String,
    store: ArtifactStore,
) -> Result<ToolOutput, DispatchError> {
    if let Some(relay) = current_relay() {
        relay.put(RelayedAnswer::Tool(result.clone()));
    }
    let converted = tokio::task::spawn_blocking(move || {
        let context = ConversionContext::new(&server, &tool, &store);
        convert_tool_result(result, &context)
    })
    .await
    .map_err(|error| DispatchError::new(format!("result conversion stopped: {error}")))?
    .map_err(|error| DispatchError::new(format!("result conversion failed: {error}")))?;
    let size_bytes = converted.text.len() as u64
        + converted
            .artifacts
            .iter()
            .map(|artifact| artifact.bytes)
            .sum::<u64>();
    Ok(ToolOutput {
        text: converted.text.clone(),
        is_error: converted.is_error,
        content: serde_json::to_value(&converted).ok(),
        size_bytes,
    })
}

/// The text the gate records for an `input_required` answer passed to the relaying surface.
fn input_required_output(input: &InputRequiredResult) -> ToolOutput {
    let asked: Vec<String> = input
        .input_requests
        .iter()
        .flatten()
        .map(|(key, request)| {
            let method = serde_json::to_value(request)
                .ok()
                .and_then(|value| {
                    value
                        .get("method")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| "input".to_owned());
            format!("{key} ({method})")
        })
        .collect();
    let text = if asked.is_empty() {
        "the server asks the client to retry with its request state".to_owned()
    } else {
        format!(
            "the server asks the client for input before answering: {}",
            asked.join(", ")
        )
    };
    ToolOutput::text(text)
}

impl Dispatcher for McpDispatcher {
    fn dispatch<'a>(
        &'a self,
        call: DispatchCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let ToolSource::Mcp { server } = &call.descriptor.identity.source else {
                return Err(DispatchError::new(format!(
                    "{} is not an MCP tool",
                    call.descriptor.public_name
                )));
            };
            let server = server.clone();
            let tool = call.descriptor.identity.tool.clone();
            let arguments = match call.arguments {
                Value::Object(map) => map,
                Value::Null => serde_json::Map::new(),
                other => {
                    return Err(DispatchError::new(format!(
                        "arguments must be a JSON object, got {other}"
                    )));
                }
            };
            let identity = RawIdentity::new(&server, &tool);
            let progress = call.progress.map(forward_progress);
            let options = CallOptions { progress, cancel };
            if let Some(relay) = current_relay().filter(|relay| relay.request.pass_input_required) {
                return self.relay_call(&relay, &identity, arguments, options).await;
            }
            let outcome = self
                .runtime
                .call_tool(&identity, arguments, options)
                .await
                .map_err(|error| {
                    if error.kind() == FailureKind::Timeout {
                        DispatchError::timed_out(error.to_string())
                    } else {
                        DispatchError::new(error.to_string())
                    }
                })?;
            convert_off_thread(outcome.result, server, tool, self.artifacts.clone()).await
        })
    }
}

impl McpDispatcher {
    /// One round of a relayed call: the server's answer goes to the relay as it is; an
    /// `input_required` result is not answered here but by the relaying surface's client.
    async fn relay_call(
        &self,
        relay: &CallRelay,
        identity: &RawIdentity,
        arguments: serde_json::Map<String, Value>,
        options: CallOptions,
    ) -> Result<ToolOutput, DispatchError> {
        let mut params =
            CallToolRequestParams::new(identity.tool.clone()).with_arguments(arguments);
        params.input_responses = relay.request.input_responses.clone();
        params.request_state = relay.request.request_state.clone();
        let answer = self
            .runtime
            .relay_call_tool(identity, params, relay.request.meta.clone(), options)
            .await;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                convert_off_thread(
                    result,
                    identity.server.clone(),
                    identity.tool.clone(),
                    self.artifacts.clone(),
                )
                .await
            }
            Ok(ServerResult::InputRequiredResult(input)) => {
                let output = input_required_output(&input);
                relay.put(RelayedAnswer::InputRequired(input));
                Ok(output)
            }
            Ok(ServerResult::EmptyResult(_)) => {
                convert_off_thread(
                    CallToolResult::success(Vec::new()),
                    identity.server.clone(),
                    identity.tool.clone(),
                    self.artifacts.clone(),
                )
                .await
            }
            Ok(_other) => Err(DispatchError::new(format!(
                "MCP {}: answered the call to \"{}\" with something that is not a tool result",
                identity.server, identity.tool
            ))),
            Err(RelayError::Rpc(error)) => {
                let message = format!(
                    "MCP {}: \"{}\" failed: {} (JSON-RPC error {})",
                    identity.server, identity.tool, error.message, error.code.0
                );
                relay.put(RelayedAnswer::Error(error));
                Err(DispatchError::new(message))
            }
            Err(RelayError::Failed(error)) if error.kind() == FailureKind::Timeout => {
                Err(DispatchError::timed_out(error.to_string()))
            }
            Err(RelayError::Failed(error)) => Err(DispatchError::new(error.to_string())),
        }
    }
}
