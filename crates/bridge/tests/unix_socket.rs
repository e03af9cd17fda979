//! The bridge's Unix socket mode against a real host: the socket (0600) in a private directory
//! (0700), the token, the size limit and the handshake over the socket, and teardown on stop and
//! on drop.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_bridge::{Bridge, BridgeListen, MAX_REQUEST_BYTES, PROTOCOL_VERSION, UNIX_URL_PREFIX};
use warden_host::{Host, HostOptions};

fn host(dir: &Path) -> Arc<Host> {
    let paths = warden_config::Paths::under_root(dir);
    let options = HostOptions::new(paths, dir.to_path_buf());
    Host::open(&warden_config::LoadedConfig::default(), options).unwrap()
}

/// One HTTP/1.1 exchange over the socket; returns the status code and the body.
async fn exchange(socket: &Path, head: String, body: Vec<u8>) -> (u16, String) {
    let socket = socket.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        (status, body)
    })
    .await
    .unwrap()
}

fn get(path: &str, token: Option<&str>) -> String {
    let auth = token
        .map(|token| format!("authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n{auth}connection: close\r\n\r\n")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_bridge_is_private_authenticated_limited_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let root = dir.path().join("run");
    let bridge = Bridge::start_on(
        host.clone(),
        BridgeListen::UnixSocket {
            roots: vec![root.clone()],
        },
    )
    .unwrap();
    let socket: PathBuf = bridge.socket_path().unwrap().to_path_buf();
    let private = socket.parent().unwrap().to_path_buf();
    assert_eq!(
        bridge.url(),
        format!("{UNIX_URL_PREFIX}{}", socket.display())
    );
    assert_eq!(private.parent().unwrap(), root);
    assert_eq!(mode(&socket), 0o600, "the socket is owner-only");
    assert_eq!(mode(&private), 0o700, "its directory is private");
    let exported = bridge.environment();
    assert_eq!(
        exported[0],
        ("WARDEN_BRIDGE_URL".into(), bridge.url().into())
    );
    let token = bridge.token().expose().to_owned();

    let (status, body) = exchange(&socket, get("/v1/handshake", None), Vec::new()).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = exchange(
        &socket,
        get("/v1/handshake", Some(&"0".repeat(64))),
        Vec::new(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, body) = exchange(&socket, get("/v1/handshake", Some(&token)), Vec::new()).await;
    assert_eq!(status, 200, "{body}");
    let handshake: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(handshake["protocol"], PROTOCOL_VERSION);
    assert_eq!(handshake["session"], host.session_id());

    // Over the limit: refused from the announced length, before the body is read.
    let big = format!(
        "POST /v1/search HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        MAX_REQUEST_BYTES + 1
    );
    let (status, body) = exchange(&socket, big, Vec::new()).await;
    assert_eq!(status, 413, "{body}");
    // Under the limit, a request with a body is read and answered.
    let search = br#"{"query":"anything","limit":3}"#.to_vec();
    let head = format!(
        "POST /v1/search HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        search.len()
    );
    let (status, body) = exchange(&socket, head, search).await;
    assert_eq!(status, 200, "{body}");

    // Stopping removes the socket and its directory at once: nobody can connect any more.
    bridge.stop();
    assert!(!socket.exists());
    assert!(!private.exists());
    assert!(UnixStream::connect(&socket).is_err());
    drop(bridge);
    assert!(root.exists(), "only the bridge's own directory goes");
}

#[tokio::test]
async fn dropping_the_bridge_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = Bridge::start_on(
        host(dir.path()),
        BridgeListen::UnixSocket {
            roots: vec![dir.path().join("run")],
        },
    )
    .unwrap();
    let socket = bridge.socket_path().unwrap().to_path_buf();
    assert!(socket.exists());
    drop(bridge);
    assert!(!socket.exists());
    assert!(!socket.parent().unwrap().exists());
}

#[tokio::test]
async fn two_bridges_get_separate_private_directories() {
    let dir = tempfile::tempdir().unwrap();
    let listen = BridgeListen::UnixSocket {
        roots: vec![dir.path().join("run")],
    };
    let first = Bridge::start_on(host(dir.path()), listen.clone()).unwrap();
    let second = Bridge::start_on(host(dir.path()), listen).unwrap();
    assert_ne!(first.socket_path(), second.socket_path());
    assert_ne!(first.token(), second.token());
}

#[tokio::test]
async fn the_loopback_bridge_has_no_socket() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = Bridge::start(host(dir.path())).unwrap();
    assert!(bridge.url().starts_with("http://127.0.0.1:"));
    assert_eq!(bridge.socket_path(), None);
}
