//! A scripted model server on 127.0.0.1 speaking OpenAI Chat Completions, OpenAI Responses and Anthropic Messages (SSE and JSON), recording every request.

mod wire;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// Which wire format a request used, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/chat/completions`
    ChatCompletions,
    /// `POST /v1/responses`
    Responses,
    /// `POST /v1/messages`
    Messages,
}

/// One scripted tool call; `arguments` is JSON text, streamed in fragments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Token usage reported with a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Default for ScriptedUsage {
    fn default() -> Self {
        Self {
            input_tokens: 10,
            output_tokens: 5,
        }
    }
}

/// Where a streamed response is cut by dropping the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cut {
    /// After the opening event (role chunk, `response.created`, `message_start`), before any content.
    BeforeContent,
    /// After the text deltas.
    AfterText,
    /// After the first argument fragment of the first tool call.
    AfterToolCallFragment,
    /// After the opening event the stream stays open, sending nothing, until the client goes away.
    Hang,
    /// After the text deltas the stream stays open, sending nothing (a stall mid-answer).
    StallAfterText,
}

/// A search the provider runs itself before the turn's text (Anthropic's tool search tool, OpenAI
/// Responses' hosted `tool_search`): the query and the deferred tools it finds, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScriptedToolSearch {
    pub query: String,
    pub tool_names: Vec<String>,
}

/// One model turn: its thinking, a provider-side tool search, text, then tool calls, then
/// usage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Messages and Chat Completions only: the model's reasoning, streamed first — a `thinking`
    /// block with a signature ([`thinking_signature`]) on Messages, `reasoning_content`
    /// deltas on Chat Completions.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Messages and Responses only: server-run search blocks sent first.
    #[serde(default)]
    pub tool_search: Option<ScriptedToolSearch>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    #[serde(default)]
    pub usage: ScriptedUsage,
    /// Drop the connection at this point (streaming only).
    #[serde(default)]
    pub cut: Option<Cut>,
    /// Chat Completions: send no usage chunk even when the request asks for one, as many local
    /// servers do.
    #[serde(default)]
    pub omit_usage: bool,
}

impl Turn {
    /// A turn that answers with text and stops.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A turn that calls one tool.
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        Self::default().with_tool_call(id, name, arguments)
    }

    /// Adds a tool call.
    pub fn with_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        self.tool_calls.push(ScriptedToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        });
        self
    }

    /// Sends no usage chunk (Chat Completions), as many local servers do.
    pub fn without_usage(mut self) -> Self {
        self.omit_usage = true;
        self
    }

    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = ScriptedUsage {
            input_tokens,
            output_tokens,
        };
        self
    }

    /// Adds a provider-side tool search that finds `tool_names`.
    pub fn with_tool_search(mut self, query: impl Into<String>, tool_names: &[&str]) -> Self {
        self.tool_search = Some(ScriptedToolSearch {
            query: query.into(),
            tool_names: tool_names.iter().map(|name| (*name).to_owned()).collect(),
        });
        self
    }

    /// Adds the model's reasoning before the rest of the turn.
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    pub fn with_cut(mut self, cut: Cut) -> Self {
        self.cut = Some(cut);
        self
    }
}

/// The signature the mock gives a thinking block on the Messages wire: a client must send it
/// back with the block unchanged.
pub fn thinking_signature(thinking: &str) -> String {
    format!(
        "mock-signature-{}-{}",
        thinking.len(),
        thinking.split_whitespace().count()
    )
}

/// One scripted answer: a turn or an HTTP failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    Turn(Turn),
    /// An error status (429, 500, ...) with an optional `Retry-After` in seconds.
    Fail {
        status: u16,
        #[serde(default)]
        retry_after_sec: Option<u64>,
    },
    /// A 200 stream that carries only the API's error event (e.g. Anthropic's `overloaded_error`).
    StreamError {
        message: String,
    },
    /// No answer at all: no status line, no headers, until the client goes away or the mock
    /// stops.
    HangBeforeHeaders,
    /// The turn's SSE body announced with its full `Content-Length` but cut after half its
    /// bytes; then the connection stays open sending nothing (`hang`) or is dropped.
    Truncated {
        turn: Turn,
        #[serde(default)]
        hang: bool,
    },
    /// A literal answer: this status, `Content-Type` and body, whatever was asked (a 200 HTML
    /// page from a proxy, a JSON body where a stream was asked for).
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Step {
    /// A 200 with `content_type` and `body` as given.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Step::Raw {
            status: 200,
            content_type: content_type.into(),
            body: body.into(),
        }
    }
}

