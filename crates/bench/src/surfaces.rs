//! The surfaces over the gate: `warden tool S T '{…}'` one-shot through a session's bridge
//! (against a direct in-process call), and `warden serve --http` with concurrent clients
//! (against the same clients calling the upstream server directly, and against the npm
//! `mcp-proxy` gateway fronting the same stdio upstream).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use warden_bridge::Bridge;
use warden_policy::CallSurface;

use crate::env::{BenchEnv, BenchSession, cpu_time_of, echo_call};
use crate::gate_calls::{SERVER, gate_call};
use crate::report::{Row, Target};
use crate::stats::{CpuTime, Series, median, percentile};

/// How long a server may take to print its `listening on` line.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Iteration counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SurfaceCounts {
    /// One-shot `warden tool` runs.
    pub tool_cli: usize,
    /// Calls through `warden serve --http` (and directly), spread over `callers`.
    pub serve_calls: usize,
    pub callers: usize,
}

const TOOL_CLI_KEY: &str = "tool_cli_bridge_p50_ms";
const TOOL_CLI_WHAT: &str = "`warden tool S T '{…}'` one-shot through a session's bridge, wall p50";
const SERVE_KEY: &str = "serve_http_16_concurrent";
const PROXY_KEY: &str = "serve_http_vs_mcp_proxy";
const PROXY_CPU_KEY: &str = "serve_http_cpu_us_per_call_vs_mcp_proxy";
const PROXY_CPU_WHAT: &str =
    "CPU per proxied call: `warden serve --http` vs mcp-proxy, stdio upstream";

pub(crate) async fn run(env: &BenchEnv, counts: SurfaceCounts) -> anyhow::Result<Vec<Row>> {
    let tool_cli = match tool_cli(env, counts.tool_cli).await {
        Ok(row) => row,
        Err(error) => Row::not_measured(
            TOOL_CLI_KEY,
            TOOL_CLI_WHAT,
            "ms",
            Target::ValueAtMost(10.0),
            &format!("{error:#}"),
        ),
    };
    let serve_what = format!(
        "`warden serve --http` (passthrough), {} concurrent clients",
        counts.callers
    );
    let serve = match serve(env, counts).await {
        Ok(row) => row,
        Err(error) => Row::not_measured(
            SERVE_KEY,
            &serve_what,
            "calls/s",
            Target::Report,
            &format!("{error:#}"),
        ),
    };
    let proxy_what = format!(
        "`warden serve --http` vs the npm mcp-proxy gateway, stdio upstream, {} concurrent clients",
        counts.callers
    );
    let [proxy, proxy_cpu] = match against_mcp_proxy(env, counts).await {
        Ok(rows) => rows,
        Err(error) => [
            Row::not_measured(
                PROXY_KEY,
                &proxy_what,
                "calls/s",
                Target::RatioAtLeast(3.0),
                &format!("{error:#}"),
            ),
            Row::not_measured(
                PROXY_CPU_KEY,
                PROXY_CPU_WHAT,
                "µs",
                Target::Report,
                &format!("{error:#}"),
            ),
        ],
    };
    Ok(vec![tool_cli, serve, proxy, proxy_cpu])
}

/// `warden serve`'s arguments for the gateway the bench measures: Streamable HTTP on a free
/// loopback port, no auth, passthrough, fronting the `--mcp` server `server`.
pub(crate) fn gateway_args(server: &str) -> [&str; 8] {
    [
        "serve",
        "--http",
        "127.0.0.1:0",
        "--insecure-no-auth",
        "--expose",
        "passthrough",
        "--mcp",
        server,
    ]
}

/// `warden serve --http` (passthrough, no auth, loopback) fronting the `--mcp` server `server`;
/// the child and the URL it listens on.
async fn start_gateway(
    env: &BenchEnv,
    home: &Path,
    server: &str,
) -> anyhow::Result<(Child, String)> {
    let mut gateway = warden_command(env, home)?
        .args(gateway_args(server))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting warden serve")?;
    let url = listening_url(&mut gateway, "warden serve").await?;
    Ok((gateway, url))
}

/// One side of [`side_by_side`]: its series, and the CPU time its server process spent in it
/// (its own threads; an upstream child is not counted).
#[derive(Debug, Default)]
struct Side {
    series: Series,
    cpu: CpuTime,
}

