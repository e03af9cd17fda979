//! The crate's typed error.

use std::path::PathBuf;

use rmcp::transport::auth::AuthError;

/// Everything that can go wrong while authorizing against a remote MCP server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// No usable token: the operator has to log in.
    #[error("needs login: run warden mcp login {server}")]
    NeedsLogin { server: String },
    /// The stored tokens belong to another URL of this server name: they are not sent, and a
    /// login at the configured URL is needed.
    #[error(
        "the stored login of `{server}` is for {stored_url}, not for its configured URL {configured_url}: run warden mcp login {server} to log in at this URL"
    )]
    LoginForOtherUrl {
        server: String,
        stored_url: String,
        configured_url: String,
    },
    /// `auth = "none"`, or an Authorization header is configured: login is not the fix.
    #[error("login is disabled for {server}: {reason}")]
    LoginForbidden { server: String, reason: String },
    /// An OAuth step failed (discovery, registration, exchange, refresh, issuer checks).
    #[error(transparent)]
    Protocol(#[from] AuthError),
    /// The token store could not be read or written.
    #[error("token store {path}: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The token store holds something that is not a token file.
    #[error("token store {path} is not valid: {source}")]
    StoreFormat {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The authorization redirect did not come back usable.
    #[error("authorization redirect: {0}")]
    Redirect(String),
    /// A token, revocation or probe request failed on the wire.
    #[error("HTTP request to {url} failed: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The authorization server answered a token or revocation request with an error.
    #[error("{endpoint} answered {status}: {error}")]
    Endpoint {
        endpoint: String,
        status: u16,
        error: String,
    },
    /// Client credentials (secret, key) are missing or unusable.
    #[error("client credentials: {0}")]
    ClientCredentials(String),
    /// A configured environment variable is not set.
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    /// An OAuth endpoint off this machine that is not https: nothing is sent to it.
    #[error(
        "refusing plain http to {url}: only loopback hosts may use http://; use its https:// URL"
    )]
    InsecureEndpoint { url: String },
    /// The egress guard of a tenant's server refused an address (the one line names the host,
    /// the address and its class).
    #[error(transparent)]
    Egress(#[from] warden_net::EgressError),
    /// A URL does not parse.
    #[error("invalid URL {url}: {source}")]
    Url {
        url: String,
        #[source]
        source: url::ParseError,
    },
}

impl OAuthError {
    pub(crate) fn http(url: &str, source: reqwest::Error) -> Self {
        Self::Http {
            url: url.to_string(),
            source: source.without_url(),
        }
    }

    pub(crate) fn url(url: &str, source: url::ParseError) -> Self {
        Self::Url {
            url: url.to_string(),
            source,
        }
    }

    /// The egress guard's refusal behind this error, when there is one (directly, or in the
    /// source chain of a failed request).
    pub fn egress(&self) -> Option<&warden_net::EgressError> {
        if let Self::Egress(refusal) = self {
            return Some(refusal);
        }
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(error) = current {
            if let Some(found) = error.downcast_ref::<warden_net::EgressError>() {
                return Some(found);
            }
            current = error.source();
        }
        None
    }

    /// Whether the cure is `warden mcp login`.
    pub fn needs_login(&self) -> bool {
        matches!(
            self,
            Self::NeedsLogin { .. }
                | Self::LoginForOtherUrl { .. }
                | Self::Protocol(AuthError::AuthorizationRequired)
        )
    }
}
