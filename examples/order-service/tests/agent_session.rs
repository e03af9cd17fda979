//! The order service's tools in an agent session with a (mock) model: a call the application's
//! handler refuses and a call past its timeout come back as tool results the model reads, and
//! the run goes on to its next call and its answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{Agent, Message, StopReason};
use warden_config::Paths;
use warden_example_order_service::{OrderBook, order_tools};
use warden_host::{
    AuthorizationError, AuthorizationHandler, AuthorizationQuestion, AuthorizationVerdict,
    CapabilityClass, CodeTool,
};
use warden_mock_model::{MockModel, Turn};
use warden_policy::BoxFuture;
use warden_session::{ConfigOpener, SessionOpener, SessionSpec, open_prepared};

/// The model acts for nobody in particular here: it may read, never cancel.
struct ReadOnlyAgent;

impl AuthorizationHandler for ReadOnlyAgent {
    fn authorize<'a>(
        &'a self,
        question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        let verdict = if question.required_permission == Some("orders.cancel") {
            AuthorizationVerdict::deny("the assistant may not cancel orders; ask a support agent")
        } else {
            AuthorizationVerdict::Allow
        };
        Box::pin(async move { Ok(verdict) })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArguments {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_and_a_timed_out_call_are_results_the_model_reads_and_the_run_goes_on() {
    let mock = MockModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let workspace = dir.path().join("work");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(paths.user_config_file().parent().unwrap()).unwrap();
    std::fs::write(
        paths.user_config_file(),
        format!(
            "schema_version = 1\nmodel = \"mock\"\n[models.mock]\nprovider = \"openai\"\n\
             id = \"m\"\nbase_url = {:?}\n[permissions]\nmode = \"auto\"\n",
            mock.base_url()
        ),
    )
    .unwrap();
    let book = OrderBook::with_open_orders(&[("A-100", "ada")]);
    let mut tools = order_tools(&book).unwrap();
    let stalled = CodeTool::new(
        "order_report",
        "Builds the daily order report from the warehouse.",
        CapabilityClass::ReadOnly,
        |_: NoArguments, call| async move {
            call.cancel.cancelled().await;
            Ok("never")
        },
    )
    .unwrap()
    .required_permission("orders.read")
    .timeout(Duration::from_millis(300))
    .unwrap();
    tools.push(Arc::new(stalled));
    // An embedding application's session: warden's configuration prepared, then the
    // application's tools and authorization added before it opens.
    let spec = SessionSpec::default();
    let mut prepared = ConfigOpener::new(paths, workspace).prepare(&spec).unwrap();
    prepared.host.authorization = Some(Arc::new(ReadOnlyAgent));
    prepared.host.tools = tools;
    let mut session = open_prepared(prepared, spec).unwrap();

    mock.push_turn(Turn::tool_call(
        "call_1",
        "cancel_order",
        json!({"order_id": "A-100"}),
    ));
    mock.push_turn(Turn::tool_call("call_2", "order_report", json!({})));
    mock.push_turn(Turn::tool_call("call_3", "list_orders", json!({})));
    mock.push_turn(Turn::text("A-100 is still open."));

    let (tools, _) = session.tool_list().await;
    let offered: Vec<String> = tools.snapshot().into_iter().map(|spec| spec.name).collect();
    for name in ["list_orders", "cancel_order", "order_report"] {
        assert!(offered.iter().any(|offered| offered == name), "{offered:?}");
    }
    let system_prompt = session.system_prompt(String::new());
    let agent = Agent::new(
        session.client.clone(),
        session.executor(None),
        system_prompt,
        tools,
    );
    let mut conversation = vec![Message::user("Cancel order A-100, then report.")];
    let outcome = agent
        .run(&mut conversation, &CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(outcome.stop, StopReason::Completed);
    assert_eq!(outcome.final_text, "A-100 is still open.");
    let results: Vec<(&str, &str)> = outcome
        .tool_calls
        .iter()
        .map(|call| (call.name.as_str(), call.result.decision.as_str()))
        .collect();
    assert_eq!(
        results,
        [
            ("cancel_order", "denied"),
            ("order_report", "timed_out"),
            ("list_orders", "allowed"),
        ]
    );
    // What the model was sent back after each call: the reason, in its own words.
    let requests = mock.requests();
    let after_cancel = requests[1].body.to_string();
    assert!(
        after_cancel.contains("the assistant may not cancel orders; ask a support agent"),
        "{after_cancel}"
    );
    let after_report = requests[2].body.to_string();
    assert!(
        after_report.contains("order_report did not finish within"),
        "{after_report}"
    );
    let orders = book.list(None).unwrap();
    assert_eq!(
        serde_json::to_value(&orders).unwrap()[0]["status"],
        json!("open")
    );
    session.host.shutdown().await;
}
