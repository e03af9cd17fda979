//! A tenant's HTTP server under an egress guard, through the runtime: the operator allows
//! 127.0.0.1 only, and a sentinel listener on 127.0.0.2 (forbidden, still loopback) must never see
//! a connection, whether the url names it, a name resolves to it, or a redirect points at it.
//! (`tests/it/egress.rs` reaches real servers through the guard.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_net::{EgressGuard, EgressRules, StaticResolver};

use crate::{FailureKind, HttpAuth, McpError, McpRuntime, RuntimeOptions, ServerSpec};

/// The operator allows 127.0.0.1; the guard's resolver says `localhost` is `localhost_is` (plain
/// http is allowed to `localhost` only, so that is the name these tests use).
fn guard(localhost_is: &str) -> EgressGuard {
    let resolver =
        StaticResolver::new([("localhost", vec![localhost_is.parse::<IpAddr>().unwrap()])]);
    EgressGuard::with_resolver(
        EgressRules::parse(["127.0.0.1"]).unwrap(),
        Arc::new(resolver),
    )
}

/// A listener on `ip` that counts connections and answers each with `response`.
async fn listener(ip: &str, response: String) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let response = response.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 4096];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&chunk[..read]),
                    }
                }
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, connections)
}

/// The sentinel: it would answer like an MCP endpoint's 404, so a wrong guard shows.
async fn sentinel() -> (u16, Arc<AtomicUsize>) {
    listener(
        "127.0.0.2",
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
    )
    .await
}

async fn connect_error(spec: ServerSpec) -> McpError {
    let workspace = tempfile::tempdir().unwrap();
    let name = spec.name.clone();
    let runtime = McpRuntime::new(vec![spec], RuntimeOptions::new(workspace.path()));
    let error = runtime.connect(&name).await.expect_err("connect must fail");
    let status = runtime.server_status(&name).unwrap();
    assert_eq!(status.failure.as_deref(), Some(error.to_string().as_str()));
    assert!(!error.to_string().contains('\n'), "{error}");
    runtime.shutdown().await;
    error
}

#[tokio::test]
async fn a_tenant_url_on_a_forbidden_address_fails_to_connect_and_is_never_dialled() {
    let (port, connections) = sentinel().await;
    let locks = tempfile::tempdir().unwrap();
    for url in [
        format!("http://127.0.0.2:{port}/mcp"),
        format!("http://localhost:{port}/mcp"),
    ] {
        for auth in [
            HttpAuth::Unconfigured,
            HttpAuth::OAuth(warden_oauth::OAuthSettings::new(
                "tenant",
                url.clone(),
                warden_oauth::TokenStore::in_memory(locks.path().join("tenant"), "tenant"),
            )),
        ] {
            let spec = ServerSpec::http("tenant", url.clone())
                .with_auth(auth)
                .with_egress_guard(guard("127.0.0.2"));
            let error = connect_error(spec).await;
            assert_eq!(error.kind(), FailureKind::EgressRefused, "{error}");
            let line = error.to_string();
            assert!(
                line.starts_with("MCP tenant: egress refused for "),
                "{line}"
            );
            assert!(line.contains("127.0.0.2"), "{line}");
            assert!(line.contains("loopback"), "{line}");
            assert!(line.contains("[service] tenant_hosts"), "{line}");
        }
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_redirect_to_a_forbidden_address_is_not_followed() {
    let (sentinel_port, connections) = sentinel().await;
    let (port, _) = listener(
        "127.0.0.1",
        format!(
            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.2:{sentinel_port}/mcp\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    )
    .await;
    let spec = ServerSpec::http("tenant", format!("http://127.0.0.1:{port}/mcp"))
        .with_egress_guard(guard("127.0.0.1"));
    let error = connect_error(spec).await;
    assert_eq!(error.kind(), FailureKind::Redirected, "{error}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}
