//! Tool calls through the gate (`Host::call`, source agent, `auto` mode) to the echo fixture over
//! stdio, side by side with a raw rmcp client and the TypeScript SDK client on the same fixture.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_host::Host;
use warden_policy::{CallSurface, Decision};

use crate::env::{BenchEnv, BenchSession, RawClient, own_cpu_time};
use crate::report::{Row, Target};
use crate::stats::{CpuTime, Series};

/// The fixture's name in the session; its echo tool's public name.
pub(crate) const SERVER: &str = "fx";
pub(crate) const ECHO: &str = "mcp__fx__echo";

/// Iteration counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateCallCounts {
    /// Sequential calls per client (split over `rounds`).
    pub sequential: usize,
    /// Calls in the concurrent series, spread over `callers`.
    pub concurrent: usize,
    pub callers: usize,
    /// Sequential and concurrent series alternate gate / raw this many times.
    pub rounds: usize,
    pub warmup: usize,
    /// Calls made by the TypeScript SDK client.
    pub typescript: usize,
}

fn echo_arguments() -> Value {
    json!({"text": "ping"})
}

/// Where the time of a gate call goes: the gate's own figures, summed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Breakdown {
    /// Whole calls as the caller saw them.
    total: Duration,
    /// The gate's own clock: resolve to the end of PostToolUse hooks.
    gate: Duration,
    /// Dispatch: the runtime's call and the result conversion.
    execution: Duration,
    calls: u32,
}

impl Breakdown {
    fn mean_us(&self, part: Duration) -> f64 {
        part.as_secs_f64() * 1e6 / f64::from(self.calls.max(1))
    }

    /// `layers before/after dispatch · dispatch · audit and outcome`, mean µs per call.
    fn describe(&self) -> String {
        format!(
            "per call (mean): gate layers {:.1} µs, dispatch {:.1} µs, audit record + outcome {:.1} µs",
            self.mean_us(self.gate.saturating_sub(self.execution)),
            self.mean_us(self.execution),
            self.mean_us(self.total.saturating_sub(self.gate)),
        )
    }
}

/// One call through the gate; fails unless it was allowed and echoed.
pub(crate) async fn gate_call(
    host: &Host,
    source: CallSurface,
) -> anyhow::Result<(Duration, Duration)> {
    let outcome = host
        .call(source, ECHO, echo_arguments(), CancellationToken::new())
        .await;
    match &outcome.output {
        Some(output) if outcome.decision == Decision::Allowed && output.text == "ping" => Ok((
            outcome.gate_duration,
            outcome.execution_duration.unwrap_or_default(),
        )),
        _ => bail!("the gate did not echo: {}", outcome.model_text()),
    }
}

pub(crate) async fn gate_sequential(
    host: &Host,
    calls: usize,
    breakdown: &mut Breakdown,
) -> anyhow::Result<Series> {
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for _ in 0..calls {
        let before = Instant::now();
        let (gate, execution) = gate_call(host, CallSurface::Agent).await?;
        let took = before.elapsed();
        latencies.push(took);
        breakdown.total += took;
        breakdown.gate += gate;
        breakdown.execution += execution;
        breakdown.calls += 1;
    }
    Ok(Series {
        latencies,
        wall: started.elapsed(),
    })
}

/// The same call to warden's MCP runtime directly (no gate, no result conversion): splits the
/// dispatch time into the runtime's share and the conversion's.
pub(crate) async fn runtime_sequential(
    runtime: &warden_mcp::McpRuntime,
    calls: usize,
) -> anyhow::Result<Series> {
    let identity = warden_mcp::ToolIdentity::new(SERVER, "echo");
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for _ in 0..calls {
        let arguments = match echo_arguments() {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let before = Instant::now();
        runtime
            .call_tool(
                &identity,
                arguments,
                warden_mcp::CallOptions {
                    progress: None,
                    cancel: CancellationToken::new(),
                    meta: None,
                },
            )
            .await
            .context("runtime call")?;
        latencies.push(before.elapsed());
    }
    Ok(Series {
        latencies,
        wall: started.elapsed(),
    })
}

async fn raw_call(client: &RawClient) -> anyhow::Result<()> {
    crate::env::echo_call(&client.service).await
}

pub(crate) async fn raw_sequential(client: &RawClient, calls: usize) -> anyhow::Result<Series> {
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for _ in 0..calls {
        let before = Instant::now();
        raw_call(client).await?;
        latencies.push(before.elapsed());
    }
    Ok(Series {
        latencies,
        wall: started.elapsed(),
    })
}

/// `callers` tasks sharing `calls`, each timing its own calls.
async fn concurrent<F, Fut>(callers: usize, calls: usize, call: F) -> anyhow::Result<Series>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let per_caller = calls / callers.max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_caller);
            for _ in 0..per_caller {
                let before = Instant::now();
                call().await?;
                latencies.push(before.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("a caller task panicked")??);
    }
    Ok(Series {
        latencies,
        wall: started.elapsed(),
    })
}

