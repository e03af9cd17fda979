//! The embedding application's part of the gate: its authorization handler (allow, deny with a
//! reason, an error or a panic denies), and the operator's `[tool_settings]` (required
//! permission, timeout, requires_approval) applied to tools the application did not define.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use warden_hooks::HookRunner;
use warden_policy::{
    ApprovalAnswer, AuthorizationError, AuthorizationHandler, AuthorizationQuestion,
    AuthorizationVerdict, BoxFuture, CallSurface, CapabilityClass, Decision, GatePolicy, Layer,
    NoApprover, PermissionMode, ToolGlob, ToolSettings, ToolSettingsRule,
};

use crate::support::{
    Harness, ScriptedApprover, annotations, fs_write_file, harness, mcp_tool, request,
};

/// What the handler saw of one call.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    public_name: String,
    required_permission: Option<String>,
    caller: Option<String>,
    tenant: Option<String>,
    surface: CallSurface,
    effect: Option<CapabilityClass>,
    arguments: serde_json::Value,
}

/// How the test handler answers.
#[derive(Clone, Copy)]
enum Answer {
    Allow,
    Deny,
    Fail,
    PanicWhileDeciding,
    PanicBeforeDeciding,
}

struct TestHandler {
    answer: Answer,
    seen: Mutex<Vec<Seen>>,
}

