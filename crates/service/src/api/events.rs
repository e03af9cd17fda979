//! A session's events through the API: a page after a cursor, or a Server-Sent Events stream that resumes from `Last-Event-ID`.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::Serialize;

use super::route::Route;
use super::{ApiError, Caller, DEFAULT_PAGE, MAX_PAGE, ServiceState, tenant_session};
use crate::store::EventRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/sessions/{id}/events", list_events, "A page of the session's events after a cursor.")
            .query(crate::openapi::cursor_parameters())
            .json::<EventPage>(200)
            .errors(&[400, 404]),
        Route::get("/v1/sessions/{id}/events/stream", stream_events, "The session's events as Server-Sent Events (`id:` is the cursor; resume with `Last-Event-ID`); the stream ends when no run is going.")
            .query(vec![crate::openapi::cursor_parameters().swap_remove(0)])
            .event_stream()
            .errors(&[400, 404]),
    ]
}

/// A page of events; `next` is the cursor to go on from.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct EventPage {
    pub(crate) events: Vec<EventRow>,
    pub(crate) next: u64,
}

/// A cursor: a whole number from 0 to `i64::MAX` (the largest the store keeps).
fn cursor(text: &str) -> Option<u64> {
    text.parse::<i64>()
        .ok()
        .and_then(|number| u64::try_from(number).ok())
}

/// `after` and `limit` from a query string such as `after=12&limit=50`.
fn cursor_query(query: Option<&str>) -> Result<(u64, usize), ApiError> {
    let mut after = 0;
    let mut limit = DEFAULT_PAGE;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{key} must be a whole number"),
            )
        };
        match key {
            "after" => after = cursor(value).ok_or_else(bad)?,
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|limit| (1..=MAX_PAGE).contains(limit))
                    .ok_or_else(|| {
                        ApiError::new(
                            StatusCode::BAD_REQUEST,
                            format!("limit must be a whole number from 1 to {MAX_PAGE}"),
                        )
                    })?;
            }
            other => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter {other:?} (after, limit)"),
                ));
            }
        }
    }
    Ok((after, limit))
}

async fn list_events(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let (after, limit) = cursor_query(query.as_deref())?;
    tenant_session(&state, &principal.tenant, &id).await?;
    let events = state
        .store
        .events_after(&principal.tenant, &id, after, limit)
        .await?;
    let next = events.last().map_or(after, |last| last.seq);
    Ok(Json(EventPage { events, next }).into_response())
}

/// The session's events as Server-Sent Events (`id:` is the cursor), from `after` or the
/// `Last-Event-ID` a reconnecting client sends; the stream ends once no run is going and every
/// event was sent.
async fn stream_events(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (mut after, _) = cursor_query(query.as_deref())?;
    if let Some(last) = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
    {
        after = cursor(last.trim()).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "Last-Event-ID must be a whole number",
            )
        })?;
    }
    tenant_session(&state, &principal.tenant, &id).await?;
    // Counted until the stream's body is dropped (it ended, or the client went away).
    let slot = state.runs.quotas().admit_stream(&principal)?;
    // Events another instance stores wake this stream too.
    state.runs.listen();
    let stream = futures::stream::unfold(
        (state, principal, id, after, Vec::new().into_iter()),
        |(state, principal, id, mut after, mut pending)| async move {
            loop {
                if let Some(row) = pending.next() {
                    let event: crate::store::EventRow = row;
                    after = event.seq;
                    let sse = Event::default()
                        .id(event.seq.to_string())
                        .data(event.event.to_string());
                    return Some((
                        Ok::<Event, Infallible>(sse),
                        (state, principal, id, after, pending),
                    ));
                }
                let wakeup = state.runs.wakeup(&id);
                let notified = wakeup.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let going = state.runs.is_going_anywhere(&principal.tenant, &id).await;
                let page = state
                    .store
                    .events_after(&principal.tenant, &id, after, MAX_PAGE)
                    .await
                    .unwrap_or_default();
                if !page.is_empty() {
                    pending = page.into_iter();
                    continue;
                }
                if !going {
                    return None;
                }
                // Woken by the next stored event; a periodic look covers a missed wake-up.
                let _ = tokio::time::timeout(Duration::from_secs(5), notified).await;
            }
        },
    );
    let stream = futures::StreamExt::map(stream, move |event| {
        let _counted = &slot;
        event
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_query_takes_after_and_limit_and_refuses_anything_else() {
        assert_eq!(cursor_query(None).ok(), Some((0, DEFAULT_PAGE)));
        assert_eq!(
            cursor_query(Some("after=7&limit=500")).ok(),
            Some((7, MAX_PAGE))
        );
        assert!(cursor_query(Some("after=x")).is_err());
        assert!(cursor_query(Some("limit=501")).is_err());
        assert!(cursor_query(Some("limit=0")).is_err());
        assert!(cursor_query(Some("sort=desc")).is_err());
    }
}
