//! The QuickJS sandbox: one runtime and context per execution on a thread of its own. On a
//! multi-threaded Tokio runtime that thread borrows the host and polls the tool calls itself;
//! elsewhere the calls go to the caller's task over channels. Budgets and wall time hold either way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use rquickjs::promise::PromiseState;
use rquickjs::{
    CatchResultExt, CaughtError, Context, Ctx, Exception, Function, Promise, Runtime, Value,
};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_util::sync::CancellationToken;

use super::calls::{
    CallDriver, CallRequest, ChannelCalls, InlineCalls, Served, StopOnDrop, serve_calls,
};
use super::{
    CodeModeError, CodeModeHost, CodeModeLimits, ExecutionReport, ExecutionStatus, ToolCallError,
};

/// Native stack of the sandbox thread; the JavaScript stack limit sits well inside it.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;
/// The sandbox thread's name.
const THREAD_NAME: &str = "warden-code-mode";

/// What the sandbox thread hands back.
pub(super) struct ScriptOutcome {
    value: Result<Option<String>, ScriptError>,
    logs: String,
    logs_truncated: bool,
}

/// The sandbox could not be set up: code mode is unavailable ([`CodeModeError::Unavailable`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum SetupError {
    #[error("cannot create a QuickJS runtime: {0}")]
    Runtime(rquickjs::Error),
    #[error("cannot create a QuickJS context: {0}")]
    Context(rquickjs::Error),
}

/// Why a script gave no value; its text is the report's error, which the model reads.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum ScriptError {
    /// The script threw, or did not compile: the exception, its stack when it has one.
    #[error("{0}")]
    Threw(String),
    /// The calls it started and has not awaited would hold too much outside its heap
    /// ([`CodeModeLimits::max_pending_argument_bytes`]): the execution ends with this.
    #[error(
        "code-mode memory limit: the arguments of tool calls started and not yet answered would hold {would_hold} bytes outside the script's heap, over the limit of {limit} bytes; await calls before starting more"
    )]
    PendingArguments { would_hold: usize, limit: usize },
    /// The execution was stopped before its promise settled.
    #[error("the execution was stopped")]
    Stopped,
}

/// How one run of the sandbox ended, whichever way its calls went.
type SandboxRun = Served<Result<ScriptOutcome, SetupError>>;

/// Runs `code` in a fresh sandbox. `code` is either an expression (its value is returned; a
/// returned function is called, a promise awaited) or the body of an async function (use
/// `return`). Inside, `await tools.call(server, tool, args)` goes to `host`.
///
/// On a multi-threaded Tokio runtime the execution blocks the calling task (inside
/// [`tokio::task::block_in_place`], so the runtime's other tasks move on) while a sandbox thread
/// runs the script and drives the host's call futures itself; on a current-thread runtime the
/// sandbox thread hands its calls to this task instead.
pub async fn execute(
    host: &dyn CodeModeHost,
    code: &str,
    limits: CodeModeLimits,
) -> Result<ExecutionReport, CodeModeError> {
    let started = Instant::now();
    let deadline = started + limits.time;
    let stop = Arc::new(AtomicBool::new(false));
    let cancel = host.cancellation();
    let _watcher = watch_cancellation(cancel.clone(), &stop);
    let run = match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
            run_inline(host, code, limits, deadline, &stop, runtime)?
        }
        _ => run_on_channels(host, code, limits, deadline, &stop).await?,
    };
    let elapsed = started.elapsed();
    let mut report = ExecutionReport {
        status: ExecutionStatus::Completed,
        value: None,
        value_truncated: false,
        error: None,
        logs: String::new(),
        logs_truncated: false,
        calls: run.calls,
        result_bytes: run.result_bytes,
        elapsed,
    };
    // The caller's cancellation, once it fired, decides the outcome (the script may have seen it
    // first as its waiting calls failing); another stop is the time limit.
    let stopped = if cancel.is_some_and(|cancel| cancel.is_cancelled()) {
        Some((
            ExecutionStatus::Cancelled,
            "the execution was cancelled by the caller".to_string(),
        ))
    } else {
        run.timed_out
            .then(|| (ExecutionStatus::TimedOut, time_limit_message(limits.time)))
    };
    let outcome = match (run.outcome, stopped) {
        (Some(Err(cause)), _) => {
            return Err(CodeModeError::Unavailable {
                cause: cause.to_string(),
            });
        }
        (Some(Ok(outcome)), None) => outcome,
        (outcome, Some((status, message))) => {
            if let Some(Ok(outcome)) = outcome {
                report.logs = outcome.logs;
                report.logs_truncated = outcome.logs_truncated;
            }
            report.status = status;
            report.error = Some(message);
            return Ok(report);
        }
        (None, None) => {
            return Err(CodeModeError::Unavailable {
                cause: "the sandbox thread ended without a result".to_string(),
            });
        }
    };
    report.logs = outcome.logs;
    report.logs_truncated = outcome.logs_truncated;
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
            report.error = Some(error.to_string());
        }
    }
    Ok(report)
}

