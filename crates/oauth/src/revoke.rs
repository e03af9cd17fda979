//! Token revocation (RFC 7009): the one path both logged-in and pre-provisioned tokens take.

use crate::error::OAuthError;
use crate::secret::Secret;

/// Ask `endpoint` to revoke `token` (`token_type_hint` is `access_token` or `refresh_token`),
/// authenticating with HTTP Basic when the client has a secret, else sending `client_id`. A
/// redirect is not followed: it fails as the endpoint's answer.
pub async fn revoke_token(
    endpoint: &str,
    token: &Secret,
    token_type_hint: &str,
    client_id: &str,
    client_secret: Option<&Secret>,
) -> Result<(), OAuthError> {
    revoke_token_under(
        endpoint,
        token,
        token_type_hint,
        client_id,
        client_secret,
        None,
    )
    .await
}

/// [`revoke_token`], under `egress` when one is given (a tenant's server).
async fn revoke_token_under(
    endpoint: &str,
    token: &Secret,
    token_type_hint: &str,
    client_id: &str,
    client_secret: Option<&Secret>,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<(), OAuthError> {
    let client = crate::endpoint_client_under(endpoint, crate::ENDPOINT_TIMEOUT, egress)?;
    let mut form = vec![
        ("token", token.expose().to_string()),
        ("token_type_hint", token_type_hint.to_string()),
    ];
    let mut request = client.post(endpoint);
    match client_secret {
        Some(secret) => {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                crate::client_credentials::basic_authorization(client_id, secret),
            );
        }
        None => form.push(("client_id", client_id.to_string())),
    }
    let response = crate::client_credentials::post_form(request, endpoint, &form).await?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    Err(OAuthError::Endpoint {
        endpoint: endpoint.to_string(),
        status: status.as_u16(),
        error: crate::client_credentials::oauth_error_summary(&body),
    })
}

/// Revoke a grant's tokens at `endpoint`: the refresh token first (revoking it may end the access
/// token too, RFC 7009 §2.1), then the access token. Returns how many were revoked; the first
/// refusal ends it. Under `egress` when one is given (a tenant's server).
pub(crate) async fn revoke_grant(
    endpoint: &str,
    refresh_token: Option<&Secret>,
    access_token: Option<&Secret>,
    client_id: &str,
    client_secret: Option<&Secret>,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<usize, OAuthError> {
    let mut revoked = 0;
    for (token, hint) in [
        (refresh_token, "refresh_token"),
        (access_token, "access_token"),
    ] {
        if let Some(token) = token {
            revoke_token_under(endpoint, token, hint, client_id, client_secret, egress).await?;
            revoked += 1;
        }
    }
    Ok(revoked)
}
