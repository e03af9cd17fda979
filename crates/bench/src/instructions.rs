//! Instruction counts that a shared, noisy machine cannot blur: each path runs in a fresh child
//! of this binary under valgrind's cachegrind (no cache simulation; the child's own children are
//! not traced, so an upstream server's work is never counted), twice with different numbers of
//! calls; the difference in instructions over the difference in calls is one call's cost, start-up
//! and shutdown excluded.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::env::{BenchEnv, BenchSession, RawClient, echo_call};
use crate::gate_calls::{Breakdown, SERVER};
use crate::report::{Row, Target};
use crate::surfaces::{ClientEra, command_in_home, gateway_args, http_client_of, listening_url};

/// Warden's own instructions per gated call (a gated call less a raw rmcp call) as measured
/// in release code when these rows were added (2026-12-02, the hot path as of commit 839cdca):
/// what the "≤ 60%" target of docs/BENCHMARKS.md is measured against.
const OWN_INSTRUCTIONS_BEFORE: f64 = 169_985.0;

/// What a child measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measured {
    /// `Host::call` through the gate to the echo fixture, audit on.
    Gate,
    /// warden's MCP runtime alone: no gate, no result conversion.
    Runtime,
    /// A raw rmcp client.
    Raw,
    /// The tool-search index over LiveMCPBench's 527 tools, top 5.
    Search,
}

impl Measured {
    const ALL: [Measured; 4] = [
        Measured::Raw,
        Measured::Runtime,
        Measured::Gate,
        Measured::Search,
    ];

    /// The `--child` kind.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Measured::Gate => "instructions-gate",
            Measured::Runtime => "instructions-runtime",
            Measured::Raw => "instructions-raw",
            Measured::Search => "instructions-search",
        }
    }

    pub(crate) fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|measured| measured.kind() == kind)
    }
}

/// Call counts of the two child runs per path (the difference is what is divided).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InstructionCounts {
    pub fewer: usize,
    pub more: usize,
}

/// The child: `calls` operations of `measured`, after one warm-up, then exit.
pub(crate) async fn child(env: &BenchEnv, measured: Measured, calls: usize) -> anyhow::Result<()> {
    match measured {
        Measured::Gate => {
            let session = BenchSession::open(vec![env.fixture_spec(SERVER, "echo", &[])])?;
            session.connect(SERVER).await?;
            let mut breakdown = Breakdown::default();
            crate::gate_calls::gate_sequential(&session.host, 1 + calls, &mut breakdown).await?;
            session.host.shutdown().await;
        }
        Measured::Runtime => {
            let runtime = env.raw_runtime(env.fixture_spec(SERVER, "echo", &[]));
            runtime
                .connect(SERVER)
                .await
                .context("connecting the runtime")?;
            crate::gate_calls::runtime_sequential(&runtime, 1 + calls).await?;
            runtime.shutdown().await;
        }
        Measured::Raw => {
            let raw = RawClient::start(&env.fixture(), &["echo".to_owned()]).await?;
            crate::gate_calls::raw_sequential(&raw, 1 + calls).await?;
        }
        Measured::Search => {
            let corpora = warden_discovery::Corpora::load(&env.corpora_dir)
                .context("loading the tool corpora")?;
            let index = corpora.livemcpbench.index();
            let queries: Vec<&str> = corpora
                .livemcpbench_step_queries
                .iter()
                .map(|query| query.query.as_str())
                .collect();
            if queries.is_empty() {
                bail!("the LiveMCPBench corpus has no queries");
            }
            for query in queries.iter().cycle().take(1 + calls) {
                std::hint::black_box(index.search(query, 5));
            }
        }
    }
    Ok(())
}

/// valgrind's arguments before the measured program: cachegrind counting instructions only
/// (no cache simulation, no output file), its summary written to `log`.
fn cachegrind_args(log: &Path) -> [String; 4] {
    [
        "--tool=cachegrind".to_owned(),
        "--cache-sim=no".to_owned(),
        "--cachegrind-out-file=/dev/null".to_owned(),
        format!("--log-file={}", log.display()),
    ]
}

