//! Code mode on a multi-threaded Tokio runtime, where the sandbox thread polls the host's call
//! futures itself: calls to a real stdio MCP server (the echo fixture), budgets, concurrency,
//! refusals, time limits, JSON values both ways, and the runtime staying responsive.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_codemode::{BoxFuture, ToolCallError, execute};
use warden_codemode::{CodeCatalog, CodeModeHost, CodeModeLimits, ExecutionStatus};
use warden_mcp::ToolIdentity;
use warden_mcp::{CallOptions, McpRuntime, RuntimeOptions, ServerSpec};

/// Reaches the testkit's echo fixture over stdio, as the gate would after its checks.
struct FixtureHost {
    runtime: McpRuntime,
    catalog: Arc<CodeCatalog>,
    _workspace: tempfile::TempDir,
}

impl FixtureHost {
    async fn start() -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let (program, args) = warden_testkit::fixture_command("echo");
        let spec = ServerSpec::stdio("fx", program.to_string_lossy().into_owned()).with_args(args);
        let runtime = McpRuntime::new(vec![spec], RuntimeOptions::new(workspace.path()));
        runtime.connect("fx").await.unwrap();
        Self {
            runtime,
            catalog: Arc::new(CodeCatalog::new(Vec::new(), Vec::new())),
            _workspace: workspace,
        }
    }
}

impl CodeModeHost for FixtureHost {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
        Box::pin(async move {
            let failed = ToolCallError::Failed;
            let arguments: Map<String, Value> = match arguments {
                Value::Object(map) => map,
                other => {
                    return Err(failed(format!("arguments must be an object, not {other}")));
                }
            };
            let outcome = self
                .runtime
                .call_tool(
                    &ToolIdentity::new(server, tool),
                    arguments,
                    CallOptions {
                        cancel,
                        ..CallOptions::default()
                    },
                )
                .await
                .map_err(|error| failed(error.to_string()))?;
            let result =
                serde_json::to_value(&outcome.result).map_err(|e| failed(e.to_string()))?;
            match result["content"][0]["text"].as_str() {
                Some(text) if !outcome.is_error() => Ok(Value::String(text.to_string())),
                _ => Err(failed(format!("the call failed: {result}"))),
            }
        })
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        self.catalog.clone()
    }
}

/// An in-process host: `value` answers `arguments.value`, `echo` the arguments, `slow` the
/// arguments after 5 ms, `hang` only once cancelled (counting those); `write` is refused the way
/// the gate refuses it. Records the most calls in flight at once.
#[derive(Default)]
struct LocalHost {
    running: Mutex<HashMap<String, usize>>,
    peak: AtomicUsize,
    calls: AtomicUsize,
    cancelled: AtomicUsize,
}

impl CodeModeHost for LocalHost {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            {
                let mut running = self.running.lock().unwrap();
                let now = running.entry(server.to_string()).or_default();
                *now += 1;
                self.peak.fetch_max(*now, Ordering::SeqCst);
            }
            let result = match tool {
                "value" => Ok(arguments["value"].clone()),
                "echo" => Ok(arguments),
                "slow" => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok(arguments)
                }
                "hang" => {
                    cancel.cancelled().await;
                    self.cancelled.fetch_add(1, Ordering::SeqCst);
                    Err("cancelled".to_string())
                }
                "write" => Err(format!(
                    "denied: {server}/{tool} is not read-only; code mode calls read-only tools only"
                )),
                other => Err(format!("unknown tool {other:?}")),
            };
            *self.running.lock().unwrap().get_mut(server).unwrap() -= 1;
            result.map_err(ToolCallError::Failed)
        })
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        Arc::new(CodeCatalog::new(Vec::new(), Vec::new()))
    }
}

