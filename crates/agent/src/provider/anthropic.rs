//! Anthropic Messages: request body (content blocks, merged roles, deferred tools with
//! `defer_loading`, `tool_reference` results, the server tool search, extended thinking) and
//! stream decoder (thinking blocks kept with their signatures to be sent back, their text
//! streamed as thoughts).

use serde_json::{Value, json};
use warden_config::Secret;

use warden_config::{DeferMode, ModelProvider};

use super::{
    ANTHROPIC_TOOL_SEARCH_NAME, ANTHROPIC_TOOL_SEARCH_TYPE, DeferredTools, ModelConfig, ModelDelta,
    ModelRequest, ModelResponse, ProviderError, SseEvent, StreamDecoder, StreamState, WireFormat,
    text_at, typed_event,
};
use crate::conversation::{Message, ToolSpec};

fn tool_definition(tool: &ToolSpec) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema})
}

/// The API version header value sent with every request.
pub(super) const ANTHROPIC_VERSION: &str = "2023-06-01";

pub(crate) struct Messages;

impl WireFormat for Messages {
    fn path(&self) -> &'static str {
        "/messages"
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(key) = key {
            headers.push(("x-api-key", key.expose().to_string()));
        }
        headers
    }

    fn body(
        &self,
        config: &ModelConfig,
        request: &ModelRequest<'_>,
        deferred: &DeferredTools<'_>,
    ) -> Value {
        // Anthropic wants alternating roles: consecutive blocks of one role share a message.
        let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
        fn push_to(
            messages: &mut Vec<(&'static str, Vec<Value>)>,
            role: &'static str,
            block: Value,
        ) {
            match messages.last_mut() {
                Some((last, blocks)) if *last == role => blocks.push(block),
                _ => messages.push((role, vec![block])),
            }
        }
        for message in request.messages {
            match message {
                Message::User { text } => {
                    push_to(&mut messages, "user", json!({"type": "text", "text": text}))
                }
                Message::Assistant { text, tool_calls } => {
                    if !text.is_empty() {
                        push_to(
                            &mut messages,
                            "assistant",
                            json!({"type": "text", "text": text}),
                        );
                    }
                    for call in tool_calls {
                        let input = call
                            .parsed_arguments()
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        push_to(
                            &mut messages,
                            "assistant",
                            json!({"type": "tool_use", "id": call.id, "name": call.name,
                                "input": input}),
                        );
                    }
                }
                Message::ToolResult {
                    call_id,
                    text,
                    is_error,
                    ..
                } => push_to(
                    &mut messages,
                    "user",
                    json!({"type": "tool_result", "tool_use_id": call_id,
                        "content": text, "is_error": is_error}),
                ),
                // Thinking blocks (with their signatures) and the server tool search's own
                // blocks, replayed unchanged at the start of the assistant turn, as the API
                // requires for thinking before a tool_use.
                Message::ProviderBlocks { provider, blocks }
                    if provider == ModelProvider::Anthropic.as_str() =>
                {
                    for block in blocks {
                        push_to(&mut messages, "assistant", block.clone());
                    }
                }
                Message::ProviderBlocks { .. } => {}
                Message::ToolReferences {
                    call_id,
                    tool_names,
                } if deferred.mode == DeferMode::Reference && !tool_names.is_empty() => {
                    // The search result becomes references the API expands into the deferred
                    // definitions (which are in the tools array from the first request).
                    let references: Vec<Value> = tool_names
                        .iter()
                        .map(|name| json!({"type": "tool_reference", "tool_name": name}))
                        .collect();
                    if let Some((_, blocks)) = messages.last_mut()
                        && let Some(result) = blocks.iter_mut().rev().find(|block| {
                            block.get("type").and_then(Value::as_str) == Some("tool_result")
                                && block.get("tool_use_id").and_then(Value::as_str)
                                    == Some(call_id.as_str())
                        })
                    {
                        result["content"] = Value::Array(references);
                    }
                }
                Message::ToolReferences { .. } => {}
            }
        }
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": config.id,
            "max_tokens": config.max_output_tokens,
            "messages": messages,
            "stream": true,
        });
        if let Some(budget) = config.thinking_budget {
            // The budget is part of `max_tokens`, which must exceed it.
            body["max_tokens"] = json!(config.max_output_tokens.saturating_add(budget));
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        // The tools array: the server tool search (tool-search mode) first, then the offered
        // tools (appended to as tools load), then the deferred definitions; each part only
        // grows at its end and the deferred part is fixed for the session.
        let mut tools: Vec<Value> = Vec::new();
        if deferred.mode == DeferMode::ToolSearch && deferred.sends_definitions() {
            tools.push(json!({"type": ANTHROPIC_TOOL_SEARCH_TYPE,
                "name": ANTHROPIC_TOOL_SEARCH_NAME}));
        }
        tools.extend(request.tools.iter().map(tool_definition));
        if deferred.sends_definitions() {
            tools.extend(deferred.tools.iter().map(|tool| {
                let mut definition = tool_definition(tool);
                definition["defer_loading"] = json!(true);
                definition
            }));
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(MessagesDecoder::default())
    }
}

