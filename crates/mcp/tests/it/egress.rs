//! Tenants' servers under an egress guard that allows 127.0.0.1, against real servers on it: a
//! name the guard resolves reaches the echo fixture, and an OAuth server logs in, connects and
//! refreshes its token with every request through the guard. (The refusals, with a sentinel on
//! 127.0.0.2 that must see nothing, are the crate's unit tests in `src/egress_tests.rs`.)

use std::net::IpAddr;
use std::sync::Arc;

use warden_mcp::{HttpAuth, McpRuntime, RuntimeOptions, ServerSpec};
use warden_net::{EgressGuard, EgressRules, StaticResolver};
use warden_oauth::{LoginOptions, OAuthSettings, RedirectMode, TokenStore};

/// The operator allows 127.0.0.1; the guard's resolver says `localhost` is 127.0.0.1 (plain http
/// goes to `localhost` only, so that is the name used).
fn guard() -> EgressGuard {
    let resolver =
        StaticResolver::new([("localhost", vec!["127.0.0.1".parse::<IpAddr>().unwrap()])]);
    EgressGuard::with_resolver(
        EgressRules::parse(["127.0.0.1"]).unwrap(),
        Arc::new(resolver),
    )
}

#[tokio::test]
async fn an_allowed_name_reaches_a_real_server_through_the_guarded_client() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let url = fixture.url.replace("127.0.0.1", "localhost");
    let workspace = tempfile::tempdir().unwrap();
    let spec = ServerSpec::http("tenant", url).with_egress_guard(guard());
    let runtime = McpRuntime::new(vec![spec], RuntimeOptions::new(workspace.path()));
    runtime.connect("tenant").await.unwrap();
    assert!(!runtime.server_tools("tenant").await.unwrap().is_empty());
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_guarded_oauth_server_logs_in_connects_and_refreshes_through_the_guard() {
    warden_mcp::install_crypto_provider();
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let gate = warden_testkit::oauth_gate::spawn_oauth_gate(&fixture.url).await;
    let state = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(state.path(), "tenant");
    let settings = OAuthSettings::new("tenant", gate.url(), store.clone());
    // The service's sign-in: the settings carry the guard.
    warden_oauth::login(
        &settings.clone().with_egress_guard(guard()),
        LoginOptions::new(RedirectMode::Headless { port: None }),
        &|_| {},
    )
    .await
    .unwrap();
    // Only the refresh token is good now: connecting refreshes it through the guarded manager.
    gate.issued.lock().unwrap().access.clear();

    // The spec carries the guard; its OAuth settings get it from the spec.
    let spec = ServerSpec::http("tenant", gate.url())
        .with_auth(HttpAuth::OAuth(settings))
        .with_egress_guard(guard());
    let workspace = tempfile::tempdir().unwrap();
    let runtime = McpRuntime::new(vec![spec], RuntimeOptions::new(workspace.path()));
    runtime.connect("tenant").await.unwrap();
    assert!(!runtime.server_tools("tenant").await.unwrap().is_empty());
    assert_eq!(gate.issued.lock().unwrap().refreshes, 1);
    runtime.shutdown().await;
}
