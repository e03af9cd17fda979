//! The fault-injecting fixtures over stdio: each misbehaves exactly as documented.

use std::{
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::model::CallToolRequestParams;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use warden_testkit::fixtures::{
    BIG_RESULT_BYTES, CRASH_EXIT_CODE, CRASH_STDERR_LINE, EXIT_DURING_START_CODE,
    EXIT_DURING_START_LINE,
};

use crate::common::{call, connect_stdio, first_text, fixture_process, wait_for_file_containing};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[tokio::test]
async fn crash_mid_call_exits_with_the_stderr_line() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.txt");
    let (client, _seen, mut child) = connect_stdio(
        "crash-mid-call",
        &[("FIXTURE_LEDGER", ledger.to_str().unwrap())],
    )
    .await;
    let mut stderr = child.stderr.take().unwrap();
    let echoed = call(&client, "echo", json!({"text": "before"})).await;
    assert_eq!(first_text(&echoed), "before");

    let outcome = client
        .peer()
        .call_tool(CallToolRequestParams::new("crash"))
        .await;
    assert!(
        outcome.is_err(),
        "the crash call cannot succeed: {outcome:?}"
    );
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(CRASH_EXIT_CODE));
    let mut stderr_text = String::new();
    stderr.read_to_string(&mut stderr_text).await.unwrap();
    let last_line = stderr_text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty());
    assert_eq!(last_line, Some(CRASH_STDERR_LINE));
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "crash called\n");
}

#[tokio::test]
async fn hang_never_writes_a_byte() {
    let mut child = fixture_process("hang").spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin
        .write_all(format!("{INITIALIZE}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    // Closing stdin lets the fixture exit; everything it ever wrote is then on stdout.
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("hang exits once stdin closes")
        .unwrap();
    assert!(status.success());
    let mut written = Vec::new();
    stdout.read_to_end(&mut written).await.unwrap();
    assert!(written.is_empty(), "hang answered: {written:?}");
}

#[tokio::test]
async fn garbage_writes_only_non_json_lines() {
    let mut child = fixture_process("garbage").spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin
        .write_all(format!("{INITIALIZE}\n{INITIALIZED}\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let mut written = String::new();
    stdout.read_to_string(&mut written).await.unwrap();
    child.wait().await.unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert!(lines.len() >= 4, "garbage wrote {lines:?}");
    for line in &lines {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_err(),
            "{line:?} is JSON"
        );
    }
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("garbage reply"))
            .count(),
        2,
        "one garbage reply per line read"
    );
}

#[tokio::test]
async fn stderr_flood_keeps_serving_while_flooding() {
    let (client, _seen, mut child) = connect_stdio("stderr-flood", &[]).await;
    let stderr = child.stderr.take().unwrap();
    let flooded = Arc::new(AtomicUsize::new(0));
    let counter = flooded.clone();
    let drain = tokio::spawn(async move {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).await.unwrap_or(0) > 0 {
            counter.fetch_add(line.len(), Ordering::Relaxed);
            line.clear();
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut calls = 0;
    while flooded.load(Ordering::Relaxed) < 4 * 1024 * 1024 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} bytes of stderr so far",
            flooded.load(Ordering::Relaxed)
        );
        let echoed = call(&client, "echo", json!({"text": format!("call {calls}")})).await;
        assert_eq!(first_text(&echoed), format!("call {calls}"));
        calls += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(calls > 0);
    client.cancel().await.unwrap();
    drop(child);
    drain.abort();
}

#[tokio::test]
async fn exit_during_start_prints_a_line_and_exits_3() {
    let (program, args) = warden_testkit::fixture_command("exit-during-start");
    let output = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(EXIT_DURING_START_CODE));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        EXIT_DURING_START_LINE
    );
}

#[tokio::test]
async fn slow_start_serves_after_its_delay() {
    let (client, _seen, _child) = connect_stdio("slow-start", &[("FIXTURE_DELAY_MS", "300")]).await;
    let echoed = call(&client, "echo", json!({"text": "late"})).await;
    assert_eq!(first_text(&echoed), "late");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn slow_start_is_silent_during_its_delay() {
    // With a long delay, closing stdin before the delay ends shows nothing was written early:
    // the process is killed while sleeping and stdout stays empty.
    let mut command = fixture_process("slow-start");
    command.arg("--delay-ms").arg("60000");
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin
        .write_all(format!("{INITIALIZE}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let mut written = Vec::new();
    stdout.read_to_end(&mut written).await.unwrap();
    assert!(written.is_empty(), "answered during the delay: {written:?}");
}

#[tokio::test]
async fn big_result_returns_20_mib_of_text() {
    // rmcp's stdio client drops lines over 16 MiB, so read the raw reply.
    let mut child = fixture_process("big-result").spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big_result","arguments":{}}}"#;
    stdin
        .write_all(format!("{INITIALIZE}\n{INITIALIZED}\n{call}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut reply = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == json!(2) {
            reply = Some(message);
            break;
        }
    }
    drop(stdin);
    let reply = reply.expect("a reply to the call");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.len(), BIG_RESULT_BYTES);
    assert_eq!(BIG_RESULT_BYTES, 20 * 1024 * 1024);
    child.wait().await.unwrap();
}

#[tokio::test]
async fn the_ledger_shows_whether_a_call_arrived() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.txt");
    let (client, _seen, _child) =
        connect_stdio("echo", &[("FIXTURE_LEDGER", ledger.to_str().unwrap())]).await;
    call(&client, "slow", json!({"ms": 10})).await;
    let text = wait_for_file_containing(&ledger, "slow done 10").await;
    assert_eq!(text, "slow start 10\nslow done 10\n");
    client.cancel().await.unwrap();
}
