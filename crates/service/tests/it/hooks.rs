//! The operator's lifecycle hooks on service runs: every event `warden run` fires, with the tenant and the caller in the hook's input; a blocking PreToolUse hook's reason reaches the model as the call's result, a blocking UserPromptSubmit hook's reaches the API caller as an event and keeps the prompt from the model.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, config, kinds};

/// An executable `#!/bin/sh` script named `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `[[hooks.EVENT]]` running `command` (for tools matching `matcher`, if given).
fn hook(event: &str, command: &Path, matcher: Option<&str>) -> String {
    let matcher = matcher.map_or_else(String::new, |glob| format!("matcher = {glob:?}\n"));
    format!(
        "[[hooks.{event}]]\ncommand = {:?}\n{matcher}",
        command.display().to_string()
    )
}

/// Each JSON object the logging hook wrote, in order.
fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

const EVERY_EVENT: [&str; 6] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lifecycle_hook_runs_for_a_service_run_and_a_blocking_tool_hook_answers_the_model() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "list_dir", json!({"path": "."})));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "write_file",
        json!({"path": "note.txt", "content": "hi\n"}),
    ));
    mock.push_turn(Turn::text("Listed, not written."));
    let scripts = tempfile::tempdir().unwrap();
    let log = scripts.path().join("hooks.log");
    let logger = script(
        scripts.path(),
        "log-input",
        &format!("cat >> '{0}'\necho >> '{0}'", log.display()),
    );
    let blocker = script(
        scripts.path(),
        "no-writes",
        "echo 'writes are closed today' >&2\nexit 2",
    );
    let mut hooks: String = EVERY_EVENT
        .iter()
        .map(|event| hook(event, &logger, None))
        .collect();
    hooks.push_str(&hook("PreToolUse", &blocker, Some("write_file")));
    let service = Service::start(&config(&mock, &hooks)).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let id = service.new_session(&acme).await;

    service.say(&acme, &id, "List, then write a note.").await;
    let finished = service.wait_for_event(&acme, &id, "run_finished").await;

    assert_eq!(finished["final_text"], "Listed, not written.");
    let inputs = logged(&log);
    let events: Vec<&str> = inputs
        .iter()
        .map(|input| input["event"].as_str().unwrap())
        .collect();
    // The blocked write never ran: it has a PreToolUse and no PostToolUse.
    assert_eq!(
        events,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PreToolUse",
            "Stop",
            "SessionEnd"
        ]
    );
    for input in &inputs {
        assert_eq!(input["session_id"], id.as_str(), "{input}");
        assert_eq!(input["tenant"], "acme", "{input}");
        assert_eq!(input["caller"], "web-app", "{input}");
    }
    assert_eq!(inputs[1]["prompt"], "List, then write a note.");
    assert_eq!(inputs[4]["public_name"], "write_file");
    // The hook's reason is the model's result for the call, and the caller's event says so.
    let request = mock.requests()[2].body.to_string();
    assert!(request.contains("writes are closed today"), "{request}");
    let events = service.events(&acme, &id).await;
    let write = events
        .iter()
        .find(|event| event["type"] == "tool_call_finished" && event["name"] == "write_file")
        .unwrap();
    assert_eq!(write["result"]["decision"], "denied", "{write}");
    assert!(!service.room_files("acme", &id).join("note.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_prompt_reaches_the_caller_as_an_event_and_never_the_model() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello."));
    let scripts = tempfile::tempdir().unwrap();
    let guard = script(
        scripts.path(),
        "no-secrets",
        "if grep -q secret; then echo 'no secrets in prompts' >&2; exit 2; fi",
    );
    let service = Service::start(&config(&mock, &hook("UserPromptSubmit", &guard, None))).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let id = service.new_session(&acme).await;

    service.say(&acme, &id, "here is my secret: 1234").await;
    let finished = service.wait_for_event(&acme, &id, "run_finished").await;

    assert_eq!(finished["stop"], "prompt_blocked");
    let blocked = service.wait_for_event(&acme, &id, "prompt_blocked").await;
    assert_eq!(blocked["reason"], "no secrets in prompts");
    assert!(mock.requests().is_empty(), "the prompt reached the model");
    let events = service.events(&acme, &id).await;
    assert_eq!(
        kinds(&events),
        ["run_started", "prompt_blocked", "run_finished"]
    );
    // The session goes on: a prompt the hook lets through is answered.
    service.say(&acme, &id, "hello").await;
    let answered = service.wait_for_nth(&acme, &id, "run_finished", 2).await;
    assert_eq!(answered["final_text"], "Hello.");
    let sent = mock.requests()[0].body.to_string();
    assert!(
        !sent.contains("1234"),
        "the blocked prompt was kept: {sent}"
    );
}
