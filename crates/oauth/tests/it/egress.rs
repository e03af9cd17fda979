//! OAuth under an egress guard, against the local authorization server on 127.0.0.1 (which the
//! operator allows): a login, a reconnect and a refresh work through the guarded clients, and a
//! server URL, a token endpoint or protected-resource metadata on a forbidden address is refused
//! before anything is sent there. The forbidden address is 127.0.0.2 (still loopback), where a
//! sentinel listener must see no connection.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use warden_net::{AddressClass, EgressGuard, EgressRules, StaticResolver};
use warden_oauth::{
    LoginOptions, OAuthError, OAuthSettings, RedirectMode, TokenStore, login, logout,
    probe_with_guard, stored_manager,
};

use crate::support;

/// The operator allows 127.0.0.1; `auth.test` is 127.0.0.1, `forbidden.test` 127.0.0.2.
fn guard() -> EgressGuard {
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    let resolver = StaticResolver::new([
        ("auth.test", vec![ip("127.0.0.1")]),
        ("forbidden.test", vec![ip("127.0.0.2")]),
    ]);
    EgressGuard::with_resolver(
        EgressRules::parse(["127.0.0.1"]).unwrap(),
        Arc::new(resolver),
    )
}

/// A listener on 127.0.0.2 that counts connections (and drops them).
async fn sentinel() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, connections)
}

fn headless() -> LoginOptions {
    LoginOptions::new(RedirectMode::Headless { port: None })
}

fn refused_class(error: &OAuthError) -> AddressClass {
    error
        .egress()
        .and_then(warden_net::EgressError::class)
        .unwrap_or_else(|| panic!("not an egress refusal: {error:?}"))
}

#[tokio::test]
async fn a_guarded_login_reconnect_and_logout_work_against_an_allowed_server() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    let settings =
        OAuthSettings::new("demo", server.resource(), store.clone()).with_egress_guard(guard());

    let manager = login(&settings, headless(), &|_| {}).await.unwrap();
    let token = manager.get_access_token().await.unwrap();
    assert!(server.seen().live_access.contains(&token));
    assert_eq!(server.seen().registrations, 1);

    let again = stored_manager(&settings).await.unwrap();
    assert_eq!(again.get_access_token().await.unwrap(), token);

    let report = logout(&settings).await.unwrap();
    assert!(report.had_tokens);
    assert_eq!(report.revoked, 2, "{report:?}");
}

#[tokio::test]
async fn a_server_url_on_a_forbidden_address_is_refused_before_any_request() {
    let (port, connections) = sentinel().await;
    let dir = tempfile::tempdir().unwrap();
    for url in [
        format!("http://127.0.0.2:{port}/mcp"),
        // https: plain http to a name off loopback is refused before the guard is asked.
        format!("https://forbidden.test:{port}/mcp"),
        format!("https://[::ffff:127.0.0.2]:{port}/mcp"),
    ] {
        let settings = OAuthSettings::new(
            "tenant",
            url.clone(),
            TokenStore::for_server(dir.path(), "tenant"),
        )
        .with_egress_guard(guard());
        let Err(error) = login(&settings, headless(), &|_| {}).await else {
            panic!("a login at {url}");
        };
        assert_eq!(refused_class(&error), AddressClass::Loopback, "{error}");
        assert!(error.to_string().contains("127.0.0.2"), "{error}");
        assert!(
            error.to_string().contains("[service] tenant_hosts"),
            "{error}"
        );
        let error = probe_with_guard(&url, Some(&guard())).await.unwrap_err();
        assert_eq!(refused_class(&error), AddressClass::Loopback, "{error}");
        let error = warden_oauth::authorization_manager(&url, Some(&guard()))
            .await
            .err();
        if url.contains("forbidden.test") {
            // A name is checked when a request connects to it.
            assert!(error.is_none());
        } else {
            assert_eq!(refused_class(&error.unwrap()), AddressClass::Loopback);
        }
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_token_endpoint_on_a_forbidden_address_is_refused() {
    let (port, connections) = sentinel().await;
    for token_endpoint in [
        format!("http://127.0.0.2:{port}/token"),
        format!("https://forbidden.test:{port}/token"),
    ] {
        let server = support::start().await;
        *server.token_endpoint_override.lock().unwrap() = Some(token_endpoint.clone());
        let dir = tempfile::tempdir().unwrap();
        let settings = OAuthSettings::new(
            "tenant",
            server.resource(),
            TokenStore::for_server(dir.path(), "tenant"),
        )
        .with_egress_guard(guard());
        let Err(error) = login(&settings, headless(), &|_| {}).await else {
            panic!("a login whose code would go to {token_endpoint}");
        };
        assert_eq!(refused_class(&error), AddressClass::Loopback, "{error}");
        let seen = server.seen();
        assert!(seen.authorize_queries.is_empty(), "nothing was authorized");
        assert_eq!(seen.registrations, 0, "no client was registered");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn resource_metadata_on_a_forbidden_address_is_never_fetched() {
    let (port, connections) = sentinel().await;
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let settings = OAuthSettings::new(
        "tenant",
        server.resource(),
        TokenStore::for_server(dir.path(), "tenant"),
    )
    .with_egress_guard(guard());
    // rmcp allows a loopback metadata URL for a loopback server; the guard does not.
    let mut options = headless();
    options.challenge = Some(format!(
        r#"Bearer resource_metadata="http://127.0.0.2:{port}/.well-known/oauth-protected-resource/mcp""#
    ));
    let Err(error) = login(&settings, options, &|_| {}).await else {
        panic!("a login with metadata on 127.0.0.2");
    };
    assert_eq!(refused_class(&error), AddressClass::Loopback, "{error}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}
