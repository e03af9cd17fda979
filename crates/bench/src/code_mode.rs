//! Code mode: 1,000 read-only calls in one `code_execute` against the echo fixture, side by side
//! with the same calls from the gate directly, and the cold start of a sandbox context.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_codemode::{
    BoxFuture, Callability, CodeCatalog, CodeModeHost, CodeModeLimits, CodeTool, ExecutionStatus,
    execute,
};
use warden_host::{CallContext, Host};
use warden_policy::{CallSurface, Decision};

use crate::env::{BenchEnv, BenchSession};
use crate::gate_calls::{SERVER, gate_call};
use crate::report::{Row, Target};
use crate::stats::{median, percentile};

/// The sandbox's tools reach the bench session's gate with source `code-mode`, as in a session.
struct GateHost {
    host: Arc<Host>,
    catalog: Arc<CodeCatalog>,
}

impl CodeModeHost for GateHost {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<Value, warden_codemode::ToolCallError>> {
        Box::pin(async move {
            let public_name = self
                .host
                .public_name(server, tool)
                .unwrap_or_else(|| warden_mcp::public_name_for(server, tool));
            let context = CallContext::new(CallSurface::CodeMode, cancel);
            let outcome = self.host.call_with(context, &public_name, arguments).await;
            match (&outcome.decision, &outcome.output) {
                (Decision::Allowed, Some(output)) if !output.is_error => {
                    Ok(Value::String(output.text.clone()))
                }
                _ => Err(warden_codemode::ToolCallError::Failed(outcome.model_text())),
            }
        })
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        self.catalog.clone()
    }
}

/// A host with no tools, for the cold-start figure.
struct NoTools(Arc<CodeCatalog>);

impl CodeModeHost for NoTools {
    fn call<'a>(
        &'a self,
        _server: &'a str,
        _tool: &'a str,
        _arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<Value, warden_codemode::ToolCallError>> {
        Box::pin(async {
            Err(warden_codemode::ToolCallError::Failed(
                "no tools".to_owned(),
            ))
        })
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        self.0.clone()
    }
}

/// Iteration counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CodeModeCounts {
    /// Tool calls in the one execution (at most the per-execution budget, 1,000).
    pub calls: usize,
    /// Executions of the calls benchmark (the median is reported).
    pub repeats: usize,
    /// Cold starts measured.
    pub cold_starts: usize,
}

pub(crate) async fn run(env: &BenchEnv, counts: CodeModeCounts) -> anyhow::Result<Vec<Row>> {
    let session = BenchSession::open(vec![env.fixture_spec(SERVER, "echo", &[])])?;
    session.connect(SERVER).await?;
    let host = session.host.clone();
    let tools = host.server_tools(SERVER).await?;
    let catalog = CodeCatalog::new(
        tools
            .iter()
            .map(|visible| {
                CodeTool::from_mcp(
                    &visible.tool,
                    &visible.descriptor.public_name,
                    Callability::from_classes(visible.descriptor.classes()),
                )
            })
            .collect(),
        Vec::new(),
    );
    let code_host = GateHost {
        host: host.clone(),
        catalog: Arc::new(catalog),
    };
    let script = format!(
        "let n = 0; for (let i = 0; i < {}; i++) {{ const r = await tools.call('{SERVER}', 'echo', {{text: 'ping'}}); if (r !== 'ping') throw new Error('bad echo: ' + r); n++; }} return n;",
        counts.calls
    );
    let limits = CodeModeLimits::default();
    // Warm both paths once.
    for _ in 0..50 {
        gate_call(&host, CallSurface::CodeMode).await?;
    }
    execute(&code_host, "return 1;", limits).await?;

    let mut in_code = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..counts.repeats.max(1) {
        let started = Instant::now();
        for _ in 0..counts.calls {
            gate_call(&host, CallSurface::CodeMode).await?;
        }
        direct.push(started.elapsed());
        let report = execute(&code_host, &script, limits).await?;
        if report.status != ExecutionStatus::Completed
            || report.value.as_deref() != Some(&counts.calls.to_string())
        {
            bail!(
                "the code-mode script did not complete: {}",
                report.model_text()
            );
        }
        in_code.push(report.elapsed);
    }
    session.host.shutdown().await;

    let per_second = |elapsed: Duration| counts.calls as f64 / elapsed.as_secs_f64().max(1e-9);
    let code_rate = per_second(median(&in_code));
    let direct_rate = per_second(median(&direct));

    let empty = NoTools(Arc::new(CodeCatalog::new(Vec::new(), Vec::new())));
    let mut cold = Vec::with_capacity(counts.cold_starts);
    execute(&empty, "1 + 1", limits).await?;
    for _ in 0..counts.cold_starts {
        let started = Instant::now();
        let report = execute(&empty, "1 + 1", limits).await?;
        cold.push(started.elapsed());
        if report.value.as_deref() != Some("2") {
            bail!(
                "the cold-start script did not return 2: {}",
                report.model_text()
            );
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(vec![
        Row::measured(
            "code_mode_1000_calls",
            &format!(
                "code mode: {} read-only calls in one execution",
                counts.calls
            ),
            "calls/s",
            code_rate,
            Target::RatioAtLeast(0.80),
        )
        .against("the same calls from the gate directly", direct_rate)
        .with_note(format!(
            "median of {} executions; one execution {:.1} ms",
            in_code.len(),
            ms(median(&in_code))
        )),
        Row::measured(
            "code_mode_cold_start_p50_ms",
            "code mode: a fresh sandbox running `1 + 1`, p50",
            "ms",
            ms(median(&cold)),
            Target::ValueAtMost(1.0),
        )
        .with_note(format!(
            "{} starts; p95 {:.3} ms (thread, runtime, context, script)",
            cold.len(),
            ms(percentile(&cold, 95.0))
        )),
    ])
}
