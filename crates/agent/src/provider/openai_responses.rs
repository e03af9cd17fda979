//! OpenAI Responses: request body (`instructions` + `input` items) and stream decoder.

use serde_json::{Value, json};
use warden_config::Secret;

use super::{
    ModelConfig, ModelDelta, ModelRequest, ModelResponse, ProviderError, SseEvent, StreamDecoder,
    ToolCallAssembler, WireFormat,
};
use crate::conversation::{Message, Usage};

pub(crate) struct Responses;

impl WireFormat for Responses {
    fn path(&self) -> &'static str {
        "/responses"
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        key.map(|key| vec![("authorization", format!("Bearer {}", key.expose()))])
            .unwrap_or_default()
    }

    fn body(&self, config: &ModelConfig, request: &ModelRequest<'_>) -> Value {
        let mut input = Vec::new();
        for message in request.messages {
            match message {
                Message::User { text } => input.push(json!({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]})),
                Message::Assistant { text, tool_calls } => {
                    if !text.is_empty() {
                        input.push(json!({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]}));
                    }
                    for call in tool_calls {
                        input.push(json!({"type": "function_call", "call_id": call.id,
                            "name": call.name, "arguments": call.arguments}));
                    }
                }
                Message::ToolResult { call_id, text, .. } => input.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": text}),
                ),
            }
        }
        let mut body = json!({
            "model": config.id,
            "input": input,
            "stream": true,
            "store": false,
        });
        if !request.system.is_empty() {
            body["instructions"] = json!(request.system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                        "parameters": t.input_schema, "strict": false})
                })
                .collect();
        }
        body
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ResponsesDecoder::default())
    }
}

#[derive(Default)]
struct ResponsesDecoder {
    text: String,
    calls: ToolCallAssembler,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

impl StreamDecoder for ResponsesDecoder {
    fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ModelDelta>, ProviderError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Protocol(format!("an event that is not JSON: {e}")))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default()
            .to_string();
        let str_at = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mut deltas = Vec::new();
        match kind.as_str() {
            "response.output_text.delta" => {
                let text = str_at("/delta");
                if !text.is_empty() {
                    self.text.push_str(&text);
                    deltas.push(ModelDelta::Text { text });
                }
            }
            "response.output_item.added"
                if value.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                deltas.push(self.calls.start(
                    str_at("/item/id"),
                    str_at("/item/call_id"),
                    str_at("/item/name"),
                ));
            }
            "response.function_call_arguments.delta" => {
                self.calls.append(&str_at("/item_id"), &str_at("/delta"))?;
            }
            "response.output_item.done"
                if value.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                self.calls
                    .set_arguments(&str_at("/item/id"), str_at("/item/arguments"));
            }
            "response.completed" | "response.incomplete" => {
                let usage = value.pointer("/response/usage");
                let get = |pointer: &str| {
                    usage
                        .and_then(|u| u.pointer(pointer))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                };
                self.usage = Usage {
                    input_tokens: get("/input_tokens"),
                    output_tokens: get("/output_tokens"),
                    cached_input_tokens: get("/input_tokens_details/cached_tokens"),
                };
                self.stop_reason = Some(str_at("/response/status"));
                self.done = true;
            }
            "response.failed" => {
                let message = str_at("/response/error/message");
                return Err(ProviderError::Protocol(format!(
                    "the response failed: {message}"
                )));
            }
            "error" => {
                let message = str_at("/message");
                return Err(ProviderError::Protocol(format!(
                    "error in stream: {message}"
                )));
            }
            _ => {}
        }
        Ok(deltas)
    }

    fn finish(&mut self) -> Option<ModelResponse> {
        if !self.done {
            return None;
        }
        Some(ModelResponse {
            text: std::mem::take(&mut self.text),
            tool_calls: self.calls.take(),
            usage: self.usage,
            stop_reason: self.stop_reason.clone(),
        })
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