/// A script file for the `mock-model` binary: `{"steps": [{"kind": "turn", "text": "hi"}, ...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    pub steps: Vec<Step>,
}

/// One request as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub api: Option<Api>,
    pub path: String,
    /// Header names lower-cased; values as sent.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (a JSON string when it was not JSON).
    pub body: serde_json::Value,
}

impl RecordedRequest {
    /// The `tools` array as sent (empty when absent).
    pub fn tools(&self) -> Vec<serde_json::Value> {
        self.body
            .get("tools")
            .and_then(|tools| tools.as_array())
            .cloned()
            .unwrap_or_default()
    }

    /// The name of each entry of the tools array (Chat Completions: `function.name`), in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .filter_map(|tool| {
                tool.get("name")
                    .or_else(|| tool.pointer("/function/name"))
                    .and_then(|name| name.as_str())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The system prompt: Anthropic `system`, Responses `instructions`, or Chat Completions' first
    /// `system` message.
    pub fn system_prompt(&self) -> Option<String> {
        let text = match self.api {
            Some(Api::Messages) => self.body.get("system"),
            Some(Api::Responses) => self.body.get("instructions"),
            Some(Api::ChatCompletions) => self
                .body
                .pointer("/messages/0")
                .filter(|m| m.get("role").and_then(|r| r.as_str()) == Some("system"))
                .and_then(|m| m.get("content")),
            None => None,
        }?;
        text.as_str().map(str::to_owned)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
}

struct Inner {
    /// Set to true when the mock stops: ends the answers that hang.
    stopped: tokio::sync::watch::Sender<bool>,
    steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<RecordedRequest>>,
    fragment_size: Mutex<usize>,
    record_file: Option<PathBuf>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running server; it stops when this is dropped.
pub struct MockModel {
    inner: Arc<Inner>,
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl MockModel {
    /// Starts on 127.0.0.1 with a free port.
    pub async fn start() -> Result<Self, MockError> {
        Self::start_on(0, None).await
    }

    /// Starts on `port` (0: any), appending each request as a JSON line to `record_file` when given.
    pub async fn start_on(port: u16, record_file: Option<PathBuf>) -> Result<Self, MockError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|source| MockError::Bind { port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MockError::Bind { port, source })?;
        let inner = Arc::new(Inner {
            stopped: tokio::sync::watch::Sender::new(false),
            steps: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            fragment_size: Mutex::new(7),
            record_file,
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            inner,
            addr,
            shutdown: Some(tx),
        })
    }

    /// `http://127.0.0.1:PORT/v1`: append `/chat/completions`, `/responses` or `/messages`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a turn.
    pub fn push_turn(&self, turn: Turn) {
        self.push_step(Step::Turn(turn));
    }

    /// Queues a failure answer (`status`, optional `Retry-After` seconds).
    pub fn push_failure(&self, status: u16, retry_after_sec: Option<u64>) {
        self.push_step(Step::Fail {
            status,
            retry_after_sec,
        });
    }

    pub fn push_step(&self, step: Step) {
        lock(&self.inner.steps).push_back(step);
    }

    pub fn push_script(&self, script: Script) {
        lock(&self.inner.steps).extend(script.steps);
    }

    /// Size in bytes of the fragments text and tool arguments are streamed in (default 7).
    pub fn set_fragment_size(&self, size: usize) {
        *lock(&self.inner.fragment_size) = size.max(1);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }

