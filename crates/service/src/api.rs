//! The service's HTTP API (REST + SSE): every request resolves its API key to a tenant and a caller; sessions, their messages (each starting a run), their events (a page by cursor, or a stream that resumes from `Last-Event-ID`) and the approvals queue are the tenant's alone — another tenant's ids answer 404. Bad input gets a 4xx with a one-line reason and stores nothing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, Request, State};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_net::{host_allowed, origin_is_loopback};

use crate::approvals::{DecideError, Decision};
use crate::client_tools::AnswerError;
use crate::inventory;
use crate::runs::{RunError, Runs, ServiceHost};
use crate::store::{
    ApprovalRow, ClientCallRow, EventRow, Principal, Role, ServerRow, ServiceStorage, SessionRow,
    SkillRow, StoreError,
};

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

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SessionList {
    pub(crate) sessions: Vec<SessionRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SessionDetail {
    pub(crate) session: SessionRow,
    /// The conversation: the user's messages, the model's answers and tool calls, the results.
    pub(crate) messages: serde_json::Value,
}

/// A message taken: its run's events come after `events_after`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Accepted {
    pub(crate) session: String,
    pub(crate) events_after: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Cancelled {
    pub(crate) cancelled: bool,
}

/// A page of events; `next` is the cursor to go on from.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct EventPage {
    pub(crate) events: Vec<EventRow>,
    pub(crate) next: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ClientCallList {
    pub(crate) client_calls: Vec<ClientCallRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Answered {
    pub(crate) answered: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ApprovalList {
    pub(crate) approvals: Vec<ApprovalRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ApprovalDecided {
    pub(crate) approval: ApprovalRow,
}

/// A page of audit records (as `warden audit --json` prints them); `next` is the cursor.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct AuditPage {
    pub(crate) records: Vec<serde_json::Map<String, serde_json::Value>>,
    pub(crate) next: i64,
}

/// A key made for a tenant: the secret is shown here once.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct NewKeyIssued {
    pub(crate) id: String,
    pub(crate) tenant: String,
    pub(crate) caller: String,
    pub(crate) role: Role,
    pub(crate) key: String,
}

/// `POST /v1/widget-tokens`: a short-lived token for one end user's chat widget.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewWidgetToken {
    /// The agent profile the widget talks to (`[agents.NAME]`).
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    agent: String,
    /// The end user, as the product knows them (the caller the gate and the audit see).
    #[schemars(regex(pattern = r"\S"), length(max = 200))]
    caller: String,
    /// Seconds the token lives, a whole number from 1 to 3600 (default 900; `900.0` is whole).
    #[schemars(with = "Option<u64>", range(min = 1, max = 3600))]
    ttl_sec: Option<f64>,
}

/// A widget token: the secret is shown here once; it stops working at `expires_at`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct WidgetTokenIssued {
    pub(crate) token: String,
    /// Seconds since the Unix epoch.
    pub(crate) expires_at: u64,
}

/// The operator's grants: skills approved to use their tools, and skills allowed to run scripts.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct GrantList {
    pub(crate) skill_grants: Vec<SkillGrantRow>,
    pub(crate) script_grants: Vec<ScriptGrantRow>,
}

/// A server's skill approved to use exactly these tools, for its content as it was.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillGrantRow {
    pub(crate) server: String,
    pub(crate) resource_uri: String,
    pub(crate) tools: Vec<String>,
    /// The SKILL.md content the approval saw (`sha256:…`).
    pub(crate) content_hash: String,
    /// Seconds since the Unix epoch.
    pub(crate) approved_at: u64,
}

/// A skill allowed to run one script, or all of its scripts (`script` absent).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ScriptGrantRow {
    pub(crate) skill: String,
    pub(crate) script: Option<String>,
    pub(crate) network: bool,
    /// Seconds since the Unix epoch.
    pub(crate) granted_at: u64,
    /// When it stops covering anything (seconds since the Unix epoch); never when absent.
    pub(crate) expires_at: Option<u64>,
}

/// How long a widget token lives when the request does not say, and at most.
const WIDGET_TOKEN_TTL: u64 = 900;
const WIDGET_TOKEN_MAX_TTL: u64 = 3600;

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

/// `POST /v1/sessions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewSession {
    /// The agent profile (`[agents.NAME]`); the default agent when absent.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    agent: Option<String>,
}

