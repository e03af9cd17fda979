//! OAuth 2.1 for warden's remote MCP servers: discovery, client identity, login (PKCE, resource,
//! scopes, `iss`), refresh under a cross-process lock, step-up, revocation, pre-provisioned and
//! client-credentials tokens, and the 0600 token store. Built on rmcp's `AuthorizationManager`.

mod browser;
mod client_credentials;
mod context;
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
pub use error::OAuthError;
pub use flow::{
    LoginOptions, LogoutReport, OAuthSettings, Probe, is_authorization_required, login, logout,
    probe, step_up, stored_manager,
};
pub use provisioned::{ProvisionedCredentials, ProvisionedEnv, ProvisionedValues};
pub use redirect::{DEFAULT_PREREGISTERED_PORT, RedirectMode, parse_redirect};
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
/// reported as that endpoint's failure), each request bounded by `timeout`.
pub(crate) fn endpoint_client(
    endpoint: &str,
    timeout: std::time::Duration,
) -> Result<reqwest::Client, OAuthError> {
    warden_net::http_client()
        .request_timeout(timeout)
        .build()
        .map_err(|e| OAuthError::http(endpoint, e))
}
