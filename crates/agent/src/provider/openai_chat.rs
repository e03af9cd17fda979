//! OpenAI Chat Completions (and compatible servers): request body and stream decoder (the
//! reasoning some servers stream as `reasoning_content` becomes thoughts).

use serde_json::{Value, json};
use warden_config::Secret;

use super::{
    DeferredTools, ModelConfig, ModelDelta, ModelRequest, ModelResponse, ProviderError, SseEvent,
    StreamDecoder, StreamState, WireFormat, bearer_headers,
};
use crate::conversation::{Message, Usage};

pub(crate) struct ChatCompletions;

impl WireFormat for ChatCompletions {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        bearer_headers(key)
    }

    /// Chat Completions has no deferred loading: only `normal` and `system-tools` reach it, and
    /// neither sends deferred definitions.
    fn body(
        &self,
        config: &ModelConfig,
        request: &ModelRequest<'_>,
        _deferred: &DeferredTools<'_>,
    ) -> Value {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in request.messages {
            messages.push(match message {
                // Another provider's blocks, and references this wire cannot carry.
                Message::ProviderBlocks { .. } | Message::ToolReferences { .. } => continue,
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant { text, tool_calls } => {
                    let mut value = json!({"role": "assistant", "content": text});
                    if !tool_calls.is_empty() {
                        value["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments}})
                            })
                            .collect();
                    }
                    value
                }
                Message::ToolResult { call_id, text, .. } => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": text})
                }
            });
        }
        let mut body = json!({
            "model": config.id,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.input_schema}})
                })
                .collect();
            // The API's default when tools are given, said aloud: some local servers
            // (llama-cpp-python's) drop `tools` from a request that carries no `tool_choice`.
            body["tool_choice"] = json!("auto");
        }
        body
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ChatDecoder::default())
    }
}

#[derive(Default)]
struct ChatDecoder {
    state: StreamState,
}

impl StreamDecoder for ChatDecoder {
    /// A whole answer (`stream = false`): each choice's `message` read as one chunk's `delta`
    /// (a tool call's index taken from its place), the usage with it, then the end.
    fn on_complete(&mut self, body: &Value) -> Result<Vec<ModelDelta>, ProviderError> {
        let mut chunk = body.clone();
        if let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) {
            for choice in choices {
                let Some(message) = choice.get_mut("message").map(Value::take) else {
                    continue;
                };
                let mut delta = message;
                if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                    for (index, call) in calls.iter_mut().enumerate() {
                        if call.get("index").is_none() {
                            call["index"] = json!(index);
                        }
                    }
                }
                choice["delta"] = delta;
            }
        }
        let event = SseEvent {
            event: None,
            data: chunk.to_string(),
        };
        let mut deltas = self.on_event(&event)?;
        deltas.extend(self.on_event(&SseEvent {
            event: None,
            data: "[DONE]".into(),
        })?);
        Ok(deltas)
    }

    fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ModelDelta>, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.state.done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Protocol(format!("a chunk that is not JSON: {e}")))?;
        if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
            return Err(ProviderError::Api(message.to_string()));
        }
        let mut deltas = Vec::new();
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let get = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
            self.state.usage = Usage {
                input_tokens: get("/prompt_tokens"),
                output_tokens: get("/completion_tokens"),
                cached_input_tokens: get("/prompt_tokens_details/cached_tokens"),
                reported: true,
            };
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.state.stop_reason = Some(reason.to_string());
            }
            let Some(delta) = choice.get("delta") else {
                continue;
            };
            // Reasoning of OpenAI-compatible servers (DeepSeek, vLLM: `reasoning_content`;
            // some others: `reasoning`): shown as thoughts, neither answer text nor sent back
            // (DeepSeek refuses it in a request).
            if let Some(thought) = ["reasoning_content", "reasoning"]
                .iter()
                .find_map(|key| delta.get(*key).and_then(Value::as_str))
                && !thought.is_empty()
            {
                deltas.push(ModelDelta::Thinking {
                    text: thought.to_string(),
                });
            }
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                self.state.text.push_str(text);
                deltas.push(ModelDelta::Text {
                    text: text.to_string(),
                });
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                // Some compatible servers leave out `index`: a new id starts a new call, a
                // fragment without id continues the last one.
                let key = match call.get("index").and_then(Value::as_u64) {
                    Some(index) => index.to_string(),
                    None if !id.is_empty() => format!("id:{id}"),
                    None => self.state.calls.last_key().unwrap_or_else(|| "0".into()),
                };
                if !self.state.calls.has(&key) {
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    deltas.push(self.state.calls.start(key.clone(), id, name));
                }
                if let Some(fragment) = call.pointer("/function/arguments").and_then(Value::as_str)
                {
                    self.state.calls.append(&key, fragment)?;
                }
            }
        }
        Ok(deltas)
    }

    fn finish(&mut self) -> Option<ModelResponse> {
        // Some compatible servers end without `[DONE]`; a finish_reason is enough.
        if !self.state.done && self.state.stop_reason.is_none() {
            return None;
        }
        Some(self.state.take_response())
    }

    fn is_done(&self) -> bool {
        self.state.done
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn feed(decoder: &mut ChatDecoder, data: serde_json::Value) {
        decoder
            .on_event(&SseEvent {
                event: None,
                data: data.to_string(),
            })
            .unwrap();
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let mut decoder = ChatDecoder::default();
        let call = |id: Option<&str>, name: Option<&str>, args: &str| {
            let mut value = json!({"function": {"arguments": args}});
            if let Some(id) = id {
                value["id"] = json!(id);
            }
            if let Some(name) = name {
                value["function"]["name"] = json!(name);
            }
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [value]}}]})
        };
        feed(&mut decoder, call(Some("a"), Some("one"), "{\"x\""));
        feed(&mut decoder, call(None, None, ":1}"));
        feed(&mut decoder, call(Some("b"), Some("two"), "{}"));
        feed(
            &mut decoder,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        );
        let response = decoder.finish().unwrap();
        let calls: Vec<(String, String, String)> = response
            .tool_calls
            .into_iter()
            .map(|c| (c.id, c.name, c.arguments))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("a".into(), "one".into(), "{\"x\":1}".into()),
                ("b".into(), "two".into(), "{}".into())
            ]
        );
    }

    #[test]
    fn a_stream_without_finish_is_not_a_response() {
        let mut decoder = ChatDecoder::default();
        feed(
            &mut decoder,
            json!({"choices": [{"index": 0, "delta": {"content": "half"}}]}),
        );
        assert!(decoder.finish().is_none());
    }
}