/// The same concurrent clients against `baseline_url` and `warden_url`, warmed up, then in
/// alternating rounds: (the baseline's side, warden's). `*_pid` is the process whose CPU time
/// is counted for each side.
async fn side_by_side(
    (baseline_url, baseline_pid): (&str, Option<u32>),
    (warden_url, warden_pid): (&str, Option<u32>),
    counts: SurfaceCounts,
) -> anyhow::Result<(Side, Side)> {
    let mut baseline_clients = Vec::new();
    let mut warden_clients = Vec::new();
    for _ in 0..counts.callers {
        baseline_clients.push(Arc::new(http_client(baseline_url).await?));
        warden_clients.push(Arc::new(http_client(warden_url).await?));
    }
    concurrent_clients(&baseline_clients, counts.callers * 10).await?;
    concurrent_clients(&warden_clients, counts.callers * 10).await?;
    let mut baseline = Side::default();
    let mut through_warden = Side::default();
    let rounds = 2;
    let cpu = |pid: Option<u32>| pid.and_then(|pid| cpu_time_of(&pid.to_string()));
    for _ in 0..rounds {
        for (clients, pid, side) in [
            (&baseline_clients, baseline_pid, &mut baseline),
            (&warden_clients, warden_pid, &mut through_warden),
        ] {
            let before = cpu(pid);
            let series = concurrent_clients(clients, counts.serve_calls / rounds).await?;
            side.cpu.add(before, cpu(pid), series.latencies.len());
            side.series.merge(series);
        }
    }
    Ok((baseline, through_warden))
}

/// `tests/fixtures/bench/node_modules/.bin/mcp-proxy` (`scripts/bench` installs it, pinned).
fn mcp_proxy_bin(env: &BenchEnv) -> anyhow::Result<std::path::PathBuf> {
    let bin = env
        .workspace_root
        .join("tests/fixtures/bench/node_modules/.bin/mcp-proxy");
    if !bin.is_file() {
        bail!(
            "mcp-proxy is not installed: run `npm ci` in tests/fixtures/bench (scripts/bench does)"
        );
    }
    Ok(bin)
}

/// A loopback port free right now.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until something accepts connections on `port`.
async fn accepting(port: u16, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + LISTEN_TIMEOUT;
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{what} did not listen on port {port} within {LISTEN_TIMEOUT:?}")
}

/// `warden serve --http` and the npm `mcp-proxy`, each fronting the echo fixture over stdio,
/// under the same concurrent clients, in alternating rounds: the throughput row and the CPU row.
async fn against_mcp_proxy(env: &BenchEnv, counts: SurfaceCounts) -> anyhow::Result<[Row; 2]> {
    let proxy_bin = mcp_proxy_bin(env)?;
    let port = free_port()?;
    let mut proxy = Command::new(&proxy_bin)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--server",
            "stream",
            "--",
        ])
        .arg(env.fixture())
        .arg("echo")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting mcp-proxy")?;
    accepting(port, "mcp-proxy").await?;
    let proxy_url = format!("http://127.0.0.1:{port}/mcp");
    let home = tempfile::tempdir()?;
    let (mut gateway, gateway_url) = start_gateway(
        env,
        home.path(),
        &format!("{SERVER}={} echo", env.fixture().display()),
    )
    .await?;
    let (proxy_side, warden_side) = side_by_side(
        (&proxy_url, proxy.id()),
        (&gateway_url, gateway.id()),
        counts,
    )
    .await?;
    let _ = gateway.start_kill();
    let _ = gateway.wait().await;
    let _ = proxy.start_kill();
    let _ = proxy.wait().await;
    let cpu_row = match (warden_side.cpu.per_call_us(), proxy_side.cpu.per_call_us()) {
        (Some(warden), Some(proxy)) => Row::measured(
            PROXY_CPU_KEY,
            PROXY_CPU_WHAT,
            "µs",
            warden,
            Target::Report,
        )
        .against("mcp-proxy, same clients", proxy)
        .with_note(format!(
            "CPU time (user + system, every thread) of each gateway process over its rounds above, \
             its upstream child not counted: warden {:.2} s for {} calls, mcp-proxy {:.2} s for {} \
             calls; precise to 10 ms",
            warden_side.cpu.time.as_secs_f64(),
            warden_side.cpu.calls,
            proxy_side.cpu.time.as_secs_f64(),
            proxy_side.cpu.calls,
        )),
        _ => Row::not_measured(
            PROXY_CPU_KEY,
            PROXY_CPU_WHAT,
            "µs",
            Target::Report,
            "a gateway's /proc/<pid>/stat could not be read",
        ),
    };
    let (through_proxy, through_warden) = (proxy_side.series, warden_side.series);
    let throughput_row = Row::measured(
        PROXY_KEY,
        &format!(
            "`warden serve --http` vs the npm mcp-proxy gateway, stdio upstream, {} concurrent clients",
            counts.callers
        ),
        "calls/s",
        through_warden.per_second(),
        Target::RatioAtLeast(3.0),
    )
    .against("mcp-proxy 6.7.19", through_proxy.per_second())
    .with_note(format!(
        "warden: {} calls, p50 {:.0} µs, p99 {:.0} µs; mcp-proxy: {} calls, p50 {:.0} µs, p99 {:.0} µs",
        through_warden.latencies.len(),
        through_warden.percentile_us(50.0),
        through_warden.percentile_us(99.0),
        through_proxy.latencies.len(),
        through_proxy.percentile_us(50.0),
        through_proxy.percentile_us(99.0),
    ));
    Ok([throughput_row, cpu_row])
}

