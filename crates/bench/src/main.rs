//! `warden-bench [--quick] [--json]`: measures warden against the direct path and against peers,
//! side by side in one run, and prints one table (or one JSON object keyed by row).

mod big_result;
mod code_mode;
mod discovery;
mod env;
mod gate_calls;
mod instructions;
mod knowledge;
mod report;
mod service;
mod startup;
mod stats;
mod surfaces;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;

use crate::env::BenchEnv;
use crate::report::Report;

/// Benchmarks warden against the direct path and its peers; see docs/BENCHMARKS.md.
#[derive(Debug, Parser)]
#[command(name = "warden-bench")]
struct Args {
    /// Fewer iterations: the whole run takes well under a minute.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object whose keys name the rows.
    #[arg(long)]
    json: bool,
    /// Far fewer iterations still (for the shape test; the figures mean little).
    #[arg(long, hide = true)]
    smoke: bool,
    /// Run only these sections (repeatable): discovery, gate, code-mode, big-result, startup,
    /// surfaces, service, knowledge, instructions. Every section runs when none is named.
    #[arg(long, value_name = "SECTION", value_parser = SECTIONS)]
    only: Vec<String>,
    /// Internal: run one measurement in this fresh process and print its JSON.
    #[arg(long, hide = true, value_name = "KIND")]
    child: Option<String>,
    /// Internal: the service child's WARDEN_HOME and workspace, prepared by the parent.
    #[arg(long, hide = true, value_name = "DIR")]
    service_home: Option<PathBuf>,
    /// Internal: the service child's PostgreSQL database (SQLite without it).
    #[arg(long, hide = true, value_name = "URL")]
    service_database: Option<String>,
    /// Internal: how many operations an instruction-count child performs.
    #[arg(long, hide = true, value_name = "N", default_value_t = 0)]
    calls: usize,
    /// Internal: how many API instances the service child serves (on PostgreSQL).
    #[arg(long, hide = true, value_name = "N", default_value_t = 1)]
    service_instances: usize,
}

/// The sections `--only` can name, in the order a run measures them.
const SECTIONS: [&str; 9] = [
    "discovery",
    "gate",
    "code-mode",
    "big-result",
    "startup",
    "surfaces",
    "service",
    "knowledge",
    "instructions",
];

/// Iteration counts of one run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    gate: gate_calls::GateCallCounts,
    code: code_mode::CodeModeCounts,
    startup: startup::StartupCounts,
    big_result_repeats: usize,
    search_repeats: usize,
    surfaces: surfaces::SurfaceCounts,
    /// Concurrent sessions of the service row.
    service_sessions: usize,
    /// Concurrent sessions of the load rows (2 instances on PostgreSQL beside 1 on SQLite).
    service_load_sessions: usize,
    knowledge: knowledge::KnowledgePlan,
    instructions: instructions::InstructionCounts,
}

impl Plan {
    fn full() -> Self {
        Self {
            gate: gate_calls::GateCallCounts {
                sequential: 10_000,
                concurrent: 16_000,
                callers: 16,
                rounds: 4,
                warmup: 500,
                typescript: 10_000,
            },
            code: code_mode::CodeModeCounts {
                calls: 1_000,
                repeats: 5,
                cold_starts: 300,
            },
            startup: startup::StartupCounts { repeats: 7 },
            big_result_repeats: 3,
            search_repeats: 20,
            surfaces: surfaces::SurfaceCounts {
                tool_cli: 40,
                serve_calls: 8_000,
                callers: 16,
            },
            service_sessions: 100,
            service_load_sessions: 500,
            knowledge: knowledge::KnowledgePlan {
                chunk_counts: &[10_000, 100_000],
                queries: 200,
                with_model: true,
            },
            instructions: instructions::InstructionCounts {
                fewer: 100,
                more: 600,
            },
        }
    }

    fn quick() -> Self {
        Self {
            gate: gate_calls::GateCallCounts {
                sequential: 2_000,
                concurrent: 3_200,
                callers: 16,
                rounds: 2,
                warmup: 200,
                typescript: 1_000,
            },
            code: code_mode::CodeModeCounts {
                calls: 1_000,
                repeats: 2,
                cold_starts: 60,
            },
            startup: startup::StartupCounts { repeats: 2 },
            big_result_repeats: 1,
            search_repeats: 3,
            surfaces: surfaces::SurfaceCounts {
                tool_cli: 10,
                serve_calls: 1_600,
                callers: 16,
            },
            service_sessions: 20,
            service_load_sessions: 100,
            knowledge: knowledge::KnowledgePlan {
                chunk_counts: &[10_000],
                queries: 50,
                with_model: true,
            },
            instructions: instructions::InstructionCounts {
                fewer: 50,
                more: 250,
            },
        }
    }

