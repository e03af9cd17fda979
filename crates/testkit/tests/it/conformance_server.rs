//! `fixture-server` (the conformance fixture) over Streamable HTTP and stdio, driven by rmcp's client.

use std::{
    io::{Read, Write},
    process::Stdio,
};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        GetPromptRequestParams, LoggingLevel, LoggingMessageNotificationParam,
        ReadResourceRequestParams, ResourceContents, SetLevelRequestParams, Tool,
    },
    service::NotificationContext,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use warden_testkit::{
    HttpFixture,
    conformance_server::{IMAGE_PNG_BASE64, STATIC_TEXT, STATIC_TEXT_URI},
    spawn_announcing_server,
};

use crate::common::{Client, Recorder, call, connect_http, first_text};

const BINARY: &str = env!("CARGO_BIN_EXE_fixture-server");

async fn spawn_http() -> HttpFixture {
    let mut command = tokio::process::Command::new(BINARY);
    command.args(["--http", "127.0.0.1:0"]);
    spawn_announcing_server("fixture-server", command)
        .await
        .unwrap_or_else(|error| panic!("{error}"))
}

async fn connect_stdio() -> (Client, tokio::process::Child) {
    let mut child = tokio::process::Command::new(BINARY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn fixture-server");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve((stdout, stdin))
        .await
        .expect("connect to fixture-server over stdio");
    (client, child)
}

async fn tools(client: &Client) -> Vec<Tool> {
    client.peer().list_all_tools().await.expect("tools/list")
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no tool {name} among {:?}",
                tools.iter().map(|t| &t.name).collect::<Vec<_>>()
            )
        })
}

async fn read_text(client: &Client, uri: &str) -> (String, Option<String>) {
    let result = client
        .peer()
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|error| panic!("reading {uri}: {error}"));
    assert_eq!(result.contents.len(), 1, "{result:?}");
    match &result.contents[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => (text.clone(), mime_type.clone()),
        other => panic!("expected text contents, got {other:?}"),
    }
}

async fn prompt(client: &Client, name: &str, arguments: Value) -> Value {
    let mut params = GetPromptRequestParams::new(name);
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    let result = client
        .peer()
        .get_prompt(params)
        .await
        .unwrap_or_else(|error| panic!("getting prompt {name}: {error}"));
    serde_json::to_value(result).unwrap()
}

