//! What a tenant's sessions reach, through the API: each server's status, every tool with the settings the gate applies, prompt snapshots an admin copies in from a server, and an admin's OAuth sign-in to a registered server (its callback route included); and the operator's view of tenants and their keys.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{Html, IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use crate::api::route::Route;
use crate::api::{
    Admin, ApiError, Caller, Operator, ServiceState, body, created_or_replaced, known_agent,
    removed,
};
use crate::store::{KeyRow, Principal, PromptRow, Role, TenantRow};
use crate::tenant_oauth::SignInOutcome;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/servers/status", servers_status, "Each server a session of the tenant (of `agent`'s profile) reaches, connected now: state, protocol, counts, last failure.")
            .query(crate::openapi::agent_parameters())
            .json::<ServerStatusList>(200)
            .errors(&[400, 404, 422]),
        Route::post("/v1/servers/{name}/login", sign_in, "A tenant admin starts an OAuth sign-in to a registered server: open `authorization_url`; the tokens are held in memory only.")
            .json::<SignInStarted>(200)
            .errors(&[403, 404, 409, 422]),
        Route::get("/v1/tools", list_tools, "Every tool a session of the tenant (of `agent`'s profile) is offered, with its source and what governs its calls.")
            .query(crate::openapi::agent_parameters())
            .json::<ToolList>(200)
            .errors(&[400, 404, 422]),
        Route::get("/v1/prompts", list_prompts, "The tenant's prompt snapshots.")
            .json::<PromptList>(200),
        Route::get("/v1/prompts/{name}", show_prompt, "A prompt snapshot.")
            .json::<PromptRow>(200)
            .errors(&[404]),
        Route::put("/v1/prompts/{name}", put_prompt, "A tenant admin copies a server's prompt in (got once now, through the gate); a message can then be it.")
            .body::<NewPrompt>()
            .created_or_replaced::<PromptRow>()
            .errors(&[400, 403, 413, 415, 422]),
        Route::delete("/v1/prompts/{name}", delete_prompt, "Deletes a prompt snapshot (a tenant admin's key).")
            .errors(&[403, 404]),
    ]
}

/// One server a session of the tenant reaches, as it stood after connecting.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ServerStatusRow {
    pub(crate) name: String,
    /// `operator` (configured by the operator) or `tenant` (registered by a tenant admin).
    pub(crate) origin: String,
    /// `stdio`, `http` (Streamable HTTP) or `sse`.
    pub(crate) transport: String,
    /// `connected`, `failed`, `needs login`, …
    pub(crate) state: String,
    /// The negotiated protocol revision.
    pub(crate) protocol: Option<String>,
    /// The server's own name and version, as it said.
    pub(crate) server: Option<String>,
    pub(crate) tools: Option<usize>,
    pub(crate) resources: Option<usize>,
    pub(crate) prompts: Option<usize>,
    /// The last failure, in one line.
    pub(crate) failure: Option<String>,
    /// The last lines a stdio server wrote to stderr.
    pub(crate) stderr_tail: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ServerStatusList {
    pub(crate) servers: Vec<ServerStatusRow>,
}

/// One tool a session offers, with what governs its calls.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ToolRow {
    /// The name the model calls.
    pub(crate) name: String,
    /// `builtin`, `code` (registered by the embedding application), `client` (answered by the
    /// caller) or `mcp`.
    pub(crate) source: String,
    /// The MCP server, for an MCP tool.
    pub(crate) server: Option<String>,
    pub(crate) description: String,
    /// The capability classes the gate derives (`read`, `write`, `destructive`, `external`).
    pub(crate) classes: Vec<String>,
    /// The effect class its author declared (a tool defined in code).
    pub(crate) effect: Option<String>,
    pub(crate) required_permission: Option<String>,
    /// The execution timeout, in seconds (a pending approval is never timed).
    pub(crate) timeout_sec: u64,
    /// Whether every call asks a person first.
    pub(crate) requires_approval: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ToolList {
    pub(crate) tools: Vec<ToolRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct PromptList {
    pub(crate) prompts: Vec<PromptRow>,
}

/// `PUT /v1/prompts/{name}`: the server prompt to copy in, and its arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewPrompt {
    /// A server a session of the tenant reaches.
    #[schemars(regex(pattern = r"\S"))]
    server: String,
    /// The prompt's name on that server.
    #[schemars(regex(pattern = r"\S"))]
    prompt: String,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
}

/// A sign-in started: open `authorization_url` in a browser; the authorization server sends it
/// back to `redirect_uri`, this service's callback.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SignInStarted {
    pub(crate) server: String,
    pub(crate) authorization_url: String,
    pub(crate) redirect_uri: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct TenantList {
    pub(crate) tenants: Vec<TenantRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct KeyList {
    pub(crate) keys: Vec<KeyRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct KeyRevoked {
    pub(crate) revoked: String,
}

/// `agent` from a query string (`agent=NAME`), checked against the profiles.
fn agent_query(state: &ServiceState, query: Option<&str>) -> Result<Option<String>, ApiError> {
    let mut agent = None;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        match pair.split_once('=') {
            Some(("agent", name)) if !name.is_empty() => agent = Some(name.to_owned()),
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("unknown query {pair:?} (agent=NAME)"),
                ));
            }
        }
    }
    if let Some(name) = &agent {
        known_agent(state, name)?;
    }
    Ok(agent)
}

