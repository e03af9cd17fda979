//! Code mode: the QuickJS sandbox's limits, budgets, console capture, JSON return values and
//! refusals, and `code_search`'s signatures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_codemode::{self as code_mode, BoxFuture, ToolCallError, execute};
use warden_codemode::{
    Callability, CodeCatalog, CodeModeHost, CodeModeLimits, CodeSearchRequest, CodeTool,
    ExecutionStatus,
};

/// A host that echoes its arguments for `echo`, refuses `write` the way the gate does, answers
/// `hang` only when the call is cancelled (counting those), and records the highest number of
/// concurrent calls per server.
struct EchoHost {
    catalog: Arc<CodeCatalog>,
    running: Mutex<HashMap<String, usize>>,
    peak: AtomicUsize,
    calls: AtomicUsize,
    /// `hang` calls that saw their cancellation and ended.
    cancelled: AtomicUsize,
    cancel: Option<tokio_util::sync::CancellationToken>,
}

impl EchoHost {
    fn new() -> Self {
        let echo = CodeTool::from_definition(
            "mcp__fixture__echo",
            "fixture",
            &json!({"name": "echo", "description": "Echo the arguments back.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "description": "What to echo"}}, "required": ["text"]},
                "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}),
            Callability::Callable,
        );
        let write = CodeTool::from_definition(
            "mcp__fixture__write",
            "fixture",
            &json!({"name": "write", "description": "Write a record to the ledger.",
                "inputSchema": {"type": "object", "properties": {"record": {"type": "string"}}}}),
            Callability::from_classes(warden_policy::CapabilitySet::of(&[
                warden_policy::CapabilityClass::Write,
            ])),
        );
        Self {
            catalog: Arc::new(CodeCatalog::new(vec![echo, write], Vec::new())),
            running: Mutex::new(HashMap::new()),
            peak: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            cancel: None,
        }
    }
}

impl CodeModeHost for EchoHost {
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
                "echo" => {
                    tokio::task::yield_now().await;
                    Ok(arguments)
                }
                "slow_echo" => {
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
        self.catalog.clone()
    }

    fn cancellation(&self) -> Option<tokio_util::sync::CancellationToken> {
        self.cancel.clone()
    }
}

fn limits() -> CodeModeLimits {
    CodeModeLimits {
        time: Duration::from_secs(10),
        ..CodeModeLimits::default()
    }
}

async fn run(code: &str) -> warden_codemode::ExecutionReport {
    execute(&EchoHost::new(), code, limits()).await.unwrap()
}

#[tokio::test]
async fn pure_computation_returns_json() {
    let report = run("1 + 2").await;
    assert_eq!(report.status, ExecutionStatus::Completed, "{report:?}");
    assert_eq!(report.value.as_deref(), Some("3"));

    let report =
        run("const xs = [1, 2, 3];\nreturn { sum: xs.reduce((a, b) => a + b), s: 'é' };").await;
    assert_eq!(report.value.as_deref(), Some(r#"{"sum":6,"s":"é"}"#));

    let report = run("async () => { const v = await Promise.resolve(41); return v + 1; }").await;
    assert_eq!(report.value.as_deref(), Some("42"));

    let report = run("let x = 1;").await;
    assert_eq!(report.status, ExecutionStatus::Completed);
    assert_eq!(report.value, None, "no return gives undefined");
    assert!(report.model_text().starts_with("result: undefined"));
}

#[tokio::test]
async fn console_output_is_captured() {
    let report =
        run("console.log('hello', {a: 1}, [2]); console.error('bad'); return 'done'").await;
    assert_eq!(report.logs, "hello {\"a\":1} [2]\n[error] bad");
    assert_eq!(report.value.as_deref(), Some("\"done\""));
    assert!(report.model_text().contains("console:\nhello"));
}

#[tokio::test]
async fn no_filesystem_network_process_or_timers() {
    let report = run(
        "[typeof setTimeout, typeof setInterval, typeof require, typeof process, typeof fetch, typeof std, typeof os, typeof XMLHttpRequest, typeof Deno]",
    )
    .await;
    assert_eq!(
        report.value.as_deref(),
        Some(
            r#"["undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined"]"#
        )
    );
}

#[tokio::test]
async fn syntax_and_runtime_errors_are_reported() {
    let report = run("return (").await;
    assert_eq!(report.status, ExecutionStatus::Threw);
    assert!(
        report.error.as_deref().unwrap().contains("SyntaxError"),
        "{report:?}"
    );

    let report = run("throw new TypeError('nope')").await;
    assert_eq!(report.status, ExecutionStatus::Threw);
    assert!(
        report
            .error
            .as_deref()
            .unwrap()
            .starts_with("TypeError: nope"),
        "{report:?}"
    );

    let report = run("const o = {}; o.self = o; return o;").await;
    assert_eq!(
        report.status,
        ExecutionStatus::Threw,
        "cyclic values cannot be JSON"
    );
}

#[tokio::test]
async fn infinite_loop_is_stopped_and_the_host_is_fine() {
    let host = EchoHost::new();
    let short = CodeModeLimits {
        time: Duration::from_millis(300),
        ..CodeModeLimits::default()
    };
    let report = execute(&host, "while (true) {}", short).await.unwrap();
    assert_eq!(report.status, ExecutionStatus::TimedOut, "{report:?}");
    assert!(report.model_text().contains("time limit"));

    let report = execute(
        &host,
        "for (;;) { try { while (true) {} } catch (e) {} }",
        short,
    )
    .await
    .unwrap();
    assert_eq!(
        report.status,
        ExecutionStatus::TimedOut,
        "catching cannot escape the limit"
    );

    let report = execute(&host, "await tools.call('fixture', 'hang', {})", short)
        .await
        .unwrap();
    assert_eq!(
        report.status,
        ExecutionStatus::TimedOut,
        "a hung tool call is cut off too"
    );

    let report = execute(&host, "6 * 7", short).await.unwrap();
    assert_eq!(report.value.as_deref(), Some("42"));
}

#[tokio::test]
async fn memory_bomb_is_stopped_and_the_host_is_fine() {
    let host = EchoHost::new();
    let small = CodeModeLimits {
        memory_bytes: 16 * 1024 * 1024,
        ..limits()
    };
    let report = execute(
        &host,
        "const hoard = []; while (true) { hoard.push(new Array(100000).fill(hoard.length)); }",
        small,
    )
    .await
    .unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");
    assert!(
        report.error.as_deref().unwrap().contains("out of memory"),
        "{report:?}"
    );

    let report = execute(&host, "let s = 'x'; while (true) { s = s + s; }", small)
        .await
        .unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");

    let report = execute(&host, "function f(n) { return f(n + 1) + 1; } f(0)", small)
        .await
        .unwrap();
    assert_eq!(
        report.status,
        ExecutionStatus::Threw,
        "deep recursion throws: {report:?}"
    );

    let report = execute(&host, "'still ' + 'fine'", small).await.unwrap();
    assert_eq!(report.value.as_deref(), Some("\"still fine\""));
}

#[tokio::test]
async fn tool_calls_reach_the_host_and_refusals_are_thrown() {
    let report = run(
        "const r = await tools.call('fixture', 'echo', {text: 'hi'});\n\
         let refused;\n\
         try { await tools.call('fixture', 'write', {record: 'x'}); } catch (e) { refused = e.message; }\n\
         return { r, refused };",
    )
    .await;
    assert_eq!(report.status, ExecutionStatus::Completed, "{report:?}");
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(value["r"], json!({"text": "hi"}));
    assert_eq!(
        value["refused"],
        "denied: fixture/write is not read-only; code mode calls read-only tools only"
    );
    assert_eq!(report.calls, 2);
    assert_eq!(report.result_bytes, r#"{"text":"hi"}"#.len());

    let report = run("await tools.call('fixture', 'write', {})").await;
    assert_eq!(report.status, ExecutionStatus::Threw);
    assert!(report.error.unwrap().contains("not read-only"));
}

#[tokio::test]
async fn call_budget_is_enforced() {
    let host = EchoHost::new();
    let tight = CodeModeLimits {
        max_calls: 3,
        ..limits()
    };
    let report = execute(
        &host,
        "const out = [];\n\
         for (let i = 0; i < 5; i++) {\n\
           try { out.push((await tools.call('fixture', 'echo', {i})).i); } catch (e) { out.push(e.message); }\n\
         }\n\
         return out;",
        tight,
    )
    .await
    .unwrap();
    let value: Value = serde_json::from_str(report.value.as_deref().unwrap()).unwrap();
    assert_eq!(value[0], 0);
    assert_eq!(value[2], 2);
    assert_eq!(
        value[3],
        "code-mode budget exhausted: at most 3 tool calls per execution"
    );
    assert_eq!(report.calls, 3);
    assert_eq!(
        host.calls.load(Ordering::SeqCst),
        3,
        "refused calls never reach the host"
    );
}

#[tokio::test]
async fn result_byte_budget_is_enforced() {
    let host = EchoHost::new();
    let tight = CodeModeLimits {
        max_result_bytes: 100,
        ..limits()
    };
    let report = execute(
        &host,
        "const big = 'x'.repeat(60); const out = [];\n\
         for (let i = 0; i < 3; i++) {\n\
           try { await tools.call('fixture', 'echo', {big}); out.push('ok'); } catch (e) { out.push(e.message); }\n\
         }\n\
         return out;",
        tight,
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
}

#[tokio::test]
async fn concurrent_calls_per_server_are_bounded() {
    let host = EchoHost::new();
    let two = CodeModeLimits {
        max_concurrent_per_server: 2,
        ..limits()
    };
    let report = execute(
        &host,
        "const all = await Promise.all([...Array(10).keys()].map(i => tools.call('fixture', 'slow_echo', {i})));\n\
         return all.map(r => r.i);",
        two,
    )
    .await
    .unwrap();
    assert_eq!(
        report.value.as_deref(),
        Some("[0,1,2,3,4,5,6,7,8,9]"),
        "{report:?}"
    );
    assert_eq!(host.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn return_value_and_console_are_capped() {
    let host = EchoHost::new();
    let small = CodeModeLimits {
        max_return_bytes: 50,
        max_log_bytes: 20,
        ..limits()
    };
    let report = execute(
        &host,
        "for (let i = 0; i < 10; i++) console.log('line ' + i); return 'y'.repeat(500)",
        small,
    )
    .await
    .unwrap();
    assert!(report.value_truncated);
    assert_eq!(report.value.as_deref().unwrap().len(), 50);
    assert!(report.logs_truncated);
    assert!(report.logs.len() <= 20);
    assert!(report.model_text().contains("[truncated]"));
}

#[tokio::test]
async fn probe_reports_available() {
    code_mode::probe(CodeModeLimits::default()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_cold_start_and_call_rate() {
    let host = EchoHost::new();
    let mut samples = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let report = execute(&host, "1", limits()).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(report.value.as_deref(), Some("1"));
    }
    samples.sort();
    let p50 = samples[samples.len() / 2];

    let started = Instant::now();
    let report = execute(
        &host,
        "let n = 0; for (let i = 0; i < 1000; i++) { n += (await tools.call('fixture', 'echo', {i})).i; } return n;",
        limits(),
    )
    .await
    .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.value.as_deref(), Some("499500"), "{report:?}");
    assert_eq!(report.calls, 1000);
    println!(
        "code mode: cold start (fresh runtime + context + trivial script) p50 {:.3} ms; 1,000 sequential calls in {:.1} ms = {:.0} calls/s",
        p50.as_secs_f64() * 1000.0,
        elapsed.as_secs_f64() * 1000.0,
        1000.0 / elapsed.as_secs_f64()
    );
}

#[test]
fn code_search_offers_callable_tools_as_signatures() {
    let host = EchoHost::new();
    let catalog = host.catalog();
    let browse = catalog.search(&CodeSearchRequest::default());
    assert!(
        browse.contains("- fixture: 2 tools, 1 callable"),
        "{browse}"
    );

    let found = catalog.search(&CodeSearchRequest {
        query: Some("echo text".to_string()),
        ..CodeSearchRequest::default()
    });
    assert!(
        found.starts_with(
            "/** Echo the arguments back. */\ntools.call(\"fixture\", \"echo\", args: {\n  text: string; // What to echo\n}): Promise<{ text: string }>"
        ),
        "{found}"
    );

    let described = catalog.search(&CodeSearchRequest {
        tools: vec![
            "fixture/write".to_string(),
            "mcp__fixture__echo".to_string(),
        ],
        ..CodeSearchRequest::default()
    });
    assert!(
        described.contains("tools.call(\"fixture\", \"echo\""),
        "{described}"
    );
    assert!(
        !described.contains("tools.call(\"fixture\", \"write\""),
        "{described}"
    );
    assert!(
        described
            .contains("- fixture/write: classified write; code mode calls read-only tools only"),
        "{described}"
    );

    let listed = catalog.search(&CodeSearchRequest {
        server: Some("nope".to_string()),
        ..CodeSearchRequest::default()
    });
    assert!(listed.starts_with("No server named \"nope\""));

    let empty = CodeCatalog::new(Vec::new(), Vec::new());
    assert!(
        empty
            .search(&CodeSearchRequest::default())
            .contains("pure JavaScript")
    );
}

#[tokio::test]
async fn works_with_zero_tools() {
    struct Nothing(Arc<CodeCatalog>);
    impl CodeModeHost for Nothing {
        fn call<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Value,
            _: tokio_util::sync::CancellationToken,
        ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
            Box::pin(async { Err(ToolCallError::Failed("unknown tool".to_string())) })
        }
        fn catalog(&self) -> Arc<CodeCatalog> {
            self.0.clone()
        }
    }
    let host = Nothing(Arc::new(CodeCatalog::new(Vec::new(), Vec::new())));
    let report = execute(&host, "[1,2,3].map(x => x * x)", limits())
        .await
        .unwrap();
    assert_eq!(report.value.as_deref(), Some("[1,4,9]"));
}

/// On a current-thread runtime (calls handed over channels), the caller's cancellation stops a
/// busy script and one waiting on a call that never answers, long before the time limit.
#[tokio::test]
async fn the_callers_cancellation_stops_the_execution() {
    for script in [
        "let n = 0; while (true) { n += 1; }",
        "await tools.call('fixture', 'hang', {})",
    ] {
        let cancel = tokio_util::sync::CancellationToken::new();
        let host = EchoHost {
            cancel: Some(cancel.clone()),
            ..EchoHost::new()
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        });
        let report = execute(&host, script, limits()).await.unwrap();
        assert_eq!(
            report.status,
            ExecutionStatus::Cancelled,
            "{script}: {report:?}"
        );
        assert!(report.elapsed < Duration::from_secs(5), "{report:?}");
    }
}

/// On a current-thread runtime (calls handed over channels), calls the script left running are
/// cancelled through their token and run to their end before `execute` returns, however the
/// script ended: returned, threw, timed out or was cancelled.
#[tokio::test]
async fn calls_left_running_are_cancelled_and_finished_not_dropped() {
    let endings = [
        (
            "tools.call('fixture', 'hang', {}); return 1",
            ExecutionStatus::Completed,
        ),
        (
            "tools.call('fixture', 'hang', {}); throw new Error('boom')",
            ExecutionStatus::Threw,
        ),
        (
            "await tools.call('fixture', 'hang', {})",
            ExecutionStatus::TimedOut,
        ),
    ];
    for (script, status) in endings {
        let host = EchoHost::new();
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
    let cancel = tokio_util::sync::CancellationToken::new();
    let host = EchoHost {
        cancel: Some(cancel.clone()),
        ..EchoHost::new()
    };
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let report = execute(&host, "await tools.call('fixture', 'hang', {})", limits())
        .await
        .unwrap();
    assert_eq!(report.status, ExecutionStatus::Cancelled, "{report:?}");
    assert_eq!(host.cancelled.load(Ordering::SeqCst), 1);
}

/// Arguments of calls not yet answered are held outside the QuickJS heap, so they have a limit
/// of their own: a script leaving a thousand calls of 1 MiB each pending is stopped by it (even
/// though it catches each call's error), with an error naming it; the calls it had running are
/// cancelled.
#[tokio::test]
async fn pending_call_arguments_are_bounded() {
    let host = EchoHost::new();
    let bounded = CodeModeLimits {
        max_pending_argument_bytes: 8 * 1024 * 1024,
        ..limits()
    };
    let script = "const big = 'x'.repeat(1024 * 1024); const calls = [];
        for (let i = 0; i < 1000; i++) {
            calls.push(tools.call('fixture', 'hang', {big}).catch(e => String(e)));
            await tools.call('fixture', 'echo', {});
        }
        return await Promise.all(calls)";
    let report = execute(&host, script, bounded).await.unwrap();
    assert_eq!(report.status, ExecutionStatus::Threw, "{report:?}");
    let error = report.error.unwrap_or_default();
    assert!(
        error.contains("code-mode memory limit") && error.contains(&(8 * 1024 * 1024).to_string()),
        "{error}"
    );
    // Seven calls of 1 MiB (and a bit) fit in 8 MiB; the eighth is refused and ends the run.
    // The calls that were running were cancelled, not left behind.
    assert_eq!(host.cancelled.load(Ordering::SeqCst), 7);

    // Within the limit, the same calls run.
    let report = execute(
        &EchoHost::new(),
        "const big = 'x'.repeat(1024 * 1024); const r = await Promise.all([1, 2, 3].map(() => tools.call('fixture', 'echo', {big}))); return r.length",
        bounded,
    )
    .await
    .unwrap();
    assert_eq!(report.value.as_deref(), Some("3"), "{report:?}");
}
