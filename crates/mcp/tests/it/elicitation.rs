//! Elicitation is advertised only with an interactive handler; the handler's answer gets the
//! schema's defaults; without a handler servers see no elicitation (and no sampling) support.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use warden_mcp::{
    CallOptions, ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse,
    McpRuntime, RuntimeOptions, ToolIdentity,
};

use crate::common;

struct AnswerWithName {
    asked: Arc<AtomicUsize>,
}

impl ElicitationHandler for AnswerWithName {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            assert_eq!(request.server, "everything");
            match request.kind {
                ElicitationKind::Form { .. } => {
                    let mut content = Map::new();
                    content.insert("name".to_owned(), Value::String("Ada Lovelace".to_owned()));
                    ElicitationResponse::Accept(content)
                }
                ElicitationKind::Url { .. } => ElicitationResponse::Decline,
            }
        })
    }
}

#[tokio::test]
async fn without_a_handler_elicitation_and_sampling_are_not_offered() {
    let test = common::runtime(vec![common::everything_stdio("everything")]);
    let tools = test
        .runtime
        .server_tools("everything")
        .await
        .expect("tools");
    let names: Vec<&str> = tools
        .iter()
        .map(|tool| tool.identity.tool.as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(!names.contains(&"trigger-elicitation-request"), "{names:?}");
    assert!(!names.contains(&"trigger-sampling-request"), "{names:?}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn with_a_handler_the_answer_reaches_the_server_with_defaults() {
    let asked = Arc::new(AtomicUsize::new(0));
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.elicitation = Some(Arc::new(AnswerWithName {
        asked: asked.clone(),
    }));
    let runtime = McpRuntime::new(vec![common::everything_stdio("everything")], options);

    // The server registers its elicitation tool after the handshake; wait until it is listed.
    let mut listed = false;
    for _ in 0..50 {
        let tools = runtime.server_tools("everything").await.expect("tools");
        if tools
            .iter()
            .any(|tool| tool.identity.tool == "trigger-elicitation-request")
        {
            listed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        listed,
        "elicitation tool never appeared although a handler is installed"
    );

    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("everything", "trigger-elicitation-request"),
            json!({}).as_object().cloned().expect("object"),
            CallOptions::default(),
        )
        .await
        .expect("elicitation call");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let text = serde_json::to_string(&outcome.result.content).expect("json");
    assert!(text.contains("Ada Lovelace"), "{text}");
    assert!(
        text.contains("It was a dark and stormy night."),
        "defaults not applied: {text}"
    );
    runtime.shutdown().await;
}
