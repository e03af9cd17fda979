//! Result conversion of real results from the npm reference server `server-everything` (stdio).

use std::fs;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use warden_mcp::ArtifactStore;
use warden_mcp::{ConversionContext, STRUCTURED_CONTENT_LABEL, convert_tool_result};

/// A backstop so a broken server fails the test instead of hanging it (not a speed assertion).
const DEADLINE: Duration = Duration::from_secs(60);

fn everything_entry() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let entry = PathBuf::from(home).join(
        ".cache/warden-conformance/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        entry.is_file(),
        "the reference server is not installed at {}",
        entry.display()
    );
    entry
}

async fn start_everything() -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new("node");
    command.arg(everything_entry()).arg("stdio");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(DEADLINE, ().serve(transport))
        .await
        .expect("handshake within the deadline")
        .unwrap()
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    tokio::time::timeout(DEADLINE, client.call_tool(params))
        .await
        .expect("call within the deadline")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converts_real_results_of_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = ArtifactStore::new(dir.path().join("session"));
    let client = start_everything().await;

    // text + image + text, in order; the image is decoded to a real PNG file
    let raw = call(&client, "get-tiny-image", json!({})).await;
    let rmcp::model::ContentBlock::Image(image) = &raw.content[1] else {
        panic!("expected an image block: {raw:?}")
    };
    let image_b64 = image.data.clone();
    let ctx = ConversionContext::new("everything", "get-tiny-image", &store);
    let converted = convert_tool_result(raw, &ctx).unwrap();
    assert_eq!(converted.artifacts.len(), 1);
    let png = fs::read(&converted.artifacts[0].path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let lines: Vec<&str> = converted.text.lines().collect();
    assert_eq!(lines.len(), 3, "{}", converted.text);
    assert_eq!(lines[0], "Here's the image you requested:");
    assert!(lines[1].starts_with("[image (image/png, "), "{}", lines[1]);
    assert_eq!(lines[2], "The image above is the MCP logo.");
    assert!(!converted.text.contains(&image_b64[..32]));

    // structured content with its backward-compatible JSON text: shown once
    let raw = call(
        &client,
        "get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    let ctx = ConversionContext::new("everything", "get-structured-content", &store);
    let converted = convert_tool_result(raw, &ctx).unwrap();
    assert_eq!(
        converted.structured,
        Some(json!({"temperature": 33, "conditions": "Cloudy", "humidity": 82}))
    );
    assert!(!converted.text.contains(STRUCTURED_CONTENT_LABEL));
    let shown: Value = serde_json::from_str(&converted.text).unwrap();
    assert_eq!(Some(shown), converted.structured);

    // resource links: one line each with URI, name and MIME type
    let raw = call(&client, "get-resource-links", json!({"count": 2})).await;
    let ctx = ConversionContext::new("everything", "get-resource-links", &store);
    let converted = convert_tool_result(raw, &ctx).unwrap();
    let lines: Vec<&str> = converted.text.lines().collect();
    assert_eq!(lines.len(), 3, "{}", converted.text);
    assert!(
        lines[1].starts_with("[resource link] demo://resource/dynamic/blob/1 name=\"Blob Resource 1\" type=text/plain"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("[resource link] demo://resource/dynamic/text/2 name=\"Text Resource 2\" type=text/plain"),
        "{}",
        lines[2]
    );

    // embedded text resource: provenance header, then the text
    let raw = call(
        &client,
        "get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 3}),
    )
    .await;
    let ctx = ConversionContext::new("everything", "get-resource-reference", &store);
    let converted = convert_tool_result(raw, &ctx).unwrap();
    assert!(
        converted.text.contains(
            "[resource demo://resource/dynamic/text/3 from MCP server everything (text/plain)]\nResource 3: This is a plaintext resource"
        ),
        "{}",
        converted.text
    );

    // embedded blob resource: decoded into an artifact, never shown as base64
    let raw = call(
        &client,
        "get-resource-reference",
        json!({"resourceType": "Blob", "resourceId": 4}),
    )
    .await;
    let converted = convert_tool_result(raw, &ctx).unwrap();
    assert_eq!(converted.artifacts.len(), 1, "{}", converted.text);
    let decoded = fs::read_to_string(&converted.artifacts[0].path).unwrap();
    assert!(
        decoded.starts_with("Resource 4: This is a base64 blob"),
        "{decoded}"
    );
    assert!(converted.text.contains(
        "[resource demo://resource/dynamic/blob/4 from MCP server everything (text/plain, "
    ));
    assert!(
        !converted.text.contains("UmVzb3VyY2Ug"),
        "base64 of \"Resource \""
    );

    // a tool error from the server keeps isError
    let raw = call(
        &client,
        "get-resource-reference",
        json!({"resourceType": "Text", "resourceId": -1}),
    )
    .await;
    let converted = convert_tool_result(raw, &ctx).unwrap();
    assert!(converted.is_error, "{}", converted.text);
    assert!(converted.text.contains("resourceId"), "{}", converted.text);

    client.cancel().await.unwrap();
}