impl TestHandler {
    fn new(answer: Answer) -> Arc<Self> {
        Arc::new(Self {
            answer,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl AuthorizationHandler for TestHandler {
    fn authorize<'a>(
        &'a self,
        question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        if let Answer::PanicBeforeDeciding = self.answer {
            panic!("a bug in the application's handler, before its future");
        }
        self.seen.lock().unwrap().push(Seen {
            public_name: question.public_name.to_owned(),
            required_permission: question.required_permission.map(str::to_owned),
            caller: question.caller.map(str::to_owned),
            tenant: question.tenant.map(str::to_owned),
            surface: question.surface,
            effect: question.effect,
            arguments: question.arguments.clone(),
        });
        let answer = self.answer;
        Box::pin(async move {
            match answer {
                Answer::Allow => Ok(AuthorizationVerdict::Allow),
                Answer::Deny => Ok(AuthorizationVerdict::deny(
                    "the caller lacks the permission fs.write",
                )),
                Answer::Fail => Err(AuthorizationError("the permission store is down".into())),
                Answer::PanicWhileDeciding | Answer::PanicBeforeDeciding => {
                    panic!("a bug in the application's handler")
                }
            }
        })
    }
}

fn gated(handler: Arc<TestHandler>, policy: GatePolicy) -> Harness {
    let Harness {
        gate,
        dispatcher,
        audit,
    } = harness(
        vec![fs_list_dir(), fs_write_file()],
        policy,
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    Harness {
        gate: gate.with_authorization(handler),
        dispatcher,
        audit,
    }
}

/// A read-only tool the test dispatcher echoes.
fn fs_list_dir() -> warden_policy::ToolDescriptor {
    mcp_tool("fs", "list_dir", annotations(Some(true), None, Some(false)))
}

fn auto_mode() -> GatePolicy {
    let mut policy = GatePolicy::default();
    policy.permissions.mode = PermissionMode::Auto;
    policy
}

fn settings(pattern: &str, settings: ToolSettings) -> ToolSettingsRule {
    ToolSettingsRule {
        pattern: ToolGlob::parse(pattern).unwrap(),
        settings,
    }
}

#[tokio::test]
async fn a_denial_by_the_handler_is_a_readable_result_and_nothing_runs() {
    let h = gated(TestHandler::new(Answer::Deny), auto_mode());
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": "/tmp/x", "content": "y"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Application)
    );
    assert_eq!(
        outcome.model_text(),
        "Tool call denied (application): mcp__fs__write_file is denied by the application: \
         the caller lacks the permission fs.write"
    );
    assert_eq!(h.dispatcher.count(), 0);
    let records = h.audit.records.lock().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].layer, Layer::Application);
}

#[tokio::test]
async fn a_handler_that_fails_or_panics_denies() {
    for (answer, expected) in [
        (
            Answer::Fail,
            "could not decide (the permission store is down)",
        ),
        (
            Answer::PanicWhileDeciding,
            "the application's authorization handler failed",
        ),
        (
            Answer::PanicBeforeDeciding,
            "the application's authorization handler failed",
        ),
    ] {
        let h = gated(TestHandler::new(answer), auto_mode());
        let outcome = h
            .gate
            .call(request(
                CallSurface::Agent,
                "mcp__fs__list_dir",
                json!({"path": "/tmp/x"}),
            ))
            .await;
        assert_eq!(
            (outcome.decision, outcome.layer),
            (Decision::Denied, Layer::Application)
        );
        assert!(
            outcome
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains(expected),
            "{outcome:?}"
        );
        assert_eq!(h.dispatcher.count(), 0);
        // The gate is still usable after the panic.
        let again = h
            .gate
            .call(request(CallSurface::Agent, "mcp__fs__list_dir", json!({})))
            .await;
        assert_eq!(again.decision, Decision::Denied);
    }
}

#[tokio::test]
async fn the_handler_sees_the_configured_permission_caller_tenant_and_arguments() {
    let handler = TestHandler::new(Answer::Allow);
    let mut policy = auto_mode();
    policy.tool_settings = vec![settings(
        "mcp__fs__*",
        ToolSettings {
            required_permission: Some("fs.access".into()),
            ..ToolSettings::default()
        },
    )];
    let h = gated(handler.clone(), policy);
    let mut call = request(
        CallSurface::Gateway,
        "mcp__fs__list_dir",
        json!({"path": "/tmp/x"}),
    );
    call.caller = Some("alice".into());
    call.tenant = Some("acme".into());
    let outcome = h.gate.call(call).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(
        handler.seen(),
        [Seen {
            public_name: "mcp__fs__list_dir".into(),
            required_permission: Some("fs.access".into()),
            caller: Some("alice".into()),
            tenant: Some("acme".into()),
            surface: CallSurface::Gateway,
            effect: None,
            arguments: json!({"path": "/tmp/x"}),
        }]
    );
}

#[tokio::test]
async fn the_handler_never_widens_what_the_operator_refused() {
    let handler = TestHandler::new(Answer::Allow);
    let mut policy = auto_mode();
    policy.permissions.deny = vec![ToolGlob::parse("mcp__fs__write_*").unwrap()];
    policy.rules = vec![warden_policy::AuthorizationRule {
        tools: ToolGlob::parse("mcp__fs__write_file").unwrap(),
        decision: warden_policy::RuleDecision::Deny,
        reason: Some("no writes".into()),
    }];
    let h = gated(handler.clone(), policy);
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": "/tmp/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Rule)
    );
    assert!(
        handler.seen().is_empty(),
        "never asked about a refused call"
    );
}

