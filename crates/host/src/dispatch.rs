//! The gate's dispatcher for MCP tools: sends an admitted call by identity and converts the result.
//!
//! A surface that relays results (`warden serve`) runs its gated call inside [`with_relay`]: the
//! dispatcher then hands the server's answer as it was sent to that [`CallRelay`], out of band,
//! so that the text, hooks, audit and model only ever see the converted result (no base64).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, InputRequiredResult,
    InputResponses, RequestMetaObject, ServerResult,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_mcp::ArtifactStore;
use warden_mcp::{
    CallOptions, FailureKind, McpRuntime, Progress, RelayError, ToolIdentity as RawIdentity,
};
use warden_mcp::{
    ConversionContext, ConvertedResult, DEFAULT_INLINE_LIMIT_BYTES, convert_tool_result,
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
    /// A prompt, from a relayed `prompts/get`.
    Prompt(rmcp::model::GetPromptResult),
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

    /// What the relaying surface asks of the call.
    pub(crate) fn request(&self) -> &RelayRequest {
        &self.request
    }

    pub(crate) fn put(&self, answer: RelayedAnswer) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    }
}

/// Runs `call` (a gated call) with `relay` as its side channel.
pub async fn with_relay<F: Future>(relay: CallRelay, call: F) -> F::Output {
    CALL_RELAY.scope(relay, call).await
}

pub(crate) fn current_relay() -> Option<CallRelay> {
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

/// Bridges the runtime's progress notifications to the caller's channel; the task ends once
/// the runtime has let go of the sender and every update it sent is forwarded.
fn forward_progress(
    sink: ProgressSender,
) -> (
    tokio::sync::mpsc::Sender<Progress>,
    tokio::task::JoinHandle<()>,
) {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Progress>(64);
    let forwarding = tokio::spawn(async move {
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
    (sender, forwarding)
}

/// Waits until every progress update the server sent before its answer has reached the caller,
/// so a result never overtakes its own progress (bounded: a sender kept elsewhere by mistake
/// costs a second, never the call).
async fn flush_progress(forwarding: Option<tokio::task::JoinHandle<()>>) {
    if let Some(forwarding) = forwarding {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), forwarding).await;
    }
}

/// Converts a result for the model. A result that will write no artifact (only text and
/// resource links, small enough to be shown inline) is converted right here: it is a few
/// string copies, cheaper than a thread hand-off. Anything else may write artifact files, so it
/// is converted on a blocking thread. The result as sent goes to the call's relay, if any.
pub(crate) async fn convert_off_thread(
    result: CallToolResult,
    server: String,
    tool: String,
    store: ArtifactStore,
) -> Result<ToolOutput, DispatchError> {
    if let Some(relay) = current_relay() {
        relay.put(RelayedAnswer::Tool(result.clone()));
    }
    let converted = if converts_inline(&result, DEFAULT_INLINE_LIMIT_BYTES) {
        let context = ConversionContext::new(&server, &tool, &store);
        convert_tool_result(result, &context)
    } else {
        tokio::task::spawn_blocking(move || {
            let context = ConversionContext::new(&server, &tool, &store);
            convert_tool_result(result, &context)
        })
        .await
        .map_err(|error| DispatchError::new(format!("result conversion stopped: {error}")))?
    }
    .map_err(|error| DispatchError::new(format!("result conversion failed: {error}")))?;
    Ok(tool_output(converted))
}

/// Whether converting `result` can write no artifact file: every block is text or a resource
/// link, and all its text, with the structured content, fits within `inline_limit` (so nothing
/// is spilled). Errs on the side of "no": then the conversion runs on a blocking thread.
fn converts_inline(result: &CallToolResult, inline_limit: usize) -> bool {
    let mut budget = inline_limit;
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => match budget.checked_sub(text.text.len()) {
                Some(left) => budget = left,
                None => return false,
            },
            ContentBlock::ResourceLink(_) => {}
            _ => return false,
        }
    }
    result
        .structured_content
        .as_ref()
        .is_none_or(|structured| pretty_json_fits(structured, budget))
}

