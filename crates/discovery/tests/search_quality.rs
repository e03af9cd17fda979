//! Search quality on the shared corpora (read at run time from `../shared/corpora`, or
//! `$WARDEN_SHARED/corpora`): the figures are printed; a regression floor at the measured level
//! is asserted; the issue-7 targets (GitHub hit@3 = 1, MRR ≥ 0.93; LiveMCPBench step
//! hit@5 ≥ 0.80) are asserted by an ignored test because the ranking does not reach them yet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use warden_discovery::{SearchQuality, quality_table};

fn measured() -> Vec<SearchQuality> {
    let corpora = support::corpora();
    assert_eq!(corpora.github.tools.len(), 117);
    assert_eq!(corpora.livemcpbench.tools.len(), 527);
    let rows = corpora.search_quality();
    println!("{}", quality_table(&rows));
    assert_eq!(rows[0].queries, 40);
    assert_eq!(rows[1].queries, 95);
    assert_eq!(rows[2].queries, 94);
    rows
}

#[test]
fn search_quality_does_not_regress() {
    let rows = measured();
    print_latency();
    let (github, step, task) = (&rows[0], &rows[1], &rows[2]);
    assert!(
        github.hit_at_3 >= 0.92,
        "GitHub hit@3 regressed: {github:?}"
    );
    assert!(github.mrr_at_10 >= 0.82, "GitHub MRR regressed: {github:?}");
    assert!(
        step.hit_at_5 >= 0.75,
        "LiveMCPBench step hit@5 regressed: {step:?}"
    );
    assert!(
        task.recall_at_10 >= 0.45,
        "LiveMCPBench task recall@10 regressed: {task:?}"
    );
}

#[test]
#[ignore = "issue-7 targets not reached yet (measured: GitHub hit@3 0.925, MRR 0.829; LiveMCPBench step hit@5 0.758)"]
fn search_quality_meets_the_issue_7_targets() {
    let rows = measured();
    let (github, step) = (&rows[0], &rows[1]);
    assert_eq!(github.hit_at_3, 1.0, "GitHub hit@3: {github:?}");
    assert!(github.mrr_at_10 >= 0.93, "GitHub MRR: {github:?}");
    assert!(step.hit_at_5 >= 0.80, "LiveMCPBench step hit@5: {step:?}");
}

/// Prints search latency at 527 tools (never asserted: timing depends on the machine).
fn print_latency() {
    let corpora = support::corpora();
    let index = corpora.livemcpbench.index();
    let mut latencies: Vec<Duration> = corpora
        .livemcpbench_step_queries
        .iter()
        .chain(&corpora.livemcpbench_task_queries)
        .map(|query| {
            let started = Instant::now();
            let hits = index.search(&query.query, 5);
            let elapsed = started.elapsed();
            assert!(hits.len() <= 5);
            elapsed
        })
        .collect();
    latencies.sort();
    println!(
        "search latency at {} tools ({} build): p50 {:?}, p95 {:?}",
        index.len(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 95 / 100]
    );
}

/// Grid search over the relevance weights (run by hand with `--release -- --ignored
/// --nocapture`): prints the best settings and checks the defaults are not clearly beaten.
#[test]
#[ignore = "slow tuning grid; run by hand in release"]
fn tune_weights() {
    let corpora = support::corpora();
    let mut results: Vec<(f64, String)> = Vec::new();
    for name in [2.0, 3.0] {
        for parameters in [0.0, 0.3] {
            for server in [0.3, 0.8] {
                for synonym in [0.35, 0.5] {
                    for name_coverage in [1.0, 2.0, 4.0] {
                        let weights = warden_discovery::SearchWeights {
                            name,
                            parameters,
                            server,
                            synonym,
                            name_coverage,
                            ..warden_discovery::SearchWeights::default()
                        };
                        let rows = corpora.search_quality_with(weights);
                        let objective = rows[0].hit_at_3 * 2.0
                            + rows[0].mrr_at_10
                            + rows[1].hit_at_5 * 2.0
                            + rows[1].mrr_at_10 * 0.5;
                        results.push((
                            objective,
                            format!(
                                "{weights:?} gh3={} ghmrr={} st5={} task_r10={}",
                                rows[0].hit_at_3,
                                rows[0].mrr_at_10,
                                rows[1].hit_at_5,
                                rows[2].recall_at_10
                            ),
                        ));
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (objective, line) in results.iter().take(10) {
        println!("{objective:.3} {line}");
    }
    let defaults = corpora.search_quality();
    let default_objective = defaults[0].hit_at_3 * 2.0
        + defaults[0].mrr_at_10
        + defaults[1].hit_at_5 * 2.0
        + defaults[1].mrr_at_10 * 0.5;
    assert!(
        default_objective >= results[0].0 - 0.05,
        "the default weights ({default_objective:.3}) are clearly beaten by {}",
        results[0].1
    );
}
