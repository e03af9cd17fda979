//! Each gate layer through the real gate: denials never reach the dispatcher; hooks, the external
//! authorization command, approval memory, grants, timeouts and cancellation.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use warden_hooks::{HookDefinition, HookEvent, HookRunner, HookSpec};
use warden_policy::{
    ApprovalAnswer, AuthorizationRule, CallSurface, CapabilityClass, Decision, ExternalAuthorizer,
    GatePolicy, Layer, NoApprover, PermissionMode, Permissions, RuleDecision, ServerPolicy,
    ToolGlob, ToolIdentity,
};

use crate::support::{
    Harness, ScriptedApprover, SilentApprover, annotations, fs_read_file, fs_write_file, harness,
    harness_in_workspace, mcp_tool, request, script,
};

fn hook(event: HookEvent, command: PathBuf, timeout: Duration) -> HookSpec {
    HookSpec::try_from(HookDefinition {
        event,
        command,
        args: Vec::new(),
        matcher: None,
        timeout,
    })
    .unwrap()
}

fn external(command: PathBuf) -> GatePolicy {
    GatePolicy {
        external: Some(ExternalAuthorizer {
            command,
            args: Vec::new(),
            timeout: Duration::from_secs(10),
        }),
        ..GatePolicy::default()
    }
}

