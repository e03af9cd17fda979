//! Guards on what one request may receive or cause: SSE stream bounds (events per stream, total
//! bytes) and the no-resend rule for a session the server forgot. A guard that trips ends that
//! one request with a synthetic JSON-RPC error carrying a marker, which the runtime turns into
//! a one-line failure naming the server and the limit.

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage,
};
use serde_json::{Value, json};
use sse_stream::{Error as SseError, Sse};

/// The key of the marker object in a synthetic error's `data`.
const MARKER_KEY: &str = "wardenGuard";

/// Bounds on SSE responses. Per-event size is bounded separately
/// ([`crate::server::MAX_MESSAGE_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Events one Streamable HTTP response stream may carry (progress and other messages
    /// included); for legacy HTTP+SSE, events between two responses.
    pub max_events_per_stream: usize,
    /// Bytes (event data, names and ids) one response stream may carry; for legacy HTTP+SSE,
    /// bytes between two responses.
    pub max_response_bytes: usize,
}

impl SseLimits {
    /// 100 000 events and 256 MiB: far beyond any honest result, well before memory runs out.
    pub const DEFAULT: SseLimits = SseLimits {
        max_events_per_stream: 100_000,
        max_response_bytes: 256 * 1024 * 1024,
    };
}

impl Default for SseLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which guard tripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tripped {
    /// More events than [`SseLimits::max_events_per_stream`].
    TooManyEvents(usize),
    /// More bytes than [`SseLimits::max_response_bytes`].
    TooManyBytes(usize),
    /// The server answered 404 on its session to a request that may have applied an effect.
    SessionForgotten,
}

impl Tripped {
    fn code(&self) -> &'static str {
        match self {
            Tripped::TooManyEvents(_) => "sse_events",
            Tripped::TooManyBytes(_) => "sse_bytes",
            Tripped::SessionForgotten => "session_forgotten",
        }
    }

    /// The limit as words: `more than 100000 events`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tripped::TooManyEvents(limit) => {
                format!("more than {limit} SSE events (the per-stream limit)")
            }
            Tripped::TooManyBytes(limit) => {
                format!("more than {limit} bytes of SSE (the response size limit)")
            }
            Tripped::SessionForgotten => "the server forgot the session".to_owned(),
        }
    }

    /// The synthetic JSON-RPC error that ends request `id`.
    pub(crate) fn error_response(&self, id: RequestId) -> ServerJsonRpcMessage {
        let limit = match self {
            Tripped::TooManyEvents(limit) | Tripped::TooManyBytes(limit) => Some(*limit),
            Tripped::SessionForgotten => None,
        };
        ServerJsonRpcMessage::error(
            ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                self.describe(),
                Some(json!({ MARKER_KEY: { "code": self.code(), "limit": limit } })),
            ),
            Some(id),
        )
    }

    /// The guard behind a JSON-RPC error, when warden made it.
    pub(crate) fn from_error(error: &ErrorData) -> Option<Tripped> {
        let marker = error.data.as_ref()?.get(MARKER_KEY)?;
        let limit = marker
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|limit| usize::try_from(limit).ok());
        match (marker.get("code").and_then(Value::as_str)?, limit) {
            ("sse_events", Some(limit)) => Some(Tripped::TooManyEvents(limit)),
            ("sse_bytes", Some(limit)) => Some(Tripped::TooManyBytes(limit)),
            ("session_forgotten", _) => Some(Tripped::SessionForgotten),
            _ => None,
        }
    }
}

/// Counts events and bytes against [`SseLimits`].
#[derive(Debug, Clone)]
pub(crate) struct SseBudget {
    limits: SseLimits,
    events: usize,
    bytes: usize,
}

impl SseBudget {
    pub(crate) fn new(limits: SseLimits) -> Self {
        Self {
            limits,
            events: 0,
            bytes: 0,
        }
    }

    /// Counts one event; the guard that trips when it is one too many.
    pub(crate) fn observe(&mut self, event: &Sse) -> Result<(), Tripped> {
        let size = [&event.data, &event.event, &event.id]
            .iter()
            .map(|field| field.as_ref().map_or(0, String::len))
            .sum::<usize>();
        self.events = self.events.saturating_add(1);
        self.bytes = self.bytes.saturating_add(size);
        if self.events > self.limits.max_events_per_stream {
            return Err(Tripped::TooManyEvents(self.limits.max_events_per_stream));
        }
        if self.bytes > self.limits.max_response_bytes {
            return Err(Tripped::TooManyBytes(self.limits.max_response_bytes));
        }
        Ok(())
    }

