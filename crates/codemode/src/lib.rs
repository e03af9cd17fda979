//! Code mode, its own crate so that only the surfaces offering it compile QuickJS: `code_execute`
//! runs JavaScript in a fresh QuickJS sandbox per execution that may
//! reach tools only through the host ([`CodeModeHost`], the gate), under memory, time and call
//! budgets; `code_search` browses and describes the tools it may call.

mod calls;
mod catalog;
mod sandbox;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use catalog::{Callability, CodeCatalog, CodeSearchRequest, CodeTool, MAX_DESCRIBED_TOOLS};
pub use sandbox::execute;

/// How long an ending execution waits for the tool calls it cancelled to finish (their gate
/// records completed as cancelled, the servers told) before it returns and drops any that did
/// not. Longer than the gate's own cancel grace (2 s), so the gate can always end the call and
/// write its record first.
pub const CANCELLED_CALLS_GRACE: Duration = Duration::from_secs(3);

/// A boxed, sendable future (what the host's callbacks return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the sandbox needs from its host: a way to call tools (the host routes it through the
/// gate with source `code-mode`, which refuses anything not read-only) and the catalogue
/// `code_search` describes.
pub trait CodeModeHost: Send + Sync {
    /// Calls `tool` on `server`. `Ok` is the value the script receives (any JSON); `Err` is a
    /// refusal or failure ([`ToolCallError::Failed`]), thrown into the script as an `Error` with
    /// its message.
    ///
    /// `cancel` fires when the execution ends before the call does (the script returned or threw
    /// without awaiting it, a limit stopped the script, or the caller cancelled the run). The
    /// call must then end promptly the way a cancelled call ends — through the gate, which
    /// records it as cancelled and tells the server — and resolve: code mode keeps polling it
    /// (never drops it) for up to [`CANCELLED_CALLS_GRACE`] before the execution returns.
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>>;

    /// The tools code mode can see, each marked callable or not (with the reason).
    fn catalog(&self) -> std::sync::Arc<CodeCatalog>;

    /// The caller's cancellation: once it fires, a running script stops at its next interrupt
    /// check (a busy loop included) and the execution ends as cancelled. `None`: only the time
    /// limit stops it.
    fn cancellation(&self) -> Option<tokio_util::sync::CancellationToken> {
        None
    }
}

/// Answers a `code_search` request from the host's catalogue.
pub fn code_search(host: &dyn CodeModeHost, request: &CodeSearchRequest) -> String {
    host.catalog().search(request)
}

/// Limits of one execution. [`CodeModeLimits::default`] is what sessions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CodeModeLimits {
    /// QuickJS heap limit.
    pub memory_bytes: usize,
    /// What the script may make warden hold outside its heap while calls are pending: the JSON
    /// arguments of every `tools.call` from the moment the script makes it until its answer
    /// reaches the script (queued, in flight, or cancelled and winding down). A call that would
    /// go past it ends the execution with an error naming this limit. Tool results are bounded
    /// by [`CodeModeLimits::max_result_bytes`], console output by
    /// [`CodeModeLimits::max_log_bytes`].
    pub max_pending_argument_bytes: usize,
    /// Wall-clock limit of the whole execution (script and tool calls).
    pub time: Duration,
    /// JavaScript stack limit (deep recursion throws instead of harming the host).
    pub stack_bytes: usize,
    /// Tool calls per execution.
    pub max_calls: u32,
    /// Tool calls in flight at once per server; more wait their turn.
    pub max_concurrent_per_server: usize,
    /// Total bytes of tool results (as JSON) per execution.
    pub max_result_bytes: usize,
    /// Longest JSON-encoded return value kept; longer is cut and marked truncated.
    pub max_return_bytes: usize,
    /// Longest captured console output kept.
    pub max_log_bytes: usize,
}

impl Default for CodeModeLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 128 * 1024 * 1024,
            max_pending_argument_bytes: 32 * 1024 * 1024,
            time: Duration::from_secs(30),
            stack_bytes: 1024 * 1024,
            max_calls: 1_000,
            max_concurrent_per_server: 8,
            max_result_bytes: 16 * 1024 * 1024,
            max_return_bytes: 64 * 1024,
            max_log_bytes: 64 * 1024,
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// The script finished; its value is in [`ExecutionReport::value`].
    Completed,
    /// The script threw (including out-of-memory and stack overflow, which QuickJS throws).
    Threw,
    /// The time limit stopped it.
    TimedOut,
    /// The caller cancelled it (the host's cancellation fired).
    Cancelled,
}

