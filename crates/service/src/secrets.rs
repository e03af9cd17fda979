//! The secrets an operator keeps for a tenant's server headers (`${secret:NAME}`): set, listed
//! by name and removed through the operator endpoints; a value is written once and never
//! returned, logged or put in an error.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use crate::api::{ApiError, Operator, ServiceState, body, removed};
use crate::store::SecretRow;

/// The longest secret value, in bytes.
const MAX_SECRET_BYTES: usize = 8 * 1024;

/// `PUT /v1/tenants/{tenant}/secrets/{name}`: the value (never shown again).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewSecret {
    /// The value a header naming `${secret:NAME}` sends: printable, at most 8 KiB.
    #[schemars(length(min = 1, max = 8192))]
    value: String,
}

impl std::fmt::Debug for NewSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSecret")
            .field("value", &"[redacted]")
            .finish()
    }
}

/// `GET /v1/tenants/{tenant}/secrets`: names and times, never a value.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SecretList {
    pub(crate) secrets: Vec<SecretRow>,
}

/// Stores or replaces a secret of `tenant` (204).
pub(crate) async fn put_secret(
    State(state): State<ServiceState>,
    _: Operator,
    Path((tenant, name)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: NewSecret = body(&headers, &bytes)?;
    let bad = |reason: &str| ApiError::new(StatusCode::BAD_REQUEST, reason);
    if !crate::tenant_rules::is_secret_name(&name) {
        return Err(bad(
            "a secret is named by a letter or `_` followed by letters, digits and `_` (64 at most)",
        ));
    }
    // A header carries it: no line breaks or control characters, and a bounded size.
    if request.value.is_empty()
        || request.value.len() > MAX_SECRET_BYTES
        || http::HeaderValue::from_str(&request.value).is_err()
    {
        return Err(bad(
            "value: 1 to 8192 bytes that a header can carry (no line breaks or control characters)",
        ));
    }
    state
        .store
        .put_tenant_secret(&tenant, &name, &request.value)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The names of `tenant`'s secrets.
pub(crate) async fn list_secrets(
    State(state): State<ServiceState>,
    _: Operator,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let secrets = state.store.tenant_secret_names(&tenant).await?;
    Ok(Json(SecretList { secrets }).into_response())
}

/// Removes a secret of `tenant` (204), or 404.
pub(crate) async fn delete_secret(
    State(state): State<ServiceState>,
    _: Operator,
    Path((tenant, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    removed(
        state.store.delete_tenant_secret(&tenant, &name).await?,
        "such secret",
    )
}
