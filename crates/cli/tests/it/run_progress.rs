//! `warden run` in text mode reports a running call's MCP progress on stderr, and a server that
//! failed to start with its cause and the last lines it wrote.

use warden_mock_model::{MockModel, Turn};

use crate::support::warden_without_model_keys as warden;
use crate::support::{Sandbox, echo_server, mock_model_config, toml_str};

#[tokio::test]
async fn progress_of_a_running_call_is_printed_on_stderr() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fx__slow",
        serde_json::json!({"ms": 1000}),
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        mock_model_config(&mock.base_url(), "openai", None),
        echo_server("fx", "")
    ));
    let run = warden(&sandbox, &["run", "wait a bit"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("… mcp__fx__slow:"))
        .count();
    // The fixture reports about ten updates; a few a second are printed.
    assert!(lines >= 1, "{}", run.stderr);
    assert!(lines < 10, "{}", run.stderr);
}

#[tokio::test]
async fn a_server_that_fails_to_start_is_reported_with_its_stderr() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[mcp_servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        mock_model_config(&mock.base_url(), "openai", None),
        toml_str("echo 'fatal: no database at /srv/db' >&2; exit 3")
    ));
    let run = warden(&sandbox, &["run", "hello"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("MCP broken"), "{}", run.stderr);
    assert!(
        run.stderr.contains("stderr| fatal: no database at /srv/db"),
        "{}",
        run.stderr
    );
}
