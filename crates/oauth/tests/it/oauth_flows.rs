//! OAuth flows against a real local authorization server: login (headless and loopback),
//! reconnect from the store, refresh under the cross-process lock, atomic 0600 writes that
//! survive a kill, logout revocation, client credentials (JWT), provisioned tokens, redaction.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use warden_oauth::{
    ClientCredentials, LoginOptions, OAuthSettings, ProvisionedCredentials, ProvisionedEnv,
    ProvisionedValues, RedirectMode, Secret, TokenFile, TokenStore, client_credentials_token,
    login, logout, stored_manager,
};

use crate::support;

fn settings(server: &support::AuthServer, store: TokenStore) -> OAuthSettings {
    OAuthSettings::new("demo", server.resource(), store)
}

fn headless() -> LoginOptions {
    LoginOptions::new(RedirectMode::Headless { port: None })
}

fn stored_refresh_token(store: &TokenStore) -> String {
    let file = store.read().unwrap();
    let tokens = file.credentials.unwrap().token_response.unwrap();
    tokens.refresh_token().unwrap().secret().clone()
}

#[tokio::test]
async fn headless_login_stores_tokens_0600_and_a_reconnect_reads_them() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    let settings = settings(&server, store.clone());

    let manager = login(&settings, headless(), &|_| {}).await.unwrap();
    let token = manager.get_access_token().await.unwrap();
    assert!(server.seen().live_access.contains(&token));

    let query = server.seen().authorize_queries[0].clone();
    assert_eq!(query["resource"], server.resource());
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["prompt"], "consent");
    assert_eq!(query["scope"], "mcp:read offline_access");
    assert_eq!(server.seen().registrations, 1);

    let mode = std::fs::metadata(store.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let file = store.read().unwrap();
    assert_eq!(file.issuer.as_deref(), Some(server.base.as_str()));
    assert_eq!(file.client.as_ref().unwrap().source, "dynamic");

    // Another handle on the same file (a later run, another process) picks the token up.
    let other_handle = OAuthSettings::new("demo", server.resource(), TokenStore::new(store.path()));
    let again = stored_manager(&other_handle).await.unwrap();
    assert_eq!(again.get_access_token().await.unwrap(), token);

    // A second login with the same issuer reuses the registered client.
    login(&settings, headless(), &|_| {}).await.unwrap();
    assert_eq!(server.seen().registrations, 1);
}

#[tokio::test]
async fn nothing_stored_means_needs_login() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let Err(error) = stored_manager(&settings(
        &server,
        TokenStore::for_server(dir.path(), "demo"),
    ))
    .await
    else {
        panic!("a manager without tokens");
    };
    assert!(error.needs_login());
    assert_eq!(error.to_string(), "needs login: run warden mcp login demo");
}

#[tokio::test]
async fn preregistered_client_skips_registration_and_uses_port_17801() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(&server, TokenStore::for_server(dir.path(), "demo"));
    settings.client_id = Some("given-client".into());
    settings.client_secret = Some(Secret::new("given-secret"));
    login(&settings, headless(), &|_| {}).await.unwrap();
    let seen = server.seen();
    assert_eq!(seen.registrations, 0);
    assert_eq!(seen.authorize_queries[0]["client_id"], "given-client");
    assert_eq!(
        seen.authorize_queries[0]["redirect_uri"],
        "http://127.0.0.1:17801/callback"
    );
    let basic = seen.token_requests[0]["authorization"].clone();
    assert!(
        basic.starts_with("Basic "),
        "secret goes by client_secret_basic"
    );
}

#[tokio::test]
async fn interactive_login_receives_the_redirect_on_the_loopback_listener() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(&server, TokenStore::for_server(dir.path(), "demo"));
    let shown = Arc::new(Mutex::new(Vec::new()));
    let shown_in = shown.clone();
    // The "browser": follow the authorization URL, redirects included, to the listener. A
    // browser follows redirects, which warden's own client never does: hence reqwest's default.
    #[allow(clippy::disallowed_methods)]
    let browser = move |url: &str| {
        shown_in.lock().unwrap().push(url.to_string());
        let url = url.to_string();
        tokio::spawn(async move { reqwest::get(url).await.map(drop) });
    };
    let options = LoginOptions::new(RedirectMode::Interactive { port: None });
    let manager = login(&settings, options, &browser).await.unwrap();
    let token = manager.get_access_token().await.unwrap();
    assert!(server.seen().live_access.contains(&token));
    let redirect_uri = server.seen().authorize_queries[0]["redirect_uri"].clone();
    assert!(redirect_uri.starts_with("http://127.0.0.1:"));
    assert!(redirect_uri.ends_with("/callback"));
    assert_eq!(shown.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn two_handles_refreshing_at_once_keep_one_valid_refresh_token() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    login(&settings(&server, store.clone()), headless(), &|_| {})
        .await
        .unwrap();
    *server.refresh_delay.lock().unwrap() = Duration::from_millis(300);

    let first = stored_manager(&settings(&server, TokenStore::new(store.path())))
        .await
        .unwrap();
    let second = stored_manager(&settings(&server, TokenStore::new(store.path())))
        .await
        .unwrap();
    let (a, b) = tokio::join!(first.refresh_token(), second.refresh_token());
    a.unwrap();
    b.unwrap();

    let seen = server.seen();
    assert_eq!(seen.refresh_rejections, 0);
    assert_eq!(seen.live_refresh.len(), 1);
    assert!(seen.live_refresh.contains(&stored_refresh_token(&store)));
}

