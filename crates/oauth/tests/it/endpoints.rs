//! warden's own OAuth requests (the probe, revocation, the client-credentials grant, a
//! pre-provisioned token's refresh and revocation) never carry anything over plain http off this
//! machine: such an endpoint is refused before a connection is made.

use warden_oauth::{
    ClientCredentials, ProvisionedCredentials, ProvisionedValues, Secret, probe, revoke_token,
};

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
