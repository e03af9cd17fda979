//! A session's client-side tool calls through the API: the ones waiting for the caller, and the caller's answer to one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::route::Route;
use super::{ApiError, Caller, ServiceState, body, tenant_session};
use crate::client_tools::AnswerError;
use crate::store::ClientCallRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/sessions/{id}/client-calls",
            list_client_calls,
            "The session's client-side tool calls waiting for the caller's answer.",
        )
        .json::<ClientCallList>(200)
        .errors(&[404]),
        Route::post(
            "/v1/sessions/{id}/client-calls/{call}",
            answer_client_call,
            "Answers a client-side tool call, once: exactly one of `result` and `error`.",
        )
        .body::<ClientAnswer>()
        .json::<Answered>(200)
        .errors(&[400, 404, 409, 413, 415]),
    ]
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ClientCallList {
    pub(crate) client_calls: Vec<ClientCallRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Answered {
    pub(crate) answered: String,
}

async fn list_client_calls(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    tenant_session(&state, &principal.tenant, &id).await?;
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
    Caller(principal): Caller,
    Path((id, call)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
    tenant_session(&state, &principal.tenant, &id).await?;
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
