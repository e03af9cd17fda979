//! The gate's dispatcher for MCP tools: sends an admitted call by identity and converts the result.

use rmcp::model::CallToolResult;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_mcp::artifacts::ArtifactStore;
use warden_mcp::result::{ConversionContext, convert_tool_result};
use warden_mcp::{CallOptions, FailureKind, McpRuntime, Progress, ToolIdentity as RawIdentity};
use warden_policy::{
    BoxFuture, DispatchCall, DispatchError, Dispatcher, ProgressSender, ProgressUpdate, ToolOutput,
    ToolSource,
};

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

/// Converts a result for the model on a blocking thread (it may write artifact files).
pub(crate) async fn convert_off_thread(
    result: CallToolResult,
    server: String,
    tool: String,
    store: ArtifactStore,
) -> Result<ToolOutput, DispatchError> {
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
            let outcome = self
                .runtime
                .call_tool(&identity, arguments, CallOptions { progress, cancel })
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
