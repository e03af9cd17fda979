//! OAuth 2.1 for warden's remote MCP servers: discovery, client identity, login (PKCE, resource,
//! scopes, `iss`), refresh under a cross-process lock, step-up, revocation, pre-provisioned and
//! client-credentials tokens, and the 0600 token store. Built on rmcp's `AuthorizationManager`.
//! A tenant's server carries an egress guard in its [`OAuthSettings`]: every OAuth request for it
//! then goes through warden-net's guarded clients.

mod browser;
mod client_credentials;
mod context;
mod egress;
mod error;
mod flow;
mod keyring;
mod provisioned;
mod redirect;
mod revoke;
mod secret;
mod store;

pub use browser::open_in_browser;
pub use client_credentials::{ClientCredentials, GrantedToken, client_credentials_token};
pub use context::OAuthContext;
pub use egress::authorization_manager;
pub use error::OAuthError;
pub use flow::{
    LoginOptions, LogoutReport, OAuthSettings, Probe, is_authorization_required, login, logout,
    logout_provisioned, probe, probe_with_guard, step_up, step_up_with_guard, stored_manager,
};
pub use provisioned::{ProvisionedCredentials, ProvisionedEnv, ProvisionedValues};
pub use redirect::{DEFAULT_PREREGISTERED_PORT, RedirectInbox, RedirectMode, parse_redirect};
pub use revoke::revoke_token;
pub use secret::Secret;
pub use store::{
    RegisteredClient, StoreLock, TokenBackend, TokenFile, TokenStore, TokenStoreKind,
    canonical_server_url,
};

/// rmcp's auth types, re-exported so callers need not name rmcp's module path.
pub use rmcp::transport::auth::{AuthClient, AuthError, AuthorizationManager};

/// How long one request of warden's own to an OAuth endpoint (token, revocation, the headless
/// authorization request) may take.
pub(crate) const ENDPOINT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// warden's outgoing client for OAuth endpoints: redirects are not followed (a 3xx answer is
/// reported as that endpoint's failure), each request bounded by `timeout`, and `endpoint` must
/// be https or a loopback host ([`require_secure_endpoint`]).
pub(crate) fn endpoint_client(
    endpoint: &str,
    timeout: std::time::Duration,
) -> Result<reqwest::Client, OAuthError> {
    endpoint_client_under(endpoint, timeout, None)
}

/// [`endpoint_client`], under `egress` when one is given (a tenant's server): the endpoint's
/// literal host is checked now, every name at each connection, and no proxy is used.
pub(crate) fn endpoint_client_under(
    endpoint: &str,
    timeout: std::time::Duration,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<reqwest::Client, OAuthError> {
    require_secure_endpoint(endpoint)?;
    if let Some(guard) = egress {
        return egress::guarded_endpoint_client(endpoint, timeout, guard);
    }
    warden_net::http_client()
        .request_timeout(timeout)
        .build()
        .map_err(|e| OAuthError::http(endpoint, e))
}

/// Refuses an endpoint that would carry a token or a secret in the clear: https anywhere, plain
/// http only to a loopback host (the rule MCP server URLs follow).
pub(crate) fn require_secure_endpoint(endpoint: &str) -> Result<(), OAuthError> {
    let url = url::Url::parse(endpoint).map_err(|e| OAuthError::url(endpoint, e))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if warden_net::is_loopback_url(&url) => Ok(()),
        _ => Err(OAuthError::InsecureEndpoint {
            url: crate::store::canonical_server_url(endpoint),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::require_secure_endpoint;

    #[test]
    fn oauth_endpoints_are_https_or_loopback() {
        for allowed in [
            "https://auth.example.com/token",
            "http://127.0.0.1:8080/token",
            "http://[::1]/token",
            "http://LOCALHOST/token",
        ] {
            assert!(require_secure_endpoint(allowed).is_ok(), "{allowed}");
        }
        for refused in [
            "http://auth.example.com/token",
            "http://10.0.0.5/token",
            "ftp://auth.example.com/token",
            "http://localhost.evil.example/token",
        ] {
            assert!(require_secure_endpoint(refused).is_err(), "{refused}");
        }
    }
}