/// What a session of the tenant (for `?agent=`) would reach, connected now.
async fn inspect(
    state: &ServiceState,
    principal: &Principal,
    agent: Option<&str>,
) -> Result<crate::runs::Inspection, ApiError> {
    state
        .runs
        .inspect(&principal.tenant, agent)
        .await
        .map_err(|error| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error))
}

/// `GET /v1/servers/status`: each server a session of the tenant reaches, connected now.
pub(crate) async fn servers_status(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let agent = agent_query(&state, query.as_deref())?;
    let registered: Vec<String> = state
        .store
        .list_servers(&principal.tenant)
        .await?
        .into_iter()
        .map(|row| row.name)
        .collect();
    let inspection = inspect(&state, &principal, agent.as_deref()).await?;
    let servers = inspection
        .servers
        .into_iter()
        .map(|status| {
            let tenant_owned = registered.contains(&status.name);
            let operator = principal.role == Role::Operator;
            let failure = match (tenant_owned, status.state) {
                // The operator's `warden mcp login` is not how a tenant signs in.
                (true, warden_mcp::ServerState::NeedsLogin) => Some(format!(
                    "needs login: a tenant admin signs in with POST /v1/servers/{}/login",
                    status.name
                )),
                // The operator sees what went wrong; a tenant one generic line, never the
                // operator's paths, commands or a server's own words.
                _ if operator => status.failure,
                (_, _) => status
                    .failure
                    .as_deref()
                    .map(|failure| tenant_failure_line(tenant_owned, failure)),
            };
            ServerStatusRow {
                origin: if tenant_owned { "tenant" } else { "operator" }.to_owned(),
                transport: status.transport.to_owned(),
                state: status.state.label().to_owned(),
                protocol: status.protocol_revision,
                server: status.server_name.map(|name| match status.server_version {
                    Some(version) => format!("{name} {version}"),
                    None => name,
                }),
                tools: status.counts.tools,
                resources: status.counts.resources,
                prompts: status.counts.prompts,
                failure,
                stderr_tail: if operator {
                    status.stderr_tail
                } else {
                    Vec::new()
                },
                name: status.name,
            }
        })
        .collect();
    Ok(Json(ServerStatusList { servers }).into_response())
}

/// `GET /v1/tools`: every tool a session of the tenant (for `?agent=`) is offered, with what
/// governs its calls.
pub(crate) async fn list_tools(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let agent = agent_query(&state, query.as_deref())?;
    let inspection = inspect(&state, &principal, agent.as_deref()).await?;
    let mut tools: Vec<ToolRow> = inspection
        .tools
        .into_iter()
        .map(|descriptor| {
            let source = &descriptor.identity.source;
            let server = (!source.is_host()).then(|| source.server_name().to_owned());
            let default_timeout = if source.is_host() {
                warden_vocab::DEFAULT_HOST_TOOL_TIMEOUT
            } else {
                warden_vocab::DEFAULT_TOOL_TIMEOUT
            };
            ToolRow {
                description: inspection
                    .descriptions
                    .get(&descriptor.public_name)
                    .cloned()
                    .unwrap_or_default(),
                source: if source.is_host() {
                    source.server_name()
                } else {
                    "mcp"
                }
                .to_owned(),
                server,
                classes: descriptor
                    .classes()
                    .iter()
                    .map(|class| class.as_str().to_owned())
                    .collect(),
                effect: descriptor.effect.map(|class| class.as_str().to_owned()),
                required_permission: descriptor.required_permission.clone(),
                timeout_sec: descriptor.timeout.unwrap_or(default_timeout).as_secs(),
                requires_approval: descriptor.requires_approval,
                name: descriptor.public_name,
            }
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(ToolList { tools }).into_response())
}

/// `POST /v1/servers/{name}/login`: a tenant admin starts signing in to a registered server;
/// the tokens it gets are held in memory for the tenant and that server only.
pub(crate) async fn sign_in(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let server = state
        .store
        .list_servers(&principal.tenant)
        .await?
        .into_iter()
        .find(|row| row.name == name)
        .ok_or_else(|| ApiError::not_found("such server"))?;
    if server.has_authorization_header() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "{name} authenticates with its Authorization header; remove the header to sign in with OAuth"
            ),
        ));
    }
    // The browser comes back under the public URL, or else the way the admin reached this
    // service (the Host was checked).
    let host = headers
        .get(http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let deployment = state.opener.deployment();
    let redirect_uri = deployment.callback_url(host);
    let authorization_url = state
        .runs
        .tokens()
        .start(
            &principal.tenant,
            &server,
            redirect_uri.clone(),
            deployment.client_metadata_url(),
        )
        .await
        .map_err(|error| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()))?;
    Ok(Json(SignInStarted {
        server: name,
        authorization_url,
        redirect_uri,
    })
    .into_response())
}