#[tokio::test]
async fn headless_write_is_denied_and_the_file_never_appears() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.txt");
    let h = harness(
        vec![fs_write_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let args = json!({"path": target.display().to_string(), "content": "hello"});
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            args.clone(),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert!(
        outcome.model_text().contains("nobody to ask"),
        "{}",
        outcome.model_text()
    );
    assert!(!target.exists());
    assert_eq!(h.dispatcher.count(), 0);

    let allowed = GatePolicy {
        permissions: Permissions {
            allow: ToolGlob::parse_list("mcp__fs__write_file").unwrap(),
            ..Permissions::default()
        },
        ..GatePolicy::default()
    };
    let h = harness(
        vec![fs_write_file()],
        allowed,
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(CallSurface::Agent, "mcp__fs__write_file", args))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{:?}", outcome.reason);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
}

#[tokio::test]
async fn no_denial_reaches_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let blocking_hook = script(dir.path(), "block.sh", "echo 'blocked by hook' >&2; exit 2");
    let denying_external = script(
        dir.path(),
        "deny.sh",
        r#"cat >/dev/null; echo '{"decision":"deny","reason":"external says no"}'"#,
    );
    let mut restricted = fs_write_file();
    restricted.server_policy = ServerPolicy {
        capabilities: Some(warden_policy::CapabilitySet::of(&[
            warden_policy::CapabilityClass::ReadOnly,
        ])),
        ..ServerPolicy::default()
    };
    restricted.public_name = "mcp__fs__restricted".into();
    let rule_denied = mcp_tool(
        "fs",
        "rule_denied",
        annotations(Some(true), None, Some(false)),
    );
    let cases: Vec<(&str, GatePolicy, HookRunner, &str, serde_json::Value, Layer)> = vec![
        (
            "resolve",
            GatePolicy::default(),
            HookRunner::default(),
            "mcp__fs__nope",
            json!({"path": "/x"}),
            Layer::Resolve,
        ),
        (
            "authorization",
            GatePolicy::default(),
            HookRunner::default(),
            "mcp__fs__restricted",
            json!({"path": "/x"}),
            Layer::Authorization,
        ),
        (
            "rule",
            GatePolicy {
                rules: vec![AuthorizationRule {
                    tools: ToolGlob::parse("*rule_denied").unwrap(),
                    decision: RuleDecision::Deny,
                    reason: Some("no".into()),
                }],
                ..GatePolicy::default()
            },
            HookRunner::default(),
            "mcp__fs__rule_denied",
            json!({"path": "/x"}),
            Layer::Rule,
        ),
        (
            "external",
            external(denying_external),
            HookRunner::default(),
            "mcp__fs__read_file",
            json!({"path": "/x"}),
            Layer::External,
        ),
        (
            "validation",
            GatePolicy::default(),
            HookRunner::default(),
            "mcp__fs__read_file",
            json!({"path": 3}),
            Layer::Validation,
        ),
        (
            "hook",
            GatePolicy::default(),
            HookRunner::new(vec![hook(
                HookEvent::PreToolUse,
                blocking_hook,
                Duration::from_secs(10),
            )]),
            "mcp__fs__read_file",
            json!({"path": "/x"}),
            Layer::Hook,
        ),
        (
            "approval",
            GatePolicy::default(),
            HookRunner::default(),
            "mcp__fs__write_file",
            json!({"path": "/x"}),
            Layer::Approval,
        ),
    ];
    for (name, policy, hooks, tool, args, layer) in cases {
        let h = harness(
            vec![
                fs_read_file(),
                fs_write_file(),
                restricted.clone(),
                rule_denied.clone(),
            ],
            policy,
            Arc::new(NoApprover),
            hooks,
        );
        let outcome = h.gate.call(request(CallSurface::Agent, tool, args)).await;
        assert_eq!(
            (outcome.decision, outcome.layer),
            (Decision::Denied, layer),
            "{name}: {:?}",
            outcome.reason
        );
        assert_eq!(h.dispatcher.count(), 0, "{name} reached the dispatcher");
        assert_eq!(h.audit.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn unknown_tool_and_validation_reasons_are_readable() {
    let h = harness(
        vec![fs_read_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(CallSurface::Agent, "mcp__fs__missing", json!({})))
        .await;
    assert_eq!(
        outcome.model_text(),
        "Tool call denied (resolve): unknown tool \"mcp__fs__missing\""
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/x", "extra": 1}),
        ))
        .await;
    let text = outcome.model_text();
    assert!(
        text.starts_with(
            "Tool call denied (validation): mcp__fs__read_file: invalid arguments: at (root):"
        ),
        "{text}"
    );
    assert!(text.contains("extra"), "{text}");
}

#[tokio::test]
async fn pre_tool_hooks_block_only_with_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = script(
        dir.path(),
        "block.sh",
        "echo 'no reading secrets' >&2; exit 2",
    );
    let h = harness(
        vec![fs_read_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::new(vec![hook(
            HookEvent::PreToolUse,
            blocker,
            Duration::from_secs(10),
        )]),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Hook)
    );
    assert_eq!(outcome.reason.as_deref(), Some("no reading secrets"));

    let exits_one = script(dir.path(), "one.sh", "echo 'oops' >&2; exit 1");
    let sleeps = script(dir.path(), "sleep.sh", "sleep 5; exit 2");
    let missing = dir.path().join("missing.sh");
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "contents").unwrap();
    for (name, hook_spec) in [
        (
            "exit 1",
            hook(HookEvent::PreToolUse, exits_one, Duration::from_secs(10)),
        ),
        (
            "timeout",
            hook(HookEvent::PreToolUse, sleeps, Duration::from_secs(1)),
        ),
        (
            "missing",
            hook(HookEvent::PreToolUse, missing, Duration::from_secs(10)),
        ),
    ] {
        let h = harness(
            vec![fs_read_file()],
            GatePolicy::default(),
            Arc::new(NoApprover),
            HookRunner::new(vec![hook_spec]),
        );
        let outcome = h
            .gate
            .call(request(
                CallSurface::Agent,
                "mcp__fs__read_file",
                json!({"path": file.display().to_string()}),
            ))
            .await;
        assert_eq!(
            outcome.decision,
            Decision::Allowed,
            "{name}: {:?}",
            outcome.reason
        );
        assert_eq!(outcome.model_text(), "contents", "{name}");
    }
}

#[tokio::test]
async fn post_tool_hooks_see_the_result_and_add_feedback() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.json");
    let post = script(
        dir.path(),
        "post.sh",
        &format!(
            "cat > '{}'; echo 'result looked odd' >&2; exit 2",
            seen.display()
        ),
    );
    let h = harness(
        vec![fs_read_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::new(vec![hook(
            HookEvent::PostToolUse,
            post,
            Duration::from_secs(10),
        )]),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/nonexistent/x"}),
        ))
        .await;
    // The dispatcher failed to read: PostToolUse runs only after a dispatch that returned.
    assert_eq!(outcome.decision, Decision::Failed);
    assert!(!seen.exists());

    let file = dir.path().join("data.txt");
    std::fs::write(&file, "abc").unwrap();
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": file.display().to_string()}),
        ))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed);
    assert_eq!(outcome.hook_feedback.as_deref(), Some("result looked odd"));
    assert_eq!(
        outcome.model_text(),
        "abc\n\n[PostToolUse hook] result looked odd"
    );
    let input: serde_json::Value = serde_json::from_slice(&std::fs::read(&seen).unwrap()).unwrap();
    assert_eq!(input["event"], "PostToolUse");
    assert_eq!(input["result"]["text"], "abc");
    assert_eq!(input["server"], "fs");
    assert_eq!(input["tool"], "read_file");
}

