//! A session's messages through the API: each user message (or prompt snapshot) starts a run, and a going run can be cancelled.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{ApiError, Caller, MAX_PAGE, ServiceState, body, tenant_session};
use crate::store::Principal;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::post(
            "/v1/sessions/{id}/messages",
            post_message,
            "Posts the user's message: a run starts; its events come after `events_after`.",
        )
        .body::<NewMessage>()
        .json::<Accepted>(202)
        .errors(&[400, 404, 409, 413, 415]),
        Route::post(
            "/v1/sessions/{id}/cancel",
            cancel_run,
            "Cancels the session's run.",
        )
        .json::<Cancelled>(202)
        .errors(&[404, 409]),
    ]
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

async fn post_message(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
    tenant_session(state, &principal.tenant, id).await?;
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
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    tenant_session(&state, &principal.tenant, &id).await?;
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
