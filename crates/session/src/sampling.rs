//! Sampling through the gate: a server the operator enabled (`sampling = true`) asks the session's
//! model to answer; the request becomes a call of the host tool `answer_mcp_sampling` (never
//! offered to the model), so it is authorized, offered to hooks, timed and audited (source
//! `sampling`) like every other call, and answered by the session's current model.

use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;
use warden_agent::{Message, ModelClient, ModelRequest};
use warden_host::{HostTool, Invocation, SAMPLING_TOOL, SamplingArguments, SamplingResult};
use warden_policy::{
    BoxFuture, CallKind, CallSurface, CapabilitySet, DispatchError, SurfaceSet, ToolOutput,
};

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
        warden_vocab::arguments_schema::<SamplingArguments>()
    }

    /// It reads nothing of the user's and changes nothing; the operator's `sampling = true` on
    /// the server is the consent to spend the model on it.
    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn kind(&self) -> CallKind {
        CallKind::Sampling
    }

    /// Only a server's sampling request, as the host relays it: to the model and every other
    /// surface the tool is not there.
    fn surfaces(&self) -> SurfaceSet {
        SurfaceSet::of(&[CallSurface::Server])
    }

    fn offered(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        let Invocation {
            arguments, cancel, ..
        } = invocation;
        Box::pin(async move {
            let request: SamplingArguments =
                warden_vocab::parse_arguments(SAMPLING_TOOL, &arguments).map_err(|error| {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;
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
        // Through the gate, as a server's request arrives.
        let dir = tempfile::tempdir().unwrap();
        let mut options = warden_host::HostOptions::new(
            warden_config::Paths::under_root(dir.path()),
            dir.path().to_path_buf(),
        );
        options.tools.push(Arc::new(tool));
        let host =
            warden_host::Host::open(&warden_config::LoadedConfig::default(), options).unwrap();
        let context = warden_host::CallContext::new(
            CallSurface::Server,
            tokio_util::sync::CancellationToken::new(),
        );
        let outcome = host
            .call_with(context, SAMPLING_TOOL, arguments.clone())
            .await;
        // The model (or any surface but a server's request) cannot spend the model this way:
        // to it the tool is not there.
        let by_model = host
            .call(
                CallSurface::Agent,
                SAMPLING_TOOL,
                arguments,
                tokio_util::sync::CancellationToken::new(),
            )
            .await;
        assert_eq!(
            (by_model.decision, by_model.layer),
            (
                warden_policy::Decision::Denied,
                warden_policy::Layer::Resolve
            )
        );
        assert_eq!(second_mock.requests().len(), 1);
        let output = outcome.output.unwrap();
        assert_eq!(output.text, "from the second model");
        assert_eq!(output.content.unwrap()["model"], json!("openai/second-1"));
        assert!(first_mock.requests().is_empty());
        let sent = second_mock.requests()[0].body.to_string();
        assert!(sent.contains("name a colour"), "{sent}");
    }
}
