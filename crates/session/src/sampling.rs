//! Who answers sampling in an agent session: a server the operator enabled (`sampling = true`)
//! asks, the request crosses the gate as `answer_mcp_sampling` (`warden_host::sampling_tool`),
//! and the session's current model answers it.

use std::sync::{Arc, PoisonError, RwLock};

use tokio_util::sync::CancellationToken;
use warden_agent::{Message, ModelClient, ModelRequest};
use warden_host::{SamplingAnswerer, SamplingArguments, SamplingResult};
use warden_policy::BoxFuture;

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

impl SamplingAnswerer for SamplingModel {
    fn description(&self) -> &str {
        "Answers an MCP server's sampling request with the session's model (servers with sampling = true)."
    }

    fn answer<'a>(
        &'a self,
        request: SamplingArguments,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<SamplingResult, String>> {
        Box::pin(async move {
            let client = self.current();
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
                .map_err(|error| format!("the session's model failed: {error}"))?;
            Ok(SamplingResult {
                text: response.text,
                model: client.describe(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;
    use std::sync::Arc;
    use warden_agent::{ModelConfig, client_for};
    use warden_config::ModelProvider;
    use warden_host::{SAMPLING_TOOL, sampling_tool};
    use warden_mock_model::{MockModel, Turn};
    use warden_policy::CallSurface;

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
        let tool = sampling_tool(model.clone());
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