/// The instruction total in the summary valgrind wrote to `log` for `what`; a run that
/// `failed` names its last lines.
fn instructions_in(log: &Path, what: &str, failed: Option<String>) -> anyhow::Result<u64> {
    let summary = std::fs::read_to_string(log).context("reading valgrind's summary")?;
    if let Some(failure) = failed {
        bail!(
            "{what} under valgrind failed ({failure}): {}",
            summary
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    parse_instruction_refs(&summary)
        .with_context(|| format!("no `I refs` line in valgrind's summary of {what}: {summary}"))
}

/// Instructions the child measuring `measured` with `calls` executed (cachegrind's `I refs`).
fn instructions_of(measured: Measured, calls: usize) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("locating warden-bench")?;
    let log = tempfile::NamedTempFile::new().context("a file for valgrind's summary")?;
    let status = std::process::Command::new("valgrind")
        .args(cachegrind_args(log.path()))
        .arg(exe)
        .args(["--child", measured.kind(), "--calls", &calls.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("starting valgrind (Debian's `valgrind` package)")?;
    let failed = (!status.success()).then(|| status.to_string());
    instructions_in(
        log.path(),
        &format!("the {} child", measured.kind()),
        failed,
    )
}

/// A Streamable HTTP server whose own process is measured while one rmcp client (the client of
/// the `serve` rows, which opens a TCP connection per request) makes sequential echo calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HttpServer {
    /// `warden serve --http` fronting the echo fixture over stdio; the fixture is its child, so
    /// not traced.
    Gateway,
    /// The echo fixture's own Streamable HTTP server (rmcp's), answering itself.
    Fixture,
}

impl HttpServer {
    fn name(self) -> &'static str {
        match self {
            HttpServer::Gateway => "warden serve --http",
            HttpServer::Fixture => "the HTTP echo fixture",
        }
    }
}

/// How long a server under valgrind may take to finish after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Instructions `server`'s process executed from its start to its exit, `calls` echo calls of
/// an `era` client (after one warm-up call) in between.
async fn served_instructions(
    env: &BenchEnv,
    server: HttpServer,
    era: ClientEra,
    calls: usize,
) -> anyhow::Result<u64> {
    let home = tempfile::tempdir().context("a home for the measured server")?;
    let log = tempfile::NamedTempFile::new().context("a file for valgrind's summary")?;
    let mut command = command_in_home("valgrind", home.path())?;
    command.args(cachegrind_args(log.path()));
    let upstream = format!("{SERVER}={} echo", env.fixture().display());
    match server {
        HttpServer::Gateway => command
            .arg(env.binary("warden"))
            .args(gateway_args(&upstream)),
        HttpServer::Fixture => command
            .arg(env.fixture())
            .args(["echo", "--http", "127.0.0.1:0"]),
    };
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting valgrind (Debian's `valgrind` package)")?;
    let url = listening_url(&mut child, server.name()).await?;
    let client = http_client_of(&url, era).await?;
    for _ in 0..1 + calls {
        echo_call(&client).await?;
    }
    client
        .cancel()
        .await
        .with_context(|| format!("closing the session with {}", server.name()))?;
    let pid = child.id().context("the measured server already exited")?;
    // SIGTERM: warden stops gracefully; valgrind writes its summary either way.
    let kill = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .context("running kill")?;
    if !kill.success() {
        bail!("kill -TERM {pid} failed: {kill}");
    }
    tokio::time::timeout(STOP_TIMEOUT, child.wait())
        .await
        .with_context(|| format!("{} did not stop within {STOP_TIMEOUT:?}", server.name()))?
        .context("waiting for the measured server")?;
    instructions_in(log.path(), server.name(), None)
}

/// The `I refs:` figure of a cachegrind summary (`==123== I   refs:      1,234,567`).
fn parse_instruction_refs(summary: &str) -> Option<u64> {
    summary.lines().find_map(|line| {
        let (_, rest) = line
            .split_once("I   refs:")
            .or_else(|| line.split_once("I refs:"))?;
        rest.trim().replace(',', "").parse().ok()
    })
}

/// One operation's instructions: the difference of two runs' totals (`fewer` and `more`
/// instructions, for `counts.fewer` and `counts.more` operations) over the difference in
/// operations, so start-up and shutdown cancel out.
fn per_operation(counts: InstructionCounts, fewer: u64, more: u64) -> f64 {
    let operations = counts.more.saturating_sub(counts.fewer).max(1) as f64;
    (more as f64 - fewer as f64) / operations
}

/// Instructions per operation of `measured`.
fn per_call(measured: Measured, counts: InstructionCounts) -> anyhow::Result<f64> {
    let fewer = instructions_of(measured, counts.fewer)?;
    let more = instructions_of(measured, counts.more)?;
    Ok(per_operation(counts, fewer, more))
}

/// Instructions per call of `server`'s process, its client speaking `era`.
async fn served_per_call(
    env: &BenchEnv,
    server: HttpServer,
    era: ClientEra,
    counts: InstructionCounts,
) -> anyhow::Result<f64> {
    let fewer = served_instructions(env, server, era, counts.fewer).await?;
    let more = served_instructions(env, server, era, counts.more).await?;
    Ok(per_operation(counts, fewer, more))
}

/// warden's own instructions in a gated call: the gate's layers, the audit and the conversion
/// (the gated call less warden's runtime alone), plus what the runtime costs beyond a raw rmcp
/// call. A runtime cheaper than rmcp's own client is not subtracted from the gate's share.
fn own_share(raw: f64, runtime: f64, gate: f64) -> f64 {
    (gate - runtime) + (runtime - raw).max(0.0)
}

/// The rows' keys and what each measures, in the order they are printed.
const ROWS: [(&str, &str); 7] = [
    (
        "instructions_per_raw_rmcp_call",
        "instructions per raw rmcp call",
    ),
    (
        "instructions_per_runtime_call",
        "instructions per warden runtime call (no gate)",
    ),
    (
        "instructions_per_gated_call",
        "instructions per gated call (gate, audit, conversion)",
    ),
    (
        "instructions_warden_own_per_gated_call",
        "warden's own instructions per gated call (gate, audit, conversion, and the runtime's excess over raw rmcp)",
    ),
    (
        "instructions_per_search_527_tools",
        "instructions per tool search (527 tools, top 5)",
    ),
    (
        "instructions_per_serve_call",
        "instructions per proxied call in the `warden serve --http` process (stdio upstream)",
    ),
    (
        "instructions_per_serve_call_2026_07_28",
        "instructions per proxied call in the `warden serve --http` process, 2026-07-28 client (stdio upstream)",
    ),
];

/// Every instruction row, each saying `why` it was not measured.
fn not_measured(why: &str) -> Vec<Row> {
    ROWS.iter()
        .map(|(key, what)| {
            let target = if *key == "instructions_warden_own_per_gated_call" {
                Target::RatioAtMost(0.6)
            } else {
                Target::Report
            };
            Row::not_measured(key, what, "instr", target, why)
        })
        .collect()
}

/// The instruction rows (each "not measured", with the reason, when valgrind is missing or a
/// child fails).
pub(crate) async fn run(env: &BenchEnv, counts: InstructionCounts) -> anyhow::Result<Vec<Row>> {
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
    {
        return Ok(not_measured(
            "valgrind is not installed (Debian's `valgrind`)",
        ));
    }
    match measure(env, counts).await {
        Ok(rows) => Ok(rows),
        Err(error) => Ok(not_measured(&format!("{error:#}"))),
    }
}

async fn measure(env: &BenchEnv, counts: InstructionCounts) -> anyhow::Result<Vec<Row>> {
    let raw = per_call(Measured::Raw, counts)?;
    let runtime = per_call(Measured::Runtime, counts)?;
    let gate = per_call(Measured::Gate, counts)?;
    let search = per_call(Measured::Search, counts)?;
    let served = |server, era| served_per_call(env, server, era, counts);
    let gateway = served(HttpServer::Gateway, ClientEra::Session).await?;
    let fixture = served(HttpServer::Fixture, ClientEra::Session).await?;
    let stateless_gateway = served(HttpServer::Gateway, ClientEra::Stateless).await?;
    let stateless_fixture = served(HttpServer::Fixture, ClientEra::Stateless).await?;
    let note = format!(
        "valgrind cachegrind, ({} − {} calls) / {}; the upstream server not counted",
        counts.more,
        counts.fewer,
        counts.more - counts.fewer
    );
    let own = own_share(raw, runtime, gate);
    let [
        raw_what,
        runtime_what,
        gate_what,
        own_what,
        search_what,
        serve_what,
        stateless_what,
    ] = ROWS.map(|(_, what)| what);
    let own_row = Row::measured(ROWS[3].0, own_what, "instr", own, Target::RatioAtMost(0.6))
        .against(
            "before the hot-path work (recorded)",
            OWN_INSTRUCTIONS_BEFORE,
        );
    Ok(vec![
        Row::measured(ROWS[0].0, raw_what, "instr", raw, Target::Report).with_note(note.clone()),
        Row::measured(ROWS[1].0, runtime_what, "instr", runtime, Target::Report)
            .against("raw rmcp", raw)
            .with_note(note.clone()),
        Row::measured(ROWS[2].0, gate_what, "instr", gate, Target::Report)
            .against("raw rmcp", raw)
            .with_note(note.clone()),
        own_row.with_note(format!(
            "gate + audit + conversion (gated − runtime) {:.0}; the runtime over a raw rmcp call {:.0} (counted only when positive: a runtime cheaper than rmcp earns no credit)",
            gate - runtime,
            runtime - raw
        )),
        Row::measured(ROWS[4].0, search_what, "instr", search, Target::Report)
            .with_note(note.clone()),
        Row::measured(ROWS[5].0, serve_what, "instr", gateway, Target::Report)
            .against(
                "the HTTP echo fixture answering the same client itself",
                fixture,
            )
            .with_note(format!(
                "each server's own process under cachegrind while one rmcp Streamable HTTP client (2025-11-25 session, a TCP connection per request, as in the `serve` rows) calls `echo`: HTTP in, gate and audit, the stdio call out; {note}"
            )),
        Row::measured(
            ROWS[6].0,
            stateless_what,
            "instr",
            stateless_gateway,
            Target::Report,
        )
        .against(
            "the HTTP echo fixture answering the same client itself",
            stateless_fixture,
        )
        .with_note(format!(
            "as the row above, the client speaking 2026-07-28 (`server/discover`, then stateless requests, each call relayed so that an `input_required` result reaches the client); {note}"
        )),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_cheaper_than_rmcp_earns_the_gate_no_credit() {
        // The runtime 27 k over rmcp: counted with the gate's 90 k.
        assert!((own_share(88_000.0, 115_000.0, 205_000.0) - 117_000.0).abs() < 0.5);
        // The runtime 63 k under rmcp: the gate's 85 k alone.
        assert!((own_share(87_000.0, 24_000.0, 109_000.0) - 85_000.0).abs() < 0.5);
    }

    #[test]
    fn the_instruction_total_is_read_from_a_cachegrind_summary() {
        let summary = "==4242== Cachegrind, a cache and branch-prediction profiler\n\
                       ==4242== \n==4242== I   refs:      12,345,678\n";
        assert_eq!(parse_instruction_refs(summary), Some(12_345_678));
        assert_eq!(parse_instruction_refs("==1== no summary"), None);
    }

    #[test]
    fn every_child_kind_names_its_measurement() {
        for measured in Measured::ALL {
            assert_eq!(Measured::from_kind(measured.kind()), Some(measured));
        }
        assert_eq!(Measured::from_kind("instructions-other"), None);
    }
}
