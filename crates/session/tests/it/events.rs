//! The events a session reports, in the order every frontend relies on: a call's start before
//! it runs, its end after, the model's plan once the gate let it through; and a frontend
//! cancelling the calls in flight to one source; a person's approval asked and answered between
//! a call's start and its end.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::AgentEvent;
use warden_host::{CapabilityClass, CodeTool, HostTool};
use warden_mock_model::{MockModel, Turn as ModelTurn};
use warden_session::{ConfigOpener, PolicyOverrides, SessionOpener, SessionSpec, Turn};
use warden_vocab::{Decision, ToolGlob};

use crate::support::{Home, Recorded, one_turn};

fn plan() -> serde_json::Value {
    json!({"entries": [
        {"content": "write the notes", "status": "in_progress", "priority": "high"},
        {"content": "say so", "status": "pending", "priority": "low"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_announced_before_it_runs_and_the_plan_once_the_gate_let_it_through() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call("call_plan", "update_plan", plan()));
    mock.push_turn(ModelTurn::tool_call(
        "call_write",
        "write_file",
        json!({"path": "notes.txt", "content": "written\n"}),
    ));
    mock.push_turn(ModelTurn::text("Done."));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec::default())
        .unwrap();
    let notes = home.workspace.join("notes.txt");
    let sink = Recorded::watching(&notes);

    let ended = one_turn(
        &mut session,
        sink.clone(),
        "Plan, then write.",
        &CancellationToken::new(),
    )
    .await;

    assert_eq!(ended.outcome.final_text, "Done.");
    assert_eq!(
        sink.labels(),
        [
            "started update_plan",
            "plan of 2",
            "finished update_plan allowed",
            "started write_file",
            "finished write_file allowed",
        ]
    );
    // The start of the write reached the sink before the file was written (an editor reads
    // the text it is about to replace there).
    assert_eq!(
        *sink.existed_at_start.lock().unwrap(),
        [
            ("update_plan".to_owned(), false),
            ("write_file".to_owned(), false)
        ]
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "written\n");
    session.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_the_gate_refuses_is_no_plan() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call("call_plan", "update_plan", plan()));
    mock.push_turn(ModelTurn::text("No plan then."));
    let overrides = PolicyOverrides {
        deny: vec![ToolGlob::parse("update_plan").unwrap()],
        ..PolicyOverrides::default()
    };
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .with_policy(overrides)
        .open(SessionSpec::default())
        .unwrap();
    let sink = Arc::new(Recorded::default());

    one_turn(
        &mut session,
        sink.clone(),
        "Plan.",
        &CancellationToken::new(),
    )
    .await;

    assert_eq!(
        sink.labels(),
        ["started update_plan", "finished update_plan denied"]
    );
    session.host.shutdown().await;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArguments {}

/// A tool of the frontend's that runs until it is cancelled.
fn stalling_tool() -> Arc<dyn HostTool> {
    Arc::new(
        CodeTool::new(
            "stall",
            "Waits until it is cancelled.",
            CapabilityClass::ReadOnly,
            |_: NoArguments, call| async move {
                call.cancel.cancelled().await;
                Ok("stopped")
            },
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_cancels_the_calls_in_flight_to_one_source_and_the_turn_goes_on() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call("call_stall", "stall", json!({})));
    mock.push_turn(ModelTurn::text("It was cancelled."));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec {
            tools: vec![stalling_tool()],
            ..SessionSpec::default()
        })
        .unwrap();
    let sink = Arc::new(Recorded::default());
    let (tools, _) = session.tool_list().await;
    let system_prompt = session.system_prompt(String::new());
    let (mut transcript, mut conversation) = session.open_transcript().unwrap();
    let executor = session.executor(Some(sink.clone()));
    // No MCP server is called: nothing to cancel there.
    assert_eq!(executor.cancel_calls_to("fs"), 0);
    let canceller = {
        let executor = executor.clone();
        let sink = sink.clone();
        tokio::spawn(async move {
            loop {
                let started = sink.events.lock().unwrap().iter().any(|event| {
                    matches!(event, AgentEvent::ToolCallStarted { name, .. } if name == "stall")
                });
                if started {
                    // The call may still be on its way through the gate's layers.
                    let cancelled = executor.cancel_calls_to("built-in");
                    if cancelled > 0 {
                        return cancelled;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let cancel = CancellationToken::new();
    let ended = session
        .run_turn(
            Turn {
                conversation: &mut conversation,
                transcript: &mut transcript,
                executor,
                system_prompt: &system_prompt,
                tools: &tools,
                events: Some(sink.clone()),
                cancel: &cancel,
                tick: None,
            },
            "Stall.".to_owned(),
        )
        .await
        .unwrap();

    assert_eq!(canceller.await.unwrap(), 1);
    assert_eq!(ended.outcome.final_text, "It was cancelled.");
    assert_eq!(
        ended.outcome.tool_calls[0].result.decision,
        Decision::Cancelled
    );
    assert!(
        !cancel.is_cancelled(),
        "only the call was cancelled, not the turn"
    );
    session.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_that_cannot_be_refreshed_is_a_warning_and_the_turn_goes_on() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call(
        "call_1",
        "mcp__lc__mutate",
        json!({"add": warden_testkit::fixtures::FAILING_LISTING}),
    ));
    mock.push_turn(ModelTurn::text("Still here."));
    let (program, args) = warden_testkit::fixture_command("list-changed");
    let server = warden_mcp::ServerSpec::stdio("lc", program.display().to_string()).with_args(args);
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .with_policy(PolicyOverrides {
            allow: vec![ToolGlob::parse("mcp__lc__*").unwrap()],
            ..PolicyOverrides::default()
        })
        .open(SessionSpec {
            servers: vec![server],
            ..SessionSpec::default()
        })
        .unwrap();
    let sink = Arc::new(Recorded::default());

    let ended = one_turn(
        &mut session,
        sink.clone(),
        "Change the tools.",
        &CancellationToken::new(),
    )
    .await;

    // The server announced a change, then could not list: said once, and the model was asked
    // again with the tools it had.
    assert_eq!(ended.outcome.final_text, "Still here.");
    assert_eq!(mock.requests().len(), 2);
    let warnings: Vec<String> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolsChanged { warnings, .. } => Some(warnings.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("lc"), "{warnings:?}");
    assert!(warnings[0].contains("the last one is kept"), "{warnings:?}");
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("mcp__lc__mutate"), "{second}");
    session.host.shutdown().await;
}

/// A tool of the frontend's that asks a person before every call.
fn guarded_tool() -> Arc<dyn HostTool> {
    Arc::new(
        CodeTool::new(
            "guarded",
            "Says so, with a person's yes.",
            CapabilityClass::ReadOnly,
            |_: NoArguments, _| async move { Ok("done") },
        )
        .unwrap()
        .requires_approval(),
    )
}

/// Answers the questions in order: allow once, then refuse.
struct OnceThenNo(std::sync::Mutex<u32>);

impl warden_policy::Approver for OnceThenNo {
    fn approve<'a>(
        &'a self,
        _: &'a warden_policy::ApprovalRequest,
    ) -> warden_policy::BoxFuture<'a, warden_policy::ApprovalAnswer> {
        let mut asked = self.0.lock().unwrap();
        *asked += 1;
        let answer = if *asked == 1 {
            warden_policy::ApprovalAnswer::AllowOnce
        } else {
            warden_policy::ApprovalAnswer::Deny {
                reason: Some("not twice".to_owned()),
            }
        };
        Box::pin(std::future::ready(answer))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_and_its_answer_are_reported_between_a_calls_start_and_its_end() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call("call_1", "guarded", json!({})));
    mock.push_turn(ModelTurn::tool_call("call_2", "guarded", json!({})));
    mock.push_turn(ModelTurn::text("Once was enough."));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec {
            tools: vec![guarded_tool()],
            approver: Some(Arc::new(OnceThenNo(std::sync::Mutex::new(0)))),
            ..SessionSpec::default()
        })
        .unwrap();
    let sink = Arc::new(Recorded::default());

    let ended = one_turn(
        &mut session,
        sink.clone(),
        "Twice.",
        &CancellationToken::new(),
    )
    .await;

    assert_eq!(ended.outcome.final_text, "Once was enough.");
    assert_eq!(
        sink.labels(),
        [
            "started guarded",
            "asked guarded",
            "allowed guarded by the user",
            "finished guarded allowed",
            "started guarded",
            "asked guarded",
            "refused guarded by the user",
            "finished guarded denied",
        ]
    );
    // Each answer carries the call's id and the reason the audit records.
    let decided: Vec<(String, String)> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolApprovalDecided { id, reason, .. } => {
                Some((id.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        decided,
        [
            ("call_1".to_owned(), "approved by the user".to_owned()),
            (
                "call_2".to_owned(),
                "the user declined this call: not twice".to_owned()
            ),
        ]
    );
    session.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_question_is_reported_as_refused_by_nobody() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    mock.push_turn(ModelTurn::tool_call("call_1", "guarded", json!({})));
    mock.push_turn(ModelTurn::text("Nobody said yes."));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec {
            tools: vec![guarded_tool()],
            ..SessionSpec::default()
        })
        .unwrap();
    let sink = Arc::new(Recorded::default());

    one_turn(
        &mut session,
        sink.clone(),
        "Once.",
        &CancellationToken::new(),
    )
    .await;

    assert_eq!(
        sink.labels(),
        [
            "started guarded",
            "asked guarded",
            "refused guarded by nobody",
            "finished guarded denied",
        ]
    );
    session.host.shutdown().await;
}
