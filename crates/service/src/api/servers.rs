//! The remote MCP servers a tenant admin registers through the API: listed, registered or replaced, removed.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{Admin, ApiError, Caller, ServiceState, body, created_or_replaced, removed};
use crate::store::ServerRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/servers", list_servers, "The tenant's registered remote MCP servers.")
            .json::<ServerList>(200),
        Route::put("/v1/servers/{name}", put_server, "Registers (201) or replaces (200) a remote MCP server (a tenant admin's key): an http(s) URL, header values that name environment variables; its tools ask before every call.")
            .body::<NewServer>()
            .created_or_replaced::<ServerRow>()
            .errors(&[400, 403, 409, 413, 415]),
        Route::delete("/v1/servers/{name}", delete_server, "Removes a registered server (a tenant admin's key).")
            .errors(&[403, 404]),
    ]
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

async fn list_servers(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let servers = state.store.list_servers(&principal.tenant).await?;
    Ok(Json(ServerList { servers }).into_response())
}

/// Registers a remote MCP server for the tenant: never a command, only an http(s) URL; header
/// values name environment variables, never hold a credential. Its tools ask before every call.
async fn put_server(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
    Ok((created_or_replaced(created), Json(row)).into_response())
}

async fn delete_server(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let found = state.store.delete_server(&principal.tenant, &name).await?;
    if found {
        state.runs.tokens().forget(&principal.tenant, &name);
    }
    removed(found, "such server")
}
