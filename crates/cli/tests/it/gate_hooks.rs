//! Operator policy from config through `warden run` against the real `server-filesystem`:
//! PreToolUse hooks (exit 2 blocks; exit 1, timeouts and missing commands change nothing),
//! authorization rules, config permissions, and UserPromptSubmit.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use warden_mock_model::{MockModel, Turn};
use warden_testkit::require_npm_server;

use crate::support::{self, Run, Sandbox, stdio_server, toml_str};

/// A sandbox with the mock model as default and server-filesystem as `fs` over the workspace.
fn sandbox_with(mock: &MockModel, extra: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hi there").unwrap();
    let fs = require_npm_server("filesystem");
    sandbox.user_config(&format!(
        "model = \"mock\"\n{extra}\n[models.mock]\nprovider = \"openai\"\nid = \"m\"\nbase_url = {}\n{}",
        toml_str(&mock.base_url()),
        stdio_server(
            "fs",
            Path::new("node"),
            &[fs.to_str().unwrap(), sandbox.work().to_str().unwrap()]
        )
    ));
    sandbox
}

/// An executable script in the sandbox.
fn script(sandbox: &Sandbox, name: &str, body: &str) -> PathBuf {
    let path = sandbox.root.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn hook(event: &str, command: &Path, extra: &str) -> String {
    format!(
        "[[hooks.{event}]]\ncommand = {}\n{extra}\n",
        toml_str(&command.display().to_string())
    )
}

async fn run(sandbox: &Sandbox, args: &[&str]) -> Run {
    let mut command = sandbox.command();
    command.args(args);
    tokio::task::spawn_blocking(move || support::output(&mut command))
        .await
        .unwrap()
}

fn list_turns(mock: &MockModel) {
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fs__list_directory",
        json!({"path": "."}),
    ));
    mock.push_turn(Turn::text("done"));
}

fn first_call(run: &Run) -> Value {
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    summary["tool_calls"][0]["result"].clone()
}

#[tokio::test]
async fn a_pre_tool_use_hook_exiting_2_blocks_with_its_reason() {
    let mock = MockModel::start().await.unwrap();
    list_turns(&mock);
    let sandbox = sandbox_with(&mock, "");
    let blocker = script(
        &sandbox,
        "block.sh",
        "cat > /dev/null; echo 'listing is off today' >&2; exit 2",
    );
    let text = std::fs::read_to_string(sandbox.user_file()).unwrap();
    sandbox.write(
        &sandbox.user_file(),
        &format!(
            "{text}{}",
            hook("PreToolUse", &blocker, "matcher = \"mcp__fs__*\"")
        ),
    );
    let outcome = run(&sandbox, &["run", "list", "--output-format", "json"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let result = first_call(&outcome);
    assert_eq!(result["decision"], "denied");
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("listing is off today")
    );
    let audit = sandbox.audit();
    assert_eq!(audit[0]["layer"], "hook");
}

#[tokio::test]
async fn hooks_that_fail_time_out_or_are_missing_change_nothing() {
    let mock = MockModel::start().await.unwrap();
    list_turns(&mock);
    let sandbox = sandbox_with(&mock, "");
    let failing = script(&sandbox, "fail.sh", "cat > /dev/null; exit 1");
    let slow = script(&sandbox, "slow.sh", "sleep 30");
    let seen = sandbox.root.join("seen.json");
    let recorder = script(&sandbox, "record.sh", &format!("cat > {}", seen.display()));
    let text = std::fs::read_to_string(sandbox.user_file()).unwrap();
    sandbox.write(
        &sandbox.user_file(),
        &format!(
            "{text}{}{}{}{}",
            hook("PreToolUse", &failing, ""),
            hook("PreToolUse", &slow, "timeout_sec = 1"),
            hook("PreToolUse", &sandbox.root.join("no-such-hook"), ""),
            hook("PreToolUse", &recorder, ""),
        ),
    );
    let outcome = run(&sandbox, &["run", "list", "--output-format", "json"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let result = first_call(&outcome);
    assert_eq!(result["decision"], "allowed", "{result}");
    assert!(result["text"].as_str().unwrap().contains("hello.txt"));
    // The hook saw the call: event, public name, raw identity and arguments.
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["event"], "PreToolUse");
    assert_eq!(input["public_name"], "mcp__fs__list_directory");
    assert_eq!(input["server"], "fs");
    assert_eq!(input["arguments"]["path"], ".");
}

#[tokio::test]
async fn an_authorization_rule_denies_with_its_reason_before_approval() {
    let mock = MockModel::start().await.unwrap();
    list_turns(&mock);
    let sandbox = sandbox_with(
        &mock,
        "[[authorization.rules]]\ntools = \"mcp__fs__list_*\"\ndecision = \"deny\"\nreason = \"directory listings are private here\"\n",
    );
    let outcome = run(&sandbox, &["run", "list", "--output-format", "json"]).await;
    let result = first_call(&outcome);
    assert_eq!(result["decision"], "denied");
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("directory listings are private here")
    );
    assert_eq!(sandbox.audit()[0]["layer"], "rule");
}

#[tokio::test]
async fn config_permissions_allow_a_write_and_deny_wins_over_allow() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(&mock, "[permissions]\nallow = [\"mcp__fs__write_file\"]\n");
    let target = sandbox.work().join("out.txt");
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fs__write_file",
        json!({"path": target.display().to_string(), "content": "from config"}),
    ));
    mock.push_turn(Turn::text("done"));
    let outcome = run(&sandbox, &["run", "write"]).await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "from config");

    std::fs::remove_file(&target).unwrap();
    mock.push_turn(Turn::tool_call(
        "call_2",
        "mcp__fs__write_file",
        json!({"path": target.display().to_string(), "content": "again"}),
    ));
    mock.push_turn(Turn::text("done"));
    let outcome = run(
        &sandbox,
        &["run", "write", "--disallowed-tools", "mcp__fs__write_*"],
    )
    .await;
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(!target.exists());
}

#[tokio::test]
async fn a_user_prompt_submit_hook_can_block_the_prompt() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(&mock, "");
    let blocker = script(
        &sandbox,
        "prompt.sh",
        "grep -q secret && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0",
    );
    let text = std::fs::read_to_string(sandbox.user_file()).unwrap();
    sandbox.write(
        &sandbox.user_file(),
        &format!("{text}{}", hook("UserPromptSubmit", &blocker, "")),
    );
    let outcome = run(&sandbox, &["run", "tell me the secret"]).await;
    assert_eq!(outcome.code, 1);
    assert!(
        outcome.stderr.contains("no secrets in prompts"),
        "{}",
        outcome.stderr
    );
    assert!(
        mock.requests().is_empty(),
        "a blocked prompt never reaches the model"
    );
}
