//! The tenant's approvals queue through the API: the calls waiting for a person, and an approver's decision on one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{ApiError, Caller, ServiceState, body};
use crate::approvals::{DecideError, Decision};
use crate::store::ApprovalRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/approvals",
            list_approvals,
            "The tenant's calls waiting for a person's decision.",
        )
        .json::<ApprovalList>(200),
        Route::post(
            "/v1/approvals/{id}",
            decide_approval,
            "Decides a pending approval, once (the audit names the key's caller).",
        )
        .body::<NewDecision>()
        .json::<ApprovalDecided>(200)
        .errors(&[400, 403, 404, 409, 413, 415]),
    ]
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ApprovalList {
    pub(crate) approvals: Vec<ApprovalRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ApprovalDecided {
    pub(crate) approval: ApprovalRow,
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

async fn list_approvals(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let pending = state.store.pending_approvals(&principal.tenant).await?;
    Ok(Json(ApprovalList { approvals: pending }).into_response())
}

/// Decides a pending approval; the audit names the deciding key's caller.
async fn decide_approval(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