/// `POST /v1/sessions/{id}/messages`: the user's text, or the name of a prompt snapshot whose
/// messages continue the conversation (exactly one of the two).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum NewMessage {
    Text(TextMessage),
    Prompt(PromptReference),
}

/// The user's message.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TextMessage {
    /// The text (not blank).
    #[schemars(regex(pattern = r"\S"))]
    text: String,
}

/// A prompt snapshot of the tenant (`PUT /v1/prompts/{name}`) as the message.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromptReference {
    #[schemars(regex(pattern = r"\S"))]
    prompt: String,
}

/// `POST /v1/approvals/{id}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewDecision {
    decision: DecisionKind,
    /// Why (for a denial: shown to the model).
    reason: Option<String>,
}

/// What a person decided about a call.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DecisionKind {
    /// Run this call.
    AllowOnce,
    /// Run it, and the same tool for the rest of the session without asking.
    AllowForSession,
    /// Do not run it (the reason goes to the model).
    Deny,
}

/// `PUT /v1/servers/{name}`: a remote MCP server of the tenant (a tenant admin's key).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewServer {
    /// Its Streamable HTTP endpoint: https, or http to this machine.
    url: String,
    /// Headers sent with each request; each value names an environment variable read when a
    /// session opens (`${env:NAME}`, or a scheme word and one: `Bearer ${env:NAME}`). A literal
    /// value (a credential) is refused.
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ServerList {
    pub(crate) servers: Vec<ServerRow>,
}

/// `PUT /v1/skills/{name}`: the skill's whole SKILL.md.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillText {
    /// The SKILL.md text: frontmatter (`name` equal to the path's, `description`) and body.
    text: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillList {
    pub(crate) skills: Vec<SkillRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillShown {
    pub(crate) name: String,
    pub(crate) text: String,
}

/// `DELETE /v1/skills/{name}` when agent profiles still name the skill.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillInUse {
    pub(crate) error: String,
    /// The profiles whose `skills` name it.
    pub(crate) profiles: Vec<String>,
}

/// `POST /v1/tenants/{tenant}/keys` (operator).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewKey {
    /// Who will use the key (not blank).
    #[schemars(regex(pattern = r"\S"))]
    caller: String,
    /// What it may do (default `caller`).
    #[serde(default)]
    role: Option<TenantKeyRole>,
}

/// The role of a key the operator makes for a tenant.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TenantKeyRole {
    /// Sessions, messages, client calls and its own events.
    Caller,
    /// Also decides the tenant's approvals (never of a run it started).
    Approver,
    /// Also the tenant's servers, skills, knowledge and prompts.
    Admin,
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
    let authenticated = authenticated.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        authenticate,
    ));
    axum::Router::new()
        .route("/v1/openapi.json", get(openapi))
        .merge(crate::pages::router())
        .route(
            crate::tenant_oauth::CALLBACK_PATH,
            get(inventory::sign_in_callback),
        )
        .merge(authenticated)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            check_origin,
        ))
        .with_state(state)
}