    /// Starts counting afresh (legacy HTTP+SSE: after each response).
    pub(crate) fn reset(&mut self) {
        self.events = 0;
        self.bytes = 0;
    }
}

type SseEvents = BoxStream<'static, Result<Sse, SseError>>;

/// The response stream of request `id`, bounded: when a limit trips, the stream yields one
/// synthetic error response for `id` and ends (nothing more is read from the server).
pub(crate) fn bounded_response_stream(
    server: &str,
    stream: SseEvents,
    id: Option<RequestId>,
    limits: SseLimits,
) -> SseEvents {
    let server = server.to_owned();
    let state = (stream, SseBudget::new(limits), false);
    futures::stream::unfold(state, move |(mut stream, mut budget, done)| {
        let server = server.clone();
        let id = id.clone();
        async move {
            if done {
                return None;
            }
            let item = stream.next().await?;
            let event = match item {
                Ok(event) => event,
                Err(error) => return Some((Err(error), (stream, budget, false))),
            };
            match budget.observe(&event) {
                Ok(()) => Some((Ok(event), (stream, budget, false))),
                Err(tripped) => {
                    tracing::warn!(server, "ending an SSE response: {}", tripped.describe());
                    let id = id?;
                    let data = serde_json::to_string(&tripped.error_response(id)).ok()?;
                    let synthetic = Sse {
                        data: Some(data),
                        ..Sse::default()
                    };
                    Some((Ok(synthetic), (stream, budget, true)))
                }
            }
        }
    })
    .boxed()
}

/// The id of a client request, if the message is one.
pub(crate) fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// Whether re-sending `message` after a lost session could apply an effect twice. Reads,
/// lists and the handshake are safe to re-send; a tool call, a task update and anything
/// unknown are not.
pub(crate) fn may_have_effect(message: &ClientJsonRpcMessage) -> bool {
    let ClientJsonRpcMessage::Request(request) = message else {
        return false;
    };
    !matches!(
        request.request,
        ClientRequest::PingRequest(_)
            | ClientRequest::InitializeRequest(_)
            | ClientRequest::DiscoverRequest(_)
            | ClientRequest::CompleteRequest(_)
            | ClientRequest::SetLevelRequest(_)
            | ClientRequest::GetPromptRequest(_)
            | ClientRequest::ListPromptsRequest(_)
            | ClientRequest::ListResourcesRequest(_)
            | ClientRequest::ListResourceTemplatesRequest(_)
            | ClientRequest::ReadResourceRequest(_)
            | ClientRequest::SubscriptionsListenRequest(_)
            | ClientRequest::SubscribeRequest(_)
            | ClientRequest::UnsubscribeRequest(_)
            | ClientRequest::ListToolsRequest(_)
            | ClientRequest::GetTaskRequest(_)
            | ClientRequest::ListSkillsRequest(_)
            | ClientRequest::GetSkillRequest(_)
            | ClientRequest::ReadResourceDirectoryRequest(_)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn event(data: &str) -> Sse {
        Sse {
            data: Some(data.to_owned()),
            ..Sse::default()
        }
    }

    #[test]
    fn the_budget_trips_on_the_event_past_the_limit() {
        let mut budget = SseBudget::new(SseLimits {
            max_events_per_stream: 2,
            max_response_bytes: 1000,
        });
        assert!(budget.observe(&event("a")).is_ok());
        assert!(budget.observe(&event("b")).is_ok());
        assert_eq!(budget.observe(&event("c")), Err(Tripped::TooManyEvents(2)));
        budget.reset();
        assert!(budget.observe(&event("d")).is_ok());
    }

    #[test]
    fn the_budget_counts_bytes() {
        let mut budget = SseBudget::new(SseLimits {
            max_events_per_stream: 100,
            max_response_bytes: 10,
        });
        assert!(budget.observe(&event("12345")).is_ok());
        assert_eq!(
            budget.observe(&event("123456")),
            Err(Tripped::TooManyBytes(10))
        );
    }

    #[test]
    fn a_synthetic_error_round_trips_its_guard() {
        for tripped in [
            Tripped::TooManyEvents(7),
            Tripped::TooManyBytes(9),
            Tripped::SessionForgotten,
        ] {
            let message = tripped.error_response(RequestId::Number(3));
            let ServerJsonRpcMessage::Error(error) = message else {
                panic!("not an error");
            };
            assert_eq!(Tripped::from_error(&error.error), Some(tripped));
        }
        let plain = ErrorData::internal_error("boom", None);
        assert_eq!(Tripped::from_error(&plain), None);
    }
}
