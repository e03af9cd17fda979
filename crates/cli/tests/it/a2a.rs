//! `warden serve --a2a` driven by the official A2A JavaScript SDK (tests/a2a/driver.mjs) as
//! another agent drives it: the card, a blocking send, a stream with tool activity and MCP
//! progress, approvals answered in the task (allowed, refused words, denied), cancel, refused
//! requests (no token, rebound Host, foreign Origin, too large, malformed), and a tool result
//! that tries to talk the model into reading the user's SSH key.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use warden_mock_model::{MockModel, Turn};

use crate::support::{
    Sandbox, echo_server, everything_server, mock_model_config, output, script_key_injection,
    sent_text,
};

/// The operator's token for these tests (`WARDEN_SERVE_TOKEN`).
const TOKEN: &str = "a2a-test-token-0123456789abcdef0123456789abcdef";

/// A running `warden serve --a2a` and its base URL.
struct Served {
    _child: tokio::process::Child,
    base: String,
}

/// Writes the user config (the mock model, then `servers`) and starts
/// `warden serve --a2a 127.0.0.1:0 ARGS…` in the sandbox, with `env` added.
async fn serve_with(
    sandbox: &Sandbox,
    mock: &MockModel,
    servers: &str,
    env: &[(&str, String)],
    args: &[&str],
) -> Served {
    sandbox.user_config(&format!(
        "{}{servers}",
        mock_model_config(&mock.base_url(), "openai", None)
    ));
    let mut command = sandbox.command();
    command
        .args(["serve", "--a2a", "127.0.0.1:0"])
        .args(args)
        .env("WARDEN_SERVE_TOKEN", TOKEN)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("warden serve --a2a exited before listening");
        assert!(!line.contains(TOKEN), "the token reached stderr: {line}");
        if let Some(rest) = line.strip_prefix("warden serve: A2A agent listening on ") {
            let url = rest.split_whitespace().next().unwrap();
            break url.strip_suffix("/a2a").unwrap().to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Served {
        _child: child,
        base,
    }
}

/// Runs the driver's `scenario` against the server; what it saw.
async fn drive(driver: &Path, served: &Served, scenario: &str) -> Value {
    let mut command = Command::new("node");
    command
        .arg(driver)
        .arg(scenario)
        .env("WARDEN_A2A_URL", &served.base)
        .env("WARDEN_A2A_TOKEN", TOKEN);
    let run = tokio::task::spawn_blocking(move || output(&mut command))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "the driver failed:\n{}", run.stderr);
    let seen: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    assert_eq!(seen["errors"], json!([]), "{seen:#}\n{}", run.stderr);
    seen
}

/// The stream's status updates.
fn statuses(events: &Value) -> Vec<&Value> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event.get("statusUpdate"))
        .collect()
}

/// The states a stream's task and status events went through, in order, without repeats.
fn states(events: &Value) -> Vec<String> {
    let mut states: Vec<String> = Vec::new();
    for event in events.as_array().unwrap() {
        let Some(state) = event
            .pointer("/task/status/state")
            .or_else(|| event.pointer("/statusUpdate/status/state"))
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            continue;
        };
        if states.last() != Some(&state) {
            states.push(state);
        }
    }
    states
}

/// The `warden/tool` updates of one call.
fn tool_updates<'a>(events: &'a Value, call: &str) -> Vec<&'a Value> {
    statuses(events)
        .into_iter()
        .filter_map(|update| update.pointer("/metadata/warden~1tool"))
        .filter(|tool| tool["toolCallId"] == call)
        .collect()
}

/// The text of a task's artifacts.
fn artifact_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|artifact| artifact["parts"].as_array().unwrap())
        .filter_map(|part| part["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The audit records of calls an A2A client's tasks made.
fn a2a_records(sandbox: &Sandbox) -> Vec<Value> {
    sandbox
        .audit()
        .into_iter()
        .filter(|record| record["source"] == "a2a")
        .collect()
}

/// The model's turns of the tour after its greeting: a long operation with progress, then a
/// write and a command the person is asked about (the first allowed, the second denied).
fn script_tour(mock: &MockModel) {
    mock.push_turn(Turn::tool_call(
        "call_long",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 2, "steps": 4}),
    ));
    mock.push_turn(Turn::text("The long operation is done."));
    mock.push_turn(Turn::tool_call(
        "call_write",
        "write_file",
        json!({"path": "notes.txt", "content": "tidy"}),
    ));
    mock.push_turn(Turn::text("Wrote the note."));
    mock.push_turn(Turn::tool_call(
        "call_bash",
        "bash",
        json!({"command": "touch denied.txt"}),
    ));
    mock.push_turn(Turn::text("Understood, I did not run it."));
}