#[tokio::test]
async fn over_http_it_lists_calls_reads_and_renders_prompts() {
    let fixture = spawn_http().await;
    assert!(
        fixture.url.starts_with("http://127.0.0.1:"),
        "{}",
        fixture.url
    );
    let (client, _seen) = connect_http(&fixture.url).await;

    let tools = tools(&client).await;
    tool(&tools, "test_simple_text");
    tool(&tools, "test_input_required_result_elicitation");
    let schema = &tool(&tools, "json_schema_2020_12_tool").input_schema;
    assert_eq!(
        schema.get("$schema"),
        Some(&json!("https://json-schema.org/draft/2020-12/schema"))
    );
    assert_eq!(schema["$defs"]["address"]["$anchor"], json!("addressDef"));
    assert_eq!(schema.get("additionalProperties"), Some(&json!(false)));

    let result = call(&client, "test_simple_text", json!({})).await;
    assert_eq!(
        first_text(&result),
        "This is a simple text response for testing."
    );
    assert_ne!(result.is_error, Some(true));

    let (text, mime) = read_text(&client, STATIC_TEXT_URI).await;
    assert_eq!(text, STATIC_TEXT);
    assert_eq!(mime.as_deref(), Some("text/plain"));

    let missing = client
        .peer()
        .read_resource(ReadResourceRequestParams::new(
            "test://nonexistent-resource-for-conformance-testing",
        ))
        .await
        .expect_err("an unknown resource must be an error");
    assert!(
        missing.to_string().contains("Resource not found"),
        "{missing}"
    );

    let rendered = prompt(
        &client,
        "test_prompt_with_arguments",
        json!({"arg1": "alpha", "arg2": "beta"}),
    )
    .await;
    assert_eq!(
        rendered["messages"][0]["content"]["text"],
        json!("Prompt with arguments: arg1='alpha', arg2='beta'")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_stdio_it_reports_tool_errors_fills_templates_and_embeds_images() {
    let (client, _child) = connect_stdio().await;

    let tools = tools(&client).await;
    let progress = tool(&tools, "test_tool_with_progress");
    assert_eq!(progress.input_schema.get("type"), Some(&json!("object")));

    let failed = call(&client, "test_error_handling", json!({})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        first_text(&failed),
        "This tool intentionally returns an error for testing"
    );

    let (text, mime) = read_text(&client, "test://template/42/data").await;
    assert_eq!(mime.as_deref(), Some("application/json"));
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        body,
        json!({"id": "42", "templateTest": true, "data": "Data for ID: 42"})
    );

    let rendered = prompt(&client, "test_prompt_with_image", json!({})).await;
    assert_eq!(rendered["messages"][0]["content"]["type"], json!("image"));
    assert_eq!(
        rendered["messages"][0]["content"]["data"],
        json!(IMAGE_PNG_BASE64)
    );
    assert_eq!(
        rendered["messages"][1]["content"]["text"],
        json!("Please analyze the image above.")
    );
    client.cancel().await.unwrap();
}

/// Posts an `initialize` with the given Host and optional Origin; returns the status line.
fn initialize_status(port: u16, host: &str, origin: Option<&str>) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "rebinding-test", "version": "1"}}
    })
    .to_string();
    let origin = origin
        .map(|origin| format!("Origin: {origin}\r\n"))
        .unwrap_or_default();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn over_http_it_refuses_non_loopback_host_and_origin() {
    let fixture = spawn_http().await;
    let port = fixture.port();
    tokio::task::spawn_blocking(move || {
        let loopback = format!("127.0.0.1:{port}");
        let accepted = initialize_status(port, &loopback, None);
        assert_eq!(accepted, "HTTP/1.1 200", "loopback Host");
        let accepted = initialize_status(
            port,
            &format!("localhost:{port}"),
            Some(&format!("http://localhost:{port}")),
        );
        assert_eq!(accepted, "HTTP/1.1 200", "loopback Origin");
        let evil_host = initialize_status(port, "evil.example.com", None);
        assert!(
            evil_host.starts_with("HTTP/1.1 4"),
            "non-loopback Host got {evil_host}"
        );
        let evil_origin = initialize_status(port, &loopback, Some("http://evil.example.com"));
        assert!(
            evil_origin.starts_with("HTTP/1.1 4"),
            "non-loopback Origin got {evil_origin}"
        );
    })
    .await
    .unwrap();
}

/// A client that forwards the data of every log notification it receives.
#[derive(Debug, Clone)]
struct LogRecorder(mpsc::UnboundedSender<String>);

impl ClientHandler for LogRecorder {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self
            .0
            .send(params.data.as_str().unwrap_or_default().to_owned());
    }
}

#[tokio::test]
async fn over_stdio_log_notifications_follow_the_level_the_client_sets() {
    let mut child = tokio::process::Command::new(BINARY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn fixture-server");
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let (sender, mut logs) = mpsc::unbounded_channel();
    let client = LogRecorder(sender).serve((stdout, stdin)).await.unwrap();
    let run_logging_tool = async || {
        let result = client
            .peer()
            .call_tool(rmcp::model::CallToolRequestParams::new(
                "test_tool_with_logging",
            ))
            .await
            .unwrap();
        assert_eq!(
            first_text(&result),
            "Tool with logging executed successfully"
        );
    };

    // At `warning`, the tool's three `info` messages (and the set-level notice) are filtered out.
    client
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap();
    run_logging_tool().await;
    client
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    run_logging_tool().await;

    // Notifications arrive in order, so anything the first call let through would come first.
    let mut received = Vec::new();
    while received.last().map(String::as_str) != Some("Tool execution completed") {
        let next = tokio::time::timeout(std::time::Duration::from_secs(30), logs.recv())
            .await
            .expect("no log notification within 30 s")
            .expect("client closed");
        received.push(next);
    }
    assert_eq!(
        received,
        [
            "Log level set to: debug",
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    client.cancel().await.unwrap();
}
