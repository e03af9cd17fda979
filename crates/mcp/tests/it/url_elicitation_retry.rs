//! A tool call answered with -32042 (URL elicitation required): with an interactive handler the
//! user is asked to open the URL and the call is retried once; headless, the call fails closed
//! with the URL to open and is not re-sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::{Map, json};
use warden_mcp::{
    CallOptions, ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse,
    FailureKind, McpRuntime, RuntimeOptions, ServerSpec, ToolIdentity,
};

use crate::common::{self, arguments};

/// Records every URL it was asked to open and answers with `answer`.
struct UrlOpener {
    urls: Arc<Mutex<Vec<String>>>,
    answer: ElicitationResponse,
}

impl ElicitationHandler for UrlOpener {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>> {
        Box::pin(async move {
            match request.kind {
                ElicitationKind::Url { url, .. } => {
                    self.urls.lock().unwrap().push(url);
                    self.answer.clone()
                }
                ElicitationKind::Form { .. } => ElicitationResponse::Decline,
            }
        })
    }
}

/// server-everything with a URL-opening handler, once its URL elicitation tool is listed.
async fn everything_with(
    answer: ElicitationResponse,
) -> (McpRuntime, Arc<Mutex<Vec<String>>>, tempfile::TempDir) {
    let urls = Arc::new(Mutex::new(Vec::new()));
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.elicitation = Some(Arc::new(UrlOpener {
        urls: urls.clone(),
        answer,
    }));
    let runtime = McpRuntime::new(vec![common::everything_stdio("everything")], options);
    for _ in 0..50 {
        let tools = runtime.server_tools("everything").await.expect("tools");
        if tools
            .iter()
            .any(|tool| tool.identity.tool == "trigger-url-elicitation")
        {
            return (runtime, urls, workspace);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("trigger-url-elicitation never appeared although a handler is installed");
}

#[tokio::test]
async fn accepted_url_elicitation_retries_the_call_once() {
    let (runtime, urls, _workspace) =
        everything_with(ElicitationResponse::Accept(Map::new())).await;
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("everything", "trigger-url-elicitation"),
            arguments(json!({
                "url": "https://example.com/authorize",
                "errorPath": true,
            })),
            CallOptions::default(),
        )
        .await
        .expect("the retried call succeeds");
    let text = serde_json::to_string(&outcome.result.content).expect("json");
    assert!(!outcome.is_error(), "{text}");
    assert!(
        text.contains("User completed the URL elicitation flow"),
        "{text}"
    );
    // First the prerequisite URL carried by the -32042 error, then (on the retried call) the
    // server's own URL elicitation request.
    assert_eq!(
        *urls.lock().unwrap(),
        vec![
            "https://modelcontextprotocol.io".to_owned(),
            "https://example.com/authorize".to_owned()
        ]
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn declined_url_elicitation_fails_with_the_url_and_is_not_retried() {
    let (runtime, urls, _workspace) = everything_with(ElicitationResponse::Decline).await;
    let error = runtime
        .call_tool(
            &ToolIdentity::new("everything", "trigger-url-elicitation"),
            arguments(json!({
                "url": "https://example.com/authorize",
                "errorPath": true,
            })),
            CallOptions::default(),
        )
        .await
        .expect_err("declined");
    assert_eq!(error.kind(), FailureKind::ElicitationRequired);
    let message = error.to_string();
    assert!(
        message.contains("https://modelcontextprotocol.io"),
        "{message}"
    );
    assert!(message.contains("did not complete it"), "{message}");
    assert_eq!(urls.lock().unwrap().len(), 1, "asked once, never retried");
    runtime.shutdown().await;
}

fn url_gate() -> ServerSpec {
    let node = warden_testkit::require_node22();
    let sdk =
        warden_testkit::conformance_home().join("servers/node_modules/@modelcontextprotocol/sdk");
    assert!(
        sdk.is_dir(),
        "the TypeScript SDK is not installed at {sdk:?}"
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/url_elicitation_gate.mjs");
    ServerSpec::stdio("gate", node.to_string_lossy().into_owned()).with_args([
        script.to_string_lossy().into_owned(),
        sdk.to_string_lossy().into_owned(),
    ])
}

#[tokio::test]
async fn headless_fails_closed_with_the_url_to_open() {
    let test = common::runtime(vec![url_gate()]);
    let error = test
        .runtime
        .call_tool(
            &ToolIdentity::new("gate", "pay"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("no handler: fail closed");
    assert_eq!(error.kind(), FailureKind::ElicitationRequired);
    let message = error.to_string();
    assert!(
        message.starts_with(
            "MCP gate: \"pay\" needs you to open https://pay.example.com/confirm?order=42 first"
        ),
        "{message}"
    );
    assert!(message.contains("did not run the call"), "{message}");
    assert!(message.contains("then call the tool again"), "{message}");
    // Without a handler nothing is retried: the server saw exactly one call.
    let attempts = test
        .runtime
        .call_tool(
            &ToolIdentity::new("gate", "pay_attempts"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("count");
    let text = serde_json::to_string(&attempts.result.content).expect("json");
    assert!(text.contains("\"text\":\"1\""), "{text}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_that_asks_again_after_the_retry_is_not_called_a_third_time() {
    let urls = Arc::new(Mutex::new(Vec::new()));
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.elicitation = Some(Arc::new(UrlOpener {
        urls: urls.clone(),
        answer: ElicitationResponse::Accept(Map::new()),
    }));
    let runtime = McpRuntime::new(vec![url_gate()], options);
    let error = runtime
        .call_tool(
            &ToolIdentity::new("gate", "pay"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("the gate never opens");
    assert_eq!(error.kind(), FailureKind::ElicitationRequired);
    assert!(
        error.to_string().contains("asked again after the retry"),
        "{error}"
    );
    assert_eq!(
        *urls.lock().unwrap(),
        vec!["https://pay.example.com/confirm?order=42".to_owned()]
    );
    let attempts = runtime
        .call_tool(
            &ToolIdentity::new("gate", "pay_attempts"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("count");
    let text = serde_json::to_string(&attempts.result.content).expect("json");
    assert!(
        text.contains("\"text\":\"2\""),
        "one call and one retry: {text}"
    );
    runtime.shutdown().await;
}
