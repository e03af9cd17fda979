//! Hook runner against real shell scripts: exit 2 blocks, anything else is "no opinion".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use warden_hooks::{
    HookDefinition, HookEvent, HookInput, HookRunResult, HookRunner, HookSpec, HookSpecError,
    HookTool, HookVerdict, ToolGlob,
};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn hook(event: HookEvent, command: PathBuf, matcher: Option<&str>, timeout: Duration) -> HookSpec {
    HookSpec::try_from(HookDefinition {
        event,
        command,
        args: Vec::new(),
        matcher: matcher.map(|m| ToolGlob::parse(m).unwrap()),
        timeout,
    })
    .unwrap()
}

fn pre_tool_input(dir: &Path, public_name: &str) -> HookInput {
    HookInput {
        event: HookEvent::PreToolUse,
        session_id: "s-1".into(),
        cwd: dir.to_path_buf(),
        tool: Some(HookTool {
            public_name: public_name.into(),
            server: "fs".into(),
            tool: "write_file".into(),
        }),
        arguments: Some(json!({"path": "/tmp/x", "content": "secret"})),
        result: None,
        prompt: None,
        tenant: None,
        caller: None,
    }
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn exit_two_blocks_with_stderr_as_reason() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = script(
        dir.path(),
        "block.sh",
        "echo 'writes are frozen today' >&2\nexit 2",
    );
    let runner = HookRunner::new(vec![hook(
        HookEvent::PreToolUse,
        blocker,
        None,
        10 * SECOND,
    )]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    assert_eq!(verdict.block_reason(), Some("writes are frozen today"));
}

#[tokio::test]
async fn exit_one_timeout_and_missing_command_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fails = script(dir.path(), "fails.sh", "echo 'broken hook' >&2\nexit 1");
    let sleeps = script(dir.path(), "sleeps.sh", "sleep 5\nexit 2");
    let missing = dir.path().join("does-not-exist.sh");
    let runner = HookRunner::new(vec![
        hook(HookEvent::PreToolUse, fails, None, 10 * SECOND),
        hook(HookEvent::PreToolUse, sleeps, None, SECOND),
        hook(HookEvent::PreToolUse, missing, None, 10 * SECOND),
    ]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    let HookVerdict::Proceed { reports } = verdict else {
        panic!("expected proceed, got {verdict:?}")
    };
    assert_eq!(reports.len(), 3);
    assert!(
        matches!(&reports[0].result, HookRunResult::NoOpinion { why } if why.contains("exited with 1"))
    );
    assert!(
        matches!(&reports[1].result, HookRunResult::NoOpinion { why } if why.contains("timed out"))
    );
    assert!(
        matches!(&reports[2].result, HookRunResult::NoOpinion { why } if why.contains("could not start"))
    );
}

#[tokio::test]
async fn the_hook_reads_one_json_object_with_the_tool_identity() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("seen.json");
    let logger = script(
        dir.path(),
        "log.sh",
        &format!("cat > '{}'", capture.display()),
    );
    let runner = HookRunner::new(vec![hook(
        HookEvent::PreToolUse,
        logger,
        Some("mcp__fs__*"),
        10 * SECOND,
    )]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    assert!(
        matches!(&verdict, HookVerdict::Proceed { reports } if reports[0].result == HookRunResult::Passed)
    );
    let seen: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&capture).unwrap()).unwrap();
    assert_eq!(seen["event"], "PreToolUse");
    assert_eq!(seen["session_id"], "s-1");
    assert_eq!(seen["public_name"], "mcp__fs__write_file");
    assert_eq!(seen["server"], "fs");
    assert_eq!(seen["tool"], "write_file");
    assert_eq!(seen["arguments"]["content"], "secret");
    assert_eq!(seen["cwd"], dir.path().display().to_string());
}

#[tokio::test]
async fn the_matcher_selects_tools_and_the_event_must_match() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = script(dir.path(), "block.sh", "echo no >&2\nexit 2");
    let runner = HookRunner::new(vec![
        hook(
            HookEvent::PreToolUse,
            blocker.clone(),
            Some("mcp__github__*"),
            10 * SECOND,
        ),
        hook(HookEvent::PostToolUse, blocker, None, 10 * SECOND),
    ]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    assert_eq!(
        verdict,
        HookVerdict::Proceed {
            reports: Vec::new()
        }
    );
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__github__create_issue"))
        .await;
    assert_eq!(verdict.block_reason(), Some("no"));
}