#[tokio::test]
async fn an_agent_sends_streams_and_answers_approvals_in_the_task() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello back."));
    script_tour(&mock);
    let sandbox = Sandbox::new();
    let served = serve_with(&sandbox, &mock, &everything_server(), &[], &[]).await;

    let seen = drive(&driver, &served, "tour").await;

    // The card: the default agent as a skill, JSON-RPC at /a2a, streaming, bearer auth.
    let card = &seen["card"];
    assert_eq!(card["name"], "warden");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a", served.base)
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    // The same endpoint serves A2A v0.3 too (the v0.3 methods and shapes).
    assert_eq!(
        card["supportedInterfaces"][1]["url"],
        card["supportedInterfaces"][0]["url"]
    );
    assert_eq!(card["supportedInterfaces"][1]["protocolVersion"], "0.3");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][0]["id"], "default", "{card:#}");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );

    // A blocking send: the completed task with the answer as an artifact.
    let sent = &seen["sent"];
    assert_eq!(sent["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    assert_eq!(artifact_text(sent), "Hello back.");

    // The stream: submitted, working, completed; the tool's start and end and its MCP progress
    // in the status updates' metadata; the answer as an artifact update.
    let streamed = &seen["streamed"];
    assert_eq!(
        states(streamed),
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ],
        "{streamed:#}"
    );
    let long = tool_updates(streamed, "call_long");
    assert_eq!(long.first().unwrap()["status"], "running", "{long:#?}");
    assert_eq!(
        long.first().unwrap()["name"],
        "mcp__everything__trigger-long-running-operation"
    );
    let finished = long.last().unwrap();
    assert_eq!(finished["status"], "completed", "{finished:#}");
    assert!(
        finished["result"]
            .as_str()
            .unwrap()
            .contains("Long running operation completed"),
        "{finished:#}"
    );
    let progress: Vec<&Value> = statuses(streamed)
        .into_iter()
        .filter_map(|update| update.pointer("/metadata/warden~1progress"))
        .collect();
    assert!(!progress.is_empty(), "{streamed:#}");
    assert!(
        progress
            .iter()
            .all(|update| update["toolCallId"] == "call_long" && update["total"] == 4.0),
        "{progress:#?}"
    );
    let artifact = streamed
        .as_array()
        .unwrap()
        .iter()
        .find_map(|event| event.get("artifactUpdate"))
        .unwrap();
    assert_eq!(
        artifact["artifact"]["parts"][0]["text"],
        "The long operation is done."
    );

    // The write: the stream stops at input-required with the question naming the call and the
    // answers; the next message in the task allows it and the task completes.
    let asked = &seen["asked"];
    assert_eq!(
        states(asked).last().unwrap(),
        "TASK_STATE_INPUT_REQUIRED",
        "{asked:#}"
    );
    let question = *statuses(asked).last().unwrap();
    let approval = &question["metadata"]["warden/approval"];
    assert_eq!(approval["tool"], "write_file", "{question:#}");
    assert_eq!(approval["arguments"]["path"], "notes.txt");
    assert_eq!(
        approval["answers"],
        json!(["allow", "allow always", "deny"])
    );
    let words = question["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        words.contains("write_file") && words.contains("`allow`"),
        "{words}"
    );
    assert_eq!(
        states(&seen["allowed"]),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        "{:#}",
        seen["allowed"]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("notes.txt")).unwrap(),
        "tidy"
    );
    let write_task = &seen["writeTask"];
    assert_eq!(write_task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(artifact_text(write_task), "Wrote the note.");
    // The history: the request, the question, the answer.
    let history: Vec<(&str, &str)> = write_task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap(),
                message["parts"][0]["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history[0], ("ROLE_USER", "Write a note."));
    assert_eq!(history[2], ("ROLE_USER", "allow"));

    // The command: words that are no answer are refused and the task still waits; then denied.
    assert_eq!(seen["badAnswer"]["code"], -32602, "{seen:#}");
    assert!(
        seen["badAnswer"]["message"]
            .as_str()
            .unwrap()
            .contains("`allow`, `allow always` or `deny`"),
        "{seen:#}"
    );
    assert_eq!(
        seen["stillWaiting"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let denied = &seen["denied"];
    assert_eq!(
        denied["status"]["state"], "TASK_STATE_COMPLETED",
        "{denied:#}"
    );
    assert_eq!(artifact_text(denied), "Understood, I did not run it.");
    assert!(!sandbox.work().join("denied.txt").exists());
    let told = mock.requests()[6].body.to_string();
    assert!(told.contains("not today"), "{told}");
    // A finished task takes no more answers.
    assert_eq!(seen["answerAgain"]["code"], -32004, "{seen:#}");
    // A profile that does not exist.
    assert_eq!(seen["unknownAgent"]["code"], -32602, "{seen:#}");
    assert!(
        seen["unknownAgent"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-agent"),
        "{seen:#}"
    );

    // Every call went through the gate as source a2a with the token's identity, the answers
    // recorded as the decisions.
    let records = a2a_records(&sandbox);
    let record = |tool: &str| {
        records
            .iter()
            .find(|record| record["public_name"] == tool)
            .unwrap_or_else(|| panic!("no a2a record of {tool}: {records:#?}"))
    };
    assert_eq!(record("write_file")["decision"], "allowed");
    assert_eq!(record("bash")["decision"], "denied");
    assert_eq!(
        record("mcp__everything__trigger-long-running-operation")["decision"],
        "allowed"
    );
    let caller = record("write_file")["caller"].as_str().unwrap();
    assert!(
        caller.starts_with("a2a token=sha256:") && caller.contains(" context="),
        "{caller}"
    );
    assert!(!caller.contains(TOKEN), "{caller}");
}

#[tokio::test]
async fn cancel_stops_the_running_tool_and_the_context_takes_the_next_message() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_long",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 60, "steps": 60}),
    ));
    mock.push_turn(Turn::text("Still here."));
    let sandbox = Sandbox::new();
    let served = serve_with(&sandbox, &mock, &everything_server(), &[], &[]).await;

    let seen = drive(&driver, &served, "cancel").await;

    assert_eq!(
        seen["cancelled"]["status"]["state"], "TASK_STATE_CANCELED",
        "{seen:#}"
    );
    let streamed = &seen["streamed"];
    assert_eq!(
        states(streamed).last().unwrap(),
        "TASK_STATE_CANCELED",
        "{streamed:#}"
    );
    let long = tool_updates(streamed, "call_long");
    let end = long.last().unwrap();
    assert_eq!(end["status"], "canceled", "{long:#?}");
    assert!(
        !end["result"].as_str().unwrap().contains("completed"),
        "{end:#}"
    );
    assert_eq!(
        seen["afterCancel"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(seen["cancelAgain"]["code"], -32002, "{seen:#}");
    // The conversation goes on in the same context; the model heard of the cancelled call.
    assert_eq!(seen["next"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(artifact_text(&seen["next"]), "Still here.");
    assert_eq!(seen["next"]["contextId"], seen["cancelled"]["contextId"]);
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn bad_requests_and_contexts_beyond_the_cap_are_refused_and_the_server_keeps_serving() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Still serving."));
    mock.push_turn(Turn::text("Same context."));
    let sandbox = Sandbox::new();
    // One context at most: a second one is refused, the first goes on.
    let served = serve_with(&sandbox, &mock, "", &[], &["--max-sessions", "1"]).await;

    let seen = drive(&driver, &served, "refusals").await;

    assert_eq!(seen["noToken"]["status"], 401, "{seen:#}");
    assert_eq!(seen["wrongToken"]["status"], 401);
    // DNS rebinding: a Host that is not this server's, on the card too; a foreign page.
    assert_eq!(seen["reboundHost"]["status"], 403, "{seen:#}");
    assert_eq!(seen["reboundCard"]["status"], 403);
    assert_eq!(seen["foreignOrigin"]["status"], 403);
    assert_eq!(seen["tooLarge"]["status"], 413);
    assert_eq!(
        seen["malformed"]["json"]["error"]["code"], -32700,
        "{seen:#}"
    );
    assert_eq!(seen["notJsonRpc"]["json"]["error"]["code"], -32600);
    assert_eq!(seen["unknownMethod"]["json"]["error"]["code"], -32601);
    assert_eq!(seen["unknownMethod"]["json"]["id"], 7);
    assert_eq!(seen["noMessage"]["json"]["error"]["code"], -32602);
    assert_eq!(seen["unknownTask"]["code"], -32001, "{seen:#}");
    assert_eq!(seen["unknownTask"]["name"], "TaskNotFoundError");
    assert_eq!(seen["after"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(artifact_text(&seen["after"]), "Still serving.");
    assert_eq!(seen["crowded"]["code"], -32004, "{seen:#}");
    assert!(
        seen["crowded"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions"),
        "{seen:#}"
    );
    assert_eq!(artifact_text(&seen["sameContext"]), "Same context.");
}

#[tokio::test]
async fn an_idle_context_is_closed_to_make_room_for_a_new_one() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("One."));
    mock.push_turn(Turn::text("Two."));
    let sandbox = Sandbox::new();
    let served = serve_with(
        &sandbox,
        &mock,
        "",
        &[],
        &["--max-sessions", "1", "--session-idle-timeout", "1"],
    )
    .await;

    let seen = drive(&driver, &served, "idle").await;

    assert_eq!(artifact_text(&seen["first"]), "One.");
    assert_eq!(artifact_text(&seen["second"]), "Two.", "{seen:#}");
    assert_ne!(seen["second"]["contextId"], seen["first"]["contextId"]);
    // The closed context's tasks are still there to read.
    assert_eq!(seen["firstTask"]["status"]["state"], "TASK_STATE_COMPLETED");
    // The new context is a conversation of its own.
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(!last.contains("First."), "{last}");
}

#[tokio::test]
async fn a_tool_result_that_asks_for_the_ssh_key_is_still_refused_by_the_gate() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_client());
    const KEY: &str = "PRIVATE-KEY-heron-5512";
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await.unwrap();
    // The server's result carries the injection; the (scripted) model obeys it.
    let home = script_key_injection(&sandbox, &mock, KEY);
    let served = serve_with(
        &sandbox,
        &mock,
        &echo_server("fx", ""),
        &[("HOME", home.display().to_string())],
        &[],
    )
    .await;

    // The client allows whatever it is asked: the gate must refuse on its own.
    let seen = drive(&driver, &served, "hostile").await;

    assert_eq!(
        seen["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{seen:#}"
    );
    let events = &seen["events"];
    let key_read = tool_updates(events, "call_key");
    let key_read = key_read.last().unwrap();
    assert_eq!(key_read["status"], "failed", "{key_read:#}");
    assert_eq!(key_read["decision"], "denied", "{key_read:#}");
    // The protected path is refused before anyone is asked.
    let asked: Vec<&str> = statuses(events)
        .into_iter()
        .filter_map(|update| update.pointer("/metadata/warden~1approval/tool"))
        .filter_map(Value::as_str)
        .collect();
    assert!(!asked.contains(&"read_file"), "{asked:?}");
    assert!(!asked.contains(&"grep"), "{asked:?}");
    let grep = tool_updates(events, "call_grep");
    assert_eq!(grep.last().unwrap()["status"], "failed", "{grep:#?}");
    // The key reached neither the A2A client nor the model.
    assert!(!seen.to_string().contains(KEY), "{seen:#}");
    assert!(!sent_text(&mock).contains(KEY));
    let records = a2a_records(&sandbox);
    assert!(
        records
            .iter()
            .any(|record| record["public_name"] == "read_file" && record["decision"] == "denied"),
        "{records:#?}"
    );
}

/// The states a v0.3 stream's task and status events went through, in order, without repeats.
fn v03_states(events: &Value) -> Vec<String> {
    let mut states: Vec<String> = Vec::new();
    for event in events.as_array().unwrap() {
        let Some(state) = event
            .pointer("/status/state")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            continue;
        };
        if states.last() != Some(&state) {
            states.push(state);
        }
    }
    states
}

/// A v0.3 stream's status updates.
fn v03_statuses(events: &Value) -> Vec<&Value> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["kind"] == "status-update")
        .collect()
}

/// The text of a v0.3 task's artifacts.
fn v03_artifact_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|artifact| artifact["parts"].as_array().unwrap())
        .filter(|part| part["kind"] == "text")
        .filter_map(|part| part["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_v03_agent_sends_streams_and_answers_approvals_in_the_task() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_v03_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello back."));
    mock.push_turn(Turn::tool_call(
        "call_plan",
        "update_plan",
        json!({"entries": [{"content": "Run it", "priority": "high", "status": "in_progress"}]}),
    ));
    script_tour(&mock);
    let sandbox = Sandbox::new();
    let served = serve_with(&sandbox, &mock, &everything_server(), &[], &[]).await;

    let seen = drive(&driver, &served, "tour").await;

    // The card in v0.3's shape (the SDK sends no A2A-Version): the endpoint, the transport,
    // the protocol version, the bearer scheme as v0.3 spells it; the v1.0 interfaces alongside.
    let card = &seen["card"];
    assert_eq!(card["protocolVersion"], "0.3.0", "{card:#}");
    assert_eq!(card["url"], format!("{}/a2a", served.base));
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["securitySchemes"]["bearer"]["type"], "http");
    assert_eq!(card["security"], json!([{"bearer": []}]));
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|interface| interface["protocolVersion"].as_str())
        .collect();
    assert_eq!(versions, ["1.0", "0.3"]);
    assert_eq!(card["skills"][0]["id"], "default");

    // A blocking send: the completed task, kinds and kebab-case states.
    let sent = &seen["sent"];
    assert_eq!(sent["kind"], "task", "{sent:#}");
    assert_eq!(sent["status"]["state"], "completed");
    assert_eq!(v03_artifact_text(sent), "Hello back.");
    assert_eq!(sent["history"][0]["kind"], "message");
    assert_eq!(sent["history"][0]["role"], "user");
    assert_eq!(
        sent["history"][0]["parts"][0],
        json!({"kind": "text", "text": "Say hello."})
    );

    // The stream: task, status updates with the tool's start, progress and end, the answer.
    let streamed = &seen["streamed"];
    assert_eq!(streamed[0]["kind"], "task", "{streamed:#}");
    assert_eq!(
        v03_states(streamed),
        ["submitted", "working", "completed"],
        "{streamed:#}"
    );
    let updates = v03_statuses(streamed);
    let tool: Vec<&Value> = updates
        .iter()
        .filter_map(|update| update.pointer("/metadata/warden~1tool"))
        .collect();
    assert_eq!(tool.first().unwrap()["status"], "running", "{tool:#?}");
    assert_eq!(tool.last().unwrap()["status"], "completed", "{tool:#?}");
    // The model's plan, in the status metadata once the gate let it through.
    let plans: Vec<&Value> = updates
        .iter()
        .filter_map(|update| update.pointer("/metadata/warden~1plan/entries"))
        .collect();
    assert_eq!(
        plans,
        [&json!([{"content": "Run it", "priority": "high", "status": "in_progress"}])],
        "{streamed:#}"
    );
    assert!(
        updates.iter().any(|update| update
            .pointer("/metadata/warden~1progress/total")
            .and_then(Value::as_f64)
            == Some(4.0)),
        "{streamed:#}"
    );
    // Only the last status update is final.
    let finals: Vec<bool> = updates
        .iter()
        .map(|update| update["final"].as_bool().unwrap())
        .collect();
    assert_eq!(finals.iter().filter(|last| **last).count(), 1, "{finals:?}");
    assert!(finals.last().unwrap());
    let artifact = streamed
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["kind"] == "artifact-update")
        .unwrap();
    assert_eq!(
        artifact["artifact"]["parts"][0],
        json!({"kind": "text", "text": "The long operation is done."})
    );

    // The write: input-required (final) with the question; allowed by the next message.
    let asked = &seen["asked"];
    assert_eq!(
        v03_states(asked).last().unwrap(),
        "input-required",
        "{asked:#}"
    );
    let question = *v03_statuses(asked).last().unwrap();
    assert_eq!(question["final"], true);
    assert_eq!(
        question["metadata"]["warden/approval"]["tool"],
        "write_file"
    );
    assert_eq!(question["status"]["message"]["role"], "agent");
    assert_eq!(question["status"]["message"]["parts"][0]["kind"], "text");
    assert_eq!(
        v03_states(&seen["allowed"]),
        ["working", "completed"],
        "{:#}",
        seen["allowed"]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("notes.txt")).unwrap(),
        "tidy"
    );
    let write_task = &seen["writeTask"];
    assert_eq!(write_task["kind"], "task");
    assert_eq!(write_task["status"]["state"], "completed");
    let roles: Vec<&str> = write_task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "agent", "user"]);

    // The command: words that are no answer are refused; then denied with a reason.
    assert_eq!(seen["badAnswer"]["code"], -32602, "{seen:#}");
    let denied = &seen["denied"];
    assert_eq!(denied["status"]["state"], "completed", "{denied:#}");
    assert_eq!(v03_artifact_text(denied), "Understood, I did not run it.");
    assert!(!sandbox.work().join("denied.txt").exists());
    assert!(mock.requests()[7].body.to_string().contains("not today"));
    assert_eq!(seen["unknownTask"]["code"], -32001, "{seen:#}");

    // The same gate: source a2a, the token's identity, the answers as decisions.
    let records = a2a_records(&sandbox);
    let decision = |tool: &str| {
        records
            .iter()
            .find(|record| record["public_name"] == tool)
            .map(|record| record["decision"].clone())
    };
    assert_eq!(decision("write_file"), Some(json!("allowed")));
    assert_eq!(decision("bash"), Some(json!("denied")));
}

