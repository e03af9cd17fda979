//! Every documented start-up and connection failure becomes one typed, one-line message that names
//! the server, says what went wrong and what to check; the host survives each of them.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_mcp::{FailureKind, McpError, ServerSpec, ServerState};
use warden_testkit::fixtures::{EXIT_DURING_START_CODE, EXIT_DURING_START_LINE};

use crate::common;

async fn connect_error(spec: ServerSpec) -> (McpError, ServerState) {
    let name = spec.name.clone();
    let test = common::runtime(vec![spec]);
    let error = test
        .runtime
        .connect(&name)
        .await
        .expect_err("connect must fail");
    let state = common::state_of(&test.runtime, &name);
    let status = test.runtime.server_status(&name).expect("status");
    assert_eq!(status.failure.as_deref(), Some(error.to_string().as_str()));
    assert!(!error.to_string().contains('\n'), "not one line: {error}");
    assert!(
        error.to_string().starts_with(&format!("MCP {name}: ")),
        "{error}"
    );
    test.runtime.shutdown().await;
    (error, state)
}

/// A loopback HTTP server answering every request with `response` (raw HTTP/1.1).
async fn raw_http_server(response: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                break;
            };
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 65536];
                let _ = tokio::time::timeout(Duration::from_millis(500), socket.read(&mut buffer))
                    .await;
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

#[tokio::test]
async fn command_not_installed() {
    let (error, state) =
        connect_error(ServerSpec::stdio("tool", "warden-no-such-command-xyz")).await;
    assert_eq!(error.kind(), FailureKind::CommandNotFound);
    assert_eq!(state, ServerState::Failed);
    assert!(
        error
            .to_string()
            .contains("command not found — check that it is installed and on PATH"),
        "{error}"
    );
}

#[tokio::test]
async fn exit_during_start_up_names_the_status_and_last_stderr_line() {
    let (error, state) = connect_error(common::fixture("db", "exit-during-start")).await;
    assert_eq!(error.kind(), FailureKind::ExitedDuringStartup);
    assert_eq!(state, ServerState::Failed);
    let text = error.to_string();
    assert!(
        text.contains(&format!(
            "exited during start-up with status {EXIT_DURING_START_CODE}"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "its last stderr line: \"{EXIT_DURING_START_LINE}\""
        )),
        "{text}"
    );
}

#[tokio::test]
async fn inline_command_that_fails_at_once() {
    let spec = ServerSpec::stdio("sh", "sh").with_args(["-c", "echo boom >&2; exit 3"]);
    let (error, _) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::ExitedDuringStartup);
    assert!(
        error
            .to_string()
            .contains("with status 3 (its last stderr line: \"boom\")"),
        "{error}"
    );
}

#[tokio::test]
async fn a_handshake_that_never_finishes_hits_the_start_up_deadline() {
    let spec = common::fixture("stuck", "hang").with_startup_timeout(Duration::from_secs(2));
    let (error, state) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::StartupTimeout);
    assert_eq!(state, ServerState::Failed);
    assert!(
        error
            .to_string()
            .contains("did not finish the MCP handshake within 2s"),
        "{error}"
    );
}

#[tokio::test]
async fn inline_sleep_is_a_startup_timeout_and_is_killed() {
    let spec = ServerSpec::stdio("sleepy", "sleep")
        .with_args(["1000"])
        .with_startup_timeout(Duration::from_millis(1500));
    let (error, _) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::StartupTimeout);
}

#[tokio::test]
async fn garbage_on_stdout_is_not_a_handshake() {
    let spec = common::fixture("noisy", "garbage").with_startup_timeout(Duration::from_secs(3));
    let (error, state) = connect_error(spec).await;
    assert!(
        matches!(
            error.kind(),
            FailureKind::StartupTimeout | FailureKind::HandshakeFailed
        ),
        "{error}"
    );
    assert_eq!(state, ServerState::Failed);
    assert!(error.to_string().contains("MCP server on stdio"), "{error}");
}

#[tokio::test]
async fn connection_refused() {
    let port = warden_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (error, _) = connect_error(ServerSpec::http("nb", &url)).await;
    assert_eq!(error.kind(), FailureKind::Unreachable);
    assert_eq!(
        error.to_string(),
        format!(
            "MCP nb: can't reach {url}: connection refused — check the url, and that the server is running"
        )
    );
}

#[tokio::test]
async fn plain_http_to_a_remote_host_is_refused_before_connecting() {
    let (error, _) = connect_error(ServerSpec::http("far", "http://example.com/mcp")).await;
    assert_eq!(error.kind(), FailureKind::InsecureUrl);
    assert!(error.to_string().contains("use an https:// url"), "{error}");
}

