//! The built client against a tiny local server: a redirect comes back as the 302 itself (its
//! target is never asked), and every request carries warden's user agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

/// A server answering every request with `response`; it records each request's head.
async fn serve(response: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let recorded = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buffer.windows(4).any(|window| window == b"\r\n\r\n") {
                let read = stream.read(&mut chunk).await.unwrap();
                if read == 0 {
                    break;
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            recorded
                .lock()
                .await
                .push(String::from_utf8_lossy(&buffer).into_owned());
            stream.write_all(response.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        }
    });
    (base, heads)
}

#[tokio::test]
async fn a_redirect_is_returned_not_followed() {
    let (base, heads) = serve(
        "HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    let client = warden_net::http_client().loopback().build().unwrap();
    let response = client.get(format!("{base}/start")).send().await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FOUND);
    assert_eq!(response.headers()["location"], "/elsewhere");
    let heads = heads.lock().await;
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /start "), "{}", heads[0]);
}

#[tokio::test]
async fn every_request_says_warden_and_its_version() {
    let (base, heads) =
        serve("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
    let client = warden_net::http_client().build().unwrap();
    let response = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "ok");
    let heads = heads.lock().await;
    let expected = format!("user-agent: warden/{}\r\n", env!("CARGO_PKG_VERSION"));
    assert!(
        heads[0].to_ascii_lowercase().contains(&expected),
        "{}",
        heads[0]
    );
}