/// Whether `value`, pretty-printed, surely takes at most `budget` bytes. Over-estimates (every
/// string counted as if each byte were escaped to six, generous indentation), never under.
fn pretty_json_fits(value: &Value, budget: usize) -> bool {
    fn walk(value: &Value, depth: usize, budget: &mut usize) -> bool {
        // Indentation, separators and brackets of this element, generously.
        let overhead = 2 * depth + 8;
        let cost = match value {
            Value::Null | Value::Bool(_) | Value::Number(_) => overhead + 24,
            Value::String(text) => overhead + 2 + 6 * text.len(),
            Value::Array(_) | Value::Object(_) => overhead + 4,
        };
        let Some(left) = budget.checked_sub(cost) else {
            return false;
        };
        *budget = left;
        match value {
            Value::Array(items) => items.iter().all(|item| walk(item, depth + 1, budget)),
            Value::Object(entries) => entries.iter().all(|(key, item)| {
                match budget.checked_sub(6 * key.len() + 4) {
                    Some(left) => *budget = left,
                    None => return false,
                }
                walk(item, depth + 1, budget)
            }),
            _ => true,
        }
    }
    let mut budget = budget;
    walk(value, 0, &mut budget)
}

/// The gate's view of a converted result (the text moved, not copied).
fn tool_output(converted: ConvertedResult) -> ToolOutput {
    let size_bytes = converted.text.len() as u64
        + converted
            .artifacts
            .iter()
            .map(|artifact| artifact.bytes)
            .sum::<u64>();
    let content = serde_json::to_value(&converted).ok();
    ToolOutput {
        text: converted.text,
        is_error: converted.is_error,
        content,
        size_bytes,
        confinement: None,
    }
}

