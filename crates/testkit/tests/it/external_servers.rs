//! The external servers the testkit locates: the Python `mcp` weather server (both protocol
//! eras, stdio and HTTP) and the npm reference servers. Missing installs fail with the hint.

use rmcp::{
    ClientLifecycleMode, ClientServiceExt, ServiceExt,
    model::{ProtocolVersion, ReadResourceRequestParams, ResourceContents},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::json;
use warden_testkit::{
    require_node22, require_npm_server, require_python_mcp_server, spawn_everything_http,
    spawn_python_http_server,
};

use crate::common::{self, Recorder, call, connect_http, first_text};

fn discover_2026() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn python_command() -> tokio::process::Command {
    let (python, script) = require_python_mcp_server();
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn python_weather_server_speaks_2026_07_28_over_stdio() {
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve_with_lifecycle(
            TokioChildProcess::new(python_command()).unwrap(),
            discover_2026(),
        )
        .await
        .unwrap();
    assert_eq!(
        client.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let forecast = call(&client, "get_forecast", json!({"city": "Paris"})).await;
    assert_eq!(first_text(&forecast), "Paris: light rain, 14°C");
    let unknown = call(&client, "get_forecast", json!({"city": "Atlantis"})).await;
    assert_eq!(unknown.is_error, Some(true));

    let resources = client.peer().list_all_resources().await.unwrap();
    assert!(
        resources.iter().any(|r| r.uri == "weather://cities"),
        "{resources:?}"
    );
    assert!(resources.iter().all(|r| !r.uri.starts_with("skill://")));
    let read = client
        .peer()
        .read_resource(ReadResourceRequestParams::new("weather://cities"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("expected text");
    };
    assert_eq!(text, "lima\nparis\ntokyo\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn python_weather_server_accepts_the_initialize_handshake_over_stdio() {
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve(TokioChildProcess::new(python_command()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        client.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_11_25
    );
    let forecast = call(&client, "get_forecast", json!({"city": "tokyo"})).await;
    assert_eq!(first_text(&forecast), "Tokyo: clear skies, 21°C");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn python_weather_server_speaks_2026_07_28_over_http() {
    common::install_crypto_provider();
    let server = spawn_python_http_server().await;
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(server.url.clone()),
            discover_2026(),
        )
        .await
        .unwrap();
    assert_eq!(
        client.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let forecast = call(&client, "get_forecast", json!({"city": "Lima"})).await;
    assert_eq!(first_text(&forecast), "Lima: overcast, 18°C");
    client.cancel().await.unwrap();

    // The same server also serves a legacy (initialize) session.
    let (legacy, _seen) = connect_http(&server.url).await;
    let forecast = call(&legacy, "get_forecast", json!({"city": "Lima"})).await;
    assert_eq!(first_text(&forecast), "Lima: overcast, 18°C");
    legacy.cancel().await.unwrap();
}

#[tokio::test]
async fn npm_everything_server_over_stdio_and_http() {
    let mut command = tokio::process::Command::new(require_node22());
    command
        .arg(require_npm_server("everything"))
        .arg("stdio")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let echoed = call(&client, "echo", json!({"message": "hi"})).await;
    assert_eq!(first_text(&echoed), "Echo: hi");
    client.cancel().await.unwrap();

    let server = spawn_everything_http().await;
    let (client, _seen) = connect_http(&server.url).await;
    let echoed = call(&client, "echo", json!({"message": "over http"})).await;
    assert_eq!(first_text(&echoed), "Echo: over http");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn npm_filesystem_server_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut command = tokio::process::Command::new(require_node22());
    command
        .arg(require_npm_server("filesystem"))
        .arg(&root)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let allowed = call(&client, "list_allowed_directories", json!({})).await;
    assert!(
        first_text(&allowed).contains(root.to_str().unwrap()),
        "{allowed:?}"
    );
    client.cancel().await.unwrap();
}