/// A throwaway WARDEN_HOME and working folder for a `warden` child.
fn warden_command(env: &BenchEnv, home: &Path) -> anyhow::Result<Command> {
    command_in_home(env.binary("warden"), home)
}

/// `program` run in `home`'s working folder with `home` as its WARDEN_HOME and no inherited
/// configuration or log filter: `warden` itself, or a tool that starts it (valgrind).
pub(crate) fn command_in_home(
    program: impl AsRef<std::ffi::OsStr>,
    home: &Path,
) -> anyhow::Result<Command> {
    std::fs::create_dir_all(home.join("work"))?;
    let mut command = Command::new(program);
    command
        .current_dir(home.join("work"))
        .env("WARDEN_HOME", home.join("home"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    Ok(command)
}

async fn tool_cli(env: &BenchEnv, runs: usize) -> anyhow::Result<Row> {
    let session = BenchSession::open(vec![env.fixture_spec(SERVER, "echo", &[])])?;
    session.connect(SERVER).await?;
    let bridge = Bridge::start(session.host.clone()).context("starting the session bridge")?;
    let home = tempfile::tempdir()?;
    let mut direct = Vec::new();
    for _ in 0..50 {
        gate_call(&session.host, CallSurface::ToolCli).await?;
    }
    for _ in 0..200 {
        let started = Instant::now();
        gate_call(&session.host, CallSurface::ToolCli).await?;
        direct.push(started.elapsed());
    }
    let mut one_shots = Vec::new();
    // One untimed run warms the page cache.
    for run in 0..=runs {
        let mut command = warden_command(env, home.path())?;
        command
            .args(["tool", SERVER, "echo", r#"{"text":"ping"}"#])
            .envs(bridge.environment())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let output = command.output().await.context("running warden tool")?;
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() || !stdout.contains("ping") {
            bail!(
                "`warden tool {SERVER} echo` through the bridge failed ({}): {}{}",
                output.status,
                stdout.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        if run > 0 {
            one_shots.push(took);
        }
    }
    drop(bridge);
    session.host.shutdown().await;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(Row::measured(
        TOOL_CLI_KEY,
        TOOL_CLI_WHAT,
        "ms",
        ms(median(&one_shots)),
        Target::ValueAtMost(10.0),
    )
    .against("a direct in-process gate call", ms(median(&direct)))
    .with_note(format!(
        "{} runs, process spawn to exit; p95 {:.1} ms",
        one_shots.len(),
        ms(percentile(&one_shots, 95.0))
    )))
}

/// Waits for `listening on http://ADDR/mcp` on the child's stderr and returns the URL.
pub(crate) async fn listening_url(child: &mut Child, what: &str) -> anyhow::Result<String> {
    let stderr = child.stderr.take().context("child stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let found = tokio::time::timeout(LISTEN_TIMEOUT, async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await? {
            if let Some(at) = line.find("listening on http://") {
                let url = line[at + "listening on ".len()..].trim().to_owned();
                return Ok((url, lines));
            }
            seen.push(line);
        }
        bail!("{what} exited before listening: {}", seen.join("\n"))
    })
    .await
    .with_context(|| format!("{what} did not listen within {LISTEN_TIMEOUT:?}"))??;
    let (url, mut rest) = found;
    // Keep draining stderr so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = rest.next_line().await {} });
    Ok(url)
}

pub(crate) type HttpClient = RunningService<RoleClient, ()>;

/// The protocol era a bench client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientEra {
    /// `initialize`, then a 2025-11-25 session (what rmcp's `serve` negotiates).
    Session,
    /// 2026-07-28: `server/discover`, then requests that each carry their own metadata.
    Stateless,
}

/// An rmcp Streamable HTTP client of `url` with rmcp's default transport (a TCP connection
/// per request), in a 2025-11-25 session.
pub(crate) async fn http_client(url: &str) -> anyhow::Result<HttpClient> {
    http_client_of(url, ClientEra::Session).await
}

/// [`http_client`] speaking `era`.
pub(crate) async fn http_client_of(url: &str, era: ClientEra) -> anyhow::Result<HttpClient> {
    warden_mcp::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let lifecycle = match era {
        ClientEra::Session => ClientLifecycleMode::Initialize,
        ClientEra::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    ().serve_with_lifecycle(transport, lifecycle)
        .await
        .with_context(|| format!("MCP handshake with {url} ({era:?})"))
}

/// `clients` sessions, each making its share of `calls` sequential echo calls, all at once.
async fn concurrent_clients(clients: &[Arc<HttpClient>], calls: usize) -> anyhow::Result<Series> {
    let per_client = calls / clients.len().max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                let before = Instant::now();
                echo_call(&client).await?;
                latencies.push(before.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("a client task panicked")??);
    }
    Ok(Series {
        latencies,
        wall: started.elapsed(),
    })
}

async fn serve(env: &BenchEnv, counts: SurfaceCounts) -> anyhow::Result<Row> {
    let help = std::process::Command::new(env.binary("warden"))
        .args(["serve", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running warden serve --help")?;
    if !help.success() {
        bail!("`warden serve` is not built");
    }
    let mut upstream = Command::new(env.fixture())
        .args(["echo", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the HTTP echo fixture")?;
    let upstream_url = listening_url(&mut upstream, "the HTTP echo fixture").await?;
    let home = tempfile::tempdir()?;
    let (mut gateway, gateway_url) =
        start_gateway(env, home.path(), &format!("{SERVER}={upstream_url}")).await?;
    let (direct_side, through_side) = side_by_side(
        (&upstream_url, upstream.id()),
        (&gateway_url, gateway.id()),
        counts,
    )
    .await?;
    let (direct, through) = (&direct_side.series, &through_side.series);
    let cpu_per_call = |side: &Side| {
        side.cpu
            .per_call_us()
            .map_or_else(|| "not read".to_owned(), |us| format!("{us:.1} µs"))
    };
    let _ = gateway.start_kill();
    let _ = gateway.wait().await;
    let _ = upstream.start_kill();
    let calls = |series: &Series| {
        format!(
            "{} calls, p50 {:.0} µs, p99 {:.0} µs",
            series.latencies.len(),
            series.percentile_us(50.0),
            series.percentile_us(99.0)
        )
    };
    Ok(Row::measured(
        SERVE_KEY,
        &format!(
            "`warden serve --http` (passthrough), {} concurrent clients",
            counts.callers
        ),
        "calls/s",
        through.per_second(),
        Target::Report,
    )
    .against(
        "the upstream HTTP echo fixture directly",
        direct.per_second(),
    )
    .with_note(format!(
        "through warden: {}; direct: {}; CPU per call of warden serve's process {}, of the fixture \
         serving directly {}",
        calls(through),
        calls(direct),
        cpu_per_call(&through_side),
        cpu_per_call(&direct_side),
    )))
}
