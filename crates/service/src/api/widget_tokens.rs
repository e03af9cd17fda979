//! Widget tokens through the API: a tenant's key mints a short-lived token for one end user's chat widget.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::route::Route;
use super::{ApiError, Caller, ServiceState, body, known_agent};
use crate::store::Role;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::post("/v1/widget-tokens", issue_widget_token, "A tenant's key mints a short-lived token for one end user's chat widget: it reaches only the sessions of one agent profile it creates (their messages, events and client calls).")
            .body::<NewWidgetToken>()
            .json::<WidgetTokenIssued>(201)
            .errors(&[400, 404, 413, 415]),
    ]
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

/// How long a widget token lives when the request does not say, and at most.
const WIDGET_TOKEN_TTL: u64 = 900;
const WIDGET_TOKEN_MAX_TTL: u64 = 3600;

/// Mints a widget token (a tenant's key): the product's backend asks for one per end user and
/// hands it to the page; it reaches one agent profile's sessions that it creates, nothing else.
async fn issue_widget_token(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
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
    known_agent(&state, &request.agent)?;
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