    /// Scripted steps not yet served.
    pub fn remaining(&self) -> usize {
        lock(&self.inner.steps).len()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.inner.stopped.send_replace(true);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let api = match path.trim_end_matches('/') {
        p if p.ends_with("/chat/completions") => Some(Api::ChatCompletions),
        p if p.ends_with("/responses") => Some(Api::Responses),
        p if p.ends_with("/messages") => Some(Api::Messages),
        _ => None,
    };
    let json: serde_json::Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into()));
    let recorded = RecordedRequest {
        api,
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into(),
                )
            })
            .collect(),
        body: json.clone(),
    };
    if let Some(file) = &inner.record_file
        && let Ok(mut line) = serde_json::to_vec(&recorded)
    {
        line.push(b'\n');
        if let Ok(mut f) = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .await
        {
            let _ = f.write_all(&line).await;
            let _ = f.flush().await;
        }
    }
    lock(&inner.requests).push(recorded);
    let Some(api) = api else {
        return (
            StatusCode::NOT_FOUND,
            format!("mock-model: no API at {path}"),
        )
            .into_response();
    };
    let step = lock(&inner.steps).pop_front();
    let Some(step) = step else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(wire::error_body(
                api,
                500,
                "mock-model: no scripted turn left",
            )),
        )
            .into_response();
    };
    let model = json
        .get("model")
        .and_then(|m| m.as_str())
        .unwrap_or("mock")
        .to_string();
    match step {
        Step::Fail {
            status,
            retry_after_sec,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (
                status,
                axum::Json(wire::error_body(api, status.as_u16(), "scripted failure")),
            )
                .into_response();
            if let Some(secs) = retry_after_sec
                && let Ok(value) = secs.to_string().parse()
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Step::StreamError { message } => {
            let frame = wire::error_event(api, &message);
            sse_response(
                wire::Frames {
                    frames: vec![frame],
                    cut_at: 1,
                },
                None,
            )
        }
        Step::HangBeforeHeaders => {
            let mut stopped = inner.stopped.subscribe();
            let _ = stopped.wait_for(|stopped| *stopped).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Step::Truncated { turn, hang } => {
            let fragment = *lock(&inner.fragment_size);
            let wire::Frames { frames, .. } =
                wire::stream_frames(api, &turn, &model, fragment, true, &json);
            let body = frames.concat().into_bytes();
            truncated_response(body, hang, inner.stopped.subscribe())
        }
        Step::Raw {
            status,
            content_type,
            body,
        } => Response::builder()
            .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Step::Turn(turn) => {
            let streaming = json.get("stream").and_then(|s| s.as_bool()) == Some(true);
            let fragment = *lock(&inner.fragment_size);
            if streaming {
                let include_usage = json
                    .pointer("/stream_options/include_usage")
                    .and_then(|v| v.as_bool())
                    == Some(true)
                    && !turn.omit_usage;
                let frames =
                    wire::stream_frames(api, &turn, &model, fragment, include_usage, &json);
                sse_response(frames, turn.cut)
            } else {
                axum::Json(wire::complete_body(api, &turn, &model, &json)).into_response()
            }
        }
    }
}

/// The SSE body; a cut ends the body with an error so the connection is dropped mid-stream.
fn sse_response(frames: wire::Frames, cut: Option<Cut>) -> Response {
    let wire::Frames { frames, cut_at } = frames;
    let keep = match cut {
        Some(_) => cut_at.min(frames.len()),
        None => frames.len(),
    };
    let items: Vec<String> = frames.into_iter().take(keep).collect();
    let body_stream = futures::stream::iter(items)
        .then(|frame| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok::<Bytes, std::io::Error>(Bytes::from(frame))
        })
        .chain(
            futures::stream::once(async move {
                match cut {
                    None => None,
                    Some(Cut::Hang | Cut::StallAfterText) => {
                        std::future::pending::<()>().await;
                        None
                    }
                    Some(_) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Some(Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "mock-model: scripted cut",
                        )))
                    }
                }
            })
            .filter_map(futures::future::ready),
        );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body_stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// An SSE body whose `Content-Length` promises all of `body` but which sends only its first half,
/// then hangs (until the mock stops) or drops the connection.
fn truncated_response(
    body: Vec<u8>,
    hang: bool,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> Response {
    let length = body.len();
    let half = Bytes::from(body).slice(..length / 2);
    let body_stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(half) })
        .chain(
            futures::stream::once(async move {
                if hang {
                    let _ = stopped.wait_for(|stopped| *stopped).await;
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Some(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "mock-model: scripted truncation",
                )))
            })
            .filter_map(futures::future::ready),
        );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CONTENT_LENGTH, length)
        .body(Body::from_stream(body_stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
