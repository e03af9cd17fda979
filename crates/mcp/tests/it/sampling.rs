//! Sampling: declined unless the operator enabled it for the server; when enabled, answered by
//! the handler the frontend installed (the session's model in `warden run`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, json};
use warden_mcp::{
    CallOptions, McpRuntime, RuntimeOptions, SamplingAnswer, SamplingDeclined, SamplingHandler,
    SamplingRequest, SamplingRole, ServerSpec, ToolIdentity,
};

use crate::common::{self, arguments};

/// Answers every sampling request with a fixed text and remembers the requests.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<SamplingRequest>>,
}

impl SamplingHandler for Recorder {
    fn sample(
        &self,
        request: SamplingRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SamplingAnswer, SamplingDeclined>> + Send + '_>> {
        self.seen.lock().unwrap().push(request);
        Box::pin(async {
            Ok(SamplingAnswer {
                text: "a sampled answer from the session's model".to_owned(),
                model: "test-model".to_owned(),
                stop_reason: Some("endTurn".to_owned()),
            })
        })
    }
}

fn runtime_with_defaults(
    spec: ServerSpec,
    handler: Arc<Recorder>,
) -> (McpRuntime, tempfile::TempDir) {
    runtime(spec, handler)
}

fn runtime(spec: ServerSpec, handler: Arc<Recorder>) -> (McpRuntime, tempfile::TempDir) {
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.sampling = Some(handler);
    (McpRuntime::new(vec![spec], options), workspace)
}

#[tokio::test]
async fn an_enabled_server_s_sampling_request_is_answered_by_the_handler() {
    let recorder = Arc::new(Recorder::default());
    let spec = common::everything_stdio("everything").with_sampling(true);
    let (runtime, _workspace) = runtime(spec, recorder.clone());
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("everything", "trigger-sampling-request"),
            arguments(json!({"prompt": "write a haiku", "maxTokens": 40})),
            CallOptions::default(),
        )
        .await
        .expect("the sampling tool (offered because sampling is advertised)");
    let text = common::first_text(&outcome.result);
    assert!(
        text.contains("a sampled answer from the session's model"),
        "{text}"
    );
    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].server, "everything");
    assert_eq!(seen[0].max_tokens, 40);
    assert_eq!(
        seen[0].system_prompt.as_deref(),
        Some("You are a helpful test server.")
    );
    assert_eq!(seen[0].turns[0].role, SamplingRole::User);
    assert!(seen[0].turns[0].text.contains("write a haiku"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn without_the_entry_key_sampling_is_not_advertised() {
    let recorder = Arc::new(Recorder::default());
    let (runtime, _workspace) = runtime(common::everything_stdio("everything"), recorder.clone());
    let tools = runtime.server_tools("everything").await.expect("tools");
    assert!(
        tools.iter().any(|tool| tool.identity.tool == "echo"),
        "the server is up"
    );
    assert!(
        !tools
            .iter()
            .any(|tool| tool.identity.tool == "trigger-sampling-request"),
        "server-everything offers its sampling tool only to clients that advertise sampling"
    );
    assert!(recorder.seen.lock().unwrap().is_empty());
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_that_samples_anyway_is_declined_with_a_message() {
    // The conformance fixture sends sampling/createMessage whatever the client advertised.
    let port = warden_testkit::free_port();
    let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let server = tokio::spawn(warden_testkit::conformance_server::run(Some(address), None));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let recorder = Arc::new(Recorder::default());
    let spec = ServerSpec::http("conf", format!("http://{address}/mcp"));
    // 2025-11-25: a server-to-client sampling request.
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.sampling = Some(recorder.clone());
    options.protocol = warden_mcp::ProtocolMode::Legacy;
    let runtime = McpRuntime::new(vec![spec.clone()], options);
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("conf", "test_sampling"),
            arguments(json!({"prompt": "hello"})),
            CallOptions::default(),
        )
        .await
        .expect("the tool reports the declined sampling");
    let text = common::first_text(&outcome.result);
    assert!(
        text.contains("warden declines sampling for server \"conf\"")
            && text.contains("sampling = true"),
        "{text}"
    );
    assert!(
        recorder.seen.lock().unwrap().is_empty(),
        "the handler is never asked for a server that is not enabled"
    );
    runtime.shutdown().await;
    // 2026-07-28: sampling asked for as an input request of a multi-round-trip result.
    let (runtime, _workspace) = runtime_with_defaults(spec, recorder.clone());
    let error = runtime
        .call_tool(
            &ToolIdentity::new("conf", "test_input_required_result_sampling"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("the input request is declined");
    let line = error.to_string();
    assert!(line.starts_with("MCP conf: "), "{line}");
    assert!(line.contains("warden declines sampling"), "{line}");
    assert!(line.contains("sampling = true"), "{line}");
    assert!(recorder.seen.lock().unwrap().is_empty());
    runtime.shutdown().await;
    server.abort();
}