#[tokio::test]
async fn the_external_command_decides_and_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let question = dir.path().join("question.json");
    let allow = script(
        dir.path(),
        "allow.sh",
        &format!(
            r#"cat > '{}'; echo '{{"decision":"allow","reason":"ok"}}'"#,
            question.display()
        ),
    );
    let deny = script(
        dir.path(),
        "deny.sh",
        r#"cat >/dev/null; echo '{"decision":"deny","reason":"ticket required"}'"#,
    );
    let garbage = script(
        dir.path(),
        "garbage.sh",
        "cat >/dev/null; echo 'sure, go ahead'",
    );
    let unknown = script(
        dir.path(),
        "unknown.sh",
        r#"cat >/dev/null; echo '{"decision":"maybe"}'"#,
    );
    let fails = script(
        dir.path(),
        "fails.sh",
        r#"cat >/dev/null; echo '{"decision":"allow"}'; echo 'crashed' >&2; exit 3"#,
    );
    let slow = script(
        dir.path(),
        "slow.sh",
        r#"sleep 5; echo '{"decision":"allow"}'"#,
    );
    let missing = dir.path().join("missing.sh");

    let mut described = fs_read_file();
    described.required_permission = Some("fs.read".into());
    let run = |command: PathBuf, timeout: Duration| {
        let described = described.clone();
        async move {
            let policy = GatePolicy {
                external: Some(ExternalAuthorizer {
                    command,
                    args: Vec::new(),
                    timeout,
                }),
                ..GatePolicy::default()
            };
            let h = harness(
                vec![described],
                policy,
                Arc::new(NoApprover),
                HookRunner::default(),
            );
            let mut call = request(
                CallSurface::ToolCli,
                "mcp__fs__read_file",
                json!({"path": "/etc/hostname"}),
            );
            call.caller = Some("jq-pipeline".into());
            call.tenant = Some("acme".into());
            let outcome = h.gate.call(call).await;
            (outcome, h.dispatcher.count())
        }
    };
    let ten = Duration::from_secs(10);

    let (outcome, dispatched) = run(allow, ten).await;
    assert_eq!(
        (outcome.decision, dispatched),
        (Decision::Allowed, 1),
        "{:?}",
        outcome.reason
    );
    let asked: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&question).unwrap()).unwrap();
    assert_eq!(
        asked,
        json!({
            "session": "session-1", "caller": "jq-pipeline", "tenant": "acme", "source": "tool-cli", "kind": "tool", "server": "fs", "tool": "read_file",
            "public_name": "mcp__fs__read_file", "classes": ["read_only"], "required_permission": "fs.read",
            "arguments": {"path": "/etc/hostname"}
        })
    );

    let (outcome, dispatched) = run(deny, ten).await;
    assert_eq!(
        (outcome.decision, outcome.layer, dispatched),
        (Decision::Denied, Layer::External, 0)
    );
    assert_eq!(outcome.reason.as_deref(), Some("ticket required"));

    for (name, command, timeout, says) in [
        ("bad JSON", garbage, ten, "answer that is not"),
        ("unknown decision", unknown, ten, "answer that is not"),
        ("non-zero exit", fails, ten, "exited with 3: crashed"),
        (
            "timeout",
            slow,
            Duration::from_secs(1),
            "did not answer within",
        ),
        ("missing", missing, ten, "could not run"),
    ] {
        let (outcome, dispatched) = run(command, timeout).await;
        assert_eq!(
            (outcome.decision, outcome.layer, dispatched),
            (Decision::Denied, Layer::External, 0),
            "{name}"
        );
        let reason = outcome.reason.unwrap();
        assert!(reason.contains(says), "{name}: {reason}");
    }
}

