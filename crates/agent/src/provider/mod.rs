//! Model providers: the `ModelClient` trait, model selection and defaults, and the shared HTTP driver (streaming, timeouts, retries with backoff, cancellation).

mod anthropic;
mod openai_chat;
mod openai_responses;
mod sse;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_config::{AgentProfile, DeferMode, ModelProvider, ModelSettings, Secret};

use crate::conversation::{Message, ToolCall, ToolSpec, Usage};
pub(crate) use sse::{SseEvent, SseParser};

/// Model id used when only `ANTHROPIC_API_KEY` is set.
pub(crate) const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// Model id used when only `OPENAI_API_KEY` is set (through the Responses API).
pub(crate) const DEFAULT_OPENAI_MODEL: &str = "gpt-5.1";
/// Public endpoints, with the `/v1` the request paths are appended to.
pub(crate) const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub(crate) const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// Context window assumed when the configuration does not say.
pub(crate) const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Output token limit sent where the API requires one (Anthropic).
pub(crate) const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// The one-line message shown when no model can be chosen and the config file is not known.
pub const NO_MODEL_MESSAGE: &str = "no model configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or add [models.NAME] with provider = \"openai\", id and base_url (e.g. http://127.0.0.1:11434/v1 for Ollama) and model = \"NAME\" to ~/.config/warden/config.toml";

/// Where the API key comes from. Read when a request is made, never stored in logs.
#[derive(Clone, PartialEq, Eq)]
pub enum ApiKey {
    /// No key (a local server).
    None,
    /// The environment variable holding the key.
    Env(String),
    /// A key given directly (tests, embedding).
    Literal(Secret),
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiKey::None => write!(f, "None"),
            ApiKey::Env(name) => write!(f, "Env({name})"),
            ApiKey::Literal(_) => write!(f, "Literal([redacted])"),
        }
    }
}

impl ApiKey {
    fn read(&self) -> Result<Option<Secret>, ProviderError> {
        match self {
            ApiKey::None => Ok(None),
            ApiKey::Literal(secret) => Ok(Some(secret.clone())),
            ApiKey::Env(name) => match std::env::var(name) {
                Ok(value) if !value.is_empty() => Ok(Some(Secret::new(value))),
                _ => Err(ProviderError::MissingApiKey { env: name.clone() }),
            },
        }
    }
}

/// How long connecting to the model API (TCP and TLS) may take.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the model API may take, once the request is sent, to send the response headers and
/// the first bytes of the body. Generous: a local server may send nothing until it has read a
/// long prompt.
pub(crate) const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest silence allowed between two chunks of a response. Generous: a reasoning model
/// may stream nothing while it thinks (Anthropic sends pings; not every API does).
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest `Retry-After` warden waits for; a server asking for more fails the request.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long a request may wait on the model API at each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP and TLS connection (a failure is retried like any connection failure).
    pub connect: Duration,
    /// From sending the request to the response headers and the first body bytes.
    pub first_byte: Duration,
    /// Between two chunks of the response body.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: DEFAULT_CONNECT_TIMEOUT,
            first_byte: DEFAULT_FIRST_BYTE_TIMEOUT,
            idle: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Retry behaviour for 408, 429, 5xx, connection failures and timeouts before anything was
/// streamed. Deterministic failures (another 4xx, a body that is not an event stream) are not
/// retried, and a timeout is retried once at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; doubled each attempt, with full jitter.
    pub base_delay: Duration,
    /// Cap on one backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a longer one fails the request at once, saying how
    /// long the server asked to wait.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based): `Retry-After` when given (capped at
    /// `max_delay`; one over `max_retry_after` never gets here), else
    /// a random duration in `[delay/2, delay]` with `delay = base * 2^(attempt-1)` capped.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max_delay);
        let half = exp / 2;
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        let jitter = hasher.finish() % (half.as_millis() as u64 + 1);
        half + Duration::from_millis(jitter)
    }
}