fn limits() -> CodeModeLimits {
    CodeModeLimits {
        time: Duration::from_secs(20),
        ..CodeModeLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_calls_reach_a_real_server() {
    let host = FixtureHost::start().await;
    let report = execute(
        &host,
        "let n = 0;\n\
         for (let i = 0; i < 1000; i++) {\n\
           const r = await tools.call('fx', 'echo', {text: 'ping ' + i});\n\
           if (r !== 'ping ' + i) throw new Error('bad echo: ' + r);\n\
           n++;\n\
         }\n\
         return n;",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Completed, "{report:?}");
    assert_eq!(report.value.as_deref(), Some("1000"));
    assert_eq!(report.calls, 1000);

    let report = execute(
        &host,
        "const texts = [...Array(20).keys()].map(i => 'p' + i);\n\
         const all = await Promise.all(texts.map(text => tools.call('fx', 'echo', {text})));\n\
         let over;\n\
         try { await tools.call('fx', 'echo', {text: 'one too many'}); } catch (e) { over = e.message; }\n\
         return { same: all.join(',') === texts.join(','), over };",
        CodeModeLimits {
            max_calls: 20,
            max_concurrent_per_server: 4,
            ..limits()
        },
    )
    .await
    .unwrap();
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(value["same"], true, "{report:?}");
    assert_eq!(
        value["over"],
        "code-mode budget exhausted: at most 20 tool calls per execution"
    );

    let report = execute(
        &host,
        "await tools.call('fx', 'no_such_tool', {})",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");
    host.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_cross_both_ways_as_json_would_give_them() {
    let host = LocalHost::default();
    let report = execute(
        &host,
        "const v = (value) => tools.call('s', 'value', {value});\n\
         const out = {\n\
           s: await v('é\\u0000\"x'), i: await v(-3), big: await v(2 ** 40), f: await v(1.5),\n\
           t: await v(true), n: await v(null), a: await v([1, 'two', {three: 3}]),\n\
           o: await v({nested: {deep: [null, false]}}),\n\
         };\n\
         const proto = await tools.call('s', 'echo', JSON.parse('{\"__proto__\": {\"polluted\": 1}}'));\n\
         out.own = Object.keys(proto);\n\
         out.clean = proto.polluted === undefined && ({}).polluted === undefined;\n\
         out.noArgs = await tools.call('s', 'echo');\n\
         out.dropped = await tools.call('s', 'echo', {f: () => 1, u: undefined, d: new Date(0)});\n\
         return out;",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Completed, "{report:?}");
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(
        value,
        json!({
            "s": "é\u{0}\"x", "i": -3, "big": 1_099_511_627_776_u64, "f": 1.5, "t": true, "n": null,
            "a": [1, "two", {"three": 3}], "o": {"nested": {"deep": [null, false]}},
            "own": ["__proto__"], "clean": true,
            "noArgs": {}, "dropped": {"d": "1970-01-01T00:00:00.000Z"}
        })
    );

    let report = execute(
        &host,
        "const cyclic = {}; cyclic.self = cyclic; await tools.call('s', 'echo', cyclic)",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");
    let report = execute(
        &host,
        "const caught = [];\n\
         try { await tools.call(1, 'echo', {}); } catch (e) { caught.push(e.name); }\n\
         try { await tools.call('s', 'echo', () => 1); } catch (e) { caught.push('not JSON'); }\n\
         return caught;",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(
        report.value.as_deref(),
        Some(r#"["TypeError","not JSON"]"#),
        "{report:?}"
    );
    assert_eq!(
        host.calls.load(Ordering::SeqCst),
        11,
        "arguments that are not JSON never reach the host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_and_refusals_hold() {
    let host = LocalHost::default();
    let report = execute(
        &host,
        "const all = await Promise.all([...Array(12).keys()].map(i => tools.call('s', 'slow', {i})));\n\
         let refused;\n\
         try { await tools.call('s', 'write', {}); } catch (e) { refused = e.message; }\n\
         return { order: all.map(r => r.i), refused };",
        CodeModeLimits {
            max_concurrent_per_server: 3,
            ..limits()
        },
    )
    .await
    .unwrap();
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(
        value["order"],
        json!([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    );
    assert_eq!(
        value["refused"],
        "denied: s/write is not read-only; code mode calls read-only tools only"
    );
    assert_eq!(host.peak.load(Ordering::SeqCst), 3);
    assert_eq!(report.calls, 13);

    let report = execute(
        &host,
        "const big = 'x'.repeat(60); const out = [];\n\
         for (let i = 0; i < 3; i++) {\n\
           try { await tools.call('s', 'echo', {big}); out.push('ok'); } catch (e) { out.push(e.message); }\n\
         }\n\
         return out;",
        CodeModeLimits {
            max_result_bytes: 100,
            ..limits()
        },
    )
    .await
    .unwrap();
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(value[0], "ok");
    assert!(
        value[1].as_str().unwrap().contains("past 100 bytes"),
        "{value}"
    );
    assert!(
        value[2]
            .as_str()
            .unwrap()
            .contains("already reached 100 bytes"),
        "{value}"
    );
    assert_eq!(report.result_bytes, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_limit_stops_loops_and_hung_calls_while_other_tasks_run() {
    let host = Arc::new(LocalHost::default());
    let ticks = Arc::new(AtomicUsize::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let short = CodeModeLimits {
        time: Duration::from_millis(400),
        ..CodeModeLimits::default()
    };
    // From a spawned task (on a worker thread), the way a session runs `code_execute`.
    let spawned_host = host.clone();
    let report =
        tokio::spawn(async move { execute(spawned_host.as_ref(), "while (true) {}", short).await })
            .await
            .unwrap()
            .unwrap();
    assert_eq!(report.status, ExecutionStatus::TimedOut, "{report:?}");
    assert!(
        ticks.load(Ordering::SeqCst) > 0,
        "the runtime's other tasks ran during the execution"
    );

    let host = host.as_ref();
    let report = execute(
        host,
        "tools.call('s', 'slow', {}); await tools.call('s', 'hang', {})",
        short,
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::TimedOut, "{report:?}");
    assert!(report.model_text().contains("time limit"));

    let report = execute(host, "await new Promise(() => {})", short)
        .await
        .unwrap();
    assert_eq!(
        report.status,
        ExecutionStatus::TimedOut,
        "a promise nothing will settle"
    );

    let report = execute(
        host,
        "const hoard = []; while (true) { hoard.push(new Array(100000).fill(hoard.length)); }",
        CodeModeLimits {
            memory_bytes: 16 * 1024 * 1024,
            ..limits()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");

    let report = execute(host, "6 * 7", short).await.unwrap();
    assert_eq!(report.value.as_deref(), Some("42"));
    ticker.abort();
}

/// Prints 1,000 sequential calls to the echo fixture from Rust and from one execution, side by
/// side (for comparing the sandbox's per-call cost; asserts only that every call answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_direct_and_code_mode_call_rates() {
    let host = FixtureHost::start().await;
    let started = std::time::Instant::now();
    for i in 0..1000 {
        let text = format!("ping {i}");
        let answer = host
            .call(
                "fx",
                "echo",
                json!({ "text": text }),
                tokio_util::sync::CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(answer, Value::String(text));
    }
    let direct = started.elapsed();
    let report = execute(
        &host,
        "for (let i = 0; i < 1000; i++) { const r = await tools.call('fx', 'echo', {text: 'ping ' + i}); if (r !== 'ping ' + i) throw new Error(r); } return 1000;",
        limits(),
    )
    .await
    .unwrap();
    assert_eq!(report.value.as_deref(), Some("1000"), "{report:?}");
    println!(
        "1,000 echo calls: direct {:.1} ms, code mode {:.1} ms, ratio {:.3}",
        direct.as_secs_f64() * 1e3,
        report.elapsed.as_secs_f64() * 1e3,
        direct.as_secs_f64() / report.elapsed.as_secs_f64()
    );
    host.runtime.shutdown().await;
}

/// A host whose caller cancels after a moment.
struct CancellingHost {
    inner: LocalHost,
    cancel: tokio_util::sync::CancellationToken,
}

impl CancellingHost {
    fn new() -> Self {
        Self {
            inner: LocalHost::default(),
            cancel: tokio_util::sync::CancellationToken::new(),
        }
    }
}

impl CodeModeHost for CancellingHost {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
        self.inner.call(server, tool, arguments, cancel)
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        self.inner.catalog()
    }

    fn cancellation(&self) -> Option<tokio_util::sync::CancellationToken> {
        Some(self.cancel.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_cancellation_stops_busy_and_waiting_scripts() {
    for script in [
        "let n = 0; while (true) { n += 1; }",
        "await tools.call('s', 'hang', {})",
    ] {
        let host = CancellingHost::new();
        let cancel = host.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let report = execute(&host, script, limits()).await.unwrap();
        assert_eq!(
            report.status,
            ExecutionStatus::Cancelled,
            "{script}: {report:?}"
        );
        assert!(report.model_text().contains("cancelled"), "{report:?}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{script} ran on after the cancellation (limit 20 s)"
        );
    }
    // Not cancelled: runs as before.
    let host = CancellingHost::new();
    let report = execute(&host, "6 * 7", limits()).await.unwrap();
    assert_eq!(report.value.as_deref(), Some("42"));
}

/// Here the sandbox thread polls the calls itself: calls the script left running are cancelled
/// through their token and run to their end before `execute` returns, however the script ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_left_running_are_cancelled_and_finished_not_dropped() {
    let endings = [
        (
            "tools.call('s', 'hang', {}); return 1",
            ExecutionStatus::Completed,
        ),
        (
            "tools.call('s', 'hang', {}); throw new Error('boom')",
            ExecutionStatus::Threw,
        ),
        (
            "await tools.call('s', 'hang', {})",
            ExecutionStatus::TimedOut,
        ),
    ];
    for (script, status) in endings {
        let host = LocalHost::default();
        let limits = CodeModeLimits {
            time: Duration::from_millis(300),
            ..limits()
        };
        let report = execute(&host, script, limits).await.unwrap();
        assert_eq!(report.status, status, "{script}: {report:?}");
        assert_eq!(
            host.cancelled.load(Ordering::SeqCst),
            1,
            "{script}: the call was dropped instead of cancelled"
        );
    }
    let host = CancellingHost::new();
    let cancel = host.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let report = execute(&host, "await tools.call('s', 'hang', {})", limits())
        .await
        .unwrap();
    assert_eq!(report.status, ExecutionStatus::Cancelled, "{report:?}");
    assert_eq!(host.inner.cancelled.load(Ordering::SeqCst), 1);
}

/// The same bound on pending calls' arguments on this path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_call_arguments_are_bounded() {
    let host = LocalHost::default();
    let limits = CodeModeLimits {
        max_pending_argument_bytes: 8 * 1024 * 1024,
        ..limits()
    };
    let script = "const big = 'x'.repeat(1024 * 1024); const calls = [];
        for (let i = 0; i < 1000; i++) {
            calls.push(tools.call('s', 'hang', {big}));
            await tools.call('s', 'echo', {});
        }
        return await Promise.all(calls)";
    let report = execute(&host, script, limits).await.unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");
    assert!(
        report
            .error
            .as_deref()
            .is_some_and(|error| error.contains("code-mode memory limit")),
        "{report:?}"
    );
    // Seven calls of 1 MiB (and a bit) fit in 8 MiB; the eighth is refused and ends the run.
    assert_eq!(host.cancelled.load(Ordering::SeqCst), 7);
}