/// Every route that needs a key: method, path and handler (the OpenAPI document lists the same).
pub(crate) fn routes() -> Vec<(
    &'static str,
    &'static str,
    axum::routing::MethodRouter<ServiceState>,
)> {
    use axum::routing::delete;
    vec![
        ("post", "/v1/sessions", post(create_session)),
        ("get", "/v1/sessions", get(list_sessions)),
        ("get", "/v1/sessions/{id}", get(show_session)),
        ("delete", "/v1/sessions/{id}", delete(delete_session)),
        ("post", "/v1/sessions/{id}/messages", post(post_message)),
        ("post", "/v1/sessions/{id}/cancel", post(cancel_run)),
        ("get", "/v1/sessions/{id}/events", get(list_events)),
        ("get", "/v1/sessions/{id}/events/stream", get(stream_events)),
        (
            "get",
            "/v1/sessions/{id}/artifacts",
            get(crate::artifacts::list_artifacts),
        ),
        (
            "get",
            "/v1/sessions/{id}/artifacts/{artifact}",
            get(crate::artifacts::download_artifact),
        ),
        (
            "get",
            "/v1/sessions/{id}/client-calls",
            get(list_client_calls),
        ),
        (
            "post",
            "/v1/sessions/{id}/client-calls/{call}",
            post(answer_client_call),
        ),
        (
            "get",
            "/v1/knowledge",
            get(crate::knowledge::list_collections),
        ),
        (
            "delete",
            "/v1/knowledge/{collection}",
            delete(crate::knowledge::delete_collection),
        ),
        (
            "post",
            "/v1/knowledge/{collection}/search",
            post(crate::knowledge::search),
        ),
        (
            "put",
            "/v1/knowledge/{collection}/documents",
            axum::routing::put(crate::knowledge::put_document),
        ),
        (
            "delete",
            "/v1/knowledge/{collection}/documents",
            delete(crate::knowledge::delete_document),
        ),
        ("get", "/v1/audit", get(query_audit)),
        ("get", "/v1/approvals", get(list_approvals)),
        ("post", "/v1/approvals/{id}", post(decide_approval)),
        ("get", "/v1/servers", get(list_servers)),
        ("put", "/v1/servers/{name}", axum::routing::put(put_server)),
        ("delete", "/v1/servers/{name}", delete(delete_server)),
        ("get", "/v1/skills", get(list_skills)),
        ("get", "/v1/skills/{name}", get(show_skill)),
        ("put", "/v1/skills/{name}", axum::routing::put(put_skill)),
        ("delete", "/v1/skills/{name}", delete(delete_skill)),
        ("post", "/v1/tenants/{tenant}/keys", post(issue_key)),
        ("post", "/v1/widget-tokens", post(issue_widget_token)),
        ("get", "/v1/grants", get(list_grants)),
        (
            "delete",
            "/v1/grants/skills/{server}/{uri}",
            delete(revoke_skill_grant),
        ),
        (
            "delete",
            "/v1/grants/scripts/{skill}",
            delete(revoke_skill_scripts_grant),
        ),
        (
            "delete",
            "/v1/grants/scripts/{skill}/{script}",
            delete(revoke_script_grant),
        ),
        ("get", "/v1/tenants", get(inventory::list_tenants)),
        (
            "get",
            "/v1/tenants/{tenant}/keys",
            get(inventory::list_keys),
        ),
        ("delete", "/v1/keys/{id}", delete(inventory::revoke_key)),
        (
            "get",
            "/v1/tenants/{tenant}/secrets",
            get(crate::secrets::list_secrets),
        ),
        (
            "put",
            "/v1/tenants/{tenant}/secrets/{name}",
            axum::routing::put(crate::secrets::put_secret),
        ),
        (
            "delete",
            "/v1/tenants/{tenant}/secrets/{name}",
            delete(crate::secrets::delete_secret),
        ),
        ("get", "/v1/servers/status", get(inventory::servers_status)),
        ("post", "/v1/servers/{name}/login", post(inventory::sign_in)),
        ("get", "/v1/tools", get(inventory::list_tools)),
        ("get", "/v1/prompts", get(inventory::list_prompts)),
        ("get", "/v1/prompts/{name}", get(inventory::show_prompt)),
        (
            "put",
            "/v1/prompts/{name}",
            axum::routing::put(inventory::put_prompt),
        ),
        (
            "delete",
            "/v1/prompts/{name}",
            delete(inventory::delete_prompt),
        ),
    ]
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

/// Serves the API on `listener` until `shutdown` fires. Sessions a stopped instance left
/// running are marked interrupted first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<dyn ServiceStorage>,
    opener: Arc<dyn ServiceHost>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
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

/// `Host` must name loopback or the bound address (DNS rebinding protection, as `warden serve
/// --http`). A browser's `Origin` must be this service's own, loopback, or a product page
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
    if !host_allowed(&host, &state.bound) {
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
    let own_origin = origin == format!("http://{host}") || origin == format!("https://{host}");
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

pub(crate) fn principal(request_extensions: &http::Extensions) -> Result<Principal, ApiError> {
    request_extensions
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "no API key"))
}

async fn create_session(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let request: NewSession = if bytes.is_empty() {
        NewSession { agent: None }
    } else {
        body(&headers, &bytes)?
    };
    let mut agent = request.agent;
    if let Some(scope) = &principal.widget {
        // A widget token opens sessions of its own agent profile only.
        match &agent {
            Some(named) if *named != scope.agent => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "this widget token opens sessions of the agent {:?} only",
                        scope.agent
                    ),
                ));
            }
            _ => agent = Some(scope.agent.clone()),
        }
    }
    if let Some(agent) = &agent
        && !state.opener.knows_agent(agent)
    {
        // A well-formed name that names nothing: 404, as for an id in a path (a 400 would
        // call a request the OpenAPI document admits invalid; schemathesis holds us to that).
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no agent profile named {agent:?} (define it as [agents.{agent}])"),
        ));
    }
    // Counted (and held) before anything is stored; the creator is recorded for the count.
    let _held = match state
        .runs
        .quotas()
        .admit_session(state.store.as_ref(), &principal)
        .await
    {
        Ok(held) => held,
        Err(crate::quota::SessionAdmission::Refused(refusal)) => return Err(refusal.into()),
        Err(crate::quota::SessionAdmission::Store(error)) => return Err(error.into()),
    };
    let row = state
        .store
        .create_session(&principal.tenant, agent.as_deref())
        .await?;
    // A widget token's id, or the key's: the sessions it created (sessions_per_key).
    state
        .store
        .add_widget_session(&principal.tenant, &principal.key, &row.id)
        .await?;
    Ok((StatusCode::CREATED, Json(row)).into_response())
}

