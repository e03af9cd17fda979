//! OpenAI Responses: request body (`instructions` + `input` items, deferred functions with
//! `defer_loading` behind the hosted `tool_search`) and stream decoder.

use serde_json::{Value, json};
use warden_config::Secret;

use warden_config::{DeferMode, ModelProvider};

use super::{
    DeferredTools, ModelConfig, ModelDelta, ModelRequest, ModelResponse, ProviderError, SseEvent,
    StreamDecoder, StreamState, WireFormat, bearer_headers, text_at, typed_event,
};
use crate::conversation::{Message, ToolSpec, Usage};

/// The output items of the hosted tool search, replayed unchanged.
const TOOL_SEARCH_ITEMS: [&str; 2] = ["tool_search_call", "tool_search_output"];

fn function_definition(tool: &ToolSpec) -> Value {
    json!({"type": "function", "name": tool.name, "description": tool.description,
        "parameters": tool.input_schema, "strict": false})
}

pub(crate) struct Responses;

impl WireFormat for Responses {
    fn path(&self) -> &'static str {
        "/responses"
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        bearer_headers(key)
    }

    fn body(
        &self,
        config: &ModelConfig,
        request: &ModelRequest<'_>,
        deferred: &DeferredTools<'_>,
    ) -> Value {
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
                Message::ProviderBlocks { provider, blocks }
                    if provider == ModelProvider::OpenAiResponses.as_str() =>
                {
                    input.extend(blocks.iter().cloned());
                }
                Message::ProviderBlocks { .. } | Message::ToolReferences { .. } => {}
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
        // The hosted tool search first (tool-search mode), then the offered functions, then the
        // deferred ones with `defer_loading` (fixed for the session).
        let mut tools: Vec<Value> = Vec::new();
        let native_search = deferred.mode == DeferMode::ToolSearch && deferred.sends_definitions();
        if native_search {
            tools.push(json!({"type": "tool_search"}));
        }
        tools.extend(request.tools.iter().map(function_definition));
        if native_search {
            tools.extend(deferred.tools.iter().map(|tool| {
                let mut definition = function_definition(tool);
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
        Box::new(ResponsesDecoder::default())
    }
}

#[derive(Default)]
struct ResponsesDecoder {
    state: StreamState,
}

impl StreamDecoder for ResponsesDecoder {
    fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ModelDelta>, ProviderError> {
        let Some((value, kind)) = typed_event(event)? else {
            return Ok(Vec::new());
        };
        let str_at = |pointer: &str| text_at(&value, pointer);
        let mut deltas = Vec::new();
        match kind.as_str() {
            "response.output_text.delta" => {
                let text = str_at("/delta");
                if !text.is_empty() {
                    self.state.text.push_str(&text);
                    deltas.push(ModelDelta::Text { text });
                }
            }
            "response.output_item.added"
                if value.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                deltas.push(self.state.calls.start(
                    str_at("/item/id"),
                    str_at("/item/call_id"),
                    str_at("/item/name"),
                ));
            }
            "response.function_call_arguments.delta" => {
                self.state
                    .calls
                    .append(&str_at("/item_id"), &str_at("/delta"))?;
            }
            "response.output_item.done"
                if value.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                self.state
                    .calls
                    .set_arguments(&str_at("/item/id"), str_at("/item/arguments"));
            }
            "response.output_item.done"
                if TOOL_SEARCH_ITEMS.contains(&str_at("/item/type").as_str()) =>
            {
                if let Some(item) = value.get("item") {
                    self.state.provider_blocks.push(item.clone());
                }
            }
            "response.completed" | "response.incomplete" => {
                let usage = value.pointer("/response/usage");
                let get = |pointer: &str| {
                    usage
                        .and_then(|u| u.pointer(pointer))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                };
                self.state.usage = Usage {
                    input_tokens: get("/input_tokens"),
                    output_tokens: get("/output_tokens"),
                    cached_input_tokens: get("/input_tokens_details/cached_tokens"),
                    reported: usage.is_some_and(Value::is_object),
                };
                self.state.stop_reason = Some(str_at("/response/status"));
                self.state.done = true;
            }
            "response.failed" => {
                let message = str_at("/response/error/message");
                return Err(ProviderError::Api(format!(
                    "the response failed: {message}"
                )));
            }
            "error" => {
                let message = str_at("/message");
                return Err(ProviderError::Api(message.to_string()));
            }
            _ => {}
        }
        Ok(deltas)
    }

    fn finish(&mut self) -> Option<ModelResponse> {
        self.state.done.then(|| {
            self.state
                .take_response_of(ModelProvider::OpenAiResponses.as_str())
        })
    }

    fn is_done(&self) -> bool {
        self.state.done
    }
}
