//! Shared helpers of the runtime's integration tests: runtimes over fixtures and the npm reference servers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use warden_mcp::{McpRuntime, RuntimeOptions, ServerSpec, ServerState, ServerStatus};

/// A runtime whose workspace is a fresh temporary folder.
pub(crate) struct TestRuntime {
    pub runtime: McpRuntime,
    pub workspace: tempfile::TempDir,
}

pub(crate) fn runtime(specs: Vec<ServerSpec>) -> TestRuntime {
    let workspace = tempfile::tempdir().expect("temp workspace");
    let runtime = McpRuntime::new(specs, RuntimeOptions::new(workspace.path()));
    TestRuntime { runtime, workspace }
}

/// A stdio spec running testkit fixture `kind`.
pub(crate) fn fixture(name: &str, kind: &str) -> ServerSpec {
    let (program, args) = warden_testkit::fixture_command(kind);
    ServerSpec::stdio(name, program.to_string_lossy().into_owned()).with_args(args)
}

/// `node` (22 from the conformance folder) and the server-everything entry script.
pub(crate) fn everything() -> (PathBuf, PathBuf) {
    (
        warden_testkit::require_node22(),
        warden_testkit::require_npm_server("everything"),
    )
}

/// server-everything over stdio.
pub(crate) fn everything_stdio(name: &str) -> ServerSpec {
    let (node, script) = everything();
    ServerSpec::stdio(name, node.to_string_lossy().into_owned())
        .with_args([script.to_string_lossy().into_owned(), "stdio".to_owned()])
}

/// server-everything serving Streamable HTTP on a free port; killed when dropped.
pub(crate) struct EverythingHttp {
    pub url: String,
    child: tokio::process::Child,
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

pub(crate) async fn everything_http() -> EverythingHttp {
    let (node, script) = everything();
    let port = warden_testkit::free_port();
    let child = tokio::process::Command::new(node)
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything over HTTP");
    let address = format!("127.0.0.1:{port}");
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(&address).await.is_ok() {
            return EverythingHttp {
                url: format!("http://127.0.0.1:{port}/mcp"),
                child,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("server-everything did not listen on {address}");
}

/// Polls the status of `server` until `accept` holds (panics after 30 s with the last status).
pub(crate) async fn wait_for_status(
    runtime: &McpRuntime,
    server: &str,
    accept: impl Fn(&ServerStatus) -> bool,
) -> ServerStatus {
    let mut last = None;
    for _ in 0..600 {
        let status = runtime.server_status(server).expect("known server");
        if accept(&status) {
            return status;
        }
        last = Some(status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("status of {server} never matched; last: {last:?}");
}

pub(crate) fn state_of(runtime: &McpRuntime, server: &str) -> ServerState {
    runtime.server_status(server).expect("known server").state
}

/// Whether a process is gone (or a zombie waiting to be reaped).
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

pub(crate) async fn wait_gone(pid: u32) -> bool {
    for _ in 0..200 {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// The text of the first text content block of a tool result.
pub(crate) fn first_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|block| block.as_text().map(|text| text.text.clone()))
        .unwrap_or_default()
}

/// Calls `big_result` on server `big` (the `big-result` fixture), asking for `bytes` of text.
pub(crate) async fn big_result(
    runtime: &McpRuntime,
    bytes: Option<usize>,
) -> rmcp::model::CallToolResult {
    let mut arguments = serde_json::Map::new();
    if let Some(bytes) = bytes {
        arguments.insert("bytes".to_owned(), serde_json::json!(bytes));
    }
    runtime
        .call_tool(
            &warden_mcp::ToolIdentity::new("big", "big_result"),
            arguments,
            warden_mcp::CallOptions::default(),
        )
        .await
        .expect("big_result")
        .result
}

/// The text of a result that must be exactly one text block.
pub(crate) fn only_text(result: &rmcp::model::CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1, "one block");
    match &result.content[0] {
        rmcp::model::ContentBlock::Text(text) => &text.text,
        other => panic!("not a text block: {other:?}"),
    }
}

/// server-everything serving the legacy HTTP+SSE transport on a free port; killed when dropped.
pub(crate) async fn everything_sse() -> warden_testkit::EverythingSse {
    warden_testkit::spawn_everything_sse().await
}

/// A JSON object literal as tool-call arguments.
pub(crate) fn arguments(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().expect("an object")
}