/// A page of the callback route: plain text in HTML, nothing from the request echoed as markup.
fn callback_page(status: StatusCode, text: &str) -> Response {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut response = (
        status,
        Html(format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>warden</title></head><body><p>{escaped}</p></body></html>"
        )),
    )
        .into_response();
    response.headers_mut().insert(
        http::header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    response
}

/// `GET /v1/oauth/callback`: where an authorization server sends the admin's browser back. No
/// key: only a redirect carrying the `state` of a sign-in this service started is taken.
pub(crate) async fn sign_in_callback(
    State(state): State<ServiceState>,
    uri: http::Uri,
) -> Response {
    let redirect = format!("http://service{}", uri);
    match state.runs.tokens().deliver(&redirect).await {
        None => callback_page(
            StatusCode::BAD_REQUEST,
            "warden: no sign-in is waiting for this answer (it expired, or was finished already).",
        ),
        Some((tenant, server, SignInOutcome::SignedIn)) => {
            tracing::info!("tenant {tenant} signed in to its server {server}");
            callback_page(
                StatusCode::OK,
                &format!("warden: signed in to {server}. You can close this tab."),
            )
        }
        Some((_, server, outcome)) => {
            let reason = match outcome {
                SignInOutcome::Failed(reason) => reason,
                _ => "the sign-in did not finish".to_owned(),
            };
            callback_page(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("warden: signing in to {server} failed: {reason}"),
            )
        }
    }
}

pub(crate) async fn list_prompts(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let prompts = state.store.list_prompts(&principal.tenant).await?;
    Ok(Json(PromptList { prompts }).into_response())
}

pub(crate) async fn show_prompt(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let prompt = state
        .store
        .prompt(&principal.tenant, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("such prompt"))?;
    Ok(Json(prompt).into_response())
}

/// `PUT /v1/prompts/{name}`: a tenant admin copies a server's prompt in. It is got once now,
/// through the gate (audited as the admin's), and stored; sessions only ever see the copy.
pub(crate) async fn put_prompt(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: NewPrompt = body(&headers, &bytes)?;
    if warden_skills::check_name(&name).is_err() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "prompt name {name:?}: lowercase letters, digits and single hyphens, at most 64"
            ),
        ));
    }
    if request.server.trim().is_empty() || request.prompt.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "server and prompt must not be empty",
        ));
    }
    let (description, messages) = state
        .runs
        .get_prompt_once(
            &principal.tenant,
            &principal.caller,
            &request.server,
            &request.prompt,
            request.arguments.clone(),
        )
        .await
        .map_err(|reason| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "prompt {} of {} could not be got: {reason}",
                    request.prompt, request.server
                ),
            )
        })?;
    let row = PromptRow {
        name,
        server: request.server,
        prompt: request.prompt,
        arguments: request.arguments,
        description,
        messages,
        copied_by: principal.caller.clone(),
        created_at: crate::store::now(),
    };
    let created = state.store.put_prompt(&principal.tenant, &row).await?;
    Ok((created_or_replaced(created), Json(row)).into_response())
}

pub(crate) async fn delete_prompt(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    removed(
        state.store.delete_prompt(&principal.tenant, &name).await?,
        "such prompt",
    )
}

pub(crate) async fn list_tenants(
    State(state): State<ServiceState>,
    _: Operator,
) -> Result<Response, ApiError> {
    let tenants = state.store.list_tenants().await?;
    Ok(Json(TenantList { tenants }).into_response())
}

pub(crate) async fn list_keys(
    State(state): State<ServiceState>,
    _: Operator,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    if !state
        .store
        .list_tenants()
        .await?
        .iter()
        .any(|row| row.name == tenant)
    {
        return Err(ApiError::not_found("such tenant"));
    }
    let keys = state.store.list_keys(&tenant).await?;
    Ok(Json(KeyList { keys }).into_response())
}

pub(crate) async fn revoke_key(
    State(state): State<ServiceState>,
    _: Operator,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if state.store.revoke_key(&id).await? {
        Ok(Json(KeyRevoked { revoked: id }).into_response())
    } else {
        Err(ApiError::not_found("live key with this id"))
    }
}

/// What a tenant reads of a server's failure: an egress refusal of its own server's address
/// (which names only its host and address class), else one generic line.
fn tenant_failure_line(tenant_owned: bool, failure: &str) -> String {
    if !tenant_owned {
        return "unavailable: the operator's server did not connect (the operator can see why)"
            .to_owned();
    }
    if let Some(refusal) = failure.find("egress refused").map(|at| &failure[at..]) {
        return refusal.lines().next().unwrap_or(refusal).to_owned();
    }
    "unreachable: the server refused the connection or did not answer MCP over Streamable HTTP at its URL".to_owned()
}