async fn list_sessions(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let rows = state.store.list_sessions(&principal.tenant).await?;
    Ok(Json(SessionList { sessions: rows }).into_response())
}

async fn show_session(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let row = state
        .store
        .session(&principal.tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("such session"))?;
    let messages = state.store.messages(&principal.tenant, &id).await?;
    Ok(Json(SessionDetail {
        session: row,
        messages,
    })
    .into_response())
}

async fn delete_session(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    if state.runs.is_going_anywhere(&principal.tenant, &id).await {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the session has a run going; cancel it first",
        ));
    }
    state.store.delete_session(&principal.tenant, &id).await?;
    // Its room goes with it: its files and artifacts (a room never made is nothing to remove).
    let room = state.runs.room(&principal.tenant, &id);
    if let Err(error) = room.remove() {
        tracing::warn!(
            "the folder of the deleted session {id} stays in {}: {error}",
            room.dir.display()
        );
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn post_message(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let value: serde_json::Value = body(&headers, &bytes)?;
    let message: NewMessage = serde_json::from_value(value).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "send {\"text\": \"…\"} or {\"prompt\": \"NAME\"} (a prompt snapshot): exactly one, a string",
        )
    })?;
    let input = match message {
        NewMessage::Text(TextMessage { text }) if !text.trim().is_empty() => {
            crate::runs::UserInput::Text(text)
        }
        NewMessage::Text(_) => return Err(ApiError::new(StatusCode::BAD_REQUEST, "text is empty")),
        NewMessage::Prompt(PromptReference { prompt: name }) => crate::runs::UserInput::Prompt(
            state
                .store
                .prompt(&principal.tenant, &name)
                .await?
                .ok_or_else(|| ApiError::not_found(&format!("prompt snapshot named {name:?}")))?,
        ),
    };
    // The cursor to follow the run from: its events come after every event stored so far.
    let after = last_seq(&state, &principal, &id).await?;
    state.runs.start(&principal, &id, input).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Accepted {
            session: id,
            events_after: after,
        }),
    )
        .into_response())
}

/// The cursor of the last event stored for the session (0: none).
async fn last_seq(state: &ServiceState, principal: &Principal, id: &str) -> Result<u64, ApiError> {
    if state.store.session(&principal.tenant, id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    let mut after = 0;
    loop {
        let page = state
            .store
            .events_after(&principal.tenant, id, after, MAX_PAGE)
            .await?;
        match page.last() {
            Some(last) => after = last.seq,
            None => return Ok(after),
        }
    }
}

async fn cancel_run(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    match state.runs.cancel_anywhere(&principal.tenant, &id).await {
        crate::runs::CancelOutcome::Cancelled => {
            Ok((StatusCode::ACCEPTED, Json(Cancelled { cancelled: true })).into_response())
        }
        crate::runs::CancelOutcome::NotGoing => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the session has no run going",
        )),
        crate::runs::CancelOutcome::Unreachable => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the run goes on another instance of the service, which this one cannot signal yet; it can be cancelled through that instance",
        )),
    }
}

/// A cursor: a whole number from 0 to `i64::MAX` (the largest the store keeps).
fn cursor(text: &str) -> Option<u64> {
    text.parse::<i64>()
        .ok()
        .and_then(|number| u64::try_from(number).ok())
}