/// What the TypeScript SDK client printed.
#[derive(Debug, serde::Deserialize)]
struct TypeScriptRun {
    seconds: f64,
    latencies_us: Vec<f64>,
}

fn typescript_series(env: &BenchEnv, calls: usize, warmup: usize) -> anyhow::Result<Series> {
    let Some((node, sdk)) = &env.typescript else {
        bail!("Node and @modelcontextprotocol/sdk are not installed (run scripts/setup-test-deps)");
    };
    let output = std::process::Command::new(node)
        .arg(env.ts_client_script())
        .arg(sdk)
        .arg(calls.to_string())
        .arg(warmup.to_string())
        .arg(env.fixture())
        .arg("echo")
        .stdin(std::process::Stdio::null())
        .output()
        .context("running the TypeScript SDK client")?;
    if !output.status.success() {
        bail!(
            "the TypeScript SDK client failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let run: TypeScriptRun = serde_json::from_slice(&output.stdout)
        .context("reading the TypeScript SDK client's JSON")?;
    Ok(Series {
        latencies: run
            .latencies_us
            .iter()
            .map(|us| Duration::from_secs_f64(us / 1e6))
            .collect(),
        wall: Duration::from_secs_f64(run.seconds),
    })
}

/// The physical limit of the fixture and its pipe: a minimal hand-written JSON-RPC client (no
/// async runtime, no MCP library) on a thread of its own: one request line written, its response
/// line read, `calls` times after `warmup`.
fn limit_series(env: &BenchEnv, calls: usize, warmup: usize) -> anyhow::Result<Series> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new(env.fixture())
        .arg("echo")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting the echo fixture")?;
    let mut input = child.stdin.take().context("the fixture's stdin")?;
    let mut output = BufReader::new(child.stdout.take().context("the fixture's stdout")?);
    let mut line = String::new();
    // Reads lines until the response to `id` (skipping notifications); its text.
    let mut answer = |id: u64, line: &mut String| -> anyhow::Result<()> {
        loop {
            line.clear();
            if output.read_line(line)? == 0 {
                bail!("the fixture closed its output");
            }
            if line.contains(&format!("\"id\":{id},")) || line.contains(&format!("\"id\":{id}}}")) {
                return Ok(());
            }
        }
    };
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"warden-bench-limit","version":"0"}}}}}}"#
    )?;
    answer(0, &mut line)?;
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )?;
    let mut latencies = Vec::with_capacity(calls);
    let mut started = Instant::now();
    for id in 1..=(warmup + calls) as u64 {
        if id == warmup as u64 + 1 {
            started = Instant::now();
        }
        let before = Instant::now();
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"ping"}}}}}}"#
        )?;
        input.flush()?;
        answer(id, &mut line)?;
        if !line.contains("ping") {
            bail!("the fixture did not echo: {line}");
        }
        if id > warmup as u64 {
            latencies.push(before.elapsed());
        }
    }
    let wall = started.elapsed();
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
    Ok(Series { latencies, wall })
}