#[tokio::test]
async fn allow_for_session_is_remembered_per_session_and_grants_unlock() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowForSession));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("f.txt").display().to_string();
    let h = harness(
        vec![fs_write_file()],
        GatePolicy::default(),
        approver.clone(),
        HookRunner::default(),
    );
    for _ in 0..3 {
        let outcome = h
            .gate
            .call(request(
                CallSurface::Agent,
                "mcp__fs__write_file",
                json!({"path": target, "content": "x"}),
            ))
            .await;
        assert_eq!(outcome.decision, Decision::Allowed);
    }
    assert_eq!(approver.asked(), 1);
    let request_seen = approver.requests.lock().unwrap()[0].clone();
    assert_eq!(request_seen.identity, ToolIdentity::mcp("fs", "write_file"));
    assert_eq!(request_seen.public_name, "mcp__fs__write_file");
    assert_eq!(request_seen.annotations.destructive_hint, Some(true));

    let mut other = request(
        CallSurface::Agent,
        "mcp__fs__write_file",
        json!({"path": target, "content": "y"}),
    );
    other.session_id = "session-2".into();
    assert_eq!(h.gate.call(other.clone()).await.decision, Decision::Allowed);
    assert_eq!(approver.asked(), 2, "another session is asked again");

    // Grants: headless, a granted tool runs without asking; the grant is per session.
    let h = harness(
        vec![fs_write_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    h.gate
        .grant_for_session("session-1", [ToolIdentity::mcp("fs", "write_file")]);
    let granted = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": target, "content": "z"}),
        ))
        .await;
    assert_eq!(granted.decision, Decision::Allowed, "{:?}", granted.reason);
    assert!(granted.reason.unwrap().contains("skill grant"));
    assert_eq!(h.gate.call(other).await.decision, Decision::Denied);
    h.gate.end_session("session-1");
    let after = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": target}),
        ))
        .await;
    assert_eq!(after.decision, Decision::Denied);

    // A grant does not widen authorization.
    let read_only = GatePolicy {
        permissions: Permissions {
            mode: PermissionMode::ReadOnly,
            ..Permissions::default()
        },
        ..GatePolicy::default()
    };
    let h = harness(
        vec![fs_write_file()],
        read_only,
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    h.gate
        .grant_for_session("session-1", [ToolIdentity::mcp("fs", "write_file")]);
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": target}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Authorization)
    );
}

