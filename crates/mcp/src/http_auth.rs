//! The Streamable HTTP client with OAuth: rmcp's `AuthClient` (stored or provisioned tokens,
//! refreshed before expiry and once on a 401) wrapped so that, when the runtime may log in
//! in-line (headless runs, the conformance client), a 401 starts a login and a 403
//! `insufficient_scope` a step-up, and the request is sent again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthClient;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tracing::{info, warn};
use warden_oauth::{LoginOptions, OAuthSettings, RedirectMode};

use crate::error::{FailureKind, McpError};
use crate::guard::{self, SseLimits, Tripped};
use crate::spec::HttpAuth;

type HttpError = StreamableHttpError<reqwest::Error>;

/// Logging in from inside the transport: the settings of the server and how to get the
/// redirect back. Serialized: one login at a time per connection.
struct InlineLogin {
    settings: OAuthSettings,
    redirect: RedirectMode,
    busy: tokio::sync::Mutex<()>,
    /// Step-ups done on this connection; capped by [`STEP_UP_LIMIT`].
    step_ups: AtomicU32,
}

/// Authorizations (a login or a step-up) one request may cause before its error stands.
const AUTHORIZATIONS_PER_REQUEST: u32 = 3;
/// Step-ups one connection may do: a server that keeps answering `insufficient_scope` does not
/// get an endless loop of consent pages.
const STEP_UP_LIMIT: u32 = 2;

/// The HTTP client every Streamable HTTP connection uses.
#[derive(Clone)]
pub(crate) struct AuthorizingClient {
    inner: AuthClient<reqwest::Client>,
    inline_login: Option<Arc<InlineLogin>>,
    /// The server's name, for the guards' log lines.
    server: Arc<str>,
    /// Bounds on each SSE response stream.
    sse_limits: SseLimits,
}