#[tokio::test]
async fn requires_approval_asks_even_when_the_allow_list_and_mode_would_run() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowOnce));
    let mut policy = auto_mode();
    policy.permissions.allow = vec![ToolGlob::parse("mcp__fs__*").unwrap()];
    policy.tool_settings = vec![settings(
        "mcp__fs__list_dir",
        ToolSettings {
            requires_approval: Some(true),
            ..ToolSettings::default()
        },
    )];
    let h = harness(
        vec![fs_list_dir()],
        policy,
        approver.clone(),
        HookRunner::default(),
    );
    for _ in 0..2 {
        let outcome = h
            .gate
            .call(request(
                CallSurface::Agent,
                "mcp__fs__list_dir",
                json!({"path": "/tmp/x"}),
            ))
            .await;
        assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    }
    assert_eq!(approver.asked(), 2, "asked before every call");
    assert_eq!(
        approver.requests.lock().unwrap()[0].reason,
        "mcp__fs__list_dir requires approval before every call"
    );

    // Code mode never asks, so a tool that requires approval is refused there.
    let outcome = h
        .gate
        .call(request(
            CallSurface::CodeMode,
            "mcp__fs__list_dir",
            json!({"path": "/tmp/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert_eq!(approver.asked(), 2);
}

#[tokio::test]
async fn a_headless_run_refuses_a_tool_that_requires_approval_and_names_the_real_fix() {
    let mut policy = auto_mode();
    policy.permissions.allow = vec![ToolGlob::parse("mcp__fs__*").unwrap()];
    policy.tool_settings = vec![settings(
        "mcp__fs__list_dir",
        ToolSettings {
            requires_approval: Some(true),
            ..ToolSettings::default()
        },
    )];
    let h = harness(
        vec![fs_list_dir()],
        policy,
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__list_dir",
            json!({"path": "/tmp/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    let reason = outcome.reason.unwrap_or_default();
    assert!(
        reason.contains("drop requires_approval from its definition or [tool_settings] entry"),
        "{reason}"
    );
    assert!(!reason.contains("--allowed-tools"), "{reason}");
    assert_eq!(h.dispatcher.count(), 0);
}

#[tokio::test]
async fn a_session_answer_covers_a_tool_that_requires_approval() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowForSession));
    let mut policy = auto_mode();
    policy.tool_settings = vec![settings(
        "mcp__fs__*",
        ToolSettings {
            requires_approval: Some(true),
            ..ToolSettings::default()
        },
    )];
    let h = harness(
        vec![fs_list_dir()],
        policy,
        approver.clone(),
        HookRunner::default(),
    );
    for _ in 0..2 {
        let outcome = h
            .gate
            .call(request(
                CallSurface::Agent,
                "mcp__fs__list_dir",
                json!({"path": "/tmp/x"}),
            ))
            .await;
        assert_eq!(outcome.decision, Decision::Allowed);
    }
    assert_eq!(approver.asked(), 1);
}

// On the paused clock: every wait here is on async tasks alone.
#[tokio::test(start_paused = true)]
async fn a_configured_timeout_replaces_the_tools_own() {
    let mut slow = mcp_tool("fs", "slow", annotations(Some(true), None, Some(false)));
    slow.timeout = Some(Duration::from_secs(3600));
    let policy = GatePolicy {
        tool_settings: vec![settings(
            "mcp__fs__slow",
            ToolSettings {
                timeout: Some(Duration::from_secs(2)),
                ..ToolSettings::default()
            },
        )],
        ..GatePolicy::default()
    };
    let h = harness(
        vec![slow],
        policy,
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__slow",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::TimedOut, Layer::Timeout)
    );
    assert!(
        outcome.model_text().contains("did not finish within 2s"),
        "{}",
        outcome.model_text()
    );
}

/// Never decides (a permission service that hangs).
struct HangingHandler;

impl AuthorizationHandler for HangingHandler {
    fn authorize<'a>(
        &'a self,
        _question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn the_caller_can_cancel_a_call_the_handler_is_still_deciding() {
    let Harness {
        gate,
        dispatcher,
        audit,
    } = harness(
        vec![fs_list_dir()],
        auto_mode(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let gate = gate.with_authorization(Arc::new(HangingHandler));
    let call = request(
        CallSurface::Agent,
        "mcp__fs__list_dir",
        json!({"path": "/tmp/x"}),
    );
    let cancel = call.cancel.clone();
    let (outcome, ()) = tokio::join!(gate.call(call), async move { cancel.cancel() });
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Cancelled, Layer::Cancellation)
    );
    assert_eq!(
        outcome.reason.as_deref(),
        Some("cancelled while the application decided on it")
    );
    assert_eq!(dispatcher.count(), 0);
    assert_eq!(audit.len(), 1);
}