/// Runs the series and returns the rows.
pub(crate) async fn run(env: &BenchEnv, counts: GateCallCounts) -> anyhow::Result<Vec<Row>> {
    let session = BenchSession::open(vec![env.fixture_spec(SERVER, "echo", &[])])?;
    session.connect(SERVER).await?;
    let raw = Arc::new(RawClient::start(&env.fixture(), &["echo".to_owned()]).await?);
    let host = session.host.clone();

    let mut warm = Breakdown::default();
    gate_sequential(&host, counts.warmup, &mut warm).await?;
    raw_sequential(&raw, counts.warmup).await?;

    let rounds = counts.rounds.max(1);
    let mut gate_seq = Series::default();
    let mut raw_seq = Series::default();
    let mut breakdown = Breakdown::default();
    for _ in 0..rounds {
        raw_seq.merge(raw_sequential(&raw, counts.sequential / rounds).await?);
        gate_seq.merge(gate_sequential(&host, counts.sequential / rounds, &mut breakdown).await?);
    }

    // The runtime on its own (a host keeps its runtime private): the same server, no gate.
    let runtime = env.raw_runtime(env.fixture_spec(SERVER, "echo", &[]));
    runtime
        .connect(SERVER)
        .await
        .context("connecting the runtime")?;
    let runtime_seq = runtime_sequential(&runtime, counts.sequential / rounds).await?;
    runtime.shutdown().await;

    let mut gate_par = Series::default();
    let mut raw_par = Series::default();
    // One untimed concurrent round each first: the first concurrent series of a client is its
    // slowest (threads and buffers grow to the load), which the sequential warm-up does not cover.
    let mut round_ratios = Vec::with_capacity(rounds + 1);
    let mut raw_per_round = Vec::with_capacity(rounds + 1);
    // This process's CPU time in each series (the fixtures are other processes): warden's own
    // work per call against the raw client's, a figure scheduling noise barely moves.
    let mut gate_cpu = CpuTime::default();
    let mut raw_cpu = CpuTime::default();
    for round in 0..=rounds {
        let client = raw.clone();
        let cpu_before = own_cpu_time();
        let raw_round = concurrent(counts.callers, counts.concurrent / rounds, move || {
            let client = client.clone();
            async move { raw_call(&client).await }
        })
        .await?;
        let cpu_between = own_cpu_time();
        let gate_host = host.clone();
        let gate_round = concurrent(counts.callers, counts.concurrent / rounds, move || {
            let host = gate_host.clone();
            async move { gate_call(&host, CallSurface::Agent).await.map(|_| ()) }
        })
        .await?;
        let cpu_after = own_cpu_time();
        if round == 0 {
            continue;
        }
        raw_cpu.add(cpu_before, cpu_between, raw_round.latencies.len());
        gate_cpu.add(cpu_between, cpu_after, gate_round.latencies.len());
        raw_per_round.push(raw_round.per_second());
        round_ratios.push(gate_round.per_second() / raw_round.per_second().max(f64::MIN_POSITIVE));
        raw_par.merge(raw_round);
        gate_par.merge(gate_round);
    }
    session.host.shutdown().await;
    drop(raw);

    let typescript = typescript_series(env, counts.typescript, counts.warmup);
    let limit = limit_series(env, counts.sequential, counts.warmup);

    let calls = |series: &Series| {
        format!(
            "{} calls; p50 {:.0} µs, p99 {:.0} µs",
            series.latencies.len(),
            series.percentile_us(50.0),
            series.percentile_us(99.0)
        )
    };
    let mut rows = vec![
        Row::measured(
            "stdio_sequential_vs_rmcp",
            "gate calls/s, stdio echo fixture, sequential",
            "calls/s",
            gate_seq.per_second(),
            Target::RatioAtLeast(0.80),
        )
        .against("raw rmcp client", raw_seq.per_second())
        .with_note(format!(
            "gate: {}; raw: {}; {}; the MCP runtime alone: p50 {:.0} µs",
            calls(&gate_seq),
            calls(&raw_seq),
            breakdown.describe(),
            runtime_seq.percentile_us(50.0)
        )),
        Row::measured(
            "stdio_sequential_p50_us",
            "gate call latency p50, sequential",
            "µs",
            gate_seq.percentile_us(50.0),
            Target::Report,
        )
        .against("raw rmcp p50", raw_seq.percentile_us(50.0)),
        Row::measured(
            "stdio_sequential_p99_us",
            "gate call latency p99, sequential",
            "µs",
            gate_seq.percentile_us(99.0),
            Target::Report,
        )
        .against("raw rmcp p99", raw_seq.percentile_us(99.0)),
    ];
    rows.push(match typescript {
        Ok(ts) => Row::measured(
            "stdio_sequential_vs_ts_sdk",
            "gate calls/s, sequential, vs the TypeScript SDK client",
            "calls/s",
            gate_seq.per_second(),
            Target::RatioAtLeast(1.5),
        )
        .against("TypeScript SDK client", ts.per_second())
        .with_note(format!("TypeScript SDK: {}", calls(&ts))),
        Err(error) => Row::not_measured(
            "stdio_sequential_vs_ts_sdk",
            "gate calls/s, sequential, vs the TypeScript SDK client",
            "calls/s",
            Target::RatioAtLeast(1.5),
            &format!("{error:#}"),
        ),
    });
    rows.push(match limit {
        Ok(limit) => Row::measured(
            "stdio_sequential_vs_limit",
            "gate calls/s, sequential, vs a minimal hand-written JSON-RPC client (the pipe's limit)",
            "calls/s",
            gate_seq.per_second(),
            Target::RatioAtLeast(0.5),
        )
        .against("hand-written JSON-RPC client", limit.per_second())
        .with_note(format!(
            "limit: {}; raw rmcp is {:.3}× of it",
            calls(&limit),
            raw_seq.per_second() / limit.per_second().max(f64::MIN_POSITIVE)
        )),
        Err(error) => Row::not_measured(
            "stdio_sequential_vs_limit",
            "gate calls/s, sequential, vs a minimal hand-written JSON-RPC client (the pipe's limit)",
            "calls/s",
            Target::RatioAtLeast(0.5),
            &format!("{error:#}"),
        ),
    });
    rows.push(
        Row::measured(
            "stdio_concurrent16_vs_rmcp",
            &format!("gate calls/s, {} concurrent callers", counts.callers),
            "calls/s",
            gate_par.per_second(),
            Target::RatioAtLeast(0.95),
        )
        .against("raw rmcp client", raw_par.per_second())
        .with_note(format!(
            "gate: {}; raw: {}; per round (raw, then gate): ratios {}, raw rmcp {:.0}–{:.0} calls/s",
            calls(&gate_par),
            calls(&raw_par),
            round_ratios
                .iter()
                .map(|ratio| format!("{ratio:.2}"))
                .collect::<Vec<_>>()
                .join(" / "),
            raw_per_round.iter().copied().fold(f64::INFINITY, f64::min),
            raw_per_round.iter().copied().fold(0.0, f64::max),
        )),
    );
    rows.push(match (gate_cpu.per_call_us(), raw_cpu.per_call_us()) {
        (Some(gate), Some(raw)) => Row::measured(
            CPU_ROW,
            CPU_WHAT,
            "µs",
            gate,
            Target::Report,
        )
        .against("raw rmcp client, same series", raw)
        .with_note(format!(
            "CPU time of the bench process alone (user + system, all threads; the fixture is \
             another process) over the concurrent series above: {:.2} s for {} gated calls, {:.2} s \
             for {} raw calls; precise to 10 ms",
            gate_cpu.time.as_secs_f64(),
            gate_cpu.calls,
            raw_cpu.time.as_secs_f64(),
            raw_cpu.calls
        )),
        _ => Row::not_measured(
            CPU_ROW,
            CPU_WHAT,
            "µs",
            Target::Report,
            "/proc/self/stat could not be read",
        ),
    });
    Ok(rows)
}