#[tokio::test]
async fn two_processes_refreshing_at_once_keep_one_valid_refresh_token() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    login(&settings(&server, store.clone()), headless(), &|_| {})
        .await
        .unwrap();
    *server.refresh_delay.lock().unwrap() = Duration::from_millis(300);

    let exe = std::env::current_exe().unwrap();
    let spawn = || {
        tokio::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "oauth_flows::refresh_child",
                "--nocapture",
            ])
            .env("WARDEN_OAUTH_CHILD_STORE", store.path())
            .env("WARDEN_OAUTH_CHILD_URL", server.resource())
            .output()
    };
    let (one, two) = tokio::join!(spawn(), spawn());
    for output in [one.unwrap(), two.unwrap()] {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "child failed: {stdout}");
        assert!(stdout.contains("child refreshed"), "{stdout}");
    }
    let seen = server.seen();
    assert_eq!(seen.refresh_rejections, 0);
    assert_eq!(seen.live_refresh.len(), 1);
    assert!(seen.live_refresh.contains(&stored_refresh_token(&store)));
}

/// Child process of `two_processes_refreshing_at_once_keep_one_valid_refresh_token`.
#[tokio::test]
#[ignore = "run as a child process by two_processes_refreshing_at_once_keep_one_valid_refresh_token"]
async fn refresh_child() {
    let path = std::env::var("WARDEN_OAUTH_CHILD_STORE").unwrap();
    let url = std::env::var("WARDEN_OAUTH_CHILD_URL").unwrap();
    let settings = OAuthSettings::new("demo", url, TokenStore::new(path));
    let manager = stored_manager(&settings).await.unwrap();
    manager.refresh_token().await.unwrap();
    println!("child refreshed");
}

#[test]
fn a_kill_mid_write_leaves_a_whole_0600_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    let exe = std::env::current_exe().unwrap();
    for round in 0..4 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "oauth_flows::writer_child",
                "--nocapture",
            ])
            .env("WARDEN_OAUTH_CHILD_STORE", store.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Let it write a few rounds, then SIGKILL it wherever it is.
        while !store.path().exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50 + 37 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let file = store.read().expect("the token file is whole after a kill");
        assert!(file.issuer.unwrap().starts_with("https://issuer.example/"));
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// Child process of `a_kill_mid_write_leaves_a_whole_0600_token_file`: writes big files forever.
#[test]
#[ignore = "run as a child process by a_kill_mid_write_leaves_a_whole_0600_token_file"]
fn writer_child() {
    let store = TokenStore::new(std::env::var("WARDEN_OAUTH_CHILD_STORE").unwrap());
    for i in 0u64.. {
        let file = TokenFile {
            issuer: Some(format!(
                "https://issuer.example/{i}/{}",
                "x".repeat(400_000)
            )),
            ..Default::default()
        };
        store.write(&file).unwrap();
    }
}

#[tokio::test]
async fn logout_revokes_both_tokens_and_forgets_them() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    let settings = settings(&server, store.clone());
    let manager = login(&settings, headless(), &|_| {}).await.unwrap();
    let access = manager.get_access_token().await.unwrap();
    let refresh = stored_refresh_token(&store);

    let report = logout(&settings).await.unwrap();
    assert_eq!(report.revoked, 2);
    assert!(report.had_tokens);
    let seen = server.seen();
    assert!(seen.revoked.contains(&access));
    assert!(seen.revoked.contains(&refresh));
    assert!(seen.live_access.is_empty() && seen.live_refresh.is_empty());
    assert!(!store.path().exists());
}

