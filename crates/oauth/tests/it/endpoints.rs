//! warden's own OAuth requests (the probe, revocation, the client-credentials grant, a
//! pre-provisioned token's refresh and revocation) and the endpoints an authorization server's
//! metadata names never carry anything over plain http off this machine: such an endpoint is
//! refused before a connection is made.

use warden_oauth::{
    ClientCredentials, LoginOptions, OAuthSettings, ProvisionedCredentials, ProvisionedValues,
    RedirectMode, Secret, TokenStore, login, probe, revoke_token,
};

use crate::support;

const REFUSAL: &str = "only loopback hosts may use http://";

#[tokio::test]
async fn plain_http_off_loopback_is_refused_before_anything_is_sent() {
    let revoked = revoke_token(
        "http://revoke.invalid/revoke",
        &Secret::new("a-token"),
        "access_token",
        "client",
        None,
    )
    .await
    .unwrap_err();
    assert!(revoked.to_string().contains(REFUSAL), "{revoked}");
    assert!(revoked.to_string().contains("revoke.invalid"), "{revoked}");

    let probed = probe("http://mcp.invalid/mcp").await.unwrap_err();
    assert!(probed.to_string().contains(REFUSAL), "{probed}");

    let granted = warden_oauth::client_credentials_token(
        "http://mcp.invalid/mcp",
        &ClientCredentials::Secret {
            client_id: "machine".into(),
            client_secret: Secret::new("machine-secret"),
        },
        &[],
    )
    .await
    .unwrap_err();
    assert!(granted.to_string().contains(REFUSAL), "{granted}");

    let provisioned = ProvisionedCredentials::from_values(ProvisionedValues {
        access_token: Some(Secret::new("prov-access")),
        refresh_token: Some(Secret::new("prov-refresh")),
        refresh_url: Some("http://token.invalid/token".into()),
        revoke_url: Some("http://token.invalid/revoke".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    let Err(refresh) = provisioned.manager("https://mcp.invalid/mcp").await else {
        panic!("a manager refreshing over plain http");
    };
    assert!(refresh.to_string().contains(REFUSAL), "{refresh}");
    let revocation = provisioned.revoke().await.unwrap_err();
    assert!(revocation.to_string().contains(REFUSAL), "{revocation}");
    assert!(
        provisioned.access_token().await.unwrap().is_some(),
        "an unrevoked token is not forgotten as if it were revoked"
    );
}

#[tokio::test]
async fn metadata_naming_a_plain_http_token_endpoint_off_loopback_is_refused() {
    let server = support::start().await;
    *server.token_endpoint_override.lock().unwrap() = Some("http://token.invalid/token".into());
    let dir = tempfile::tempdir().unwrap();
    let settings = OAuthSettings::new(
        "demo",
        server.resource(),
        TokenStore::for_server(dir.path(), "demo"),
    );
    let options = LoginOptions::new(RedirectMode::Headless { port: None });
    let Err(error) = login(&settings, options, &|_| {}).await else {
        panic!("a login whose code would go to a plain-http token endpoint");
    };
    assert!(error.to_string().contains(REFUSAL), "{error}");
    assert!(error.to_string().contains("token.invalid"), "{error}");
    let seen = server.seen();
    assert!(seen.authorize_queries.is_empty(), "nothing was authorized");
    assert_eq!(seen.registrations, 0, "no client was registered");
}
