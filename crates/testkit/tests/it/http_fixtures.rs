//! The fixtures over Streamable HTTP (`--http 127.0.0.1:0`), and the 2026-07-28 lifecycle.

use std::{
    io::{Read, Write},
    time::Duration,
};

use rmcp::{
    ClientLifecycleMode, ClientServiceExt,
    model::{
        CallToolRequestParams, ClientRequest, PaginatedRequestParams, ProtocolVersion, Request,
        ServerNotification, ServerResult, SubscriptionFilter,
    },
    service::PeerRequestOptions,
    transport::StreamableHttpClientTransport,
};
use serde_json::json;
use warden_testkit::{
    TestkitError,
    fixtures::{
        CRASH_EXIT_CODE, CRASH_STDERR_LINE, EXIT_DURING_START_CODE, EXIT_DURING_START_LINE,
    },
    spawn_http_fixture, try_spawn_http_fixture,
};

use crate::common::{
    self, Recorder, Seen, call, connect_http, connect_stdio, first_text, next_seen,
};

#[tokio::test]
async fn echo_over_http_prints_its_real_port_and_serves_calls_with_progress() {
    let fixture = spawn_http_fixture("echo").await;
    assert!(
        fixture.url.starts_with("http://127.0.0.1:"),
        "{}",
        fixture.url
    );
    assert!(fixture.url.ends_with("/mcp"));
    assert_ne!(fixture.port(), 0);

    let (client, mut seen) = connect_http(&fixture.url).await;
    let echoed = call(&client, "echo", json!({"text": "over http"})).await;
    assert_eq!(first_text(&echoed), "over http");
    let added = call(&client, "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(added.structured_content, Some(json!({"sum": 3})));

    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("slow")
                    .with_arguments(json!({"ms": 250}).as_object().unwrap().clone()),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let ServerResult::CallToolResult(result) = handle.await_response().await.unwrap() else {
        panic!("unexpected response");
    };
    assert_eq!(first_text(&result), "slept 250 ms");
    assert!(matches!(next_seen(&mut seen).await, Seen::Progress { .. }));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn paginated_over_http_serves_25_pages() {
    let fixture = spawn_http_fixture("paginated").await;
    let (client, _seen) = connect_http(&fixture.url).await;
    let mut cursor = None;
    let mut pages = 0;
    let mut tools = 0;
    loop {
        let page = client
            .peer()
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        pages += 1;
        tools += page.tools.len();
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 100);
    }
    assert_eq!((pages, tools), (25, 250));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_changed_over_http_notifies_the_session() {
    let fixture = spawn_http_fixture("list-changed").await;
    let (client, mut seen) = connect_http(&fixture.url).await;
    call(&client, "mutate", json!({"add": "z"})).await;
    assert_eq!(next_seen(&mut seen).await, Seen::ToolListChanged);
    let names: Vec<String> = client
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(names, ["a", "b", "z", "mutate"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_changed_reaches_2026_07_28_listeners_over_http() {
    common::install_crypto_provider();
    let fixture = spawn_http_fixture("list-changed").await;
    let (recorder, _seen) = Recorder::new();
    let client = recorder
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(fixture.url.clone()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let mut subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    call(&client, "mutate", json!({"remove": "b"})).await;
    let notification = tokio::time::timeout(Duration::from_secs(30), subscription.next())
        .await
        .expect("a notification within 30 s")
        .unwrap()
        .expect("the subscription is open");
    assert!(
        matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "{notification:?}"
    );
    subscription.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn echo_speaks_2026_07_28_over_stdio() {
    let (program, args) = warden_testkit::fixture_command("echo");
    let mut command = tokio::process::Command::new(program);
    command.args(args).kill_on_drop(true);
    let (recorder, _seen) = Recorder::new();
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = recorder
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let echoed = call(&client, "echo", json!({"text": "new era"})).await;
    assert_eq!(first_text(&echoed), "new era");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn crash_mid_call_over_http_exits_with_the_stderr_line() {
    let mut fixture = spawn_http_fixture("crash-mid-call").await;
    let (client, _seen) = connect_http(&fixture.url).await;
    // rmcp's HTTP client does not notice the dead server on its own (the call stays pending),
    // so the call runs in the background and the test watches the process instead.
    let peer = client.peer().clone();
    let pending_call =
        tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("crash")).await });
    let status = fixture.child.wait().await.unwrap();
    pending_call.abort();
    assert_eq!(status.code(), Some(CRASH_EXIT_CODE));
    // The stderr reader finishes on its own once the pipe closes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while fixture.stderr_tail().last().map(String::as_str) != Some(CRASH_STDERR_LINE) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stderr: {:?}",
            fixture.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn exit_during_start_over_http_never_listens() {
    let error = try_spawn_http_fixture("exit-during-start", &[], &[])
        .await
        .expect_err("the fixture exits before listening");
    let TestkitError::ExitedBeforeListening { status, stderr, .. } = error else {
        panic!("unexpected error {error}");
    };
    assert!(
        status.contains(&EXIT_DURING_START_CODE.to_string()),
        "{status}"
    );
    assert_eq!(stderr, EXIT_DURING_START_LINE);
}

#[tokio::test]
async fn hang_over_http_accepts_but_never_answers() {
    let mut fixture = spawn_http_fixture("hang").await;
    let port = fixture.port();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Ending the fixture closes the connection: whatever it wrote is then readable.
    fixture.child.start_kill().unwrap();
    fixture.child.wait().await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "hang answered: {:?}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test]
async fn garbage_over_http_serves_an_html_page() {
    let fixture = spawn_http_fixture("garbage").await;
    let port = fixture.port();
    let answer = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("content-type: text/html"),
        "{answer}"
    );
    assert!(answer.contains("<!DOCTYPE html>"));
}

#[tokio::test]
async fn slow_start_over_http_listens_after_its_delay() {
    let fixture = try_spawn_http_fixture("slow-start", &["--delay-ms", "200"], &[])
        .await
        .unwrap();
    let (client, _seen) = connect_http(&fixture.url).await;
    assert_eq!(
        first_text(&call(&client, "echo", json!({"text": "ok"})).await),
        "ok"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_names_and_big_result_over_http() {
    let fixture = spawn_http_fixture("bad-names").await;
    let (client, _seen) = connect_http(&fixture.url).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(tools.len(), warden_testkit::fixtures::BAD_TOOL_NAMES.len());
    client.cancel().await.unwrap();

    let fixture = spawn_http_fixture("big-result").await;
    let (client, _seen) = connect_http(&fixture.url).await;
    let result = call(&client, "big_result", json!({"bytes": 1_000_000})).await;
    assert_eq!(first_text(&result).len(), 1_000_000);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_and_http_fixtures_agree_on_the_echo_tools() {
    let fixture = spawn_http_fixture("echo").await;
    let (http_client, _seen) = connect_http(&fixture.url).await;
    let (stdio_client, _seen2, _child) = connect_stdio("echo", &[]).await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect()
    };
    assert_eq!(
        names(http_client.peer().list_all_tools().await.unwrap()),
        names(stdio_client.peer().list_all_tools().await.unwrap())
    );
    http_client.cancel().await.unwrap();
    stdio_client.cancel().await.unwrap();
}

/// Sends one HTTP/1.1 request with `Connection: close` and returns the whole answer.
async fn raw_http(port: u16, head: String, body: &'static str) -> String {
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "{head}Host: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn http_status_answers_every_request_with_its_status() {
    for (status, reason) in [(404, "404 Not Found"), (503, "503 Service Unavailable")] {
        let fixture =
            try_spawn_http_fixture("http-status", &["--status", &status.to_string()], &[])
                .await
                .unwrap();
        let answer = raw_http(
            fixture.port(),
            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n".to_owned(),
            "{}",
        )
        .await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {reason}")),
            "{answer}"
        );
    }
    let fixture = try_spawn_http_fixture("http-status", &["--status", "401"], &[])
        .await
        .unwrap();
    let answer = raw_http(fixture.port(), "GET /mcp HTTP/1.1\r\n".to_owned(), "").await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{answer}"
    );
}

#[tokio::test]
async fn http_status_refuses_stdio() {
    let (program, args) = warden_testkit::fixture_command("http-status");
    let output = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("only serves HTTP"));
}

#[tokio::test]
async fn a_restarted_fixture_on_the_same_port_has_forgotten_the_session() {
    const HEAD: &str = "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    let first = spawn_http_fixture("echo").await;
    let port = first.port();
    let answer = raw_http(port, HEAD.to_owned(), INITIALIZE).await;
    let session = answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {answer}"));
    let with_session = format!("{HEAD}Mcp-Session-Id: {session}\r\n");
    let answer = raw_http(port, with_session.clone(), INITIALIZED).await;
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let answer = raw_http(port, with_session.clone(), LIST).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(first);

    // The old process may not have released the port yet: the helper retries until bound.
    let second =
        warden_testkit::spawn_http_fixture_rebinding("echo", &format!("127.0.0.1:{port}")).await;
    assert_eq!(second.port(), port);
    let answer = raw_http(port, with_session, LIST).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}