/// Aborts the cancellation watcher when the execution ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// When the caller's cancellation fires, sets the stop flag the interrupt handler checks: a
/// script busy in a loop stops at its next interrupt check, even on the multi-threaded path where
/// the calling task is blocked until the sandbox thread ends (the watcher is a task of its own,
/// so another worker runs it meanwhile). Waiting calls see the cancellation themselves.
fn watch_cancellation(
    cancel: Option<CancellationToken>,
    stop: &Arc<AtomicBool>,
) -> Option<AbortOnDrop> {
    let cancel = cancel?;
    if cancel.is_cancelled() {
        stop.store(true, Ordering::SeqCst);
        return None;
    }
    let runtime = Handle::try_current().ok()?;
    let stop = stop.clone();
    Some(AbortOnDrop(runtime.spawn(async move {
        cancel.cancelled().await;
        stop.store(true, Ordering::SeqCst);
    })))
}

fn time_limit_message(limit: Duration) -> String {
    format!(
        "the execution was stopped by the time limit ({} ms)",
        limit.as_millis()
    )
}

fn thread_error(error: std::io::Error) -> CodeModeError {
    CodeModeError::Unavailable {
        cause: format!("cannot start the sandbox thread: {error}"),
    }
}

/// The sandbox thread borrows `host` and polls the calls itself (no hand-off per call); this
/// thread waits for it inside `block_in_place`, so the runtime's other tasks keep running.
fn run_inline(
    host: &dyn CodeModeHost,
    code: &str,
    limits: CodeModeLimits,
    deadline: Instant,
    stop: &Arc<AtomicBool>,
    runtime: Handle,
) -> Result<SandboxRun, CodeModeError> {
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let sandbox = std::thread::Builder::new()
                .name(THREAD_NAME.to_string())
                .stack_size(THREAD_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    let mut calls = InlineCalls::new(host, runtime, limits, deadline);
                    let outcome = run_script(code, limits, stop, deadline, &mut calls);
                    let (calls, result_bytes) = calls.finish();
                    SandboxRun {
                        outcome: Some(outcome),
                        timed_out: stop.load(Ordering::SeqCst),
                        calls,
                        result_bytes,
                    }
                })
                .map_err(thread_error)?;
            sandbox.join().map_err(|_| CodeModeError::Unavailable {
                cause: "the sandbox thread ended without a result".to_string(),
            })
        })
    })
}

/// The sandbox thread sends its calls to this task, which runs them and answers.
async fn run_on_channels(
    host: &dyn CodeModeHost,
    code: &str,
    limits: CodeModeLimits,
    deadline: Instant,
    stop: &Arc<AtomicBool>,
) -> Result<SandboxRun, CodeModeError> {
    let (mut calls, requests, answers) = ChannelCalls::new();
    let (done_tx, done_rx) = oneshot::channel::<Result<ScriptOutcome, SetupError>>();
    let thread_stop = stop.clone();
    let script = code.to_string();
    std::thread::Builder::new()
        .name(THREAD_NAME.to_string())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let outcome = run_script(&script, limits, &thread_stop, deadline, &mut calls);
            let _ = done_tx.send(outcome);
        })
        .map_err(thread_error)?;
    // If this future is dropped mid-run, the script stops at its next interrupt check.
    let _stop_if_abandoned = StopOnDrop(stop.clone());
    let mut served = serve_calls(host, limits, stop, requests, answers, done_rx).await;
    served.timed_out |= stop.load(Ordering::SeqCst);
    Ok(served)
}

