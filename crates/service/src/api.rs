//! The service's HTTP API (REST + SSE), the parts every resource shares: the state, API-key authentication and roles, the Host/Origin checks, the body limit, the JSON error and the router, mounted from the route table each resource's module (`api/*.rs`) declares — the table the OpenAPI document is written from too. Every request resolves its key to a tenant and a caller; a tenant's resources are its alone (another tenant's ids answer 404); bad input gets a 4xx with a one-line reason and stores nothing.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use warden_net::origin_is_loopback;

use crate::inventory;
use crate::runs::{RunError, Runs, ServiceHost};
use crate::store::{Principal, Role, ServiceStorage, SessionRow, StoreError};

mod approvals;
mod audit;
mod client_calls;
mod events;
mod grants;
mod messages;
pub(crate) mod route;
mod servers;
mod sessions;
mod skills;
mod tenant_events;
mod tenants;
mod widget_tokens;

use route::Route;

/// Request bodies larger than this are refused (413).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Events in one page at most.
const MAX_PAGE: usize = 500;
/// The events a page holds when the request does not say.
const DEFAULT_PAGE: usize = 100;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct ServiceState {
    pub(crate) store: Arc<dyn ServiceStorage>,
    pub(crate) runs: Arc<Runs>,
    pub(crate) opener: Arc<dyn ServiceHost>,
    bound: SocketAddr,
}

/// A refusal: a status and a one-line reason, as `{"error": "…"}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    /// A 429's `Retry-After` (seconds).
    retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    pub(crate) fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("no {what}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<crate::quota::QuotaRefusal> for ApiError {
    fn from(refusal: crate::quota::QuotaRefusal) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(refusal.retry_after_secs),
            message: refusal.reason,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        tracing::warn!("service storage: {error}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}

impl From<RunError> for ApiError {
    fn from(error: RunError) -> Self {
        match error {
            RunError::UnknownSession(_) => Self::not_found("such session"),
            RunError::Busy(_) => Self::new(StatusCode::CONFLICT, error.to_string()),
            RunError::Quota(refusal) => refusal.into(),
            RunError::Store(error) => error.into(),
        }
    }
}

/// `{"error": "…"}`: why a request was refused, in one line.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ErrorBody {
    pub(crate) error: String,
}

/// A JSON body of type `T`: not JSON, the wrong shape or unknown fields are a 400 naming what
/// was wrong.
pub(crate) fn body<T: DeserializeOwned>(headers: &HeaderMap, bytes: &Bytes) -> Result<T, ApiError> {
    let is_json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !is_json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as Content-Type: application/json",
        ));
    }
    serde_json::from_slice(bytes).map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("bad request body: {error}"),
        )
    })
}

/// The router of the API over `store`, with runs opened by `opener`; `bound` is the address
/// served (its `Host` is accepted beside loopback names).
pub fn router(
    store: Arc<dyn ServiceStorage>,
    opener: Arc<dyn ServiceHost>,
    bound: SocketAddr,
) -> axum::Router {
    let runs = Runs::new(store.clone(), opener.clone());
    let state = ServiceState {
        store,
        runs,
        opener,
        bound,
    };
    let mut authenticated = axum::Router::new();
    for (_method, path, handler) in routes() {
        authenticated = authenticated.route(path, handler);
    }
    // The operator's scrape endpoint: keyed, but not part of the product's API document.
    authenticated = authenticated.route(crate::metrics::PATH, get(crate::metrics::exposition));
    let authenticated = authenticated.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        authenticate,
    ));
    axum::Router::new()
        .route(crate::openapi::DOCUMENT_PATH, get(openapi))
        .merge(crate::pages::router())
        .route(
            crate::tenant_oauth::CALLBACK_PATH,
            get(inventory::sign_in_callback),
        )
        .route(
            crate::deployment::CLIENT_METADATA_PATH,
            get(crate::deployment::client_metadata),
        )
        .merge(authenticated)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            check_origin,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::count_request,
        ))
        .with_state(state)
}

