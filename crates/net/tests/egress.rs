//! A guarded client against tiny servers on loopback only: the operator allows 127.0.0.1, and a
//! sentinel listener on 127.0.0.2 (a forbidden loopback address, so even a wrong guard touches
//! nothing but this machine) must never see a connection — whether a name resolves there, is
//! rebound there after a first good answer, or a redirect points there — and a proxy from the
//! environment is never used.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use warden_net::{
    AddressClass, EgressError, EgressGuard, EgressRules, StaticResolver, http_client,
};

/// A listener that counts the connections it accepts and answers every request with `response`.
struct Server {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Server {
    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn bind(ip: &str, port: u16) -> Option<TcpListener> {
    TcpListener::bind((ip.parse::<IpAddr>().unwrap(), port))
        .await
        .ok()
}

fn serve(listener: TcpListener, response: String) -> Server {
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let response = response.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 1024];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&chunk[..read]),
                    }
                }
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Server { port, connections }
}

fn answer(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn redirect_to(location: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// The sentinel on 127.0.0.2: it answers, so a request that wrongly reaches it would succeed.
async fn sentinel() -> Server {
    let listener = bind("127.0.0.2", 0)
        .await
        .expect("127.0.0.2 is loopback on Linux");
    serve(listener, answer("sentinel"))
}

/// A server on 127.0.0.1 and the sentinel on 127.0.0.2, on the same port (one URL, two answers).
async fn pair(response: String) -> (Server, Server) {
    for _ in 0..50 {
        let allowed = bind("127.0.0.1", 0).await.unwrap();
        let port = allowed.local_addr().unwrap().port();
        if let Some(forbidden) = bind("127.0.0.2", port).await {
            return (
                serve(allowed, response),
                serve(forbidden, answer("sentinel")),
            );
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// The operator allows 127.0.0.1 only; `allowed.test` is 127.0.0.1, `forbidden.test` 127.0.0.2.
fn guard() -> EgressGuard {
    let resolver = StaticResolver::new([
        ("allowed.test", vec![ip("127.0.0.1")]),
        ("forbidden.test", vec![ip("127.0.0.2")]),
        ("both.test", vec![ip("127.0.0.1"), ip("127.0.0.2")]),
    ]);
    EgressGuard::with_resolver(
        EgressRules::parse(["127.0.0.1"]).unwrap(),
        Arc::new(resolver),
    )
}

/// The guard's error in a request error's source chain.
fn egress_error(error: &reqwest::Error) -> &EgressError {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(candidate) = current {
        if let Some(found) = candidate.downcast_ref::<EgressError>() {
            return found;
        }
        current = candidate.source();
    }
    panic!("no egress error in {error:?}");
}

#[tokio::test]
async fn a_name_resolving_to_a_forbidden_address_is_refused_and_an_allowed_one_is_reached() {
    let (allowed, sentinel) = pair(answer("allowed")).await;
    let client = http_client().egress_guard(guard()).build().unwrap();

    let body = client
        .get(format!("http://allowed.test:{}/", allowed.port))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "allowed");

    for name in ["forbidden.test", "both.test"] {
        let error = client
            .get(format!("http://{name}:{}/", sentinel.port))
            .send()
            .await
            .unwrap_err();
        let refused = egress_error(&error);
        assert_eq!(refused.class(), Some(AddressClass::Loopback), "{refused}");
        assert_eq!(refused.address(), Some(ip("127.0.0.2")));
        assert!(refused.to_string().contains(name), "{refused}");
    }
    assert_eq!(sentinel.connections(), 0);
    assert_eq!(allowed.connections(), 1);
}

#[tokio::test]
async fn a_name_rebound_to_a_forbidden_address_is_refused_on_the_next_connection() {
    let (allowed, sentinel) = pair(answer("first")).await;
    let lookups = Arc::new(AtomicUsize::new(0));
    let counted = lookups.clone();
    let resolver = StaticResolver::from_fn(move |host| {
        (host == "rebind.test").then(|| {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                vec![ip("127.0.0.1")]
            } else {
                vec![ip("127.0.0.2")]
            }
        })
    });
    let guard = EgressGuard::with_resolver(
        EgressRules::parse(["127.0.0.1"]).unwrap(),
        Arc::new(resolver),
    );
    let client = http_client().egress_guard(guard).build().unwrap();
    let url = format!("http://rebind.test:{}/", allowed.port);

    let first = client.get(&url).send().await.unwrap();
    assert_eq!(first.text().await.unwrap(), "first");
    // The server closed that connection (`connection: close`): the next request connects
    // afresh, looks the name up again, and the new answer is checked.
    let error = client.get(&url).send().await.unwrap_err();
    let refused = egress_error(&error);
    assert_eq!(refused.address(), Some(ip("127.0.0.2")));
    assert_eq!(refused.class(), Some(AddressClass::Loopback));
    assert_eq!(lookups.load(Ordering::SeqCst), 2);
    assert_eq!(sentinel.connections(), 0);
    assert_eq!(allowed.connections(), 1);
}

#[tokio::test]
async fn a_redirect_to_a_forbidden_address_is_refused_and_never_dialled() {
    let sentinel = sentinel().await;
    let to_literal = serve(
        bind("127.0.0.1", 0).await.unwrap(),
        redirect_to(&format!("http://127.0.0.2:{}/", sentinel.port)),
    );
    let to_mapped = serve(
        bind("127.0.0.1", 0).await.unwrap(),
        redirect_to(&format!("http://[::ffff:127.0.0.2]:{}/", sentinel.port)),
    );
    let to_name = serve(
        bind("127.0.0.1", 0).await.unwrap(),
        redirect_to(&format!("http://forbidden.test:{}/", sentinel.port)),
    );

    // Following redirects (reqwest's usual limit): a forbidden literal target is refused.
    let client = http_client()
        .egress_guard(guard())
        .follow_redirects(10)
        .build()
        .unwrap();
    for server in [&to_literal, &to_mapped] {
        let error = client
            .get(format!("http://127.0.0.1:{}/start", server.port))
            .send()
            .await
            .unwrap_err();
        assert!(error.is_redirect(), "{error:?}");
        let refused = egress_error(&error);
        assert_eq!(refused.class(), Some(AddressClass::Loopback), "{refused}");
    }
    // Following none (warden's default): the redirect comes back as the response.
    let not_following = http_client().egress_guard(guard()).build().unwrap();
    for server in [&to_literal, &to_mapped, &to_name] {
        let response = not_following
            .get(format!("http://127.0.0.1:{}/start", server.port))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::FOUND);
    }
    // A name is checked when the client connects to it.
    let error = client
        .get(format!("http://127.0.0.1:{}/start", to_name.port))
        .send()
        .await
        .unwrap_err();
    assert_eq!(egress_error(&error).address(), Some(ip("127.0.0.2")));
    assert_eq!(sentinel.connections(), 0);
}

#[tokio::test]
async fn allowed_redirects_are_followed_within_the_limit_or_returned() {
    let target = serve(bind("127.0.0.1", 0).await.unwrap(), answer("target"));
    let hop = serve(
        bind("127.0.0.1", 0).await.unwrap(),
        redirect_to(&format!("http://allowed.test:{}/end", target.port)),
    );
    let following = http_client()
        .egress_guard(guard())
        .follow_redirects(10)
        .build()
        .unwrap();
    let response = following
        .get(format!("http://127.0.0.1:{}/", hop.port))
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "target");

    let not_following = http_client().egress_guard(guard()).build().unwrap();
    let response = not_following
        .get(format!("http://127.0.0.1:{}/", hop.port))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FOUND);

    let looping = serve(bind("127.0.0.1", 0).await.unwrap(), redirect_to("/again"));
    let limited = http_client()
        .egress_guard(guard())
        .follow_redirects(2)
        .build()
        .unwrap();
    let error = limited
        .get(format!("http://127.0.0.1:{}/", looping.port))
        .send()
        .await
        .unwrap_err();
    assert!(matches!(
        egress_error(&error),
        EgressError::TooManyRedirects { max: 2 }
    ));
    assert_eq!(looping.connections(), 3);
}

