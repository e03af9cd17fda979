//! A Python `mcp` 2.x server over stdio negotiates 2026-07-28 and answers a call.

use serde_json::json;
use warden_mcp::{CallOptions, ServerSpec, ServerState, ToolIdentity};

use crate::common;

#[tokio::test]
async fn python_mcp_2_server_speaks_2026_07_28() {
    let python = warden_testkit::python_venv().join("bin/python");
    assert!(python.is_file(), "{}", warden_testkit::PYTHON_SETUP_HINT);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_forecast.py");
    let spec = ServerSpec::stdio("py", python.to_string_lossy().into_owned())
        .with_args([script.to_string_lossy().into_owned()]);
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let arguments = json!({"city": "Lisbon"})
        .as_object()
        .cloned()
        .expect("object");
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("py", "forecast"),
            arguments,
            CallOptions::default(),
        )
        .await
        .expect("forecast");
    assert!(common::first_text(&outcome.result).contains("sunny in Lisbon"));
    let status = runtime.server_status("py").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.protocol_revision.as_deref(), Some("2026-07-28"));
    runtime.shutdown().await;
}