/// The result of one `code_execute`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionReport {
    pub status: ExecutionStatus,
    /// The JSON encoding of the returned value (`None` for `undefined`).
    pub value: Option<String>,
    pub value_truncated: bool,
    /// What was thrown, with its stack when there is one.
    pub error: Option<String>,
    /// Captured `console.*` output, one line per call (`warn`/`error` prefixed).
    pub logs: String,
    pub logs_truncated: bool,
    /// Tool calls the script made (refused ones included).
    pub calls: u32,
    /// Bytes of tool results delivered to the script.
    pub result_bytes: usize,
    pub elapsed: Duration,
}

impl ExecutionReport {
    /// The text a model reads.
    pub fn model_text(&self) -> String {
        let mut out = String::new();
        match self.status {
            ExecutionStatus::Completed => {
                out.push_str("result: ");
                out.push_str(self.value.as_deref().unwrap_or("undefined"));
                if self.value_truncated {
                    out.push_str(" … [truncated]");
                }
            }
            ExecutionStatus::Threw => {
                out.push_str("error: ");
                out.push_str(self.error.as_deref().unwrap_or("unknown error"));
            }
            ExecutionStatus::TimedOut | ExecutionStatus::Cancelled => {
                out.push_str("error: ");
                out.push_str(self.error.as_deref().unwrap_or(match self.status {
                    ExecutionStatus::Cancelled => "the execution was cancelled",
                    _ => "the execution ran out of time",
                }));
            }
        }
        if !self.logs.is_empty() {
            out.push_str("\nconsole:\n");
            out.push_str(&self.logs);
            if self.logs_truncated {
                out.push_str("\n… [console output truncated]");
            }
        }
        out.push_str(&format!(
            "\n({} tool call{}, {} ms)",
            self.calls,
            if self.calls == 1 { "" } else { "s" },
            self.elapsed.as_millis()
        ));
        out
    }
}

/// Why a script's `tools.call` failed: thrown into the script as an `Error` whose message is this
/// error's text (the script, and so the model, reads it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    /// The host refused the call or the tool failed: the text the model reads for that outcome.
    #[error("{0}")]
    Failed(String),
    /// The script's arguments were not JSON.
    #[error("the arguments are not JSON: {0}")]
    ArgumentsNotJson(String),
    /// [`CodeModeLimits::max_calls`] calls were already made.
    #[error("code-mode budget exhausted: at most {max_calls} tool calls per execution")]
    TooManyCalls { max_calls: u32 },
    /// The results so far already reached [`CodeModeLimits::max_result_bytes`].
    #[error(
        "code-mode budget exhausted: tool results already reached {max_result_bytes} bytes in this execution"
    )]
    ResultsSpent { max_result_bytes: usize },
    /// This result would take the results past [`CodeModeLimits::max_result_bytes`]; it is
    /// withheld.
    #[error(
        "code-mode budget exhausted: this result ({bytes} bytes) would take tool results past {max_result_bytes} bytes in this execution"
    )]
    ResultTooLarge {
        bytes: usize,
        max_result_bytes: usize,
    },
    /// The execution ended before the call could be handed over.
    #[error("the execution is ending")]
    ExecutionEnding,
}

/// Code mode could not run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeModeError {
    /// The sandbox could not start; code mode is unavailable (no weaker fallback is used).
    #[error("code mode is unavailable: {cause}")]
    Unavailable { cause: String },
}

/// Checks that a sandbox can start here (a runtime, a context and a trivial script), for
/// availability reporting.
pub async fn probe(limits: CodeModeLimits) -> Result<(), CodeModeError> {
    struct NoTools(std::sync::Arc<CodeCatalog>);
    impl CodeModeHost for NoTools {
        fn call<'a>(
            &'a self,
            _server: &'a str,
            _tool: &'a str,
            _arguments: Value,
            _cancel: tokio_util::sync::CancellationToken,
        ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
            Box::pin(async {
                Err(ToolCallError::Failed(
                    "no tools are available to the probe".to_string(),
                ))
            })
        }
        fn catalog(&self) -> std::sync::Arc<CodeCatalog> {
            self.0.clone()
        }
    }
    let host = NoTools(std::sync::Arc::new(CodeCatalog::new(
        Vec::new(),
        Vec::new(),
    )));
    let report = execute(&host, "1 + 1", limits).await?;
    match report.value.as_deref() {
        Some("2") => Ok(()),
        _ => Err(CodeModeError::Unavailable {
            cause: format!("the probe script did not run: {}", report.model_text()),
        }),
    }
}
