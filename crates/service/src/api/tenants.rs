//! The operator's endpoints for tenants: their keys (made, listed, revoked) and the secrets their servers' headers name.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{ApiError, Caller, ServiceState, body};
use crate::store::Role;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::post("/v1/tenants/{tenant}/keys", issue_key, "Operator keys only: makes a key for a caller of the tenant (shown once).")
            .body::<NewKey>()
            .json::<NewKeyIssued>(201)
            .errors(&[400, 404, 413, 415]),
        Route::get("/v1/tenants", crate::inventory::list_tenants, "Operator keys only: every tenant, with its live keys and sessions counted.")
            .json::<crate::inventory::TenantList>(200)
            .errors(&[404]),
        Route::get("/v1/tenants/{tenant}/keys", crate::inventory::list_keys, "Operator keys only: the tenant's keys, revoked ones too (never a secret).")
            .json::<crate::inventory::KeyList>(200)
            .errors(&[404]),
        Route::get("/v1/tenants/{tenant}/secrets", crate::secrets::list_secrets, "Operator keys only: the names of the secrets kept for the tenant's server headers (never a value).")
            .json::<crate::secrets::SecretList>(200)
            .errors(&[404]),
        Route::put("/v1/tenants/{tenant}/secrets/{name}", crate::secrets::put_secret, "Operator keys only: stores a secret the tenant's server headers name as `${secret:NAME}` (new or replacing one); it is never returned.")
            .body::<crate::secrets::NewSecret>()
            .errors(&[400, 404, 413, 415]),
        Route::delete("/v1/tenants/{tenant}/secrets/{name}", crate::secrets::delete_secret, "Operator keys only: removes a secret of the tenant.")
            .errors(&[404]),
        Route::delete("/v1/keys/{id}", crate::inventory::revoke_key, "Operator keys only: revokes a key; it is refused from the next request on.")
            .json::<crate::inventory::KeyRevoked>(200)
            .errors(&[404]),
    ]
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

async fn issue_key(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
