//! The QuickJS sandbox: one runtime and context per execution on a thread of its own, talking
//! to the caller's task through channels; the caller enforces call budgets and wall time.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::channel::{mpsc, oneshot};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use rquickjs::function::Async;
use rquickjs::{AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Function, Value};

use super::{CodeModeError, CodeModeHost, CodeModeLimits, ExecutionReport, ExecutionStatus};

/// How long the caller waits for the sandbox thread to stop after the time limit fired.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Native stack of the sandbox thread; the JavaScript stack limit sits well inside it.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// A tool call from the script, waiting for the caller to run it.
struct HostRequest {
    server: String,
    tool: String,
    arguments: String,
    reply: oneshot::Sender<Result<String, String>>,
}

/// What the sandbox thread hands back.
struct ScriptOutcome {
    value: Result<Option<String>, String>,
    logs: String,
    logs_truncated: bool,
}

/// Runs `code` in a fresh sandbox. `code` is either an expression (its value is returned; a
/// returned function is called, a promise awaited) or the body of an async function (use
/// `return`). Inside, `await tools.call(server, tool, args)` goes to `host`.
pub async fn execute(
    host: &dyn CodeModeHost,
    code: &str,
    limits: CodeModeLimits,
) -> Result<ExecutionReport, CodeModeError> {
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (request_tx, mut request_rx) = mpsc::unbounded::<HostRequest>();
    let (done_tx, done_rx) = oneshot::channel::<Result<ScriptOutcome, String>>();
    let thread_stop = stop.clone();
    let script = code.to_string();
    std::thread::Builder::new()
        .name("warden-code-mode".to_string())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let outcome = futures::executor::block_on(run_script(
                script,
                limits,
                thread_stop,
                started,
                request_tx,
            ));
            let _ = done_tx.send(outcome);
        })
        .map_err(|error| CodeModeError::Unavailable {
            cause: format!("cannot start the sandbox thread: {error}"),
        })?;

    let mut budget = Budget::new(limits);
    let mut in_flight = FuturesUnordered::new();
    let deadline = tokio::time::sleep(limits.time);
    tokio::pin!(deadline);
    let mut done = done_rx.fuse();
    let mut timed_out = false;
    let outcome = loop {
        tokio::select! {
            outcome = &mut done => break outcome.ok(),
            Some(request) = request_rx.next() => {
                if let Some(request) = budget.admit(request) {
                    in_flight.push(run_call(host, request));
                }
            }
            Some((server, reply, result)) = in_flight.next() => {
                let result = budget.settle(&server, result);
                let _ = reply.send(result);
                if let Some(next) = budget.next_queued(&server) {
                    in_flight.push(run_call(host, next));
                }
            }
            () = &mut deadline, if !timed_out => {
                timed_out = true;
                stop.store(true, Ordering::SeqCst);
                in_flight.clear();
                budget.queued.clear();
                request_rx.close();
                let grace = tokio::time::timeout(STOP_GRACE, &mut done).await;
                break grace.ok().and_then(Result::ok);
            }
        }
    };
    let elapsed = started.elapsed();
    let mut report = ExecutionReport {
        status: ExecutionStatus::Completed,
        value: None,
        value_truncated: false,
        error: None,
        logs: String::new(),
        logs_truncated: false,
        calls: budget.calls,
        result_bytes: budget.result_bytes,
        elapsed,
    };
    let outcome = match outcome {
        Some(Ok(outcome)) => outcome,
        Some(Err(cause)) => return Err(CodeModeError::Unavailable { cause }),
        None if timed_out => {
            report.status = ExecutionStatus::TimedOut;
            report.error = Some(time_limit_message(limits.time));
            return Ok(report);
        }
        None => {
            return Err(CodeModeError::Unavailable {
                cause: "the sandbox thread ended without a result".to_string(),
            });
        }
    };
    report.logs = outcome.logs;
    report.logs_truncated = outcome.logs_truncated;
    if timed_out || stop.load(Ordering::SeqCst) {
        report.status = ExecutionStatus::TimedOut;
        report.error = Some(time_limit_message(limits.time));
        return Ok(report);
    }
    match outcome.value {
        Ok(value) => {
            if let Some(mut json) = value {
                if json.len() > limits.max_return_bytes {
                    let mut cut = limits.max_return_bytes;
                    while !json.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    json.truncate(cut);
                    report.value_truncated = true;
                }
                report.value = Some(json);
            }
        }
        Err(error) => {
            report.status = ExecutionStatus::Threw;
            report.error = Some(error);
        }
    }
    Ok(report)
}

fn time_limit_message(limit: Duration) -> String {
    format!(
        "the execution was stopped by the time limit ({} ms)",
        limit.as_millis()
    )
}

type CallResult = (
    String,
    oneshot::Sender<Result<String, String>>,
    Result<String, String>,
);