/// The script's calls as its side of the sandbox sees them: promises waiting for answers and
/// calls made since the driver last looked.
struct ScriptCalls<'js> {
    next_id: u64,
    /// Each waiting call's `resolve` and `reject`, and the bytes of its arguments.
    pending: HashMap<u64, PendingCall<'js>>,
    outgoing: Vec<CallRequest>,
    /// Bytes of arguments held outside the heap for the calls in `pending`.
    held_bytes: usize,
    /// At most this many (`CodeModeLimits::max_pending_argument_bytes`).
    max_held_bytes: usize,
    /// Set when a call would have gone past `max_held_bytes`: the execution ends with it.
    limit_error: Option<ScriptError>,
}

/// A call the script is waiting on.
struct PendingCall<'js> {
    resolve: Function<'js>,
    reject: Function<'js>,
    argument_bytes: usize,
}

impl<'js> ScriptCalls<'js> {
    /// Takes the call's promise capability and releases the bytes its arguments held.
    fn answered(&mut self, id: u64) -> Option<(Function<'js>, Function<'js>)> {
        let call = self.pending.remove(&id)?;
        self.held_bytes = self.held_bytes.saturating_sub(call.argument_bytes);
        Some((call.resolve, call.reject))
    }
}

/// Builds the runtime and context under the limits, runs `code` and collects its console.
fn run_script(
    code: &str,
    limits: CodeModeLimits,
    stop: &Arc<AtomicBool>,
    deadline: Instant,
    calls: &mut dyn CallDriver,
) -> Result<ScriptOutcome, SetupError> {
    let runtime = Runtime::new().map_err(SetupError::Runtime)?;
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let handler_stop = stop.clone();
    // Set when the script's pending calls reach their memory limit: the script stops at once.
    let over_limit = Arc::new(AtomicBool::new(false));
    let handler_over_limit = over_limit.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || {
        if handler_stop.load(Ordering::Relaxed) || handler_over_limit.load(Ordering::Relaxed) {
            return true;
        }
        if Instant::now() >= deadline {
            handler_stop.store(true, Ordering::Relaxed);
            return true;
        }
        false
    })));
    let context = Context::full(&runtime).map_err(SetupError::Context)?;
    let logs = Rc::new(RefCell::new(LogBuffer {
        text: String::new(),
        truncated: false,
        limit: limits.max_log_bytes,
    }));
    let script_logs = logs.clone();
    let value = context
        .with(|ctx| run_in_context(&ctx, code, limits, script_logs, stop, &over_limit, calls));
    drop(context);
    runtime.run_gc();
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

fn run_in_context<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    limits: CodeModeLimits,
    logs: Rc<RefCell<LogBuffer>>,
    stop: &AtomicBool,
    over_limit: &Arc<AtomicBool>,
    calls: &mut dyn CallDriver,
) -> Result<Option<String>, ScriptError> {
    let script_calls = Rc::new(RefCell::new(ScriptCalls {
        next_id: 0,
        pending: HashMap::new(),
        outgoing: Vec::new(),
        held_bytes: 0,
        max_held_bytes: limits.max_pending_argument_bytes,
        limit_error: None,
    }));
    let value = drive_script(ctx, code, logs, &script_calls, stop, over_limit, calls);
    // The resolve/reject functions held here must go before the context does.
    script_calls.borrow_mut().pending.clear();
    value
}

