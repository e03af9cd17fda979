//! `warden mcp prompt` gets a prompt through the gate: printed, audited as `prompt-get`, and
//! refused by the operator's deny list like any other call.

use crate::support::{Sandbox, echo_server};

fn prompt_rows(sandbox: &Sandbox) -> Vec<serde_json::Value> {
    sandbox
        .audit()
        .into_iter()
        .filter(|row| row["kind"] == "prompt-get")
        .collect()
}

#[test]
fn a_prompt_is_printed_and_audited() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&echo_server("fx", ""));
    let listed = sandbox.ok(&["mcp", "prompt", "fx"]);
    assert!(listed.contains("greet name=… [tone=…]"), "{listed}");
    // Listing reaches no prompt: nothing is audited for it.
    assert!(prompt_rows(&sandbox).is_empty());

    let printed = sandbox.ok(&["mcp", "prompt", "fx", "greet", "name=Ada", "tone=warm"]);
    assert!(printed.starts_with("[user] "), "{printed}");
    assert!(
        printed.contains("Ada") && printed.contains("warm"),
        "{printed}"
    );

    let json = sandbox.json(&["mcp", "prompt", "fx", "greet", "name=Ada", "--json"]);
    assert_eq!(json["messages"][0]["role"], "user", "{json}");

    let rows = prompt_rows(&sandbox);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["tool"], "get_mcp_prompt");
    // The server column names the MCP server the prompt came from.
    assert_eq!(rows[0]["server"], "fx", "{rows:?}");
    assert_eq!(rows[0]["decision"], "allowed");
    assert_eq!(rows[0]["classes"], serde_json::json!(["read_only"]));
}

#[test]
fn a_missing_argument_is_named_and_the_get_is_audited_as_failed() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&echo_server("fx", ""));
    let run = sandbox.run(&["mcp", "prompt", "fx", "greet", "tone=warm"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains("needs the argument(s) name"),
        "{}",
        run.stderr
    );
    let rows = prompt_rows(&sandbox);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_ne!(rows[0]["decision"], "allowed", "{rows:?}");
}

#[test]
fn the_operator_can_deny_prompts() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[permissions]\ndeny = [\"get_mcp_prompt\"]\n\n{}",
        echo_server("fx", "")
    ));
    let run = sandbox.run(&["mcp", "prompt", "fx", "greet", "name=Ada"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(run.stderr.contains("denied"), "{}", run.stderr);
    let rows = prompt_rows(&sandbox);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["decision"], "denied", "{rows:?}");
}

#[test]
fn a_server_the_operator_denies_lists_no_prompts_and_the_refusal_is_on_record() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[permissions]\ndeny = [\"mcp__fx__*\"]\n\n{}",
        echo_server("fx", "")
    ));
    let run = sandbox.run(&["mcp", "prompt", "fx"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(!run.stdout.contains("greet"), "{}", run.stdout);
    assert!(run.stderr.contains("deny list"), "{}", run.stderr);
    let rows: Vec<_> = sandbox
        .audit()
        .into_iter()
        .filter(|row| row["tool"] == "list_mcp_prompts")
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["decision"], "denied", "{rows:?}");
    assert_eq!(rows[0]["server"], "fx", "{rows:?}");
}