/// A model endpoint, resolved from configuration or defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// The configured name (`[models.NAME]`) or `default`.
    pub name: String,
    pub provider: ModelProvider,
    pub id: String,
    /// Ends before the API path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: ApiKey,
    pub context_window: u64,
    pub defer_mode: DeferMode,
    pub max_output_tokens: u32,
    /// Anthropic's extended thinking budget (`thinking.budget_tokens`); `None`: none asked.
    pub thinking_budget: Option<u32>,
    pub retry: RetryPolicy,
    pub timeouts: Timeouts,
    /// Whether the answer is streamed (`[models.NAME] stream`; default true). Without it the
    /// whole answer is read as one JSON body (Chat Completions only).
    pub stream: bool,
    /// Fields merged into every request body (`[models.NAME.request]`); a field warden sets
    /// itself is never replaced.
    pub extra_body: serde_json::Map<String, Value>,
}

impl ModelConfig {
    /// A config for `provider` at `base_url` with defaults for the rest (tests, local servers).
    pub fn new(
        provider: ModelProvider,
        id: impl Into<String>,
        base_url: impl Into<String>,
    ) -> Self {
        Self {
            name: "default".into(),
            provider,
            id: id.into(),
            base_url: base_url.into(),
            api_key: ApiKey::None,
            context_window: DEFAULT_CONTEXT_WINDOW,
            defer_mode: DeferMode::Normal,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            thinking_budget: None,
            retry: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            stream: true,
            extra_body: serde_json::Map::new(),
        }
    }
}

/// Chooses the model of a run: `--model`, else the agent profile's, else the top-level `model`,
/// else a built-in default when `ANTHROPIC_API_KEY` (first) or `OPENAI_API_KEY` is set.
/// `env` looks variables up (the process environment in production).
pub fn select_model(
    settings: &ModelSettings,
    override_name: Option<&str>,
    agent: Option<&AgentProfile>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelConfig, SelectError> {
    match settings.select_model(override_name, agent) {
        Err(message) => Err(SelectError::Unknown(message)),
        Ok(Some(entry)) => {
            let default_base = match entry.provider {
                ModelProvider::Anthropic => ANTHROPIC_BASE_URL,
                ModelProvider::OpenAi | ModelProvider::OpenAiResponses => OPENAI_BASE_URL,
            };
            let api_key = match (&entry.api_key_env, &entry.base_url) {
                (Some(var), _) => ApiKey::Env(var.clone()),
                // A custom endpoint without a key variable: a local server.
                (None, Some(_)) => ApiKey::None,
                (None, None) => ApiKey::Env(match entry.provider {
                    ModelProvider::Anthropic => "ANTHROPIC_API_KEY".into(),
                    _ => "OPENAI_API_KEY".into(),
                }),
            };
            Ok(ModelConfig {
                name: entry.name.clone(),
                provider: entry.provider,
                id: entry.id.clone(),
                base_url: entry
                    .base_url
                    .clone()
                    .unwrap_or_else(|| default_base.to_string())
                    .trim_end_matches('/')
                    .to_string(),
                api_key,
                context_window: entry.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
                defer_mode: entry.defer_mode,
                max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
                thinking_budget: entry.thinking_budget,
                retry: RetryPolicy::default(),
                timeouts: Timeouts::default(),
                stream: entry.stream,
                extra_body: entry.request.clone(),
            })
        }
        Ok(None) => {
            let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
            let default_for = |provider, id, base_url, key_var: &str, context_window| {
                let mut config = ModelConfig::new(provider, id, base_url);
                config.api_key = ApiKey::Env(key_var.into());
                config.context_window = context_window;
                config
            };
            if set("ANTHROPIC_API_KEY") {
                Ok(default_for(
                    ModelProvider::Anthropic,
                    DEFAULT_ANTHROPIC_MODEL,
                    ANTHROPIC_BASE_URL,
                    "ANTHROPIC_API_KEY",
                    200_000,
                ))
            } else if set("OPENAI_API_KEY") {
                Ok(default_for(
                    ModelProvider::OpenAiResponses,
                    DEFAULT_OPENAI_MODEL,
                    OPENAI_BASE_URL,
                    "OPENAI_API_KEY",
                    400_000,
                ))
            } else {
                Err(SelectError::NoModel)
            }
        }
    }
}

/// The one-line message shown when no model can be chosen, naming the user config file the
/// run reads (`WARDEN_HOME` moves it) and a first run that needs no API key.
pub fn no_model_message(user_config: &std::path::Path) -> String {
    format!(
        "no model configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or add [models.NAME] with \
         provider = \"openai\", id and base_url (e.g. http://127.0.0.1:11434/v1 for Ollama, \
         http://127.0.0.1:8080/v1 for llama.cpp; docs/MODELS.md) and model = \"NAME\" to {}",
        user_config.display()
    )
}

/// No model could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("{NO_MODEL_MESSAGE}")]
    NoModel,
    #[error("{0}")]
    Unknown(String),
}

