//! Shared helpers for the fixture tests: a recording rmcp client and process plumbing.
#![allow(dead_code)]

use std::{path::Path, process::Stdio, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam},
    service::{NotificationContext, RunningService},
    transport::StreamableHttpClientTransport,
};
use tokio::sync::mpsc;

/// What the recording client saw from the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seen {
    ToolListChanged,
    Progress { progress: f64, total: Option<f64> },
}

/// A client handler that forwards notifications to a channel.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    sender: mpsc::UnboundedSender<Seen>,
}

impl Recorder {
    pub(crate) fn new() -> (Recorder, mpsc::UnboundedReceiver<Seen>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (Recorder { sender }, receiver)
    }
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.sender.send(Seen::ToolListChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.sender.send(Seen::Progress {
            progress: params.progress,
            total: params.total,
        });
    }
}

pub(crate) type Client = RunningService<RoleClient, Recorder>;

/// A `tokio` command for fixture `kind` over stdio, with piped stdio and kill-on-drop.
pub(crate) fn fixture_process(kind: &str) -> tokio::process::Command {
    let (program, args) = warden_testkit::fixture_command(kind);
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Starts fixture `kind` over stdio and connects a recording client (initialize handshake).
/// Returns the client, its notification receiver and the child (for exit status and stderr).
pub(crate) async fn connect_stdio(
    kind: &str,
    envs: &[(&str, &str)],
) -> (Client, mpsc::UnboundedReceiver<Seen>, tokio::process::Child) {
    let mut command = fixture_process(kind);
    command.envs(envs.iter().copied());
    let mut child = command.spawn().expect("spawn fixture");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let (recorder, seen) = Recorder::new();
    let client = recorder
        .serve((stdout, stdin))
        .await
        .unwrap_or_else(|error| panic!("connecting to fixture {kind} over stdio: {error}"));
    (client, seen, child)
}

/// Connects a recording client to a Streamable HTTP URL (initialize handshake).
pub(crate) async fn connect_http(url: &str) -> (Client, mpsc::UnboundedReceiver<Seen>) {
    install_crypto_provider();
    let (recorder, seen) = Recorder::new();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let client = recorder
        .serve(transport)
        .await
        .unwrap_or_else(|error| panic!("connecting to {url}: {error}"));
    (client, seen)
}

/// reqwest is built without a default rustls provider; tests install ring.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Calls a tool and returns its result.
pub(crate) async fn call(
    client: &Client,
    name: &str,
    arguments: serde_json::Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    if let serde_json::Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    client
        .peer()
        .call_tool(params)
        .await
        .unwrap_or_else(|error| panic!("calling {name}: {error}"))
}

/// The text of a result's first content block.
pub(crate) fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_else(|| panic!("expected text content, got {result:?}"))
}

/// Waits (up to 30 s) until the file at `path` contains `needle`; returns its contents.
pub(crate) async fn wait_for_file_containing(path: &Path, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let contents = std::fs::read_to_string(path).unwrap_or_default();
        if contents.contains(needle) {
            return contents;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never contained {needle:?}; it has: {contents:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Receives the next notification, failing after 30 s.
pub(crate) async fn next_seen(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(30), seen.recv())
        .await
        .expect("no notification within 30 s")
        .expect("client closed")
}