/// Evaluates the script, then alternates between running its jobs and waiting for tool answers
/// until its promise settles or the execution is stopped (by the time limit, the caller, or its
/// pending calls' memory limit).
fn drive_script<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    logs: Rc<RefCell<LogBuffer>>,
    script_calls: &Rc<RefCell<ScriptCalls<'js>>>,
    stop: &AtomicBool,
    over_limit: &Arc<AtomicBool>,
    calls: &mut dyn CallDriver,
) -> Result<Option<String>, ScriptError> {
    let sink = Function::new(ctx.clone(), move |level: String, line: String| {
        logs.borrow_mut().push(&level, &line);
    })
    .map_err(|e| describe_error(ctx, e))?;
    let native_calls = script_calls.clone();
    let native_over_limit = over_limit.clone();
    let native = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              server: String,
              tool: String,
              arguments: String|
              -> rquickjs::Result<Promise<'js>> {
            let mut calls = native_calls.borrow_mut();
            let argument_bytes = arguments.len();
            let would_hold = calls.held_bytes.saturating_add(argument_bytes);
            if would_hold > calls.max_held_bytes {
                let error = ScriptError::PendingArguments {
                    would_hold,
                    limit: calls.max_held_bytes,
                };
                let message = error.to_string();
                calls.limit_error.get_or_insert(error);
                native_over_limit.store(true, Ordering::SeqCst);
                return Err(Exception::throw_message(&ctx, &message));
            }
            let (promise, resolve, reject) = ctx.promise()?;
            calls.next_id += 1;
            let id = calls.next_id;
            calls.held_bytes = would_hold;
            calls.pending.insert(
                id,
                PendingCall {
                    resolve,
                    reject,
                    argument_bytes,
                },
            );
            calls.outgoing.push(CallRequest {
                id,
                server,
                tool,
                arguments,
            });
            Ok(promise)
        },
    )
    .map_err(|e| describe_error(ctx, e))?;
    // Once the pending calls' limit was hit, further calls fail before their arguments are
    // even encoded.
    let limit_calls = script_calls.clone();
    let limit = Function::new(ctx.clone(), move || -> Option<String> {
        limit_calls
            .borrow()
            .limit_error
            .as_ref()
            .map(ToString::to_string)
    })
    .map_err(|e| describe_error(ctx, e))?;
    let prelude: Function = ctx.eval(PRELUDE).catch(ctx).map_err(|e| thrown(&e))?;
    prelude
        .call::<_, ()>((sink, native, limit))
        .catch(ctx)
        .map_err(|e| thrown(&e))?;

    let main: Function = match ctx
        .eval::<Function, _>(format!("(async () => (\n{code}\n))"))
        .catch(ctx)
    {
        Ok(function) => function,
        Err(_) => ctx
            .eval::<Function, _>(format!("(async () => {{\n{code}\n}})"))
            .catch(ctx)
            .map_err(|e| thrown(&e))?,
    };
    let runner: Function = ctx.eval(RUNNER).catch(ctx).map_err(|e| thrown(&e))?;
    // The limit's interrupt can end the script before its first `await`, while this call runs.
    let limit_error = || script_calls.borrow().limit_error.clone();
    let promise: Promise = runner
        .call((main,))
        .catch(ctx)
        .map_err(|e| limit_error().unwrap_or_else(|| thrown(&e)))?;
    loop {
        while !stop.load(Ordering::Relaxed)
            && !over_limit.load(Ordering::Relaxed)
            && ctx.execute_pending_job()
        {}
        if let Some(error) = limit_error() {
            // The calls made meanwhile are not started; those already running are cancelled
            // when the driver finishes.
            return Err(error);
        }
        let requests = std::mem::take(&mut script_calls.borrow_mut().outgoing);
        for request in requests {
            calls.start(request);
        }
        if stop.load(Ordering::Relaxed) || promise.state() != PromiseState::Pending {
            break;
        }
        let Some(answers) = calls.wait() else {
            stop.store(true, Ordering::SeqCst);
            break;
        };
        for (id, result) in answers {
            let capability = script_calls.borrow_mut().answered(id);
            if let Some(capability) = capability {
                settle_call(ctx, capability, result);
            }
        }
    }
    let value: Value = match promise.result::<Value>() {
        Some(result) => result.catch(ctx).map_err(|e| thrown(&e))?,
        None => return Err(ScriptError::Stopped),
    };
    if value.is_undefined() {
        return Ok(None);
    }
    let json: String = value
        .get::<rquickjs::Coerced<String>>()
        .map(|c| c.0)
        .map_err(|e| describe_error(ctx, e))?;
    Ok(Some(json))
}