#[tokio::test]
async fn a_forbidden_literal_url_is_refused_before_any_connection() {
    let sentinel = sentinel().await;
    let guard = guard();
    for url in [
        format!("http://127.0.0.2:{}/", sentinel.port),
        format!("http://[::ffff:127.0.0.2]:{}/", sentinel.port),
        format!("http://[::1]:{}/", sentinel.port),
    ] {
        let url = reqwest::Url::parse(&url).unwrap();
        let error = guard.check_literal(&url).unwrap_err();
        assert_eq!(error.class(), Some(AddressClass::Loopback), "{url}");
        let error = guard.check_url(&url).await.unwrap_err();
        assert_eq!(error.class(), Some(AddressClass::Loopback), "{url}");
    }
    let allowed = reqwest::Url::parse("http://127.0.0.1:9/").unwrap();
    guard.check_literal(&allowed).unwrap();
    assert_eq!(sentinel.connections(), 0);
}

/// Set in the child process of the proxy test.
const PROXY_CHILD: &str = "WARDEN_EGRESS_TEST_PROXY_CHILD";

/// Runs only as the child of [`a_guarded_client_ignores_proxies_from_the_environment`], with
/// `HTTP_PROXY` and `ALL_PROXY` naming the parent's listener: an unguarded client goes through
/// the proxy, a guarded one connects straight to the checked address.
#[tokio::test]
async fn proxy_child() {
    if std::env::var_os(PROXY_CHILD).is_none() {
        return;
    }
    let target = serve(bind("127.0.0.1", 0).await.unwrap(), answer("direct"));
    let url = format!("http://allowed.test:{}/", target.port);

    let unguarded = http_client().build().unwrap();
    let through_proxy = unguarded.get(&url).send().await.unwrap();
    assert_eq!(through_proxy.text().await.unwrap(), "proxy");

    let guarded = http_client().egress_guard(guard()).build().unwrap();
    let direct = guarded.get(&url).send().await.unwrap();
    assert_eq!(direct.text().await.unwrap(), "direct");
    assert_eq!(target.connections(), 1);
}

#[tokio::test]
async fn a_guarded_client_ignores_proxies_from_the_environment() {
    assert!(http_client().egress_guard(guard()).ignores_proxies());
    assert!(!http_client().ignores_proxies());
    if std::env::var_os(PROXY_CHILD).is_some() {
        return;
    }
    let proxy = serve(bind("127.0.0.1", 0).await.unwrap(), answer("proxy"));
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "proxy_child", "--nocapture", "--test-threads=1"])
        .env(PROXY_CHILD, "1")
        .env("HTTP_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("REQUEST_METHOD")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The unguarded client's one request; none from the guarded client.
    assert_eq!(proxy.connections(), 1);
}