async fn run_call(host: &dyn CodeModeHost, request: HostRequest) -> CallResult {
    let HostRequest {
        server,
        tool,
        arguments,
        reply,
    } = request;
    let result = match serde_json::from_str::<serde_json::Value>(&arguments) {
        Ok(arguments) => match host.call(&server, &tool, arguments).await {
            Ok(value) => serde_json::to_string(&value).map_err(|e| e.to_string()),
            Err(message) => Err(message),
        },
        Err(error) => Err(format!("the arguments are not JSON: {error}")),
    };
    (server, reply, result)
}

/// Per-execution budgets: total calls, calls in flight per server, result bytes.
struct Budget {
    limits: CodeModeLimits,
    calls: u32,
    result_bytes: usize,
    in_flight: HashMap<String, usize>,
    queued: HashMap<String, VecDeque<HostRequest>>,
}

impl Budget {
    fn new(limits: CodeModeLimits) -> Self {
        Self {
            limits,
            calls: 0,
            result_bytes: 0,
            in_flight: HashMap::new(),
            queued: HashMap::new(),
        }
    }

    /// Refuses the call when a budget is spent, queues it when its server is busy, or hands it
    /// back to be started now.
    fn admit(&mut self, request: HostRequest) -> Option<HostRequest> {
        if self.calls >= self.limits.max_calls {
            let _ = request.reply.send(Err(format!(
                "code-mode budget exhausted: at most {} tool calls per execution",
                self.limits.max_calls
            )));
            return None;
        }
        if self.result_bytes >= self.limits.max_result_bytes {
            let _ = request.reply.send(Err(format!(
                "code-mode budget exhausted: tool results already reached {} bytes in this execution",
                self.limits.max_result_bytes
            )));
            return None;
        }
        self.calls += 1;
        let running = self.in_flight.entry(request.server.clone()).or_default();
        if *running >= self.limits.max_concurrent_per_server.max(1) {
            self.queued
                .entry(request.server.clone())
                .or_default()
                .push_back(request);
            return None;
        }
        *running += 1;
        Some(request)
    }

    /// Accounts for a finished call; a result that overflows the byte budget is withheld.
    fn settle(&mut self, server: &str, result: Result<String, String>) -> Result<String, String> {
        if let Some(running) = self.in_flight.get_mut(server) {
            *running = running.saturating_sub(1);
        }
        let json = result?;
        if self.result_bytes + json.len() > self.limits.max_result_bytes {
            self.result_bytes = self.limits.max_result_bytes;
            return Err(format!(
                "code-mode budget exhausted: this result ({} bytes) would take tool results past {} bytes in this execution",
                json.len(),
                self.limits.max_result_bytes
            ));
        }
        self.result_bytes += json.len();
        Ok(json)
    }

    /// The next waiting call for `server`, now started.
    fn next_queued(&mut self, server: &str) -> Option<HostRequest> {
        let next = self.queued.get_mut(server)?.pop_front()?;
        *self.in_flight.entry(server.to_string()).or_default() += 1;
        Some(next)
    }
}

/// Captured console output, capped.
struct LogBuffer {
    text: String,
    truncated: bool,
    limit: usize,
}

impl LogBuffer {
    fn push(&mut self, level: &str, line: &str) {
        if self.truncated {
            return;
        }
        let prefix = match level {
            "warn" => "[warn] ",
            "error" => "[error] ",
            _ => "",
        };
        let addition = format!(
            "{}{prefix}{line}",
            if self.text.is_empty() { "" } else { "\n" }
        );
        if self.text.len() + addition.len() > self.limit {
            let mut room = self.limit.saturating_sub(self.text.len());
            while room > 0 && !addition.is_char_boundary(room) {
                room -= 1;
            }
            self.text.push_str(&addition[..room]);
            self.truncated = true;
        } else {
            self.text.push_str(&addition);
        }
    }
}

/// Installs `console` and `tools` and runs the user's code; both natives stay hidden in closures.
const PRELUDE: &str = r#"(function (sink, native) {
  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return String(v);
    try { const j = JSON.stringify(v); return j === undefined ? String(v) : j; } catch (_) { return String(v); }
  };
  const logger = (level) => (...args) => { sink(level, args.map(show).join(" ")); };
  globalThis.console = Object.freeze({
    log: logger("log"), info: logger("log"), debug: logger("log"),
    warn: logger("warn"), error: logger("error"),
  });
  globalThis.tools = Object.freeze({
    call: async (server, tool, args) => {
      if (typeof server !== "string" || typeof tool !== "string") {
        throw new TypeError("tools.call(server, tool, args): server and tool must be strings");
      }
      const text = await native(server, tool, JSON.stringify(args === undefined ? {} : args));
      return JSON.parse(text);
    },
  });
})"#;

/// Awaits the user's function, calls a returned function, and JSON-encodes the value.
const RUNNER: &str = r#"(async function (main) {
  let value = await main();
  if (typeof value === "function") value = await value();
  return value === undefined ? undefined : JSON.stringify(value);
})"#;