/// Resolves a call's promise with its value, or rejects it with an `Error` carrying the message.
fn settle_call<'js>(
    ctx: &Ctx<'js>,
    (resolve, reject): (Function<'js>, Function<'js>),
    result: Result<serde_json::Value, ToolCallError>,
) {
    let settled = match result {
        Ok(value) => json_to_js(ctx, &value).and_then(|value| resolve.call::<_, ()>((value,))),
        Err(error) => Exception::from_message(ctx.clone(), &error.to_string())
            .and_then(|error| reject.call::<_, ()>((error,))),
    };
    if let Err(error) = settled {
        // Converting failed (out of memory, say): the script gets that as the call's error.
        let thrown = if error.is_exception() {
            ctx.catch()
        } else {
            rquickjs::String::from_str(ctx.clone(), &error.to_string())
                .map(rquickjs::String::into_value)
                .unwrap_or_else(|_| Value::new_undefined(ctx.clone()))
        };
        if reject.call::<_, ()>((thrown,)).is_err() {
            ctx.catch();
        }
    }
}

/// A tool's JSON value as a JavaScript value: scalars directly, objects and arrays through
/// QuickJS's own JSON parser (the same value `JSON.parse` would give).
fn json_to_js<'js>(ctx: &Ctx<'js>, value: &serde_json::Value) -> rquickjs::Result<Value<'js>> {
    use serde_json::Value as Json;
    Ok(match value {
        Json::Null => Value::new_null(ctx.clone()),
        Json::Bool(flag) => Value::new_bool(ctx.clone(), *flag),
        Json::Number(number) => match number.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(small) => Value::new_int(ctx.clone(), small),
            None => Value::new_number(ctx.clone(), number.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(text) => rquickjs::String::from_str(ctx.clone(), text)?.into_value(),
        Json::Array(_) | Json::Object(_) => {
            let text = serde_json::to_string(value).map_err(|e| {
                rquickjs::Error::new_from_js_message("JSON", "value", e.to_string())
            })?;
            ctx.json_parse(text)?
        }
    })
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

/// Installs `console` and `tools`; the natives (console sink, tool call, pending-calls limit) stay
/// hidden in closures.
const PRELUDE: &str = r#"(function (sink, native, limit) {
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
  const rejected = Promise.reject.bind(Promise);
  const encode = JSON.stringify;
  globalThis.tools = Object.freeze({
    call: (server, tool, args) => {
      try {
        if (typeof server !== "string" || typeof tool !== "string") {
          throw new TypeError("tools.call(server, tool, args): server and tool must be strings");
        }
        const over = limit();
        if (over !== undefined && over !== null) throw new Error(over);
        return native(server, tool, encode(args === undefined ? {} : args));
      } catch (error) {
        return rejected(error);
      }
    },
  });
})"#;

/// Awaits the user's function, calls a returned function, and JSON-encodes the value.
const RUNNER: &str = r#"(async function (main) {
  let value = await main();
  if (typeof value === "function") value = await value();
  return value === undefined ? undefined : JSON.stringify(value);
})"#;

fn describe_error(ctx: &Ctx<'_>, error: rquickjs::Error) -> ScriptError {
    if error.is_exception() {
        thrown(&CaughtError::from_error(ctx, error))
    } else {
        ScriptError::Threw(error.to_string())
    }
}

/// What the script threw, as [`ScriptError::Threw`].
fn thrown(error: &CaughtError<'_>) -> ScriptError {
    ScriptError::Threw(caught_text(error))
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