#[tokio::test]
async fn a_path_outside_the_workspace_asks_in_every_mode_and_an_answer_covers_that_path_only() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowForSession));
    // auto mode with the tool on the allow list: neither covers a path outside the workspace.
    // (Some files do not exist: an admitted call may still fail at dispatch.)
    let policy = GatePolicy {
        permissions: Permissions {
            mode: PermissionMode::Auto,
            allow: vec![warden_policy::ToolGlob::parse("mcp__fs__*").unwrap()],
            ..Permissions::default()
        },
        ..GatePolicy::default()
    };
    let h = harness_in_workspace(vec![fs_read_file()], policy.clone(), approver.clone());
    let read = |path: &str| {
        request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({ "path": path }),
        )
    };
    assert_ne!(
        h.gate.call(read("/work/a.txt")).await.decision,
        Decision::Denied
    );
    assert_eq!(
        approver.asked(),
        0,
        "inside the workspace the allow list runs it"
    );
    for _ in 0..2 {
        assert_ne!(
            h.gate.call(read("/etc/hosts")).await.decision,
            Decision::Denied
        );
    }
    assert_eq!(approver.asked(), 1, "remembered for /etc/hosts");
    let asked = approver.requests.lock().unwrap()[0].clone();
    assert!(
        asked.reason.contains("outside the workspace"),
        "{}",
        asked.reason
    );
    assert_eq!(asked.guarded.unwrap().path, PathBuf::from("/etc/hosts"));
    // An answer about one file covers that file, never its folder's other files.
    for path in ["/etc/passwd", "/etc/ssl/openssl.cnf", "/var/log/syslog"] {
        assert_ne!(h.gate.call(read(path)).await.decision, Decision::Denied);
    }
    assert_eq!(approver.asked(), 4, "every other path asks again");

    // Headless: denied, with the flag that makes the folder part of the workspace.
    let h = harness_in_workspace(vec![fs_read_file()], policy, Arc::new(NoApprover));
    let outcome = h.gate.call(read("/etc/hosts")).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert!(outcome.reason.unwrap().contains("--add-dir /etc"));
    assert_eq!(h.dispatcher.count(), 0);
    // Code mode never asks: denied.
    let mut code = read("/etc/hosts");
    code.surface = CallSurface::CodeMode;
    assert_eq!(h.gate.call(code).await.decision, Decision::Denied);
}

#[tokio::test]
async fn an_unconfined_call_asks_every_time_whatever_the_mode_lists_and_answers() {
    // Auto mode, the tool on the allow list, and a person who answers "for this session":
    // none lets a call that runs outside warden's confinement go unasked.
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowForSession));
    let policy = GatePolicy {
        permissions: Permissions {
            mode: PermissionMode::Auto,
            allow: vec![warden_policy::ToolGlob::parse("mcp__fs__*").unwrap()],
            ..Permissions::default()
        },
        ..GatePolicy::default()
    };
    let h = harness_in_workspace(vec![fs_read_file()], policy.clone(), approver.clone());
    let read = |path: &str| {
        request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({ "path": path }),
        )
    };
    for _ in 0..3 {
        h.gate.call(read("/work/unconfined/a.txt")).await;
    }
    assert_eq!(approver.asked(), 3, "asked before every call");
    let asked = approver.requests.lock().unwrap()[0].clone();
    assert!(asked.once_only, "only this call may be allowed");
    assert!(
        asked.reason.contains("editor's terminal"),
        "{}",
        asked.reason
    );
    assert_eq!(h.dispatcher.count(), 3);
    // The answers for the session were not remembered for confined calls either way: a plain
    // call still runs by the allow list without asking.
    h.gate.call(read("/work/a.txt")).await;
    assert_eq!(approver.asked(), 3);

    // Headless: denied, nothing run.
    let h = harness_in_workspace(vec![fs_read_file()], policy, Arc::new(NoApprover));
    let outcome = h.gate.call(read("/work/unconfined/a.txt")).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert_eq!(h.dispatcher.count(), 0);
}

#[tokio::test]
async fn a_protected_path_is_refused_before_hooks_and_approval_and_added_classes_are_audited() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowOnce));
    let policy = GatePolicy {
        permissions: Permissions {
            mode: PermissionMode::Auto,
            ..Permissions::default()
        },
        ..GatePolicy::default()
    };
    let h = harness_in_workspace(
        vec![fs_read_file(), fs_write_file()],
        policy,
        approver.clone(),
    );
    let refused = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/work/.secret/key"}),
        ))
        .await;
    assert_eq!(
        (refused.decision, refused.layer),
        (Decision::Denied, Layer::Workspace)
    );
    assert_eq!(approver.asked(), 0);
    assert_eq!(h.dispatcher.count(), 0);
    // Replacing a file adds `destructive`, which auto mode always asks about.
    let replace = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": "/work/existing", "content": "x"}),
        ))
        .await;
    assert_eq!(approver.asked(), 1);
    assert!(replace.classes.contains(CapabilityClass::Destructive));
    let records = h.audit.records.lock().unwrap();
    assert_eq!(records[0].layer, Layer::Workspace);
    assert!(records[1].classes.contains(CapabilityClass::Destructive));
}