/// Every route that needs a key, declared once in its resource's module; the router mounts
/// them and the OpenAPI document describes them, in this order.
pub(crate) fn table() -> Vec<Route> {
    [
        sessions::routes(),
        messages::routes(),
        events::routes(),
        tenant_events::routes(),
        crate::knowledge::routes(),
        crate::artifacts::routes(),
        client_calls::routes(),
        approvals::routes(),
        audit::routes(),
        servers::routes(),
        skills::routes(),
        tenants::routes(),
        inventory::routes(),
        widget_tokens::routes(),
        grants::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every route that needs a key as the router mounts it: method, path and handler.
pub(crate) fn routes() -> Vec<(
    &'static str,
    &'static str,
    axum::routing::MethodRouter<ServiceState>,
)> {
    table()
        .into_iter()
        .map(|route| (route.method, route.path, route.handler))
        .collect()
}

/// `GET /v1/openapi.json` (no key needed: the contract holds no secret).
async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}

/// A refusal that did not come from a handler (a body over the limit, an unknown route, a
/// method the route does not take) still answers `{"error": "…"}`.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    // axum's own refusals are bare or plain text; a handler's JSON or page stays as it is.
    let is_framework_text = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_none_or(|value| value.starts_with("text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !is_framework_text {
        return response;
    }
    let reason = match status {
        StatusCode::PAYLOAD_TOO_LARGE => format!("the body is larger than {MAX_BODY_BYTES} bytes"),
        StatusCode::NOT_FOUND => "no such endpoint".to_owned(),
        StatusCode::METHOD_NOT_ALLOWED => "the endpoint does not take this method".to_owned(),
        other => other
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned(),
    };
    let mut refused = ApiError::new(status, reason).into_response();
    if let Some(allow) = response.headers().get(http::header::ALLOW) {
        refused
            .headers_mut()
            .insert(http::header::ALLOW, allow.clone());
    }
    refused
}

/// How many connections the kernel holds for the service before it accepts them (capped by
/// `net.core.somaxconn`). A crowd connecting at once on a busy machine outran the customary
/// 1,024: the kernel dropped the next handshakes and callers timed out connecting.
const LISTEN_BACKLOG: u32 = 8_192;

/// A listener for [`serve`] on `address`, with a backlog for a crowd of callers.
pub async fn bind(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves the API on `listener` until `shutdown` fires. Sessions a stopped instance left
/// running are marked interrupted first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<dyn ServiceStorage>,
    opener: Arc<dyn ServiceHost>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    // Every caller holds a connection, every stream another, every run its servers' pipes: the
    // customary soft limit of 1,024 open files refused connections under a thousand callers
    // while the hard limit allowed many more.
    match warden_sandbox::raise_open_file_limit() {
        Ok((before, after)) if before < after => {
            tracing::debug!("open files: soft limit raised from {before} to {after}");
        }
        Ok(_) => {}
        Err(error) => tracing::warn!("the open-file limit could not be raised: {error}"),
    }
    // One instance on an embedded store: whatever ran before it stopped with it. Instances
    // sharing a store interrupt only runs whose lease lapsed (Runs' heartbeat).
    let interrupted = if store.is_shared() {
        store
            .interrupt_lapsed(crate::store::now(), crate::runs::LEASE_TTL_SECS)
            .await
    } else {
        store.interrupt_running().await
    };
    match interrupted {
        Ok(0) => {}
        Ok(count) => tracing::warn!(
            "{count} run(s) were going when the service last stopped; their sessions are marked interrupted"
        ),
        Err(error) => tracing::warn!("could not mark interrupted runs: {error}"),
    }
    let app = router(store, opener, bound);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// `Host` must name loopback, the bound address, `[service] public_url`'s host or one of
/// `allowed_hosts` (DNS rebinding protection, as `warden serve --http`). A browser's `Origin`
/// must be this service's own (the Host's, or the public URL), loopback, or a product page
/// listed in `[service] widget_origins`; a listed page's requests carry a widget token and reach
/// only the widget's routes, and are answered with CORS headers (a preflight too). The widget
/// script itself is public: any page may load it.
async fn check_origin(State(state): State<ServiceState>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let deployment = state.opener.deployment();
    if !deployment.serves_host(&host, &state.bound) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("Host {host:?} is not served here"),
        )
        .into_response();
    }
    let Some(origin) = request
        .headers()
        .get(http::header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
    else {
        return next.run(request).await;
    };
    let path = request.uri().path().to_owned();
    // The service's own pages (the console) call it from its own origin; the widget's script
    // is public.
    let own_origin = origin == format!("http://{host}")
        || origin == format!("https://{host}")
        || deployment.is_public_origin(&origin);
    if own_origin || (request.method() == http::Method::GET && path == "/widget.js") {
        return next.run(request).await;
    }
    let loopback = origin_is_loopback(&origin);
    if !loopback && !state.opener.widget_origins().contains(&origin) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("Origin {origin:?} is not allowed"),
        )
        .into_response();
    }
    let cross_origin = |mut response: Response| {
        let headers = response.headers_mut();
        if let Ok(value) = http::HeaderValue::from_str(&origin) {
            headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        }
        headers.insert(http::header::VARY, http::HeaderValue::from_static("Origin"));
        // A 429's wait, readable by the widget's script.
        headers.insert(
            http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
            http::HeaderValue::from_static("retry-after"),
        );
        response
    };
    if request.method() == http::Method::OPTIONS {
        let asked = request
            .headers()
            .get(http::header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|value| value.to_str().ok())
            .and_then(|method| http::Method::from_bytes(method.as_bytes()).ok());
        let Some(method) = asked.filter(|method| widget_route(method, &path).is_some()) else {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "a page on another origin reaches only the chat widget's endpoints",
            )
            .into_response();
        };
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        if let Ok(value) = http::HeaderValue::from_str(method.as_str()) {
            headers.insert(http::header::ACCESS_CONTROL_ALLOW_METHODS, value);
        }
        headers.insert(
            http::header::ACCESS_CONTROL_ALLOW_HEADERS,
            http::HeaderValue::from_static("authorization, content-type, last-event-id"),
        );
        headers.insert(
            http::header::ACCESS_CONTROL_MAX_AGE,
            http::HeaderValue::from_static("600"),
        );
        return cross_origin(response);
    }
    // A listed product page presents a widget token, never an API key: `authenticate` refuses
    // any other key on a request marked so.
    let mut request = request;
    if !loopback {
        request.extensions_mut().insert(WidgetOnly(origin.clone()));
    }
    cross_origin(next.run(request).await)
}

