//! One gate for every surface: the agent, code mode and the tool CLI each make calls against the
//! same real server, and the audit trail holds exactly one record per call with the right source.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::{self, Run, Sandbox, stdio_server, toml_str};

async fn warden(sandbox: &Sandbox, args: &[&str]) -> Run {
    let mut command = sandbox.command();
    command.args(args);
    tokio::task::spawn_blocking(move || support::output(&mut command))
        .await
        .unwrap()
}

#[tokio::test]
async fn agent_code_mode_and_tool_cli_each_leave_one_record_per_call() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    let ledger = sandbox.root.join("ledger.txt");
    sandbox.user_config(&format!(
        "model = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"m\"\nbase_url = {}\n{}env = {{ FIXTURE_LEDGER = {} }}\n",
        toml_str(&mock.base_url()),
        stdio_server("fx", &fixture_binary(), &["echo"]),
        toml_str(&ledger.display().to_string())
    ));

    // The agent: one direct call, then a script that makes a read-only call and tries a write.
    let script = r#"
        const echoed = await tools.call("fx", "echo", {text: "from code"});
        let refused = "";
        try { await tools.call("fx", "write_note", {text: "never"}); }
        catch (e) { refused = String(e.message); }
        return {echoed, refused};
    "#;
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fx__echo",
        json!({"text": "direct"}),
    ));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "code_execute",
        json!({"code": script}),
    ));
    mock.push_turn(Turn::text("done"));
    let run = warden(&sandbox, &["run", "go", "--output-format", "json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let script_result = summary["tool_calls"][1]["result"]["text"].as_str().unwrap();
    assert!(script_result.contains("from code"), "{script_result}");
    assert!(script_result.contains("read-only"), "{script_result}");
    // The prompt told the model what each facility is for.
    assert!(
        mock.requests()[0]
            .body
            .to_string()
            .contains("execution_routing")
    );

    // The tool CLI.
    let cli = warden(&sandbox, &["tool", "fx", "echo", r#"{"text":"cli"}"#]).await;
    assert_eq!(cli.code, 0, "{}", cli.stderr);

    // Code mode from the command line.
    let code = warden(
        &sandbox,
        &[
            "code",
            "-e",
            r#"(await tools.call("fx", "add", {a: 1, b: 2})).sum"#,
        ],
    )
    .await;
    assert_eq!(code.code, 0, "{}", code.stderr);
    assert_eq!(code.stdout.trim(), "3");

    let records = sandbox.audit();
    let rows: Vec<(String, String, String)> = records
        .iter()
        .map(|record| {
            (
                record["source"].as_str().unwrap().to_owned(),
                record["public_name"].as_str().unwrap().to_owned(),
                record["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Records are in the order the calls started: the script's own record comes before the
    // calls it made.
    let expected = [
        ("agent", "mcp__fx__echo", "allowed"),
        ("agent", "code_execute", "allowed"),
        ("code-mode", "mcp__fx__echo", "allowed"),
        ("code-mode", "mcp__fx__write_note", "denied"),
        ("tool-cli", "mcp__fx__echo", "allowed"),
        ("code-mode", "mcp__fx__add", "allowed"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(rows, expected);
    // The refused write never reached the server.
    let ledger = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!ledger.contains("write_note"), "{ledger}");
}

/// A call whose arguments are not JSON still crosses the gate: on record as denied (no tool
/// takes raw text), the model told to send a JSON object, the server never reached.
#[tokio::test]
async fn a_call_with_arguments_that_are_not_json_is_on_record() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    let ledger = sandbox.root.join("ledger.txt");
    sandbox.user_config(&format!(
        "model = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"m\"\nbase_url = {}\n{}env = {{ FIXTURE_LEDGER = {} }}\n",
        toml_str(&mock.base_url()),
        stdio_server("fx", &fixture_binary(), &["echo"]),
        toml_str(&ledger.display().to_string())
    ));
    let mut turn = Turn::default();
    turn.tool_calls.push(warden_mock_model::ScriptedToolCall {
        id: "bad".into(),
        name: "mcp__fx__write_note".into(),
        arguments: "{\"text\": \"half".into(),
    });
    mock.push_turn(turn);
    mock.push_turn(Turn::text("sorry"));
    let run = warden(&sandbox, &["run", "go", "--output-format", "json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("not valid JSON"),
        "the model is told what was wrong"
    );
    let records = sandbox.audit();
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["public_name"], "mcp__fx__write_note");
    assert_eq!(records[0]["decision"], "denied");
    assert_eq!(records[0]["layer"], "validation");
    assert!(
        !std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("half")
    );
}