#[tokio::test]
async fn a_v03_agent_cancels_a_running_tool() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_v03_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_long",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 60, "steps": 60}),
    ));
    mock.push_turn(Turn::text("Still here."));
    let sandbox = Sandbox::new();
    let served = serve_with(&sandbox, &mock, &everything_server(), &[], &[]).await;

    let seen = drive(&driver, &served, "cancel").await;

    assert_eq!(seen["cancelled"]["kind"], "task", "{seen:#}");
    assert_eq!(seen["cancelled"]["status"]["state"], "canceled");
    let streamed = &seen["streamed"];
    assert_eq!(
        v03_states(streamed).last().unwrap(),
        "canceled",
        "{streamed:#}"
    );
    let end = v03_statuses(streamed)
        .into_iter()
        .filter_map(|update| update.pointer("/metadata/warden~1tool"))
        .next_back()
        .unwrap();
    assert_eq!(end["status"], "canceled", "{end:#}");
    assert_eq!(seen["afterCancel"]["status"]["state"], "canceled");
    assert_eq!(seen["cancelAgain"]["code"], -32002, "{seen:#}");
    assert_eq!(seen["next"]["status"]["state"], "completed");
    assert_eq!(v03_artifact_text(&seen["next"]), "Still here.");
    assert_eq!(seen["next"]["contextId"], seen["cancelled"]["contextId"]);
}

