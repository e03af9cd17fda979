//! The audit's promise under SIGKILL: `warden serve` killed the instant a call's result reached
//! its client has that call's complete record on disk, and killed while a call runs upstream has
//! the call's intent (`started`) recorded — never a call that ran with no trace.

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::{Sandbox, echo_server, toml_str};

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn kill_hard(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The records of the killed process's trail, read by a new `warden audit`.
fn records_of(sandbox: &Sandbox, tool: &str) -> Vec<Value> {
    sandbox
        .audit()
        .into_iter()
        .filter(|record| record["public_name"] == tool)
        .collect()
}

#[tokio::test]
async fn a_serve_process_killed_right_after_a_call_returns_has_its_record_and_one_killed_mid_call_its_intent()
 {
    let sandbox = Sandbox::new();
    let ledger = sandbox.work().join("ledger.txt");
    sandbox.user_config(&echo_server(
        "fx",
        &format!(
            "env = {{ {} = {} }}\n",
            warden_testkit::fixtures::LEDGER_ENV,
            toml_str(&ledger.display().to_string())
        ),
    ));
    let serve = || {
        let mut command = tokio::process::Command::from(sandbox.command());
        command.args(["serve", "--stdio", "--expose", "passthrough"]);
        TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
            .0
    };

    // Killed the instant the result is back: the call's whole record is there.
    let transport = serve();
    let pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    let result = client
        .call_tool(call("echo", json!({"text": "kept"})))
        .await
        .unwrap();
    kill_hard(pid);
    assert_eq!(result.content[0].as_text().unwrap().text, "kept");
    let records = records_of(&sandbox, "mcp__fx__echo");
    assert_eq!(records.len(), 1, "{:?}", sandbox.audit());
    assert_eq!(records[0]["decision"], "allowed");
    assert_eq!(records[0]["source"], "gateway");
    drop(client);

    // Killed while the call runs upstream: its intent is there, saying it started.
    let transport = serve();
    let pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    let running = tokio::spawn(async move {
        let _ = client.call_tool(call("slow", json!({"ms": 600_000}))).await;
    });
    for _ in 0..1200 {
        if std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("slow start")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("slow start"),
        "the call reached the upstream"
    );
    kill_hard(pid);
    running.abort();
    let records = records_of(&sandbox, "mcp__fx__slow");
    assert_eq!(records.len(), 1, "{:?}", sandbox.audit());
    assert_eq!(records[0]["decision"], "started", "{records:?}");
}