async fn run_script(
    code: String,
    limits: CodeModeLimits,
    stop: Arc<AtomicBool>,
    started: Instant,
    requests: mpsc::UnboundedSender<HostRequest>,
) -> Result<ScriptOutcome, String> {
    let runtime =
        AsyncRuntime::new().map_err(|e| format!("cannot create a QuickJS runtime: {e}"))?;
    runtime.set_memory_limit(limits.memory_bytes).await;
    runtime.set_max_stack_size(limits.stack_bytes).await;
    let deadline = started + limits.time;
    let handler_stop = stop.clone();
    runtime
        .set_interrupt_handler(Some(Box::new(move || {
            if handler_stop.load(Ordering::Relaxed) {
                return true;
            }
            if Instant::now() >= deadline {
                handler_stop.store(true, Ordering::Relaxed);
                return true;
            }
            false
        })))
        .await;
    let context = AsyncContext::full(&runtime)
        .await
        .map_err(|e| format!("cannot create a QuickJS context: {e}"))?;
    let logs = Rc::new(RefCell::new(LogBuffer {
        text: String::new(),
        truncated: false,
        limit: limits.max_log_bytes,
    }));
    let script_logs = logs.clone();
    let value = context
        .async_with(async |ctx| run_in_context(&ctx, &code, script_logs, requests).await)
        .await;
    drop(context);
    runtime.run_gc().await;
    let logs = Rc::try_unwrap(logs)
        .map(RefCell::into_inner)
        .unwrap_or_else(|shared| {
            let buffer = shared.borrow();
            LogBuffer {
                text: buffer.text.clone(),
                truncated: buffer.truncated,
                limit: buffer.limit,
            }
        });
    Ok(ScriptOutcome {
        value,
        logs: logs.text,
        logs_truncated: logs.truncated,
    })
}

async fn run_in_context<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    logs: Rc<RefCell<LogBuffer>>,
    requests: mpsc::UnboundedSender<HostRequest>,
) -> Result<Option<String>, String> {
    let sink = Function::new(ctx.clone(), move |level: String, line: String| {
        logs.borrow_mut().push(&level, &line);
    })
    .map_err(|e| describe_error(ctx, e))?;
    let native = Function::new(
        ctx.clone(),
        Async(
            move |ctx: Ctx<'js>, server: String, tool: String, arguments: String| {
                let requests = requests.clone();
                async move {
                    let (reply, answer) = oneshot::channel();
                    let sent = requests.unbounded_send(HostRequest {
                        server,
                        tool,
                        arguments,
                        reply,
                    });
                    let result = match sent {
                        Ok(()) => answer
                            .await
                            .unwrap_or_else(|_| Err("the execution is ending".to_string())),
                        Err(_) => Err("the execution is ending".to_string()),
                    };
                    result.map_err(|message| rquickjs::Exception::throw_message(&ctx, &message))
                }
            },
        ),
    )
    .map_err(|e| describe_error(ctx, e))?;
    let prelude: Function = ctx.eval(PRELUDE).catch(ctx).map_err(|e| caught_text(&e))?;
    prelude
        .call::<_, ()>((sink, native))
        .catch(ctx)
        .map_err(|e| caught_text(&e))?;

    let main: Function = match ctx
        .eval::<Function, _>(format!("(async () => (\n{code}\n))"))
        .catch(ctx)
    {
        Ok(function) => function,
        Err(_) => ctx
            .eval::<Function, _>(format!("(async () => {{\n{code}\n}})"))
            .catch(ctx)
            .map_err(|e| caught_text(&e))?,
    };
    let runner: Function = ctx.eval(RUNNER).catch(ctx).map_err(|e| caught_text(&e))?;
    let promise: rquickjs::Promise = runner
        .call((main,))
        .catch(ctx)
        .map_err(|e| caught_text(&e))?;
    let value: Value = promise
        .into_future::<Value>()
        .await
        .catch(ctx)
        .map_err(|e| caught_text(&e))?;
    if value.is_undefined() {
        return Ok(None);
    }
    let json: String = value
        .get::<rquickjs::Coerced<String>>()
        .map(|c| c.0)
        .map_err(|e| describe_error(ctx, e))?;
    Ok(Some(json))
}

fn describe_error(ctx: &Ctx<'_>, error: rquickjs::Error) -> String {
    if error.is_exception() {
        caught_text(&CaughtError::from_error(ctx, error))
    } else {
        error.to_string()
    }
}

fn caught_text(error: &CaughtError<'_>) -> String {
    match error {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            let name: String = exception
                .get::<_, rquickjs::Coerced<String>>("name")
                .map(|c| c.0)
                .unwrap_or_else(|_| "Error".to_string());
            let head = if message.is_empty() {
                name
            } else {
                format!("{name}: {message}")
            };
            match exception.stack() {
                Some(stack) if !stack.trim().is_empty() => format!("{head}\n{}", stack.trim_end()),
                _ => head,
            }
        }
        CaughtError::Value(value) => {
            let shown = value
                .get::<rquickjs::Coerced<String>>()
                .map(|c| c.0)
                .unwrap_or_else(|_| "a non-Error value".to_string());
            format!("uncaught {shown}")
        }
        CaughtError::Error(error) => error.to_string(),
    }
}
