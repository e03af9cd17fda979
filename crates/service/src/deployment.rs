//! Where the service is reached from outside: `[service] public_url` and `allowed_hosts` — the
//! Host names it answers (DNS rebinding protection behind a proxy), the sign-in callback URL it
//! gives authorization servers, and its OAuth client ID metadata document.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

use crate::api::ServiceState;
use crate::tenant_oauth::CALLBACK_PATH;

/// Where the service publishes its OAuth client ID metadata document (CIMD).
pub(crate) const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// How the service is reached from outside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployment {
    /// The origin people and authorization servers reach the service at
    /// (`https://agents.example.com`), if it is behind a proxy or a load balancer.
    pub public_url: Option<String>,
    /// More `Host` values the service answers (`agents.internal`, `10.0.0.5:8080`).
    pub allowed_hosts: Vec<String>,
}

impl Deployment {
    /// Whether a request naming `host` is served: loopback, the bound address, the public
    /// URL's host, or a listed one (case-insensitively). Any other is refused before routing.
    pub(crate) fn serves_host(&self, host: &str, bound: &SocketAddr) -> bool {
        if warden_net::host_allowed(host, bound) {
            return true;
        }
        let host = host.to_ascii_lowercase();
        self.public_authority().is_some_and(|public| public == host)
            || self
                .allowed_hosts
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(&host))
    }

    /// Whether `origin` is the service's own public origin.
    pub(crate) fn is_public_origin(&self, origin: &str) -> bool {
        self.public_url
            .as_deref()
            .is_some_and(|public| public.eq_ignore_ascii_case(origin))
    }

    /// The sign-in callback an authorization server sends the browser back to: under the
    /// public URL, or else the way the admin reached this service (`host`, already checked).
    pub(crate) fn callback_url(&self, host: &str) -> String {
        match &self.public_url {
            Some(public) => format!("{public}{CALLBACK_PATH}"),
            None => format!("http://{host}{CALLBACK_PATH}"),
        }
    }

    /// The URL of the service's client ID metadata document, which is also its OAuth client
    /// id with authorization servers that take one: only with a public URL.
    pub(crate) fn client_metadata_url(&self) -> Option<String> {
        self.public_url
            .as_ref()
            .map(|public| format!("{public}{CLIENT_METADATA_PATH}"))
    }

    /// `host[:port]` of the public URL, lowercase.
    fn public_authority(&self) -> Option<String> {
        let public = self.public_url.as_deref()?;
        let authority = public
            .strip_prefix("https://")
            .or_else(|| public.strip_prefix("http://"))?;
        Some(authority.to_ascii_lowercase())
    }
}

/// `GET /oauth/client-metadata.json`: the service's OAuth client metadata, whose URL is its
/// client id (no key: authorization servers fetch it). 404 without a public URL.
pub(crate) async fn client_metadata(State(state): State<ServiceState>) -> Response {
    let deployment = state.opener.deployment();
    let (Some(client_id), Some(public)) = (
        deployment.client_metadata_url(),
        deployment.public_url.as_deref(),
    ) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    Json(json!({
        "client_id": client_id,
        "client_name": "warden",
        "client_uri": public,
        "redirect_uris": [deployment.callback_url("")],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_public_url_and_listed_hosts_are_served_and_nothing_else() {
        let bound: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let deployment = Deployment {
            public_url: Some("https://Agents.example.com".to_owned()),
            allowed_hosts: vec!["agents.internal:8080".to_owned()],
        };
        for served in [
            "localhost:8080",
            "agents.example.com",
            "AGENTS.example.com",
            "agents.internal:8080",
        ] {
            assert!(deployment.serves_host(served, &bound), "{served}");
        }
        for refused in [
            "evil.example",
            "agents.example.com:8443",
            "agents.internal",
            "agents.example.com.evil.example",
        ] {
            assert!(!deployment.serves_host(refused, &bound), "{refused}");
        }
        assert!(!Deployment::default().serves_host("agents.example.com", &bound));
    }

    #[test]
    fn the_callback_and_the_client_id_live_under_the_public_url() {
        let deployment = Deployment {
            public_url: Some("https://agents.example.com".to_owned()),
            allowed_hosts: Vec::new(),
        };
        assert_eq!(
            deployment.callback_url("127.0.0.1:8080"),
            "https://agents.example.com/v1/oauth/callback"
        );
        assert_eq!(
            deployment.client_metadata_url().as_deref(),
            Some("https://agents.example.com/oauth/client-metadata.json")
        );
        let local = Deployment::default();
        assert_eq!(
            local.callback_url("127.0.0.1:8080"),
            "http://127.0.0.1:8080/v1/oauth/callback"
        );
        assert_eq!(local.client_metadata_url(), None);
    }
}