/// Builds the HTTP client for `config`.
pub fn client_for(config: ModelConfig) -> Result<Arc<dyn ModelClient>, ProviderError> {
    let http = warden_net::http_client()
        .connect_timeout(config.timeouts.connect)
        .build()
        .map_err(|e| ProviderError::Connection(e.to_string()))?;
    Ok(match config.provider {
        ModelProvider::OpenAi => Arc::new(HttpModelClient {
            http,
            config,
            wire: openai_chat::ChatCompletions,
        }),
        ModelProvider::OpenAiResponses => Arc::new(HttpModelClient {
            http,
            config,
            wire: openai_responses::Responses,
        }),
        ModelProvider::Anthropic => Arc::new(HttpModelClient {
            http,
            config,
            wire: anthropic::Messages,
        }),
    })
}

/// What the loop asks the model.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
}

/// Anthropic's server-side tool search (BM25 variant): its `type` and fixed `name`.
pub const ANTHROPIC_TOOL_SEARCH_TYPE: &str = "tool_search_tool_bm25_20251119";
pub const ANTHROPIC_TOOL_SEARCH_NAME: &str = "tool_search_tool_bm25";

/// How the session presents deferred tools, for the wire formats: the mode and the deferred
/// definitions sent with `defer_loading: true` after the offered tools (`reference` and
/// `tool-search` modes; the list is fixed for the session, so the tools array never changes).
#[derive(Debug, Clone, Copy)]
pub struct DeferredTools<'a> {
    pub mode: DeferMode,
    pub tools: &'a [ToolSpec],
}

impl DeferredTools<'_> {
    /// No deferred tools in the request (`normal` mode, nothing deferred).
    pub const NONE: DeferredTools<'static> = DeferredTools {
        mode: DeferMode::Normal,
        tools: &[],
    };

    /// Whether the definitions travel in the tools array with `defer_loading: true`.
    pub fn sends_definitions(&self) -> bool {
        matches!(self.mode, DeferMode::Reference | DeferMode::ToolSearch) && !self.tools.is_empty()
    }
}

/// A piece of a response as it streams.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelDelta {
    Text {
        text: String,
    },
    /// The model's reasoning, where the provider streams it (Anthropic thinking blocks,
    /// `reasoning_content` of OpenAI-compatible servers): not part of the answer's text.
    Thinking {
        text: String,
    },
    ToolCallStarted {
        id: String,
        name: String,
    },
    /// A failed attempt is being retried (nothing of it reached the caller).
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
}

/// A whole response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub stop_reason: Option<String>,
    /// Blocks the provider ran itself (its tool search), to replay unchanged: see
    /// [`Message::ProviderBlocks`]. The provider's config name and the blocks in order.
    pub provider_blocks: Option<(String, Vec<serde_json::Value>)>,
}

