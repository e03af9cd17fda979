//! The workspace folder is the one root offered to servers: `server-filesystem` started without
//! folders adopts it from `roots/list` and reads files inside it.

use std::time::Duration;

use serde_json::json;
use warden_mcp::{CallOptions, McpRuntime, RuntimeOptions, ServerSpec, ToolIdentity};

use crate::common;

#[tokio::test]
async fn server_filesystem_uses_the_workspace_as_its_root() {
    let node = warden_testkit::require_node22();
    let script = warden_testkit::require_npm_server("filesystem");
    let workspace = tempfile::tempdir().expect("workspace");
    let workspace_path = workspace
        .path()
        .canonicalize()
        .expect("canonical workspace");
    std::fs::write(workspace_path.join("hello.txt"), "hello from the workspace").expect("write");
    let spec = ServerSpec::stdio("fs", node.to_string_lossy().into_owned())
        .with_args([script.to_string_lossy().into_owned()]);
    let runtime = McpRuntime::new(vec![spec], RuntimeOptions::new(&workspace_path));

    let path = workspace_path
        .join("hello.txt")
        .to_string_lossy()
        .into_owned();
    let mut text = String::new();
    // The server asks for roots right after the handshake; give it a moment to adopt them.
    for _ in 0..50 {
        let arguments = json!({ "path": path })
            .as_object()
            .cloned()
            .expect("object");
        match runtime
            .call_tool(
                &ToolIdentity::new("fs", "read_text_file"),
                arguments,
                CallOptions::default(),
            )
            .await
        {
            Ok(outcome) if !outcome.is_error() => {
                text = common::first_text(&outcome.result);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(text, "hello from the workspace");

    let outside = json!({ "path": "/etc/hostname" })
        .as_object()
        .cloned()
        .expect("object");
    let refused = runtime
        .call_tool(
            &ToolIdentity::new("fs", "read_text_file"),
            outside,
            CallOptions::default(),
        )
        .await
        .expect("a tool error, not a transport error");
    assert!(
        refused.is_error(),
        "a file outside the workspace root must be refused"
    );
    runtime.shutdown().await;
}