#[tokio::test]
async fn a_user_denial_carries_its_reason() {
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::Deny {
        reason: Some("not that file".into()),
    }));
    let h = harness(
        vec![fs_write_file()],
        GatePolicy::default(),
        approver,
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__write_file",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert_eq!(
        outcome.reason.as_deref(),
        Some("the user declined this call: not that file")
    );
    assert_eq!(h.dispatcher.count(), 0);
}

fn slow_tool() -> warden_policy::ToolDescriptor {
    let mut slow = mcp_tool("fs", "slow", annotations(Some(true), None, Some(false)));
    slow.timeout = Some(Duration::from_millis(200));
    slow
}

// On the paused clock: every wait here is on async tasks alone (no child process, no I/O).
#[tokio::test(start_paused = true)]
async fn execution_times_out_and_the_run_goes_on() {
    let h = harness(
        vec![slow_tool(), fs_read_file()],
        GatePolicy::default(),
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
        outcome
            .model_text()
            .starts_with("Tool call timed out: mcp__fs__slow did not finish within"),
        "{}",
        outcome.model_text()
    );
    assert!(outcome.execution_duration.is_some());
    let token = h.dispatcher.last_token.lock().unwrap().clone().unwrap();
    assert!(
        token.is_cancelled(),
        "the dispatcher's token fires on timeout"
    );
    // The next call is served normally.
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/nonexistent"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Failed, Layer::Dispatch)
    );
    assert!(outcome.model_text().starts_with("Tool call failed:"));
    assert_eq!(h.audit.len(), 2);
}

#[tokio::test]
async fn a_dead_server_is_an_ordinary_result() {
    let crash = mcp_tool("fs", "crash", annotations(Some(true), None, Some(false)));
    let h = harness(
        vec![crash],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__crash",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Failed, Layer::Dispatch)
    );
    assert_eq!(
        outcome.model_text(),
        "Tool call failed: server \"fs\" exited unexpectedly (exit code 1)"
    );
    let records = h.audit.records.lock().unwrap();
    assert_eq!(
        records[0].error.as_deref(),
        Some("server \"fs\" exited unexpectedly (exit code 1)")
    );
}

// On the paused clock: every wait here is on async tasks alone (no child process, no I/O).
#[tokio::test(start_paused = true)]
async fn the_caller_cancels_execution() {
    let h = harness(
        vec![mcp_tool(
            "fs",
            "slow",
            annotations(Some(true), None, Some(false)),
        )],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let call = request(CallSurface::Agent, "mcp__fs__slow", json!({"path": "/x"}));
    let cancel = call.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let outcome = h.gate.call(call).await;
    canceller.await.unwrap();
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Cancelled, Layer::Cancellation)
    );
    assert_eq!(h.dispatcher.count(), 1);
}

/// A call whose caller gave up before it began (a turn stopped while its calls queued) is on
/// record as cancelled and reaches nothing.
#[tokio::test]
async fn a_call_cancelled_before_it_starts_is_recorded_and_never_dispatched() {
    let h = harness(
        vec![fs_read_file()],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let call = request(
        CallSurface::Agent,
        "mcp__fs__read_file",
        json!({"path": "/x"}),
    );
    call.cancel.cancel();
    let outcome = h.gate.call(call).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Cancelled, Layer::Cancellation),
        "{outcome:?}"
    );
    assert!(outcome.model_text().contains("before it started"));
    assert_eq!(h.dispatcher.count(), 0);
    let records = h.audit.records.lock().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].decision, Decision::Cancelled);
}