/// A model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the environment variable {env} that should hold the API key is not set")]
    MissingApiKey { env: String },
    #[error("the model API at {url} answered {status}: {message}{}", http_hint(*status))]
    Http {
        status: u16,
        message: String,
        /// The URL the request went to.
        url: String,
    },
    #[error("cannot reach the model API: {0}")]
    Connection(String),
    /// A 200 with nothing in it: what a local server sends when the prompt is longer than its
    /// own context.
    #[error(
        "the model API at {url} answered 200 with an empty body: the server failed on the \
         request (its log says why). A local server does this when the prompt is longer than \
         its context (llama.cpp's --n_ctx / -c, Ollama's num_ctx: raise it, or set \
         [models.NAME] context_window to it so warden trims the conversation to fit), or when it \
         cannot stream what was asked (llama-cpp-python with tools: set stream = false)"
    )]
    EmptyAnswer { url: String },
    #[error("the model's response stream broke after output was received: {0}")]
    StreamInterrupted(String),
    #[error("the model API sent something unexpected: {0}")]
    Protocol(String),
    /// An error the API reported inside its stream (e.g. Anthropic's `overloaded_error`).
    #[error("the model API reported an error: {0}")]
    Api(String),
    #[error(
        "the model API did not answer within {} of the request (first-byte timeout): the server may be hung or overloaded",
        show_duration(*after)
    )]
    NoAnswer { after: Duration },
    #[error(
        "the model's response stream stalled: nothing arrived for {}{} (idle timeout)",
        show_duration(*after),
        if *after_output { " after part of the answer" } else { "" }
    )]
    Stalled { after: Duration, after_output: bool },
    #[error(
        "the model API answered {status} and asked to wait {retry_after_secs} s before retrying, longer than warden waits ({}); try again later: {message}",
        show_duration(*max_wait)
    )]
    RetryAfterTooLong {
        status: u16,
        retry_after_secs: u64,
        max_wait: Duration,
        message: String,
    },
    #[error("the model call was cancelled")]
    Cancelled,
}

/// What to check after an HTTP error status, for the statuses where warden knows better.
fn http_hint(status: u16) -> &'static str {
    match status {
        404 => {
            "; check [models.NAME] base_url (it ends before the API path, such as \
             http://127.0.0.1:8080/v1) and id"
        }
        401 | 403 => "; check the API key ([models.NAME] api_key_env names its variable)",
        _ => "",
    }
}

/// `300 s`, or `0.25 s` below a second.
fn show_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} s", duration.as_secs_f64())
    }
}

/// Talks to a model. Implemented by the HTTP providers; the loop depends only on this.
pub trait ModelClient: Send + Sync {
    /// Streams one response, reporting pieces through `on_delta` as they arrive.
    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a (dyn Fn(ModelDelta) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>>;

    /// [`ModelClient::complete`] with the session's deferred tools, for the wire formats that
    /// carry them; a client that does not know them ignores them.
    fn complete_with<'a>(
        &'a self,
        request: ModelRequest<'a>,
        deferred: DeferredTools<'a>,
        on_delta: &'a (dyn Fn(ModelDelta) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        let _ = deferred;
        self.complete(request, on_delta, cancel)
    }

    /// `provider/id`, for display.
    fn describe(&self) -> String;

    /// The context window in tokens.
    fn context_window(&self) -> u64;
}

/// One wire format: the request it sends and the decoder of its stream.
pub(crate) trait WireFormat: Send + Sync {
    fn path(&self) -> &'static str;
    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)>;
    fn body(
        &self,
        config: &ModelConfig,
        request: &ModelRequest<'_>,
        deferred: &DeferredTools<'_>,
    ) -> serde_json::Value;
    fn decoder(&self) -> Box<dyn StreamDecoder>;
}

/// Turns a stream of SSE events into deltas and, at the end, the response.
pub(crate) trait StreamDecoder: Send {
    fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ModelDelta>, ProviderError>;
    /// A whole answer read as one JSON body (`stream = false`), as deltas; only the wires that
    /// can ask for one implement it.
    fn on_complete(&mut self, body: &Value) -> Result<Vec<ModelDelta>, ProviderError> {
        let _ = body;
        Err(ProviderError::Protocol(
            "this API is only read as a stream; remove `stream = false` from the model's entry"
                .into(),
        ))
    }
    /// The finished response, or `None` when the stream has not completed.
    fn finish(&mut self) -> Option<ModelResponse>;
    fn is_done(&self) -> bool;
}

struct HttpModelClient<W> {
    http: reqwest::Client,
    config: ModelConfig,
    wire: W,
}

enum AttemptError {
    /// Worth another attempt: nothing reached the caller.
    Retry {
        reason: String,
        retry_after: Option<Duration>,
        error: ProviderError,
        /// A first-byte or idle timeout: retried once at most.
        timed_out: bool,
    },
    Fatal(ProviderError),
}

