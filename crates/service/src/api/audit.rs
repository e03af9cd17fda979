//! The tenant's audit records through the API, filtered and paged by cursor.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use serde_json::json;

use super::route::Route;
use super::{ApiError, Caller, DEFAULT_PAGE, MAX_PAGE, ServiceState};

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    let text = || json!({"type": "string"});
    let time = || json!({"type": "integer", "minimum": 0, "maximum": i64::MAX});
    vec![
        Route::get(
            "/v1/audit",
            query_audit,
            "The tenant's audit records, oldest first after a cursor.",
        )
        .query(vec![
            ("session", text(), "only this session"),
            ("tool", text(), "only this public tool name"),
            ("source", text(), "only this surface (agent, code-mode, …)"),
            (
                "decision",
                text(),
                "only calls that ended so (allowed, denied, …)",
            ),
            (
                "since",
                time(),
                "only records at or after this time (Unix ms)",
            ),
            ("until", time(), "only records before this time (Unix ms)"),
            ("after", time(), "the cursor: records after this id"),
            (
                "limit",
                json!({"type": "integer", "minimum": 1, "maximum": 500}),
                "at most this many (default 100)",
            ),
        ])
        .json::<AuditPage>(200)
        .errors(&[400]),
    ]
}

/// A page of audit records (as `warden audit --json` prints them); `next` is the cursor.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct AuditPage {
    pub(crate) records: Vec<serde_json::Map<String, serde_json::Value>>,
    pub(crate) next: i64,
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
    Caller(principal): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let filter = audit_query(query.as_deref(), &principal.tenant)?;
    // A page: the oldest records after the cursor, at most `limit`.
    let page = warden_policy::AuditQuery {
        oldest_first: true,
        ..filter.clone()
    };
    let records = state
        .opener
        .audit(&page)
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
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
