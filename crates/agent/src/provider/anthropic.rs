//! Anthropic Messages: request body (content blocks, merged roles) and stream decoder.

use serde_json::{Value, json};
use warden_config::Secret;

use super::{
    ModelConfig, ModelDelta, ModelRequest, ModelResponse, ProviderError, SseEvent, StreamDecoder,
    StreamState, WireFormat, text_at, typed_event,
};
use crate::conversation::Message;

/// The API version header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

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

    fn body(&self, config: &ModelConfig, request: &ModelRequest<'_>) -> Value {
        // Anthropic wants alternating roles: consecutive blocks of one role share a message.
        let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
        let mut push = |role: &'static str, block: Value| match messages.last_mut() {
            Some((last, blocks)) if *last == role => blocks.push(block),
            _ => messages.push((role, vec![block])),
        };
        for message in request.messages {
            match message {
                Message::User { text } => push("user", json!({"type": "text", "text": text})),
                Message::Assistant { text, tool_calls } => {
                    if !text.is_empty() {
                        push("assistant", json!({"type": "text", "text": text}));
                    }
                    for call in tool_calls {
                        let input = call
                            .parsed_arguments()
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        push(
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
                } => push(
                    "user",
                    json!({"type": "tool_result", "tool_use_id": call_id,
                        "content": text, "is_error": is_error}),
                ),
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
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                        "input_schema": t.input_schema})
                })
                .collect();
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
            }
            "content_block_start"
                if value.pointer("/content_block/type").and_then(Value::as_str)
                    == Some("tool_use") =>
            {
                deltas.push(self.state.calls.start(
                    index,
                    str_at("/content_block/id"),
                    str_at("/content_block/name"),
                ));
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
                return Err(ProviderError::Protocol(format!(
                    "error in stream: {message}"
                )));
            }
            _ => {}
        }
        Ok(deltas)
    }

    fn finish(&mut self) -> Option<ModelResponse> {
        self.state.finish_when_done()
    }

    fn is_done(&self) -> bool {
        self.state.done
    }
}