/// The text the gate records for an `input_required` answer passed to the relaying surface.
pub(crate) fn input_required_output(input: &InputRequiredResult) -> ToolOutput {
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
            let (progress, forwarding) = match call.progress.map(forward_progress) {
                Some((sender, forwarding)) => (Some(sender), Some(forwarding)),
                None => (None, None),
            };
            let relay = current_relay();
            let options = CallOptions {
                progress,
                cancel,
                meta: relay.as_ref().and_then(|relay| relay.request.meta.clone()),
            };
            if let Some(relay) = relay.filter(|relay| relay.request.pass_input_required) {
                // Boxed: only a relayed call builds this future, so the common call's future
                // (moved whole into its box) stays small.
                let answer = Box::pin(self.relay_call(&relay, &identity, arguments, options)).await;
                flush_progress(forwarding).await;
                return answer;
            }
            let outcome = self.runtime.call_tool(&identity, arguments, options).await;
            flush_progress(forwarding).await;
            let outcome = outcome.map_err(|error| match error.kind() {
                FailureKind::Timeout => DispatchError::timed_out(error.to_string()),
                kind => DispatchError::Server {
                    kind,
                    message: error.to_string(),
                },
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
            .relay_call_tool(identity, params, options)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rmcp::model::Resource;
    use serde_json::json;

    use super::*;

    fn convert_directly(result: CallToolResult, store: &ArtifactStore) -> ToolOutput {
        let context = ConversionContext::new("fx", "echo", store);
        tool_output(convert_tool_result(result, &context).unwrap())
    }

    fn structured(value: Value) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text("see below")]);
        result.structured_content = Some(value);
        result
    }

    /// Results that stay inline and results that spill or carry binary data.
    fn results() -> Vec<(CallToolResult, bool)> {
        let link = ContentBlock::resource_link(Resource::new("file:///a.txt", "a"));
        let nested = json!({"rows": (0..40).map(|row| json!({"id": row, "name": format!("row \"{row}\"\n"), "ok": row % 2 == 0, "none": null})).collect::<Vec<_>>()});
        vec![
            (
                CallToolResult::success(vec![ContentBlock::text("ping")]),
                true,
            ),
            (CallToolResult::success(Vec::new()), true),
            (
                CallToolResult::error(vec![ContentBlock::text("it broke")]),
                true,
            ),
            (
                CallToolResult::success(vec![
                    ContentBlock::text("a"),
                    link,
                    ContentBlock::text("b"),
                ]),
                true,
            ),
            (structured(nested.clone()), true),
            (
                CallToolResult::success(vec![ContentBlock::text(
                    "x".repeat(DEFAULT_INLINE_LIMIT_BYTES),
                )]),
                true,
            ),
            (
                CallToolResult::success(vec![ContentBlock::text(
                    "x".repeat(DEFAULT_INLINE_LIMIT_BYTES + 1),
                )]),
                false,
            ),
            (
                CallToolResult::success(vec![
                    ContentBlock::text("y".repeat(DEFAULT_INLINE_LIMIT_BYTES / 2 + 1)),
                    ContentBlock::text("z".repeat(DEFAULT_INLINE_LIMIT_BYTES / 2)),
                ]),
                false,
            ),
            (
                CallToolResult::success(vec![ContentBlock::image("aGVsbG8=", "image/png")]),
                false,
            ),
            (
                structured(json!({"blob": "q".repeat(DEFAULT_INLINE_LIMIT_BYTES)})),
                false,
            ),
        ]
    }

    #[test]
    fn only_results_that_write_no_artifact_convert_inline() {
        for (index, (result, inline)) in results().into_iter().enumerate() {
            assert_eq!(
                converts_inline(&result, DEFAULT_INLINE_LIMIT_BYTES),
                inline,
                "result {index}"
            );
            if inline {
                let dir = tempfile::tempdir().unwrap();
                let store = ArtifactStore::new(dir.path().join("artifacts"));
                let output = convert_directly(result, &store);
                assert_eq!(
                    output.content.unwrap()["artifacts"],
                    json!([]),
                    "result {index}"
                );
            }
        }
    }

    #[tokio::test]
    async fn both_paths_give_the_same_output_as_the_conversion_itself() {
        for (index, (result, inline)) in results().into_iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let store = ArtifactStore::new(dir.path().join("artifacts"));
            let converted =
                convert_off_thread(result.clone(), "fx".into(), "echo".into(), store.clone())
                    .await
                    .unwrap();
            let again = tempfile::tempdir().unwrap();
            let direct =
                convert_directly(result, &ArtifactStore::new(again.path().join("artifacts")));
            let artifacts = converted.content.as_ref().unwrap()["artifacts"]
                .as_array()
                .unwrap()
                .len();
            assert_eq!(artifacts > 0, !inline, "result {index}: artifacts written");
            assert_eq!(converted.is_error, direct.is_error, "result {index}");
            assert_eq!(converted.size_bytes, direct.size_bytes, "result {index}");
            if inline {
                assert_eq!(converted.text, direct.text, "result {index}");
                assert_eq!(converted.content, direct.content, "result {index}");
            }
        }
    }

    #[test]
    fn the_structured_estimate_never_falls_short_of_the_pretty_text() {
        let values = [
            json!(null),
            json!(1.0e300),
            json!(-12345678901234567_i64),
            json!("\u{1}\u{2}\"\\\n"),
            json!({"a": [1, 2, {"b": [[], {}, "\u{7f}é"]}], "c": {"d": {"e": {"f": true}}}}),
            json!(
                (0..50)
                    .map(|n| json!({"n": n, "s": "\u{0}".repeat(n)}))
                    .collect::<Vec<_>>()
            ),
        ];
        for value in values {
            let pretty = serde_json::to_string_pretty(&value).unwrap().len();
            for budget in [0, pretty / 2, pretty, pretty * 2, pretty * 8] {
                if pretty_json_fits(&value, budget) {
                    assert!(pretty <= budget, "{value}: {pretty} > {budget}");
                }
            }
            assert!(
                pretty_json_fits(&value, pretty * 16 + 64),
                "{value}: fits a generous budget"
            );
        }
    }
}