#[derive(Default)]
struct MessagesDecoder {
    state: StreamState,
    /// Blocks sent back verbatim, by stream index: thinking blocks (their text and signature
    /// accumulated from the deltas) and server-run blocks, with the streamed JSON of a
    /// `server_tool_use` input.
    server_blocks: Vec<(String, Value, String)>,
}

impl MessagesDecoder {
    fn server_block(&mut self, index: &str) -> Option<&mut (String, Value, String)> {
        self.server_blocks
            .iter_mut()
            .find(|(key, _, _)| key == index)
    }
}

impl StreamDecoder for MessagesDecoder {
    fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ModelDelta>, ProviderError> {
        let Some((value, kind)) = typed_event(event)? else {
            return Ok(Vec::new());
        };
        let str_at = |pointer: &str| text_at(&value, pointer);
        let u64_at = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
        let index = u64_at("/index").unwrap_or(0).to_string();
        let mut deltas = Vec::new();
        match kind.as_str() {
            "message_start" => {
                self.state.usage.input_tokens = u64_at("/message/usage/input_tokens").unwrap_or(0)
                    + u64_at("/message/usage/cache_creation_input_tokens").unwrap_or(0)
                    + u64_at("/message/usage/cache_read_input_tokens").unwrap_or(0);
                self.state.usage.cached_input_tokens =
                    u64_at("/message/usage/cache_read_input_tokens").unwrap_or(0);
                self.state.usage.output_tokens =
                    u64_at("/message/usage/output_tokens").unwrap_or(0);
                self.state.usage.reported = value.pointer("/message/usage").is_some();
            }
            "content_block_start" => {
                let block_type = str_at("/content_block/type");
                match block_type.as_str() {
                    "tool_use" => deltas.push(self.state.calls.start(
                        index,
                        str_at("/content_block/id"),
                        str_at("/content_block/name"),
                    )),
                    "text" => {}
                    "thinking" => {
                        let mut block = value.get("content_block").cloned().unwrap_or_default();
                        for key in ["thinking", "signature"] {
                            if !block.get(key).is_some_and(Value::is_string) {
                                block[key] = json!("");
                            }
                        }
                        self.server_blocks.push((index, block, String::new()));
                    }
                    // `redacted_thinking` (its encrypted `data`), `server_tool_use` and its
                    // `*_tool_result`: kept verbatim.
                    _ => {
                        let block = value.get("content_block").cloned().unwrap_or_default();
                        self.server_blocks.push((index, block, String::new()));
                    }
                }
            }
            "content_block_delta"
                if value.pointer("/delta/type").and_then(Value::as_str)
                    == Some("input_json_delta")
                    && self.server_block(&index).is_some() =>
            {
                let fragment = str_at("/delta/partial_json");
                if let Some((_, _, input)) = self.server_block(&index) {
                    input.push_str(&fragment);
                }
            }
            "content_block_stop" => {
                if let Some((_, block, input)) = self.server_block(&index)
                    && !input.trim().is_empty()
                {
                    block["input"] = serde_json::from_str(input).map_err(|error| {
                        ProviderError::Protocol(format!(
                            "the input of a server tool call is not JSON: {error}"
                        ))
                    })?;
                }
            }
            "content_block_delta" => match value.pointer("/delta/type").and_then(Value::as_str) {
                Some("text_delta") => {
                    let text = str_at("/delta/text");
                    if !text.is_empty() {
                        self.state.text.push_str(&text);
                        deltas.push(ModelDelta::Text { text });
                    }
                }
                Some("input_json_delta") => {
                    self.state
                        .calls
                        .append(&index, &str_at("/delta/partial_json"))?;
                }
                Some(kind @ ("thinking_delta" | "signature_delta")) => {
                    let (key, piece) = if kind == "thinking_delta" {
                        ("thinking", str_at("/delta/thinking"))
                    } else {
                        ("signature", str_at("/delta/signature"))
                    };
                    if let Some((_, block, _)) = self.server_block(&index) {
                        let mut joined = block[key].as_str().unwrap_or_default().to_owned();
                        joined.push_str(&piece);
                        block[key] = json!(joined);
                    }
                    if key == "thinking" && !piece.is_empty() {
                        deltas.push(ModelDelta::Thinking { text: piece });
                    }
                }
                _ => {}
            },
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.state.stop_reason = Some(reason.to_string());
                }
                if let Some(output) = u64_at("/usage/output_tokens") {
                    self.state.usage.output_tokens = output;
                }
            }
            "message_stop" => self.state.done = true,
            "error" => {
                let message = str_at("/error/message");
                return Err(ProviderError::Api(message.to_string()));
            }
            _ => {}
        }
        Ok(deltas)
    }

    fn finish(&mut self) -> Option<ModelResponse> {
        if !self.state.done {
            return None;
        }
        self.state.provider_blocks = std::mem::take(&mut self.server_blocks)
            .into_iter()
            .map(|(_, block, _)| block)
            .collect();
        Some(
            self.state
                .take_response_of(ModelProvider::Anthropic.as_str()),
        )
    }

    fn is_done(&self) -> bool {
        self.state.done
    }
}