/// A request from a product page's origin (`[service] widget_origins`): only a widget token
/// may authenticate it.
#[derive(Clone)]
struct WidgetOnly(String);

/// What a widget token reaches, by method and path: creating a session, posting to it, reading
/// and streaming its events, listing and answering its client calls. `Some(session)` names the
/// session in the path (`Some(None)`: creating one); `None`: not a widget route.
fn widget_route<'a>(method: &http::Method, path: &'a str) -> Option<Option<&'a str>> {
    let rest = path.strip_prefix("/v1/sessions")?;
    if rest.is_empty() {
        return (method == http::Method::POST).then_some(None);
    }
    let segments: Vec<&str> = rest.strip_prefix('/')?.split('/').collect();
    let allowed = match (method, segments.as_slice()) {
        (&http::Method::POST, [_, "messages"]) => true,
        (&http::Method::GET, [_, "events"] | [_, "events", "stream"] | [_, "client-calls"]) => true,
        (&http::Method::POST, [_, "client-calls", call]) => !call.is_empty(),
        _ => false,
    };
    let session = segments.first().copied().filter(|id| !id.is_empty())?;
    allowed.then_some(Some(session))
}

/// Resolves `Authorization: Bearer KEY` to its tenant and caller (401 otherwise).
async fn authenticate(
    State(state): State<ServiceState>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return unauthorized("send an API key as Authorization: Bearer KEY");
    };
    match state.store.resolve_key(presented).await {
        Ok(Some(principal)) => {
            if let Some(WidgetOnly(origin)) = request.extensions().get::<WidgetOnly>()
                && principal.widget.is_none()
            {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Origin {origin:?} may call the service only with a widget token (POST /v1/widget-tokens)"
                    ),
                )
                .into_response();
            }
            if let Some(scope) = &principal.widget {
                // A widget token reaches the widget's routes, and of sessions only its own.
                let refused =
                    || ApiError::not_found("such endpoint for this token").into_response();
                match widget_route(request.method(), request.uri().path()) {
                    None => return refused(),
                    Some(None) => {}
                    Some(Some(session)) => {
                        match state
                            .store
                            .widget_owns_session(&principal.tenant, &scope.token, session)
                            .await
                        {
                            Ok(true) => {}
                            Ok(false) => {
                                return ApiError::not_found("such session").into_response();
                            }
                            Err(error) => return ApiError::from(error).into_response(),
                        }
                    }
                }
            }
            // Requests per minute, of the key and of its tenant (crate::quota).
            if let Err(refusal) = state.runs.quotas().admit_request(&principal) {
                return ApiError::from(refusal).into_response();
            }
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Ok(None) => unauthorized("the API key is unknown or revoked"),
        Err(error) => ApiError::from(error).into_response(),
    }
}

