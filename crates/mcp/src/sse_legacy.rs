//! The legacy HTTP+SSE client transport (2024-11-05): one long-lived SSE stream in, one POST per message out.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::http::{HeaderName, HeaderValue};
use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use sse_stream::{Error as SseError, Sse, SseStream};

use crate::error::{FailureKind, McpError};
use crate::guard::{SseBudget, SseLimits};
use crate::http;
use crate::server::MAX_MESSAGE_BYTES;
use crate::spec::SecretString;

type EventStream = BoxStream<'static, Result<Sse, SseError>>;

const LEGACY_HINT: &str = "check the url: for the legacy HTTP+SSE transport it is the SSE endpoint (often ending in /sse)";

/// A failure to deliver one outgoing message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LegacySseError {
    /// The message could not be serialized.
    #[error("can't encode the message as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// The POST did not reach the server.
    #[error("POST to {url} failed: {detail}")]
    Post { url: String, detail: String },
    /// The server answered the POST with a non-2xx status.
    #[error("POST to {url} answered HTTP {status}")]
    Status { url: String, status: u16 },
}

/// An SSE event larger than the configured bound (the stream ends after it).
#[derive(Debug, thiserror::Error)]
#[error("an SSE event exceeded the maximum size of {max_bytes} bytes")]
struct EventTooLarge {
    max_bytes: usize,
}

/// A read error of the SSE body, or an oversize event.
#[derive(Debug, thiserror::Error)]
enum SseBodyError {
    #[error("{0}")]
    Read(#[from] reqwest::Error),
    #[error(transparent)]
    TooLarge(#[from] EventTooLarge),
}

/// The client side of the legacy HTTP+SSE transport, connected and holding its POST endpoint.
pub(crate) struct LegacySseTransport {
    client: reqwest::Client,
    sse_url: url::Url,
    post_url: url::Url,
    headers: HashMap<HeaderName, HeaderValue>,
    events: Option<EventStream>,
    /// Counts events and bytes since the last response.
    budget: SseBudget,
    /// Requests sent and not answered yet: the ones a tripped bound must end.
    pending: HashSet<RequestId>,
    /// Error responses made up for pending requests when a bound tripped, delivered before
    /// the connection ends.
    made_up: VecDeque<ServerJsonRpcMessage>,
    /// Why the stream ended, when warden ended it or the server did.
    close_reason: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for LegacySseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySseTransport")
            .field("sse_url", &self.sse_url.as_str())
            .field("post_url", &self.post_url.as_str())
            .field("headers", &"[redacted]")
            .field("open", &self.events.is_some())
            .finish()
    }
}

impl LegacySseTransport {
    /// Opens the SSE stream at `url` (same url and client rules as Streamable HTTP) and waits
    /// for the server's `endpoint` event. The caller bounds the wait with its start-up deadline.
    pub(crate) async fn connect(
        server: &str,
        url: &str,
        headers: &[(String, SecretString)],
        connect_timeout: Duration,
        limits: SseLimits,
        egress: Option<&warden_net::EgressGuard>,
    ) -> Result<Self, McpError> {
        let sse_url = http::check_url(server, url)?;
        http::check_egress(server, &sse_url, egress)?;
        let client = http::build_client(server, connect_timeout, egress)?;
        let headers = http::header_map(server, headers)?;
        let mut request = client
            .get(sse_url.as_str())
            .header(::http::header::ACCEPT, "text/event-stream");
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|error| http::classify_request_error(server, &sse_url, &error))?;
        if let Some(failure) = http::classify_response(server, &sse_url, &response) {
            return Err(legacy_failure(server, &sse_url, failure));
        }
        let content_type = response
            .headers()
            .get(::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !content_type.starts_with("text/event-stream") {
            return Err(McpError::new(
                server,
                FailureKind::NotMcpEndpoint,
                format!(
                    "{sse_url} answered with {} instead of an event stream",
                    if content_type.is_empty() {
                        "no content type"
                    } else {
                        content_type.as_str()
                    }
                ),
                Some(LEGACY_HINT),
            ));
        }
        let mut events = bounded_events(response, MAX_MESSAGE_BYTES);
        let post_url = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let target = event.data.unwrap_or_default();
                    break resolve_endpoint(server, &sse_url, target.trim())?;
                }
                Some(Ok(event)) => {
                    tracing::warn!(
                        server,
                        event = event.event.as_deref().unwrap_or("message"),
                        "SSE event before the endpoint event ignored"
                    );
                }
                Some(Err(error)) => {
                    return Err(McpError::new(
                        server,
                        FailureKind::HandshakeFailed,
                        format!(
                            "the SSE stream from {sse_url} failed before its endpoint event: {}",
                            describe_sse_error(&error)
                        ),
                        Some("check that the server speaks the legacy HTTP+SSE transport"),
                    ));
                }
                None => {
                    return Err(McpError::new(
                        server,
                        FailureKind::HandshakeFailed,
                        format!("the SSE stream from {sse_url} ended before its endpoint event"),
                        Some("check that the server speaks the legacy HTTP+SSE transport"),
                    ));
                }
            }
        };
        Ok(Self {
            client,
            sse_url,
            post_url,
            headers,
            events: Some(events),
            budget: SseBudget::new(limits),
            pending: HashSet::new(),
            made_up: VecDeque::new(),
            close_reason: Arc::default(),
        })
    }

    /// Where the reason the stream ended is written (read after the connection closed).
    pub(crate) fn close_reason(&self) -> Arc<Mutex<Option<String>>> {
        self.close_reason.clone()
    }

    fn closing(&mut self, reason: String) {
        tracing::warn!(sse_url = %self.sse_url, "{reason}");
        *self
            .close_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason);
        self.events = None;
    }

    /// The failure of an `initialize` handshake over this transport, as one line.
    pub(crate) fn handshake_failure(
        server: &str,
        url: &str,
        error: &rmcp::service::ClientInitializeError,
        stream_end: Option<&str>,
    ) -> McpError {
        let why = match stream_end {
            Some(reason) => reason.to_owned(),
            None => error.to_string(),
        };
        McpError::new(
            server,
            FailureKind::HandshakeFailed,
            format!("the MCP handshake over HTTP+SSE with {url} failed: {why}"),
            Some(
                "check the url, and that the server speaks MCP over the legacy HTTP+SSE transport",
            ),
        )
    }
}