#[tokio::test]
async fn v03_requests_without_the_token_or_from_a_rebound_host_are_refused() {
    let driver = warden_testkit::require_or_skip!(warden_testkit::a2a_v03_client());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Still serving."));
    let sandbox = Sandbox::new();
    let served = serve_with(&sandbox, &mock, "", &[], &[]).await;

    let seen = drive(&driver, &served, "refusals").await;

    assert_eq!(seen["noToken"]["status"], 401, "{seen:#}");
    assert_eq!(seen["wrongToken"]["status"], 401);
    assert_eq!(seen["reboundHost"]["status"], 403);
    assert_eq!(seen["reboundCard"]["status"], 403);
    assert_eq!(seen["foreignOrigin"]["status"], 403);
    let bad_part = &seen["badPart"]["json"]["error"];
    assert_eq!(bad_part["code"], -32602, "{seen:#}");
    assert!(bad_part["message"].as_str().unwrap().contains("\"video\""));
    assert_eq!(seen["resubscribe"]["json"]["error"]["code"], -32004);
    assert_eq!(seen["pushConfig"]["json"]["error"]["code"], -32003);
    // None of the refused messages reached the model; the SDK's own one did.
    assert_eq!(seen["after"]["status"]["state"], "completed", "{seen:#}");
    assert_eq!(v03_artifact_text(&seen["after"]), "Still serving.");
    assert_eq!(mock.requests().len(), 1);
    assert!(!sent_text(&mock).contains("Let me in."));
}