/// Builds the client for `auth`. Stored OAuth tokens are loaded (a missing token is not an
/// error: the request goes out without one and a 401 says "needs login"). Under `egress` (a
/// tenant's server) every OAuth request goes through the guard, whether or not the OAuth
/// settings carry it.
pub(crate) async fn authorizing_client(
    server: &str,
    url: &url::Url,
    client: reqwest::Client,
    auth: &HttpAuth,
    inline_login: Option<&RedirectMode>,
    sse_limits: SseLimits,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<AuthorizingClient, McpError> {
    let oauth_failure = |error: warden_oauth::OAuthError| match error.egress() {
        Some(refusal) => crate::http::egress_refused(server, refusal),
        None => McpError::new(
            server,
            FailureKind::Rejected,
            format!("OAuth: {error}"),
            Some(&format!("run `warden mcp login {server}`")),
        ),
    };
    let bare = || async {
        warden_oauth::authorization_manager(url.as_str(), egress)
            .await
            .map_err(oauth_failure)
    };
    let (manager, inline) = match auth {
        HttpAuth::Unconfigured | HttpAuth::Forbidden { .. } => (bare().await?, None),
        HttpAuth::OAuth(settings) => {
            let guarded;
            let settings = match (egress, &settings.egress) {
                (Some(guard), None) => {
                    guarded = settings.clone().with_egress_guard(guard.clone());
                    &guarded
                }
                _ => settings,
            };
            let manager = match warden_oauth::stored_manager(settings).await {
                Ok(manager) => manager,
                // `auth = "oauth"` without a token: a login is the only way, no request needed.
                Err(error)
                    if error.needs_login() && settings.require_login && inline_login.is_none() =>
                {
                    return Err(crate::http::needs_login(server, url));
                }
                Err(error) if error.needs_login() => bare().await?,
                Err(error) => return Err(oauth_failure(error)),
            };
            let inline = inline_login.map(|redirect| {
                Arc::new(InlineLogin {
                    settings: settings.clone(),
                    redirect: redirect.clone(),
                    busy: tokio::sync::Mutex::new(()),
                    step_ups: AtomicU32::new(0),
                })
            });
            (manager, inline)
        }
        HttpAuth::Provisioned(env) => {
            let provisioned = warden_oauth::ProvisionedCredentials::from_env(env)
                .await
                .map_err(oauth_failure)?;
            let manager = provisioned
                .manager(url.as_str())
                .await
                .map_err(oauth_failure)?;
            (manager, None)
        }
    };
    Ok(AuthorizingClient {
        inner: AuthClient::new(client, manager),
        inline_login: inline,
        server: Arc::from(server),
        sse_limits,
    })
}

/// How long an in-line interactive login waits for the browser.
const INLINE_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

fn show_url(url: &str) {
    eprintln!("warden: authorize in your browser: {url}");
    let _ = warden_oauth::open_in_browser(url);
}

impl AuthorizingClient {
    /// Runs `call`; on a 401 logs in once, on a 403 `insufficient_scope` steps up (rmcp caps the
    /// attempts), and runs it again. Without in-line login, errors pass through.
    async fn authorizing<T, F, Fut>(&self, call: F) -> Result<T, HttpError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let Some(login) = &self.inline_login else {
            return call().await;
        };
        let mut logged_in = false;
        let mut authorizations = 0;
        loop {
            let result = call().await;
            if authorizations >= AUTHORIZATIONS_PER_REQUEST {
                return result;
            }
            match result {
                Err(StreamableHttpError::AuthRequired(challenge)) if !logged_in => {
                    logged_in = true;
                    authorizations += 1;
                    let _busy = login.busy.lock().await;
                    let mut options = LoginOptions::new(login.redirect.clone());
                    options.challenge = Some(challenge.www_authenticate_header.clone());
                    options.timeout = INLINE_LOGIN_TIMEOUT;
                    let show: &(dyn Fn(&str) + Send + Sync) = match login.redirect {
                        RedirectMode::Headless { .. } => &|_| {},
                        RedirectMode::Interactive { .. } | RedirectMode::Relayed { .. } => {
                            &show_url
                        }
                    };
                    match warden_oauth::login(&login.settings, options, show).await {
                        Ok(manager) => {
                            info!(server = %login.settings.server_name, "logged in after a 401");
                            *self.inner.auth_manager.lock().await = manager;
                        }
                        Err(error) => {
                            warn!(server = %login.settings.server_name, %error, "login failed");
                            return Err(StreamableHttpError::AuthRequired(challenge));
                        }
                    }
                }
                Err(StreamableHttpError::InsufficientScope(challenge))
                    if login.step_ups.load(Ordering::SeqCst) < STEP_UP_LIMIT =>
                {
                    authorizations += 1;
                    login.step_ups.fetch_add(1, Ordering::SeqCst);
                    let _busy = login.busy.lock().await;
                    let manager = self.inner.auth_manager.lock().await;
                    let show: &(dyn Fn(&str) + Send + Sync) = match login.redirect {
                        RedirectMode::Headless { .. } => &|_| {},
                        RedirectMode::Interactive { .. } | RedirectMode::Relayed { .. } => {
                            &show_url
                        }
                    };
                    if let Err(error) = warden_oauth::step_up_with_guard(
                        &manager,
                        &challenge.www_authenticate_header,
                        login.redirect.clone(),
                        INLINE_LOGIN_TIMEOUT,
                        show,
                        login.settings.egress.as_ref(),
                    )
                    .await
                    {
                        warn!(server = %login.settings.server_name, %error, "step-up failed");
                        return Err(StreamableHttpError::InsufficientScope(challenge));
                    }
                    info!(server = %login.settings.server_name, "stepped up the token's scope");
                }
                other => return other,
            }
        }
    }
}

impl AuthorizingClient {
    /// Applies the guards to the answer of one POST: an SSE response is bounded, and a 404 on
    /// the session to a request that may have applied an effect ends that request instead of
    /// letting the transport re-initialize and re-send it.
    fn guarded(
        &self,
        message: &ClientJsonRpcMessage,
        response: Result<StreamableHttpPostResponse, HttpError>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        match response {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                Ok(StreamableHttpPostResponse::Sse(
                    guard::bounded_response_stream(
                        &self.server,
                        stream,
                        guard::request_id(message),
                        self.sse_limits,
                    ),
                    session,
                ))
            }
            Err(StreamableHttpError::SessionExpired) if guard::may_have_effect(message) => {
                match guard::request_id(message) {
                    Some(id) => {
                        warn!(
                            server = %self.server,
                            "the server forgot the session (404); the request is not re-sent"
                        );
                        Ok(StreamableHttpPostResponse::Json(
                            Tripped::SessionForgotten.error_response(id),
                            None,
                        ))
                    }
                    None => Err(StreamableHttpError::SessionExpired),
                }
            }
            other => other,
        }
    }
}

impl StreamableHttpClient for AuthorizingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorizing(|| {
                self.inner.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                )
            })
            .await;
        self.guarded(&message, response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorizing(|| {
                self.inner.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                    max_sse_event_size,
                )
            })
            .await;
        self.guarded(&message, response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorizing(|| {
                self.inner.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                    limits,
                )
            })
            .await;
        self.guarded(&message, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