impl AttemptError {
    fn retry(error: ProviderError) -> Self {
        AttemptError::Retry {
            reason: error.to_string(),
            retry_after: None,
            error,
            timed_out: false,
        }
    }

    fn timed_out(error: ProviderError) -> Self {
        AttemptError::Retry {
            reason: error.to_string(),
            retry_after: None,
            error,
            timed_out: true,
        }
    }
}

/// The most of a JSON body (where a stream was asked for) read for the error message.
const MAX_JSON_BODY: usize = 64 * 1024;
/// The most body read without one complete event before it is judged not an event stream (an
/// API's first event may echo the whole request: instructions and tools).
const MAX_BEFORE_FIRST_EVENT: usize = 8 * 1024 * 1024;
/// The most of a body that is not an event stream quoted in the error.
const QUOTED_BODY: usize = 200;

/// Whether a failed status is worth another attempt: a timeout, rate limit or server error.
fn retryable_status(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429) || status.is_server_error()
}

/// What a 200 whose body is not an event stream says, as an error; `body` is its beginning
/// when `whole` is false.
/// Whether `head` holds only SSE comment lines (`: ping`) and blank lines.
fn only_comments(head: &[u8]) -> bool {
    String::from_utf8_lossy(head)
        .lines()
        .all(|line| line.trim().is_empty() || line.starts_with(':'))
}

fn not_a_stream(body: &[u8], content_type: &str, whole: bool) -> ProviderError {
    let text = String::from_utf8_lossy(body);
    let quoted = quote(text.trim());
    let what = if content_type.is_empty() {
        String::new()
    } else {
        format!(" ({content_type})")
    };
    let opens_like_json = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| matches!(b, b'{' | b'['));
    if !whole {
        let kind = if opens_like_json {
            "what looks like JSON"
        } else {
            "a body"
        };
        return ProviderError::Protocol(format!(
            "it answered 200 with {kind}{what} where an event stream was asked for (too long to read to the end): {quoted}"
        ));
    }
    if serde_json::from_slice::<Value>(body).is_ok() {
        let message = error_message(&text);
        ProviderError::Protocol(format!(
            "it answered with JSON{what} where an event stream was asked for (does the endpoint support \"stream\": true?): {}",
            quote(&message)
        ))
    } else if opens_like_json {
        ProviderError::Protocol(format!(
            "it answered 200 with a body that is neither an event stream nor valid JSON{what}: {quoted}"
        ))
    } else {
        ProviderError::Protocol(format!(
            "it answered 200 with a body that is not an event stream{what}: {quoted}"
        ))
    }
}

