//! `warden tool` and `warden mcp list --probe` through the real binary against real MCP servers:
//! browsing, calls through the gate, denials that never reach the server, and failure reports.

use std::path::Path;

use warden_testkit::{fixture_binary, require_npm_server};

use crate::support::{self, Sandbox, stdio_server};

fn node() -> &'static Path {
    Path::new("node")
}

/// A sandbox whose user config runs server-everything (stdio) as `everything`.
fn with_everything() -> Sandbox {
    let sandbox = Sandbox::new();
    let server = require_npm_server("everything");
    sandbox.user_config(&stdio_server(
        "everything",
        node(),
        &[server.to_str().unwrap()],
    ));
    sandbox
}

#[test]
fn lists_servers_without_starting_them() {
    let sandbox = Sandbox::new();
    let marker = sandbox.root.join("started");
    sandbox.user_config(&stdio_server(
        "lazy",
        Path::new("sh"),
        &["-c", &format!("touch {}; sleep 30", marker.display())],
    ));
    let listing = sandbox.ok(&["tool"]);
    assert!(listing.contains("lazy"), "{listing}");
    let json = sandbox.json(&["tool", "--json"]);
    assert_eq!(json[0]["name"], "lazy");
    assert_eq!(json[0]["state"], "not connected");
    assert!(!marker.exists(), "listing servers must not spawn them");
}

#[test]
fn browses_and_calls_server_everything_through_the_gate() {
    let sandbox = with_everything();
    let tools = sandbox.json(&["tool", "everything", "--json"]);
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "echo")
        .expect("server-everything publishes echo");
    assert_eq!(echo["public_name"], "mcp__everything__echo");

    let schema = sandbox.json(&["tool", "everything", "echo", "--json"]);
    assert_eq!(schema["input_schema"]["required"][0], "message");

    let answer = sandbox.ok(&[
        "tool",
        "everything",
        "echo",
        r#"{"message":"hello warden"}"#,
    ]);
    assert_eq!(answer.trim(), "Echo: hello warden");

    let records = sandbox.audit();
    assert_eq!(records.len(), 1, "one audit record per call: {records:?}");
    assert_eq!(records[0]["source"], "tool-cli");
    assert_eq!(records[0]["decision"], "allowed");
    assert_eq!(records[0]["server"], "everything");
    assert_eq!(records[0]["tool"], "echo");
    assert_eq!(records[0]["public_name"], "mcp__everything__echo");
}

#[test]
fn arguments_are_validated_before_the_server_sees_them() {
    let sandbox = with_everything();
    let run = sandbox.run(&["tool", "everything", "echo", r#"{"message": 42}"#]);
    assert_eq!(run.code, 2, "arguments that do not fit: {}", run.stdout);
    assert!(run.stderr.contains("denied"), "{}", run.stderr);
    let records = sandbox.audit();
    assert_eq!(records[0]["layer"], "validation");
}

#[test]
fn an_unknown_tool_is_refused_and_audited_without_a_call() {
    let sandbox = with_everything();
    let run = sandbox.run(&["tool", "everything", "no-such-tool", "{}"]);
    assert_eq!(run.code, 2, "an unknown name is bad usage");
    assert!(run.stderr.contains("unknown tool"), "{}", run.stderr);
    let records = sandbox.audit();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["decision"], "denied");
    assert_eq!(records[0]["layer"], "resolve");
}

/// A write tool needs approval; with nobody to ask it is denied and the server never sees it.
#[test]
fn a_write_tool_is_denied_headless_and_allowed_by_flag() {
    let sandbox = Sandbox::new();
    let ledger = sandbox.root.join("ledger.txt");
    let fixture = fixture_binary();
    sandbox.user_config(&format!(
        "{}env = {{ FIXTURE_LEDGER = {} }}\n",
        stdio_server("fixture", &fixture, &["echo"]),
        support::toml_str(&ledger.display().to_string())
    ));
    let denied = sandbox.run(&["tool", "fixture", "write_note", r#"{"text":"first"}"#]);
    assert_eq!(denied.code, 1);
    assert!(
        denied.stderr.contains("denied (approval)"),
        "{}",
        denied.stderr
    );
    assert!(
        !ledger.exists(),
        "a denied call must never reach the server"
    );

    sandbox.ok(&[
        "tool",
        "fixture",
        "write_note",
        r#"{"text":"second"}"#,
        "--allowed-tools",
        "mcp__fixture__write_*",
    ]);
    let written = std::fs::read_to_string(&ledger).unwrap();
    assert!(
        written.contains("second") && !written.contains("first"),
        "{written}"
    );

    let decisions: Vec<_> = sandbox
        .audit()
        .iter()
        .map(|record| record["decision"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(decisions, ["denied", "allowed"]);
}

#[test]
fn read_only_mode_hides_write_tools() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("fixture", &fixture_binary(), &["echo"]));
    let tools = sandbox.json(&[
        "tool",
        "fixture",
        "--json",
        "--permission-mode",
        "read-only",
    ]);
    let names: Vec<_> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"write_note".to_owned()), "{names:?}");
}

#[test]
fn probe_reports_each_server_state_and_failure_in_one_line() {
    let sandbox = Sandbox::new();
    let server = require_npm_server("everything");
    sandbox.user_config(&format!(
        "{}{}{}",
        stdio_server("everything", node(), &[server.to_str().unwrap()]),
        stdio_server(
            "db",
            Path::new("sh"),
            &[
                "-c",
                "echo 'RuntimeError: database connection lost' >&2; exit 3"
            ]
        ),
        stdio_server("ghost", Path::new("warden-test-no-such-command"), &[]),
    ));
    let run = sandbox.run(&["mcp", "list", "--probe", "--json"]);
    assert_eq!(run.code, 1, "a failed server makes the probe exit 1");
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let row = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == name)
            .unwrap()
            .clone()
    };
    let everything = row("everything");
    assert_eq!(everything["state"], "connected");
    assert!(everything["tools"].as_u64().unwrap() > 5);
    assert!(everything["protocol"].as_str().unwrap().starts_with("20"));

    let db = row("db");
    assert_eq!(db["state"], "failed");
    let failure = db["failure"].as_str().unwrap();
    assert!(failure.starts_with("MCP db: "), "{failure}");
    assert!(failure.contains("database connection lost"), "{failure}");
    assert!(!failure.contains('\n'));

    let ghost = row("ghost").clone();
    let failure = ghost["failure"].as_str().unwrap();
    assert!(failure.contains("command not found"), "{failure}");

    let table = sandbox.run(&["mcp", "list", "--probe"]);
    assert!(
        table.stderr.contains("stderr| RuntimeError"),
        "{}",
        table.stderr
    );
}