#[tokio::test]
async fn http_404_where_the_endpoint_should_be() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let url = fixture.url.replace("/mcp", "/not-the-endpoint");
    let (error, _) = connect_error(ServerSpec::http("web", &url)).await;
    assert_eq!(error.kind(), FailureKind::NotFound, "{error}");
    assert!(error.to_string().contains("HTTP 404"), "{error}");
}

#[tokio::test]
async fn http_5xx() {
    let url = raw_http_server(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy",
    )
    .await;
    let (error, _) = connect_error(ServerSpec::http("api", &url)).await;
    assert_eq!(error.kind(), FailureKind::ServerError, "{error}");
    assert!(error.to_string().contains("HTTP 503"), "{error}");
}

#[tokio::test]
async fn an_html_page_where_the_endpoint_should_be() {
    let fixture = warden_testkit::spawn_http_fixture("garbage").await;
    let (error, _) = connect_error(ServerSpec::http("site", &fixture.url)).await;
    assert_eq!(error.kind(), FailureKind::NotMcpEndpoint, "{error}");
    assert!(error.to_string().contains("HTML page"), "{error}");
}

#[tokio::test]
async fn a_rejected_header() {
    let url = raw_http_server(
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: close\r\n\r\nno!",
    )
    .await;
    let spec = ServerSpec::http("gh", &url).with_header("Authorization", "Bearer wrong-token");
    let (error, state) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::Rejected, "{error}");
    assert_eq!(state, ServerState::Failed);
    assert!(error.to_string().contains("check the headers"), "{error}");
    assert!(
        !error.to_string().contains("wrong-token"),
        "secret printed: {error}"
    );
}

#[tokio::test]
async fn an_oauth_challenge_means_needs_login() {
    let url = raw_http_server(
        "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/oauth-protected-resource\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    let (error, state) = connect_error(ServerSpec::http("saas", &url)).await;
    assert_eq!(error.kind(), FailureKind::NeedsLogin, "{error}");
    assert_eq!(state, ServerState::NeedsLogin);
}

#[tokio::test]
async fn redirects_are_refused_not_followed() {
    let url = raw_http_server(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: https://elsewhere.example/mcp\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    let (error, _) = connect_error(ServerSpec::http("moved", &url)).await;
    assert_eq!(error.kind(), FailureKind::Redirected, "{error}");
    assert!(
        error.to_string().contains("https://elsewhere.example/mcp"),
        "{error}"
    );
}

#[tokio::test]
async fn tls_failure() {
    let plain =
        raw_http_server("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
    let url = plain.replace("http://", "https://");
    let (error, _) = connect_error(ServerSpec::http("secure", &url)).await;
    assert_eq!(error.kind(), FailureKind::Tls, "{error}");
    assert!(error.to_string().contains("TLS with"), "{error}");
}

#[tokio::test]
async fn legacy_sse_to_a_closed_port_is_connection_refused() {
    let spec = ServerSpec::with_transport(
        "old",
        warden_mcp::TransportSpec::LegacySse {
            url: "http://127.0.0.1:1/sse".to_owned(),
            headers: Vec::new(),
        },
    );
    let (error, _) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::Unreachable, "{error}");
}

#[tokio::test]
async fn a_failed_server_stays_failed_until_reconnected() {
    let test = common::runtime(vec![ServerSpec::stdio(
        "tool",
        "warden-no-such-command-xyz",
    )]);
    let runtime = &test.runtime;
    assert!(runtime.connect("tool").await.is_err());
    assert!(runtime.server_tools("tool").await.is_err());
    assert_eq!(
        runtime
            .server_status("tool")
            .expect("status")
            .connect_attempts,
        1
    );
    assert!(runtime.reconnect("tool").await.is_err());
    assert_eq!(
        runtime
            .server_status("tool")
            .expect("status")
            .connect_attempts,
        2
    );
}

#[tokio::test]
async fn inline_command_printing_garbage_then_exiting() {
    let spec = ServerSpec::stdio("junk", "sh")
        .with_args([
            "-c",
            "echo '<html>not json</html>'; echo 'oops: bad config' >&2; exit 1",
        ])
        .with_startup_timeout(Duration::from_secs(5));
    let (error, state) = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::ExitedDuringStartup, "{error}");
    assert_eq!(state, ServerState::Failed);
    assert!(
        error
            .to_string()
            .contains("with status 1 (its last stderr line: \"oops: bad config\")"),
        "{error}"
    );
}