/// The first [`QUOTED_BODY`] bytes of `text` (on a character boundary), marked when cut.
fn quote(text: &str) -> String {
    if text.len() <= QUOTED_BODY {
        return text.to_string();
    }
    let mut end = QUOTED_BODY;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl<W: WireFormat> HttpModelClient<W> {
    async fn attempt(
        &self,
        request: &ModelRequest<'_>,
        deferred: &DeferredTools<'_>,
        on_delta: &(dyn Fn(ModelDelta) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, AttemptError> {
        let key = self.config.api_key.read().map_err(AttemptError::Fatal)?;
        let timeouts = self.config.timeouts;
        let url = format!("{}{}", self.config.base_url, self.wire.path());
        let streaming = self.config.stream;
        let mut builder = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header(
                "accept",
                if streaming {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
        for (name, value) in self.wire.headers(key.as_ref()) {
            builder = builder.header(name, value);
        }
        let mut body = self.wire.body(&self.config, request, deferred);
        if let Value::Object(fields) = &mut body {
            for (name, value) in &self.config.extra_body {
                fields.entry(name.clone()).or_insert_with(|| value.clone());
            }
            if !streaming {
                fields.insert("stream".into(), Value::Bool(false));
                fields.remove("stream_options");
            }
        }
        // The headers and the first body bytes must arrive by this instant.
        let first_byte_deadline = tokio::time::Instant::now() + timeouts.first_byte;
        let send = tokio::time::timeout_at(first_byte_deadline, builder.json(&body).send());
        let response = tokio::select! {
            _ = cancel.cancelled() => return Err(AttemptError::Fatal(ProviderError::Cancelled)),
            result = send => result,
        };
        let response = match response {
            Err(_) => {
                return Err(AttemptError::timed_out(ProviderError::NoAnswer {
                    after: timeouts.first_byte,
                }));
            }
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                let mut message = format!("{url}: {}", error_chain(&error));
                if error.is_connect() && error.is_timeout() {
                    message = format!(
                        "connecting took longer than {}: {message}",
                        show_duration(timeouts.connect)
                    );
                } else if error.is_connect() {
                    message.push_str(
                        "; is the model server running and listening there? ([models.NAME] \
                         base_url names it)",
                    );
                }
                return Err(AttemptError::retry(ProviderError::Connection(message)));
            }
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let text = tokio::select! {
                _ = cancel.cancelled() => return Err(AttemptError::Fatal(ProviderError::Cancelled)),
                text = tokio::time::timeout(timeouts.idle, response.text()) => {
                    text.ok().and_then(Result::ok).unwrap_or_default()
                }
            };
            let message = error_message(&text);
            if !retryable_status(status) {
                return Err(AttemptError::Fatal(ProviderError::Http {
                    status: status.as_u16(),
                    message,
                    url,
                }));
            }
            if let Some(after) = retry_after
                && after > self.config.retry.max_retry_after
            {
                return Err(AttemptError::Fatal(ProviderError::RetryAfterTooLong {
                    status: status.as_u16(),
                    retry_after_secs: after.as_secs(),
                    max_wait: self.config.retry.max_retry_after,
                    message,
                }));
            }
            return Err(AttemptError::Retry {
                reason: format!("HTTP {}", status.as_u16()),
                retry_after,
                error: ProviderError::Http {
                    status: status.as_u16(),
                    message,
                    url,
                },
                timed_out: false,
            });
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut decoder = self.wire.decoder();
        let mut parser = SseParser::default();
        let mut stream = response.bytes_stream();
        let mut emitted = false;
        // What decides the body's kind: its first bytes (kept for the error message), whether an
        // SSE event was seen, and — when it opens like JSON — the whole of it, to quote.
        let mut head: Vec<u8> = Vec::new();
        let mut received = false;
        let mut total = 0usize;
        let mut sniffed = false;
        let mut events = 0usize;
        let mut json_body: Option<Vec<u8>> = None;
        let broken = |emitted: bool, reason: String| {
            if emitted {
                AttemptError::Fatal(ProviderError::StreamInterrupted(reason))
            } else {
                AttemptError::retry(ProviderError::Connection(reason))
            }
        };
        loop {
            let deadline = if received {
                tokio::time::Instant::now() + timeouts.idle
            } else {
                first_byte_deadline
            };
            let next = tokio::select! {
                _ = cancel.cancelled() => return Err(AttemptError::Fatal(ProviderError::Cancelled)),
                next = tokio::time::timeout_at(deadline, stream.next()) => next,
            };
            let chunk = match next {
                Err(_) if !received => {
                    return Err(AttemptError::timed_out(ProviderError::NoAnswer {
                        after: timeouts.first_byte,
                    }));
                }
                Err(_) => {
                    let error = ProviderError::Stalled {
                        after: timeouts.idle,
                        after_output: emitted,
                    };
                    return Err(if emitted {
                        AttemptError::Fatal(error)
                    } else {
                        AttemptError::timed_out(error)
                    });
                }
                Ok(None) => break,
                Ok(Some(Ok(chunk))) => chunk,
                Ok(Some(Err(error))) => return Err(broken(emitted, error_chain(&error))),
            };
            if chunk.is_empty() {
                continue;
            }
            received = true;
            total += chunk.len();
            if head.len() < QUOTED_BODY * 4 {
                head.extend_from_slice(&chunk[..chunk.len().min(QUOTED_BODY * 4 - head.len())]);
            }
            if !sniffed && let Some(first) = chunk.iter().find(|b| !b.is_ascii_whitespace()) {
                sniffed = true;
                // JSON where an event stream was asked for: read it to say what it is.
                if matches!(first, b'{' | b'[') && events == 0 {
                    json_body = Some(Vec::new());
                }
            }
            if let Some(body) = json_body.as_mut() {
                if body.len() + chunk.len() > MAX_JSON_BODY {
                    body.extend_from_slice(&chunk[..MAX_JSON_BODY - body.len()]);
                    return Err(AttemptError::Fatal(not_a_stream(
                        body,
                        &content_type,
                        false,
                    )));
                }
                body.extend_from_slice(&chunk);
                continue;
            }
            for event in parser.push(&chunk) {
                events += 1;
                // An error the API reports before any output (e.g. Anthropic's
                // overloaded_error) is worth a retry; a malformed stream is not.
                let deltas = decoder.on_event(&event).map_err(|error| match error {
                    ProviderError::Api(_) if !emitted => AttemptError::retry(error),
                    error => AttemptError::Fatal(error),
                })?;
                for delta in deltas {
                    emitted = true;
                    on_delta(delta);
                }
            }
            if events == 0 && total > MAX_BEFORE_FIRST_EVENT {
                return Err(AttemptError::Fatal(not_a_stream(
                    &head,
                    &content_type,
                    false,
                )));
            }
            if decoder.is_done() {
                break;
            }
        }
        if let Some(body) = json_body {
            if streaming {
                return Err(AttemptError::Fatal(not_a_stream(
                    &body,
                    &content_type,
                    true,
                )));
            }
            let value: Value = serde_json::from_slice(&body).map_err(|error| {
                AttemptError::Fatal(ProviderError::Protocol(format!(
                    "an answer that is not JSON: {error}"
                )))
            })?;
            if let Some(message) = value.pointer("/error/message").and_then(Value::as_str) {
                return Err(AttemptError::Fatal(ProviderError::Api(message.to_string())));
            }
            for delta in decoder.on_complete(&value).map_err(AttemptError::Fatal)? {
                on_delta(delta);
            }
        }
        match decoder.finish() {
            Some(response) => Ok(response),
            // Only `: ping`-like keep-alive comments, then the end: the server gave up on the
            // request (its log says why); asking again may well work.
            None if events == 0 && received && only_comments(&head) => Err(broken(
                false,
                "the stream ended after keep-alive comments only, before any answer (the \
                 server may have failed on the request; its log says why)"
                    .into(),
            )),
            // Bytes came, but not one event: whatever it is, asking again will not change it.
            None if events == 0 && received => Err(AttemptError::Fatal(not_a_stream(
                &head,
                &content_type,
                true,
            ))),
            // A 200 with no byte at all: deterministic for the same prompt, so not retried.
            None if !received => Err(AttemptError::Fatal(ProviderError::EmptyAnswer { url })),
            None => Err(broken(
                emitted,
                "the stream ended before the response was complete".into(),
            )),
        }
    }
}

impl<W: WireFormat> ModelClient for HttpModelClient<W> {
    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a (dyn Fn(ModelDelta) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        self.complete_with(request, DeferredTools::NONE, on_delta, cancel)
    }

    fn complete_with<'a>(
        &'a self,
        request: ModelRequest<'a>,
        deferred: DeferredTools<'a>,
        on_delta: &'a (dyn Fn(ModelDelta) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ProviderError>> {
        Box::pin(async move {
            let mut attempt = 0u32;
            let mut timeouts = 0u32;
            loop {
                match self.attempt(&request, &deferred, on_delta, cancel).await {
                    Ok(response) => return Ok(response),
                    Err(AttemptError::Fatal(error)) => return Err(error),
                    Err(AttemptError::Retry {
                        reason,
                        retry_after,
                        error,
                        timed_out,
                    }) => {
                        attempt += 1;
                        // A server that timed out twice is not waited on a third time.
                        timeouts += u32::from(timed_out);
                        if attempt > self.config.retry.max_retries || timeouts > 1 {
                            return Err(error);
                        }
                        let delay = self.config.retry.delay(attempt, retry_after);
                        on_delta(ModelDelta::Retrying {
                            attempt,
                            delay_ms: delay.as_millis() as u64,
                            reason,
                        });
                        tokio::select! {
                            _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
        })
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.config.provider.as_str(), self.config.id)
    }

    fn context_window(&self) -> u64 {
        self.config.context_window
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        out.push_str(": ");
        out.push_str(&inner.to_string());
        source = inner.source();
    }
    out
}

/// The `message` of an API error body, else the body's first 300 bytes.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    if let Some(message) = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message"))
        .and_then(|m| m.as_str())
    {
        return message.to_string();
    }
    let mut end = body.len().min(300);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].to_string()
}

/// Accumulates the streamed fragments of tool calls, keyed by the provider's index.
#[derive(Debug, Default)]
pub(crate) struct ToolCallAssembler {
    calls: Vec<(String, ToolCall)>,
}

impl ToolCallAssembler {
    /// Starts a call under `key`; returns the delta to emit.
    pub(crate) fn start(&mut self, key: String, id: String, name: String) -> ModelDelta {
        self.calls.push((
            key,
            ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: String::new(),
            },
        ));
        ModelDelta::ToolCallStarted { id, name }
    }

    pub(crate) fn last_key(&self) -> Option<String> {
        self.calls.last().map(|(key, _)| key.clone())
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.calls.iter().any(|(k, _)| k == key)
    }

    pub(crate) fn append(&mut self, key: &str, fragment: &str) -> Result<(), ProviderError> {
        match self.calls.iter_mut().find(|(k, _)| k == key) {
            Some((_, call)) => {
                call.arguments.push_str(fragment);
                Ok(())
            }
            None => Err(ProviderError::Protocol(format!(
                "arguments for a tool call that was not started ({key})"
            ))),
        }
    }

    /// Replaces the arguments with the complete text the provider sent at the end.
    pub(crate) fn set_arguments(&mut self, key: &str, arguments: String) {
        if let Some((_, call)) = self.calls.iter_mut().find(|(k, _)| k == key) {
            call.arguments = arguments;
        }
    }

    pub(crate) fn take(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(_, call)| call)
            .collect()
    }
}

/// `Authorization: Bearer <key>` when there is a key: the OpenAI wire formats' only header.
pub(crate) fn bearer_headers(key: Option<&Secret>) -> Vec<(&'static str, String)> {
    key.map(|key| vec![("authorization", format!("Bearer {}", key.expose()))])
        .unwrap_or_default()
}

/// An event whose JSON says its own kind in `type` (or, failing that, in the SSE `event:`
/// line): the value and the kind; None for an empty event.
pub(crate) fn typed_event(event: &SseEvent) -> Result<Option<(Value, String)>, ProviderError> {
    if event.data.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(&event.data)
        .map_err(|e| ProviderError::Protocol(format!("an event that is not JSON: {e}")))?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .or(event.event.as_deref())
        .unwrap_or_default()
        .to_string();
    Ok(Some((value, kind)))
}

/// The string at `pointer`, or empty.
pub(crate) fn text_at(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// What every stream decoder gathers on the way to a [`ModelResponse`].
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    pub text: String,
    pub calls: ToolCallAssembler,
    pub usage: Usage,
    pub stop_reason: Option<String>,
    pub done: bool,
    /// Provider-run blocks of this turn, in order (see [`ModelResponse::provider_blocks`]).
    pub provider_blocks: Vec<Value>,
}

impl StreamState {
    /// The response gathered so far, taking text and calls out.
    pub(crate) fn take_response(&mut self) -> ModelResponse {
        ModelResponse {
            text: std::mem::take(&mut self.text),
            tool_calls: self.calls.take(),
            usage: self.usage,
            stop_reason: self.stop_reason.clone(),
            provider_blocks: None,
        }
    }

    /// The response gathered so far, with the provider blocks tagged as `provider`'s.
    pub(crate) fn take_response_of(&mut self, provider: &str) -> ModelResponse {
        let blocks = std::mem::take(&mut self.provider_blocks);
        let mut response = self.take_response();
        if !blocks.is_empty() {
            response.provider_blocks = Some((provider.to_owned(), blocks));
        }
        response
    }
}