/// `after` and `limit` from a query string such as `after=12&limit=50`.
fn cursor_query(query: Option<&str>) -> Result<(u64, usize), ApiError> {
    let mut after = 0;
    let mut limit = DEFAULT_PAGE;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{key} must be a whole number"),
            )
        };
        match key {
            "after" => after = cursor(value).ok_or_else(bad)?,
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|limit| (1..=MAX_PAGE).contains(limit))
                    .ok_or_else(|| {
                        ApiError::new(
                            StatusCode::BAD_REQUEST,
                            format!("limit must be a whole number from 1 to {MAX_PAGE}"),
                        )
                    })?;
            }
            other => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter {other:?} (after, limit)"),
                ));
            }
        }
    }
    Ok((after, limit))
}

async fn list_events(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let (after, limit) = cursor_query(query.as_deref())?;
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    let events = state
        .store
        .events_after(&principal.tenant, &id, after, limit)
        .await?;
    let next = events.last().map_or(after, |last| last.seq);
    Ok(Json(EventPage { events, next }).into_response())
}

/// The session's events as Server-Sent Events (`id:` is the cursor), from `after` or the
/// `Last-Event-ID` a reconnecting client sends; the stream ends once no run is going and every
/// event was sent.
async fn stream_events(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let (mut after, _) = cursor_query(query.as_deref())?;
    if let Some(last) = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
    {
        after = cursor(last.trim()).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "Last-Event-ID must be a whole number",
            )
        })?;
    }
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    // Counted until the stream's body is dropped (it ended, or the client went away).
    let slot = state.runs.quotas().admit_stream(&principal)?;
    // Events another instance stores wake this stream too.
    state.runs.listen();
    let stream = futures::stream::unfold(
        (state, principal, id, after, Vec::new().into_iter()),
        |(state, principal, id, mut after, mut pending)| async move {
            loop {
                if let Some(row) = pending.next() {
                    let event: crate::store::EventRow = row;
                    after = event.seq;
                    let sse = Event::default()
                        .id(event.seq.to_string())
                        .data(event.event.to_string());
                    return Some((
                        Ok::<Event, Infallible>(sse),
                        (state, principal, id, after, pending),
                    ));
                }
                let wakeup = state.runs.wakeup(&id);
                let notified = wakeup.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let going = state.runs.is_going_anywhere(&principal.tenant, &id).await;
                let page = state
                    .store
                    .events_after(&principal.tenant, &id, after, MAX_PAGE)
                    .await
                    .unwrap_or_default();
                if !page.is_empty() {
                    pending = page.into_iter();
                    continue;
                }
                if !going {
                    return None;
                }
                // Woken by the next stored event; a periodic look covers a missed wake-up.
                let _ = tokio::time::timeout(Duration::from_secs(5), notified).await;
            }
        },
    );
    let stream = futures::StreamExt::map(stream, move |event| {
        let _counted = &slot;
        event
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

async fn list_client_calls(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    let pending = state
        .store
        .pending_client_calls(&principal.tenant, &id)
        .await?;
    Ok(Json(ClientCallList {
        client_calls: pending,
    })
    .into_response())
}

/// `POST /v1/sessions/{id}/client-calls/{call}`: the tool's result, or its error.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum ClientAnswer {
    Result(ClientResult),
    Error(ClientError),
}

/// The tool's result, as the model will read it (a string as it is, anything else as JSON).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientResult {
    result: serde_json::Value,
}

/// The tool failed: the model reads this as an error result.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientError {
    error: String,
}

/// The caller's answer to a client-side tool call; the waiting run goes on with it.
async fn answer_client_call(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path((id, call)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let answer = match body::<ClientAnswer>(&headers, &bytes) {
        Ok(ClientAnswer::Result(ClientResult { result })) => json!({"result": result}),
        Ok(ClientAnswer::Error(ClientError { error })) => json!({"error": error}),
        Err(refused) if refused.status == StatusCode::BAD_REQUEST => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "answer with exactly one of {\"result\": …} and {\"error\": \"…\"}",
            ));
        }
        Err(refused) => return Err(refused),
    };
    if state.store.session(&principal.tenant, &id).await?.is_none() {
        return Err(ApiError::not_found("such session"));
    }
    match state
        .runs
        .answer_client_call(&principal.tenant, &id, &call, &answer)
        .await
    {
        Ok(()) => Ok(Json(Answered { answered: call }).into_response()),
        Err(AnswerError::Unknown) => Err(ApiError::not_found("such client call")),
        Err(AnswerError::Answered) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the client call was answered already; an answer is taken once",
        )),
        Err(lapsed @ AnswerError::Lapsed(_)) => {
            Err(ApiError::new(StatusCode::CONFLICT, lapsed.to_string()))
        }
        Err(AnswerError::Store(error)) => Err(error.into()),
    }
}

