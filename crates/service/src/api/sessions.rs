//! The sessions of a tenant through the API: created from an agent profile, listed, shown with their conversation, deleted with their events and room.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{ApiError, Caller, ServiceState, body, known_agent, tenant_session};
use crate::signals::Signal;
use crate::store::SessionRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::post(
            "/v1/sessions",
            create_session,
            "Creates a session from an agent profile (the default agent without one).",
        )
        .optional_body::<NewSession>()
        .json::<SessionRow>(201)
        .errors(&[400, 404, 413, 415]),
        Route::get("/v1/sessions", list_sessions, "The tenant's sessions.")
            .json::<SessionList>(200),
        Route::get(
            "/v1/sessions/{id}",
            show_session,
            "A session and its conversation.",
        )
        .json::<SessionDetail>(200)
        .errors(&[404]),
        Route::delete(
            "/v1/sessions/{id}",
            delete_session,
            "Deletes a session with its events (not while a run is going).",
        )
        .errors(&[404, 409]),
    ]
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

/// `POST /v1/sessions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewSession {
    /// The agent profile (`[agents.NAME]`); the default agent when absent.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    agent: Option<String>,
}

async fn create_session(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
    if let Some(agent) = &agent {
        known_agent(&state, agent)?;
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
    state.store.signals().publish(Signal::SessionsChanged {
        tenant: principal.tenant.clone(),
    });
    Ok((StatusCode::CREATED, Json(row)).into_response())
}

async fn list_sessions(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let rows = state.store.list_sessions(&principal.tenant).await?;
    Ok(Json(SessionList { sessions: rows }).into_response())
}

async fn show_session(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let row = tenant_session(&state, &principal.tenant, &id).await?;
    let messages = state.store.messages(&principal.tenant, &id).await?;
    Ok(Json(SessionDetail {
        session: row,
        messages,
    })
    .into_response())
}

async fn delete_session(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    tenant_session(&state, &principal.tenant, &id).await?;
    if state.runs.is_going_anywhere(&principal.tenant, &id).await {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the session has a run going; cancel it first",
        ));
    }
    state.store.delete_session(&principal.tenant, &id).await?;
    state.store.signals().publish(Signal::SessionsChanged {
        tenant: principal.tenant.clone(),
    });
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
