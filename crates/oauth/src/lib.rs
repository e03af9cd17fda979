//! OAuth 2.1 for warden's remote MCP servers: discovery, client identity, login (PKCE, resource,
//! scopes, `iss`), refresh under a cross-process lock, step-up, revocation, pre-provisioned and
//! client-credentials tokens, and the 0600 token store. Built on rmcp's `AuthorizationManager`.

pub mod browser;
pub mod client_credentials;
pub mod error;
pub mod flow;
pub mod keyring;
pub mod provisioned;
pub mod redirect;
pub mod revoke;
pub mod secret;
pub mod store;

pub use browser::open_in_browser;
pub use client_credentials::{ClientCredentials, GrantedToken, client_credentials_token};
pub use error::OAuthError;
pub use flow::{
    LoginOptions, LogoutReport, OAuthSettings, Probe, configure_client_metadata_url,
    is_authorization_required, login, logout, probe, step_up, stored_manager,
};
pub use provisioned::{ProvisionedCredentials, ProvisionedEnv, ProvisionedValues};
pub use redirect::{DEFAULT_PREREGISTERED_PORT, RedirectMode, parse_redirect};
pub use revoke::revoke_token;
pub use secret::Secret;
pub use store::{
    RegisteredClient, StoreLock, TokenBackend, TokenFile, TokenStore, TokenStoreKind,
    configure_token_store,
};

/// rmcp's auth types, re-exported so callers need not name rmcp's module path.
pub use rmcp::transport::auth::{AuthClient, AuthError, AuthorizationManager};

/// reqwest is built without a default crypto provider; install ring's once.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