fn unauthorized(reason: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, reason).into_response();
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    response
}

fn principal(request_extensions: &http::Extensions) -> Result<Principal, ApiError> {
    request_extensions
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "no API key"))
}

/// The tenant's session `id`; another tenant's, or none, is a 404.
pub(crate) async fn tenant_session(
    state: &ServiceState,
    tenant: &str,
    id: &str,
) -> Result<SessionRow, ApiError> {
    state
        .store
        .session(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("such session"))
}

/// Refuses an agent profile name the operator did not define: a well-formed name that names
/// nothing is a 404, as an unknown id in a path is (a 400 would call a request the OpenAPI
/// document admits invalid).
pub(crate) fn known_agent(state: &ServiceState, agent: &str) -> Result<(), ApiError> {
    if state.opener.knows_agent(agent) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no agent profile named {agent:?} (define it as [agents.{agent}])"),
        ))
    }
}

/// A `DELETE`'s answer: 204 when `found` was removed, else 404 naming `what`.
pub(crate) fn removed(found: bool, what: &str) -> Result<Response, ApiError> {
    if found {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(what))
    }
}

/// A `PUT`'s answer: 201 when it created the resource, 200 when it replaced one.
pub(crate) fn created_or_replaced(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// The tenant and caller of the request's key, as [`authenticate`] resolved it.
pub(crate) struct Caller(pub(crate) Principal);

/// A tenant admin's key: only it registers or removes servers, skills, knowledge and prompts
/// (403 for any other).
pub(crate) struct Admin(pub(crate) Principal);

/// An operator's key: the operator endpoints answer 404 to any other, as if they did not exist.
pub(crate) struct Operator;

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        principal(&parts.extensions).map(Self)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let principal = principal(&parts.extensions)?;
        if principal.role.administers() {
            Ok(Self(principal))
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "only a tenant admin's key changes the tenant's servers, skills, knowledge and prompts (warden service key create --role admin)",
            ))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        if principal(&parts.extensions)?.role == Role::Operator {
            Ok(Self)
        } else {
            Err(ApiError::not_found("such endpoint for this key"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_widget_token_reaches_only_the_widget_s_routes() {
        use http::Method;
        assert_eq!(widget_route(&Method::POST, "/v1/sessions"), Some(None));
        assert_eq!(widget_route(&Method::GET, "/v1/sessions"), None);
        assert_eq!(
            widget_route(&Method::POST, "/v1/sessions/ses_1/messages"),
            Some(Some("ses_1"))
        );
        assert_eq!(
            widget_route(&Method::GET, "/v1/sessions/ses_1/events/stream"),
            Some(Some("ses_1"))
        );
        assert_eq!(
            widget_route(&Method::POST, "/v1/sessions/ses_1/client-calls/cc_1"),
            Some(Some("ses_1"))
        );
        for (method, path) in [
            (Method::GET, "/v1/sessions/ses_1"),
            (Method::DELETE, "/v1/sessions/ses_1"),
            (Method::POST, "/v1/sessions/ses_1/cancel"),
            (Method::POST, "/v1/sessions/ses_1/client-calls/"),
            (Method::GET, "/v1/sessionsx"),
            (Method::GET, "/v1/approvals"),
            (Method::POST, "/v1/sessions//messages"),
        ] {
            assert_eq!(widget_route(&method, path), None, "{method} {path}");
        }
    }
}