#[tokio::test]
async fn client_credentials_with_a_jwt_assertion_get_a_token() {
    let server = support::start().await;
    let (pem, public_key) = support::es256_key();
    *server.jwt_public_key.lock().unwrap() = Some(public_key);
    let granted = client_credentials_token(
        &server.resource(),
        &ClientCredentials::PrivateKeyJwt {
            client_id: "machine".into(),
            private_key_pem: Secret::new(pem.clone()),
        },
        &[],
    )
    .await
    .unwrap();
    assert!(
        server
            .seen()
            .live_access
            .contains(granted.access_token.expose())
    );

    // A different key is refused.
    let (other_pem, _) = support::es256_key();
    let refused = client_credentials_token(
        &server.resource(),
        &ClientCredentials::PrivateKeyJwt {
            client_id: "machine".into(),
            private_key_pem: Secret::new(other_pem),
        },
        &[],
    )
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("invalid_client"), "{refused}");
}

#[tokio::test]
async fn provisioned_tokens_refresh_rotates_and_revocation_clears_the_bearer() {
    let server = support::start().await;
    server.seen().live_refresh.insert("prov-refresh-1".into());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let provisioned = ProvisionedCredentials::from_values(ProvisionedValues {
        access_token: Some(Secret::new("prov-access-stale")),
        expires_at: Some(now - 10),
        refresh_token: Some(Secret::new("prov-refresh-1")),
        client_id: Some("prov-client".into()),
        refresh_url: Some(format!("{}/token", server.base)),
        revoke_url: Some(format!("{}/revoke", server.base)),
        ..Default::default()
    })
    .await
    .unwrap();
    let manager = provisioned.manager(&server.resource()).await.unwrap();
    // Expired: the first use refreshes, and the rotated refresh token is retained.
    let fresh = manager.get_access_token().await.unwrap();
    assert!(server.seen().live_access.contains(&fresh));
    let rotated = provisioned.refresh_token().await.unwrap().unwrap();
    assert_ne!(rotated.expose(), "prov-refresh-1");
    assert!(server.seen().live_refresh.contains(rotated.expose()));

    assert_eq!(provisioned.revoke().await.unwrap(), 2);
    assert!(provisioned.access_token().await.unwrap().is_none());
    assert!(server.seen().revoked.contains(&fresh));
    assert!(manager.get_access_token().await.is_err());

    let missing = ProvisionedCredentials::from_env(&ProvisionedEnv {
        access_token_env: Some("WARDEN_TEST_SURELY_UNSET_VARIABLE".into()),
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "environment variable WARDEN_TEST_SURELY_UNSET_VARIABLE is not set"
    );
}

/// A writer the test's tracing subscriber logs into.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_token_or_secret_reaches_logs_debug_prints_or_errors() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .finish();
    // Global, not scoped: rmcp and the login may log from other threads (blocking tasks, the
    // redirect listener), which a thread-local default would miss. Other tests of this binary
    // logging here too does no harm: only this test's secrets are searched for.
    tracing::subscriber::set_global_default(subscriber)
        .expect("no other test of this binary installs a global subscriber");

    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::for_server(dir.path(), "demo");
    let mut settings = settings(&server, store.clone());
    let mut printed = String::new();
    let manager = login(&settings, headless(), &|_| {}).await.unwrap();
    manager.refresh_token().await.unwrap();
    printed += &format!("{:?}\n{:?}\n", store.read().unwrap(), settings);
    let provisioned = ProvisionedCredentials::from_values(ProvisionedValues {
        access_token: Some(Secret::new("provisioned-access-secret")),
        client_secret: Some(Secret::new("provisioned-client-secret")),
        ..Default::default()
    })
    .await
    .unwrap();
    printed += &format!("{provisioned:?}\n");
    settings.client_id = Some("given".into());
    settings.client_secret = Some(Secret::new("given-client-secret"));
    printed += &format!("{settings:?}\n{}\n", Secret::new("x"));
    let error = client_credentials_token(
        &server.resource(),
        &ClientCredentials::Secret {
            client_id: "nobody".into(),
            client_secret: Secret::new("given-client-secret"),
        },
        &[],
    )
    .await
    .unwrap_err();
    printed += &format!("{error}\n{error:?}\n");
    logout(&settings).await.unwrap();

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("logged in"), "the capture works: {logs}");
    assert!(printed.contains("[redacted]"));
    let mut secrets: Vec<String> = server
        .seen()
        .issued
        .iter()
        .filter(|t| !t.starts_with("code-"))
        .cloned()
        .collect();
    assert!(secrets.len() >= 5, "tokens and a client secret were issued");
    secrets.extend(
        [
            "provisioned-access-secret",
            "provisioned-client-secret",
            "given-client-secret",
        ]
        .map(String::from),
    );
    for secret in secrets {
        assert!(!logs.contains(&secret), "{secret} leaked into the logs");
        assert!(!printed.contains(&secret), "{secret} leaked into a print");
    }
}
