//! A 20 MiB tool result end to end through the gate (the `big-result` fixture): the artifact is
//! written and a preview returned. Each run happens in a fresh child process (`warden-bench
//! --child big-result`), so its peak RSS growth is the call's alone.

use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_policy::{CallSurface, Decision};

use crate::env::{BenchEnv, BenchSession, memory_of};
use crate::report::{Row, Target};
use crate::stats::median_f64;

/// The fixture's default result size.
pub(crate) const RESULT_BYTES: u64 = 20 * 1024 * 1024;

/// What one child measured.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct BigResultRun {
    pub seconds: f64,
    /// `VmRSS` just before the call.
    pub rss_before: u64,
    /// `VmHWM` just after it.
    pub peak_after: u64,
    /// The text the model would read.
    pub preview_bytes: usize,
    pub artifact_bytes: u64,
}

/// Where the child sends the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// Through the gate (`Host::call`): the figure of the row.
    Gate,
    /// To the MCP runtime only (no gate, no result conversion): for the breakdown.
    Runtime,
}

/// The child's side: one session, one call, one JSON line on stdout.
pub(crate) async fn child(env: &BenchEnv, path: Path) -> anyhow::Result<()> {
    let session = BenchSession::open_allowing(
        vec![env.fixture_spec("big", "big-result", &[])],
        &["mcp__big__*"],
    )?;
    session.connect("big").await?;
    let (rss_before, _) = memory_of("self").context("reading /proc/self/status")?;
    if path == Path::Runtime {
        // The runtime on its own (a host keeps its runtime private): the same server, no gate.
        let runtime = env.raw_runtime(env.fixture_spec("big", "big-result", &[]));
        runtime
            .connect("big")
            .await
            .context("connecting the runtime")?;
        let (rss_before, _) = memory_of("self").context("reading /proc/self/status")?;
        let started = Instant::now();
        let outcome = runtime
            .call_tool(
                &warden_mcp::ToolIdentity::new("big", "big_result"),
                serde_json::Map::new(),
                warden_mcp::CallOptions {
                    progress: None,
                    cancel: CancellationToken::new(),
                    meta: None,
                },
            )
            .await
            .context("the runtime call")?;
        let seconds = started.elapsed().as_secs_f64();
        let (_, peak_after) = memory_of("self").context("reading /proc/self/status")?;
        let received: usize = serde_json::to_string(&outcome.result)?.len();
        let run = BigResultRun {
            seconds,
            rss_before,
            peak_after,
            preview_bytes: received,
            artifact_bytes: 0,
        };
        println!("{}", serde_json::to_string(&run)?);
        return Ok(());
    }
    let started = Instant::now();
    let outcome = session
        .host
        .call(
            CallSurface::Agent,
            "mcp__big__big_result",
            json!({}),
            CancellationToken::new(),
        )
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let (_, peak_after) = memory_of("self").context("reading /proc/self/status")?;
    let Some(output) = outcome
        .output
        .as_ref()
        .filter(|_| outcome.decision == Decision::Allowed)
    else {
        bail!("the big result was not delivered: {}", outcome.model_text());
    };
    let artifact_bytes = artifact_size(output.content.as_ref());
    if artifact_bytes < RESULT_BYTES {
        bail!(
            "no artifact of {RESULT_BYTES} bytes was written (found {artifact_bytes}); the model read {} bytes",
            output.text.len()
        );
    }
    session.host.shutdown().await;
    let run = BigResultRun {
        seconds,
        rss_before,
        peak_after,
        preview_bytes: output.text.len(),
        artifact_bytes,
    };
    println!("{}", serde_json::to_string(&run)?);
    Ok(())
}

/// Sizes of the files the converted result names as artifacts (any `path` string that exists).
fn artifact_size(content: Option<&serde_json::Value>) -> u64 {
    let mut total = 0;
    let mut stack: Vec<&serde_json::Value> = content.into_iter().collect();
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    if key == "path"
                        && let Some(path) = inner.as_str()
                        && let Ok(meta) = std::fs::metadata(path)
                    {
                        total += meta.len();
                    } else {
                        stack.push(inner);
                    }
                }
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    total
}

fn run_child(kind: &str) -> anyhow::Result<BigResultRun> {
    let me = std::env::current_exe().context("locating warden-bench")?;
    let output = std::process::Command::new(&me)
        .args(["--child", kind])
        .stdin(std::process::Stdio::null())
        .output()
        .context("running the big-result child")?;
    if !output.status.success() {
        bail!(
            "the big-result child failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("reading the big-result child's JSON")
}

/// The parent's side: `repeats` children, medians.
pub(crate) fn run(repeats: usize) -> anyhow::Result<Vec<Row>> {
    let runtime_only = run_child("big-result-runtime")?;
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        runs.push(run_child("big-result")?);
    }
    let seconds = median_f64(&runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
    let growth = median_f64(
        &runs
            .iter()
            .map(|r| r.peak_after.saturating_sub(r.rss_before) as f64)
            .collect::<Vec<_>>(),
    );
    let mib = |bytes: f64| bytes / (1024.0 * 1024.0);
    let preview = runs.first().map(|r| r.preview_bytes).unwrap_or_default();
    Ok(vec![
        Row::measured(
            "big_result_20mib_seconds",
            "a 20 MiB tool result end to end (artifact written, preview returned)",
            "s",
            seconds,
            Target::ValueAtMost(0.5),
        )
        .with_note(format!(
            "median of {}; the model reads {preview} bytes",
            runs.len()
        )),
        Row::measured(
            "big_result_20mib_rss_growth_mib",
            "peak RSS growth during the 20 MiB call",
            "MiB",
            mib(growth),
            Target::RatioAtMost(2.0),
        )
        .against("the result's size", mib(RESULT_BYTES as f64))
        .with_note(format!(
            "VmHWM after the call minus VmRSS before it, in a fresh process; the MCP runtime alone (no gate, no conversion): {:.1} MiB, {:.3} s",
            mib(runtime_only.peak_after.saturating_sub(runtime_only.rss_before) as f64),
            runtime_only.seconds
        )),
    ])
}