/// The audit filter from a query string: `session`, `tool`, `source`, `decision`, `since` and
/// `until` (Unix ms), `after` (the cursor: a record id) and `limit` (at most 500).
fn audit_query(query: Option<&str>, tenant: &str) -> Result<warden_policy::AuditQuery, ApiError> {
    let mut filter = warden_policy::AuditQuery {
        tenant: Some(tenant.to_owned()),
        limit: Some(DEFAULT_PAGE),
        ..warden_policy::AuditQuery::default()
    };
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = |what: &str| {
            value
                .parse::<i64>()
                .ok()
                .filter(|number| *number >= 0)
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("{what} must be a whole number, 0 or more"),
                    )
                })
        };
        let text = || Some(value.replace('+', " "));
        match key {
            "session" => filter.session = text(),
            "tool" => filter.tool = text(),
            "source" => filter.source = text(),
            "decision" => filter.decision = text(),
            "since" => filter.since_unix_ms = Some(number("since")?),
            "until" => filter.until_unix_ms = Some(number("until")?),
            "after" => filter.after_id = Some(number("after")?),
            "limit" => {
                let limit = usize::try_from(number("limit")?).unwrap_or(0);
                if !(1..=MAX_PAGE).contains(&limit) {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("limit must be a whole number from 1 to {MAX_PAGE}"),
                    ));
                }
                filter.limit = Some(limit);
            }
            other => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "unknown query parameter {other:?} (session, tool, source, decision, since, until, after, limit)"
                    ),
                ));
            }
        }
    }
    Ok(filter)
}

/// The tenant's audit records, oldest first from the cursor; `next` is the cursor to go on from.
async fn query_audit(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let filter = audit_query(query.as_deref(), &principal.tenant)?;
    // A page: the oldest records after the cursor, at most `limit`.
    let page = warden_policy::AuditQuery {
        oldest_first: true,
        ..filter.clone()
    };
    let records = state
        .opener
        .audit(&page)
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error))?;
    let next = records
        .last()
        .map_or(filter.after_id.unwrap_or(0), |record| record.id);
    let records = records
        .into_iter()
        .filter_map(|record| match serde_json::to_value(record) {
            Ok(serde_json::Value::Object(fields)) => Some(fields),
            _ => None,
        })
        .collect();
    Ok(Json(AuditPage { records, next }).into_response())
}

async fn list_approvals(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let pending = state.store.pending_approvals(&principal.tenant).await?;
    Ok(Json(ApprovalList { approvals: pending }).into_response())
}

/// Decides a pending approval; the audit names the deciding key's caller.
async fn decide_approval(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if !principal.role.decides_approvals() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only an approver's or a tenant admin's key decides approvals (warden service key create --role approver)",
        ));
    }
    let request: NewDecision = body(&headers, &bytes)?;
    let decision = match request.decision {
        DecisionKind::AllowOnce => Decision::AllowOnce,
        DecisionKind::AllowForSession => Decision::AllowForSession,
        DecisionKind::Deny => Decision::Deny {
            reason: request.reason.filter(|reason| !reason.trim().is_empty()),
        },
    };
    match state
        .runs
        .decide(&principal.tenant, &id, decision, &principal)
        .await
    {
        Ok(row) => Ok(Json(ApprovalDecided { approval: row }).into_response()),
        Err(DecideError::Unknown) => Err(ApiError::not_found("such approval")),
        Err(DecideError::Decided) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the approval was decided already, or expired",
        )),
        Err(DecideError::OwnRun) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            DecideError::OwnRun.to_string(),
        )),
        Err(DecideError::Store(error)) => Err(error.into()),
    }
}

async fn list_servers(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let servers = state.store.list_servers(&principal.tenant).await?;
    Ok(Json(ServerList { servers }).into_response())
}

/// Only a tenant admin's key registers or removes servers.
pub(crate) fn require_admin(principal: &Principal) -> Result<(), ApiError> {
    if principal.role.administers() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only a tenant admin's key changes the tenant's servers, skills, knowledge and prompts (warden service key create --role admin)",
        ))
    }
}

