//! OAuth under an egress guard: the HTTP client rmcp's `AuthorizationManager` sends discovery,
//! registration, token and refresh requests through when a server's settings carry a
//! [`warden_net::EgressGuard`] (a tenant's server), and warden's own endpoint clients under it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture,
    OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use warden_net::{DEFAULT_REDIRECT_LIMIT, EgressGuard};

use crate::error::OAuthError;

/// The largest OAuth response body read (rmcp's own bound).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// How long one OAuth request may take when rmcp suggests no bound.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// An authorization manager for `base_url`. Without a guard it is rmcp's own (its address
/// filter keyed to the base URL); with one, every request it sends goes through a client under
/// the guard: the base URL's literal host is checked now, each request's literal host before it
/// is sent, every name at each connection, every redirect followed, and no proxy is used.
pub async fn authorization_manager(
    base_url: &str,
    egress: Option<&EgressGuard>,
) -> Result<AuthorizationManager, OAuthError> {
    warden_net::install_crypto_provider();
    let Some(guard) = egress else {
        return Ok(AuthorizationManager::new(base_url).await?);
    };
    let url = url::Url::parse(base_url).map_err(|e| OAuthError::url(base_url, e))?;
    guard.check_literal(&url)?;
    let client = GuardedOAuthHttp::new(guard)?;
    Ok(AuthorizationManager::new_with_oauth_http_client(base_url, Arc::new(client)).await?)
}

/// rmcp's OAuth requests through warden's clients under an egress guard: one that follows
/// redirects (each hop checked), one that follows none, as each request asks.
struct GuardedOAuthHttp {
    guard: EgressGuard,
    follow: reqwest::Client,
    stop: reqwest::Client,
}

impl GuardedOAuthHttp {
    fn new(guard: &EgressGuard) -> Result<Self, OAuthError> {
        let build = |hops: usize| {
            warden_net::http_client()
                .egress_guard(guard.clone())
                .follow_redirects(hops)
                .request_timeout(DEFAULT_TIMEOUT)
                .build()
                .map_err(|error| {
                    OAuthError::Protocol(AuthError::InternalError(format!(
                        "can't build the OAuth HTTP client: {error}"
                    )))
                })
        };
        Ok(Self {
            guard: guard.clone(),
            follow: build(DEFAULT_REDIRECT_LIMIT)?,
            stop: build(0)?,
        })
    }
}

impl OAuthHttpClient for GuardedOAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let OAuthHttpRequest {
                request,
                redirect_policy,
                timeout,
                ..
            } = request;
            let client = match redirect_policy {
                OAuthHttpRedirectPolicy::Follow => &self.follow,
                _ => &self.stop,
            };
            let mut request = reqwest::Request::try_from(request)
                .map_err(|error| Box::new(error) as OAuthHttpClientError)?;
            if let Err(refusal) = self.guard.check_literal(request.url()) {
                // rmcp folds some failures into messages of its own: the refusal is said here.
                tracing::warn!("OAuth: {refusal}");
                return Err(Box::new(refusal) as OAuthHttpClientError);
            }
            if let Some(timeout) = timeout {
                *request.timeout_mut() = Some(timeout);
            }
            let mut response = client.execute(request).await.map_err(|error| {
                if let Some(refusal) = refusal_in(&error) {
                    tracing::warn!("OAuth: {refusal}");
                }
                Box::new(error) as OAuthHttpClientError
            })?;
            let mut answer = oauth2::http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|error| Box::new(error) as OAuthHttpClientError)?
            {
                if chunk.len() > MAX_RESPONSE_BYTES - body.len() {
                    return Err(Box::new(AuthError::InternalError(format!(
                        "an OAuth response is larger than {MAX_RESPONSE_BYTES} bytes"
                    ))) as OAuthHttpClientError);
                }
                body.extend_from_slice(&chunk);
            }
            answer
                .body(body)
                .map_err(|error| Box::new(error) as OAuthHttpClientError)
        })
    }
}

/// The egress guard's refusal in a request error's source chain.
fn refusal_in(error: &reqwest::Error) -> Option<&warden_net::EgressError> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(candidate) = current {
        if let Some(refusal) = candidate.downcast_ref::<warden_net::EgressError>() {
            return Some(refusal);
        }
        current = candidate.source();
    }
    None
}

/// warden's client for one OAuth endpoint under `egress`: the endpoint's literal host checked
/// now, names at each connection, no redirects, no proxy.
pub(crate) fn guarded_endpoint_client(
    endpoint: &str,
    timeout: Duration,
    guard: &EgressGuard,
) -> Result<reqwest::Client, OAuthError> {
    let url = url::Url::parse(endpoint).map_err(|e| OAuthError::url(endpoint, e))?;
    guard.check_literal(&url)?;
    warden_net::http_client()
        .egress_guard(guard.clone())
        .request_timeout(timeout)
        .build()
        .map_err(|e| OAuthError::http(endpoint, e))
}
