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

/// `--follow` shows each call once, with its outcome: a record written when its call started
/// is held back until the call completes it.
#[tokio::test]
async fn follow_shows_a_running_call_once_it_has_ended() {
    use std::io::BufRead;
    use warden_policy::AuditSink;

    let sandbox = Sandbox::new();
    let store = warden_policy::AuditStore::open(&sandbox.state_dir().join("audit.db")).unwrap();
    let mut command = sandbox.command();
    command
        .args(["audit", "--follow", "--json"])
        .stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let record = |decision| warden_policy::AuditRecord {
        time: std::time::SystemTime::now(),
        session_id: "s".into(),
        surface: warden_policy::CallSurface::Agent,
        kind: warden_policy::CallKind::Tool,
        effect: None,
        tenant: None,
        caller: None,
        server: Some("fx".into()),
        tool: Some("slow".into()),
        public_name: "mcp__fx__slow".into(),
        annotations: None,
        classes: warden_policy::CapabilitySet::EMPTY,
        decision,
        layer: warden_policy::Layer::Approval,
        reason: None,
        gate_duration: std::time::Duration::ZERO,
        execution_duration: None,
        result_bytes: None,
        result_is_error: None,
        error: None,
        arguments_digest: warden_policy::arguments_digest(&serde_json::json!({})),
        arguments: None,
        confinement: None,
    };
    let entry = store
        .begin_async(record(warden_policy::Decision::Started), false)
        .await
        .unwrap();
    // Running: nothing is shown for a while (several polls).
    assert!(
        seen.recv_timeout(std::time::Duration::from_secs(2))
            .is_err(),
        "a running call was shown before it ended"
    );
    store
        .complete_async(entry, record(warden_policy::Decision::Allowed), false)
        .await
        .unwrap();
    let line = seen
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the completed call is shown");
    let row: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(row["decision"], "allowed");
    assert_eq!(row["public_name"], "mcp__fx__slow");
    assert!(
        seen.recv_timeout(std::time::Duration::from_secs(2))
            .is_err(),
        "one line per call"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `warden audit verify`: a clean trail is `ok` with its record count (exit 0); one byte changed
/// in a record names that record, its file and line (exit 1, a failure at run time).
#[test]
fn verify_passes_a_clean_trail_and_names_an_altered_record() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("fx", &fixture_binary(), &["echo"]));
    for text in ["one", "two", "three"] {
        sandbox.ok(&["tool", "fx", "echo", &format!(r#"{{"text":"{text}"}}"#)]);
    }
    // Each call is an intent and its outcome; the listing shows one line per call.
    assert_eq!(sandbox.audit().len(), 3);
    let clean = sandbox.run(&["audit", "verify"]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert!(
        clean.stdout.starts_with("ok: 6 records, head "),
        "{}",
        clean.stdout
    );

    let journal = sandbox.state_dir().join("audit.journal");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 6);
    lines[2] = lines[2].replacen("tool-cli", "tool-cLi", 1);
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let broken = sandbox.run(&["audit", "verify"]);
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    assert!(
        broken
            .stdout
            .contains(&format!("record 3 at {}:3 was altered", journal.display())),
        "{}",
        broken.stdout
    );
    let json = sandbox.run(&["audit", "verify", "--json"]);
    assert_eq!(json.code, 1);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["broken"]["seq"], 3);
    assert_eq!(report["broken"]["line"], 3);
}