    fn smoke() -> Self {
        Self {
            gate: gate_calls::GateCallCounts {
                sequential: 100,
                concurrent: 160,
                callers: 16,
                rounds: 1,
                warmup: 10,
                typescript: 50,
            },
            code: code_mode::CodeModeCounts {
                calls: 100,
                repeats: 1,
                cold_starts: 5,
            },
            startup: startup::StartupCounts { repeats: 1 },
            big_result_repeats: 1,
            search_repeats: 1,
            surfaces: surfaces::SurfaceCounts {
                tool_cli: 3,
                serve_calls: 160,
                callers: 16,
            },
            service_sessions: 4,
            service_load_sessions: 6,
            knowledge: knowledge::KnowledgePlan {
                chunk_counts: &[1_000],
                queries: 10,
                with_model: false,
            },
            instructions: instructions::InstructionCounts { fewer: 5, more: 25 },
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("warden-bench: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("warden-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let env = BenchEnv::discover()?;
    if let Some(kind) = &args.child {
        return match kind.as_str() {
            "big-result" => big_result::child(&env, big_result::Path::Gate)
                .await
                .map(|()| ExitCode::SUCCESS),
            "big-result-runtime" => big_result::child(&env, big_result::Path::Runtime)
                .await
                .map(|()| ExitCode::SUCCESS),
            "service" => {
                let home = args
                    .service_home
                    .as_deref()
                    .context("the service child needs --service-home")?;
                service::child(
                    home,
                    args.service_database.as_deref(),
                    args.service_instances,
                )
                .await
                .map(|()| ExitCode::SUCCESS)
            }
            other => {
                if let Some(path) = gate_calls::ConcurrentPath::from_kind(other) {
                    return gate_calls::concurrent_child(&env, path, args.calls)
                        .await
                        .map(|()| ExitCode::SUCCESS);
                }
                match instructions::Measured::from_kind(other) {
                    Some(measured) => instructions::child(&env, measured, args.calls)
                        .await
                        .map(|()| ExitCode::SUCCESS),
                    None => anyhow::bail!("unknown child measurement `{other}`"),
                }
            }
        };
    }
    let (plan, mode) = if args.smoke {
        (Plan::smoke(), "smoke")
    } else if args.quick {
        (Plan::quick(), "quick")
    } else {
        (Plan::full(), "full")
    };
    let mut report = Report {
        mode: mode.to_owned(),
        machine: env::machine(),
        ..Report::default()
    };
    let mut failed = Vec::new();
    let mut step = |name: &str, result: anyhow::Result<Vec<report::Row>>, started: Instant| {
        eprintln!(
            "warden-bench: {name} done in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        match result {
            Ok(rows) => report.extend(rows),
            Err(error) => {
                eprintln!("warden-bench: {name} failed: {error:#}");
                failed.push(name.to_owned());
            }
        }
    };

    let wanted =
        |section: &str| args.only.is_empty() || args.only.iter().any(|only| only == section);
    if wanted("discovery") {
        let started = Instant::now();
        step(
            "discovery",
            discovery::run(&env, plan.search_repeats),
            started,
        );
    }
    if wanted("gate") {
        let started = Instant::now();
        step(
            "gate calls",
            gate_calls::run(&env, plan.gate).await,
            started,
        );
    }
    if wanted("code-mode") {
        let started = Instant::now();
        step("code mode", code_mode::run(&env, plan.code).await, started);
    }
    if wanted("big-result") {
        let started = Instant::now();
        step(
            "20 MiB result",
            big_result::run(plan.big_result_repeats),
            started,
        );
    }
    if wanted("startup") {
        let started = Instant::now();
        step("start-up", startup::run(&env, plan.startup).await, started);
    }
    if wanted("surfaces") {
        let started = Instant::now();
        step(
            "tool CLI and serve",
            surfaces::run(&env, plan.surfaces).await,
            started,
        );
    }

    if wanted("knowledge") {
        let started = Instant::now();
        // Its embeddings endpoint runs its own runtime: measure on a plain thread.
        let measured = std::thread::scope(|scope| {
            scope
                .spawn(|| knowledge::run(&env, plan.knowledge))
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the knowledge measurement panicked")))
        });
        step("knowledge", measured, started);
    }
    if wanted("instructions") {
        let started = Instant::now();
        step(
            "instruction counts (valgrind)",
            instructions::run(&env, plan.instructions).await,
            started,
        );
    }
    if wanted("service") {
        let started = Instant::now();
        step(
            "service sessions",
            service::run(plan.service_sessions).await,
            started,
        );
        let started = Instant::now();
        step(
            "service load (PostgreSQL, 2 instances, beside SQLite)",
            service::run_load(plan.service_load_sessions).await,
            started,
        );
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        println!("warden-bench ({mode} run)\n");
        print!("{}", report.table());
        println!();
        for (key, value) in &report.machine {
            println!("{key}: {value}");
        }
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("warden-bench: failed: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}