// On the paused clock: every wait here is on async tasks alone (no child process, no I/O).
#[tokio::test(start_paused = true)]
async fn a_pending_approval_is_not_subject_to_the_execution_timeout() {
    let mut slow_write = fs_write_file();
    slow_write.timeout = Some(Duration::from_millis(50));
    let h = Arc::new(harness(
        vec![slow_write],
        GatePolicy::default(),
        Arc::new(SilentApprover),
        HookRunner::default(),
    ));
    let call = request(
        CallSurface::Agent,
        "mcp__fs__write_file",
        json!({"path": "/x"}),
    );
    let cancel = call.cancel.clone();
    let gate_side = h.clone();
    let pending = tokio::spawn(async move { gate_side.gate.call(call).await });
    // Well past the execution timeout the call is still waiting for its answer…
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!pending.is_finished());
    assert_eq!(h.audit.len(), 0);
    // …until the caller gives up.
    cancel.cancel();
    let outcome = pending.await.unwrap();
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Cancelled, Layer::Cancellation)
    );
    assert_eq!(h.dispatcher.count(), 0);
    assert_eq!(h.audit.len(), 1);
}

#[tokio::test]
async fn a_panicking_dispatcher_is_a_failed_call_with_one_record() {
    let panics = mcp_tool("fs", "panic", annotations(Some(true), None, Some(false)));
    let h = harness(
        vec![panics],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__panic",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Failed, Layer::Dispatch)
    );
    assert!(outcome.model_text().contains("dispatcher panicked"));
    assert_eq!(h.audit.len(), 1);
}

/// A fetch tool as reference servers annotate it: read-only and open-world (trusted hints).
fn web_fetch() -> warden_policy::ToolDescriptor {
    mcp_tool("web", "fetch", annotations(Some(true), None, Some(true)))
}

/// A gate over [`web_fetch`] alone.
fn fetch_gate(policy: GatePolicy, approver: Arc<dyn warden_policy::Approver>) -> Harness {
    harness(vec![web_fetch()], policy, approver, HookRunner::default())
}

/// One call of the fetch tool from `surface`.
async fn fetch(h: &Harness, surface: CallSurface) -> warden_policy::GateOutcome {
    h.gate
        .call(request(surface, "mcp__web__fetch", json!({ "path": "x" })))
        .await
}

fn in_mode(mode: PermissionMode) -> GatePolicy {
    GatePolicy {
        permissions: Permissions {
            mode,
            ..Permissions::default()
        },
        ..GatePolicy::default()
    }
}

#[tokio::test]
async fn an_external_tool_asks_a_person_in_every_mode_even_when_it_is_read_only() {
    for mode in PermissionMode::ALL {
        let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowOnce));
        let h = fetch_gate(in_mode(mode), approver.clone());
        for surface in [
            CallSurface::Agent,
            CallSurface::ToolCli,
            CallSurface::Gateway,
        ] {
            let outcome = fetch(&h, surface).await;
            assert_eq!(outcome.decision, Decision::Allowed, "{mode} {surface}");
        }
        assert_eq!(approver.asked(), 3, "{mode}: every surface asked");
        let asked = approver.requests.lock().unwrap()[0].clone();
        assert!(asked.reason.contains("external"), "{}", asked.reason);
    }
}

#[tokio::test]
async fn an_external_tool_headless_is_denied_naming_the_flag_and_code_mode_never_reaches_it() {
    let h = fetch_gate(in_mode(PermissionMode::Auto), Arc::new(NoApprover));
    let outcome = fetch(&h, CallSurface::Agent).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    let reason = outcome.reason.unwrap();
    assert!(
        reason.contains("--allowed-tools mcp__web__fetch"),
        "{reason}"
    );
    let outcome = fetch(&h, CallSurface::CodeMode).await;
    assert_eq!(outcome.decision, Decision::Denied);
    assert!(
        outcome.reason.unwrap().contains("code mode never asks"),
        "code mode is refused an external tool"
    );
    assert_eq!(h.dispatcher.count(), 0);
}

#[tokio::test]
async fn an_allow_rule_naming_an_external_tool_lets_it_run_unasked_and_a_deny_still_wins() {
    for pattern in ["mcp__web__fetch", "mcp__web__*"] {
        let mut policy = GatePolicy::default();
        policy.permissions.allow = vec![ToolGlob::parse(pattern).unwrap()];
        let h = fetch_gate(policy.clone(), Arc::new(NoApprover));
        for surface in [CallSurface::Agent, CallSurface::CodeMode] {
            let outcome = fetch(&h, surface).await;
            assert_eq!(outcome.decision, Decision::Allowed, "{pattern} {surface}");
        }
        policy.permissions.deny = vec![ToolGlob::parse("mcp__web__fetch").unwrap()];
        let h = fetch_gate(policy, Arc::new(NoApprover));
        assert_eq!(
            fetch(&h, CallSurface::Agent).await.decision,
            Decision::Denied
        );
    }
}

