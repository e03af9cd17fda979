//! Stored tokens are bound to the server's URL as well as its name: a token stored for `srv` at
//! one URL is never sent when `srv` is configured at another, is used again back at its own URL,
//! and is revoked only at the authorization server that minted it. A token file from before
//! URLs were recorded keeps working for its name and records the URL at its next refresh.

use warden_oauth::{
    LoginOptions, OAuthError, OAuthSettings, RedirectMode, TokenStore, login, logout,
    stored_manager,
};

use crate::support;

fn headless() -> LoginOptions {
    LoginOptions::new(RedirectMode::Headless { port: None })
}

/// What a connection does with the store: the stored manager's token when it has one (a
/// "needs login" answer means none), sent as the bearer of one request to the server's URL.
async fn request_as_a_connection_would(settings: &OAuthSettings) -> Option<OAuthError> {
    let (token, refusal) = match stored_manager(settings).await {
        Ok(manager) => (Some(manager.get_access_token().await.unwrap()), None),
        Err(error) if error.needs_login() => (None, Some(error)),
        Err(error) => panic!("unexpected: {error}"),
    };
    let client = warden_net::http_client().loopback().build().unwrap();
    let mut request = client.post(&settings.server_url).body("{}");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap();
    refusal
}

/// The Authorization headers the resource at `path` received, in order.
fn authorizations_at(server: &support::AuthServer, path: &str) -> Vec<Option<String>> {
    server
        .seen()
        .resource_requests
        .iter()
        .filter(|(seen, _)| seen == path)
        .map(|(_, authorization)| authorization.clone())
        .collect()
}

#[tokio::test]
async fn a_token_stored_for_one_url_is_not_sent_when_the_name_points_at_another() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let at_a = OAuthSettings::new(
        "srv",
        server.resource(),
        TokenStore::for_server(dir.path(), "srv"),
    );
    let at_b = OAuthSettings::new(
        "srv",
        server.other_resource(),
        TokenStore::for_server(dir.path(), "srv"),
    );
    login(&at_a, headless(), &|_| {}).await.unwrap();
    assert_eq!(
        at_a.store.read().unwrap().server_url.as_deref(),
        Some(server.resource().as_str()),
        "the URL is recorded with the tokens"
    );

    let refusal = request_as_a_connection_would(&at_b)
        .await
        .expect("no token for the other URL");
    assert_eq!(
        refusal.to_string(),
        format!(
            "the stored login of `srv` is for {a}, not for its configured URL {b}: run warden mcp login srv to log in at this URL",
            a = server.resource(),
            b = server.other_resource()
        )
    );
    assert_eq!(authorizations_at(&server, "/other/mcp"), vec![None]);
    assert!(!at_b.has_usable_token());

    // Back at its own URL the same token is used: nothing was dropped.
    assert!(at_a.has_usable_token());
    assert!(request_as_a_connection_would(&at_a).await.is_none());
    // (The login's probe before it was unauthenticated.)
    let sent = authorizations_at(&server, "/mcp");
    let last = sent
        .last()
        .unwrap()
        .as_deref()
        .expect("a bearer at its own URL");
    let bearer = last.strip_prefix("Bearer ").unwrap();
    assert!(server.seen().live_access.contains(bearer));

    // A login at the other URL rebinds the name to it.
    login(&at_b, headless(), &|_| {}).await.unwrap();
    assert!(at_b.has_usable_token());
    assert!(!at_a.has_usable_token());
}

#[tokio::test]
async fn a_token_file_from_before_urls_were_recorded_works_and_records_the_url_at_refresh() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "srv");
    let settings = OAuthSettings::new("srv", server.resource(), store.clone());
    login(&settings, headless(), &|_| {}).await.unwrap();
    store
        .update(|file| file.server_url = None)
        .expect("an older file");

    let manager = stored_manager(&settings)
        .await
        .expect("the older file serves its name");
    assert!(store.read().unwrap().server_url.is_none());
    manager.refresh_token().await.unwrap();
    assert_eq!(
        store.read().unwrap().server_url.as_deref(),
        Some(server.resource().as_str())
    );
}

#[tokio::test]
async fn logout_revokes_only_at_the_authorization_server_that_minted_the_tokens() {
    let minted = support::start().await;
    let other = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let at_minted = OAuthSettings::new(
        "srv",
        minted.resource(),
        TokenStore::for_server(dir.path(), "srv"),
    );
    login(&at_minted, headless(), &|_| {}).await.unwrap();

    // The name now points at another server: logging out still revokes where the tokens came
    // from, and the other server never sees them.
    let at_other = OAuthSettings::new(
        "srv",
        other.resource(),
        TokenStore::for_server(dir.path(), "srv"),
    );
    let report = logout(&at_other).await.unwrap();
    assert_eq!(report.revoked, 2, "{report:?}");
    assert_eq!(minted.seen().revoked.len(), 2);
    assert!(other.seen().revoked.is_empty());
    assert!(other.seen().token_requests.is_empty());
    assert!(!at_other.store.path().exists());
}