/// Registers a remote MCP server for the tenant: never a command, only an http(s) URL; header
/// values name environment variables, never hold a credential. Its tools ask before every call.
async fn put_server(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    require_admin(&principal)?;
    let request: NewServer = body(&headers, &bytes)?;
    let bad = |reason: String| ApiError::new(StatusCode::BAD_REQUEST, reason);
    if !warden_config::is_valid_server_name(&name)
        || warden_vocab::HOST_TOOL_SOURCES.contains(&name.as_str())
    {
        return Err(bad(format!(
            "server name {name:?}: letters, digits, `_` and `-`, starting with a letter or digit, no `__`, and not builtin, code or client"
        )));
    }
    if state.opener.operator_servers().contains(&name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("the operator configured a server named {name:?}; choose another name"),
        ));
    }
    let secrets: Vec<String> = state
        .store
        .tenant_secret_names(&principal.tenant)
        .await?
        .into_iter()
        .map(|secret| secret.name)
        .collect();
    crate::tenant_rules::check_headers(
        &request.headers,
        &state.opener.tenancy().env_for(&principal.tenant),
        &secrets,
    )
    .map_err(|refusal| bad(refusal.to_string()))?;
    crate::tenant_rules::check_server_url(
        &state.runs.egress_guard(&principal.tenant),
        &request.url,
    )
    .await
    .map_err(|refusal| bad(refusal.to_string()))?;
    let row = ServerRow {
        name,
        url: request.url,
        headers: request.headers,
        created_at: crate::store::now(),
    };
    let created = state.store.put_server(&principal.tenant, &row).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(row)).into_response())
}

async fn delete_server(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    require_admin(&principal)?;
    if state.store.delete_server(&principal.tenant, &name).await? {
        state.runs.tokens().forget(&principal.tenant, &name);
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found("such server"))
    }
}

async fn list_skills(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let skills = state.store.list_skills(&principal.tenant).await?;
    Ok(Json(SkillList { skills }).into_response())
}

async fn show_skill(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    let text = state
        .store
        .skill_text(&principal.tenant, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("such skill"))?;
    Ok(Json(SkillShown { name, text }).into_response())
}

/// Creates or replaces a skill, validated exactly as a local SKILL.md is (frontmatter, name
/// rules, hidden Unicode, sizes); an error names its line.
async fn put_skill(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    require_admin(&principal)?;
    let request: SkillText = body(&headers, &bytes)?;
    let bad = |reason: String| ApiError::new(StatusCode::BAD_REQUEST, reason);
    warden_skills::check_name(&name).map_err(|why| bad(format!("skill name {name:?}: {why}")))?;
    let document = warden_skills::parse_skill_md(request.text.as_bytes())
        .map_err(|error| bad(format!("SKILL.md {error}")))?;
    if document.frontmatter.name != name {
        return Err(bad(format!(
            "SKILL.md names the skill {:?}; it must be {name:?}, as in the path",
            document.frontmatter.name
        )));
    }
    let created = state
        .store
        .put_skill(
            &principal.tenant,
            &name,
            &document.frontmatter.description,
            &request.text,
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(SkillShown {
            name,
            text: request.text,
        }),
    )
        .into_response())
}

/// Deletes a skill; refused (409, with the profiles) while an agent profile names it, unless
/// `?force=true` — after which those profiles fail to open, saying the skill was not found.
async fn delete_skill(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    require_admin(&principal)?;
    let force = match query.as_deref() {
        None | Some("") => false,
        Some("force=true") => true,
        Some("force=false") => false,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("unknown query {other:?} (force=true)"),
            ));
        }
    };
    if state
        .store
        .skill_text(&principal.tenant, &name)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("such skill"));
    }
    let profiles = state.opener.profiles_naming_skill(&name);
    if !force && !profiles.is_empty() {
        let error = format!(
            "agent profiles name the skill {name:?} ({}); delete with ?force=true and those profiles fail to open",
            profiles.join(", ")
        );
        return Ok((StatusCode::CONFLICT, Json(SkillInUse { error, profiles })).into_response());
    }
    state.store.delete_skill(&principal.tenant, &name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn issue_key(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if principal.role != Role::Operator {
        return Err(ApiError::not_found("such endpoint for this key"));
    }
    let request: NewKey = body(&headers, &bytes)?;
    if tenant.trim().is_empty() || request.caller.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "tenant and caller must not be empty",
        ));
    }
    let role = match request.role {
        None | Some(TenantKeyRole::Caller) => Role::Caller,
        Some(TenantKeyRole::Approver) => Role::Approver,
        Some(TenantKeyRole::Admin) => Role::Admin,
    };
    let key = state
        .store
        .issue_key(&tenant, &request.caller, role)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(NewKeyIssued {
            id: key.id,
            tenant,
            caller: request.caller,
            role,
            key: key.secret,
        }),
    )
        .into_response())
}