#[tokio::test]
async fn a_guarded_path_asks_whatever_the_allow_list_and_an_answer_covers_that_path_only() {
    use warden_policy::{CallReach, Catalog, GuardedPath, PathConcern, ToolDescriptor};

    /// Reads of `*.env` are credential reads; writes under `/work/.git` run later.
    struct Guarded(ToolDescriptor, ToolDescriptor);
    impl Catalog for Guarded {
        fn resolve(&self, name: &str) -> Option<ToolDescriptor> {
            [&self.0, &self.1]
                .into_iter()
                .find(|tool| tool.public_name == name)
                .cloned()
        }
        fn assess(&self, descriptor: &ToolDescriptor, arguments: &serde_json::Value) -> CallReach {
            let path = arguments["path"].as_str().unwrap_or_default();
            let writes = descriptor.identity.tool.contains("write");
            let concern = if path.ends_with(".env") && !writes {
                PathConcern::Secret {
                    holds: "environment secrets".into(),
                }
            } else if path.starts_with("/work/.git") && writes {
                PathConcern::RunsLater {
                    runs: "git runs its hooks".into(),
                }
            } else {
                return CallReach::default();
            };
            CallReach {
                guarded: Some(GuardedPath {
                    path: path.into(),
                    writes,
                    folder: false,
                    concern,
                }),
                ..CallReach::default()
            }
        }
    }
    // Auto mode, and the allow list names both tools: neither covers a guarded path.
    let guarded_gate = |approver: Arc<dyn warden_policy::Approver>| {
        let mut policy = in_mode(PermissionMode::Auto);
        policy.permissions.allow = vec![ToolGlob::parse("mcp__fs__*").unwrap()];
        warden_policy::Gate::new(warden_policy::GateParts {
            catalog: Arc::new(Guarded(fs_read_file(), fs_write_file())),
            dispatcher: Arc::new(crate::support::FileDispatcher::default()),
            approver,
            audit: Arc::new(crate::support::MemoryAudit::default()),
            hooks: HookRunner::default(),
            policy,
            cwd: std::env::temp_dir(),
        })
    };
    let approver = Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowForSession));
    let gate = guarded_gate(approver.clone());
    let call = |tool: &str, path: &str| {
        request(
            CallSurface::Agent,
            &format!("mcp__fs__{tool}"),
            json!({ "path": path, "content": "x" }),
        )
    };
    // Allowed by the allow list inside the workspace; a secret asks once, then that file runs.
    assert_eq!(approver.asked(), 0);
    gate.call(call("read_file", "/work/a.txt")).await;
    assert_eq!(approver.asked(), 0);
    gate.call(call("read_file", "/work/.env")).await;
    gate.call(call("read_file", "/work/.env")).await;
    assert_eq!(approver.asked(), 1, "remembered for /work/.env");
    gate.call(call("read_file", "/work/sub/.env")).await;
    assert_eq!(approver.asked(), 2, "another credential file asks again");
    gate.call(call("write_file", "/work/.git/hooks/pre-commit"))
        .await;
    assert_eq!(approver.asked(), 3, "a file that runs later asks");
    let asked = approver.requests.lock().unwrap()[2].clone();
    assert!(asked.reason.contains("runs later"), "{}", asked.reason);
    gate.call(call("write_file", "/work/.git/config")).await;
    assert_eq!(approver.asked(), 4, "each file that runs later asks");

    // Headless: denied, naming allow_protected.
    let gate = guarded_gate(Arc::new(NoApprover));
    let outcome = gate.call(call("read_file", "/work/.env")).await;
    assert_eq!(outcome.decision, Decision::Denied);
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("allow_protected"), "{reason}");
    assert!(reason.contains("credential file"), "{reason}");
}
