//! Sampling through the gate: a server the operator enabled (`sampling = true`) asks the session's
//! model to answer; the request becomes a call of the host tool `answer_mcp_sampling` (never
//! offered to the model), so it is authorized, offered to hooks, timed and audited (source
//! `sampling`) like every other call, and answered by the session's current model.

use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_agent::{Message, ModelClient, ModelRequest};
use warden_host::HostTool;
use warden_policy::{BoxFuture, CallSource, CapabilitySet, DispatchError, ToolOutput};

use crate::code_tools::HostSlot;

/// The name of the host tool that answers sampling requests.
pub const SAMPLING_TOOL: &str = "answer_mcp_sampling";

/// The model that answers sampling requests: the session's, replaced when `/model` switches.
#[derive(Clone)]
pub struct SamplingModel(Arc<RwLock<Arc<dyn ModelClient>>>);

impl SamplingModel {
    pub fn new(client: Arc<dyn ModelClient>) -> Self {
        Self(Arc::new(RwLock::new(client)))
    }

    /// From now on, sampling requests go to `client`.
    pub fn switch_to(&self, client: Arc<dyn ModelClient>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = client;
    }

    fn current(&self) -> Arc<dyn ModelClient> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One sampling request as the gate sees it: the tool's arguments.
#[derive(Debug, Serialize, Deserialize)]
struct SamplingArguments {
    /// The server asking.
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system_prompt: Option<String>,
    turns: Vec<SamplingTurn>,
    max_tokens: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct SamplingTurn {
    /// `user` or `assistant`.
    role: String,
    text: String,
}

/// What the tool returns to the sampler besides the text the audit sees.
#[derive(Debug, Serialize, Deserialize)]
struct SamplingResult {
    text: String,
    model: String,
}

/// The host tool that runs one sampling request on the session's model.
pub struct SamplingTool {
    model: SamplingModel,
}

impl SamplingTool {
    pub fn new(model: SamplingModel) -> Self {
        Self { model }
    }
}

impl HostTool for SamplingTool {
    fn name(&self) -> &str {
        SAMPLING_TOOL
    }

    fn description(&self) -> &str {
        "Answers an MCP server's sampling request with the session's model (servers with sampling = true)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "The server asking"},
                "system_prompt": {"type": "string"},
                "turns": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "role": {"enum": ["user", "assistant"]},
                            "text": {"type": "string"}
                        },
                        "required": ["role", "text"]
                    }
                },
                "max_tokens": {"type": "integer", "minimum": 0}
            },
            "required": ["server", "turns", "max_tokens"]
        })
    }

    /// It reads nothing of the user's and changes nothing; the operator's `sampling = true` on
    /// the server is the consent to spend the model on it.
    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn audit_source(&self) -> Option<CallSource> {
        Some(CallSource::Sampling)
    }

    fn offered(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let request: SamplingArguments =
                serde_json::from_value(arguments).map_err(|error| {
                    DispatchError::new(format!("a malformed sampling request: {error}"))
                })?;
            let client = self.model.current();
            let messages: Vec<Message> = request
                .turns
                .into_iter()
                .map(|turn| match turn.role.as_str() {
                    "assistant" => Message::Assistant {
                        text: turn.text,
                        tool_calls: Vec::new(),
                    },
                    _ => Message::User { text: turn.text },
                })
                .collect();
            let system = request.system_prompt.unwrap_or_default();
            let response = client
                .complete(
                    ModelRequest {
                        system: &system,
                        messages: &messages,
                        tools: &[],
                    },
                    &|_| {},
                    &cancel,
                )
                .await
                .map_err(|error| {
                    DispatchError::new(format!("the session's model failed: {error}"))
                })?;
            let result = SamplingResult {
                text: response.text,
                model: client.describe(),
            };
            let content = serde_json::to_value(&result)
                .map_err(|error| DispatchError::new(format!("encoding the answer: {error}")))?;
            Ok(ToolOutput {
                size_bytes: result.text.len() as u64,
                text: result.text,
                is_error: false,
                content: Some(content),
                confinement: None,
            })
        })
    }
}

/// Answers the sampling requests of servers the operator enabled by calling [`SamplingTool`]
/// through the session's gate.
pub struct ModelSampler {
    host: HostSlot,
}

impl ModelSampler {
    pub fn new(host: HostSlot) -> Self {
        Self { host }
    }
}

impl warden_mcp::SamplingHandler for ModelSampler {
    fn sample(
        &self,
        request: warden_mcp::SamplingRequest,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Result<warden_mcp::SamplingAnswer, String>>
                + Send
                + '_,
        >,
    > {
        Box::pin(async move {
            let Some(host) = self.host.get().and_then(std::sync::Weak::upgrade) else {
                return Err("the session is closing".to_owned());
            };
            // The asking server is the caller: the audit record names it.
            let mut context =
                warden_host::CallContext::new(CallSource::Sampling, CancellationToken::new());
            context.caller = Some(format!("mcp server {}", request.server));
            let arguments = SamplingArguments {
                server: request.server,
                system_prompt: request.system_prompt,
                turns: request
                    .turns
                    .into_iter()
                    .map(|turn| SamplingTurn {
                        role: match turn.role {
                            warden_mcp::SamplingRole::User => "user",
                            warden_mcp::SamplingRole::Assistant => "assistant",
                        }
                        .to_owned(),
                        text: turn.text,
                    })
                    .collect(),
                max_tokens: request.max_tokens,
            };
            let arguments = serde_json::to_value(&arguments)
                .map_err(|error| format!("encoding the sampling request: {error}"))?;
            let outcome = host.call_with(context, SAMPLING_TOOL, arguments).await;
            if outcome.is_error() {
                return Err(outcome.model_text());
            }
            let result: SamplingResult = outcome
                .output
                .and_then(|output| output.content)
                .ok_or_else(|| "the model's answer came back empty".to_owned())
                .and_then(|content| {
                    serde_json::from_value(content)
                        .map_err(|error| format!("reading the model's answer: {error}"))
                })?;
            Ok(warden_mcp::SamplingAnswer {
                text: result.text,
                model: result.model,
                stop_reason: Some("endTurn".to_owned()),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use warden_agent::{ModelConfig, client_for};
    use warden_config::ModelProvider;
    use warden_mock_model::{MockModel, Turn};

    async fn mock_client(answer: &str, id: &str) -> (MockModel, Arc<dyn ModelClient>) {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text(answer));
        let client =
            client_for(ModelConfig::new(ModelProvider::OpenAi, id, mock.base_url())).unwrap();
        (mock, client)
    }

    #[tokio::test]
    async fn sampling_follows_a_model_switch() {
        let (first_mock, first) = mock_client("from the first model", "first-1").await;
        let (second_mock, second) = mock_client("from the second model", "second-1").await;
        let model = SamplingModel::new(first);
        let tool = SamplingTool::new(model.clone());
        model.switch_to(second);
        let arguments = json!({
            "server": "everything",
            "turns": [{"role": "user", "text": "name a colour"}],
            "max_tokens": 20
        });
        let output = tool
            .execute(arguments, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(output.text, "from the second model");
        assert_eq!(output.content.unwrap()["model"], json!("openai/second-1"));
        assert!(first_mock.requests().is_empty());
        let sent = second_mock.requests()[0].body.to_string();
        assert!(sent.contains("name a colour"), "{sent}");
    }
}