/// A failure of the SSE request, told for this transport: warden does not log in over legacy
/// HTTP+SSE, so a server asking for OAuth is pointed at a header credential, never at
/// `warden mcp login` (which refuses such entries).
fn legacy_failure(server: &str, sse_url: &url::Url, failure: McpError) -> McpError {
    match failure.kind() {
        FailureKind::NeedsLogin => McpError::new(
            server,
            FailureKind::Rejected,
            format!(
                "{sse_url} asks for an OAuth login (401), which warden does not support over the legacy HTTP+SSE transport"
            ),
            Some(
                "configure a header credential for it (headers = { Authorization = \"Bearer ${env:TOKEN}\" }), or use the server's Streamable HTTP url",
            ),
        ),
        FailureKind::NotFound | FailureKind::NotMcpEndpoint => McpError::new(
            server,
            failure.kind(),
            failure.what().to_owned(),
            Some(LEGACY_HINT),
        ),
        _ => failure,
    }
}

/// Resolves the announced endpoint against the SSE url; another origin is refused.
fn resolve_endpoint(server: &str, sse_url: &url::Url, target: &str) -> Result<url::Url, McpError> {
    let endpoint = sse_url.join(target).map_err(|error| {
        McpError::new(
            server,
            FailureKind::Protocol,
            format!("the server announced an invalid endpoint \"{target}\": {error}"),
            Some("check that the server speaks the legacy HTTP+SSE transport"),
        )
    })?;
    if endpoint.origin() != sse_url.origin() {
        return Err(McpError::new(
            server,
            FailureKind::Protocol,
            format!(
                "the server announced an endpoint on another origin ({}), which is refused",
                endpoint.origin().ascii_serialization()
            ),
            Some("the POST endpoint must be on the same scheme, host and port as the SSE url"),
        ));
    }
    Ok(endpoint)
}

/// The response body as SSE events, failing (and ending) on an event over `max_bytes`.
fn bounded_events(response: reqwest::Response, max_bytes: usize) -> EventStream {
    let mut limiter = EventSizeLimiter::new(max_bytes);
    let bytes = response
        .bytes_stream()
        .map(move |chunk| -> Result<_, SseBodyError> {
            let chunk = chunk?;
            limiter
                .observe(&chunk)
                .map_err(|()| EventTooLarge { max_bytes })?;
            Ok(chunk)
        })
        // The first error ends the byte stream: nothing after an oversize event is parsed.
        .scan(false, |stop, item| {
            if *stop {
                return std::future::ready(None);
            }
            *stop = item.is_err();
            std::future::ready(Some(item))
        });
    SseStream::from_bytes_stream(bytes).boxed()
}

fn describe_sse_error(error: &SseError) -> String {
    if let SseError::Body(source) = error
        && let Some(body) = source.downcast_ref::<SseBodyError>()
    {
        return body.to_string();
    }
    error.to_string()
}