/// A matcher written for a server (`mcp__github__*`) also selects warden's own tools when they
/// reach that server for the caller (a resource read names the server it reads from), and
/// `has_hooks_for_tool` agrees with what runs.
#[tokio::test]
async fn a_server_matcher_covers_that_servers_resource_reads() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = script(dir.path(), "block.sh", "echo no >&2\nexit 2");
    let runner = HookRunner::new(vec![hook(
        HookEvent::PreToolUse,
        blocker,
        Some("mcp__github__*"),
        10 * SECOND,
    )]);
    let read_from = |server: &str| {
        let mut input = pre_tool_input(dir.path(), "read_mcp_resource");
        input.tool = Some(HookTool {
            public_name: "read_mcp_resource".into(),
            server: server.into(),
            tool: "read_mcp_resource".into(),
        });
        input
    };
    let github = read_from("github");
    assert!(runner.has_hooks_for_tool(HookEvent::PreToolUse, github.tool.as_ref().unwrap()));
    assert_eq!(runner.run(&github).await.block_reason(), Some("no"));
    let other = read_from("fs");
    assert!(!runner.has_hooks_for_tool(HookEvent::PreToolUse, other.tool.as_ref().unwrap()));
    assert_eq!(runner.run(&other).await.block_reason(), None);
    // A built-in tool is never taken for a server's.
    let builtin = read_from("builtin");
    assert_eq!(runner.run(&builtin).await.block_reason(), None);
}

#[tokio::test]
async fn a_user_prompt_hook_can_block_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = script(
        dir.path(),
        "prompt.sh",
        "grep -q password && { echo 'no secrets in prompts' >&2; exit 2; }\nexit 0",
    );
    let runner = HookRunner::new(vec![hook(
        HookEvent::UserPromptSubmit,
        blocker,
        None,
        10 * SECOND,
    )]);
    let mut input =
        HookInput::session_event(HookEvent::UserPromptSubmit, "s-2", dir.path().to_path_buf());
    input.prompt = Some("my password is hunter2".into());
    assert_eq!(
        runner.run(&input).await.block_reason(),
        Some("no secrets in prompts")
    );
    input.prompt = Some("hello".into());
    assert_eq!(runner.run(&input).await.block_reason(), None);
}

#[tokio::test]
async fn a_blocking_hook_stops_later_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("second-ran");
    let first = script(dir.path(), "first.sh", "exit 2");
    let second = script(
        dir.path(),
        "second.sh",
        &format!("touch '{}'", marker.display()),
    );
    let runner = HookRunner::new(vec![
        hook(HookEvent::PreToolUse, first, None, 10 * SECOND),
        hook(HookEvent::PreToolUse, second, None, 10 * SECOND),
    ]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    let reason = verdict.block_reason().unwrap();
    assert!(
        reason.contains("first.sh"),
        "empty stderr gives a stock reason naming the hook: {reason}"
    );
    assert!(!marker.exists());
}

#[test]
fn specs_are_validated() {
    let relative = HookSpec::try_from(HookDefinition {
        event: HookEvent::Stop,
        command: "hook.sh".into(),
        args: Vec::new(),
        matcher: None,
        timeout: SECOND,
    });
    assert!(matches!(
        relative,
        Err(HookSpecError::RelativeCommand { .. })
    ));
    let matcher_on_stop = HookSpec::try_from(HookDefinition {
        event: HookEvent::Stop,
        command: "/bin/true".into(),
        args: Vec::new(),
        matcher: Some(ToolGlob::parse("*").unwrap()),
        timeout: SECOND,
    });
    assert!(matches!(
        matcher_on_stop,
        Err(HookSpecError::MatcherOnNonToolEvent { .. })
    ));
    let zero = HookSpec::try_from(HookDefinition {
        event: HookEvent::Stop,
        command: "/bin/true".into(),
        args: Vec::new(),
        matcher: None,
        timeout: Duration::ZERO,
    });
    assert!(matches!(zero, Err(HookSpecError::ZeroTimeout { .. })));
}

#[tokio::test]
async fn a_timed_out_hook_loses_its_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    // The shell starts a grandchild that would outlive a kill of the shell alone.
    let spawner = script(
        dir.path(),
        "spawner.sh",
        &format!("sleep 30 &\necho $! > '{}'\nwait", pid_file.display()),
    );
    let runner = HookRunner::new(vec![hook(HookEvent::PreToolUse, spawner, None, SECOND)]);
    let verdict = runner
        .run(&pre_tool_input(dir.path(), "mcp__fs__write_file"))
        .await;
    assert!(
        matches!(&verdict.reports()[0].result, HookRunResult::NoOpinion { why } if why.contains("timed out"))
    );
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    // Gone, or at most a zombie waiting for a reaper. SIGKILL is asynchronous, so give the kernel
    // a moment (generous bound; this is not a timing assertion).
    let state_of = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned)
            })
    };
    let mut state = state_of();
    for _ in 0..100 {
        if matches!(state.as_deref(), None | Some("Z" | "X")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        state = state_of();
    }
    assert!(
        matches!(state.as_deref(), None | Some("Z" | "X")),
        "grandchild {pid} still alive: {state:?}"
    );
}
