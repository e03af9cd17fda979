//! `warden audit` filters through the real binary: `--denied`, `--session`, `--since`, and the
//! table's columns.

use warden_testkit::fixture_binary;

use crate::support::{Sandbox, stdio_server};

#[test]
fn filters_by_decision_session_and_time() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("fx", &fixture_binary(), &["echo"]));
    sandbox.ok(&["tool", "fx", "echo", r#"{"text":"one"}"#]);
    let denied = sandbox.run(&["tool", "fx", "write_note", r#"{"text":"two"}"#]);
    assert_eq!(denied.code, 1);

    let all = sandbox.audit();
    assert_eq!(all.len(), 2);
    assert_ne!(
        all[0]["session_id"], all[1]["session_id"],
        "one session per command"
    );

    let only_denied: Vec<serde_json::Value> = sandbox
        .ok(&["audit", "--json", "--denied"])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(only_denied.len(), 1);
    assert_eq!(only_denied[0]["public_name"], "mcp__fx__write_note");
    // Arguments are kept as a digest, never as values, unless the operator opts in.
    assert!(!only_denied[0].to_string().contains("two"));
    assert!(only_denied[0]["arguments_digest"].as_str().unwrap().len() >= 32);

    let session = all[0]["session_id"].as_str().unwrap();
    let by_session = sandbox.ok(&["audit", "--json", "--session", session]);
    assert_eq!(by_session.lines().count(), 1);

    assert_eq!(
        sandbox
            .ok(&["audit", "--json", "--since", "1h"])
            .lines()
            .count(),
        2
    );
    let future = sandbox.ok(&["audit", "--json", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(future.lines().count(), 0);

    let table = sandbox.ok(&["audit"]);
    assert!(table.starts_with("TIME"), "{table}");
    assert!(
        table.contains("tool-cli") && table.contains("denied"),
        "{table}"
    );

    let bad = sandbox.run(&["audit", "--since", "yesterday-ish"]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("--since"), "{}", bad.stderr);
}