const CPU_ROW: &str = "stdio_concurrent16_cpu_us_per_call";
const CPU_WHAT: &str = "warden's own CPU per gated call, 16 concurrent callers";

/// What a concurrent profiling child calls (`--child concurrent-{gate,runtime,raw}`): 16 callers
/// sharing `--calls` calls, for `perf stat` / `perf record` of one path alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConcurrentPath {
    Gate,
    Runtime,
    Raw,
}

impl ConcurrentPath {
    pub(crate) fn from_kind(kind: &str) -> Option<Self> {
        match kind {
            "concurrent-gate" => Some(Self::Gate),
            "concurrent-runtime" => Some(Self::Runtime),
            "concurrent-raw" => Some(Self::Raw),
            _ => None,
        }
    }
}

/// The concurrent profiling child: one warm-up round, then `calls` calls over 16 callers; prints
/// calls per second.
pub(crate) async fn concurrent_child(
    env: &BenchEnv,
    path: ConcurrentPath,
    calls: usize,
) -> anyhow::Result<()> {
    const CALLERS: usize = 16;
    // One untimed round of ten calls per caller, then `calls` timed ones.
    async fn warmed<F, Fut>(calls: usize, call: F) -> anyhow::Result<Series>
    where
        F: Fn() -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
    {
        concurrent(CALLERS, CALLERS * 10, call.clone()).await?;
        concurrent(CALLERS, calls, call).await
    }
    let series = match path {
        ConcurrentPath::Gate => {
            let session = BenchSession::open(vec![env.fixture_spec(SERVER, "echo", &[])])?;
            session.connect(SERVER).await?;
            let host = session.host.clone();
            let series = warmed(calls, move || {
                let host = host.clone();
                async move { gate_call(&host, CallSurface::Agent).await.map(|_| ()) }
            })
            .await?;
            session.host.shutdown().await;
            series
        }
        ConcurrentPath::Runtime => {
            let runtime = Arc::new(env.raw_runtime(env.fixture_spec(SERVER, "echo", &[])));
            runtime
                .connect(SERVER)
                .await
                .context("connecting the runtime")?;
            let caller_runtime = runtime.clone();
            let series = warmed(calls, move || {
                let runtime = caller_runtime.clone();
                async move { runtime_sequential(&runtime, 1).await.map(|_| ()) }
            })
            .await?;
            runtime.shutdown().await;
            series
        }
        ConcurrentPath::Raw => {
            let raw = Arc::new(RawClient::start(&env.fixture(), &["echo".to_owned()]).await?);
            warmed(calls, move || {
                let raw = raw.clone();
                async move { raw_call(&raw).await }
            })
            .await?
        }
    };
    println!(
        "{:.0} calls/s",
        series.latencies.len() as f64 / series.wall.as_secs_f64().max(f64::EPSILON)
    );
    Ok(())
}