/// Mints a widget token (a tenant's key): the product's backend asks for one per end user and
/// hands it to the page; it reaches one agent profile's sessions that it creates, nothing else.
async fn issue_widget_token(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let principal = principal(&extensions)?;
    if !matches!(principal.role, Role::Caller | Role::Approver | Role::Admin) {
        return Err(ApiError::not_found("such endpoint for this key"));
    }
    let request: NewWidgetToken = body(&headers, &bytes)?;
    let caller = request.caller.trim();
    if caller.is_empty() || caller.chars().count() > 200 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "caller must be 1 to 200 characters, not blank",
        ));
    }
    let ttl = match request.ttl_sec {
        None => Some(WIDGET_TOKEN_TTL),
        // A whole number of seconds in range; the cast is exact for those.
        Some(seconds) if seconds.fract() == 0.0 && (1.0..=3600.0).contains(&seconds) => {
            Some(seconds as u64)
        }
        Some(_) => None,
    };
    let Some(ttl) = ttl.filter(|ttl| (1..=WIDGET_TOKEN_MAX_TTL).contains(ttl)) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("ttl_sec must be a whole number from 1 to {WIDGET_TOKEN_MAX_TTL}"),
        ));
    };
    if !state.opener.knows_agent(&request.agent) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no agent profile named {:?} (define it as [agents.{}])",
                request.agent, request.agent
            ),
        ));
    }
    let issued = state
        .store
        .issue_widget_token(&principal.tenant, &request.agent, caller, ttl)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(WidgetTokenIssued {
            token: issued.secret,
            expires_at: issued.expires_at,
        }),
    )
        .into_response())
}

fn grant_error(error: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error)
}

async fn list_grants(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
) -> Result<Response, ApiError> {
    inventory::require_operator(&principal(&extensions)?)?;
    let (skills, scripts) = state.opener.grants().map_err(grant_error)?;
    Ok(Json(GrantList {
        skill_grants: skills
            .into_iter()
            .map(|grant| SkillGrantRow {
                server: grant.server,
                resource_uri: grant.resource_uri,
                tools: grant.tools,
                content_hash: grant.content_hash,
                approved_at: grant.approved_at_unix,
            })
            .collect(),
        script_grants: scripts
            .into_iter()
            .map(|grant| ScriptGrantRow {
                skill: grant.skill,
                script: grant.script,
                network: grant.network,
                granted_at: grant.granted_unix,
                expires_at: grant.expires_unix,
            })
            .collect(),
    })
    .into_response())
}

fn revoked(found: bool) -> Result<Response, ApiError> {
    if found {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found("such grant"))
    }
}

/// Revokes a skill grant; the skill's URI is one path segment, percent-encoded.
async fn revoke_skill_grant(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path((server, uri)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    inventory::require_operator(&principal(&extensions)?)?;
    revoked(
        state
            .opener
            .revoke_skill_grant(&server, &uri)
            .map_err(grant_error)?,
    )
}

/// Revokes every script grant of a skill (the skill-wide one and each script's).
async fn revoke_skill_scripts_grant(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path(skill): Path<String>,
) -> Result<Response, ApiError> {
    inventory::require_operator(&principal(&extensions)?)?;
    revoked(
        state
            .opener
            .revoke_script_grant(&skill, None)
            .map_err(grant_error)?,
    )
}

/// Revokes the grant of one script (its path in the skill folder, percent-encoded).
async fn revoke_script_grant(
    State(state): State<ServiceState>,
    extensions: http::Extensions,
    Path((skill, script)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    inventory::require_operator(&principal(&extensions)?)?;
    revoked(
        state
            .opener
            .revoke_script_grant(&skill, Some(&script))
            .map_err(grant_error)?,
    )
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

    #[test]
    fn a_cursor_query_takes_after_and_limit_and_refuses_anything_else() {
        assert_eq!(cursor_query(None).ok(), Some((0, DEFAULT_PAGE)));
        assert_eq!(
            cursor_query(Some("after=7&limit=500")).ok(),
            Some((7, MAX_PAGE))
        );
        assert!(cursor_query(Some("after=x")).is_err());
        assert!(cursor_query(Some("limit=501")).is_err());
        assert!(cursor_query(Some("limit=0")).is_err());
        assert!(cursor_query(Some("sort=desc")).is_err());
    }
}