/// Counts the bytes of the event being received (comment lines excluded).
#[derive(Debug)]
struct EventSizeLimiter {
    max_bytes: usize,
    retained: usize,
    line: usize,
    line_is_comment: bool,
    previous_was_cr: bool,
}

impl EventSizeLimiter {
    fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            retained: 0,
            line: 0,
            line_is_comment: false,
            previous_was_cr: false,
        }
    }

    fn observe(&mut self, chunk: &[u8]) -> Result<(), ()> {
        for &byte in chunk {
            if self.previous_was_cr {
                self.previous_was_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\r' => {
                    self.finish_line()?;
                    self.previous_was_cr = true;
                }
                b'\n' => self.finish_line()?,
                _ => {
                    if self.line == 0 {
                        self.line_is_comment = byte == b':';
                    }
                    self.line = self.line.saturating_add(1);
                    self.check()?;
                }
            }
        }
        Ok(())
    }

    fn finish_line(&mut self) -> Result<(), ()> {
        if self.line == 0 {
            self.retained = 0;
        } else if !self.line_is_comment {
            self.retained = self.retained.saturating_add(self.line).saturating_add(1);
        }
        self.line = 0;
        self.line_is_comment = false;
        self.check()
    }

    fn check(&self) -> Result<(), ()> {
        if self.retained.saturating_add(self.line) > self.max_bytes {
            Err(())
        } else {
            Ok(())
        }
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item {
            self.pending.insert(request.id.clone());
        }
        let body = serde_json::to_vec(&item);
        let mut request = self
            .client
            .post(self.post_url.as_str())
            .header(::http::header::CONTENT_TYPE, "application/json");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let url = self.post_url.to_string();
        async move {
            let response =
                request
                    .body(body?)
                    .send()
                    .await
                    .map_err(|error| LegacySseError::Post {
                        url: url.clone(),
                        detail: innermost(&error),
                    })?;
            let status = response.status();
            if !status.is_success() {
                return Err(LegacySseError::Status {
                    url,
                    status: status.as_u16(),
                });
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            if let Some(message) = self.made_up.pop_front() {
                return Some(message);
            }
            let events = self.events.as_mut()?;
            match events.next().await {
                Some(Ok(event)) => {
                    if let Err(tripped) = self.budget.observe(&event) {
                        self.closing(format!(
                            "the HTTP+SSE stream sent {} without an answer; warden closed the connection",
                            tripped.describe()
                        ));
                        self.made_up = self
                            .pending
                            .drain()
                            .map(|id| tripped.error_response(id))
                            .collect();
                        continue;
                    }
                    let kind = event.event.as_deref().unwrap_or("message");
                    if kind != "message" {
                        tracing::debug!(sse_url = %self.sse_url, event = kind, "SSE event ignored");
                        continue;
                    }
                    let Some(data) = event.data else {
                        continue;
                    };
                    match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                        Ok(message) => {
                            let answered = match &message {
                                ServerJsonRpcMessage::Response(response) => {
                                    Some(response.id.clone())
                                }
                                ServerJsonRpcMessage::Error(error) => error.id.clone(),
                                _ => None,
                            };
                            if let Some(id) = answered {
                                self.pending.remove(&id);
                                self.budget.reset();
                            }
                            return Some(message);
                        }
                        Err(error) => {
                            tracing::warn!(
                                sse_url = %self.sse_url,
                                %error,
                                "an SSE message that is not JSON-RPC was ignored"
                            );
                        }
                    }
                }
                Some(Err(error)) => {
                    self.closing(format!(
                        "the HTTP+SSE stream failed: {}",
                        describe_sse_error(&error)
                    ));
                    return None;
                }
                None => {
                    self.closing("the server ended the HTTP+SSE stream".to_owned());
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.events = None;
        Ok(())
    }
}

fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_relative_endpoint_resolves_against_the_sse_url() {
        let sse = url::Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let endpoint = resolve_endpoint("s", &sse, "/message?sessionId=abc").unwrap();
        assert_eq!(
            endpoint.as_str(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        let sse = url::Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let error = resolve_endpoint("s", &sse, "http://127.0.0.1:4000/message").unwrap_err();
        assert_eq!(error.kind(), FailureKind::Protocol);
        assert!(error.to_string().contains("another origin"));
    }

    #[test]
    fn the_limiter_counts_one_event_and_resets_between_events() {
        let mut limiter = EventSizeLimiter::new(12);
        assert!(limiter.observe(b"data: 12345\n\n").is_ok());
        assert!(limiter.observe(b"data: 12345\n\n").is_ok());
        assert!(limiter.observe(b": ping\n").is_ok());
        assert!(limiter.observe(b"data: 1234567").is_err());
    }
}