#[test]
fn untrusted_project_servers_stay_idle() {
    let sandbox = Sandbox::new();
    let marker = sandbox.root.join("started");
    sandbox.write(
        &sandbox.project_file(),
        &format!(
            "schema_version = 1\n{}",
            stdio_server("proj", Path::new("touch"), &[marker.to_str().unwrap()])
        ),
    );
    let run = sandbox.run(&["tool", "proj"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("warden mcp trust proj"),
        "{}",
        run.stderr
    );
    assert!(
        !marker.exists(),
        "an untrusted project server must not start"
    );
}

#[test]
fn context_counts_the_manifest_and_search_finds_deferred_tools() {
    let sandbox = Sandbox::new();
    let everything = require_npm_server("everything");
    let fs = require_npm_server("filesystem");
    sandbox.user_config(&format!(
        "{}{}defer = \"Files of the workspace\"\n",
        stdio_server("everything", node(), &[everything.to_str().unwrap()]),
        stdio_server(
            "fs",
            node(),
            &[fs.to_str().unwrap(), sandbox.work().to_str().unwrap()]
        ),
    ));
    let report = sandbox.json(&["context", "--json"]);
    let servers = report["servers"].as_array().unwrap();
    let fs_row = servers.iter().find(|row| row["name"] == "fs").unwrap();
    let everything_row = servers
        .iter()
        .find(|row| row["name"] == "everything")
        .unwrap();
    assert_eq!(fs_row["deferred"], true);
    assert_eq!(everything_row["deferred"], false);
    let total = report["total_tokens"].as_u64().unwrap();
    let all = report["all_loaded_tokens"].as_u64().unwrap();
    assert!(total < all, "deferring fs saves tokens: {total} vs {all}");
    assert!(fs_row["tokens"].as_u64().unwrap() < everything_row["tokens"].as_u64().unwrap());

    let hits = sandbox.json(&["tool", "search", "write a file", "--limit", "3", "--json"]);
    let names: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["public_name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__fs__write_file"), "{names:?}");
    assert!(names.len() <= 3);
}

#[test]
fn an_empty_allow_list_lets_every_tool_through_and_the_deny_list_still_wins() {
    let sandbox = Sandbox::new();
    let server = stdio_server("fixture", &fixture_binary(), &["echo"]);
    let names = |sandbox: &Sandbox| -> Vec<String> {
        sandbox
            .json(&["tool", "fixture", "--json"])
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    };
    sandbox.user_config(&server);
    let every = names(&sandbox);
    assert!(every.contains(&"echo".to_owned()), "{every:?}");

    // `allow = []` is no allow list at all: nothing is filtered out.
    sandbox.user_config(&format!("{server}tools = {{ allow = [] }}\n"));
    assert_eq!(names(&sandbox), every);

    sandbox.user_config(&format!(
        "{server}tools = {{ allow = [], deny = [\"echo\"] }}\n"
    ));
    let filtered = names(&sandbox);
    assert!(!filtered.contains(&"echo".to_owned()), "{filtered:?}");
    assert_eq!(filtered.len(), every.len() - 1, "{filtered:?}");
}
